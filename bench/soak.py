"""Soak: two tenants write, replace, delete, query and ask against a real ``lore serve``.

    python -m bench.soak [--duration-s 60] [--rate 6] [--tenants 2]
                         [--write-fraction 0.25] [--delete-fraction 0.05]
                         [--ask-fraction 0.1] [--tracemalloc]
                         [--sample-s 5] [--data-dir DIR] [--out FILE]

Creates one API key per tenant (``lore keys create --namespace soak-N``), starts
``lore serve --auth`` on a free loopback port with a fresh data directory, waits for
``/readyz``, then sends operations on a fixed schedule (open loop: a slow answer does
not slow the schedule; a pool of client threads carries them), each by a tenant drawn
at random, as that tenant's key: new documents and replacements of earlier ones
(``POST /v1/documents`` with ``wait``; a quarter of the writes replace), deletes of an
earlier written document (``DELETE /v1/documents/{id}``), asks (``POST /v1/ask``,
local mode; extractive unless an LLM is configured) and, for the rest, queries
(``POST /v1/memory/query``). The server's RSS is sampled every ``--sample-s``.

With ``--tracemalloc`` the server runs under a small wrapper that starts
``tracemalloc`` (25 frames) and writes a snapshot summary when sent SIGUSR1: the top
lines by size and the top growers against the first snapshot (taken once the server is
ready, before any load), with the call path of the largest growers, and the top growers
since the previous snapshot (past the warm-up, a steady leak shows there). Snapshots are taken
at 1/6, 1/2 and the end of the run (5, 15 and 30 minutes of a 30-minute run).
tracemalloc slows Python and adds its own memory to the RSS (reported); after each
snapshot the wrapper calls ``malloc_trim(0)`` so the snapshot's own transient memory
does not stay in the RSS (which also returns any other free heap pages: compare runs
with and without ``--tracemalloc`` only loosely). Each snapshot records the RSS just
before it. A tenant may have as many ingest jobs in flight as there are client threads
(``LORE_API__TENANT_MAX_JOBS``, unless set): the soak measures memory, not admission.

Prints JSON: the machine, the settings, per-kind, per-tenant and per-tenant-and-kind
counts, errors and p50/p95/p99, the RSS series (with its anonymous and file-backed parts,
the threads and open files), RSS at 1/6, 1/2 and the end, and the growth of RSS and of
its anonymous part per 1,000 writes (least-squares slope against writes and replacements
completed, after the first sample, which includes the model load; and over the second
half alone, past the warm-up). Operations still queued when the time is up are dropped
and counted, so a server that cannot keep up shows as drops. Synthetic text only;
nothing is downloaded. The issue's 30-minute soak is ``--duration-s 1800``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
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

WRITES = ("write", "replace")

# Run as ``python -c WRAPPER OUT_DIR lore-args...``: tracemalloc on, SIGUSR1 writes a
# summary of a snapshot to OUT_DIR/snapshot-N.json (N counts from 0; the first is the
# baseline the others are compared with), then the CLI's main runs as usual.
WRAPPER = r"""
import ctypes, gc, json, os, signal, sys, threading, tracemalloc
tracemalloc.start(25)
out_dir = sys.argv[1]
sys.argv = ["lore", *sys.argv[2:]]
state = {"n": 0, "first": None}
lock = threading.Lock()
SKIP = [tracemalloc.Filter(False, f) for f in (tracemalloc.__file__, "<unknown>", "<string>")]

def where(frame):
    return f"{frame.filename}:{frame.lineno}"

