"""A global answer rests on the passages the local engines find for the question."""

import asyncio
from dataclasses import replace

from app.runtime import Runtime
from retrieval.ask_contract import AskRequest
from retrieval.contract import QueryRequest

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
