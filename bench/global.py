"""Global questions end to end: latency cold and warm, context, breadth, duplicates.

    python -m bench.global --data ../shared/data/graphrag_global/podcast
        [--work DIR] [--questions 10] [--cli 3] [--port 0]

Ingests the podcast transcripts into ``--work`` (reused when already there), builds the
offline graph (report vectors are written with the reports), then for N of the 125
global questions (spread over the list):

- **in process**: ``ask(mode="global")`` latency, context tokens, distinct communities
  (reports, with those a merged point also cites) and documents cited per answer, key
  points repeated within an answer (must be 0) and key points that are not whole
  sentences;
- **fresh CLI**: ``lore ask --mode global`` in a new process for the first ``--cli``
  questions, next to a process that only loads the embedding model and embeds one
  query (the floor any fresh process pays);
- **HTTP**: ``lore serve`` started fresh: seconds from start to the first global answer,
  then the warm p50 over the questions.

Prints one JSON object.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from app.refresh import refresh_in_process
from bench.common import ingest_once, machine, percentiles, runtime_for, timed
from lore.sentences import is_whole
from retrieval.ask_contract import AskRequest, AskResponse
from retrieval.keypoints import point_key

_POINT = re.compile(r"^\[(\d+)\] (.*) \(report [^)]*\)$")
_LOAD_MODEL = (
    "from lore.settings import load_settings; from app.builders import build_embedder; "
    "build_embedder(load_settings()).embed_query('warm up')"
)


def answer_stats(response: AskResponse) -> dict[str, Any]:
    """Breadth and cleanliness of one extractive global answer."""
    points = [m.group(2) for line in response.answer.splitlines() if (m := _POINT.match(line))]
    keys = [point_key(p) for p in points]
    reports = {c.report_id for c in response.citations if c.report_id}
    for line in response.answer.splitlines():
        reports.update(re.findall(r"; also (\S+?)(?:;|\))", line))
    documents = {s for c in response.citations for s in c.sources}
    return {
        "key_points": len(points),
        "duplicate_key_points": len(keys) - len(set(keys)),
        "fragments": sum(not is_whole(p) for p in points),
        "communities": len(reports),
        "documents": len(documents),
        "context_tokens": response.context_tokens,
    }


def free_port() -> int:
    """A free loopback port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def post(url: str, body: dict[str, Any], timeout: float = 600) -> dict[str, Any]:
    """POST JSON, return JSON."""
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=timeout) as reply:
        result: dict[str, Any] = json.loads(reply.read())
        return result


def http_run(work: Path, questions: list[str], port: int) -> dict[str, Any]:
    """Start ``lore serve``; time the first global answer from start, then warm ones."""
    env = {**os.environ, "LORE_DATA_DIR": str(work)}
    lore = [sys.executable, "-m", "api.cli"]
    start = time.perf_counter()
    server = subprocess.Popen(
        [*lore, "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        while True:
            try:
                urllib.request.urlopen(f"{url}/healthz", timeout=1).read()
                break
            except OSError:
                if server.poll() is not None:
                    raise RuntimeError("lore serve exited") from None
                time.sleep(0.05)
        ready = time.perf_counter() - start
        t0 = time.perf_counter()
        post(f"{url}/v1/questions/global", {"question": questions[0]})
        first = time.perf_counter() - t0
        warm = []
        for question in [*questions, *questions]:
            t0 = time.perf_counter()
            post(f"{url}/v1/questions/global", {"question": question})
            warm.append((time.perf_counter() - t0) * 1000)
        return {
            "ready_s": round(ready, 2),
            "first_question_s": round(first, 2),
            "start_to_first_answer_s": round(ready + first, 2),
            "warm": percentiles(warm),
        }
    finally:
        server.terminate()
        server.wait(timeout=30)


def cli_run(work: Path, questions: list[str]) -> dict[str, Any]:
    """Fresh ``lore ask --mode global`` processes next to a model-load-only process."""
    env = {**os.environ, "LORE_DATA_DIR": str(work)}
    _, load_s = timed(
        lambda: subprocess.run([sys.executable, "-c", _LOAD_MODEL], env=env, check=True)
    )
    runs = []
    for question in questions:
        command = [sys.executable, "-m", "api.cli", "ask", "--mode", "global", "--json", question]
        t0 = time.perf_counter()
        done = subprocess.run(command, env=env, check=True, capture_output=True)
        seconds = time.perf_counter() - t0
        assert json.loads(done.stdout)["mode"] == "global"
        runs.append(seconds)
    return {
        "model_load_process_s": round(load_s, 2),
        "cli_s": [round(s, 2) for s in runs],
        "cli_over_model_load_s": round(statistics.median(runs) - load_s, 2),
    }


def main(argv: list[str] | None = None) -> None:
    """Run and print JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="the podcast directory")
    parser.add_argument("--work", type=Path, default=Path("/tmp/lore-bench-global"))
    parser.add_argument("--questions", type=int, default=10)
    parser.add_argument("--cli", type=int, default=3, help="fresh CLI runs")
    parser.add_argument("--port", type=int, default=0, help="HTTP port (0: a free one)")
    args = parser.parse_args(argv)
    runtime = runtime_for(args.work)
    out: dict[str, Any] = {"dataset": str(args.data), "machine": machine()}
    ingested = ingest_once(runtime.job_services(), [args.data / "input"])
    if ingested is not None:
        out["ingest"] = ingested
    (built, refreshed), seconds = timed(
        lambda: refresh_in_process(runtime.graph_services(), rebuild=False)
    )
    communities = refreshed.communities
    out["graph"] = {
        "communities": communities,
        "reports_written": built.reports_written,
        "build_s": round(seconds, 1),
        **runtime.graph().counts(),
    }
    with (args.data / "questions_global_125.csv").open(encoding="utf-8-sig") as handle:
        questions = [row["question_text"] for row in csv.DictReader(handle)]
    step = max(1, len(questions) // args.questions)
    sample = questions[::step][: args.questions]
    rows = []
    for question in sample:
        t0 = time.perf_counter()
        response = runtime.queries().ask_sync(AskRequest(question=question, mode="global"))
        s = time.perf_counter() - t0
        rows.append({"question": question, "s": round(s, 3), **answer_stats(response)})
    runtime.close()
    out["in_process"] = rows
    summary: dict[str, Any] = {"n": len(rows)}
    for key in ("context_tokens", "communities", "documents", "key_points"):
        summary[f"mean_{key}"] = round(statistics.fmean(r[key] for r in rows), 1)
    summary["duplicate_key_points"] = sum(r["duplicate_key_points"] for r in rows)
    summary["fragments"] = sum(r["fragments"] for r in rows)
    summary["in_process_warm_p50_ms"] = round(1000 * statistics.median(r["s"] for r in rows), 1)
    out["summary"] = summary
    out["cli"] = cli_run(args.work, sample[: args.cli])
    out["http"] = http_run(args.work, sample, args.port or free_port())
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
