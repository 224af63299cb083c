"""Whether graph operations cost what their change costs, at three corpus sizes.

``python -m bench.scale --base 40`` (sizes 40, 160 and 640 documents)

The corpus: the ops runbooks (``ops_runbooks/docs.jsonl``) and the SciFact abstracts
(``scifact/corpus.jsonl``) interleaved, first record of each first; past what they hold,
documents are made by recombining their paragraphs (seeded: two paragraphs of two random
real documents under a new id), so a larger size is a superset of a smaller one with the
same kind of text. The edited and the deleted documents lend no paragraph, so their own
text appears once at every size (the entities they share with other documents still gain
mentions as the corpus grows, so their change grows: ``edit_reach``, ``delete_reach``).
The probe is the same change at every size: two short runbooks written for the bench
(:data:`PROBE`, :data:`PROBE_KEPT`) whose invented names no corpus document holds,
ingested and built after the corpus; one is edited, then deleted (``probe_edit_*``,
``probe_delete_*``), which rewrites their community's report.

Each size runs in a fresh data directory, in a child process of its own (peak memory is
that process's), and prints one JSON line: ingest chunks/s, the
``graph build`` seconds and peak RSS, then the cost of a one-document edit (re-ingest and
build), a delete, a global question cold (a fresh runtime) and warm, and listing the
level-0 communities with their reports; each also as the ratio to the smallest size.
Then the first local and the first global answer of new processes (``lore ask``): the
global one without the view kept on disk (it reads every report) and with it, in
:data:`FIRST_ROUNDS` interleaved rounds (:func:`first_answers`: medians, and each
round's global / local ratio).

``--embed-cache FILE`` keeps the model's vectors by text in a SQLite file, so the sizes
above the smallest (and later runs) embed only texts not embedded before; the smallest
size always embeds for real, and its ``ingest_chunks_per_s`` is the one to read.
``--fill-cache`` embeds the largest size's chunk texts into that file and stops (it can
run while the machine is busy; the timed run then reads the vectors back). Queries are
always embedded by the model.
The edit and the delete also count their SQLite statements and virtual-machine steps
(:func:`sqlite_work`), figures the machine's load does not change. The
same operation on a bigger corpus should cost about the same: the change is the same.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import random
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from app.ingest import ingest
from app.lifecycle import delete_documents
from app.refresh import refresh_in_process
from app.runtime import open_runtime
from bench.common import (
    fresh_answer_times,
    machine,
    read_documents,
    runtime_for,
)
from lore.embedders import Embedder, Matrix
from lore.models import SourceDocument
from lore.settings import load_settings
from retrieval.ask_contract import AskRequest
from retrieval.view_snapshot import ViewSnapshots

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
EDITED, DELETED = 13, 7  # positions every size holds (real documents, ops and SciFact)
QUESTION = "What recurring causes and remedies show up across these documents?"

PROBE = SourceDocument(
    "probe/quorvane-lease.md",
    "probe/quorvane-lease.md",
    "# Quorvane ledger lease lost\n\n"
    "When QRV-7781 shows in the Quorvane ledger daemon's log, the daemon has lost its lease"
    " on the Tessaly lock service. Run `tessalyctl reclaim --ledger quorvane-east` and"
    " watch /srv/quorvane/journal for the Vellicott replay marker.\n\n"
    "If the Vellicott replay does not finish within ten minutes, page the Marrowfield"
    " storage team and set QUORVANE_READONLY=1 until Tessaly answers again.\n",
    "Quorvane ledger lease lost",
    {},
)  # written for this bench: no corpus document names these things
PROBE_KEPT = SourceDocument(
    "probe/quorvane-ledger.md",
    "probe/quorvane-ledger.md",
    "# Quorvane ledger daemon\n\n"
    "The Quorvane ledger daemon holds a lease on the Tessaly lock service and renews it"
    " every thirty seconds. The Marrowfield storage team owns the daemon and"
    " `tessalyctl`; its journal lives in /srv/quorvane/journal and every restart ends"
    " with a Vellicott replay.\n",
    "Quorvane ledger daemon",
    {},
)  # shares the probe's names and stays: deleting the probe rewrites their community


def corpus(count: int, data: Path = DATA) -> list[SourceDocument]:
    """``count`` documents: real ones interleaved, then recombined paragraphs (seeded)."""
    ops = read_documents(data / "ops_runbooks" / "docs.jsonl", count)
    sci = read_documents(data / "scifact" / "corpus.jsonl", count)
    real = [d for pair in zip(ops, sci, strict=False) for d in pair]
    real += ops[len(sci) :] + sci[len(ops) :]
    docs = real[:count]
    rng = random.Random(7)
    paragraphs = [[p for p in d.text.split("\n\n") if len(p) > 80] or [d.text] for d in real]
    # the edited and deleted documents lend no paragraph: their text is in the corpus once
    # at every size, so the edit and the delete are the same change at every size
    donors = [i for i in range(len(real)) if i not in (EDITED, DELETED)]
    while len(docs) < count:
        a, b = rng.sample(donors, 2)
        text = rng.choice(paragraphs[a]) + "\n\n" + rng.choice(paragraphs[b])
        n = len(docs)
        docs.append(SourceDocument(f"mix-{n}", f"mix/{n}", text, f"Mix {n}", {}))
    return docs


class CachedEmbedder:
    """The configured model's vectors, kept by text in a SQLite file (a bench aid).

    Every vector was computed by the wrapped model for that very text; only repeated
    work is saved. Queries are embedded by the model each time.
    """

    def __init__(self, inner: Embedder, path: Path) -> None:
        self.inner = inner
        self._db = sqlite3.connect(path, check_same_thread=False)
        self._db.execute("CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, v BLOB)")
        self.hits = 0
        self.misses = 0

    @property
    def name(self) -> str:
        """The wrapped model's name."""
        return self.inner.name

    @property
    def dimension(self) -> int:
        """The wrapped model's vector size."""
        return self.inner.dimension

    def _key(self, text: str) -> str:
        return hashlib.sha256(f"{self.inner.name}\0{text}".encode()).hexdigest()

    def embed_documents(self, texts: Sequence[str]) -> Matrix:
        """Vectors kept from an earlier call; the model embeds the rest (and they are kept)."""
        keys = [self._key(t) for t in texts]
        found: dict[str, bytes] = {}
        for start in range(0, len(keys), 500):
            part = keys[start : start + 500]
            marks = ",".join("?" * len(part))
            found.update(
                self._db.execute(f"SELECT key, v FROM vectors WHERE key IN ({marks})", part)
            )
        todo = {k: t for k, t in zip(keys, texts, strict=True) if k not in found}
        if todo:
            fresh = self.inner.embed_documents(list(todo.values()))
            rows = [
                (k, np.asarray(v, dtype=np.float32).tobytes())
                for k, v in zip(todo, fresh, strict=True)
            ]
            self._db.executemany("INSERT OR IGNORE INTO vectors VALUES (?, ?)", rows)
            self._db.commit()
            found.update(rows)
        self.hits += len(texts) - len(todo)
        self.misses += len(todo)
        if not keys:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.stack([np.frombuffer(found[k], dtype=np.float32) for k in keys])

    def embed_query(self, text: str) -> Matrix:
        """The model's query vector (never cached: queries are timed)."""
        return self.inner.embed_query(text)


