"""How long ``lore`` takes to start: whole processes, several runs each, medians.

Variants: ``lore --version``, ``lore --help``, ``lore search`` on a small data
directory, a bare interpreter, and a process that only loads the embedding model and
embeds one query (the floor a fresh ``lore search`` cannot go under). The search's
overhead is its median minus that floor's. Load average before and after is printed:
on a loaded machine every figure grows.

    python -m bench.cli_start [--runs 9] [--root CHECKOUT]

``--root`` measures another checkout's code (``python -m api.cli`` run from it), e.g.
the main branch before a change, with this same harness. Prints JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import machine

HERE = Path(__file__).resolve().parent.parent
CORPUS = HERE / "examples" / "corpus" / "production"
MODEL_ONLY = (
    "from lore.embedders import LocalEmbedder; LocalEmbedder().embed_query('HTTP 504 gateway')"
)


def cpu_of_children() -> float:
    """User + system CPU seconds of the children waited for so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds one whole process took (it must succeed).

    CPU time (user + system) moves much less than wall time when other processes
    compete for the cores, so both are reported.
    """
    cpu = cpu_of_children()
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{argv} failed ({done.returncode}): {done.stderr[-2000:]}")
    return took, cpu_of_children() - cpu


def measure(argv: list[str], cwd: Path, env: dict[str, str], runs: int) -> dict[str, Any]:
    """Median, min and max seconds over ``runs`` fresh processes (after one warm-up)."""
    run_once(argv, cwd, env)  # page cache, .pyc files
    pairs = [run_once(argv, cwd, env) for _ in range(runs)]
    samples = [wall for wall, _ in pairs]
    return {
        "median_s": round(statistics.median(samples), 3),
        "min_s": round(min(samples), 3),
        "max_s": round(max(samples), 3),
        "cpu_median_s": round(statistics.median(cpu for _, cpu in pairs), 3),
        "runs": runs,
    }


def main() -> None:
    """Run every variant and print the JSON report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--root", type=Path, default=HERE, help="checkout whose code is run")
    parser.add_argument("--no-search", action="store_true", help="skip the search variants")
    args = parser.parse_args()
    root = args.root.resolve()
    lore = [sys.executable, "-m", "api.cli"]
    with tempfile.TemporaryDirectory(prefix="lore-cli-start-") as tmp:
        env = {
            **os.environ,
            "LORE_DATA_DIR": str(Path(tmp) / "data"),
            "PYTHONPATH": str(root),
        }
        load_before = os.getloadavg()
        variants: dict[str, Any] = {
            "python -c pass": measure([sys.executable, "-c", "pass"], root, env, args.runs),
            "lore --version": measure([*lore, "--version"], root, env, args.runs),
            "lore --help": measure([*lore, "--help"], root, env, args.runs),
        }
        if not args.no_search:
            run_once([*lore, "-q", "ingest", str(CORPUS)], root, env)
            model = measure([sys.executable, "-c", MODEL_ONLY], root, env, args.runs)
            search = measure([*lore, "search", "HTTP 504", "--json"], root, env, args.runs)
            variants["model load + one query embedding"] = model
            variants["lore search"] = search
            variants["lore search over model load"] = {
                "median_s": round(search["median_s"] - model["median_s"], 3),
                "cpu_median_s": round(search["cpu_median_s"] - model["cpu_median_s"], 3),
            }
        load_after = os.getloadavg()
    print(
        json.dumps(
            {
                "benchmark": "cli_start",
                "root": str(root),
                "machine": machine(),
                "load_average_before": [round(x, 2) for x in load_before],
                "load_average_after": [round(x, 2) for x in load_after],
                "variants": variants,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
