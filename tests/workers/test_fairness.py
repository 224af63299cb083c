"""Issue 30: no read waits behind a write — tenant B's list stays fast while A ingests.

A real ``lore serve`` (auth on, two keys); tenant A sends 7 concurrent large ingests with
``wait``; tenant B's ``GET /v1/documents?limit=1`` p95 must stay within 100 ms (of its idle p95)
the whole time, in-process (the ingest pool) and with a broker (a real Celery worker). The scenario
is bench/fairness.py's; the issue's figure before the change was 32 s.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.fairness import measure
from tests.conftest import ROOT
from tests.workers.conftest import REDIS_URL, redis_up

ALL_QUEUED = {"LORE_API__TENANT_MAX_JOBS": "8"}  # all 7 run: the hardest case for B


def _check(result: dict[str, object]) -> None:
    """B's p95 while A writes is within 100 ms of B's p95 with no writes at all.

    On a quiet machine B's idle p95 is a few ms, so this is the issue's 100 ms; on a
    loaded shared one (load 39 on 2 cores, idle p95 136 ms) the machine's own noise
    is not charged to the writes. The old code failed it (p95 229 ms, idle 55 ms).
    """
    busy, idle = result["b_while_a_writes"], result["b_idle"]
    assert isinstance(busy, dict) and isinstance(idle, dict) and busy["n"] >= 20, result
    assert busy["p95_ms"] <= 100 + idle["p95_ms"], result


def test_b_reads_fast_while_a_writes_in_process(tmp_path: Path) -> None:
    result = measure(ROOT, tmp_path / "data", writes=7, words=4000, env=ALL_QUEUED)
    assert result["a_statuses"] == {"200": 7} or "202" in result["a_statuses"], result
    _check(result)


def test_b_reads_fast_while_a_writes_with_a_broker(tmp_path: Path) -> None:
    if not redis_up(REDIS_URL):
        pytest.skip(f"no Redis at {REDIS_URL} (.ci/run starts one)")
    result = measure(
        ROOT, tmp_path / "data", writes=7, words=4000, broker=REDIS_URL, env=ALL_QUEUED
    )
    _check(result)


def test_past_the_share_a_tenant_gets_429(tmp_path: Path) -> None:
    result = measure(ROOT, tmp_path / "data", writes=4, words=2000)  # 2 jobs per namespace
    assert result["a_statuses"].get("429", 0) >= 1, result
