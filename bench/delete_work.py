"""What one document delete reads, on each backend, at two corpus sizes.

    python -m bench.delete_work --base 250      # sizes 250 and 1,000 documents

The corpus is :func:`bench.scale.corpus` (ops runbooks and SciFact abstracts interleaved;
the deleted document lends no paragraph to the recombined ones), so the larger size holds
the smaller one and the deleted document is the same at both. Each size is ingested,
its graph built (offline extractor and reports), then the same document is deleted with
:func:`app.lifecycle.delete_documents`, the cascade every door runs, while the backend's
own counters say what the delete read:

- ``sqlite``: the embedded store and graph; statements run and virtual-machine steps
  taken on their connections (a step visits at most one row: :func:`bench.scale.sqlite_work`).
- ``postgresql``: the store and the graph on PostgreSQL (a fresh database per size);
  ``pg_stat_user_tables`` before and after: rows read by sequential scans
  (``seq_tup_read``), rows fetched through indexes (``idx_tup_fetch``), and the rows
  sequential scans read in each table of over 1,000 rows, named. Each pooled
  connection's pending counters are flushed (``pg_stat_force_next_flush()``) before each
  reading.
- ``neo4j``: the graph on the Bolt server (``NEO4J_URI``, else the ArcadeDB stand-in
  started for the run), the store on SQLite; Cypher queries run and records returned, and
  the store's SQLite steps.

A delete whose change is the same should read the same at both sizes: the JSON gives
each figure at both sizes and the larger over the smaller, with the deleted document's
``reach`` (:func:`bench.scale.reach`: its entities, the chunks mentioning them, the
members of their communities), which says whether the change itself grew.

Two documents are deleted at each size, each measured alone:

- ``probe``: a runbook written for this bench (:data:`bench.scale.PROBE`, invented names
  that no corpus document holds), ingested with a second one that shares its names
  (:data:`bench.scale.PROBE_KEPT`) and built into the graph after the corpus, then
  deleted: their community's report is rewritten. The change is the same at both
  sizes (its ``reach`` says so), so what the delete reads must not grow with the
  corpus: this is the acceptance figure;
- ``corpus``: a real document of the corpus (``bench.scale.DELETED``). Its entities gain
  mentions as the corpus grows, so its delete reads more because its change is larger;
  read it per report refreshed.

Vectors are kept by text in a SQLite file (``--embed-cache``, default in the scratch
directory) so each text is embedded once for all backends.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from app.ingest import ingest
from app.lifecycle import delete_documents
from app.refresh import refresh_in_process
from app.runtime import Runtime, open_runtime
from bench.common import machine, runtime_for
from bench.processes import database as postgres_database
from bench.scale import (
    DELETED,
    PROBE,
    PROBE_KEPT,
    CachedEmbedder,
    corpus,
    reach,
    sqlite_work,
)
from lore.settings import Settings, load_settings

ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
BIG_TABLE = 1_000  # rows sequential scans read in a table this large are named per table


def _flush_pools() -> None:
    """Make every pooled connection of this process publish its pending table counters."""
    from lore.db import _PG_OPEN, PostgresDatabase

    for database in list(_PG_OPEN.values()):
        if not isinstance(database, PostgresDatabase):
            continue
        pool = database._pool
        with ExitStack() as stack:
            for _ in range(pool.max_size):
                conn = stack.enter_context(pool.connection(timeout=5))
                conn.execute("SELECT pg_stat_force_next_flush()")
    time.sleep(0.5)  # an idle backend flushes at once once asked; leave it the moment


def _table_counters(url: str) -> dict[str, tuple[int, int, int, int]]:
    """``schema.table`` -> (seq_scan, seq_tup_read, idx_tup_fetch, live rows)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        rows = conn.execute(
            "SELECT schemaname || '.' || relname, seq_scan, seq_tup_read,"
            " coalesce(idx_tup_fetch, 0), n_live_tup FROM pg_stat_user_tables"
        ).fetchall()
    return {r[0]: (int(r[1]), int(r[2]), int(r[3]), int(r[4])) for r in rows}


