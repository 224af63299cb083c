"""Which dense score ranks community reports best? Gold passages covered by the top reports.

    python -m bench.report_ranking --data ../shared/data/twowiki --work DIR [--others 800]

Reads a store ``bench.twowiki`` built (``--work``, graph included) and, for its 101
questions with gold passages, ranks the reports of the deepest level view — the view
global search reads — the way :func:`retrieval.report_ranking.rank_reports` does (BM25 over
report texts fused with a dense order), with three dense scores side by side:

- ``whole_text``: one vector of the whole report text (title, summary, findings);
- ``mean_title_statements``: the unit mean of the title's and the statements' vectors;
- ``best_statement``: the report's statement closest to the question (what global
  search uses).

The reports ranked are every report of the view holding a gold passage plus ``--others``
drawn at random (seed 0; embedding all ~7k whole texts costs many minutes on 2 cores).
Prints JSON: per variant the share of each question's gold passages found in the chunks
of the top 10 and top 25 reports, and the MRR of the first report holding one; also the
seconds spent embedding each kind of text.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import machine, runtime_for
from graph.models import CommunityReport
from lore.embedders import Matrix
from retrieval.global_search import level_views
from retrieval.keypoints import report_text
from retrieval.report_ranking import ReportBM25, rank_reports
from retrieval.report_vectors import statements


def unit_rows(matrix: Matrix) -> Matrix:
    """Rows scaled to unit length."""
    norms = np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-9)
    return np.asarray(matrix / norms, dtype=np.float32)


def main(argv: list[str] | None = None) -> None:
    """Run and print JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--others", type=int, default=800)
    args = parser.parse_args(argv)
    runtime = runtime_for(args.work)
    graph = runtime.graph()
    views = level_views(graph.reports(), graph.communities())
    view = views[max(views)]
    lines = (args.data / "queries_101.jsonl").read_text().splitlines()
    queries = {str(q["_id"]): str(q["text"]) for q in map(json.loads, lines)}
    gold: dict[str, set[str]] = {}
    for line in (args.data / "qrels_101.tsv").read_text().splitlines()[1:]:
        qid, doc, _ = line.split("\t")
        gold.setdefault(qid, set()).add(doc)
    owner = {chunk: doc for _, chunk, doc in runtime.store.chunk_refs()}

    def documents(report: CommunityReport) -> set[str]:
        return {owner[c] for c in report.chunk_ids if c in owner}

    wanted = set().union(*gold.values())
    relevant = [r for r in view if documents(r) & wanted]
    rest = [r for r in view if not documents(r) & wanted]
    ranked_view = relevant + random.Random(0).sample(rest, min(len(rest), args.others))
    embedder = runtime.embedder
    seconds: dict[str, float] = {}

    def embed(kind: str, texts: list[str]) -> Matrix:
        start = time.perf_counter()
        out = embedder.embed_documents(texts)
        seconds[kind] = round(time.perf_counter() - start, 1)
        return out

    whole = embed("whole_texts", [report_text(r) for r in ranked_view])
    said = sorted({t for r in ranked_view for t in statements(r)})
    by_text = dict(zip(said, embed("statements", said), strict=True))
    titles = embed("titles", [r.title for r in ranked_view])
    mean = unit_rows(
        np.stack(
            [
                np.mean([titles[i], *(by_text[t] for t in statements(r))], axis=0)
                for i, r in enumerate(ranked_view)
            ]
        )
    )
    bm25 = ReportBM25(runtime.analyzer, [report_text(r) for r in ranked_view])
    out: dict[str, Any] = {
        "dataset": "2wikimultihopqa (101 q), deepest level view of the offline graph",
        "machine": machine(),
        "reports_in_view": len(view),
        "reports_ranked": len(ranked_view),
        "relevant_reports": len(relevant),
        "embed_seconds": seconds,
        "texts": {"whole": len(ranked_view), "statements": len(said)},
        "variants": {},
    }
    dense: dict[str, Callable[[Matrix], Matrix]] = {
        "whole_text": lambda _: whole,
        "mean_title_statements": lambda _: mean,
        "best_statement": lambda q: np.stack([best(r, by_text, q) for r in ranked_view]),
    }
    for name, matrix_for in dense.items():
        out["variants"][name] = evaluate(
            ranked_view,
            gold,
            queries,
            embedder.embed_query,
            bm25,
            matrix_for,
            documents,
        )
    runtime.close()
    print(json.dumps(out, indent=2))


def evaluate(
    view: list[CommunityReport],
    gold: dict[str, set[str]],
    queries: dict[str, str],
    embed_query: Callable[[str], Matrix],
    bm25: ReportBM25,
    matrix_for: Callable[[Matrix], Matrix],
    documents: Callable[[CommunityReport], set[str]],
) -> dict[str, float]:
    """Gold passages covered by the top 10 / 25 reports, and the MRR of the first hit."""
    covered = {10: 0.0, 25: 0.0}
    mrr = 0.0
    for qid, gold_docs in gold.items():
        query = embed_query(queries[qid])
        ranked = rank_reports(bm25, matrix_for(query), query, queries[qid])
        order = [view[i] for i, _ in ranked]
        for depth in covered:
            seen: set[str] = set().union(*(documents(r) for r in order[:depth]))
            covered[depth] += len(gold_docs & seen) / len(gold_docs)
        first = next((i for i, r in enumerate(order) if documents(r) & gold_docs), None)
        mrr += 0.0 if first is None else 1.0 / (first + 1)
    return {
        **{f"gold_covered@{d}": round(v / len(gold), 3) for d, v in covered.items()},
        "mrr": round(mrr / len(gold), 3),
    }


def best(report: CommunityReport, by_text: dict[str, Matrix], query: Matrix) -> Matrix:
    """The vector of the report's statement closest to the query (zeros: none)."""
    rows = [by_text[t] for t in statements(report)]
    if not rows:
        return np.zeros(query.shape[0], dtype=np.float32)
    return max(rows, key=lambda v: float(v @ query))


if __name__ == "__main__":
    main()
