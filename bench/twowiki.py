"""Multi-hop retrieval on 2WikiMultihopQA (101 questions, full 6,119-passage corpus).

    python -m bench.twowiki --data ../shared/data/twowiki [--work DIR] [--graph-weight 1.0]
        [--reuse-graph]

Ingests the passages (reused from ``--work``), builds the knowledge graph with the offline
extractor (``--reuse-graph``: the graph already in ``--work``, when it has communities),
then ranks passages for each question. Prints ``{"queries", "methods": {NAME:
{"all_gold@8", "recall@8", "mean_ms"}}, ...}``: all_gold@8 is the share of questions whose
every gold passage is among the top 8 distinct passages; mean_ms is the mean time of one
query (after one untimed warm-up query per method, which builds any lazy cache).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from app.ingest import ingest
from app.refresh import refresh_in_process
from bench.common import machine, runtime_for, timed
from ingest.loaders import load_paths
from retrieval.contract import QueryRequest

DEPTH = 8


def main(argv: list[str] | None = None) -> None:
    """Run and print JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--work", type=Path, default=Path("/tmp/lore-bench-twowiki"))
    parser.add_argument("--graph-weight", default="1.0", help="comma list to sweep")
    parser.add_argument("--reuse-graph", action="store_true", help="skip the graph build")
    args = parser.parse_args(argv)
    runtime = runtime_for(args.work)
    out: dict[str, Any] = {
        "dataset": "2wikimultihopqa (101 q, 6,119 passages)",
        "machine": machine(),
        "methods": {},
    }
    if runtime.store.counts()["chunks"] == 0:
        items = load_paths(
            [args.data / "corpus.jsonl"], include=["*.jsonl"], exclude=[], max_bytes=1_000_000
        )
        report, seconds = timed(lambda: ingest(runtime.job_services(), items).report)
        out["ingest"] = {
            "documents": len(report.done),
            "chunks": report.chunks,
            "seconds": round(seconds, 1),
        }
    if args.reuse_graph and runtime.graph().counts()["communities"]:
        out["graph_build"] = {"reused": True, **runtime.graph().counts()}
    else:
        (graph_report, refreshed), seconds = timed(
            lambda: refresh_in_process(runtime.graph_services(), rebuild=False)
        )
        communities = refreshed.communities
        out["communities"] = communities
        out["graph_build"] = {
            "seconds": round(seconds, 1),
            **runtime.graph().counts(),
            "extracted_now": graph_report.extracted,
        }
    queries = {
        str(q["_id"]): str(q["text"])
        for q in map(json.loads, (args.data / "queries_101.jsonl").read_text().splitlines())
    }
    gold: dict[str, set[str]] = {}
    for line in (args.data / "qrels_101.tsv").read_text().splitlines()[1:]:
        qid, doc, _ = line.split("\t")
        gold.setdefault(qid, set()).add(doc)
    methods: dict[str, dict[str, Any]] = {
        "sparse": {"hybrid_params": {"dense_weight": 0}},
        "dense": {"hybrid_params": {"sparse_weight": 0}},
        "hybrid_rrf": {},
    }
    for weight in args.graph_weight.split(","):
        methods[f"hybrid_graph@{weight}"] = {"graph_weight": float(weight)}
    searcher = runtime.searcher()
    for name, fields in methods.items():
        all_gold = recall = seconds = 0.0
        for i, (qid, wanted) in enumerate([("", set()), *gold.items()]):
            request = QueryRequest.model_validate(
                {"search_text": queries.get(qid, "warm-up"), "top_k": 40, **fields}
            )
            start = time.perf_counter()
            results = searcher.search_sync(request).results
            seconds += (time.perf_counter() - start) if i else 0.0
            docs = list(dict.fromkeys(r.document_id for r in results))
            top = set(docs[:DEPTH])
            all_gold += bool(wanted) and wanted <= top
            recall += len(wanted & top) / len(wanted) if wanted else 0.0
        out["methods"][name] = {
            "all_gold@8": round(all_gold / len(gold), 3),
            "recall@8": round(recall / len(gold), 3),
            "mean_ms": round(1000 * seconds / len(gold), 1),
        }
    out["queries"] = len(gold)
    runtime.close()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