def take():
    with lock:
        snap = tracemalloc.take_snapshot().filter_traces(SKIP)
        lines = snap.statistics("lineno")
        by_line = {where(s.traceback[0]): (s.size, s.count) for s in lines}
        first = state["first"]
        if first is None:
            state["first"] = first = by_line
        previous = state.get("previous") or by_line
        state["previous"] = by_line

        def grown(since, top):
            return sorted(
                ((k, size - since.get(k, (0, 0))[0], count - since.get(k, (0, 0))[1], size)
                 for k, (size, count) in by_line.items()),
                key=lambda g: g[1], reverse=True,
            )[:top]

        growth = grown(first, 30)
        recent = grown(previous, 15)
        wanted = {g[0] for g in growth[:8] if g[1] > 0}
        by_path = {}  # one pass over the raw traces (frames innermost first): cheap
        for _domain, size, frames, *_ in getattr(snap.traces, "_traces", []):
            if frames and f"{frames[0][0]}:{frames[0][1]}" in wanted:
                by_path[frames] = by_path.get(frames, 0) + size
        paths = {}
        for frames, _size in sorted(by_path.items(), key=lambda p: p[1], reverse=True):
            key = f"{frames[0][0]}:{frames[0][1]}"
            if key not in paths:  # the largest call path to the line, outermost first
                paths[key] = [f"{f}:{n}" for f, n in reversed(frames[:12])]
        current, peak = tracemalloc.get_traced_memory()
        summary = {
            "n": state["n"],
            "traced_mb": round(current / 2**20, 1),
            "traced_peak_mb": round(peak / 2**20, 1),
            "tracemalloc_overhead_mb": round(tracemalloc.get_tracemalloc_memory() / 2**20, 1),
            "top": [
                {"where": where(s.traceback[0]), "kb": round(s.size / 1024), "blocks": s.count}
                for s in lines[:30]
            ],
            "growers": [
                {"where": k, "kb_growth": round(d / 1024), "blocks_growth": c,
                 "kb": round(size / 1024), "path": paths.get(k)}
                for k, d, c, size in growth
            ],
            "growers_since_previous": [
                {"where": k, "kb_growth": round(d / 1024), "blocks_growth": c}
                for k, d, c, size in recent
            ],
        }
        del snap, lines, by_path
        gc.collect()
        try:  # hand the snapshot's own memory back, so the RSS after it is the server's
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except (OSError, AttributeError):
            pass
        path = os.path.join(out_dir, f"snapshot-{state['n']}.json")
        with open(path + ".tmp", "w") as fh:
            json.dump(summary, fh)
        os.replace(path + ".tmp", path)
        state["n"] += 1