def fill_cache(count: int, path: Path, scratch: Path) -> dict[str, Any]:
    """Embed the chunk texts of ``corpus(count)`` into the cache (as the pipeline cuts them)."""
    runtime = runtime_for(scratch / "chunker")
    pipeline = runtime.pipeline()
    cached = CachedEmbedder(runtime.embedder, path)
    texts: list[str] = []
    start = time.perf_counter()
    for doc in corpus(count):
        texts += [d.embed_text(doc.title) for d in pipeline.chunks_of(doc)]
        if len(texts) >= 512:
            cached.embed_documents(texts)
            texts = []
    cached.embed_documents(texts)
    runtime.close()
    seconds = time.perf_counter() - start
    return {
        "filled_for_documents": count,
        "embedded": cached.misses,
        "cached": cached.hits,
        "s": round(seconds),
    }


STEP = 10  # VM steps per progress call: a statement of fewer steps counts none


def _rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


@contextmanager
def sqlite_work(runtime: Any) -> Iterator[dict[str, int]]:
    """Statements run and virtual-machine steps taken on the runtime's SQLite connections.

    A step visits at most one row, so a table scan shows up as steps in proportion to the
    table and an indexed lookup as a few: the count says whether an operation reads what
    it changed or the corpus, whatever the machine's load (PostgreSQL and Neo4j: none).
    """
    found = {"statements": 0, "vm_steps": 0}
    connections: list[sqlite3.Connection] = []
    for owner in (runtime.store, runtime.graph(), runtime.quarantine()):
        connection = getattr(getattr(owner, "database", None), "_db", None)  # embedded only
        if isinstance(connection, sqlite3.Connection) and connection not in connections:
            connections.append(connection)

    def step() -> int:
        found["vm_steps"] += STEP
        return 0

    def statement(_: str) -> None:
        found["statements"] += 1

    for connection in connections:
        connection.set_progress_handler(step, STEP)
        connection.set_trace_callback(statement)
    try:
        yield found
    finally:
        for connection in connections:
            connection.set_progress_handler(None, 0)
            connection.set_trace_callback(None)


