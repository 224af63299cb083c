"""Processes and stores the scale-out benchmark starts, and cleans up after itself.

A fresh PostgreSQL database, ``celery worker`` and ``lore serve`` subprocesses (run from
this checkout), Redis keys under one prefix. Only processes started here are stopped.
Each subprocess starts its own session: with the kernel's scheduler autogroups (on by
default) CPU is shared fairly between sessions, so workers in the benchmark's session
would split one share between them however many there are; in sessions of their own
each worker gets a share, as it would on a host of its own.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def clean_environ() -> dict[str, str]:
    """The environment minus ``LORE_*``, so a child gets only the settings given here."""
    return {k: v for k, v in os.environ.items() if not k.startswith("LORE_")}


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


def postgres_started(admin_url: str) -> str:
    """When the PostgreSQL server last started (a change means it restarted meanwhile)."""
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as admin:
        row = admin.execute("SELECT pg_postmaster_start_time()::text").fetchone()
    return str(row[0]) if row else ""


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
            env={**clean_environ(), "PYTHONPATH": str(ROOT), **env},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own scheduler autogroup: its own CPU share
        )


def own_cpu_seconds(pid: int) -> float:
    """CPU time (user + system) one process has used so far (0 once it has exited)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_seconds(pids: list[int]) -> float:
    """CPU time (user + system) used so far by these processes and their children."""
    total = 0.0
    seen: set[int] = set()
    todo = list(pids)
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        total += own_cpu_seconds(pid)
        try:
            for task in Path(f"/proc/{pid}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total


def children(pids: list[int]) -> list[int]:
    """The direct children of these processes (a prefork worker's pool processes)."""
    found: list[int] = []
    for pid in pids:
        try:
            for task in Path(f"/proc/{pid}/task").iterdir():
                found += [int(c) for c in (task / "children").read_text().split()]
        except (FileNotFoundError, ProcessLookupError):
            continue
    return found


def main_thread_sched(pid: int) -> tuple[float, float]:
    """Seconds a process's main thread has run, and waited runnable for a core.

    From ``/proc/<pid>/schedstat``; wall time minus both is time it was blocked
    (waiting on a socket, a lock, the disk, or for work).
    """
    try:
        ran, waited, _ = Path(f"/proc/{pid}/schedstat").read_text().split()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0, 0.0
    return int(ran) / 1e9, int(waited) / 1e9


def backend_cpu_seconds(admin_url: str, store_url: str, application: str) -> dict[int, float]:
    """CPU time so far of each PostgreSQL backend serving ``application`` on a database.

    The server runs on this host, so its backends' ``/proc`` entries are readable: the
    work PostgreSQL does for the workers, which a SQLite worker does in its own process.
    """
    import psycopg

    name = store_url.partition("?")[0].rsplit("/", 1)[1]
    with psycopg.connect(admin_url, autocommit=True) as admin:
        rows = admin.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND application_name = %s",
            (name, application),
        ).fetchall()
    return {int(pid): own_cpu_seconds(int(pid)) for (pid,) in rows}


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


def free_port() -> int:
    """A free TCP port on loopback."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def served(data_dir: Path, store_url: str | None, log: Path) -> Iterator[str]:
    """A ``lore serve`` subprocess on ``data_dir`` (and the store, if a URL); its base URL."""
    import httpx

    port = free_port()
    env = clean_environ()
    env.update({"LORE_DATA_DIR": str(data_dir), "PYTHONPATH": str(ROOT)})
    if store_url:
        env["LORE_STORE__URL"] = store_url
    code = "import sys; from api.cli import main; sys.exit(main())"
    command = [sys.executable, "-c", code, "serve", "--port", str(port), "--no-auth"]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            command,
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for_log(proc, log, b"Uvicorn running", 300)
        ready = httpx.get(f"{base}/readyz", timeout=600)
        if ready.status_code != 200:
            raise RuntimeError(f"{base} not ready: {ready.text}")
        yield base
    finally:
        stop([proc])


def log_counts(log: Path, offset: int) -> dict[str, int]:
    """What a worker's log says after ``offset`` bytes: ingest tasks taken, retries, locks."""
    lines = log.read_bytes()[offset:].decode(errors="replace").splitlines()
    ingest = [line for line in lines if "lore.ingest_documents[" in line]
    return {
        "taken": sum(1 for line in ingest if "received" in line),
        "retried": sum(1 for line in lines if "] retry: " in line),
        "locked": sum(1 for line in lines if "database is locked" in line),
    }


def time_split(
    pool: list[int], before: list[tuple[float, float]], seconds: float
) -> dict[str, float]:
    """Where the pool processes' main threads spent the run, summed over the workers.

    Running, waiting runnable for a core (``pool_runqueue_wait_s``: the host's load), or
    blocked (``pool_blocked_s``, the rest: on the store, the broker, the disk, a lock, or
    idle once no task is left for it).
    """
    after = [main_thread_sched(pid) for pid in pool]
    ran = sum(a[0] - b[0] for a, b in zip(after, before, strict=True))
    waited = sum(a[1] - b[1] for a, b in zip(after, before, strict=True))
    return {
        "pool_main_thread_ran_s": round(ran, 2),
        "pool_runqueue_wait_s": round(waited, 2),
        "pool_blocked_s": round(seconds * len(pool) - ran - waited, 2),
    }
