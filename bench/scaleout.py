"""Scale-out cost: ingest through workers on SQLite vs PostgreSQL, query latency on each.

    python -m bench.scaleout /work/shared/data/ops_runbooks/docs.jsonl [--limit 200]
        [--queries 100] [--threads 1] [--redis redis://127.0.0.1:6379/10]
        [--postgres postgresql://postgres@127.0.0.1:5432/postgres]

1. **Ingest.** The same ``--limit`` documents of a JSONL file (``_id``, ``title``,
   ``text``) go through the broker three times: 1 worker on SQLite (workers and client
   share one data dir), 1 worker on PostgreSQL, 2 workers on PostgreSQL (each worker with
   its own empty data dir, a fresh database per variant). Every worker is a real
   ``celery -A workers.celery_app worker --pool=prefork --concurrency=1`` with its own
   Redis key prefix and queue, started and warmed (a small warm-up job per worker) before
   the clock starts. The documents are submitted with the client API the CLI and HTTP
   use (``workers.client.submit_documents``) and the job is followed until it ends; every
   document must end ``done``. Reports docs/s, chunks/s and per-worker figures.
2. **Query latency.** A ``lore serve`` replica on the 1-worker PostgreSQL store (its own
   empty data dir: it builds its index replicas from the change log) and one on the
   SQLite data dir (the embedded default), same documents, same process type. ``/readyz``
   and ten warm-up queries warm both, then distinct hybrid ``POST /v1/memory/query``
   requests taken from the documents' titles alternate between them (embedding cache on,
   but never hit). Reports p50/p95 of each and the ratio pg / sqlite.

Prints JSON with the machine, the figures and the ratios (issue targets: per-worker
ingest with 2 PG workers ≥ 0.85 x 1 SQLite worker; hybrid p50/p95 on PG ≤ 1.20 x SQLite).
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
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import machine, percentiles, runtime_for
from lore.jobs import JobStatus
from lore.models import SourceDocument

ROOT = Path(__file__).resolve().parents[1]
NOTE = (
    "2-core host: the workers, their embedding model, PostgreSQL, Redis and the client "
    "share the same 2 cores, so 2 workers compete with each other (and with the database) "
    "for CPU; per-worker throughput with 2 workers is bounded by that, not by the store. "
    "Each worker's torch threads = --threads."
)

WARM_UP = [f"warm-up query {i}: pod restarts after a node drain" for i in range(10)]


@dataclass(frozen=True)
class Variant:
    """One ingest configuration: how many workers, on which store."""

    name: str
    workers: int
    postgres: bool


VARIANTS = (
    Variant("sqlite_1_worker", 1, False),
    Variant("pg_1_worker", 1, True),
    Variant("pg_2_workers", 2, True),
)


def read_documents(path: Path, limit: int) -> list[SourceDocument]:
    """The first ``limit`` records of a JSONL file with ``_id``, ``text`` and ``title``."""
    docs: list[SourceDocument] = []
    with path.open() as lines:
        for line in lines:
            record = json.loads(line)
            doc_id = str(record["_id"])
            docs.append(SourceDocument(doc_id, doc_id, record["text"], record.get("title", "")))
            if len(docs) == limit:
                break
    return docs


def warm_up_documents(count: int) -> list[SourceDocument]:
    """Short documents of their own (ids ``warmup/…``) that warm every worker's model."""
    return [
        SourceDocument(
            f"warmup/{i}",
            f"warmup/{i}",
            f"# Warm-up {i}\n\nThe scheduler restarts job {i} when its lease expires.",
            f"Warm-up {i}",
        )
        for i in range(count)
    ]


