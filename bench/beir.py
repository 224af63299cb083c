"""Retrieval quality on a BEIR folder (corpus.jsonl, queries.jsonl, qrels/test.tsv).

    python -m bench.beir --data ../shared/data/scifact [--work DIR] [--fresh]

Ingests the corpus through the real loader and pipeline (reused from ``--work`` when
already there), then runs every query through the same search path as the CLI with each
method's parameters. Documents are scored by their best chunk. Prints JSON:
``{"dataset", "queries", "methods": {NAME: {"ndcg@10", "recall@100"}}, ...}``.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.ingest import ingest
from bench.common import machine, runtime_for, timed
from ingest.loaders import load_paths
from retrieval.contract import QueryRequest
from retrieval.hybrid import HybridSearcher

DOC_DEPTH = 100
CHUNK_DEPTH = 300
SPARSE = {"preset": "sparse"}

# name -> (settings sections, request fields): the search presets (retrieval.presets),
# and the sparse engine's variants, which are settings of the index, not of a request
METHODS: dict[str, tuple[dict[str, dict[str, Any]], dict[str, Any]]] = {
    "sparse": ({}, SPARSE),
    "sparse_rank_bm25": ({"sparse": {"engine": "rank_bm25"}}, SPARSE),
    "sparse_no_stemming": ({"sparse": {"stemming": False}}, SPARSE),
    "sparse_no_stopwords": ({"sparse": {"stopwords": False}}, SPARSE),
    "dense": ({}, {"preset": "dense"}),
    "hybrid_rrf": ({}, {"preset": "hybrid_rrf"}),
    "hybrid_weighted": ({}, {"hybrid_params": {"dense_weight": 0.6, "sparse_weight": 0.4}}),
    "relative_score": ({}, {"preset": "relative_score"}),
    "tfidf": ({"sparse": {"engine": "tfidf"}}, SPARSE),
    "hybrid_mmr": ({}, {"preset": "mmr"}),
    # dense pseudo-relevance feedback (retrieval.feedback), off by default: see docs/quality.md
    "hybrid_feedback": ({}, {"hybrid_params": {"feedback_boost": 1.0}}),
}


def load_qrels(path: Path) -> dict[str, dict[str, int]]:
    """Query id -> {doc id: grade} from a BEIR qrels TSV with a header line."""
    qrels: dict[str, dict[str, int]] = {}
    for line in path.read_text(encoding="utf-8").splitlines()[1:]:
        qid, did, grade = line.split("\t")
        if int(grade) > 0:
            qrels.setdefault(qid, {})[did] = int(grade)
    return qrels


def ndcg_at(ranked: list[str], relevant: dict[str, int], k: int) -> float:
    """nDCG@k with graded gains (2^g - 1) and log2 discounts."""
    dcg = sum((2 ** relevant.get(d, 0) - 1) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal = sorted(relevant.values(), reverse=True)[:k]
    idcg = sum((2**g - 1) / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def recall_at(ranked: list[str], relevant: dict[str, int], k: int) -> float:
    """Share of relevant documents found in the top k."""
    return len(set(ranked[:k]) & set(relevant)) / len(relevant) if relevant else 0.0


def evaluate(
    searcher: HybridSearcher,
    queries: dict[str, str],
    qrels: dict[str, dict[str, int]],
    fields: dict[str, Any],
) -> dict[str, float]:
    """Mean nDCG@10 and recall@100 of one method."""
    ndcg, recall = [], []
    for qid, relevant in qrels.items():
        request = QueryRequest.model_validate(
            {"search_text": queries[qid], "top_k": CHUNK_DEPTH, **fields}
        )
        response = searcher.search_sync(request)
        docs = list(dict.fromkeys(hit.document_id for hit in response.results))[:DOC_DEPTH]
        ndcg.append(ndcg_at(docs, relevant, 10))
        recall.append(recall_at(docs, relevant, DOC_DEPTH))
    return {
        "ndcg@10": round(sum(ndcg) / len(ndcg), 4),
        "recall@100": round(sum(recall) / len(recall), 4),
    }


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark and print JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--work", type=Path, default=None, help="data dir to build or reuse")
    parser.add_argument("--fresh", action="store_true", help="rebuild the data dir")
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--mmr-sweep", default="", help="extra diversities, e.g. 0.1,0.3,0.5")
    args = parser.parse_args(argv)
    work: Path = args.work or Path("/tmp") / f"lore-bench-{args.data.resolve().name}"
    if args.fresh and work.exists():
        shutil.rmtree(work)

    queries = {
        str(rec["_id"]): str(rec["text"])
        for rec in map(json.loads, (args.data / "queries.jsonl").read_text().splitlines())
    }
    qrels = {q: r for q, r in load_qrels(args.data / "qrels" / "test.tsv").items() if q in queries}

    out: dict[str, Any] = {
        "dataset": args.data.resolve().name,
        "queries": len(qrels),
        "machine": machine(),
        "work_dir": str(work),
        "methods": {},
    }
    base = runtime_for(work)
    if base.store.counts()["chunks"] == 0:
        items = load_paths(
            [args.data / "corpus.jsonl"],
            include=["*.jsonl"],
            exclude=[],
            max_bytes=base.settings.ingest.max_document_bytes,
        )
        report, seconds = timed(
            lambda: ingest(base.job_services(), items, extract_graph=False).report
        )
        out["ingest"] = {
            "documents": len(report.done),
            "failed": len(report.failed),
            "chunks": report.chunks,
            "seconds": round(seconds, 1),
        }
    index_times: dict[str, float] = {}
    _, index_times["tantivy+hnswlib"] = timed(base.indexes.catch_up)
    base.close()

    methods = dict(METHODS)
    for value in filter(None, args.mmr_sweep.split(",")):
        methods[f"hybrid_mmr@{value}"] = ({}, {"diversity": float(value)})
    names = args.methods.split(",") + [n for n in methods if n.startswith("hybrid_mmr@")]
    for name in names:
        sections, fields = methods[name]
        runtime = runtime_for(work, **sections)
        build: Callable[[], Any] = runtime.indexes.catch_up
        _, seconds = timed(build)
        if sections:
            index_times[name] = seconds
        out["methods"][name] = evaluate(runtime.searcher(), queries, qrels, fields)
        runtime.close()
    out["index_seconds"] = {k: round(v, 2) for k, v in index_times.items()}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
