"""A global answer rests on the passages the local engines find for the question."""

import asyncio
from dataclasses import replace
from pathlib import Path

from app.runtime import Runtime
from lore.embedders import LocalEmbedder
from retrieval.ask_contract import AskRequest
from retrieval.contract import QueryRequest
from tests import ops
from tests.conftest import make_runtime

QUESTION = "How do the services handle database timeouts?"


def cited_chunks(runtime: Runtime, focus: int) -> tuple[set[str], list[str]]:
    asker = runtime.asker()
    focused = replace(asker, settings=asker.settings.model_copy(update={"focus_chunks": focus}))
    answer = asyncio.run(focused.ask(AskRequest(question=QUESTION, mode="global")))
    assert answer.mode == "global" and answer.citations
    return {c for citation in answer.citations for c in citation.chunk_ids}, answer.warnings


def test_key_points_cite_only_passages_the_engines_rank_for_the_question(
    demo_graph_runtime: Runtime,
) -> None:
    pool = demo_graph_runtime.queries().query_sync(
        QueryRequest(search_text=QUESTION, top_k=6, diversity=0)
    )
    relevant = {hit.chunk_id for hit in pool.results}
    unfocused, _ = cited_chunks(demo_graph_runtime, 0)
    assert unfocused - relevant, "without the focus, points cite other chunks of their community"
    focused, warnings = cited_chunks(demo_graph_runtime, 6)
    assert focused and focused <= relevant, focused - relevant
    assert not any("unfocused" in w for w in warnings)


def cited_pages(runtime: Runtime, question: str, mode: str) -> set[str]:
    answer = asyncio.run(runtime.asker().ask(AskRequest(question=question, mode=mode)))
    assert answer.mode == mode and answer.citations
    return {Path(source).name for citation in answer.citations for source in citation.sources}


def test_a_global_answer_cites_every_page_a_local_answer_cites(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    # one long page holds most passages about the question; a one-passage page also
    # answers it: a small share of what the engines rank, but a local answer cites it
    docs = tmp_path / "docs"
    docs.mkdir()
    services = ["Billing", "Checkout", "Search", "Ledger", "Inventory", "Shipping", "Auth"]
    long_page = ["# Database timeouts by service", ""]
    for name in services * 3:
        long_page += [
            f"## {name} service",
            "",
            f"The {name} service handles database connection timeouts with a retry, a "
            f"backoff and a circuit breaker around the {name} connection pool.",
            "",
        ]
    (docs / "timeouts.md").write_text("\n".join(long_page))
    (docs / "replicas.md").write_text(
        "# Replica lag\n\nWhen the Postgres replica lags, services see database timeouts: "
        "the Reporting service fails over to the primary after thirty seconds.\n"
    )
    for topic in ("Onboarding", "Holidays", "Expenses"):
        (docs / f"{topic.lower()}.md").write_text(
            f"# {topic}\n\n{topic} policy for the Staff Handbook: ask the People team.\n"
        )
    runtime = make_runtime(tmp_path / "data", local_embedder)
    try:
        ops.ingest_paths(runtime, [docs])
        ops.build_graph(runtime)
        question = "How do the services handle database timeouts?"
        local = cited_pages(runtime, question, "local")
        assert "replicas.md" in local
        assert local <= cited_pages(runtime, question, "global")
    finally:
        runtime.close()
