"""A documentation tree nobody tuned to: identifiers, paraphrases, global answers, routes, chrome.

    python -m bench.doc_trees --tree /usr/share/doc/git-doc --sets bench/data/doc_trees/git
        --work /tmp/lore-doc-git [--reuse] [--ingest-only] [--setting search.feedback_boost=1]

Ingests the tree's HTML pages with the product's own command, in a child process
(``lore --data-dir WORK ingest --include '*.html' PATHS --json``: the pages under the
``under`` folders of ``SETS/tree.json``, or the whole tree), then ``lore graph build``
(offline). ``--reuse`` keeps a work directory that already holds the store and its graph,
and the ingest figures recorded in it (``WORK/doc_trees_ingest.json``). Then, from the
labelled sets in ``SETS`` (``identifiers.jsonl``, ``paraphrases.jsonl``, ``global.jsonl``:
``{"id", "query", "gold": [page, ...]}``, pages relative to the tree):

- **identifiers** R@1 / R@5 and **paraphrases** R@5 / R@10: a hit is a result chunk (in
  rank order, ``top_k`` 10, hybrid defaults) whose document is a gold page;
- **global** questions asked with ``mode=global`` and with ``mode=local``: coverage (share
  of gold pages cited) and precision (share of cited pages that are gold), means over
  the questions, and the pages cited;
- **route**: the ``auto`` router's decision for every question; identifier and paraphrase
  questions should go ``local``, corpus-wide ones ``global``; and, apart
  (``route_only_questions``), those of ``routes.jsonl`` when the set has one
  (``{"id", "query", "expected"}``: questions written for the router alone);
- **latency**: the first global and the first local answer of a fresh process (``lore ask
  --mode global|local`` wall time, each in its own new process), and warm global answers
  in this process (p50 after the first);
- **chunks**: count, the share that is navigation or boilerplate, tiny ones, and a
  retention check (see :mod:`bench.doc_tree_chrome`);
- **graph**: the 20 entities mentioned in most chunks, 50 random entities and 20 random
  community report titles (seeded).

Prints one JSON object, with the machine and the dataset.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

from bench.common import fresh_first_answer, lore_command, machine, percentiles, runtime_for
from bench.doc_tree_chrome import chunk_figures
from ingest.roots import file_of, known_roots
from retrieval.ask_contract import AskRequest
from retrieval.contract import QueryRequest

SEED = 27


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _inputs(tree: Path, under: list[str]) -> list[Path]:
    return [tree / u for u in under] if under else [tree]


def html_bytes(inputs: list[Path]) -> int:
    """Bytes of the HTML pages under ``inputs``."""
    return sum(f.stat().st_size for p in inputs for f in p.rglob("*.html") if f.is_file())


def ingest_and_build(tree: Path, under: list[str], work: Path) -> dict[str, Any]:
    """``lore ingest`` then ``lore graph build`` in child processes; their figures."""
    inputs = _inputs(tree, under)
    base = [*lore_command(), "--data-dir", str(work)]
    start = time.perf_counter()
    done = subprocess.run(
        [*base, "ingest", "--include", "*.html", *map(str, inputs), "--json"],
        check=False,
        capture_output=True,
        text=True,
    )
    ingest_s = time.perf_counter() - start
    if done.returncode not in (0, 3):
        raise SystemExit(f"lore ingest failed ({done.returncode}): {done.stderr[-2000:]}")
    summary = json.loads(done.stdout)
    start = time.perf_counter()
    built = subprocess.run(
        [*base, "graph", "build", "--json"], check=False, capture_output=True, text=True
    )
    graph_s = time.perf_counter() - start
    if built.returncode != 0:
        raise SystemExit(f"lore graph build failed ({built.returncode}): {built.stderr[-2000:]}")
    size = html_bytes(inputs)
    figures = {
        "html_mb": round(size / 1e6, 2),
        "ingest_s": round(ingest_s, 1),
        "ingest_s_per_mb": round(ingest_s / (size / 1e6), 2),
        "documents_done": summary.get("done"),
        "failed": len(summary.get("failed", [])),
        "skipped": len(summary.get("skipped", [])),
        "graph_build_s": round(graph_s, 1),
        "command": " ".join([*base, "ingest", "--include", "'*.html'", *map(str, inputs)]),
    }
    (work / "doc_trees_ingest.json").write_text(json.dumps(figures, indent=2))
    return figures


def _page(source: str, roots: dict[str, Path], root: Path) -> str:
    """A source's page path relative to the tree (the source itself when not in it)."""
    file = file_of(source, roots)
    try:
        return file.relative_to(root).as_posix() if file else source
    except ValueError:
        return source