def reach(runtime: Any, document_id: str) -> dict[str, int]:
    """How far a document's change reaches in the graph before it is made.

    Its entities, the chunks that mention them (any document's) and the members of the
    communities holding them: what an edit or a delete of it has to read again. When
    these grow with the corpus, the same document is not the same change.
    """
    graph = runtime.graph()
    chunk_ids = sorted(runtime.store.chunk_ids_of_documents([document_id]))
    keys = sorted({k for ks in graph.entities_of_chunks(chunk_ids).values() for k in ks})
    mentions = graph.chunks_of_entities(keys)
    holding = graph.communities_holding(keys)
    return {
        "entities": len(keys),
        "chunks_mentioning_them": len({c for cs in mentions.values() for c in cs}),
        "communities_holding_them": len(holding),
        "members_of_those_communities": sum(len(c.members) for c in holding),
    }


def timed_edit(runtime: Any, target: SourceDocument, sentence: str) -> dict[str, Any]:
    """Re-ingest ``target`` with one sentence more and build: seconds and work."""
    edited = SourceDocument(
        target.id,
        target.source,
        target.text + "\n\n" + sentence + "\n",
        target.title,
        dict(target.metadata),
    )
    reached = reach(runtime, target.id)
    start = time.perf_counter()
    with sqlite_work(runtime) as work:
        ingest(runtime.job_services(), [edited], extract_graph=False)
        built, _ = refresh_in_process(runtime.graph_services(), rebuild=False)
    return {
        "reach": reached,
        "s": round(time.perf_counter() - start, 2),
        "reports_written": built.reports_written,
        "reports_recovered": built.reports_recovered,
        "clustering": built.clustering,
        "statements": work["statements"],
        "vm_steps": work["vm_steps"],
    }


def timed_delete(runtime: Any, document_id: str) -> dict[str, Any]:
    """Delete one document through the cascade every door runs: seconds and work."""
    reached = reach(runtime, document_id)
    start = time.perf_counter()
    with sqlite_work(runtime) as work:
        deleted = delete_documents(
            runtime.graph_services(), runtime.jobs(), [document_id], indexes=runtime.indexes
        )
    graph = deleted.graph.as_dict()
    return {
        "reach": reached,
        "s": round(time.perf_counter() - start, 2),
        "reports_refreshed": graph["reports_refreshed"],
        "reports_recovered": graph["reports_recovered"],
        "statements": work["statements"],
        "vm_steps": work["vm_steps"],
    }