@contextmanager
def postgres_work(url: str) -> Iterator[dict[str, Any]]:
    """Rows the block read on the database at ``url`` (all its schemas)."""
    found: dict[str, Any] = {}
    _flush_pools()
    before = _table_counters(url)
    yield found
    _flush_pools()
    after = _table_counters(url)
    seq_read = fetched = 0
    scans: dict[str, int] = {}
    for table, (scan, read, fetch, live) in after.items():
        b_scan, b_read, b_fetch, _ = before.get(table, (0, 0, 0, 0))
        seq_read += read - b_read
        fetched += fetch - b_fetch
        if scan > b_scan and live >= BIG_TABLE:
            scans[table.split(".", 1)[1]] = read - b_read
    found.update(seq_tup_read=seq_read, idx_tup_fetch=fetched, rows_read=seq_read + fetched)
    found["big_table_seq_scans"] = scans


@contextmanager
def neo4j_work() -> Iterator[dict[str, int]]:
    """Cypher queries run and records returned through the driver while the block runs."""
    from neo4j import ManagedTransaction, Result

    found = {"queries": 0, "records": 0}
    run, data, single = ManagedTransaction.run, Result.data, Result.single

    def counted_run(self: Any, *args: Any, **kwargs: Any) -> Any:
        found["queries"] += 1
        return run(self, *args, **kwargs)

    def counted_data(self: Any, *args: Any, **kwargs: Any) -> Any:
        rows = data(self, *args, **kwargs)
        found["records"] += len(rows)
        return rows

    def counted_single(self: Any, *args: Any, **kwargs: Any) -> Any:
        row = single(self, *args, **kwargs)
        found["records"] += row is not None
        return row

    ManagedTransaction.run = counted_run  # type: ignore[method-assign]
    Result.data = counted_data  # type: ignore[method-assign]
    Result.single = counted_single  # type: ignore[method-assign]
    try:
        yield found
    finally:
        ManagedTransaction.run = run  # type: ignore[method-assign]
        Result.data = data  # type: ignore[method-assign]
        Result.single = single  # type: ignore[method-assign]


def _runtime(settings: Settings, cache: Path) -> Runtime:
    base = runtime_for(settings.data_dir / "chunker")
    embedder = CachedEmbedder(base.embedder, cache)
    base.close()
    return open_runtime(settings, embedder=embedder)


def _counted_delete(runtime: Runtime, document_id: str, url: str, neo4j: bool) -> dict[str, Any]:
    """Delete one document through the cascade every door runs, counting what it read."""
    reached = reach(runtime, document_id)
    with ExitStack() as counters:
        lite = counters.enter_context(sqlite_work(runtime))
        pg = counters.enter_context(postgres_work(url)) if url else {}
        bolt = counters.enter_context(neo4j_work()) if neo4j else {}
        start = time.perf_counter()
        deleted = delete_documents(
            runtime.graph_services(), runtime.jobs(), [document_id], indexes=runtime.indexes
        )
        seconds = time.perf_counter() - start
    graph = deleted.graph.as_dict()
    row: dict[str, Any] = {
        "document": document_id,
        "reach": reached,
        "delete_s": round(seconds, 3),
        "reports_refreshed": graph["reports_refreshed"],
        "reports_recovered": graph["reports_recovered"],
    }
    if not url:
        row["sqlite_statements"] = lite["statements"]
        row["sqlite_vm_steps"] = lite["vm_steps"]
    row.update({f"pg_{k}": v for k, v in pg.items()})
    row.update({f"cypher_{k}": v for k, v in bolt.items()})
    return row