def _pages(runtime: Any, tree: Path) -> dict[str, str]:
    """Document id → page path relative to the tree (found through the store's roots)."""
    roots = known_roots(runtime.store)
    return {
        doc.id: _page(doc.source, roots, tree.resolve()) for doc in runtime.store.list_documents()
    }


def _recall(
    runtime: Any, pages: dict[str, str], rows: list[dict[str, Any]], depths: tuple[int, ...]
) -> dict[str, Any]:
    """R@depth over ``rows``: a hit is a result chunk (rank order) of a gold page."""
    searcher = runtime.searcher()
    hits = dict.fromkeys(depths, 0)
    misses = []
    for row in rows:
        request = QueryRequest.model_validate({"search_text": row["query"], "top_k": max(depths)})
        ranked = [
            pages.get(r.document_id, r.document_id) for r in searcher.search_sync(request).results
        ]
        gold = set(row["gold"])
        first = next((i for i, page in enumerate(ranked) if page in gold), None)
        for depth in depths:
            hits[depth] += first is not None and first < depth
        if first is None or first > 0:
            misses.append(
                {
                    "id": row["id"],
                    "query": row["query"],
                    "gold_rank": None if first is None else first + 1,
                    "top3": ranked[:3],
                }
            )
    out: dict[str, Any] = {"n": len(rows)}
    out.update({f"R@{d}": round(hits[d] / max(len(rows), 1), 3) for d in depths})
    out["not_first"] = misses
    return out


def _answers(
    runtime: Any, tree: Path, rows: list[dict[str, Any]], mode: str
) -> tuple[dict[str, Any], list[float]]:
    """Coverage and precision of the pages an answer cites; the seconds of each answer."""
    root = tree.resolve()
    roots = known_roots(runtime.store)
    coverage: list[float] = []
    precision: list[float] = []
    cited_counts: list[int] = []
    seconds: list[float] = []
    per_question = []
    for row in rows:
        start = time.perf_counter()
        response = runtime.queries().ask_sync(AskRequest(question=row["query"], mode=mode))
        seconds.append(time.perf_counter() - start)
        cited: set[str] = set()
        for citation in response.citations:
            for source in citation.sources:
                cited.add(_page(source, roots, root))
        gold = set(row["gold"])
        good = len(cited & gold)
        coverage.append(good / len(gold))
        precision.append(good / len(cited) if cited else 0.0)
        cited_counts.append(len(cited))
        per_question.append(
            {
                "id": row["id"],
                "mode": response.mode,
                "coverage": round(coverage[-1], 3),
                "precision": round(precision[-1], 3),
                "cited": len(cited),
                "answer_start": response.answer[:120],
            }
        )
    n = max(len(rows), 1)
    return {
        "n": len(rows),
        "coverage": round(sum(coverage) / n, 3),
        "precision": round(sum(precision) / n, 3),
        "mean_pages_cited": round(sum(cited_counts) / n, 1),
        "questions": per_question,
    }, seconds