@contextmanager
def database(admin_url: str) -> Iterator[str]:
    """A fresh PostgreSQL database for one variant; dropped afterwards."""
    import psycopg

    from lore.db import close_all_postgres

    name = f"lore_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"{admin_url.partition('?')[0].rsplit('/', 1)[0]}/{name}"
    finally:
        close_all_postgres()
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def start_worker(name: str, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """One ``celery worker --pool=prefork --concurrency=1`` process."""
    with log.open("wb") as out:
        return subprocess.Popen(
            [
                *(sys.executable, "-m", "celery", "-A", "workers.celery_app", "worker"),
                *("--pool=prefork", "--concurrency=1", "--without-gossip"),
                *("--without-mingle", "--without-heartbeat", "-n", f"{name}@%h"),
                *("-Q", env["LORE_BROKER__QUEUE"], "-l", "info"),
            ],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT), **env},
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def wait_for_log(proc: subprocess.Popen[bytes], log: Path, text: bytes, timeout_s: float) -> None:
    """Wait until ``text`` appears in a process's log; fail if it exits first."""
    deadline = time.monotonic() + timeout_s
    while text not in log.read_bytes():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{log}: {log.read_text()[-3000:]}")
        time.sleep(0.2)


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM the processes this benchmark started; kill any that does not stop."""
    for proc in procs:
        proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def drop_keys(url: str, prefix: str) -> None:
    """Delete every Redis key of one variant."""
    import redis

    client = redis.Redis.from_url(url)
    try:
        keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
        for start in range(0, len(keys), 500):
            client.delete(*keys[start : start + 500])
    finally:
        client.close()


def variant_env(
    variant: Variant, store_url: str | None, args: argparse.Namespace
) -> dict[str, str]:
    """The settings every process of a variant shares (its own Redis prefix and queue)."""
    tag = f"{variant.name}-{uuid.uuid4().hex[:8]}"
    env = {
        "LORE_BROKER__URL": args.redis,
        "LORE_BROKER__KEY_PREFIX": f"lore-bench-{tag}:",
        "LORE_BROKER__QUEUE": f"lore-bench-{tag}",
        "LORE_EMBEDDING__THREADS": str(args.threads),
        "OMP_NUM_THREADS": str(args.threads),
    }
    if store_url:
        env["LORE_STORE__URL"] = store_url
    return env


def run_job(runtime: Any, docs: list[SourceDocument]) -> tuple[float, dict[str, int]]:
    """Submit ``docs`` as one job, follow it to its end; the seconds and the job's counts."""
    from workers.client import follow, submit_documents

    jobs = runtime.jobs()
    start = time.perf_counter()
    job = submit_documents(runtime.settings, runtime, jobs, docs)
    info = follow(jobs, job, poll_s=0.05, timeout_s=3600)
    seconds = time.perf_counter() - start
    statuses = jobs.statuses(job)
    not_done = {d: s for d, (s, _) in statuses.items() if s is not JobStatus.DONE}
    if info.state != "done" or len(statuses) != len(docs) or not_done:
        raise RuntimeError(f"job {job} ended {info.state}: {info.counts}; not done: {not_done}")
    return seconds, dict(info.counts)


def ingest_variant(
    variant: Variant, docs: list[SourceDocument], store_url: str | None, root: Path, args: Any
) -> dict[str, Any]:
    """Start and warm the variant's workers, then time the ingest of ``docs``."""
    env = variant_env(variant, store_url, args)
    shared = root / variant.name
    client_dir = shared if store_url is None else shared / "client"
    client_dir.mkdir(parents=True)
    procs: list[subprocess.Popen[bytes]] = []
    sections: dict[str, Any] = {
        "broker": {
            "url": args.redis,
            "key_prefix": env["LORE_BROKER__KEY_PREFIX"],
            "queue": env["LORE_BROKER__QUEUE"],
        },
        "store": {"url": store_url},
    }
    runtime = runtime_for(client_dir, **sections)
    try:
        for i in range(variant.workers):
            data = shared if store_url is None else shared / f"worker-{i}"
            data.mkdir(exist_ok=True)
            log = root / f"{variant.name}-worker-{i}.log"
            procs.append(
                start_worker(
                    f"{env['LORE_BROKER__QUEUE']}-{i}", {**env, "LORE_DATA_DIR": str(data)}, log
                )
            )
            wait_for_log(procs[-1], log, b" ready.", 300)
        batch = runtime.settings.workers.ingest_batch_documents
        run_job(runtime, warm_up_documents(batch * variant.workers))
        before = runtime.store.counts()["chunks"]
        seconds, counts = run_job(runtime, docs)
        chunks = runtime.store.counts()["chunks"] - before
    finally:
        stop(procs)
        runtime.close()
        drop_keys(args.redis, env["LORE_BROKER__KEY_PREFIX"])
    return ingest_figures(variant, len(docs), chunks, seconds, counts)


def ingest_figures(
    variant: Variant, documents: int, chunks: int, seconds: float, counts: dict[str, int]
) -> dict[str, Any]:
    """Throughput of one variant, total and per worker."""
    return {
        "workers": variant.workers,
        "store": "postgresql" if variant.postgres else "sqlite",
        "documents": documents,
        "chunks": chunks,
        "job_counts": counts,
        "seconds": round(seconds, 2),
        "docs_per_s": round(documents / seconds, 3),
        "chunks_per_s": round(chunks / seconds, 2),
        "docs_per_s_per_worker": round(documents / seconds / variant.workers, 3),
        "chunks_per_s_per_worker": round(chunks / seconds / variant.workers, 2),
    }


