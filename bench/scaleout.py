"""What PostgreSQL costs and buys: ingest throughput and query latency, PostgreSQL vs SQLite.

``python -m bench.scaleout ../shared/data/ops_runbooks/docs.jsonl --limit 200 [--queries 50]``

In one run, on the same documents:

1. ingest docs/s through warmed ``celery worker --pool=solo`` processes (started before
   the clock, as in ``bench.pipeline``): 1 worker on the embedded SQLite store (workers
   and the client share its data directory), then 1 and 2 workers on PostgreSQL (each
   worker with its own data directory, sharing only the database and Redis);
2. hybrid query p50/p95 of a replica — the runtime an API process serves — on an empty
   data directory that first catches its indexes up from PostgreSQL, against the
   embedded SQLite directory of step 1 (the default setup). Queries are the documents'
   titles.

Each PostgreSQL run gets a database of its own on ``--postgres`` (created and dropped).
Prints JSON with the figures and their ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.common import machine, percentiles, runtime_for
from bench.pipeline import _drop, _wait_ready
from lore.models import SourceDocument
from retrieval.contract import QueryRequest

ROOT = Path(__file__).resolve().parents[1]


def load_documents(path: Path, limit: int) -> list[SourceDocument]:
    """The first ``limit`` records (``_id``, ``text``, ``title``) of a JSON Lines file."""
    docs: list[SourceDocument] = []
    with path.open() as lines:
        for line in lines:
            record = json.loads(line)
            doc_id = str(record["_id"])
            docs.append(SourceDocument(doc_id, doc_id, record["text"], record.get("title", "")))
            if len(docs) == limit:
                break
    return docs


@contextmanager
def postgres_database(admin_url: str) -> Iterator[str]:
    """A new database on the server of ``admin_url``; dropped afterwards."""
    import psycopg

    name = f"lore_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"{admin_url.partition('?')[0].rsplit('/', 1)[0]}/{name}"
    finally:
        from lore.db import close_all_postgres

        close_all_postgres()
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _start_worker(env: dict[str, str], name: str, log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [
                *(sys.executable, "-m", "celery", "-A", "workers.celery_app", "worker"),
                *("--pool=solo", "--without-gossip", "--without-mingle"),
                *("--without-heartbeat", "-n", f"{name}@%h"),
                *("-Q", env["LORE_BROKER__QUEUE"], "-l", "warning"),
            ],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def ingest_run(
    docs: list[SourceDocument], workers: int, redis_url: str, scratch: Path, url: str | None
) -> dict[str, Any]:
    """Time one ingest job through ``workers`` warmed workers; ``url`` None = SQLite."""
    from workers.client import submit_documents

    tag = uuid.uuid4().hex[:8]
    label = f"{'pg' if url else 'sqlite'}-{workers}"
    client_dir = scratch / label / "client"
    threads = max(1, (os.cpu_count() or 2) // workers)
    broker = {"url": redis_url, "key_prefix": f"lore-bench-{tag}:", "queue": f"lore-bench-{tag}"}
    env = {
        **os.environ,
        "LORE_BROKER__URL": redis_url,
        "LORE_BROKER__KEY_PREFIX": broker["key_prefix"],
        "LORE_BROKER__QUEUE": broker["queue"],
        "LORE_EMBEDDING__THREADS": str(threads),
        "OMP_NUM_THREADS": str(threads),
        **({"LORE_STORE__URL": url} if url else {}),
    }
    client_dir.mkdir(parents=True)
    logs, procs = [], []
    for i in range(workers):
        own = scratch / label / f"worker-{i}" if url else client_dir  # SQLite: one directory
        logs.append(scratch / label / f"worker-{i}.log")
        procs.append(_start_worker({**env, "LORE_DATA_DIR": str(own)}, f"b{i}-{tag}", logs[-1]))
    store = {"store": {"url": url}} if url else {}
    runtime = runtime_for(client_dir, broker=broker, **store)
    jobs = runtime.jobs()
    try:
        _wait_ready(procs, logs, redis_url, broker["key_prefix"])
        start = time.perf_counter()
        job = submit_documents(runtime.settings, runtime, jobs, docs)
        while (info := jobs.get(job)) is not None and info.state == "running":
            time.sleep(0.05)
        seconds = time.perf_counter() - start
        if info is None or info.counts.get("done", 0) != len(docs):
            raise RuntimeError(f"{label}: the job ended with {info}")
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            proc.wait(timeout=60)
        runtime.close()
        _drop(redis_url, broker["key_prefix"])
    return {
        "store": "postgresql" if url else "sqlite",
        "workers": workers,
        "seconds": round(seconds, 2),
        "docs_per_s": round(len(docs) / seconds, 2),
        "data_dir": str(client_dir),
    }


def query_latency(data_dir: Path, url: str | None, queries: list[str]) -> dict[str, Any]:
    """Hybrid query percentiles of a runtime on ``data_dir`` (indexes caught up first)."""
    store = {"store": {"url": url}} if url else {}
    runtime = runtime_for(data_dir, **store)
    try:
        start = time.perf_counter()
        runtime.sync_indexes()
        catch_up_s = time.perf_counter() - start
        runtime.query_sync(QueryRequest(search_text="warm up", top_k=10))
        samples = []
        for text in queries:
            t0 = time.perf_counter()
            runtime.query_sync(QueryRequest(search_text=text, top_k=10))
            samples.append((time.perf_counter() - t0) * 1000)
    finally:
        runtime.close()
    return {"index_catch_up_s": round(catch_up_s, 2), **percentiles(samples)}


def run(args: argparse.Namespace, scratch: Path) -> dict[str, Any]:
    """Every measurement of one run, with the ratios."""
    docs = load_documents(args.dataset, args.limit)
    queries = [d.title or d.text[:80] for d in docs][: args.queries]
    sqlite = ingest_run(docs, 1, args.redis, scratch, None)
    with postgres_database(args.postgres) as one, postgres_database(args.postgres) as two:
        pg1 = ingest_run(docs, 1, args.redis, scratch, one)
        pg2 = ingest_run(docs, 2, args.redis, scratch, two)
        replica = query_latency(scratch / "replica", one, queries)
        embedded = query_latency(Path(sqlite["data_dir"]), None, queries)
    return {
        "machine": machine(),
        "dataset": str(args.dataset),
        "documents": len(docs),
        "ingest": {
            "sqlite_1_worker": sqlite,
            "postgresql_1_worker": pg1,
            "postgresql_2_workers": pg2,
        },
        "ingest_ratios": {
            "postgresql_1_vs_sqlite_1": round(pg1["docs_per_s"] / sqlite["docs_per_s"], 3),
            "postgresql_2_vs_postgresql_1": round(pg2["docs_per_s"] / pg1["docs_per_s"], 3),
        },
        "hybrid_query": {"postgresql_replica": replica, "embedded_sqlite": embedded},
        "query_p50_ratio_postgresql_vs_sqlite": round(replica["p50_ms"] / embedded["p50_ms"], 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dataset", type=Path, help="a JSON Lines file of {_id, text, title}")
    parser.add_argument("--limit", type=int, default=200, help="documents to ingest")
    parser.add_argument("--queries", type=int, default=50, help="queries to time")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/10")
    parser.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432/postgres")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="lore-bench-scaleout-"))
    try:
        report = run(args, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    for entry in report["ingest"].values():
        entry.pop("data_dir")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
