"""Scale-out cost: ingest through workers on SQLite vs PostgreSQL, query latency on each.

    python -m bench.scaleout /work/shared/data/ops_runbooks/docs.jsonl [--limit 200]
        [--queries 100] [--threads 1] [--rounds 1] [--redis redis://127.0.0.1:6379/10]
        [--postgres postgresql://postgres@127.0.0.1:5432/postgres]

1. **Ingest.** The same ``--limit`` documents of a JSONL file (``_id``, ``title``,
   ``text``) go through the broker four times: 1 and 2 workers on SQLite (the workers
   and the client share one data dir: the embedded store lets several local processes
   write its WAL-mode files), 1 and 2 workers on PostgreSQL (each worker with its own
   empty data dir, a fresh database per variant). Every worker is a real
   ``celery -A workers.celery_app worker --pool=prefork --concurrency=1`` with its own
   Redis key prefix and queue, started and warmed (a small warm-up job per worker) before
   the clock starts. The documents are submitted with the client API the CLI and HTTP use
   (``app.ingest.submit_documents``) and the job is followed until it ends; every
   document must end ``done``. With ``--rounds R`` the four run R times (order rotated,
   fresh stores each round) and the median round of each is reported. Reports docs/s,
   chunks/s, per-worker figures, the ingest tasks each worker took, its task retries and
   "database is locked" lines in its log, and the CPU time the workers used
   (``worker_cores_used`` = CPU s / wall s: how much of the host they got;
   ``docs_per_worker_cpu_s``: throughput per CPU second, whatever the host's other load
   takes of the wall clock — though a CPU second does less when every core is busy).
   On PostgreSQL the server's backends for the workers (``application_name``
   ``lore-bench-worker``) are timed too (``postgres_backend_cpu_s``): a SQLite worker
   does that work in its own process, so ``docs_per_cpu_s_with_server`` compares like
   with like. The pool processes' main threads (they do the work) split the wall time
   into running, waiting for a core (``pool_runqueue_wait_s``: the host) and blocked
   (``pool_blocked_s``: the store's round trips, locks and disk, the broker).

   **Threads.** Every worker of every variant runs ``--threads`` torch threads (default
   1: ``LORE_EMBEDDING__THREADS`` and ``OMP_NUM_THREADS``; the settings' default is 2).
   A variant with N workers therefore asks for N cores on either store, so the pairs
   compared for the store (1 vs 1, 2 vs 2) split the CPU the same way, and 2 workers
   never run 4 threads on a 2-core host (with 1 thread, a pool process's main thread
   does all of its CPU work: nothing else oversubscribes). The price: one worker leaves
   a core idle, so "2 workers per worker / 1 worker" (``host_scaling``) measures whether
   the host has a free core per worker (with other work running, it has not), not the
   store.
2. **Query latency.** A ``lore serve`` replica on the 1-worker PostgreSQL store (its own
   empty data dir: it builds its index replicas from the change log) and one on the
   1-worker SQLite data dir (the embedded default), same documents, same process type.
   ``/readyz`` and ten warm-up queries warm both, then distinct hybrid
   ``POST /v1/memory/query`` requests taken from the documents' titles alternate between
   them (embedding cache on, but never hit). Reports p50/p95 of each and the ratio
   pg / sqlite.

Prints JSON with the machine, the figures and the ratios. Issue targets: per-worker
ingest with 2 PG workers within 15 % of SQLite's — measured against 2 SQLite workers on
the same host (``ingest_ratios.store``), >= 0.85; hybrid p50/p95 on PG <= 1.20 x SQLite.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.jobs import JobStatus
from bench.common import machine, percentiles, read_documents, runtime_for
from bench.processes import (
    backend_cpu_seconds,
    children,
    cpu_seconds,
    database,
    drop_keys,
    log_counts,
    main_thread_sched,
    postgres_started,
    served,
    start_worker,
    stop,
    time_split,
    wait_for_log,
)
from lore.models import SourceDocument

NOTE = (
    "2-core host shared with other users: the workers, their embedding model, PostgreSQL, "
    "Redis and the client compete for the same 2 cores. The store is compared at the same "
    "worker count (ingest_ratios.store: 1 vs 1, 2 vs 2), where both stores get the same "
    "host and CPU split; host_scaling (2 workers per worker over 1 worker) is bounded by "
    "the free cores, not by the store. Each worker runs in a session (scheduler autogroup) "
    "of its own, so it gets its own CPU share; each worker's torch threads = "
    "threads_per_worker. per_worker_cpu_s ratios are insensitive to the host's other load "
    "but leave out PostgreSQL's own work; per_cpu_s_with_server counts it."
)
WORKER_APPLICATION = "lore-bench-worker"  # application_name of the workers' PG sessions

WARM_UP = [f"warm-up query {i}: pod restarts after a node drain" for i in range(10)]


@dataclass(frozen=True)
class Variant:
    """One ingest configuration: how many workers, on which store."""

    name: str
    workers: int
    postgres: bool


VARIANTS = (  # pairs interleaved, so a rotation keeps each pair's runs close in time
    Variant("sqlite_1_worker", 1, False),
    Variant("pg_1_worker", 1, True),
    Variant("sqlite_2_workers", 2, False),
    Variant("pg_2_workers", 2, True),
)


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
    from app.ingest import submit_documents
    from app.jobs import follow

    jobs = runtime.jobs()
    start = time.perf_counter()
    job = submit_documents(runtime.store, runtime.jobs(), runtime.dispatcher, docs)
    info = follow(jobs, job, poll_s=0.05, timeout_s=3600)
    seconds = time.perf_counter() - start
    statuses = jobs.statuses(job)
    not_done = {d: s for d, (s, _) in statuses.items() if s is not JobStatus.DONE}
    if info.state != "done" or len(statuses) != len(docs) or not_done:
        raise RuntimeError(f"job {job} ended {info.state}: {info.counts}; not done: {not_done}")
    return seconds, dict(info.counts)


def start_workers(
    variant: Variant, env: dict[str, str], shared: Path, logs: Path
) -> tuple[list[subprocess.Popen[bytes]], list[Path]]:
    """The variant's workers, each up (SQLite: on the shared dir; PG: each its own dir)."""
    procs: list[subprocess.Popen[bytes]] = []
    paths: list[Path] = []
    own = dict(env)
    if variant.postgres:  # the workers' server sessions, told apart from the client's
        own["LORE_STORE__URL"] = f"{env['LORE_STORE__URL']}?application_name={WORKER_APPLICATION}"
    for i in range(variant.workers):
        data = shared / f"worker-{i}" if variant.postgres else shared
        data.mkdir(exist_ok=True)
        log = logs / f"{variant.name}-worker-{i}.log"
        name = f"{env['LORE_BROKER__QUEUE']}-{i}"
        procs.append(start_worker(name, {**own, "LORE_DATA_DIR": str(data)}, log))
        paths.append(log)
        wait_for_log(procs[-1], log, b" ready.", 300)
    return procs, paths


