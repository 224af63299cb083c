"""CPU per MB of HTML loading (HTML → documents → chunks, no embedding) of two code versions.

    python -m bench.html_load_time --before /work/wt-before --now /work/wt-now
        --tree /usr/share/doc/python3.11/html --sets bench/data/doc_trees/python [--runs 5]
        [--profile]

Each run is a child process with ``PYTHONPATH`` set to one version's checkout, so it
imports that version's ``ingest`` (the venv is shared). The child, after its imports and
the tokenizer are loaded, times (process CPU and wall) ``ingest.loaders.load_paths`` over
the tree's ``under`` folders (``*.html``, one path per folder as ``lore ingest`` gets
them) and ``ingest.chunking.chunk_text`` on every document, with the settings' defaults.
Runs alternate between the versions (before, now, before, …) so a change in the shared
machine's load falls on both; medians per version. ``--profile`` adds, per version, one
more run under :mod:`cProfile` and its top functions by cumulative and by own time.

Prints one JSON object, with the machine, the dataset, the load average around the runs
and, per version, the medians and every run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.common import machine

# The child imports only what both versions have: load_paths(paths, include=, exclude=,
# max_bytes=), counter_for/packaged_model_dir, chunk_text and load_settings.
_CHILD = r"""
import cProfile, json, pstats, sys, time
from pathlib import Path
from ingest.chunking import chunk_text
from ingest.loaders import load_paths
from lore.models import SourceDocument
from lore.settings import load_settings
from lore.tokens import counter_for, packaged_model_dir
import ingest.loaders

inputs = [Path(p) for p in json.loads(sys.argv[1])]
profile = sys.argv[2] == "1"
settings = load_settings()
counter = counter_for(packaged_model_dir())
counter.count("warm up the tokenizer")

def run():
    c0, w0 = time.process_time(), time.perf_counter()
    docs = [
        d
        for d in load_paths(
            inputs, include=["*.html"], exclude=[],
            max_bytes=settings.ingest.max_document_bytes,
        )
        if isinstance(d, SourceDocument)
    ]
    c1, w1 = time.process_time(), time.perf_counter()
    chunks = 0
    for d in docs:
        chunks += len(chunk_text(
            d.text, counter, size=settings.chunk.size_tokens,
            overlap=settings.chunk.overlap_tokens, title=d.title,
            max_model_tokens=settings.embedding.max_seq_length,
        ))
    c2, w2 = time.process_time(), time.perf_counter()
    return {
        "load_cpu_s": c1 - c0, "load_wall_s": w1 - w0,
        "chunk_cpu_s": c2 - c1, "chunk_wall_s": w2 - w1,
        "cpu_s": c2 - c0, "wall_s": w2 - w0,
        "documents": len(docs), "chunks": chunks,
        "text_chars": sum(len(d.text) for d in docs),
    }

out = {"loaders": ingest.loaders.__file__}
if profile:
    prof = cProfile.Profile()
    prof.enable()
    out.update(run())
    prof.disable()
    stats = pstats.Stats(prof).stats
    rows = [
        {"function": f"{Path(f).name}:{line}({name})", "file": f, "calls": nc,
         "own_s": round(tt, 3), "cumulative_s": round(ct, 3)}
        for (f, line, name), (cc, nc, tt, ct, _) in stats.items()
    ]
    ours = [r for r in rows if "/ingest/" in r["file"] or "/lore/tokens" in r["file"]]
    callees = {}
    for (f, line, name), (cc, nc, tt, ct, callers) in stats.items():
        for (cf, cline, cname), (_, cnc, ctt, cct) in callers.items():
            if "/ingest/" in cf:
                callees.setdefault(f"{Path(cf).name}:{cline}({cname})", []).append(
                    {"callee": f"{Path(f).name}:{line}({name})", "calls": cnc,
                     "cumulative_s": round(cct, 3)}
                )
    out["profile"] = {
        "total_s": round(sum(r["own_s"] for r in rows), 3),
        "callees_of_ours": {
            k: sorted(v, key=lambda r: -r["cumulative_s"])[:8]
            for k, v in callees.items()
            if "html" in k or "boilerplate" in k or "_census" in k or "from_bytes" in k
        },
        "ours_by_cumulative": sorted(ours, key=lambda r: -r["cumulative_s"])[:25],
        "all_by_own": sorted(rows, key=lambda r: -r["own_s"])[:20],
    }
