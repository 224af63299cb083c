"""Store bytes per request byte for documents that carry heavy metadata.

    python -m bench.store_size [--docs 20] [--paragraphs 80] [--tags 250]

Ingests ``--docs`` synthetic documents of ``--paragraphs`` paragraphs (one chunk each,
roughly) whose metadata holds a list of ``--tags`` 60-character tags (~15 KB, under the
per-list limit), through ``Runtime.ingest``, with a tiny deterministic 8-d embedder so
that the figure is about text and metadata, not vectors. Prints the request's JSON
size, the store's size after a WAL checkpoint and their ratio. Metadata stored once per
document (now) against once per chunk (before) is the difference this measures.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bench.common import machine, runtime_for
from lore.embedders import Matrix
from lore.models import SourceDocument


class FlatEmbedder:
    """Every text maps to the same unit vector: the store's vectors stay tiny."""

    name = "flat-8"
    dimension = 8

    def embed_documents(self, texts: Sequence[str]) -> Matrix:
        """One row per text."""
        return np.full((len(texts), 8), 8**-0.5, dtype=np.float32)

    def embed_query(self, text: str) -> Matrix:
        """The same vector."""
        return np.full(8, 8**-0.5, dtype=np.float32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=20)
    parser.add_argument("--paragraphs", type=int, default=80)
    parser.add_argument("--tags", type=int, default=250)
    args = parser.parse_args()
    tags = [f"tag-{i:03d}-" + "x" * 50 for i in range(args.tags)]
    text = "\n\n".join(
        f"Paragraph {i} about the ledger service and error E_{i:04d}. " * 12
        for i in range(args.paragraphs)
    )
    docs = [
        SourceDocument(f"d{i}", f"d{i}", text, f"d{i}", {"tags": list(tags), "team": "ops"})
        for i in range(args.docs)
    ]
    request = sum(
        len(json.dumps({"id": d.id, "text": d.text, "metadata": d.metadata})) for d in docs
    )
    with tempfile.TemporaryDirectory(prefix="lore-size-") as tmp:
        data = Path(tmp) / "data"
        runtime = runtime_for(data)
        runtime.embedder = FlatEmbedder()
        report = runtime.ingest(docs)
        runtime.close()
        db = sqlite3.connect(data / "lore.sqlite3")
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        chunks = int(db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0])
        db.close()
        store = (data / "lore.sqlite3").stat().st_size
    print(
        json.dumps(
            {
                "machine": machine(),
                "docs": len(docs),
                "failed": len(report.failed),
                "chunks": chunks,
                "metadata_bytes_per_doc": len(json.dumps(docs[0].metadata)),
                "request_bytes": request,
                "store_bytes": store,
                "store_per_request_byte": round(store / request, 2),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
