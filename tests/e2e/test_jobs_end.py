"""Jobs always end: ``kill -9`` of ``lore ingest`` or ``lore serve`` mid-run (no broker).

After the restart (any ``lore`` command, or the server opening the data directory) the
interrupted job reads ``failed`` with the reason, its unfinished documents are failed,
and ``lore jobs`` shows no job running for a process that no longer exists.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import httpx

from lore.jobs import JobStore
from tests.e2e.test_cli import LORE, ROOT, lore
from tests.workers.conftest import free_port


def _corpus(root: Path, count: int) -> Path:
    inbox = root / "inbox"
    inbox.mkdir()
    for i in range(count):
        words = " ".join(f"ledger pool replica {i} shard E_KILLED_{i:04d}" for _ in range(40))
        (inbox / f"doc-{i:04d}.md").write_text(f"# Doc {i}\n\n{words}\n")
    return inbox


def _wait_running(data: Path, timeout_s: float = 120) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if (data / "lore.sqlite3").exists():
            jobs = JobStore(data / "lore.sqlite3")
            try:
                running = jobs.list_jobs(state="running")
                if running and running[0].counts:
                    return running[0].id
            finally:
                jobs.close()
        time.sleep(0.05)
    raise AssertionError("no job started")


def _ended(data: Path, job_id: str) -> dict[str, object]:
    listed = lore(data, "jobs", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert all(r["state"] != "running" for r in rows), rows
    job = next(r for r in rows if r["id"] == job_id)
    assert job["state"] == "failed" and "interrupted" in job["detail"]["error"], job
    return job


def test_5_a_killed_lore_ingest_leaves_no_running_job(tmp_path: Path) -> None:
    inbox = _corpus(tmp_path, 40)
    data = tmp_path / "data"
    env = {**os.environ, "LORE_DATA_DIR": str(data)}
    proc = subprocess.Popen(
        [*LORE, "ingest", str(inbox)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        job_id = _wait_running(data)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    job = _ended(data, job_id)
    counts = job["counts"]
    assert isinstance(counts, dict) and counts.get("failed", 0) > 0
    assert set(counts) <= {"done", "failed"}, counts
    status = json.loads(lore(data, "status", "--json").stdout)
    assert all("interrupted" in f["error"] for f in status["failed"])
    again = lore(data, "ingest", str(inbox), "--json")  # the documents can be ingested again
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["failed"] == []


def test_5_a_killed_lore_serve_leaves_no_running_job(tmp_path: Path) -> None:
    data = tmp_path / "data"
    port = free_port()
    env = {**os.environ, "LORE_DATA_DIR": str(data)}
    with (tmp_path / "serve.log").open("w") as log:
        proc = subprocess.Popen(
            [*LORE, "serve", "--port", str(port)], cwd=ROOT, env=env, stdout=log, stderr=log
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                assert time.monotonic() < deadline, (tmp_path / "serve.log").read_text()
                time.sleep(0.2)
        docs = [
            {"id": f"s/{i:03d}.md", "text": f"E_SERVE_KILL_{i:03d} ledger pool " * 60}
            for i in range(100)
        ]
        reply = httpx.post(f"{base}/v1/documents", json={"documents": docs}, timeout=60)
        assert reply.status_code == 202, reply.text
        job_id = reply.json()["job_id"]
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    _ended(data, job_id)