def free_port() -> int:
    """A free TCP port on loopback."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def served(data_dir: Path, store_url: str | None, log: Path) -> Iterator[str]:
    """A ``lore serve`` subprocess on ``data_dir`` (and the store, if a URL); its base URL."""
    import httpx

    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LORE_")}
    env.update({"LORE_DATA_DIR": str(data_dir), "PYTHONPATH": str(ROOT)})
    if store_url:
        env["LORE_STORE__URL"] = store_url
    code = "import sys; from api.cli import main; sys.exit(main())"
    command = [sys.executable, "-c", code, "serve", "--port", str(port), "--no-auth"]
    with log.open("wb") as out:
        proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for_log(proc, log, b"Uvicorn running", 300)
        ready = httpx.get(f"{base}/readyz", timeout=600)
        if ready.status_code != 200:
            raise RuntimeError(f"{base} not ready: {ready.text}")
        yield base
    finally:
        stop([proc])


def query_texts(docs: list[SourceDocument], count: int) -> list[str]:
    """``count`` distinct queries: the documents' titles, then their first 12 words.

    Distinct, so no query is answered from a server's query-embedding cache (each
    server sees each query once); cycled only when the documents run out.
    """
    candidates = [d.title for d in docs] + [" ".join(d.text.split()[:12]) for d in docs]
    texts = list(dict.fromkeys(t for t in candidates if t.strip()))
    return [texts[i % len(texts)] for i in range(count)]


def interleaved(bases: dict[str, str], queries: list[str]) -> dict[str, dict[str, float]]:
    """Hybrid latency per server, the servers taking turns query by query."""
    import httpx

    names = list(bases)
    samples: dict[str, list[float]] = {name: [] for name in names}
    with httpx.Client(timeout=120) as client:

        def ask(name: str, text: str) -> float:
            start = time.perf_counter()
            reply = client.post(
                f"{bases[name]}/v1/memory/query", json={"search_text": text, "top_k": 10}
            )
            elapsed = (time.perf_counter() - start) * 1000
            body = reply.json()
            if reply.status_code != 200 or not body["results"]:
                raise RuntimeError(f"{name}: {reply.status_code} {body}")
            return elapsed

        for text in WARM_UP:
            for name in names:
                ask(name, text)
        for n, text in enumerate(queries):
            for name in names[n % len(names) :] + names[: n % len(names)]:
                samples[name].append(ask(name, text))
    return {name: percentiles(values) for name, values in samples.items()}


def latency(sqlite_dir: Path, pg_url: str, root: Path, queries: list[str]) -> dict[str, Any]:
    """p50/p95 of hybrid queries through a PG replica and an embedded server, interleaved."""
    replica = root / "pg-replica"
    replica.mkdir()
    with ExitStack() as stack:
        bases = {
            "postgresql": stack.enter_context(served(replica, pg_url, root / "serve-pg.log")),
            "sqlite": stack.enter_context(served(sqlite_dir, None, root / "serve-sqlite.log")),
        }
        figures = interleaved(bases, queries)
    pg, lite = figures["postgresql"], figures["sqlite"]
    return {
        "queries": len(queries),
        "mode": "hybrid (dense 1, sparse 1, rrf k 60), top_k 10, POST /v1/memory/query",
        **figures,
        "ratio_p50_pg_over_sqlite": round(pg["p50_ms"] / lite["p50_ms"], 3),
        "ratio_p95_pg_over_sqlite": round(pg["p95_ms"] / lite["p95_ms"], 3),
    }


def ratios(runs: dict[str, dict[str, Any]]) -> dict[str, float]:
    """Throughput ratios against one worker on SQLite."""
    base = runs["sqlite_1_worker"]["docs_per_s"]
    return {
        "pg_2_workers_per_worker_over_sqlite_1_worker": round(
            runs["pg_2_workers"]["docs_per_s_per_worker"] / base, 3
        ),
        "pg_1_worker_over_sqlite_1_worker": round(runs["pg_1_worker"]["docs_per_s"] / base, 3),
        "pg_2_workers_total_over_sqlite_1_worker": round(
            runs["pg_2_workers"]["docs_per_s"] / base, 3
        ),
    }


def run(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    """Every ingest variant, then the latency comparison; the JSON to print."""
    docs = read_documents(args.dataset, args.limit)
    runs: dict[str, dict[str, Any]] = {}
    with ExitStack() as stack:
        urls = {
            v.name: stack.enter_context(database(args.postgres)) for v in VARIANTS if v.postgres
        }
        for variant in VARIANTS:
            runs[variant.name] = ingest_variant(variant, docs, urls.get(variant.name), root, args)
            print(json.dumps({variant.name: runs[variant.name]}), file=sys.stderr, flush=True)
        queries = query_texts(docs, args.queries)
        query = latency(root / "sqlite_1_worker", urls["pg_1_worker"], root, queries)
    return {
        "machine": machine(),
        "dataset": str(args.dataset),
        "documents": len(docs),
        "threads_per_worker": args.threads,
        "note": NOTE,
        "ingest": runs,
        "ingest_ratios": ratios(runs),
        "ingest_targets": {"pg_2_workers_per_worker_over_sqlite_1_worker": ">= 0.85"},
        "query_latency": query,
        "query_targets": {
            "ratio_p50_pg_over_sqlite": "<= 1.20",
            "ratio_p95_pg_over_sqlite": "<= 1.20",
        },
    }


def main(argv: list[str] | None = None) -> None:
    """Parse the arguments, run the benchmark in a scratch directory, print the JSON."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("dataset", type=Path, help="JSONL with _id, title, text per line")
    parser.add_argument("--limit", type=int, default=200, help="documents to ingest")
    parser.add_argument("--queries", type=int, default=100, help="hybrid queries per server")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per worker")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/10")
    parser.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--keep", action="store_true", help="keep the scratch dir (logs)")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="lore-bench-scaleout-"))
    try:
        out = run(args, root)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
