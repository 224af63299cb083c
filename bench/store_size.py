"""Storage per input byte: heavy-metadata synthetic documents, or a real corpus.

    python -m bench.store_size [--docs 20] [--paragraphs 80] [--tags 250]
    python -m bench.store_size --corpus examples/corpus [--keep DIR]
    python -m bench.store_size --corpus /work/shared/data/ops_runbooks/docs.jsonl

``--corpus DIR``: ingests each subfolder of ``DIR`` (the ops corpus ``examples/corpus``:
``production/`` and ``staging/``, with ``env=<folder>`` as ``lore ingest --meta`` would),
or one JSON Lines file (the 1,535 runbooks and alert rules of ``ops_runbooks/docs.jsonl``;
the input is the file's bytes: text, titles and metadata)
with the configured embedder (by default the packaged 384-d all-MiniLM-L6-v2, read from
its package: nothing downloads), then prints the input bytes, the data directory's bytes
after the runtime closed, their ratio, a per-file breakdown and the SQLite tables' share
(``dbstat``), with the machine and its load. ``--keep DIR`` ingests into ``DIR`` (which
must not exist) and leaves it there for inspection.

Without ``--corpus``: ingests ``--docs`` synthetic documents of ``--paragraphs``
paragraphs (one chunk each, roughly) whose metadata holds a list of ``--tags``
60-character tags (~15 KB, under the per-list limit), through ``app.ingest.ingest``, with
a tiny deterministic 8-d embedder so that the figure is about text and metadata, not
vectors. Prints the request's JSON size, the store's size after a WAL checkpoint and
their ratio. Metadata stored once per document (now) against once per chunk (before) is
the difference this measures.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from app.ingest import ingest, ingest_paths
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


def files_of(directory: Path) -> dict[str, int]:
    """Every file under ``directory`` with its size, by path relative to it."""
    return {
        str(path.relative_to(directory)): path.stat().st_size
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


def sqlite_tables(path: Path) -> dict[str, int]:
    """Bytes of pages per table or index of an SQLite file (its ``dbstat`` view)."""
    db = sqlite3.connect(path)
    try:
        rows = db.execute(
            "SELECT name, SUM(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC"
        ).fetchall()
        free = db.execute("PRAGMA freelist_count").fetchone()[0]
        page = db.execute("PRAGMA page_size").fetchone()[0]
    finally:
        db.close()
    tables = {str(name): int(size) for name, size in rows}
    tables["(free pages)"] = int(free) * int(page)
    return tables


def corpus_report(corpus: Path, data: Path) -> dict[str, Any]:
    """Ingest each subfolder of ``corpus`` into ``data``; what the data directory holds."""
    if corpus.is_file():  # one JSON Lines file (the ops corpus's docs.jsonl)
        folders, inputs = [corpus], {corpus.name: corpus.stat().st_size}
    else:
        folders = sorted(p for p in corpus.iterdir() if p.is_dir()) or [corpus]
        inputs = {
            str(p.relative_to(corpus)): p.stat().st_size for p in corpus.rglob("*") if p.is_file()
        }
    runtime = runtime_for(data)
    done = failed = chunks = 0
    embedder = runtime.embedder
    for folder in folders:
        meta = {"env": folder.name} if folder != corpus else None
        report = ingest_paths(runtime.job_services(), [folder], meta).report
        done, failed, chunks = (
            done + len(report.done),
            failed + len(report.failed),
            chunks + report.chunks,
        )
    open_files = files_of(data)  # while the runtime is open: the WAL as a server has it
    runtime.close()
    files = files_of(data)
    stored = sum(files.values())
    input_bytes = sum(inputs.values())
    return {
        "machine": machine(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "corpus": str(corpus),
        "embedder": {"name": embedder.name, "dimension": embedder.dimension},
        "input_files": len(inputs),
        "input_bytes": input_bytes,
        "documents": done,
        "failed": failed,
        "chunks": chunks,
        "data_dir_bytes": stored,
        "data_dir_bytes_while_open": sum(open_files.values()),
        "wal_bytes_while_open": open_files.get("lore.sqlite3-wal", 0),
        "ratio": round(stored / input_bytes, 2),
        "files": files,
        "sqlite_tables": {
            name: sqlite_tables(data / name) for name in files if name.endswith(".sqlite3")
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=20)
    parser.add_argument("--paragraphs", type=int, default=80)
    parser.add_argument("--tags", type=int, default=250)
    parser.add_argument("--corpus", type=Path, help="a real corpus folder (examples/corpus)")
    parser.add_argument("--keep", type=Path, help="--corpus: ingest into this new folder")
    args = parser.parse_args()
    if args.corpus is not None:
        if args.keep is not None:
            print(json.dumps(corpus_report(args.corpus, args.keep), indent=2))
            return
        with tempfile.TemporaryDirectory(prefix="lore-size-") as tmp:
            print(json.dumps(corpus_report(args.corpus, Path(tmp) / "data"), indent=2))
        return
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
        report = ingest(runtime.job_services(), docs).report
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
