"""How many community summaries a small edit costs.

``python -m bench.refresh`` (the demo corpus) or
``python -m bench.refresh --data ../shared/data/ops_runbooks --docs 400 [--reports llm]``

Ingests the corpus, builds the graph, communities and every report, then edits 1% of
the documents (rounded up; each gets one appended sentence naming a new identifier and
an existing service), ingests them again and refreshes. Prints JSON with
{"communities", "stale", "refreshed", "recovered", "unchanged", "llm_calls"} and the
share of communities re-summarised (``refreshed``: words new; ``recovered``: stored again
with the same words, only their chunk ids and importance moved). ``--reports llm`` has
an LLM write the reports (the scripted test server, ``bench.common.report_writer``) and
counts its calls (``report_calls``).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.ingest import ingest
from app.jobs import JobStore
from app.refresh import refresh_inline
from bench.common import machine, report_writer, runtime_for
from bench.pipeline import load_corpus
from ingest.loaders import load_paths
from lore.models import SourceDocument
from lore.settings import IngestSettings

ROOT = Path(__file__).resolve().parents[1]


def demo_corpus() -> list[SourceDocument]:
    """The demo corpus, loaded as ``make demo`` does (ids ``production/…``, ``staging/…``)."""
    docs = []
    for env in ("production", "staging"):
        for item in load_paths(
            [ROOT / "examples" / "corpus" / env],
            include=IngestSettings().include,
            exclude=IngestSettings().exclude,
            max_bytes=10**7,
            extra_metadata={"env": env},
        ):
            if isinstance(item, SourceDocument):
                docs.append(item)
    return docs


def edit(doc: SourceDocument, number: int) -> SourceDocument:
    """The document with one sentence appended (a new identifier, a known service)."""
    sentence = (
        f"\n\nUpdate: since the last incident E_BENCH_EDIT_{number} pages the payments-api "
        "on-call before the alert fires.\n"
    )
    return SourceDocument(doc.id, doc.source, doc.text + sentence, doc.title, doc.metadata)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", type=Path, default=None, help="corpus.jsonl/docs.jsonl dir")
    parser.add_argument("--docs", type=int, default=400)
    parser.add_argument("--share", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--reports",
        choices=("extractive", "llm"),
        default="extractive",
        help="who writes the reports (llm: the scripted test server; calls are counted)",
    )
    args = parser.parse_args()
    docs = demo_corpus() if args.data is None else load_corpus(args.data, args.docs)
    scratch = Path(tempfile.mkdtemp(prefix="lore-bench-refresh-"))
    with report_writer(args.reports) as (sections, calls):
        out = _run(scratch, docs, args.share, args.seed, sections, calls)
    print(
        json.dumps(
            {
                "machine": machine(),
                "dataset": "examples/corpus" if args.data is None else str(args.data),
                "report_writer": args.reports,
                **out,
            },
            indent=2,
        )
    )


def _run(
    scratch: Path,
    docs: list[SourceDocument],
    share: float,
    seed: int,
    sections: dict[str, dict[str, Any]],
    calls: Callable[[], int],
) -> dict[str, Any]:
    try:
        runtime = runtime_for(scratch / "data", **sections)
        jobs = JobStore(scratch / "data" / "lore.sqlite3")
        start = time.perf_counter()
        ingest(runtime.job_services(), docs, extract_graph=False)
        ingest_s = time.perf_counter() - start
        built = refresh_inline(runtime.graph_services(), jobs, rebuild=True)
        initial_calls = calls()
        edited = random.Random(seed).sample(docs, math.ceil(len(docs) * share))
        ingest(
            runtime.job_services(),
            [edit(doc, i) for i, doc in enumerate(edited)],
            extract_graph=False,
        )
        start = time.perf_counter()
        before_calls = calls()
        result = refresh_inline(runtime.graph_services(), jobs)
        refresh_s = time.perf_counter() - start
        refresh_calls = calls() - before_calls
        jobs.close()
        runtime.close()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    keys = ("communities", "stale", "refreshed", "recovered", "unchanged", "llm_calls")
    return {
        "documents": len(docs),
        "edited": len(edited),
        "initial_reports": built["refreshed"],
        "initial_report_calls": initial_calls,
        **{k: result[k] for k in keys},
        "refreshed_share": round(result["refreshed"] / max(1, result["communities"]), 4),
        "report_calls": refresh_calls,
        "report_calls_share": round(refresh_calls / max(1, result["communities"]), 4),
        "ingest_s": round(ingest_s, 1),
        "refresh_s": round(refresh_s, 2),
    }


if __name__ == "__main__":
    main()
