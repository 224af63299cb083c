"""Real Redis, real ``celery worker`` subprocesses: helpers shared by the worker tests.

Every test session gets its own Redis key prefix and queue (cleaned up at the end);
workers run ``--pool=solo`` (or prefork, where a test asks) on the test's data directory
with the settings passed in their environment, exactly as a deployment would configure them.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from app.jobs import JobInfo, JobStore
from lore.models import SourceDocument
from tests.conftest import ROOT

REDIS_URL = "redis://127.0.0.1:6379/9"


def redis_up(url: str) -> bool:
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=1)
    try:
        return bool(client.ping())
    except redis.ConnectionError:
        return False
    finally:
        client.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def drop_keys(url: str, prefix: str) -> None:
    import redis

    client = redis.Redis.from_url(url)
    try:
        keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
        for start in range(0, len(keys), 500):
            client.delete(*keys[start : start + 500])
    except redis.ConnectionError:
        pass
    finally:
        client.close()


@pytest.fixture(scope="session")
def broker_env() -> Iterator[dict[str, str]]:
    """Environment naming this session's Redis prefix and queue."""
    if not redis_up(REDIS_URL):
        pytest.skip(f"no Redis at {REDIS_URL} (.ci/run starts one)")
    tag = uuid.uuid4().hex[:10]
    env = {
        "LORE_BROKER__URL": REDIS_URL,
        "LORE_BROKER__KEY_PREFIX": f"lore-test-{tag}:",
        "LORE_BROKER__QUEUE": f"lore-test-{tag}",
    }
    yield env
    drop_keys(REDIS_URL, env["LORE_BROKER__KEY_PREFIX"])


@dataclass
class Workers:
    """Celery worker subprocesses on one data directory."""

    env: dict[str, str]
    logs: Path
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    extra_args: list[str] = field(default_factory=list)
    log_of: dict[str, Path] = field(default_factory=dict)
    pool: str = "solo"

    def start(self, name: str) -> None:
        log = self.logs / f"{name}-{len(list(self.logs.glob(name + '-*.log')))}.log"
        self.log_of[name] = log
        with log.open("ab") as out:
            self.procs[name] = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "celery",
                    "-A",
                    "workers.celery_app",
                    "worker",
                    f"--pool={self.pool}",
                    "--without-gossip",
                    "--without-mingle",
                    "--without-heartbeat",
                    "-n",
                    f"{name}-{uuid.uuid4().hex[:6]}@%h",
                    "-Q",
                    self.env["LORE_BROKER__QUEUE"],
                    "-l",
                    "info",
                    *self.extra_args,
                ],
                cwd=ROOT,
                env={**os.environ, "OMP_NUM_THREADS": "1", **self.env},
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def wait_ready(self, *names: str, timeout_s: float = 180) -> None:
        deadline = time.monotonic() + timeout_s
        for name in names:
            log = self.log_of[name]
            while b" ready." not in log.read_bytes():
                proc = self.procs[name]
                assert proc.poll() is None, log.read_text()[-3000:]
                assert time.monotonic() < deadline, log.read_text()[-3000:]
                time.sleep(0.2)

    def kill9(self, name: str) -> None:
        proc = self.procs.pop(name)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)

    def stop_all(self) -> None:
        for proc in self.procs.values():
            proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        self.procs.clear()

    def pids(self) -> list[int]:
        return [p.pid for p in self.procs.values()]

    def children(self, name: str) -> list[int]:
        """Pids of a worker's pool processes (its direct children)."""
        pid = self.procs[name].pid
        found: list[int] = []
        for task in Path(f"/proc/{pid}/task").iterdir():
            found += [int(c) for c in (task / "children").read_text().split()]
        return found


def sweeping_env(embeddings_url: str, sweep_s: float = 0.1) -> dict[str, str]:
    """Settings of a process that embeds on the OpenAI test server and sweeps often."""
    return {
        "LORE_EMBEDDING__BACKEND": "openai",
        "LORE_EMBEDDING__MODEL": "test",
        "LORE_EMBEDDING__BASE_URL": embeddings_url,
        "LORE_EMBEDDING__DIMENSIONS": "16",
        "LORE_JOBS__ORPHAN_SWEEP_S": str(sweep_s),
    }


def plant_orphan(data: Path) -> tuple[str, int]:
    """A running job of two staged documents whose owner, a process of this host, ended.

    As ``lore ingest`` killed mid-run leaves it; returns (job id, the dead pid).
    """
    jobs = JobStore(data / "lore.sqlite3")
    try:
        job_id = jobs.create("ingest")
        docs = [SourceDocument(f"o/{i}.md", f"o/{i}.md", "ledger", "") for i in range(2)]
        jobs.stage(job_id, docs, keep_text=False)
        ended = subprocess.Popen(["true"])  # ... whose process then ended
        ended.wait()
        with jobs.database.write() as db:
            db.execute(
                "UPDATE jobs SET owner = ? WHERE id = ?",
                (f"{socket.gethostname()}:{ended.pid}:1", job_id),
            )
        return job_id, ended.pid
    finally:
        jobs.close()


def wait_job(
    jobs: JobStore,
    job_id: str,
    until: Callable[[JobInfo], bool] | None = None,
    timeout_s: float = 240,
) -> JobInfo:
    """Poll until ``until(job)`` (default: no longer running); fail after the timeout."""
    deadline = time.monotonic() + timeout_s
    while True:
        info = jobs.get(job_id)
        assert info is not None
        if until(info) if until else info.state != "running":
            return info
        assert time.monotonic() < deadline, f"job {job_id} stuck: {info}"
        time.sleep(0.1)


def stored(info: JobInfo) -> int:
    """Documents of a job already stored (embedded or further along)."""
    return sum(info.counts.get(s, 0) for s in ("embedded", "extracted", "done"))


def short_docs(prefix: str, count: int, start: int = 0) -> list[tuple[str, str]]:
    """(id, text) of ``count`` short documents, each with its own error code."""
    out = []
    for i in range(start, start + count):
        code = f"E_{prefix.upper()}_{i:04d}"
        text = (
            f"# {prefix} runbook {i}\n\nThe ledger service raises {code} when its connection "
            f"pool on worker-{i % 7} is exhausted. Operators drain the queue, restart the "
            f"payments-api replica {i % 5} and watch the {prefix} latency dashboard for "
            f"{10 + i % 30} minutes before closing the incident."
        )
        out.append((f"{prefix}/doc-{i:04d}.md", text))
    return out


def broker_settings(env: dict[str, str]) -> dict[str, str]:
    """The ``broker`` settings section named by a worker environment (for a runtime here)."""
    return {
        "url": env["LORE_BROKER__URL"],
        "key_prefix": env["LORE_BROKER__KEY_PREFIX"],
        "queue": env["LORE_BROKER__QUEUE"],
    }


@pytest.fixture
def one_worker(tmp_path: Path, broker_env: dict[str, str]) -> Iterator[tuple[Path, dict[str, str]]]:
    """One real worker on ``tmp_path/data``; yields (home, the environment ``lore`` needs)."""
    env = {**broker_env, "LORE_EMBEDDING__THREADS": "1", "LORE_DATA_DIR": str(tmp_path / "data")}
    workers = Workers(env=env, logs=tmp_path)
    workers.start("w")
    try:
        workers.wait_ready("w")
        yield tmp_path, env
    finally:
        workers.stop_all()
