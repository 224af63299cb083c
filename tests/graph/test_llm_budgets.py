"""Each call asks for the completion tokens its reply needs, within llm.max_tokens."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from lore.llm import ChatPrompt, LLMClient
from lore.prompts import extract_graph, route_question, summarize_community
from tests.openai_test_server import OpenAITestServer

SHORT = "The `payments-api` returns PAY-5031 when Ledger Database locks time out."
LONG = " ".join([SHORT] * 12)


@pytest.fixture
def server() -> Iterator[OpenAITestServer]:
    with OpenAITestServer() as s:
        yield s


def sent_budgets(server: OpenAITestServer, prompts: list[ChatPrompt[Any]], cap: int) -> list[int]:
    client = LLMClient(base_url=server.base_url, model="test-model", max_tokens=cap)

    async def run() -> None:
        async with client.connected():
            for prompt in prompts:
                await client.ask(prompt)

    asyncio.run(run())
    return [int(r["body"]["max_tokens"]) for r in server.requests if r["body"]]


def test_extraction_budgets_grow_with_the_chunk_and_routing_stays_small(
    server: OpenAITestServer,
) -> None:
    short, long = (extract_graph.render(t, "P", ["service"]) for t in (SHORT, LONG))
    route = route_question.render("what changed across all services?", "")
    report = summarize_community.render(
        entities=[("E1", "payments-api", "service", "takes payments")],
        relations=[],
        sources=[("C1", SHORT)],
    )
    budgets = sent_budgets(server, [short, long, route, report], cap=2000)
    assert budgets[0] < budgets[1] < 2000  # extraction scales with the chunk
    assert budgets[2] <= 200  # a routing decision is small
    assert 600 <= budgets[3] < 2000  # a report: by its material
    assert budgets[0] < 2000 // 2  # not the old 2,000 for every call


def test_the_setting_stays_the_cap(server: OpenAITestServer) -> None:
    long = extract_graph.render(LONG, "P", ["service"])
    assert sent_budgets(server, [long], cap=300) == [300]