else:
    out.update(run())
print(json.dumps(out))
"""


def _html_bytes(inputs: list[Path]) -> int:
    return sum(f.stat().st_size for p in inputs for f in p.rglob("*.html") if f.is_file())


def _child(checkout: Path, inputs: list[Path], profile: bool) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            _CHILD,
            json.dumps([str(p) for p in inputs]),
            "1" if profile else "0",
        ],
        cwd=checkout,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict[str, Any] = json.loads(done.stdout)
    if not str(result["loaders"]).startswith(str(checkout)):
        raise SystemExit(f"child imported {result['loaders']}, not from {checkout}")
    return result


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def main(argv: list[str] | None = None) -> None:
    """Run and print JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="checkout of the old code")
    parser.add_argument("--now", type=Path, required=True, help="checkout of the new code")
    parser.add_argument("--tree", type=Path, required=True, help="the HTML tree's root")
    parser.add_argument("--sets", type=Path, required=True, help="bench/data/doc_trees/NAME")
    parser.add_argument("--runs", type=int, default=5, help="runs per version")
    parser.add_argument("--profile", action="store_true", help="one cProfile run per version")
    args = parser.parse_args(argv)
    meta_file = args.sets / "tree.json"
    meta = json.loads(meta_file.read_text()) if meta_file.exists() else {}
    under: list[str] = list(meta.get("under", []))
    inputs = [args.tree / u for u in under] if under else [args.tree]
    mb = _html_bytes(inputs) / 1e6
    versions = {"before": args.before.resolve(), "now": args.now.resolve()}
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in versions}
    load_before = _load()
    for _ in range(args.runs):
        for name, checkout in versions.items():
            result = _child(checkout, inputs, profile=False)
            result["loadavg"] = _load()
            runs[name].append(result)
    load_after = _load()
    out: dict[str, Any] = {
        "dataset": {**meta, "tree": str(args.tree), "inputs": [str(p) for p in inputs]},
        "html_mb": round(mb, 3),
        "machine": machine(),
        "loadavg_before_after": [load_before, load_after],
        "how": "child process per run, PYTHONPATH=checkout; load_paths then chunk_text, "
        "process CPU and wall seconds after imports; runs alternate before/now",
    }
    for name, checkout in versions.items():
        rows = runs[name]

        def med(key: str, rows: list[dict[str, Any]] = rows) -> float:
            return round(float(statistics.median(r[key] for r in rows)), 3)

        out[name] = {
            "checkout": str(checkout),
            "commit": subprocess.run(
                ["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"],
                capture_output=True,
                text=True,
                check=False,
            ).stdout.strip(),
            "runs": len(rows),
            "median_load_cpu_s_per_mb": round(med("load_cpu_s") / mb, 3),
            "median_chunk_cpu_s_per_mb": round(med("chunk_cpu_s") / mb, 3),
            "median_cpu_s_per_mb": round(med("cpu_s") / mb, 3),
            "median_wall_s_per_mb": round(med("wall_s") / mb, 3),
            "median_load_cpu_s": med("load_cpu_s"),
            "median_chunk_cpu_s": med("chunk_cpu_s"),
            "documents": rows[0]["documents"],
            "chunks": rows[0]["chunks"],
            "text_chars": rows[0]["text_chars"],
            "every_run": [
                {k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()}
                for r in rows
            ],
        }
    b, n = out["before"], out["now"]
    out["now_over_before"] = {
        key: round(n[key] / b[key], 3) if b[key] else None
        for key in (
            "median_load_cpu_s_per_mb",
            "median_chunk_cpu_s_per_mb",
            "median_cpu_s_per_mb",
            "median_wall_s_per_mb",
        )
    }
    if args.profile:
        out["profile"] = {
            name: _child(checkout, inputs, profile=True)["profile"]
            for name, checkout in versions.items()
        }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
