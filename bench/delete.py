"""What deleting 1% of a corpus costs the graph, and whether anything deleted leaks.

``python -m bench.delete --data ../shared/data/ops_runbooks --docs 400 [--reports llm]``

Ingests the first ``--docs`` records, builds the graph (offline extractor, extractive
reports), then deletes ``--share`` of the documents (rounded up, seeded sample) in one
``app.lifecycle.delete_documents`` call — the path behind ``lore delete`` and
``DELETE /v1/documents/{id}`` — and prints JSON: entities and relations removed,
community reports refreshed (their words new; and their share of all communities) and
re-covered (stored again with the same words: only chunk ids and importance moved),
seconds. Then it
checks that no removed chunk id and no *unique* sentence of the deleted documents (one
no remaining document contains) comes back from any read route, called as the routes
call them: hybrid search (each sampled sentence as a query), ask in local and global
mode (the deleted documents' titles as questions), every entity (``graph show`` /
``GET /v1/entities``: description and provenance), and every community with its report
(``graph communities``/``reports``, ``GET /v1/communities``). ``--reports llm`` has an LLM
write the reports (the scripted test server, ``bench.common.report_writer``) and counts
the calls the delete made (``report_calls``).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from app.ingest import ingest
from app.lifecycle import delete_documents
from app.refresh import refresh_in_process
from bench.common import machine, report_writer, runtime_for
from bench.pipeline import load_corpus
from graph.store import GraphStore
from lore.models import SourceDocument
from retrieval.ask_contract import AskRequest
from retrieval.contract import QueryRequest
from retrieval.queries import QueryService

_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_NOT_WORD = re.compile(r"[^0-9a-z]+")


def sentences(text: str) -> set[str]:
    """Normalised sentences of a text long enough to be telling (30+ characters)."""
    out = set()
    for piece in _SENTENCE.split(text):
        clean = " ".join(piece.split())
        if len(clean) >= 30:
            out.add(clean)
    return out


def _plain(text: str) -> str:
    """Letters and digits only, lower case, single spaces: a sentence as any markup shows it."""
    return " ".join(_NOT_WORD.sub(" ", text.lower()).split())


def unique_sentences(
    deleted: list[SourceDocument], kept: list[SourceDocument], served: Sequence[str] = ()
) -> list[str]:
    """Sentences of the deleted documents that no kept document holds.

    Compared as letters and digits only (:func:`_plain`), against the kept documents'
    titles and text and their text as stored and served (``served``): a kept file's
    Markdown may break a sentence up (a quote's ``>``, emphasis) that the stored text,
    an entity's description or a report then shows whole, and a kept runbook may bear
    a deleted one's title. Such a sentence is not the deleted documents' alone.
    """
    kept_text = " | ".join(_plain(t) for d in kept for t in (d.title, d.text))
    kept_text += " | " + " | ".join(_plain(t) for t in served)
    found = {s for d in deleted for s in sentences(d.text)}
    return sorted(s for s in found if _plain(s) not in kept_text)


def leaks(
    queries: QueryService,
    graph: GraphStore,
    deleted: list[SourceDocument],
    chunk_ids: set[str],
    unique: list[str],
    sample: int,
    seed: int,
) -> dict[str, Any]:
    """Removed chunk ids or unique sentences served by any read route (should be none)."""
    rng = random.Random(seed)
    probes = rng.sample(unique, min(sample, len(unique)))
    found: dict[str, list[str]] = {"chunk_ids": [], "sentences": []}

    plain = {s: _plain(s) for s in unique}

    def check(route: str, text: str, asked: str = "") -> None:
        """``asked``: the question; a sentence it holds is the user's, which replies quote."""
        flat, question = _plain(text), _plain(asked)
        found["chunk_ids"] += [f"{route}:{c}" for c in chunk_ids if c in text]
        found["sentences"] += [
            f"{route}:{s[:60]}" for s in unique if plain[s] in flat and plain[s] not in question
        ]

    for sentence in probes:
        response = queries.query_sync(QueryRequest(search_text=sentence[:300], top_k=20))
        check("search", response.model_dump_json())  # a result holding it is a leak
    titles = [d.title or d.id for d in deleted][:sample]
    for title in titles:
        for mode in ("local", "global"):
            question = f"What does {title} say?"
            answer = queries.ask_sync(AskRequest(question=question, mode=mode))
            check(f"ask-{mode}", answer.model_dump_json(), question)  # reasons quote it
    entities = [e for k in sorted(graph.entity_keys()) if (e := graph.entity(k)) is not None]
    check("entities", json.dumps([[e.name, e.description, e.chunk_ids] for e in entities]))
    check("reports", json.dumps([json.loads(r.to_json()) for r in graph.reports()]))
    check("communities", json.dumps([list(c.members) for c in graph.communities()]))
    return {
        "probed_sentences": len(probes),
        "questions": len(titles) * 2,
        "entities_checked": len(entities),
        "reports_checked": len(graph.reports()),
        "leaked_chunk_ids": len(found["chunk_ids"]),
        "leaked_sentences": len(found["sentences"]),
        "examples": (found["chunk_ids"] + found["sentences"])[:5],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", type=Path, required=True, help="dir with docs.jsonl")
    parser.add_argument("--docs", type=int, default=400)
    parser.add_argument("--share", type=float, default=0.01)
    parser.add_argument("--probes", type=int, default=20, help="sentences searched")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--reports",
        choices=("extractive", "llm"),
        default="extractive",
        help="who writes the reports (llm: the scripted test server; calls are counted)",
    )
    args = parser.parse_args()
    with report_writer(args.reports) as (sections, calls):
        _run(args, sections, calls)


def _run(
    args: argparse.Namespace, sections: dict[str, dict[str, Any]], calls: Callable[[], int]
) -> None:
    docs = load_corpus(args.data, args.docs)
    scratch = Path(tempfile.mkdtemp(prefix="lore-bench-delete-"))
    try:
        runtime = runtime_for(scratch / "data", **sections)
        start = time.perf_counter()
        ingest(runtime.job_services(), docs)
        ingest_s = time.perf_counter() - start
        start = time.perf_counter()
        build, refreshed = refresh_in_process(runtime.graph_services(), rebuild=False)
        communities = refreshed.communities
        build_s = time.perf_counter() - start
        before = runtime.graph().counts()
        victims = random.Random(args.seed).sample(docs, math.ceil(len(docs) * args.share))
        gone = {d.id for d in victims}
        chunk_ids = {c.id for d in victims for c in runtime.store.chunks_of_document(d.id)}
        kept = [d for d in docs if d.id not in gone]
        served = [c.text for d in kept for c in runtime.store.chunks_of_document(d.id)]
        unique = unique_sentences(victims, kept, served)
        start = time.perf_counter()
        initial_calls = calls()
        report = delete_documents(
            runtime.graph_services(), runtime.jobs(), sorted(gone), indexes=runtime.indexes
        )
        delete_s = time.perf_counter() - start
        delete_calls = calls() - initial_calls
        after = runtime.graph().counts()
        checked = leaks(
            runtime.queries(), runtime.graph(), victims, chunk_ids, unique, args.probes, args.seed
        )
        runtime.close()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    cascade = report.graph.as_dict()
    rewritten = report.graph.refresh.rewritten if report.graph.refresh is not None else []
    by_level = Counter(int(cid.split("-", 1)[0]) for cid in rewritten)
    print(
        json.dumps(
            {
                "machine": machine(),
                "dataset": str(args.data),
                "report_writer": args.reports,
                "documents": len(docs),
                "deleted_documents": len(gone),
                "deleted_chunks": report.chunks,
                "graph_before": before,
                "graph_after": after,
                "entities_removed": cascade["entities_removed"],
                "relations_removed": cascade["relations_removed"],
                "entity_mentions_removed": cascade["entity_mentions_removed"],
                "relation_mentions_removed": cascade["relation_mentions_removed"],
                "communities": cascade["communities"],
                "communities_stale": cascade["communities_stale"],
                "reports_refreshed": cascade["reports_refreshed"],
                "refreshed_share": round(
                    cascade["reports_refreshed"] / max(1, cascade["communities"]), 4
                ),
                "reports_refreshed_by_level": dict(sorted(by_level.items())),
                # stored again with the same words: only their chunk ids and importance moved
                "reports_recovered": cascade["reports_recovered"],
                "entities_changed": cascade["entities_changed"],
                "report_calls": delete_calls,
                "report_calls_share": round(delete_calls / max(1, cascade["communities"]), 4),
                "initial_report_calls": initial_calls,
                "delete_s": round(delete_s, 2),
                "ingest_s": round(ingest_s, 1),
                "build_s": round(build_s, 1),
                "initial_reports": build.reports_written,
                "initial_communities": communities,
                "unique_sentences_of_deleted": len(unique),
                "leak_check": checked,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