def one_delete(backend: str, count: int, scratch: Path, cache: Path, env: dict[str, str]) -> Any:
    """Ingest ``count`` documents and build; what deleting the probe, then one of them, read."""
    data_dir = scratch / f"{backend}-{count}"
    with ExitStack() as stack:
        sections: dict[str, dict[str, Any]] = {}
        url = ""
        if backend == "postgresql":
            url = stack.enter_context(postgres_database(env["admin_url"]))
            sections["store"] = {"url": url}
        if backend == "neo4j":
            sections["graph"] = {
                "backend": "neo4j",
                "neo4j_uri": env["NEO4J_URI"],
                "neo4j_user": env.get("NEO4J_USER", "neo4j"),
                "neo4j_password": env.get("NEO4J_PASSWORD") or None,
                "neo4j_database": env.get("NEO4J_DATABASE") or None,
                "neo4j_namespace": f"bench-{uuid.uuid4().hex[:12]}",
            }
        merged = load_settings(data_dir=data_dir).model_dump()
        for name, values in sections.items():
            merged[name] = {**merged[name], **values}
        runtime = _runtime(Settings.model_validate(merged), cache)
        try:
            docs = corpus(count)
            ingest(runtime.job_services(), docs, extract_graph=False)
            refresh_in_process(runtime.graph_services(), rebuild=False)
            chunks = len(list(runtime.store.chunk_refs()))
            communities = len(runtime.graph().communities())
            ingest(runtime.job_services(), [PROBE, PROBE_KEPT], extract_graph=False)
            refresh_in_process(runtime.graph_services(), rebuild=False)
            probe = _counted_delete(runtime, PROBE.id, url, backend == "neo4j")
            real = _counted_delete(runtime, docs[DELETED].id, url, backend == "neo4j")
        finally:
            runtime.close()
    return {
        "documents": count,
        "chunks": chunks,
        "communities": communities,
        "probe": probe,
        "corpus": real,
    }


def _ratios(small: dict[str, Any], large: dict[str, Any]) -> dict[str, float | None]:
    return {
        k: round(large[k] / v, 2) if v else None
        for k, v in small.items()
        if isinstance(v, int | float) and not isinstance(v, bool)
    }


@contextmanager
def bolt_server() -> Iterator[dict[str, str]]:
    """The configured Neo4j (``NEO4J_*``), or an ArcadeDB stand-in for the run."""
    from bench.graph_backends import neo4j_server

    with neo4j_server() as env:
        yield env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--base", type=int, default=250, help="documents at the smaller size")
    parser.add_argument("--embed-cache", type=Path, default=None, help="vectors kept by text")
    parser.add_argument("--postgres", default=ADMIN_URL, help="an admin URL of the server")
    parser.add_argument(
        "--backends", default="sqlite,postgresql,neo4j", help="comma-separated subset"
    )
    args = parser.parse_args()
    backends = [b for b in args.backends.split(",") if b]
    out: dict[str, Any] = {
        "machine": machine(),
        "dataset": "ops_runbooks docs.jsonl + scifact corpus.jsonl (bench.scale.corpus)",
        "sizes": [args.base, 4 * args.base],
    }
    with tempfile.TemporaryDirectory(prefix="lore-delete-work-") as tmp:
        scratch = Path(tmp)
        cache = args.embed_cache or scratch / "vectors.sqlite"
        for backend in backends:
            with ExitStack() as stack:
                env: dict[str, str] = {"admin_url": args.postgres}
                if backend == "neo4j":  # the stand-in sends fd 1 to its log while it runs
                    bolt = stack.enter_context(bolt_server())
                    env.update(bolt)
                    out["neo4j_server"] = bolt.get("NEO4J_STAND_IN") or bolt["NEO4J_URI"]
                rows = [one_delete(backend, n, scratch, cache, env) for n in out["sizes"]]
            out[backend] = {
                "sizes": rows,
                "larger_over_smaller": {
                    k: _ratios(rows[0][k], rows[1][k]) for k in ("probe", "corpus")
                },
            }
            print(json.dumps({backend: out[backend]}), flush=True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