def server_cpu(args: argparse.Namespace, store_url: str | None) -> dict[int, float]:
    """CPU so far of the PostgreSQL backends serving the workers (none on SQLite)."""
    if not store_url:
        return {}
    return backend_cpu_seconds(args.postgres, store_url, WORKER_APPLICATION)


def ingest_variant(
    variant: Variant, docs: list[SourceDocument], store_url: str | None, root: Path, args: Any
) -> dict[str, Any]:
    """Start and warm the variant's workers, then time the ingest of ``docs``."""
    env = variant_env(variant, store_url, args)
    shared = root / variant.name
    client_dir = shared / "client" if store_url else shared
    client_dir.mkdir(parents=True)
    broker = {k: env[f"LORE_BROKER__{k.upper()}"] for k in ("url", "key_prefix", "queue")}
    runtime = runtime_for(client_dir, broker=broker, store={"url": store_url})
    procs: list[subprocess.Popen[bytes]] = []
    started = postgres_started(args.postgres)
    try:
        procs, logs = start_workers(variant, env, shared, root)
        batch = runtime.settings.workers.ingest_batch_documents
        run_job(runtime, warm_up_documents(batch * variant.workers))
        offsets = [log.stat().st_size for log in logs]
        before = runtime.store.counts()["chunks"]
        load = os.getloadavg()[0]
        pool = children([proc.pid for proc in procs])
        sched = [main_thread_sched(pid) for pid in pool]
        cpu, server = cpu_seconds([proc.pid for proc in procs]), server_cpu(args, store_url)
        seconds, counts = run_job(runtime, docs)
        cpu = cpu_seconds([proc.pid for proc in procs]) - cpu
        split = time_split(pool, sched, seconds)
        server_s = sum(s - server.get(pid, 0.0) for pid, s in server_cpu(args, store_url).items())
        chunks = runtime.store.counts()["chunks"] - before
        found = [log_counts(log, at) for log, at in zip(logs, offsets, strict=True)]
    finally:
        stop(procs)
        runtime.close()
        drop_keys(args.redis, env["LORE_BROKER__KEY_PREFIX"])
    figures = ingest_figures(variant, len(docs), chunks, seconds, counts)
    restarted = postgres_started(args.postgres) != started
    return {
        **figures,
        "ingest_tasks_per_worker": [f["taken"] for f in found],
        "task_retries_per_worker": [f["retried"] for f in found],
        "database_locked_log_lines": sum(f["locked"] for f in found),
        **split,
        "worker_cpu_s": round(cpu, 2),
        "worker_cores_used": round(cpu / seconds, 2),
        "docs_per_worker_cpu_s": round(len(docs) / cpu, 3),
        "postgres_backend_cpu_s": round(server_s, 2) if store_url else None,
        "docs_per_cpu_s_with_server": round(len(docs) / (cpu + server_s), 3),
        "loadavg_1m_before": round(load, 2),
        "loadavg_1m_after": round(os.getloadavg()[0], 2),
        "postgres_restarted_meanwhile": restarted,
    }


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