def one_size(count: int, scratch: Path, cache: Path | None = None) -> dict[str, Any]:
    """Every figure for one size (run in its own process)."""
    docs = corpus(count)
    base = runtime_for(scratch / "chunker")
    embedder: Embedder = base.embedder
    base.close()
    if cache is not None:
        embedder = CachedEmbedder(embedder, cache)
    runtime = open_runtime(load_settings(data_dir=scratch / "data"), embedder=embedder)
    start = time.perf_counter()
    ingested = ingest(runtime.job_services(), docs, extract_graph=False).report
    ingest_s = time.perf_counter() - start
    chunks = len(list(runtime.store.chunk_refs()))
    start = time.perf_counter()
    built, refreshed = refresh_in_process(runtime.graph_services(), rebuild=False)
    communities = refreshed.communities
    build_s = time.perf_counter() - start
    build_rss = _rss_mb()

    # the probe: two documents written for the bench, whose names no corpus document
    # holds, so editing or deleting one is the same change at every size
    ingest(runtime.job_services(), [PROBE, PROBE_KEPT], extract_graph=False)
    refresh_in_process(runtime.graph_services(), rebuild=False)
    probe_edit = timed_edit(runtime, PROBE, "Since the scale run, QRV-7782 pages Marrowfield.")
    # a real document, whose reach grows with the corpus
    edit = timed_edit(
        runtime, docs[EDITED], "Since the scale run, E_SCALE_CANARY pages the on-call engineer."
    )
    probe_delete = timed_delete(runtime, PROBE.id)
    delete = timed_delete(runtime, docs[DELETED].id)
    runtime.close()

    fresh = open_runtime(load_settings(data_dir=scratch / "data"), embedder=embedder)
    start = time.perf_counter()
    asyncio.run(fresh.queries().ask(AskRequest(question=QUESTION, mode="global")))
    cold_s = time.perf_counter() - start
    start = time.perf_counter()
    asyncio.run(fresh.queries().ask(AskRequest(question=QUESTION, mode="global")))
    warm_s = time.perf_counter() - start
    start = time.perf_counter()
    level0 = fresh.graph().communities(level=0)
    fresh.graph().reports_by_id([c.id for c in level0])
    list_s = time.perf_counter() - start
    fresh.close()
    # a new process each (``lore ask``, model load included); the issue bounds the first
    # global answer by the first local answer. Without the view kept on disk (the first
    # process after a write too large for the view log) it reads every report and writes
    # the snapshot; the next process loads it (retrieval/view_snapshot.py)
    first = first_answers(scratch / "data")
    local_printed_s, first_local_s = first["local"]
    answered_s, first_global_read_s = first["global_no_snapshot"]
    global_printed_s, first_global_s = first["global"]
    return {
        "documents": count,
        "chunks": chunks,
        "documents_done": len(ingested.done),
        "ingest_chunks_per_s": round(chunks / ingest_s, 1),
        "build_s": round(build_s, 2),
        "build_peak_rss_mb": build_rss,
        "communities": communities,
        "build_reports_written": built.reports_written,
        **{f"edit_{k}": v for k, v in edit.items()},
        **{f"delete_{k}": v for k, v in delete.items()},
        **{f"probe_edit_{k}": v for k, v in probe_edit.items()},
        **{f"probe_delete_{k}": v for k, v in probe_delete.items()},
        "embeddings_cached": cache is not None,
        "global_cold_s": round(cold_s, 2),
        "global_warm_s": round(warm_s, 3),
        "communities_level0_s": round(list_s, 3),
        "first_local_answer_s": first_local_s,
        "first_global_answer_s": first_global_s,
        "first_global_over_first_local": round(first_global_s / max(first_local_s, 1e-9), 2),
        "first_global_answer_no_snapshot_s": first_global_read_s,
        "first_global_no_snapshot_over_first_local": round(
            first_global_read_s / max(first_local_s, 1e-9), 2
        ),
        # until each process printed its answer (the exits above include the snapshot's
        # write and the stores' closing)
        "first_local_answer_printed_s": local_printed_s,
        "first_global_answer_printed_s": global_printed_s,
        "first_global_answer_no_snapshot_printed_s": answered_s,
        "printed_global_over_local": round(global_printed_s / max(local_printed_s, 1e-9), 2),
        "printed_global_no_snapshot_over_local": round(answered_s / max(local_printed_s, 1e-9), 2),
        "first_answer_rounds": FIRST_ROUNDS,
        # per round, global / local of the same round (printed), median and range
        "printed_global_over_local_pairs": first["global_pairs"],
        "printed_global_no_snapshot_over_local_pairs": first["global_no_snapshot_pairs"],
    }


