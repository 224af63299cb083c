"""The router's cues, decisions, forced modes and fallback (pure, no corpus)."""

import asyncio
import json

import pytest

from retrieval.analyzer import Analyzer
from retrieval.router import (
    Cue,
    HeuristicRouteClassifier,
    RouteContext,
    choose_route,
    decide,
    named_entities,
)
from tests.conftest import FIXTURES

ROUTER = HeuristicRouteClassifier(Analyzer())
LABELLED = json.loads((FIXTURES / "router_questions.json").read_text())["questions"]


def route(question: str, **context: object) -> str:
    return ROUTER.decide(question, RouteContext(**context)).decision  # type: ignore[arg-type]


def test_the_labelled_set_is_big_and_balanced() -> None:
    kinds = [q["kind"] for q in LABELLED]
    assert len(kinds) >= 60 and kinds.count("local") == kinds.count("global")


def test_text_only_accuracy_on_the_labelled_set() -> None:
    right = sum(route(q["question"]) == q["kind"] for q in LABELLED)
    assert right / len(LABELLED) >= 0.9


@pytest.mark.parametrize(
    ("question", "reason"),
    [
        ('Where is "ledger connection unavailable" raised?', "quoted string"),
        ("PAY-5031 after deploys", "identifiers pay-5031"),
        ("why do we see HTTP 504 at checkout", "identifiers HTTP 504"),
        ("When did Lothair II's mother die?", "named entities Lothair II's"),
        ("Why did the refund job run twice?", "asks about one thing"),
        ("What broke on 2024-05-18?", "a specific date"),
        ("Which host is the sandbox mail sink?", "asks for one item"),
    ],
)
def test_local_cues(question: str, reason: str) -> None:
    decision = ROUTER.decide(question, RouteContext())
    assert decision.decision == "local"
    assert any(r.startswith(reason) for r in decision.reasons), decision.reasons
    assert decision.scores["local"] > decision.scores["global"]


@pytest.mark.parametrize(
    ("question", "reason"),
    [
        ("What are the main themes in the documents?", "aggregate wording main, themes"),
        ("Compare how staging and production deploy.", "comparison"),
        ("Which guests talk about education?", "asks for a list over a plural"),
        ("Do teams ever skip the postmortem?", "speaks of a plural in general"),
        ("Tell a story about growth.", "names nothing specific"),
    ],
)
def test_global_cues(question: str, reason: str) -> None:
    decision = ROUTER.decide(question, RouteContext())
    assert decision.decision == "global"
    assert any(r.startswith(reason) for r in decision.reasons), decision.reasons


def test_filters_and_specific_graph_entities_pull_local() -> None:
    question = "How do the services handle retries?"
    assert route(question) == "global"
    assert route(question, has_filters=True) == "local"
    assert route(question, entities=[("payments-api", 0.05), ("ledger-db", 0.04)]) == "local"
    # a plain word matching an entity says nothing; a broad entity pulls global
    assert route(question, entities=[("retry", 0.001)]) == "global"
    broad = ROUTER.decide(
        "Tell me about auth-gateway.", RouteContext(entities=[("auth-gateway", 0.4)])
    )
    assert any("cover much of the corpus" in r for r in broad.reasons)


def test_schedules_acronyms_and_product_names_are_not_cues() -> None:
    every = ROUTER.decide("How is the database replaced every night?", RouteContext())
    assert not any(r.startswith("aggregate") for r in every.reasons)
    assert named_entities("Are VR, AR and IoT trends discussed by Kevin Scott?") == ["Kevin Scott"]
    product = ROUTER.decide("Which services use PostgreSQL?", RouteContext())
    assert not any(r.startswith("identifiers") for r in product.reasons)
    assert product.decision == "global"


def test_decide_both_ties_and_empty() -> None:
    strong = [Cue("local", 3.0, "id"), Cue("global", 3.5, "aggregate")]
    assert decide(strong, both_margin=1.0).decision == "both"
    assert decide(strong, both_margin=0.1).decision == "global"
    assert decide([Cue("local", 1.0, "a"), Cue("global", 1.0, "b")]).decision == "local"
    empty = decide([])
    assert empty.decision == "local" and "no cue fired" in empty.reasons[0]
    assert empty.scores == {"local": 0.0, "global": 0.0}


def test_forced_modes_and_the_empty_graph_fallback() -> None:
    classified = ROUTER.decide(
        "What are the recurring themes across all incidents?", RouteContext()
    )
    assert classified.decision == "global"
    ready = RouteContext(graph_ready=True)
    forced = choose_route("local", classified, ready)
    assert forced.decision == "local" and forced.reasons[0] == "mode=local forced by the caller"
    assert forced.scores == classified.scores
    assert choose_route("auto", classified, ready).decision == "global"
    fallback = choose_route("auto", classified, RouteContext(graph_ready=False))
    assert fallback.decision == "local" and "no community reports" in fallback.reasons[-1]
    assert choose_route("global", classified, RouteContext()).decision == "local"


def test_classify_is_the_async_form_of_decide() -> None:
    question = "What does E_LEDGER_LOCK_TIMEOUT mean?"
    decided = asyncio.run(ROUTER.classify(question, RouteContext()))
    assert decided == ROUTER.decide(question, RouteContext())
    assert decided.classifier == "heuristic"
