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

from app.jobs import JobStore
from tests.e2e.test_cli import LORE, ROOT, lore, serving
from tests.openai_test_server import OpenAITestServer
from tests.workers.conftest import free_port, plant_orphan, sweeping_env


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


def submit_batch(base: str, prefix: str, token: str, repeat: int) -> str:
    """A hundred documents, ``{prefix}/NNN.md`` with ``{token}_NNN``, queued; the job id."""
    docs = [
        {"id": f"{prefix}/{i:03d}.md", "text": f"{token}_{i:03d} ledger pool " * repeat}
        for i in range(100)
    ]
    reply = httpx.post(f"{base}/v1/documents", json={"documents": docs}, timeout=60)
    assert reply.status_code == 202, reply.text
    return str(reply.json()["job_id"])


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
        job_id = submit_batch(base, "s", "E_SERVE_KILL", 60)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    _ended(data, job_id)


def test_lore_mcp_ends_a_dead_owners_job_while_it_runs(tmp_path: Path) -> None:
    """The MCP server lives as long as its agent: it sweeps too, and stops when stdin ends."""
    data = tmp_path / "data"
    with OpenAITestServer(dim=16) as embeddings:
        env = {**os.environ, "LORE_DATA_DIR": str(data), **sweeping_env(embeddings.base_url)}
        server = subprocess.Popen(
            [*LORE, "mcp"],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            assert server.stdin is not None and server.stdout is not None
            hello = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-03-26",
                    "capabilities": {},
                    "clientInfo": {"name": "test", "version": "0"},
                },
            }
            server.stdin.write((json.dumps(hello) + "\n").encode())
            server.stdin.flush()
            reply = json.loads(server.stdout.readline())  # up: its start-up sweep is over
            assert reply["id"] == 1 and "result" in reply, reply
            job_id, pid = plant_orphan(data)
            deadline = time.monotonic() + 30
            while True:
                jobs = JobStore(data / "lore.sqlite3")
                try:
                    job = jobs.get(job_id)
                finally:
                    jobs.close()
                assert job is not None
                if job.state != "running":
                    break
                assert server.poll() is None and time.monotonic() < deadline, job
                time.sleep(0.05)
            _, stderr = server.communicate(timeout=30)  # stdin closed: the agent went away
        finally:
            if server.poll() is None:
                server.kill()
                server.communicate()  # closes the pipes
    assert job.state == "failed" and job.counts == {"failed": 2}, job
    assert str(job.detail["error"]).startswith(
        f"interrupted: the process that ran this job (pid {pid})"
    )
    assert server.returncode == 0, stderr.decode()
    assert b"Traceback" not in stderr, stderr.decode()


def test_lore_serve_ends_a_dead_owners_job_while_it_runs(tmp_path: Path) -> None:
    """No process starts after the owner died: the server's periodic sweep ends the job."""
    data = tmp_path / "data"
    log = tmp_path / "serve.log"
    with (
        OpenAITestServer(dim=16) as embeddings,
        serving(data, log, env=sweeping_env(embeddings.base_url)) as base,
    ):
        job_id, pid = plant_orphan(data)
        deadline = time.monotonic() + 20
        while True:
            reply = httpx.get(f"{base}/v1/jobs/{job_id}", timeout=5)
            assert reply.status_code == 200, reply.text
            job = reply.json()
            if job["state"] != "running":
                break
            assert time.monotonic() < deadline, job
            time.sleep(0.05)
    assert job["state"] == "failed" and job["counts"] == {"failed": 2}, job
    reason = f"interrupted: the process that ran this job (pid {pid}) ended"
    assert job["detail"]["error"].startswith(reason), job
    text = log.read_text()
    assert "Application shutdown complete" in text, text  # stopped cleanly: no sweep left
    assert "Traceback" not in text and "WARNING" not in text, text
    assert "sweep for orphaned jobs failed" not in text, text  # (no logging set up: bare)