FIRST_ROUNDS = 5


def first_answers(data: Path, rounds: int = FIRST_ROUNDS) -> dict[str, Any]:
    """Medians over ``rounds`` of new processes' (printed, exit) seconds, interleaved.

    Each round: a global question with no snapshot (removed first, as a delete does),
    one that loads the snapshot it wrote, and a local one. One run of each varies by
    half a second on these machines; the ratios are also given per round (median,
    lowest, highest).
    """
    runs: dict[str, list[tuple[float, float]]] = {
        "local": [],
        "global_no_snapshot": [],
        "global": [],
    }
    for _ in range(rounds):
        ViewSnapshots.of(data).remove()
        runs["global_no_snapshot"].append(fresh_answer_times(data, QUESTION, "global"))
        runs["global"].append(fresh_answer_times(data, QUESTION, "global"))
        runs["local"].append(fresh_answer_times(data, QUESTION, "local"))
    out: dict[str, Any] = {
        name: (
            round(statistics.median(p for p, _ in found), 2),
            round(statistics.median(e for _, e in found), 2),
        )
        for name, found in runs.items()
    }
    for name in ("global", "global_no_snapshot"):
        pairs = [g[0] / max(lo[0], 1e-9) for g, lo in zip(runs[name], runs["local"], strict=True)]
        out[f"{name}_pairs"] = [
            round(statistics.median(pairs), 2),
            round(min(pairs), 2),
            round(max(pairs), 2),
        ]
    return out


RATIOS = (
    "build_s",
    "edit_s",
    "edit_vm_steps",
    "delete_s",
    "delete_vm_steps",
    "probe_edit_s",
    "probe_edit_vm_steps",
    "probe_delete_s",
    "probe_delete_vm_steps",
    "global_cold_s",
    "global_warm_s",
    "communities_level0_s",
)


def main() -> None:
    """Run the three sizes (each in a child process) and print JSON lines."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--base", type=int, default=40, help="documents at the smallest size")
    parser.add_argument("--embed-cache", type=Path, default=None, help="vectors kept by text")
    parser.add_argument(
        "--fill-cache", action="store_true", help="embed the largest size into the cache, stop"
    )
    parser.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--scratch", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--cached", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one is not None:
        cache = args.embed_cache if args.cached else None
        print(json.dumps(one_size(args.one, args.scratch, cache)))
        return
    if args.fill_cache:
        if args.embed_cache is None:
            parser.error("--fill-cache needs --embed-cache FILE")
        with tempfile.TemporaryDirectory(prefix="lore-scale-") as scratch:
            print(json.dumps(fill_cache(16 * args.base, args.embed_cache, Path(scratch))))
        return
    print(json.dumps({"machine": machine()}))
    smallest: dict[str, Any] | None = None
    for count in (args.base, 4 * args.base, 16 * args.base):
        with tempfile.TemporaryDirectory(prefix="lore-scale-") as scratch:
            child = [sys.executable, "-m", "bench.scale", "--one", str(count), "--scratch", scratch]
            if args.embed_cache is not None:  # the smallest size embeds for real
                child += ["--embed-cache", str(args.embed_cache)]
                child += ["--cached"] if count != args.base else []
            done = subprocess.run(child, capture_output=True, text=True, check=True)
        row = json.loads(done.stdout.strip().splitlines()[-1])
        smallest = smallest or row
        row["ratio_to_smallest"] = {
            k: round(row[k] / smallest[k], 2) if smallest[k] else None for k in RATIOS
        }
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