signal.signal(signal.SIGUSR1, lambda *_: threading.Thread(target=take, daemon=True).start())
from api.cli import main
sys.exit(main())
"""


@dataclass
class Tally:
    """Outcomes by tenant and kind, shared by the client threads."""

    latencies: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    error_counts: dict[tuple[str, str], int] = field(default_factory=dict)
    writes_done: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, tenant: str, kind: str, ms: float, ok: bool, detail: str = "") -> None:
        """Count one outcome."""
        with self.lock:
            self.latencies.setdefault((tenant, kind), []).append(ms)
            if not ok:
                key = f"{kind}: {detail}"[:120]
                self.errors[key] = self.errors.get(key, 0) + 1
                self.error_counts[(tenant, kind)] = self.error_counts.get((tenant, kind), 0) + 1
            elif kind in WRITES:
                self.writes_done += 1

    def summary(self, pick: int) -> dict[str, dict[str, Any]]:
        """Percentiles and errors grouped by the tenant (``pick`` 0) or the kind (1)."""
        groups: dict[str, list[float]] = {}
        errors: dict[str, int] = {}
        with self.lock:
            for key, values in self.latencies.items():
                groups.setdefault(key[pick], []).extend(values)
            for key, count in self.error_counts.items():
                errors[key[pick]] = errors.get(key[pick], 0) + count
        return {
            name: {**percentiles(values), "errors": errors.get(name, 0)}
            for name, values in sorted(groups.items())
            if values
        }


@dataclass
class Tenant:
    """One tenant: its key and its documents (numbers; live ones may be replaced or deleted)."""

    name: str
    key: str
    assigned: int = 0
    live: list[int] = field(default_factory=list)
    busy: set[int] = field(default_factory=set)


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


def choose(rng: random.Random, tenant: Tenant, args: argparse.Namespace) -> tuple[str, int]:
    """The kind of the next operation and the document number it is about (under the lock).

    A replacement or delete takes a live document no other operation is using; a new
    document becomes live only once written (see ``operation``).
    """
    draw = rng.random()
    free = [n for n in tenant.live if n not in tenant.busy] if draw < args.write_fraction else []
    if draw < args.write_fraction:
        if free and rng.random() < 0.25:
            kind, number = "replace", rng.choice(free)
        else:
            kind, number = "write", tenant.assigned
            tenant.assigned += 1
        tenant.busy.add(number)
        return kind, number
    if draw < args.write_fraction + args.delete_fraction:
        free = [n for n in tenant.live if n not in tenant.busy]
        if free:
            number = rng.choice(free)
            tenant.live.remove(number)
            tenant.busy.add(number)
            return "delete", number
    target = rng.randrange(max(1, tenant.assigned))
    if draw < args.write_fraction + args.delete_fraction + args.ask_fraction:
        return "ask", target
    return "query", target


def operation(
    client: httpx.Client,
    rng: random.Random,
    tally: Tally,
    tenant: Tenant,
    args: argparse.Namespace,
) -> None:
    """One write, replacement, delete, ask or query by ``tenant``."""
    with tally.lock:
        kind, number = choose(rng, tenant, args)
    headers = {"Authorization": f"Bearer {tenant.key}"}
    request: dict[str, Any] = {"headers": headers, "timeout": 120}
    if kind in WRITES:
        method, path, request["json"] = "POST", "/v1/documents", document(rng, number)
    elif kind == "delete":
        method, path = "DELETE", f"/v1/documents/soak/doc-{number:06d}.md"
    elif kind == "ask":
        question = f"What does E_SOAK_{number:06d} mean for the {rng.choice(WORDS)}?"
        method, path = "POST", "/v1/ask"
        request["json"] = {"question": question, "mode": "local", "top_k": 5}
    else:
        method, path = "POST", "/v1/memory/query"
        request["json"] = {"search_text": f"E_SOAK_{number:06d} {rng.choice(WORDS)}", "top_k": 10}
    start = time.perf_counter()
    try:
        reply = client.request(method, path, **request)
        ok = reply.status_code < 400
        if ok and kind in WRITES:
            ok = all(d["status"] in ("done", "unchanged") for d in reply.json()["documents"])
        detail = "" if ok else f"{reply.status_code} {reply.text[:80]}"
    except httpx.HTTPError as exc:
        ok, detail = False, type(exc).__name__
    tally.record(tenant.name, kind, (time.perf_counter() - start) * 1000, ok, detail)
    with tally.lock:
        tenant.busy.discard(number)
        if kind in WRITES and number not in tenant.live:
            tenant.live.append(number)  # a failed write may be stored: it stays a target


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


def nearest(samples: list[dict[str, float]], t_s: float) -> dict[str, float] | None:
    """The RSS sample closest in time to ``t_s``."""
    return min(samples, key=lambda s: abs(s["t_s"] - t_s)) if samples else None


def make_keys(env: dict[str, str], count: int) -> list[Tenant]:
    """One key per tenant, each holding only its namespace ``soak-N``."""
    tenants = []
    for index in range(count):
        name = f"soak-{index + 1}"
        command = [sys.executable, "-m", "api.cli", "keys", "create", "--namespace", name]
        done = subprocess.run(
            [*command, "--name", name, "--json"],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise SystemExit(f"lore keys create failed: {done.stderr.strip()[-400:]}")
        tenants.append(Tenant(name, json.loads(done.stdout)["key"]))
    return tenants


class Snapshots:
    """Asks the wrapped server for tracemalloc summaries (SIGUSR1) and collects them."""

    def __init__(self, pid: int, out_dir: Path) -> None:
        self.pid, self.out_dir, self.taken = pid, out_dir, list[dict[str, Any]]()

    def take(self, label: str, t_s: float, timeout_s: float = 300) -> None:
        """Signal the server and wait for its summary file (the load goes on meanwhile)."""
        n = len(self.taken)
        path = self.out_dir / f"snapshot-{n}.json"
        rss_before = rss_mb(self.pid)
        started = time.monotonic()
        os.kill(self.pid, signal.SIGUSR1)
        while not path.exists():
            if time.monotonic() - started > timeout_s:
                self.taken.append({"label": label, "t_s": t_s, "error": "no snapshot in time"})
                return
            time.sleep(0.2)
        summary = json.loads(path.read_text())
        summary.pop("n", None)
        self.taken.append(
            {
                "label": label,
                "t_s": round(t_s, 1),
                "seconds_to_take": round(time.monotonic() - started, 1),
                "rss_mb_before": round(rss_before, 1),
                "rss_mb_after": round(rss_mb(self.pid), 1),
                **summary,
            }
        )


def start_server(
    data_dir: Path, env: dict[str, str], port: int, args: argparse.Namespace
) -> tuple[subprocess.Popen[bytes], Path]:
    """``lore serve --auth`` (under the tracemalloc wrapper when asked), ready; and its log."""
    serve = ["serve", "--auth", "--host", "127.0.0.1", "--port", str(port)]
    snap_dir = data_dir.parent / "soak-tracemalloc"
    if args.tracemalloc:
        snap_dir.mkdir(exist_ok=True)
        for old in snap_dir.glob("snapshot-*.json"):
            old.unlink()
        command = [sys.executable, "-c", WRAPPER, str(snap_dir), *serve]
    else:
        command = [sys.executable, "-m", "api.cli", *serve]
    log_path = data_dir.parent / "soak-serve.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 180
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=60).status_code == 200:
                return proc, snap_dir
        except httpx.TransportError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise SystemExit(f"lore serve did not become ready (see {log_path})")
        time.sleep(0.5)


def process_status(pid: int) -> dict[str, float]:
    """Anonymous and file-backed RSS (mapped index files count in the latter), threads, fds."""
    fields = {"RssAnon:": "anon_mb", "RssFile:": "file_mb", "Threads:": "threads"}
    found: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        parts = line.split()
        key = fields.get(parts[0]) if parts else None
        if key is not None:
            value = int(line.split()[1])
            found[key] = round(value / 1024, 1) if key.endswith("_mb") else value
    found["fds"] = len(os.listdir(f"/proc/{pid}/fd"))
    return found


def sample(pid: int, tally: Tally, t_s: float) -> dict[str, float]:
    """One RSS sample with the writes completed so far."""
    with tally.lock:
        writes = tally.writes_done
    return {
        "t_s": round(t_s, 1),
        "rss_mb": round(rss_mb(pid), 1),
        "writes": writes,
        **process_status(pid),
    }


def drive(
    base: str,
    pid: int,
    tenants: list[Tenant],
    snapshots: Snapshots | None,
    args: argparse.Namespace,
) -> tuple[Tally, list[dict[str, float]], int]:
    """Send the schedule for ``args.duration_s``; the tally, RSS samples and count sent."""
    tally, samples = Tally(), list[dict[str, float]]()
    rng = random.Random(args.seed)
    start = time.monotonic()
    next_sample = start
    interval = 1.0 / args.rate
    sent = 0
    marks = [args.duration_s / 6, args.duration_s / 2] if snapshots is not None else []
    snapper: threading.Thread | None = None
    with (
        httpx.Client(base_url=base, limits=httpx.Limits(max_connections=32)) as client,
        ThreadPoolExecutor(max_workers=args.clients) as pool,
    ):
        while (now := time.monotonic()) - start < args.duration_s:
            if now >= next_sample:
                samples.append(sample(pid, tally, now - start))
                next_sample += args.sample_s
            idle = snapper is None or not snapper.is_alive()  # never block the schedule
            if snapshots is not None and marks and now - start >= marks[0] and idle:
                label = f"{marks.pop(0) / 60:.1f} min"
                snapper = threading.Thread(target=snapshots.take, args=(label, now - start))
                snapper.start()
            due = start + sent * interval
            if now < due:
                time.sleep(min(due - now, 0.05))
                continue
            tenant = tenants[rng.randrange(len(tenants))]
            op_rng = random.Random(rng.random())
            pool.submit(operation, client, op_rng, tally, tenant, args)
            sent += 1
        pool.shutdown(wait=True, cancel_futures=True)  # a backlog is dropped, not drained
    samples.append(sample(pid, tally, time.monotonic() - start))
    if snapper is not None:
        snapper.join()
    if snapshots is not None:
        snapshots.take("end", time.monotonic() - start)
    return tally, samples, sent


def run(data_dir: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Serve ``data_dir``, drive it for ``args.duration_s``, return the report."""
    port = free_port()
    data_dir.mkdir(parents=True, exist_ok=True)
    env = {
        "LORE_API__TENANT_MAX_JOBS": str(args.clients),  # the soak is about memory, not 429s
        **os.environ,
        "LORE_DATA_DIR": str(data_dir),
        "OMP_NUM_THREADS": "1",
    }
    tenants = make_keys(env, args.tenants)
    proc, snap_dir = start_server(data_dir, env, port, args)
    snapshots = Snapshots(proc.pid, snap_dir) if args.tracemalloc else None
    try:
        if snapshots is not None:
            snapshots.take("start", 0.0)
        base = f"http://127.0.0.1:{port}"
        tally, samples, sent = drive(base, proc.pid, tenants, snapshots, args)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    return report(args, tenants, tally, samples, sent, snapshots)


