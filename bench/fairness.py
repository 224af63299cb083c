"""Fair share: tenant B's list latency while tenant A runs large writes (issue 30).

Starts a real ``lore serve`` (auth on, two keys), lets tenant A send ``--writes``
concurrent ``{"text": "word " * N, "wait": true}`` ingests and measures tenant B's
``GET /v1/documents?limit=1`` the whole time A's requests are outstanding. Prints JSON:
B's p50/p95 before and during A's writes, and what A's requests got.

    .venv/bin/python -m bench.fairness                      # in-process (no broker)
    .venv/bin/python -m bench.fairness --broker redis://127.0.0.1:6379/9
    .venv/bin/python -m bench.fairness --code /work/main    # another checkout ("before")

``--code`` runs the server from another checkout (its own code, this script's client).
With ``--broker`` a Celery worker (``--pool=solo``) is started on the same data directory.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from app.keys import KeyStore
from bench.common import machine, percentiles

ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start(args: list[str], code: Path, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", *args],
            cwd=code,
            env={**os.environ, "PYTHONPATH": str(code), **env},
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def _wait_up(url: str, proc: subprocess.Popen[bytes], log: Path, timeout_s: float = 180) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited: {log.read_text()[-2000:]}")
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise TimeoutError(f"server not up after {timeout_s} s")


def measure(  # noqa: PLR0915 - one scenario, read top to bottom
    code: Path,
    data: Path,
    *,
    writes: int = 7,
    words: int = 12_000,
    broker: str | None = None,
    env: dict[str, str] | None = None,
    read_gap_s: float = 0.05,
) -> dict[str, Any]:
    """Run the scenario against a server started from ``code``; the figures."""
    data.mkdir(parents=True, exist_ok=True)
    keys = KeyStore(data / "keys.sqlite3")
    key_a, _ = keys.create(["tenant-a"])
    key_b, _ = keys.create(["tenant-b"])
    keys.close()
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    server_env = {"LORE_DATA_DIR": str(data), "LORE_AUTH__ENABLED": "true", **(env or {})}
    procs: list[subprocess.Popen[bytes]] = []
    if broker:
        tag = uuid.uuid4().hex[:8]
        server_env |= {
            "LORE_BROKER__URL": broker,
            "LORE_BROKER__KEY_PREFIX": f"lore-fair-{tag}:",
            "LORE_BROKER__QUEUE": f"lore-fair-{tag}",
        }
        worker = ["celery", "-A", "workers.celery_app", "worker", "--pool=solo"]
        worker += ["--without-gossip", "--without-mingle", "-Q", server_env["LORE_BROKER__QUEUE"]]
        procs.append(_start(worker, code, server_env, data / "worker.log"))
    server = _start(
        ["api.cli", "serve", "--port", str(port)], code, server_env, data / "server.log"
    )
    procs.append(server)
    try:
        _wait_up(url, server, data / "server.log")
        a = {"Authorization": f"Bearer {key_a}"}
        b = {"Authorization": f"Bearer {key_b}"}
        with httpx.Client(base_url=url, timeout=900) as client:
            seed = {"id": "b/seed.md", "text": "Tenant B's runbook for HTTP 504.", "wait": True}
            client.post("/v1/documents", json=seed, headers=b).raise_for_status()

            def read_b() -> float:
                start = time.perf_counter()
                client.get("/v1/documents", params={"limit": 1}, headers=b).raise_for_status()
                return (time.perf_counter() - start) * 1000

            idle = [read_b() for _ in range(40)]
            outcomes: list[tuple[int, float]] = []

            def write_a(n: int) -> None:
                body = {"id": f"a/big-{n}.txt", "text": "word " * words, "wait": True}
                start = time.perf_counter()
                with httpx.Client(base_url=url, timeout=900) as own:
                    reply = own.post("/v1/documents", json=body, headers=a)
                outcomes.append((reply.status_code, time.perf_counter() - start))

            threads = [threading.Thread(target=write_a, args=(n,)) for n in range(writes)]
            started = time.perf_counter()
            for thread in threads:
                thread.start()
            busy: list[float] = []
            while any(t.is_alive() for t in threads):
                busy.append(read_b())
                time.sleep(read_gap_s)
            for thread in threads:
                thread.join()
            window_s = time.perf_counter() - started
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=60)
    statuses: dict[str, int] = {}
    for status, _ in outcomes:
        statuses[str(status)] = statuses.get(str(status), 0) + 1
    return {
        "broker": bool(broker),
        "writes": writes,
        "words": words,
        "b_idle": percentiles(idle),
        "b_while_a_writes": percentiles(busy),
        "a_statuses": statuses,
        "a_slowest_s": round(max(s for _, s in outcomes), 2),
        "window_s": round(window_s, 2),
    }


def main() -> None:
    """Parse the flags, run, print JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--code", type=Path, default=ROOT, help="checkout to serve from")
    parser.add_argument("--writes", type=int, default=7)
    parser.add_argument("--words", type=int, default=12_000)
    parser.add_argument("--broker", default=None, help="e.g. redis://127.0.0.1:6379/9")
    parser.add_argument("--env", action="append", default=[], help="KEY=VALUE for the server")
    args = parser.parse_args()
    env = dict(pair.split("=", 1) for pair in args.env)
    with tempfile.TemporaryDirectory(prefix="lore-fair-") as tmp:
        result = measure(
            args.code.resolve(),
            Path(tmp) / "data",
            writes=args.writes,
            words=args.words,
            broker=args.broker,
            env=env,
        )
    print(json.dumps({"machine": machine(), "code": str(args.code), **result}, indent=2))


if __name__ == "__main__":
    main()
