"""The router's cues, decisions, forced modes and fallback (pure, no corpus)."""

import asyncio
import json

import pytest

from retrieval.analyzer import Analyzer
from retrieval.contract import EngineRanks, QueryResult
from retrieval.router import (
    Cue,
    HeuristicRouteClassifier,
    RouteContext,
    choose_route,
    collection_terms,
    decide,
    list_items,
    named_entities,
    task_statement,
    which_form,
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


@pytest.mark.parametrize(
    ("question", "form"),
    [
        ("Which config files are read at start?", ("plural", "Which config files")),
        ("How many retries happen per request?", ("plural", "How many retries")),
        ("Which tools exist for profiling?", ("plural", "Which tools")),
        # a singular noun, then its verb: the verb's -s is not a plural
        ("Which function returns the current time?", ("single", "Which function returns")),
        ("What option controls the size of the cache?", ("single", "What option controls")),
        ("Which command helps me find a slow query?", ("single", "Which command helps")),
        ("Which host is the mail sink?", ("single", "Which host is")),
        ("Which job starts after the backup?", ("single", "Which job starts")),
        ("What service decides whether a card is declined?", ("single", "What service decides")),
        # a verb right after the question word: neither
        ("What causes the build to fail?", None),
        ("Which members of Congress voted?", None),
        ("What is the default port?", None),
        # a plural asked of one thing: that thing's, not a list over the corpus
        ("Which options does the clone command accept?", None),
        ("How many replicas does auth-gateway run?", None),
    ],
)
def test_which_form_tells_a_list_from_one_thing(
    question: str, form: tuple[str, str] | None
) -> None:
    assert which_form(question) == form


@pytest.mark.parametrize(
    ("question", "task"),
    [
        ("Draw a text user interface in a terminal", "Draw a text"),
        ("Rotate the log files every night at midnight.", "Rotate the log"),
        ("Steps for a planned switchover of ledger-db", "Steps for a"),
        ("How do I rotate the logs", None),  # a question without its mark
        ("Is there a way to rotate logs", None),
        ("Rotate the logs?", None),
        ("Describe the main failure modes of the platform.", None),  # an account
        ("List the providers we depend on", None),
        ("Give me the runbook for HTTP 429", None),
        ("database timeouts", None),  # search terms: too short to state a task
        ("E_LEDGER_LOCK_TIMEOUT in the ledger", None),  # an identifier first
    ],
)
def test_a_task_stated_as_a_sentence_leans_local(question: str, task: str | None) -> None:
    assert task_statement(question) == task
    if task:
        decision = ROUTER.decide(question, RouteContext())
        assert any(r.startswith("states a task") for r in decision.reasons), decision.reasons


def test_a_wh_clause_inside_a_task_asks_no_list() -> None:
    for task in (
        "Find out which modules take the longest to import",
        "Send a request using only what ships with the runtime",
    ):
        decision = ROUTER.decide(task, RouteContext())
        assert not any(r.startswith("asks for a list") for r in decision.reasons), decision
        assert decision.decision == "local"


def test_a_task_over_everything_still_goes_global() -> None:
    question = "Summarize how all of our services deal with database timeouts"
    assert task_statement(question) is None or route(question) == "global"
    assert route("Collect the recurring themes across all the incident reports") == "global"


def test_a_superlative_most_is_not_aggregate_wording() -> None:
    one = ROUTER.decide("How do I show my most recent commit?", RouteContext())
    assert not any(r.startswith("aggregate wording") for r in one.reasons), one.reasons
    many = ROUTER.decide("What do most services log on startup?", RouteContext())
    assert any(r.startswith("aggregate wording most") for r in many.reasons), many.reasons
    # "the most common": the superlative goes, "common" still counts
    common = ROUTER.decide("What are the most common failures?", RouteContext())
    assert any(r.startswith("aggregate wording common") for r in common.reasons)


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


# -- what the corpus holds (RouteContext.local / .collection), issue 27 ----------------------


def hit(
    doc: str, sparse: int | None, dense: int | None, text: str = "", title: str = ""
) -> QueryResult:
    """One local search result, built by hand (the ranks are what the router reads)."""
    return QueryResult(
        chunk_id=f"{doc}-{sparse}-{dense}",
        rrf_score=0.03,
        text=text or f"Some text of {doc}.",
        source=f"/docs/{doc}.html",
        document_id=doc,
        title=title or doc,
        heading="",
        metadata={},
        ranks=EngineRanks(sparse=sparse, dense=dense),
    )


def reasons(question: str, context: RouteContext) -> list[str]:
    return ROUTER.decide(question, context).reasons


def test_a_pasted_term_the_corpus_holds_routes_local() -> None:
    # an all-capitals flag pasted alone is an identifier (the exact vote's definition)
    assert reasons("DOTALL", RouteContext()) == ["identifiers dotal (+2 local)"]
    # a plain word alone names nothing specific on text alone ...
    assert route("lookbehind") == "global"
    found = [
        hit("regex", 1, None, "A lookbehind assertion matches only after the given text."),
        *(hit(f"page{i}", None, i) for i in range(2, 9)),
    ]
    # ... but one the corpus holds in a top chunk does
    decided = ROUTER.decide("lookbehind", RouteContext(local=found))
    assert decided.decision == "local", decided.reasons
    assert decided.reasons[0].startswith("one chunk holds all 1 terms of the question (regex)")
    # a longer question held whole by one chunk weighs more, up to a cap
    long = "Which environment variables change how the interpreter starts?"
    text = "Environment variables change how the interpreter starts: PYTHONHOME, PYTHONPATH."
    held = ROUTER.decide(long, RouteContext(local=[hit("cmdline", 3, 9, text)]))
    assert any(
        r.startswith("one chunk holds all 5 terms") and "(+2 local)" in r for r in held.reasons
    )
    # a result that lacks one of the terms holds nothing
    missing = reasons("lookbehind flag", RouteContext(local=found))
    assert not any(r.startswith("one chunk holds") for r in missing)


def test_engines_agreeing_on_a_concentrated_answer_pull_local() -> None:
    question = "Keep one project's installed packages apart from the system-wide ones"
    concentrated = [hit("venv", 1, 2), *(hit("venv", 3 + i, 4 + i) for i in range(4))]
    concentrated += [hit("windows", 10, 12), hit("import", 14, 3), hit("unix", 9, 30)]
    decided = ROUTER.decide(question, RouteContext(local=concentrated))
    assert decided.decision == "local"
    assert any(r.startswith("keyword and vector search agree on venv") for r in decided.reasons)
    # the same agreement over results from eight documents is no concentrated answer
    scattered = [hit("venv", 1, 2), *(hit(f"doc{i}", 3 + i, 4 + i) for i in range(7))]
    assert not any("agree on" in r for r in reasons(question, RouteContext(local=scattered)))
    # nor is a concentrated document the engines do not both put first
    late = [hit("venv", 1, 9), *(hit("venv", 3 + i, 4 + i) for i in range(5)), hit("x", 9, 1)]
    assert not any("agree on" in r for r in reasons(question, RouteContext(local=late)))


def test_evidence_spread_over_many_documents_pulls_global() -> None:
    question = "How do people here think about growth?"
    spread = [hit(f"episode{i}", 3 + i, 5 + 2 * i) for i in range(8)]
    decided = ROUTER.decide(question, RouteContext(local=spread))
    assert decided.decision == "global", decided.reasons
    assert any(
        r.startswith("spread over the corpus: 8 results from 8 documents") for r in decided.reasons
    )
    # results only one engine found show uncertainty, not breadth
    uncertain = [*spread[:7], hit("episode9", None, 4)]
    assert not any(r.startswith("spread") for r in reasons(question, RouteContext(local=uncertain)))
    # engines agreeing on one chunk, or a chunk holding the question, are no spread
    agreed = [hit("episode0", 2, 1), *spread[1:]]
    assert not any(r.startswith("spread") for r in reasons(question, RouteContext(local=agreed)))
    # keyword search matching none of the question's words: nothing in the corpus has it
    absent = [hit(f"page{i}", None, i + 1) for i in range(8)]
    decided = ROUTER.decide("How does the architecture fit together?", RouteContext(local=absent))
    assert "keyword search matches none of its words (+1 global)" in decided.reasons
    # searched, a question naming nothing specific is not global for that alone
    assert route("What draws a text user interface in a terminal?") == "global"
    curses = [
        hit("curses", 1, 3),
        *(hit("curses", 2 + i, 5 + i) for i in range(5)),
        hit("gui", 9, 2),
    ]
    searched = ROUTER.decide(
        "What draws a text user interface in a terminal?", RouteContext(local=curses)
    )
    assert searched.decision == "local"
    assert not any(r.startswith("names nothing specific") for r in searched.reasons)


def test_the_collection_subject_is_no_specific_name() -> None:
    titles = ["git-log(1)", "git-add(1)", "Git User Manual", "gitglossary(7)", "Trace2 API"]
    collection = collection_terms(titles, Analyzer())
    assert collection == {"git": 0.6}  # numbers and words of a single title do not count
    question = "How are commits and tags signed and verified throughout Git?"
    assert any(r.startswith("named entities Git") for r in reasons(question, RouteContext()))
    decided = ROUTER.decide(question, RouteContext(collection=collection))
    assert not any(r.startswith("named entities") for r in decided.reasons)
    subject = "entities that cover much of the corpus: Git (in the titles of 60% of documents)"
    assert f"{subject} (+1 global)" in decided.reasons
    assert decided.decision == "global"
    # the pieces of an identifier are not the word
    pasted = reasons("git-commit", RouteContext(collection=collection))
    assert not any("cover much of the corpus" in r for r in pasted)


def test_a_list_of_several_things_pulls_global() -> None:
    assert list_items("How do modules, packages and the import system fit together?") == 3
    assert list_items("Iterators, generators, comprehensions, and lambdas: an overview") == 4
    assert list_items("What is the difference between a list and a tuple?") == 0
    assert list_items("Which services talk to ledger-db, and how?") == 0
    # a list of names is about those named things
    assert list_items("Are both movies, Naked Tango and Algiers (Film), from one country?") == 0
    decided = ROUTER.decide(
        "How do modules, packages and the import system fit together?", RouteContext()
    )
    assert "about several things (a list of 3) (+1.5 global)" in decided.reasons
