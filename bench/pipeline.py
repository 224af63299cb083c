"""Documents per second through the Celery pipeline, against pure embedding of the same text.

``python -m bench.pipeline --data ../shared/data/scifact --docs 300 --workers 1,2``

1. Chunk the documents exactly as the pipeline does and time the embedder alone on
   those texts (this process, ``embedding.threads`` = 2): the ceiling.
2. For each worker count: a fresh data directory, that many ``celery worker --pool=solo``
   processes (the 2 cores split between them), started and warmed *before* the clock
   starts; then submit one ingest job and time it until every document is done (load →
   chunk → embed → store → extract, with the job bookkeeping).

Prints JSON: docs/s of each, the ratio pipeline / embedding and the overhead.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from app.jobs import JobStore
from bench.common import machine, read_documents, runtime_for
from lore.models import SourceDocument

ROOT = Path(__file__).resolve().parents[1]


def load_corpus(data: Path, count: int) -> list[SourceDocument]:
    """The first ``count`` records of ``corpus.jsonl`` (or ``docs.jsonl``)."""
    path = data / "corpus.jsonl" if (data / "corpus.jsonl").exists() else data / "docs.jsonl"
    return read_documents(path, count)


def pure_embedding(docs: list[SourceDocument], scratch: Path) -> dict[str, Any]:
    """Chunk as the pipeline does; time only the embedder on the chunk texts."""
    runtime = runtime_for(scratch / "embed-only")
    pipeline = runtime.pipeline()
    texts = [t for doc in docs if (p := pipeline._prepare(doc)) for t in p.embed_texts]
    runtime.embedder.embed_documents(["warm up"])
    start = time.perf_counter()
    runtime.embedder.embed_documents(texts)
    seconds = time.perf_counter() - start
    runtime.close()
    return {"chunks": len(texts), "seconds": round(seconds, 2), "docs_per_s": len(docs) / seconds}


def through_workers(
    docs: list[SourceDocument], workers: int, redis_url: str, scratch: Path
) -> dict[str, Any]:
    """Start ``workers`` warmed workers, then time one ingest job end to end."""
    from app.ingest import submit_documents

    tag = uuid.uuid4().hex[:8]
    data = scratch / f"workers-{workers}"
    threads = max(1, (os.cpu_count() or 2) // workers)
    env = {
        **os.environ,
        "LORE_DATA_DIR": str(data),
        "LORE_BROKER__URL": redis_url,
        "LORE_BROKER__KEY_PREFIX": f"lore-bench-{tag}:",
        "LORE_BROKER__QUEUE": f"lore-bench-{tag}",
        "LORE_EMBEDDING__THREADS": str(threads),
        "OMP_NUM_THREADS": str(threads),
    }
    logs = [data.parent / f"worker-{workers}-{i}.log" for i in range(workers)]
    data.mkdir(parents=True)
    procs = []
    for i, log in enumerate(logs):
        with log.open("wb") as out:
            procs.append(
                subprocess.Popen(
                    [
                        *(sys.executable, "-m", "celery", "-A", "workers.celery_app", "worker"),
                        *("--pool=solo", "--without-gossip", "--without-mingle"),
                        *("--without-heartbeat", "-n", f"bench{i}-{tag}@%h"),
                        *("-Q", env["LORE_BROKER__QUEUE"], "-l", "warning"),
                    ],
                    cwd=ROOT,
                    env=env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )
            )
    runtime = runtime_for(
        data,
        broker={
            "url": redis_url,
            "key_prefix": env["LORE_BROKER__KEY_PREFIX"],
            "queue": env["LORE_BROKER__QUEUE"],
        },
    )
    jobs = JobStore(data / "lore.sqlite3")
    try:
        _wait_ready(procs, logs, redis_url, env["LORE_BROKER__KEY_PREFIX"])
        start = time.perf_counter()
        job = submit_documents(runtime.store, runtime.jobs(), runtime.dispatcher, docs)
        while (info := jobs.get(job)) is not None and info.state == "running":
            time.sleep(0.05)
        seconds = time.perf_counter() - start
        assert info is not None and info.counts.get("done", 0) == len(docs), info
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            proc.wait(timeout=60)
        jobs.close()
        runtime.close()
        _drop(redis_url, env["LORE_BROKER__KEY_PREFIX"])
    return {"workers": workers, "seconds": round(seconds, 2), "docs_per_s": len(docs) / seconds}


def _wait_ready(procs: list[Any], logs: list[Path], url: str, prefix: str) -> None:
    """Wait until every worker answers a ping (they warm their model before that)."""
    from lore.settings import load_settings
    from workers.celery_app import create_app

    settings = load_settings(broker={"url": url, "key_prefix": prefix})
    app = create_app(settings)
    try:
        deadline = time.monotonic() + 300
        while len(app.control.ping(timeout=1.0) or []) < len(procs):
            for proc, log in zip(procs, logs, strict=True):
                if proc.poll() is not None:
                    raise RuntimeError(log.read_text()[-2000:])
            if time.monotonic() > deadline:
                raise RuntimeError("workers did not start")
    finally:
        app.close()


def _drop(url: str, prefix: str) -> None:
    import redis

    client = redis.Redis.from_url(url)
    keys = list(client.scan_iter(match=f"{prefix}*"))
    if keys:
        client.delete(*keys)
    client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "scifact")
    parser.add_argument("--docs", type=int, default=300)
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/10")
    args = parser.parse_args()
    docs = load_corpus(args.data, args.docs)
    scratch = Path(tempfile.mkdtemp(prefix="lore-bench-pipeline-"))
    try:
        embedding = pure_embedding(docs, scratch)
        runs = [through_workers(docs, int(n), args.redis, scratch) for n in args.workers.split(",")]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    for run in runs:
        run["ratio_to_pure_embedding"] = round(run["docs_per_s"] / embedding["docs_per_s"], 3)
        run["overhead"] = round(1 - run["ratio_to_pure_embedding"], 3)
        run["docs_per_s"] = round(run["docs_per_s"], 2)
    embedding["docs_per_s"] = round(embedding["docs_per_s"], 2)
    print(
        json.dumps(
            {
                "machine": machine(),
                "dataset": str(args.data),
                "documents": len(docs),
                "pure_embedding": embedding,
                "pipeline": runs,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
