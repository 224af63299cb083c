"""Issue 26: the inline run, the Celery chain and ``graph build`` walk one list of steps.

``lore.flow.STEPS`` is the list (load, store, extract, forget, cluster, summarise,
embed_reports, sync_indexes). Each path records the steps it entered in its job
(``detail.steps``) or its build report; here each is driven exactly as a user drives it,
through ``lore``, and must have walked its part of the list, in the list's order.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lore.flow import BUILD, INGEST, STEPS, in_order
from tests.e2e.test_graph_lifecycle import lore, ok
from tests.workers.conftest import short_docs


def _docs(home: Path) -> None:
    (home / "docs").mkdir()
    for doc_id, text in short_docs("st", 4):
        (home / doc_id.replace("st/", "docs/")).write_text(text)


def _steps_of(home: Path, data: Path, job_id: str, **env: str) -> list[str]:
    job: dict[str, Any] = json.loads(ok(lore(home, data, "jobs", job_id, "--json", **env)))
    steps: list[str] = job["detail"]["steps"]
    return steps


def test_the_list_is_in_order_and_each_path_walks_a_part_of_it() -> None:
    assert in_order([str(s) for s in STEPS])
    assert in_order([str(s) for s in INGEST]) and in_order([str(s) for s in BUILD])
    assert not in_order(["extract", "store"]) and not in_order(["store", "store"])
    assert set(INGEST) | set(BUILD) == set(STEPS)


def test_an_inline_ingest_and_graph_build_walk_the_list(tmp_path: Path) -> None:
    home, data = tmp_path, tmp_path / "data"
    _docs(home)
    ingested = json.loads(ok(lore(home, data, "ingest", "docs", "--json")))
    assert _steps_of(home, data, ingested["job_id"]) == [str(s) for s in INGEST]
    built = json.loads(ok(lore(home, data, "graph", "build", "--json")))
    assert built["steps"] == [str(s) for s in BUILD], built
    (home / "docs" / "doc-0001.md").write_text("The ledger raises E_ST_9999 now.")
    ok(lore(home, data, "ingest", "docs"))
    refreshed = json.loads(ok(lore(home, data, "graph", "refresh", "--json")))
    assert _steps_of(home, data, refreshed["job_id"]) == [str(s) for s in BUILD]


@pytest.mark.workers
def test_the_celery_chain_walks_the_same_list(one_worker: tuple[Path, dict[str, str]]) -> None:
    home, env = one_worker
    data = home / "data"
    _docs(home)
    ingested = json.loads(ok(lore(home, data, "ingest", "docs", "--wait", "--json", **env)))
    assert ingested["state"] == "done", ingested
    assert _steps_of(home, data, ingested["job_id"], **env) == [str(s) for s in INGEST]
    refreshed = json.loads(ok(lore(home, data, "graph", "refresh", "--json", **env)))
    assert refreshed["state"] == "done", refreshed
    assert refreshed["steps"] == [str(s) for s in BUILD], refreshed
    log = "\n".join(p.read_text() for p in home.glob("w-*.log"))
    assert "lore.refresh_stale" in log and "lore.store_level" in log  # the worker ran them
