"""Embedding speed and quality of every local-model variant, side by side in one run.

    python -m bench.embed --data ../shared/data/scifact [--docs 1000] [--queries 200]
    python -m bench.embed --data ../shared/data/twowiki --docs 6119 --queries 101

Variants: ``torch`` (sentence-transformers, the fallback), ``onnx`` (the exported graph
the product embeds queries and batches with, ONNX Runtime at ``ORT_ENABLE_ALL``),
``onnx-basic`` (the same graph at ``ORT_ENABLE_BASIC``), ``onnx-fused`` (ONNX Runtime's
transformer optimiser: fused attention, fp32), and three dynamic int8 quantisations of the
graph — ``onnx-int8`` (one scale per output channel, the FFN up-projections kept at fp32:
the most faithful measured), ``onnx-int8-all`` (every MatMul) and ``onnx-int8-tensor``
(every MatMul, one scale per tensor). None is offered by the product: on SciFact through
the product's chunked pipeline even ``onnx-int8`` as the query side lost more than 0.003
nDCG@10 (see the README). For each:
single-query p50/p99 on ``--query-threads`` threads (variants interleaved query by query,
so machine load hits them alike), documents/s on ``--batch-threads`` threads (length-
bucketed batches; interleaved batch by batch; ``onnx-unsorted`` shows what bucketing buys),
the minimum cosine to the PyTorch vectors, and SciFact nDCG@10 on a subset of the corpus
(every document relevant to the chosen queries plus others up to ``--docs``) with
documents embedded by PyTorch (what a store holds), and by the variant itself when its
vectors differ from PyTorch's (cosine < 0.9999; ``--no-own-docs`` skips that); ``hybrid``
fuses BM25 (rank-bm25, the project's analyzer) and dense rankings with RRF k = 60.
Documents are scored whole (title + abstract, truncated at 256 word pieces).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from bench.beir import load_qrels, ndcg_at
from bench.common import machine, percentiles
from lore import onnx_embed
from lore.embedders import LocalEmbedder, Matrix
from lore.store import IndexRow
from lore.tokens import packaged_model_dir
from retrieval.analyzer import Analyzer
from retrieval.fusion import weighted_rrf
from retrieval.sparse.rank_bm25_index import RankBM25Index

MAX_SEQ = 256
# Variants whose document vectors agree with PyTorch's this well rank identically; only
# the others get their own document embedding for the quality figures.
AGREE = 0.9999


@dataclass
class Variant:
    """One way to embed: a single-query function and a batch function."""

    name: str
    query: Callable[[str], Matrix]
    batch: Callable[[list[str]], Matrix]
    query_ms: list[float] = field(default_factory=list)
    batch_seconds: float = 0.0
    docs: Matrix | None = None


def _single(encoder: onnx_embed.OnnxEncoder) -> Callable[[str], Matrix]:
    def embed(text: str) -> Matrix:
        vector: Matrix = encoder.encode([text])[0]
        return vector

    return embed


def _bucketed(encoder: onnx_embed.OnnxEncoder, size: int, texts: list[str]) -> Matrix:
    return encoder.encode_bucketed(texts, size)


def _unsorted(encoder: onnx_embed.OnnxEncoder, size: int, texts: list[str]) -> Matrix:
    return np.vstack([encoder.encode(texts[i : i + size]) for i in range(0, len(texts), size)])


def expanding_matmuls(graph: Any) -> list[str]:
    """MatMul nodes whose weight widens its input (a transformer's FFN up-projection).

    Their input is a LayerNorm output, whose few large channels one activation scale per
    tensor (dynamic quantisation) serves worst.
    """
    weights = {w.name: tuple(w.dims) for w in graph.initializer}
    out = []
    for node in graph.node:
        shape = weights.get(node.input[1]) if node.op_type == "MatMul" else None
        if shape is not None and len(shape) == 2 and shape[1] > shape[0]:
            out.append(node.name)
    return out


def onnx_variants(
    graph: Path, work: Path, query_threads: int, batch_threads: int, batch_size: int
) -> list[Variant]:
    """The ONNX Runtime variants, derived from the product's cached graph."""
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.transformers import optimizer

    fused = work / "fused.onnx"
    config = json.loads((packaged_model_dir() / "config.json").read_text())
    optimizer.optimize_model(
        str(graph),
        model_type="bert",
        num_heads=int(config["num_attention_heads"]),
        hidden_size=int(config["hidden_size"]),
        opt_level=1,
    ).save_model_to_file(str(fused))
    per_tensor = work / "int8-tensor.onnx"
    quantize_dynamic(str(graph), str(per_tensor), weight_type=QuantType.QInt8)
    every = work / "int8-all.onnx"
    quantize_dynamic(str(graph), str(every), weight_type=QuantType.QInt8, per_channel=True)
    import onnx

    int8 = work / "int8.onnx"
    keep = expanding_matmuls(onnx.load(str(graph)).graph)
    quantize_dynamic(
        str(graph), str(int8), weight_type=QuantType.QInt8, per_channel=True, nodes_to_exclude=keep
    )
    tokenizer = packaged_model_dir() / "tokenizer.json"
    out = []
    specs = [
        ("onnx", graph, "all"),
        ("onnx-basic", graph, "basic"),
        ("onnx-fused", fused, "all"),
        ("onnx-int8", int8, "all"),
        ("onnx-int8-all", every, "all"),
        ("onnx-int8-tensor", per_tensor, "all"),
    ]
    for name, path, level in specs:
        single = onnx_embed.OnnxEncoder(
            onnx_embed.open_session(path, query_threads, level), tokenizer, MAX_SEQ
        )
        many = onnx_embed.OnnxEncoder(
            onnx_embed.open_session(path, batch_threads, level), tokenizer, MAX_SEQ
        )
        out.append(Variant(name, _single(single), partial(_bucketed, many, batch_size)))
        if name == "onnx":
            out.append(
                Variant("onnx-unsorted", _single(single), partial(_unsorted, many, batch_size))
            )
    return out


def subset(
    data: Path, n_docs: int, n_queries: int
) -> tuple[list[str], list[str], list[str], list[dict[str, int]]]:
    """(doc ids, doc texts, query texts, qrels per query) for a bounded run.

    A BEIR folder (``queries.jsonl``, ``qrels/test.tsv``: SciFact) or one with
    ``queries_N.jsonl`` and ``qrels_N.tsv`` beside the corpus (our 2Wiki folder).
    """
    beir = (data / "qrels" / "test.tsv").is_file()
    queries_file = data / "queries.jsonl" if beir else next(data.glob("queries_*.jsonl"))
    queries = {
        str(r["_id"]): str(r["text"])
        for r in map(json.loads, queries_file.read_text().splitlines())
    }
    qrels = load_qrels(data / "qrels" / "test.tsv" if beir else next(data.glob("qrels_*.tsv")))
    chosen = [q for q in sorted(qrels, key=lambda q: (len(q), q)) if q in queries][:n_queries]
    wanted = {d for q in chosen for d in qrels[q]}
    ids: list[str] = []
    texts: list[str] = []
    for rec in map(json.loads, (data / "corpus.jsonl").read_text().splitlines()):
        did = str(rec["_id"])
        if did in wanted or len(ids) < n_docs - len(wanted):
            ids.append(did)
            texts.append(f"{rec.get('title', '')}\n{rec['text']}".strip())
    return ids, texts, [queries[q] for q in chosen], [qrels[q] for q in chosen]


def bm25_rankings(doc_texts: list[str], queries: list[str], depth: int) -> list[list[int]]:
    """Top ``depth`` document positions per query with the project's BM25 analyzer."""
    with tempfile.TemporaryDirectory() as tmp:
        index = RankBM25Index(Path(tmp), Analyzer())
        empty = np.zeros(1, dtype=np.float32)
        index.upsert([IndexRow(i, t, empty, []) for i, t in enumerate(doc_texts)])
        index.commit(1)
        return [[row for row, _ in index.search(q, depth)] for q in queries]


def quality(
    docs: Matrix, qvecs: Matrix, bm25: list[list[int]], ids: list[str], qrels: list[dict[str, int]]
) -> dict[str, float]:
    """Dense and hybrid (RRF k 60) nDCG@10."""
    scores = qvecs @ docs.T
    dense_ndcg, hybrid_ndcg = [], []
    for qi, relevant in enumerate(qrels):
        dense = [int(i) for i in np.argsort(-scores[qi], kind="stable")[:100]]
        fused = [k for k, _ in weighted_rrf({"dense": dense, "sparse": bm25[qi]}, {}, k=60)]
        dense_ndcg.append(ndcg_at([ids[i] for i in dense], relevant, 10))
        hybrid_ndcg.append(ndcg_at([ids[i] for i in fused], relevant, 10))
    return {
        "dense_ndcg@10": round(float(np.mean(dense_ndcg)), 4),
        "hybrid_ndcg@10": round(float(np.mean(hybrid_ndcg)), 4),
    }


def time_queries(variants: list[Variant], queries: list[str]) -> dict[str, list[Matrix]]:
    """Embed every query with every variant, interleaved so load hits all alike."""
    qvecs: dict[str, list[Matrix]] = {v.name: [] for v in variants}
    for n, text in enumerate(queries):
        for v in variants[n % len(variants) :] + variants[: n % len(variants)]:
            begin = time.perf_counter()
            qvecs[v.name].append(v.query(text))
            v.query_ms.append((time.perf_counter() - begin) * 1000)
    return qvecs


def time_batches(variants: list[Variant], docs: list[str], step: int) -> dict[str, list[Matrix]]:
    """Embed ``docs`` in blocks of ``step`` with every variant, interleaved."""
    parts: dict[str, list[Matrix]] = {v.name: [] for v in variants}
    for n, begin_at in enumerate(range(0, len(docs), step)):
        block = docs[begin_at : begin_at + step]
        for v in variants[n % len(variants) :] + variants[: n % len(variants)]:
            begin = time.perf_counter()
            parts[v.name].append(v.batch(block))
            v.batch_seconds += time.perf_counter() - begin
    return parts


def main(argv: list[str] | None = None) -> None:
    """Run every variant and print the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="a BEIR folder (SciFact)")
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--query-threads", type=int, default=1)
    parser.add_argument("--batch-threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--batch-docs", type=int, default=256, help="docs timed per variant")
    parser.add_argument("--cache-dir", type=Path, default=None, help="exported graph cache")
    parser.add_argument(
        "--no-own-docs",
        action="store_true",
        help="skip embedding the corpus with variants whose vectors differ from PyTorch's",
    )
    args = parser.parse_args(argv)
    import torch

    ids, doc_texts, queries, qrels = subset(args.data, args.docs, args.queries)
    out: dict[str, Any] = {
        "dataset": args.data.resolve().name,
        "machine": machine(),
        "docs": len(ids),
        "queries": len(queries),
        "query_threads": args.query_threads,
        "batch_threads": args.batch_threads,
        "batch_size": args.batch_size,
        "batch_docs": min(args.batch_docs, len(ids)),
        "note": "documents scored whole (title + abstract, 256 word pieces); hybrid = RRF "
        "k 60 of rank-bm25 (project analyzer) and dense; ndcg_docs_by_itself only for "
        f"variants whose document vectors fall below cosine {AGREE} of PyTorch's",
    }
    torch_embedder = LocalEmbedder(
        query_runtime="torch", batch_size=args.batch_size, threads=args.batch_threads
    )
    cache = args.cache_dir or onnx_embed.default_cache_dir()
    start = time.perf_counter()
    graph = onnx_embed.cached_graph(packaged_model_dir(), cache, MAX_SEQ)
    out["graph_ready_seconds"] = round(time.perf_counter() - start, 1)
    with tempfile.TemporaryDirectory() as tmp:
        variants = [
            Variant(
                "torch",
                torch_embedder.embed_query_torch,
                torch_embedder.embed_documents,
            )
        ]
        variants += onnx_variants(
            graph, Path(tmp), args.query_threads, args.batch_threads, args.batch_size
        )
        for v in variants:  # warm every path
            v.query("warm up")
            v.batch(doc_texts[:4])
        torch.set_num_threads(args.query_threads)
        qvecs = time_queries(variants, queries)
        torch.set_num_threads(args.batch_threads)
        timed_docs = doc_texts[: args.batch_docs]
        parts = time_batches(variants, timed_docs, 4 * args.batch_size)
        rest = doc_texts[len(timed_docs) :]
        ref_docs = np.vstack([*parts["torch"], variants[0].batch(rest)] if rest else parts["torch"])
        ref_timed = ref_docs[: len(timed_docs)]
        own: dict[str, Matrix] = {}
        for v in variants[1:]:
            head = np.vstack(parts[v.name])
            if not args.no_own_docs and float(np.min(np.sum(head * ref_timed, 1))) < AGREE:
                own[v.name] = np.vstack([head, v.batch(rest)]) if rest else head
    bm25 = bm25_rankings(doc_texts, queries, 100)
    ref_q = np.vstack(qvecs["torch"])
    results: dict[str, Any] = {}
    for v in variants:
        head, qv = np.vstack(parts[v.name]), np.vstack(qvecs[v.name])
        single = percentiles(v.query_ms)
        results[v.name] = {
            "query_p50_ms": single["p50_ms"],
            "query_p99_ms": single["p99_ms"],
            "batch_docs_per_s": round(len(timed_docs) / v.batch_seconds, 1),
            "min_cosine_to_torch_queries": round(float(np.min(np.sum(qv * ref_q, 1))), 6),
            "mean_cosine_to_torch_queries": round(float(np.mean(np.sum(qv * ref_q, 1))), 6),
            "min_cosine_to_torch_docs": round(float(np.min(np.sum(head * ref_timed, 1))), 6),
            "ndcg_store_docs_by_torch": quality(ref_docs, qv, bm25, ids, qrels),
        }
        if v.name in own:
            results[v.name]["ndcg_docs_by_itself"] = quality(own[v.name], qv, bm25, ids, qrels)
    out["variants"] = results
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