def report(
    args: argparse.Namespace,
    tenants: list[Tenant],
    tally: Tally,
    samples: list[dict[str, float]],
    sent: int,
    snapshots: Snapshots | None,
) -> dict[str, Any]:
    """The JSON report of a run."""
    points = [(s["writes"], s["rss_mb"]) for s in samples[1:]]
    late = [s for s in samples if s["t_s"] >= args.duration_s / 2]
    half = [(s["writes"], s["rss_mb"]) for s in late]
    answered = sum(len(v) for v in tally.latencies.values())
    by_pair = {
        f"{tenant}/{kind}": {"n": len(values), "errors": tally.error_counts.get((tenant, kind), 0)}
        for (tenant, kind), values in sorted(tally.latencies.items())
    }
    at = {
        label: nearest(samples, t)
        for label, t in (
            ("one_sixth", args.duration_s / 6),
            ("half", args.duration_s / 2),
            ("end", args.duration_s),
        )
    }
    return {
        "machine": machine(),
        "load_average": os.getloadavg(),
        "dataset": "synthetic runbooks (40-160 words), 25% of writes replace an earlier id",
        "settings": {
            "duration_s": args.duration_s,
            "rate_per_s": args.rate,
            "tenants": [t.name for t in tenants],
            "write_fraction": args.write_fraction,
            "delete_fraction": args.delete_fraction,
            "ask_fraction": args.ask_fraction,
            "clients": args.clients,
            "seed": args.seed,
            "tracemalloc": args.tracemalloc,
        },
        "operations_scheduled": sent,
        "operations_answered": answered,
        "operations_dropped": sent - answered,
        "by_kind": tally.summary(1),
        "by_tenant": tally.summary(0),
        "by_tenant_and_kind": by_pair,
        "errors": tally.errors,
        "error_count": sum(tally.errors.values()),
        "writes_done": tally.writes_done,
        "documents_live": {t.name: len(t.live) for t in tenants},
        "rss_mb_first": samples[0]["rss_mb"] if samples else None,
        "rss_mb_last": samples[-1]["rss_mb"] if samples else None,
        "rss_at": at,
        "rss_growth_mb_per_1000_writes": slope_per_1000(points),
        "rss_growth_mb_per_1000_writes_second_half": slope_per_1000(half),
        "anon_rss_growth_mb_per_1000_writes": slope_per_1000(
            [(s["writes"], s["anon_mb"]) for s in samples[1:] if "anon_mb" in s]
        ),
        "anon_rss_growth_mb_per_1000_writes_second_half": slope_per_1000(
            [(s["writes"], s["anon_mb"]) for s in samples if s in late and "anon_mb" in s]
        ),
        "tracemalloc": snapshots.taken if snapshots is not None else [],
        "rss_samples": samples,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration-s", type=float, default=60.0)
    parser.add_argument("--rate", type=float, default=6.0, help="operations per second")
    parser.add_argument("--tenants", type=int, default=2, help="namespaces, one key each")
    parser.add_argument("--write-fraction", type=float, default=0.25, help="writes, replacements")
    parser.add_argument("--delete-fraction", type=float, default=0.05)
    parser.add_argument("--ask-fraction", type=float, default=0.1, help="the rest are queries")
    parser.add_argument("--clients", type=int, default=8, help="client threads")
    parser.add_argument("--sample-s", type=float, default=5.0)
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument(
        "--tracemalloc",
        action="store_true",
        help="server under tracemalloc (slower): snapshots at the start, 1/6, 1/2, the end",
    )
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    args = parser.parse_args()
    if args.write_fraction + args.delete_fraction + args.ask_fraction > 1:
        parser.error("the write, delete and ask fractions add up to more than 1")
    with tempfile.TemporaryDirectory(prefix="lore-soak-") as tmp:
        data_dir = args.data_dir or Path(tmp) / "data"
        result = run(data_dir, args)
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
