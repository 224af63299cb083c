"""Building a corpus's graph on both backends in one run: embedded SQLite and Neo4j.

    python -m bench.graph_backends --data ../shared/data/ops_runbooks --docs 300

The documents are chunked as the pipeline does and extracted once with the offline
extractor (no embedding: the graph build never reads vectors); the same extractions are
then stored on each backend through the graph build's own write step
(:func:`ingest.graph_build.store_extractions`, one ``put_chunks`` per batch of 64) and
the communities computed from each backend's edges. The Neo4j backend is also timed the
way it wrote before batching (one ``put_chunk`` transaction per chunk), after a warm-up
of both on a throw-away namespace. Both backends must end with the same entities,
relations and communities, or the run fails.

Without ``NEO4J_URI`` the ArcadeDB Bolt stand-in for Neo4j is started for the run
(``scripts/arcadedb_server.py``); the JSON names the server either way. Prints
``{"machine", "dataset", "documents", "chunks", "extract_s", "backends": {NAME:
{"seconds", "write_s", "communities_s", "entities", "entities_per_s", ...}}}``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.common import machine, runtime_for, timed
from bench.pipeline import load_corpus
from graph.quarantine import Quarantine
from graph.store import GraphStore
from graph.stores import open_graph_store
from ingest.extraction import ChunkInput, Extraction, OfflineExtractor, Quarantined
from ingest.graph_build import build_communities, store_extractions
from lore.models import SourceDocument

if TYPE_CHECKING:
    from graph.stores.neo4j import Neo4jGraphStore

BATCH = 64


def chunk_inputs(docs: Sequence[SourceDocument], scratch: Path) -> list[ChunkInput]:
    """The chunks the pipeline would store for ``docs`` (same chunker and settings)."""
    runtime = runtime_for(scratch / "chunker")
    pipeline = runtime.pipeline()
    chunks = []
    for doc in docs:
        drafts = pipeline.chunks_of(doc)
        chunks += [ChunkInput(f"{doc.id}#{d.ordinal}", doc.id, d.text, doc.title) for d in drafts]
    runtime.close()
    return chunks


def build(
    graph: GraphStore,
    quarantine: Quarantine,
    chunks: Sequence[ChunkInput],
    results: Sequence[Extraction | Quarantined],
    batched: bool,
) -> dict[str, Any]:
    """Store the extractions (batched as the build does, or a chunk per transaction)."""
    start = time.perf_counter()
    if batched:
        for at in range(0, len(chunks), BATCH):
            store_extractions(
                graph, quarantine, "offline", chunks[at : at + BATCH], results[at : at + BATCH]
            )
    else:
        for chunk, result in zip(chunks, results, strict=True):
            if isinstance(result, Extraction):
                graph.put_chunk(
                    chunk.chunk_id, chunk.document_id, result.entities, result.relations
                )
    write_s = time.perf_counter() - start
    communities, communities_s = timed(lambda: build_communities(graph))
    counts = graph.counts()
    return {
        "seconds": round(write_s + communities_s, 2),
        "write_s": round(write_s, 2),
        "communities_s": round(communities_s, 2),
        **counts,
        "entities_per_s": round(counts["entities"] / write_s, 1),
        "chunks_per_s": round(len(chunks) / write_s, 1),
        "_communities": [(c.level, c.members) for c in communities],
    }


@contextlib.contextmanager
def neo4j_server() -> Iterator[dict[str, str]]:
    """``NEO4J_*`` of the configured server, or of an ArcadeDB stand-in started for the run."""
    if os.environ.get("NEO4J_URI"):
        yield {k: v for k, v in os.environ.items() if k.startswith("NEO4J_")}
        return
    from scripts.arcadedb_server import arcadedb

    with arcadedb() as stand_in:
        yield stand_in.env()


def neo4j_store(env: dict[str, str]) -> Neo4jGraphStore:
    """A Neo4j graph store in a namespace of its own."""
    from graph.stores.neo4j import Neo4jGraphStore

    return Neo4jGraphStore(
        uri=env["NEO4J_URI"],
        user=env.get("NEO4J_USER", "neo4j"),
        password=env.get("NEO4J_PASSWORD", ""),
        database=env.get("NEO4J_DATABASE") or None,
        namespace=f"bench-{uuid.uuid4().hex}",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", type=Path, required=True, help="corpus.jsonl/docs.jsonl dir")
    parser.add_argument("--docs", type=int, default=300, help="the first N documents")
    parser.add_argument("--skip-unbatched", action="store_true", help="Neo4j batched only")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="lore-bench-graph-"))
    try:
        docs = load_corpus(args.data, args.docs)
        chunks = chunk_inputs(docs, scratch)
        results, extract_s = timed(lambda: OfflineExtractor().extract_batch(chunks))
        quarantine = Quarantine(scratch / "quarantine.sqlite3")
        backends: dict[str, Any] = {}
        local = open_graph_store("local", path=scratch / "graph.sqlite3")
        backends["local"] = build(local, quarantine, chunks, results, batched=True)
        local.close()
        with neo4j_server() as env:
            server = env.get("NEO4J_STAND_IN") or f"Neo4j at {env['NEO4J_URI']}"
            variants = [("neo4j", True)] + (
                [] if args.skip_unbatched else [("neo4j_per_chunk", False)]
            )
            warm = neo4j_store(env)  # the server's first queries are slow (JIT, plans)
            try:
                build(warm, quarantine, chunks[:BATCH], results[:BATCH], batched=True)
                build(
                    warm, quarantine, chunks[BATCH : 2 * BATCH], results[BATCH : 2 * BATCH], False
                )
            finally:
                warm.drop()
                warm.close()
            for name, batched in variants:
                store = neo4j_store(env)
                try:
                    backends[name] = {
                        "server": server,
                        **build(store, quarantine, chunks, results, batched),
                    }
                finally:
                    store.drop()
                    store.close()
        reference = backends["local"]["_communities"]
        for name, figures in backends.items():
            if figures.pop("_communities") != reference:
                raise SystemExit(f"{name}: the communities differ from the embedded store's")
        quarantine.close()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(
        json.dumps(
            {
                "machine": machine(),
                "dataset": f"{args.data} (first {len(docs)} documents)",
                "documents": len(docs),
                "chunks": len(chunks),
                "extractor": "offline",
                "extract_s": round(extract_s, 2),
                "batch": BATCH,
                "backends": backends,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
