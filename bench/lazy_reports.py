"""What lazy LLM reports cost against eager ones, counted on the local OpenAI test server.

    python -m bench.lazy_reports --data ../shared/data/graphrag_global/podcast
        [--work DIR] [--questions 10]

One ingest (offline extraction), copied into two data directories. **Eager**
(``graph.reports = llm``): the graph build asks the model for every community's report.
**Lazy** (``graph.reports = lazy``): the build writes extractive reports and asks
nothing; each global question has the model rewrite the reports it reads that are still
lazy. Both then answer the same N global questions (the answer writer and map step stay
offline, so every call counted is a report). Prints calls and tokens per variant — the
test server's own count next to the client's — and lazy's cumulative calls after each
question. The test server answers instantly, so only counts compare, not seconds.
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

from app.refresh import refresh_in_process
from bench.common import ingest_once, machine, runtime_for, timed
from graph.lazy_reports import LazyReportUpgrader
from retrieval.ask_contract import AskRequest
from tests.openai_test_server import OpenAITestServer


def copy_store(source: Path, target: Path) -> None:
    """A fresh data directory holding a copy of ``source``'s store."""
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    with (
        sqlite3.connect(source / "lore.sqlite3") as src,
        sqlite3.connect(target / "lore.sqlite3") as dst,
    ):
        src.backup(dst)


def variant(
    work: Path, base_url: str, reports: str, questions: list[str], server: OpenAITestServer
) -> dict[str, Any]:
    """Build the graph with ``reports`` and answer the questions; what the model was asked."""
    llm = {"base_url": base_url, "model": "test-model", "backoff_s": 0.01, "cache": False}
    runtime = runtime_for(
        work, llm=llm, graph={"extractor": "offline", "reports": reports}, ask={"llm": "off"}
    )
    calls_before = server.chat_calls
    (built, refreshed), build_s = timed(
        lambda: refresh_in_process(runtime.graph_services(), rebuild=False)
    )
    communities = refreshed.communities
    out: dict[str, Any] = {
        "communities": communities,
        "build_calls": server.chat_calls - calls_before,
        "build_llm": built.llm.as_dict(),
        "build_s": round(build_s, 1),
    }
    cumulative = []
    for question in questions:
        runtime.queries().ask_sync(AskRequest(question=question, mode="global"))
        cumulative.append(server.chat_calls - calls_before)
    upgrade = runtime.asker().global_searcher.upgrade
    if isinstance(upgrade, LazyReportUpgrader):
        out["question_llm"] = upgrade.stats.as_dict()
    methods: dict[str, int] = {}
    for report in runtime.graph().reports():
        methods[report.method] = methods.get(report.method, 0) + 1
    runtime.close()
    out["calls_after_each_question"] = cumulative
    out["total_calls"] = cumulative[-1] if cumulative else out["build_calls"]
    out["reports_by_method"] = methods
    return out


def main(argv: list[str] | None = None) -> None:
    """Run both variants and print JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="the podcast directory")
    parser.add_argument("--work", type=Path, default=Path("/tmp/lore-bench-lazy"))
    parser.add_argument("--questions", type=int, default=10)
    args = parser.parse_args(argv)
    base = args.work / "base"
    out: dict[str, Any] = {"dataset": str(args.data), "machine": machine()}
    runtime = runtime_for(base, graph={"extractor": "offline"})
    ingested = ingest_once(runtime.job_services(), [args.data / "input"])
    runtime.close()
    if ingested is not None:
        out["ingest"] = ingested
    with (args.data / "questions_global_125.csv").open(encoding="utf-8-sig") as handle:
        every = [row["question_text"] for row in csv.DictReader(handle)]
    step = max(1, len(every) // args.questions)
    questions = every[::step][: args.questions]
    with OpenAITestServer() as server:
        for name in ("llm", "lazy"):
            copy_store(base, args.work / name)
            out[name] = variant(args.work / name, server.base_url, name, questions, server)
    eager, lazy = out["llm"]["total_calls"], out["lazy"]["total_calls"]
    out["lazy_over_eager_calls"] = round(lazy / eager, 3) if eager else None
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
