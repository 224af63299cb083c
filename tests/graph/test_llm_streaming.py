"""Streamed calls: bounded by silence, closed when given up, counted (scripted test server)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator

import pytest

from lore.llm import LLMClient
from lore.prompts import extract_graph
from tests.openai_test_server import OpenAITestServer

TEXT = "The `payments-api` returns PAY-5031 when Ledger Database locks time out."


@pytest.fixture
def server() -> Iterator[OpenAITestServer]:
    with OpenAITestServer() as s:
        yield s


def client_for(server: OpenAITestServer, **kw: object) -> LLMClient:
    options: dict[str, object] = {"backoff_s": 0.01, "max_retries": 3, **kw}
    return LLMClient(base_url=server.base_url, model="test-model", cache=None, **options)  # type: ignore[arg-type]


def ask_all(client: LLMClient, n: int = 1) -> list[extract_graph.Reply]:
    async def run() -> list[extract_graph.Reply]:
        async with client.connected():
            prompts = [extract_graph.render(f"{TEXT} Item{i}", "P", ["service"]) for i in range(n)]
            return list(await asyncio.gather(*(client.ask(p) for p in prompts)))

    return asyncio.run(run())


def eventually(check: Callable[[], bool], within_s: float = 5.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.02)
    return check()


def test_a_reply_is_streamed_and_its_usage_chunk_counted(server: OpenAITestServer) -> None:
    client = client_for(server)
    [reply] = ask_all(client)
    assert "payments-api" in [e.name for e in reply.entities]
    body = server.requests[-1]["body"]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    words = sum(len(m["content"].split()) for m in body["messages"])
    assert client.stats.prompt_tokens == words  # the server's own count, not an estimate
    assert client.stats.completion_tokens > 5 and client.stats.usage_estimated == 0


def test_an_endpoint_refusing_stream_options_streams_without_and_tokens_are_estimated(
    server: OpenAITestServer, caplog: pytest.LogCaptureFixture
) -> None:
    server.refuse_stream_options = True
    client = client_for(server)
    replies = ask_all(client, 2)
    assert all(r.entities for r in replies)
    assert client.stats.retries == 0 and client.stats.calls == 4  # 1 refused each, then none
    last = server.requests[-1]["body"]
    assert last["stream"] is True and "stream_options" not in last
    assert client.stats.usage_estimated == 2 and client.stats.prompt_tokens > 20
    assert client.stats.completion_tokens > 5
    assert "estimated" in caplog.text


def test_an_endpoint_refusing_stream_gets_whole_replies_not_retries(
    server: OpenAITestServer, caplog: pytest.LogCaptureFixture
) -> None:
    server.refuse_stream = True
    client = client_for(server)
    replies = ask_all(client, 3)
    assert all(r.entities for r in replies)
    assert client.stats.retries == 0
    chats = [r["body"] for r in server.requests if r["path"] == "/v1/chat/completions"]
    assert [bool(b.get("stream")) for b in chats].count(True) <= 3  # refused ones only
    assert not chats[-1].get("stream") and client.stats.usage_estimated == 0
    assert "refused a streamed call" in caplog.text


def test_a_stream_that_goes_quiet_times_out_is_closed_and_retried(
    server: OpenAITestServer,
) -> None:
    server.stall_s = 1.5
    server.chat_next("stall")
    client = client_for(server, inactivity_timeout_s=0.2, first_token_timeout_s=5.0)
    started = time.monotonic()
    [reply] = ask_all(client)
    assert reply.entities and time.monotonic() - started < 1.4  # did not wait out the stall
    assert client.stats.timeouts == 1 and client.stats.retries == 1
    # the server noticed the closed connection and stopped generating that reply
    assert eventually(lambda: server.abandoned == 1)


def test_a_long_reply_that_keeps_streaming_is_not_cut_by_a_whole_reply_bound(
    server: OpenAITestServer,
) -> None:
    server.token_delay = 0.02
    client = client_for(server, timeout_s=0.3, inactivity_timeout_s=0.5)
    started = time.monotonic()
    [reply] = ask_all(client)
    assert time.monotonic() - started > 0.3  # longer than the whole-reply bound
    assert reply.entities and client.stats.timeouts == 0 and client.stats.retries == 0


def test_queued_calls_wait_for_their_first_token_while_the_endpoint_works(
    server: OpenAITestServer,
) -> None:
    # one request at a time, each reply ~0.5 s: the third call waits ~1 s for a first token,
    # well past first_token_timeout_s, yet the endpoint streams for us all along
    server.serial = True
    server.token_delay = 0.006
    client = client_for(server, first_token_timeout_s=0.3, max_concurrency=3)
    replies = ask_all(client, 3)
    assert len(replies) == 3 and all(r.entities for r in replies)
    assert client.stats.timeouts == 0 and client.stats.retries == 0
    assert server.chat_calls == 3 and server.abandoned == 0
    waits = sorted(started - arrived for arrived, started, _ in server.chat_spans)
    assert waits[-1] > 0.3  # really queued longer than the first-token bound


def test_a_cancelled_call_closes_its_stream(server: OpenAITestServer) -> None:
    server.token_delay = 0.05
    client = client_for(server)

    async def run() -> None:
        async with client.connected():
            task = asyncio.create_task(client.ask(extract_graph.render(TEXT, "P", ["service"])))
            await asyncio.sleep(0.3)  # streaming by now
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    asyncio.run(run())
    assert eventually(lambda: server.abandoned == 1)
    assert client.stats.calls == 1 and client.stats.retries == 0


def test_a_one_at_a_time_endpoint_settles_at_one_call_in_flight_with_no_retries(
    server: OpenAITestServer,
) -> None:
    # the traced snowball: 4 calls at once against a server that answers one at a time,
    # each reply ~0.2 s, and a first-token bound shorter than the queue (3 replies)
    server.serial = True
    server.token_delay = 0.003
    client = client_for(server, max_concurrency=4, first_token_timeout_s=0.3, latency_slack_s=0.05)
    replies = ask_all(client, 12)
    assert len(replies) == 12 and all(r.entities for r in replies)
    assert client.stats.retries == 0 and client.stats.timeouts == 0
    assert server.chat_calls == 12 and server.abandoned == 0
    assert client.concurrency == 1 and client.gate.decreases == 2
    spans = sorted(server.chat_spans)
    assert max(s - a for a, s, _ in spans[:4]) > 0.3  # the first burst did queue
    assert all(s - a < 0.05 for a, s, _ in spans[-5:])  # settled: nothing waits


def test_an_endpoint_serving_calls_in_parallel_keeps_the_setting(
    server: OpenAITestServer,
) -> None:
    server.token_delay = 0.003
    client = client_for(server, max_concurrency=4, latency_slack_s=0.3)
    replies = ask_all(client, 12)
    assert len(replies) == 12 and client.stats.retries == 0
    assert client.concurrency == 4 and client.gate.peak_in_flight == 4
    assert server.peak_open_chats == 4


def test_calls_queued_behind_a_refusal_are_sent_in_the_form_that_works(
    server: OpenAITestServer,
) -> None:
    # found against llama-cpp-python: calls waiting for their turn had their form decided
    # before the first was refused, so every queued call was refused once more
    server.refused_formats = {"json_schema"}
    client = client_for(server, max_concurrency=1)
    assert len(ask_all(client, 4)) == 4
    sent = [r["body"]["response_format"]["type"] for r in server.requests if "body" in r]
    schema_forms = [r["body"]["response_format"].get("schema") is not None for r in server.requests]
    assert sent.count("json_schema") == 1, sent
    assert sent.count("json_object") == 4 and sum(schema_forms) == 4, sent


def test_calls_refused_together_drop_a_response_format_once(server: OpenAITestServer) -> None:
    server.refused_formats = {"json_schema"}
    server.token_delay = 0.003
    client = client_for(server, max_concurrency=4)
    replies = ask_all(client, 4)
    assert len(replies) == 4 and client.stats.retries == 0
    # four calls were refused json_schema at once: the next form is llama.cpp's, not plain
    assert client.structured_output == "json_object_schema"


def test_tokens_an_endpoint_does_not_report_are_counted_as_the_dry_run_counts_them(
    server: OpenAITestServer,
) -> None:
    from app.builders import llm_token_count
    from lore.llm import chat_tokens
    from lore.settings import Settings

    server.refuse_stream_options = True
    count = llm_token_count(Settings())
    client = client_for(server, count_tokens=count)
    [reply] = ask_all(client)
    prompt = extract_graph.render(f"{TEXT} Item0", "P", ["service"])  # as ask_all sends it
    assert reply.entities and client.stats.usage_estimated == 1  # the refused call: none
    assert client.stats.prompt_tokens == chat_tokens(prompt.messages(), count)
    assert client.stats.prompt_tokens < chat_tokens(prompt.messages(), len) // 3  # not chars
