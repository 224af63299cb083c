"""Helpers shared by the benchmarks: machine description, timing, runtimes."""

from __future__ import annotations

import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from app.ingest import ingest_paths
from app.runtime import Runtime, open_runtime
from app.services import JobServices
from lore.models import SourceDocument
from lore.settings import Settings, load_settings


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    return {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "processor": platform.processor() or platform.machine(),
    }


def runtime_for(data_dir: Path, **sections: dict[str, Any]) -> Runtime:
    """A runtime on ``data_dir`` with some settings sections overridden."""
    base = load_settings(data_dir=data_dir)
    merged = base.model_dump()
    for name, values in sections.items():
        merged[name] = {**merged[name], **values}
    return open_runtime(Settings.model_validate(merged))


def percentiles(samples_ms: list[float]) -> dict[str, float]:
    """p50 / p95 / p99 / mean of latency samples in milliseconds."""
    ordered = sorted(samples_ms)

    def pct(p: float) -> float:
        index = min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))
        return round(ordered[index], 3)

    return {
        "p50_ms": pct(50),
        "p95_ms": pct(95),
        "p99_ms": pct(99),
        "mean_ms": round(statistics.fmean(ordered), 3),
        "n": len(ordered),
    }


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    """Run ``fn``; return its value and the seconds it took."""
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def read_documents(path: Path, limit: int) -> list[SourceDocument]:
    """The first ``limit`` records of a JSONL file with ``_id``, ``text`` and ``title``."""
    docs: list[SourceDocument] = []
    with path.open() as lines:
        for line in lines:
            record = json.loads(line)
            doc_id = str(record["_id"])
            docs.append(SourceDocument(doc_id, doc_id, record["text"], record.get("title", "")))
            if len(docs) == limit:
                break
    return docs


def ingest_once(services: JobServices, inputs: list[Path]) -> dict[str, Any] | None:
    """Ingest ``inputs`` unless the store already has chunks; the ingest figures, or None."""
    if services.store.counts()["chunks"]:
        return None
    report, seconds = timed(lambda: ingest_paths(services, inputs).report)
    return {"documents": len(report.done), "chunks": report.chunks, "s": round(seconds)}


@contextmanager
def report_writer(kind: str) -> Iterator[tuple[dict[str, dict[str, Any]], Callable[[], int]]]:
    """Settings sections for ``kind`` reports, and a count of the report calls made so far.

    ``extractive``: no LLM. ``llm``: community reports written by an LLM, the scripted
    OpenAI-compatible test server (``tests.openai_test_server``: real HTTP, deterministic
    replies) — what a report-writing model is asked for is counted, not its prose; the
    extraction stays offline, so the graph is the same with either writer.
    """
    if kind == "extractive":
        yield {"graph": {"extractor": "offline", "reports": "extractive"}}, lambda: 0
        return
    from tests.openai_test_server import OpenAITestServer

    with OpenAITestServer() as server:
        sections = {
            "graph": {"extractor": "offline", "reports": "llm"},
            "llm": {"base_url": server.base_url, "model": "test-model"},
        }
        yield sections, lambda: server.chat_calls


def lore_command() -> list[str]:
    """The ``lore`` executable beside this Python (else the one on ``PATH``)."""
    exe = Path(sys.executable).parent / "lore"
    return [str(exe)] if exe.exists() else [shutil.which("lore") or "lore"]


def fresh_first_answer(data_dir: Path, question: str, mode: str) -> float:
    """Wall seconds of ``lore ask --mode MODE`` in a new process (model load included)."""
    return fresh_answer_times(data_dir, question, mode)[1]


def fresh_answer_times(data_dir: Path, question: str, mode: str) -> tuple[float, float]:
    """Seconds until a new ``lore ask --mode MODE`` process prints its answer, and exits.

    The two differ by what the process does after answering (writing the global view's
    snapshot, closing its stores).
    """
    command = [*lore_command(), "--data-dir", str(data_dir), "ask", "--mode", mode, question]
    start = time.perf_counter()
    with subprocess.Popen(
        [*command, "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as process:
        assert process.stdout is not None
        first = process.stdout.read(1)  # the answer's JSON is printed in one piece
        answered = time.perf_counter() - start
        rest, errors = process.communicate()  # both streams, so neither pipe fills
        if process.returncode != 0:  # what it said is kept, as subprocess.run(check=True)
            raise subprocess.CalledProcessError(process.returncode, command, first + rest, errors)
    return round(answered, 2), round(time.perf_counter() - start, 2)
