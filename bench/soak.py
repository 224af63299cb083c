"""Soak: mixed reads and writes at a fixed rate against a real ``lore serve`` on loopback.

    python -m bench.soak [--duration-s 300] [--rate 8] [--write-fraction 0.3]
                         [--sample-s 5] [--data-dir DIR] [--out FILE]

Starts ``lore serve`` (auth off) on a free loopback port with a fresh data directory,
waits for ``/readyz``, then sends operations on a fixed schedule (open loop: a slow
answer does not slow the schedule; a pool of client threads carries them): queries
(``POST /v1/memory/query``), new documents and replacements of earlier ones
(``POST /v1/documents`` with ``wait``). The server's RSS is sampled every
``--sample-s``. Prints JSON: the machine, the settings, per-kind counts, errors and
p50/p95/p99, the RSS series and its growth per 1,000 writes (least-squares slope of RSS
against writes completed, after the first sample, which includes the model load; and
over the second half alone, past the warm-up). Operations still queued when the time is
up are dropped and counted, so a server that cannot keep up shows as drops.
Synthetic text only; nothing is downloaded. The default run is short (60 s); the
issue's 30-minute soak is ``--duration-s 1800``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.common import machine, percentiles

WORDS = [
    "ledger",
    "gateway",
    "payments",
    "queue",
    "replica",
    "pool",
    "timeout",
    "retry",
    "shard",
    "index",
    "cache",
    "dashboard",
    "incident",
    "operator",
    "rollback",
    "deploy",
    "latency",
    "broker",
    "worker",
    "schema",
]


@dataclass
class Tally:
    """Outcomes by kind, shared by the client threads."""

    latencies: dict[str, list[float]] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    writes_done: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, kind: str, ms: float, ok: bool, detail: str = "") -> None:
        """Count one outcome."""
        with self.lock:
            self.latencies.setdefault(kind, []).append(ms)
            if not ok:
                key = f"{kind}: {detail}"[:120]
                self.errors[key] = self.errors.get(key, 0) + 1
            elif kind != "query":
                self.writes_done += 1


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def document(rng: random.Random, number: int) -> dict[str, Any]:
    code = f"E_SOAK_{number:06d}"
    words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(40, 160)))
    return {
        "id": f"soak/doc-{number:06d}.md",
        "text": f"# Runbook {number}\n\nThe service raises {code} when {words}.",
        "metadata": {"team": rng.choice(["ops", "pay", "core"]), "n": number},
        "wait": True,
    }


def operation(
    client: httpx.Client, rng: random.Random, tally: Tally, written: list[int], writes: float
) -> None:
    """One query, new document or replacement (a fraction ``writes`` are writes)."""
    if rng.random() < writes:
        replace = written and rng.random() < 0.25
        with tally.lock:
            number = rng.choice(written) if replace else len(written)
            if not replace:
                written.append(number)
        kind, path, body = (
            ("replace" if replace else "write"),
            "/v1/documents",
            document(rng, number),
        )
    else:
        kind, path = "query", "/v1/memory/query"
        target = rng.randrange(max(1, len(written)))
        body = {"search_text": f"E_SOAK_{target:06d} {rng.choice(WORDS)}", "top_k": 10}
    start = time.perf_counter()
    try:
        reply = client.post(path, json=body, timeout=120)
        ok = reply.status_code < 400
        if ok and kind != "query":
            ok = all(d["status"] in ("done", "unchanged") for d in reply.json()["documents"])
        detail = "" if ok else f"{reply.status_code} {reply.text[:80]}"
    except httpx.HTTPError as exc:
        ok, detail = False, type(exc).__name__
    tally.record(kind, (time.perf_counter() - start) * 1000, ok, detail)


def slope_per_1000(points: list[tuple[float, float]]) -> float | None:
    """Least-squares MB per 1,000 writes over (writes, rss) points."""
    if len(points) < 3 or points[-1][0] == points[0][0]:
        return None
    n = len(points)
    mx = sum(p[0] for p in points) / n
    my = sum(p[1] for p in points) / n
    sxx = sum((p[0] - mx) ** 2 for p in points)
    sxy = sum((p[0] - mx) * (p[1] - my) for p in points)
    return round(sxy / sxx * 1000, 2)


def run(data_dir: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Serve ``data_dir``, drive it for ``args.duration_s``, return the report."""
    port = free_port()
    env = {**os.environ, "LORE_DATA_DIR": str(data_dir), "OMP_NUM_THREADS": "1"}
    log = (data_dir.parent / "soak-serve.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "api.cli", "serve", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    tally, written, samples = Tally(), list[int](), list[dict[str, float]]()
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                if httpx.get(f"{base}/readyz", timeout=60).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"lore serve did not become ready (see {log.name})")
            time.sleep(0.5)
        rng = random.Random(args.seed)
        start = time.monotonic()
        next_sample = start
        interval = 1.0 / args.rate
        sent = 0
        with (
            httpx.Client(base_url=base, limits=httpx.Limits(max_connections=32)) as client,
            ThreadPoolExecutor(max_workers=args.clients) as pool,
        ):
            while (now := time.monotonic()) - start < args.duration_s:
                if now >= next_sample:
                    with tally.lock:
                        writes = tally.writes_done
                    samples.append(
                        {
                            "t_s": round(now - start, 1),
                            "rss_mb": round(rss_mb(proc.pid), 1),
                            "writes": writes,
                        }
                    )
                    next_sample += args.sample_s
                due = start + sent * interval
                if now < due:
                    time.sleep(min(due - now, 0.05))
                    continue
                op_rng = random.Random(rng.random())
                pool.submit(operation, client, op_rng, tally, written, args.write_fraction)
                sent += 1
            pool.shutdown(wait=True, cancel_futures=True)  # a backlog is dropped, not drained
        samples.append(
            {
                "t_s": round(time.monotonic() - start, 1),
                "rss_mb": round(rss_mb(proc.pid), 1),
                "writes": tally.writes_done,
            }
        )
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
    points = [(s["writes"], s["rss_mb"]) for s in samples[1:]]
    half = [(s["writes"], s["rss_mb"]) for s in samples if s["t_s"] >= args.duration_s / 2]
    answered = sum(len(v) for v in tally.latencies.values())
    kinds = {k: percentiles(v) for k, v in sorted(tally.latencies.items()) if v}
    return {
        "machine": machine(),
        "load_average": os.getloadavg(),
        "dataset": "synthetic runbooks (40-160 words), 25% of writes replace an earlier id",
        "settings": {
            "duration_s": args.duration_s,
            "rate_per_s": args.rate,
            "write_fraction": args.write_fraction,
            "clients": args.clients,
            "seed": args.seed,
        },
        "operations_scheduled": sent,
        "operations_answered": answered,
        "operations_dropped": sent - answered,
        "by_kind": kinds,
        "errors": tally.errors,
        "error_count": sum(tally.errors.values()),
        "writes_done": tally.writes_done,
        "rss_mb_first": samples[0]["rss_mb"] if samples else None,
        "rss_mb_last": samples[-1]["rss_mb"] if samples else None,
        "rss_growth_mb_per_1000_writes": slope_per_1000(points),
        "rss_growth_mb_per_1000_writes_second_half": slope_per_1000(half),
        "rss_samples": samples,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration-s", type=float, default=60.0)
    parser.add_argument("--rate", type=float, default=8.0, help="operations per second")
    parser.add_argument("--write-fraction", type=float, default=0.3)
    parser.add_argument("--clients", type=int, default=8, help="client threads")
    parser.add_argument("--sample-s", type=float, default=5.0)
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lore-soak-") as tmp:
        data_dir = args.data_dir or Path(tmp) / "data"
        result = run(data_dir, args)
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
