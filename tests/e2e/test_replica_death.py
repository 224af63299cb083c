"""A replica dies mid-ingest: a live replica ends its job within a minute.

Two ``lore serve`` processes share one PostgreSQL store, as API replicas do. The second
is killed with SIGKILL while its in-process ingest runs; with the default settings (a
beat every 5 s, silence over 45 s means gone, a sweep every 10 s) the first must end
the job, with the reason, within 60 s of the kill. On the same host the first sees the
pid gone at its next sweep. For "another host" the second runs in a UTS namespace of
its own (``unshare --uts``, as root), so its host name differs: the first cannot ask
the kernel whether that pid lives and has only the heartbeat to go by, exactly as
across machines. The measured times are printed (``pytest -s``).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import ROOT
from tests.e2e.test_cli import LORE, serving
from tests.e2e.test_jobs_end import submit_batch
from tests.openai_test_server import OpenAITestServer
from tests.workers.conftest import free_port

OTHER_HOST = "lore-replica-b"
TARGET_S = 60.0


def _can_unshare() -> bool:
    if shutil.which("unshare") is None or os.geteuid() != 0:
        return False
    probe = subprocess.run(
        ["unshare", "--uts", "sh", "-c", f"hostname {OTHER_HOST} && hostname"],
        check=False,
        capture_output=True,
        text=True,
    )
    return probe.returncode == 0 and probe.stdout.strip() == OTHER_HOST


def _env(data: Path, url: str, embeddings: str) -> dict[str, str]:
    """Defaults for the job timing; embeddings on the test server; the shared store."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LORE_JOBS__")}
    return {
        **env,
        "LORE_DATA_DIR": str(data),
        "LORE_STORE__URL": url,
        "LORE_EMBEDDING__BACKEND": "openai",
        "LORE_EMBEDDING__MODEL": "test",
        "LORE_EMBEDDING__BASE_URL": embeddings,
        "LORE_EMBEDDING__DIMENSIONS": "16",
    }


def _up(base: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 120
    while True:
        try:
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.2)


@pytest.mark.parametrize(
    "host",
    [
        "same",
        pytest.param(
            "other",
            marks=pytest.mark.skipif(
                not _can_unshare(), reason="needs root and unshare(1) for a second host name"
            ),
        ),
    ],
)
def test_a_live_replica_ends_the_job_of_a_replica_that_died(
    tmp_path: Path, postgres_url: str, host: str
) -> None:
    with OpenAITestServer(dim=16) as embeddings:
        env_a = _env(tmp_path / "a", postgres_url, embeddings.base_url)
        with serving(tmp_path / "a", tmp_path / "a.log", env=env_a) as base_a:
            port = free_port()
            log_b = tmp_path / "b.log"
            command = [*LORE, "serve", "--port", str(port)]
            if host == "other":
                command = ["unshare", "--uts", "sh", "-c", f'hostname {OTHER_HOST} && exec "$@"']
                command += ["sh", *LORE, "serve", "--port", str(port)]
            env_b = _env(tmp_path / "b", postgres_url, embeddings.base_url)
            with log_b.open("w") as out:
                replica = subprocess.Popen(command, cwd=ROOT, env=env_b, stdout=out, stderr=out)
            base_b = f"http://127.0.0.1:{port}"
            try:
                _up(base_b, replica, log_b)
                embeddings.delay_next(*([0.5] * 400))  # B's ingest runs while it is killed
                job_id = submit_batch(base_b, "b", "E_REPLICA_DIED", 40)
                time.sleep(1.0)  # under way, with a heartbeat or two
                running = httpx.get(f"{base_a}/v1/jobs/{job_id}", timeout=10).json()
                assert running["state"] == "running", running
            finally:
                replica.send_signal(signal.SIGKILL)
                replica.wait(timeout=30)
                killed = time.monotonic()
            embeddings.delays.clear()
            while True:
                reply = httpx.get(f"{base_a}/v1/jobs/{job_id}", timeout=10)
                elapsed = time.monotonic() - killed
                # a busy store may answer 503 (Retry-After) for a moment; nothing else
                assert reply.status_code in (200, 503), (reply.status_code, reply.text)
                job: dict[str, Any] = (
                    reply.json() if reply.status_code == 200 else {"state": "running"}
                )
                if job["state"] != "running":
                    break
                assert elapsed < TARGET_S + 30, job
                time.sleep(0.5)
    print(f"\njob of the killed replica ({host} host) ended {elapsed:.1f} s after the kill")
    assert job["state"] == "failed", job
    reason = str(job["detail"]["error"])
    assert reason.startswith("interrupted: "), reason
    if host == "other":
        assert f"{OTHER_HOST}:" in reason and "on another host" in reason, reason
        assert socket.gethostname() != OTHER_HOST
    else:
        assert f"(pid {replica.pid})" in reason, reason
    assert elapsed <= TARGET_S, f"{elapsed:.1f} s"
