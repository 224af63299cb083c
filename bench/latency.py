"""Query latency at N chunks, end to end through the CLI's code path.

    python -m bench.latency --chunks 100000 [--base /tmp/lore-bench-scifact]
                            [--queries ../shared/data/scifact/queries.jsonl]

The corpus is replicated from a data dir built by ``bench.beir`` (its real chunk texts and
embeddings; each replica's vector gets small noise so the HNSW graph is not degenerate),
or synthetic Zipf text with random vectors when there is no base. Queries go through
``QueryService.query_sync`` — filter resolution, the real query embedding (dense and hybrid),
both engines, fusion and the store fetch — exactly what ``lore search`` runs. Prints
``{"chunks", "sparse", "dense", "hybrid", ...}`` with p50/p95/p99 in ms.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import machine, percentiles, runtime_for, timed
from lore.embedders import Embedder
from lore.models import SourceDocument
from lore.store import NewChunk, Store
from retrieval.contract import QueryRequest
from retrieval.queries import QueryService

CHUNKS_PER_DOC = 10
BLOCK = 25  # queries a runtime runs before the next takes its turn (--query-runtimes)

MODES: dict[str, dict[str, Any]] = {
    "sparse": {"hybrid_params": {"dense_weight": 0, "sparse_weight": 1}},
    "dense": {"hybrid_params": {"dense_weight": 1, "sparse_weight": 0}},
    "hybrid": {},
}


def base_material(base: Path | None, dim: int) -> tuple[list[str], np.ndarray, str]:
    """(texts, vectors, description) to replicate."""
    db = base / "lore.sqlite3" if base else None
    if db is not None and db.exists():
        con = sqlite3.connect(db)
        rows = con.execute("SELECT text, embedding FROM chunks ORDER BY row_id").fetchall()
        con.close()
        texts = [r[0] for r in rows]
        vecs = np.vstack([np.frombuffer(r[1], dtype=np.float32) for r in rows])
        return texts, vecs, f"replicated from {base} ({len(texts)} real chunks)"
    rng = np.random.default_rng(0)
    vocab = [f"term{i}" for i in range(50_000)]
    weights = 1 / np.arange(1, len(vocab) + 1)
    weights /= weights.sum()
    texts = [" ".join(rng.choice(vocab, size=100, p=weights)) for _ in range(5000)]
    vecs = rng.normal(size=(5000, dim)).astype(np.float32)
    return texts, vecs, "synthetic Zipf text, random vectors"


def build(
    store: Store, embedder: Embedder, chunks: int, texts: list[str], vecs: np.ndarray
) -> None:
    """Write ``chunks`` chunks into the store (replicas of the base), then index them."""
    rng = np.random.default_rng(1)
    made = 0
    doc_no = 0
    while made < chunks:
        batch = min(CHUNKS_PER_DOC, chunks - made)
        idx = [(made + i) % len(texts) for i in range(batch)]
        replica = made // len(texts)
        noisy = vecs[idx] + rng.normal(scale=0.02 if replica else 0.0, size=vecs[idx].shape)
        noisy = (noisy / np.linalg.norm(noisy, axis=1, keepdims=True)).astype(np.float32)
        doc = SourceDocument(
            f"d{doc_no}", f"d{doc_no}", "", "", {"replica": replica, "bucket": doc_no % 100}
        )
        store.replace_document(
            doc,
            [
                NewChunk(f"c{doc_no}-{i}", i, texts[j], "", 0, f"{doc_no}-{i}", noisy[i])
                for i, j in enumerate(idx)
            ],
        )
        made += batch
        doc_no += 1
    store.bind_embedder(embedder.name, embedder.dimension)


def measure(service: QueryService, queries: list[str], fields: dict[str, Any]) -> dict[str, float]:
    """Latency percentiles of ``queries`` with the given request fields."""
    return measure_side_by_side({"": service}, queries, fields)[""]


def measure_side_by_side(
    runtimes: dict[str, QueryService],
    queries: list[str],
    fields: dict[str, Any],
    block: int = 1,
    per_name: dict[str, dict[str, Any]] | None = None,
) -> dict[str, dict[str, float]]:
    """Percentiles per runtime, the runtimes taking turns (same load).

    ``per_name``: request fields of one name on top of ``fields`` (one runtime may then
    stand under two names, to compare two kinds of request in turns).

    They take turns every ``block`` queries (each runs the block, then the next runtime
    runs it): one query at a time would let one runtime's idle threads (PyTorch's OpenMP
    pool, ONNX Runtime's spinning pool) steal a core from the next runtime's query.
    """
    extra = per_name or {}
    for name, service in runtimes.items():
        for text in queries[:10]:
            service.query_sync(
                QueryRequest.model_validate({"search_text": text, **fields, **extra.get(name, {})})
            )
    samples: dict[str, list[float]] = {name: [] for name in runtimes}
    names = list(runtimes)
    for turn, begin in enumerate(range(0, len(queries), block)):
        texts = queries[begin : begin + block]
        for name in names[turn % len(names) :] + names[: turn % len(names)]:
            requests = [
                QueryRequest.model_validate(
                    {"search_text": text, "top_k": 10, **fields, **extra.get(name, {})}
                )
                for text in texts
            ]
            for request in requests:
                start = time.perf_counter()
                runtimes[name].query_sync(request)
                samples[name].append((time.perf_counter() - start) * 1000)
    return {name: percentiles(values) for name, values in samples.items()}


def embedding_settings(name: str) -> dict[str, Any]:
    """``torch``, ``auto``, ``auto+t1`` → embedding settings.

    ``+tN``: N ONNX Runtime threads per query. The query cache is off, so every query is
    embedded.
    """
    runtime, *modifiers = name.split("+")
    out: dict[str, Any] = {"query_runtime": runtime, "query_cache_size": 0}
    for modifier in modifiers:
        if modifier.startswith("t") and modifier[1:].isdigit():
            out["query_threads"] = int(modifier[1:])
        else:
            raise SystemExit(f"unknown query runtime modifier {modifier!r} in {name!r}")
    return out


def compare_runtimes(work: Path, names: list[str], queries: list[str]) -> dict[str, Any]:
    """Dense and hybrid latency per query-embedding runtime, in turns of ``BLOCK``, cache off."""
    runtimes = {name: runtime_for(work, embedding=embedding_settings(name)) for name in names}
    out: dict[str, Any] = {}
    try:
        for runtime in runtimes.values():
            runtime.indexes.catch_up()
        for mode in ("dense", "hybrid"):
            services = {name: runtime.queries() for name, runtime in runtimes.items()}
            measured = measure_side_by_side(services, queries, MODES[mode], block=BLOCK)
            for name, figures in measured.items():
                out.setdefault(name, {})[mode] = figures
    finally:
        for runtime in runtimes.values():
            runtime.close()
    return out


def main(argv: list[str] | None = None) -> None:
    """Build (or reuse) the corpus and print the latency JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--base", type=Path, default=Path("/tmp/lore-bench-scifact"))
    parser.add_argument("--queries", type=Path, default=None)
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument("--n-queries", type=int, default=300)
    parser.add_argument("--rank-bm25-queries", type=int, default=50)
    parser.add_argument("--fresh", action="store_true")
    parser.add_argument(
        "--query-runtimes",
        default="",
        help="compare query-embedding runtimes side by side, e.g. torch,auto+t1,auto "
        "(cache off; see embedding_settings)",
    )
    args = parser.parse_args(argv)
    work: Path = args.work or Path(f"/tmp/lore-latency-{args.chunks}")
    if args.fresh and work.exists():
        shutil.rmtree(work)

    runtime = runtime_for(work)
    texts, vecs, described = base_material(args.base, runtime.embedder.dimension)
    out: dict[str, Any] = {"chunks": args.chunks, "corpus": described, "machine": machine()}
    if runtime.store.counts()["chunks"] != args.chunks:
        _, out["store_write_seconds"] = timed(
            lambda: build(runtime.store, runtime.embedder, args.chunks, texts, vecs)
        )
    _, out["index_build_seconds"] = timed(runtime.indexes.catch_up)
    if args.queries:
        queries = [json.loads(line)["text"] for line in args.queries.read_text().splitlines()]
    else:
        queries = [" ".join(t.split()[:12]) for t in texts[:: max(1, len(texts) // 300)]]
    queries = queries[: args.n_queries]
    if args.query_runtimes:
        out["query_runtimes"] = compare_runtimes(work, args.query_runtimes.split(","), queries)
        print(json.dumps({"query_runtimes": out["query_runtimes"]}), file=sys.stderr, flush=True)
    for name, fields in MODES.items():
        out[name] = measure(runtime.queries(), queries, fields)
    # dense feedback (off by default) against the default hybrid request, in turns
    service = runtime.queries()
    feedback = {"hybrid_feedback": {"hybrid_params": {"feedback_boost": 1.0}}}
    out["feedback"] = measure_side_by_side(
        {"hybrid": service, "hybrid_feedback": service}, queries, {}, per_name=feedback
    )
    out["feedback"]["p50_ratio"] = round(
        out["feedback"]["hybrid_feedback"]["p50_ms"] / out["feedback"]["hybrid"]["p50_ms"], 2
    )
    out["filtered_hybrid_1pct"] = measure(
        runtime.queries(), queries, {"metadata_filter": {"bucket": 7}}
    )
    runtime.close()

    if args.rank_bm25_queries <= 0:
        out["hybrid_over_sparse_p50"] = round(out["hybrid"]["p50_ms"] / out["sparse"]["p50_ms"], 2)
        print(json.dumps(out, indent=2))
        return
    bm25 = runtime_for(work, sparse={"engine": "rank_bm25"})
    _, out["rank_bm25_build_seconds"] = timed(bm25.indexes.catch_up)
    few = queries[: args.rank_bm25_queries]
    out["rank_bm25"] = {
        "sparse": measure(bm25.queries(), few, MODES["sparse"]),
        "hybrid": measure(bm25.queries(), few, MODES["hybrid"]),
    }
    bm25.close()
    for key in ("store_write_seconds", "index_build_seconds", "rank_bm25_build_seconds"):
        if key in out:
            out[key] = round(out[key], 1)
    out["hybrid_over_sparse_p50"] = round(out["hybrid"]["p50_ms"] / out["sparse"]["p50_ms"], 2)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