def _routes(runtime: Any, sets: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """The auto route of every question; a row's ``expected`` overrides its set's."""
    expected = {"identifiers": "local", "paraphrases": "local", "global": "global"}
    right = total = 0
    per_set: dict[str, Any] = {}
    misses = []
    for name, rows in sets.items():
        ok = 0
        for row in rows:
            decided = asyncio.run(runtime.asker().route(row["query"], "auto", has_filters=False))
            total += 1
            if decided.decision == row.get("expected", expected.get(name)):
                ok += 1
            else:
                misses.append(
                    {"id": f"{name}:{row['id']}", "query": row["query"], "got": decided.decision}
                )
        right += ok
        per_set[name] = f"{ok}/{len(rows)}"
    return {
        "accuracy": round(right / max(total, 1), 3),
        "right": f"{right}/{total}",
        "per_set": per_set,
        "misses": misses,
    }


def _graph_figures(runtime: Any) -> dict[str, Any]:
    graph = runtime.graph()
    keys = sorted(graph.entity_keys())
    chunks = graph.chunks_of_entities(keys)
    top = sorted(keys, key=lambda k: (-len(chunks.get(k, [])), k))[:20]
    rng = random.Random(SEED)
    sampled = rng.sample(keys, min(50, len(keys)))

    def named(key: str) -> dict[str, Any]:
        entity = graph.entity(key)
        if entity is None:
            return {"key": key}
        return {"name": entity.name, "type": entity.type, "chunks": len(chunks.get(key, []))}

    reports = graph.reports()
    titles = [r.title for r in rng.sample(reports, min(20, len(reports)))]
    return {
        "counts": graph.counts(),
        "top_entities": [named(k) for k in top],
        "random_entities": [named(k) for k in sampled],
        "random_report_titles": titles,
    }


def _stored_chunks(
    runtime: Any, pages: dict[str, str]
) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Page → its chunks' texts; page → their titles and heading paths."""
    texts: dict[str, list[str]] = {}
    headings: dict[str, list[str]] = {}
    for doc_id in sorted(pages):
        chunks = runtime.store.chunks_of_document(doc_id)
        texts[pages[doc_id]] = [c.text for c in chunks]
        headings[pages[doc_id]] = sorted({f"{c.title}\n{c.heading}" for c in chunks})
    return texts, headings


def main(argv: list[str] | None = None) -> None:
    """Run and print JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, required=True, help="the HTML tree's root")
    parser.add_argument("--sets", type=Path, required=True, help="bench/data/doc_trees/NAME")
    parser.add_argument("--work", type=Path, required=True, help="the data directory to use")
    parser.add_argument("--reuse", action="store_true", help="keep an ingested work directory")
    parser.add_argument("--ingest-only", action="store_true", help="ingest, build, stop")
    parser.add_argument(
        "--setting",
        action="append",
        default=[],
        metavar="SECTION.KEY=JSON",
        help="a setting of the measuring process, e.g. search.feedback_boost=1 (repeatable; "
        "the fresh-process timings keep the defaults)",
    )
    args = parser.parse_args(argv)
    sections: dict[str, dict[str, Any]] = {}
    for item in args.setting:
        name, _, value = item.partition("=")
        section, _, key = name.partition(".")
        sections.setdefault(section, {})[key] = json.loads(value)
    meta_file = args.sets / "tree.json"
    meta = json.loads(meta_file.read_text()) if meta_file.exists() else {}
    under: list[str] = list(meta.get("under", []))
    recorded = args.work / "doc_trees_ingest.json"
    if args.reuse and recorded.exists():
        ingest = {**json.loads(recorded.read_text()), "reused": True}
    else:
        if args.work.exists():
            shutil.rmtree(args.work)
        args.work.mkdir(parents=True)
        ingest = ingest_and_build(args.tree, under, args.work)
    if args.ingest_only:
        print(json.dumps({"ingest": ingest}, indent=2))
        return
    sets = {
        name: _read_jsonl(args.sets / f"{name}.jsonl")
        for name in ("identifiers", "paraphrases", "global")
    }
    out: dict[str, Any] = {
        "dataset": {**meta, "tree": str(args.tree), "sets": str(args.sets)},
        "settings": sections,
        "machine": machine(),
        "ingest": ingest,
    }
    first_global = sets["global"][0]["query"] if sets["global"] else "What is this about?"
    out["fresh_process"] = {
        "first_global_answer_s": fresh_first_answer(args.work, first_global, "global"),
        "first_local_answer_s": fresh_first_answer(args.work, first_global, "local"),
        "how": "lore ask --mode global|local QUESTION --json, wall time, each in a new process",
    }
    out["fresh_process"]["global_over_local"] = round(
        out["fresh_process"]["first_global_answer_s"]
        / max(out["fresh_process"]["first_local_answer_s"], 1e-9),
        2,
    )
    runtime = runtime_for(args.work, **sections)
    pages = _pages(runtime, args.tree)
    out["chunks"] = runtime.store.counts()["chunks"]
    out["identifiers"] = _recall(runtime, pages, sets["identifiers"], (1, 5))
    out["paraphrases"] = _recall(runtime, pages, sets["paraphrases"], (5, 10))
    out["global_answers"], global_s = _answers(runtime, args.tree, sets["global"], "global")
    out["local_answers_to_global_questions"], _ = _answers(
        runtime, args.tree, sets["global"], "local"
    )
    warm = [1000 * s for s in global_s[1:]]
    out["global_latency"] = {
        "first_in_this_process_s": round(global_s[0], 2) if global_s else None,
        "warm": percentiles(warm) if warm else None,
        "warm_median_ms": round(statistics.median(warm), 1) if warm else None,
    }
    out["route"] = _routes(runtime, sets)
    routes_file = args.sets / "routes.jsonl"  # questions written for the router alone
    if routes_file.exists():
        out["route_only_questions"] = _routes(runtime, {"routes": _read_jsonl(routes_file)})
    out["graph"] = _graph_figures(runtime)
    texts, headings = _stored_chunks(runtime, pages)
    out["chunk_quality"] = chunk_figures(texts, args.tree, headings=headings)
    runtime.close()
    print(json.dumps(out, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
