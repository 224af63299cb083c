"""Context tokens of offline global search against stuffing the top-50 chunks.

    python -m bench.global_tokens --data ../shared/data/graphrag_global/podcast [--work DIR]
        [--questions 10] [--budget 8000]

Ingests the podcast transcripts (1,669 pre-chunked files; reused from ``--work``), builds
the offline graph, then for the first N of the 125 global questions (every 12th, so the
sample spreads over the list) runs ``ask(mode="global")`` and, for the same question,
local search for the top 50 chunks. Tokens are the embedding model's word pieces.
Prints ``{"questions": [...], "summary": {...}}``; ``stuffing_files`` counts the
distinct source files (the dataset's own 600-token chunks) behind those 50 chunks.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
from functools import partial
from pathlib import Path
from typing import Any

from app.refresh import refresh_in_process
from bench.common import ingest_once, machine, runtime_for, timed
from retrieval.ask_contract import AskRequest
from retrieval.contract import QueryRequest

STUFFED = 50


def main(argv: list[str] | None = None) -> None:
    """Run and print JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="the podcast directory")
    parser.add_argument("--work", type=Path, default=Path("/tmp/lore-bench-podcast"))
    parser.add_argument("--questions", type=int, default=10)
    parser.add_argument("--budget", type=int, default=None, help="ask budget (settings: 8000)")
    args = parser.parse_args(argv)
    runtime = runtime_for(args.work)
    out: dict[str, Any] = {"dataset": "graphrag podcast (1,669 files)", "machine": machine()}
    ingested = ingest_once(runtime.job_services(), [args.data / "input"])
    if ingested is not None:
        out["ingest"] = ingested
    (_, refreshed), seconds = timed(
        lambda: refresh_in_process(runtime.graph_services(), rebuild=False)
    )
    communities = refreshed.communities
    out["graph"] = {"communities": communities, "s": round(seconds, 1), **runtime.graph().counts()}
    out["store"] = runtime.store.counts()
    with (args.data / "questions_global_125.csv").open(encoding="utf-8-sig") as handle:
        questions = [row["question_text"] for row in csv.DictReader(handle)]
    step = max(1, len(questions) // args.questions)
    sample = questions[::step][: args.questions]
    counter = runtime.counter()
    rows = []
    for question in sample:
        request = AskRequest(question=question, mode="global", budget=args.budget)
        answer, seconds = timed(partial(runtime.queries().ask_sync, request))
        hits = (
            runtime.queries().query_sync(QueryRequest(search_text=question, top_k=STUFFED)).results
        )
        stuffed = sum(counter.count(h.text) for h in hits)
        files = {h.source for h in hits}
        file_tokens = sum(counter.count(Path(f).read_text(encoding="utf-8")) for f in files)
        rows.append(
            {
                "question": question,
                "mode": answer.mode,
                "cited": len(answer.citations) > 0 and all(c.sources for c in answer.citations),
                "citations": len(answer.citations),
                "level": answer.details.level,
                "reports_mapped": answer.details.reports_mapped,
                "map_tokens": answer.details.map_tokens,
                "reduce_tokens": answer.details.reduce_tokens,
                "context_tokens": answer.context_tokens,
                "stuffing_top50_chunks": stuffed,
                "stuffing_files": len(files),
                "stuffing_files_tokens": file_tokens,
                "saving_vs_chunks": round(1 - answer.context_tokens / stuffed, 3),
                "s": round(seconds, 2),
            }
        )
    out["questions"] = rows
    out["summary"] = {
        "n": len(rows),
        "cited_answers": sum(r["cited"] for r in rows),
        "mean_context_tokens": round(statistics.fmean(r["context_tokens"] for r in rows)),
        "mean_stuffing_top50_chunks": round(
            statistics.fmean(r["stuffing_top50_chunks"] for r in rows)
        ),
        "mean_stuffing_files_tokens": round(
            statistics.fmean(r["stuffing_files_tokens"] for r in rows)
        ),
        "mean_saving_vs_chunks": round(statistics.fmean(r["saving_vs_chunks"] for r in rows), 3),
        "mean_saving_vs_files": round(
            statistics.fmean(1 - r["context_tokens"] / r["stuffing_files_tokens"] for r in rows), 3
        ),
    }
    runtime.close()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
