"""Router accuracy: our labelled demo set, GraphRAG's podcast global questions, 2Wiki.

    python -m bench.router --shared ../shared/data [--demo-work DIR] [--podcast-work DIR]
        [--twowiki-work DIR]

Sets: ``labelled`` (tests/fixtures/router_questions.json plus the demo questions, over
the demo corpus; routed with the demo graph, built in ``--demo-work`` when missing),
``podcast`` (125 global questions, all expected ``global``) and ``twowiki`` (101
multi-hop questions, all expected ``local``). The podcast and 2Wiki questions are
routed on their text alone unless a work directory holding that corpus and its graph is
given (e.g. the one ``bench.global_tokens`` or ``bench.twowiki`` built); ``context``
says which. Prints ``{"sets": {NAME: {"n", "accuracy", "context", "decisions", "misses"}}}``.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
from collections import Counter
from pathlib import Path
from typing import Any

from app.ingest import ingest_paths
from app.refresh import refresh_in_process
from app.runtime import Runtime
from bench.common import machine, runtime_for
from retrieval.analyzer import Analyzer
from retrieval.ask import Asker
from retrieval.router import HeuristicRouteClassifier, RouteContext, RouteDecision

ROOT = Path(__file__).resolve().parents[1]


def _score(questions: list[tuple[str, str]], asker: Asker | None) -> dict[str, Any]:
    text_only = HeuristicRouteClassifier(Analyzer())
    decisions: Counter[str] = Counter()
    misses = []
    right = 0
    for question, kind in questions:
        if asker is not None:
            decided: RouteDecision = asyncio.run(asker.route(question, "auto", has_filters=False))
        else:
            decided = text_only.decide(question, RouteContext(graph_ready=True))
        decisions[decided.decision] += 1
        if decided.decision == kind:
            right += 1
        else:
            misses.append({"question": question, "expected": kind, "got": decided.decision})
    return {
        "n": len(questions),
        "accuracy": round(right / len(questions), 3),
        "context": "graph" if asker is not None else "text",
        "decisions": dict(decisions),
        "misses": misses[:10],
    }


def _graph_runtime(work: Path | None) -> Runtime | None:
    if work is None:
        return None
    runtime = runtime_for(work)
    if runtime.graph().counts()["communities"] == 0:
        runtime.close()
        raise SystemExit(f"{work} has no graph; run the benchmark that builds it first")
    return runtime


def main(argv: list[str] | None = None) -> None:
    """Run and print JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, required=True, help="the shared data directory")
    parser.add_argument("--demo-work", type=Path, default=Path("/tmp/lore-bench-router-demo"))
    parser.add_argument("--podcast-work", type=Path, default=None)
    parser.add_argument("--twowiki-work", type=Path, default=None)
    args = parser.parse_args(argv)
    fixtures = ROOT / "tests" / "fixtures"
    labelled = [
        (q["question"], q["kind"])
        for q in json.loads((fixtures / "router_questions.json").read_text())["questions"]
    ] + [
        (q["question"], q["kind"])
        for q in json.loads((fixtures / "demo_questions.json").read_text())
    ]
    with (args.shared / "graphrag_global/podcast/questions_global_125.csv").open(
        encoding="utf-8-sig"
    ) as handle:
        podcast = [(row["question_text"], "global") for row in csv.DictReader(handle)]
    twowiki = [
        (str(json.loads(line)["text"]), "local")
        for line in (args.shared / "twowiki/queries_101.jsonl").read_text().splitlines()
    ]
    demo = runtime_for(args.demo_work)
    if demo.store.counts()["chunks"] == 0:
        for env in ("production", "staging"):
            ingest_paths(demo.job_services(), [ROOT / "examples/corpus" / env], {"env": env})
    if demo.graph().counts()["communities"] == 0:
        refresh_in_process(demo.graph_services(), rebuild=False)
    out: dict[str, Any] = {"machine": machine(), "sets": {}}
    out["sets"]["labelled"] = _score(labelled, demo.asker())
    out["sets"]["labelled_text_only"] = _score(labelled, None)
    demo.close()
    for name, questions, work in (
        ("podcast", podcast, args.podcast_work),
        ("twowiki", twowiki, args.twowiki_work),
    ):
        runtime = _graph_runtime(work)
        out["sets"][name] = _score(questions, runtime.asker() if runtime is not None else None)
        if runtime is not None:
            runtime.close()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