def ratios(runs: dict[str, dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Throughput ratios: PG over SQLite at the same worker count, and host scaling.

    ``store``: per-worker docs/s, PG over SQLite with as many workers (the acceptance
    figure is ``pg_2_over_sqlite_2_per_worker``); ``per_worker_cpu_s`` and
    ``per_cpu_s_with_server``: the same pairs per CPU second of the workers (and of the
    PG backends serving them); ``host_scaling``: per-worker docs/s with 2 workers over 1
    worker, which on a host without a free core per worker measures the host.
    """
    s1, s2 = runs["sqlite_1_worker"], runs["sqlite_2_workers"]
    p1, p2 = runs["pg_1_worker"], runs["pg_2_workers"]

    def ratio(top: dict[str, Any], bottom: dict[str, Any], key: str) -> float:
        return round(float(top[key]) / float(bottom[key]), 3)

    def pairs(key: str) -> dict[str, float]:
        return {"pg_1_over_sqlite_1": ratio(p1, s1, key), "pg_2_over_sqlite_2": ratio(p2, s2, key)}

    per_worker = "docs_per_s_per_worker"
    return {
        "store": {
            "pg_2_over_sqlite_2_per_worker": ratio(p2, s2, per_worker),
            "pg_1_over_sqlite_1": ratio(p1, s1, per_worker),
        },
        "per_worker_cpu_s": pairs("docs_per_worker_cpu_s"),
        "per_cpu_s_with_server": pairs("docs_per_cpu_s_with_server"),
        "host_scaling": {
            "pg_2_per_worker_over_sqlite_1": ratio(p2, s1, per_worker),
            "pg_2_per_worker_over_pg_1": ratio(p2, p1, per_worker),
            "sqlite_2_per_worker_over_sqlite_1": ratio(s2, s1, per_worker),
        },
    }


def median_run(rounds: list[dict[str, dict[str, Any]]], name: str) -> dict[str, Any]:
    """The round of ``name`` with the median throughput (the upper one of an even count)."""
    ordered = sorted((r[name] for r in rounds), key=lambda figures: figures["docs_per_s"])
    return ordered[len(ordered) // 2]


def median_ratios(per_round: list[dict[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
    """Each ratio's median over the rounds (paired: both variants of a round ran close)."""
    return {
        group: {key: statistics.median(r[group][key] for r in per_round) for key in keys}
        for group, keys in per_round[0].items()
    }


def ingest_rounds(
    args: argparse.Namespace, docs: list[SourceDocument], root: Path, stack: ExitStack
) -> tuple[list[dict[str, dict[str, Any]]], Path, str]:
    """Every variant per round (order rotated each round, fresh stores each time).

    Returns the rounds, and the last round's SQLite data dir and 1-worker PG store.
    """
    rounds: list[dict[str, dict[str, Any]]] = []
    for number in range(args.rounds):
        where = root / f"round-{number}"
        urls = {
            v.name: stack.enter_context(database(args.postgres)) for v in VARIANTS if v.postgres
        }
        order = VARIANTS[number % len(VARIANTS) :] + VARIANTS[: number % len(VARIANTS)]
        runs: dict[str, dict[str, Any]] = {}
        for variant in order:
            runs[variant.name] = ingest_variant(variant, docs, urls.get(variant.name), where, args)
            print(json.dumps({variant.name: runs[variant.name]}), file=sys.stderr, flush=True)
        rounds.append({v.name: runs[v.name] for v in VARIANTS})
    return rounds, where / "sqlite_1_worker", urls["pg_1_worker"]


def run(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    """Every ingest variant, then the latency comparison; the JSON to print."""
    docs = read_documents(args.dataset, args.limit)
    load_before = round(os.getloadavg()[0], 2)
    with ExitStack() as stack:
        rounds, sqlite_dir, pg_url = ingest_rounds(args, docs, root, stack)
        load_after = [round(x, 2) for x in os.getloadavg()]
        started = postgres_started(args.postgres)
        query = latency(sqlite_dir, pg_url, root, query_texts(docs, args.queries))
        query["postgres_restarted_meanwhile"] = postgres_started(args.postgres) != started
    runs = {v.name: median_run(rounds, v.name) for v in VARIANTS}
    per_round = [ratios(r) for r in rounds]
    return {
        "machine": {**machine(), "loadavg_1m_before": load_before},
        "dataset": str(args.dataset),
        "documents": len(docs),
        "threads_per_worker": args.threads,
        "rounds": args.rounds,
        "note": NOTE,
        "ingest": runs,
        "ingest_ratios": ratios(runs),
        "ingest_targets": {"store.pg_2_over_sqlite_2_per_worker": ">= 0.85"},
        "ingest_ratios_median_of_rounds": median_ratios(per_round) if args.rounds > 1 else None,
        "ingest_all_rounds": per_round if args.rounds > 1 else None,
        "loadavg_1m_5m_15m_after_ingest": load_after,
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
    parser.add_argument("--rounds", type=int, default=1, help="ingest rounds (median kept)")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/10")
    parser.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--keep", action="store_true", help="keep the scratch dir (logs)")
    args = parser.parse_args(argv)
    if min(args.limit, args.queries, args.threads, args.rounds) < 1:
        parser.error("--limit, --queries, --threads and --rounds must be at least 1")
    root = Path(tempfile.mkdtemp(prefix="lore-bench-scaleout-"))
    try:
        out = run(args, root)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
