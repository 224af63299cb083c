"""The LLM path against the local OpenAI-compatible TEST server (tests/openai_test_server.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from ingest.extract_llm import LLMExtractor, to_mentions
from ingest.extraction import ChunkInput, Extraction, Quarantined
from lore.errors import BackendUnavailableError, ConfigurationError, LLMReplyError
from lore.llm import LLMClient, LLMStats, ReplyCache
from lore.prompts import extract_graph
from tests.openai_test_server import OpenAITestServer
from tests.tables import tables_at

TEXT = "The `payments-api` returns PAY-5031 when Ledger Database locks time out."


@pytest.fixture
def server() -> Iterator[OpenAITestServer]:
    with OpenAITestServer() as s:
        s.timeout_sleep = 5.0  # past the client's timeout below, by a margin a busy CI keeps
        yield s


def client_for(
    server: OpenAITestServer, cache: ReplyCache | None = None, **kw: object
) -> LLMClient:
    options: dict[str, object] = {
        "backoff_s": 0.01,
        # a reply scripted to arrive must not time out on a loaded 2-core machine (a CI run
        # timed out a 0.5 s first token, so the retry read the next scripted reply)
        "timeout_s": 2.0,
        "first_token_timeout_s": 2.0,
        "max_retries": 3,
        **kw,
    }
    return LLMClient(base_url=server.base_url, model="test-model", cache=cache, **options)  # type: ignore[arg-type]


def ask(client: LLMClient, text: str = TEXT) -> extract_graph.Reply:
    async def run() -> extract_graph.Reply:
        async with client.connected():
            return await client.ask(extract_graph.render(text, "Payments", ["service"]))

    return asyncio.run(run())


def test_a_good_reply_is_validated_and_tokens_counted(server: OpenAITestServer) -> None:
    client = client_for(server)
    reply = ask(client)
    names = [e.name for e in reply.entities]
    assert "payments-api" in names and "PAY-5031" in names
    assert reply.relations and client.stats.calls == 1
    assert client.stats.prompt_tokens > 20 and client.stats.completion_tokens > 5
    sent = server.requests[-1]["body"]
    form = sent["response_format"]
    assert form["type"] == "json_schema" and sent["temperature"] == 0.0
    assert form["json_schema"]["schema"]["required"] == ["entities", "relations"]


@pytest.mark.parametrize("failure", ["429", "500", "timeout"])
def test_rate_limits_server_errors_and_timeouts_are_retried(
    server: OpenAITestServer, failure: str
) -> None:
    server.chat_next(failure, failure)
    client = client_for(server)
    assert ask(client).entities
    assert client.stats.retries == 2 and client.stats.calls == 3


def test_an_endpoint_that_stays_down_is_a_transient_error(server: OpenAITestServer) -> None:
    server.chat_next("429", "429", "429")
    with pytest.raises(BackendUnavailableError, match="failed 3 times"):
        ask(client_for(server, max_retries=2))


def test_a_fenced_reply_is_repaired_without_asking_again(server: OpenAITestServer) -> None:
    server.chat_next("fenced")
    client = client_for(server)
    assert ask(client).entities
    assert client.stats.repaired == 1 and client.stats.reprompts == 0 and client.stats.calls == 1
    assert client.stats.reprompt_prompt_tokens == client.stats.reprompt_completion_tokens == 0


@pytest.mark.parametrize("bad", ["malformed", "invalid", "empty"])
def test_an_unusable_reply_is_re_prompted_once_with_the_error(
    server: OpenAITestServer, bad: str
) -> None:
    server.chat_next(bad)
    client = client_for(server)
    assert ask(client).entities
    assert client.stats.reprompts == 1 and client.stats.calls == 2
    # the re-prompt's tokens are counted apart (and in the totals)
    stats = client.stats
    assert 0 < stats.reprompt_prompt_tokens < stats.prompt_tokens
    assert 0 < stats.reprompt_completion_tokens < stats.completion_tokens + 1
    second = server.requests[-1]["body"]["messages"]
    assert second[-1]["role"] == "user" and "could not be used" in second[-1]["content"]


def test_two_unusable_replies_raise_with_the_reason(server: OpenAITestServer) -> None:
    server.chat_next("malformed", "invalid")
    with pytest.raises(LLMReplyError, match=r"extract_graph: invalid reply .*Reply"):
        ask(client_for(server))


def test_a_refused_key_is_a_configuration_error_not_a_retry(server: OpenAITestServer) -> None:
    server.fail_next(401)
    client = client_for(server)
    with pytest.raises(ConfigurationError, match=r"llm\.api_key"):
        ask(client)
    assert client.stats.retries == 0


def test_the_cache_answers_the_same_prompt_without_a_call(
    server: OpenAITestServer, store_url: str | None, tmp_path: Path
) -> None:
    first = client_for(server, ReplyCache(tables_at(store_url, tmp_path / "cache.sqlite3")))
    reply = ask(first)
    # a new process would open the same tables
    again = client_for(server, ReplyCache(tables_at(store_url, tmp_path / "cache.sqlite3")))
    assert ask(again) == reply
    assert again.stats.calls == 0 and again.stats.cache_hits == 1 and server.chat_calls == 1
    ask(again, TEXT + " Also Billing Gateway.")
    assert again.stats.calls == 1
    assert len(again.cached_replies(extract_graph.TASK)) == 2


def test_the_extractor_quarantines_what_stays_invalid(server: OpenAITestServer) -> None:
    server.chat_next("malformed", "malformed")  # the first chunk's two tries
    extractor = LLMExtractor(client_for(server, max_concurrency=1), ["service"])
    chunks = [
        ChunkInput("c1", "d1", TEXT, "Payments"),
        ChunkInput("c2", "d1", "Orders Service calls `payments-api`.", "Orders"),
    ]
    [first] = extractor.extract_batch(chunks[:1])
    [second] = extractor.extract_batch(chunks[1:])
    assert isinstance(first, Quarantined) and "LLMReplyError" in first.reason
    assert isinstance(second, Extraction)
    names = {e.name for e in second.entities}
    assert {"Orders Service", "payments-api"} <= names
    assert [(r.source, r.target) for r in second.relations] == [("Orders Service", "payments-api")]


def test_a_reply_of_another_shape_is_re_prompted_then_quarantined(
    server: OpenAITestServer,
) -> None:
    # issue 28: this validated as an empty extraction, so the chunk was silently empty
    server.chat_next("wrong_shape", "wrong_shape")
    extractor = LLMExtractor(client_for(server, max_concurrency=1), ["service"])
    [result] = extractor.extract_batch([ChunkInput("c1", "d1", TEXT, "Payments")])
    assert isinstance(result, Quarantined)
    assert "LLMReplyError" in result.reason and "Extra inputs are not permitted" in result.reason
    assert extractor.stats.reprompts == 1 and extractor.stats.calls == 2


def test_a_reply_naming_nothing_of_the_chunk_is_re_prompted_then_quarantined(
    server: OpenAITestServer,
) -> None:
    # issue 28: every entity dropped left a chunk stored as extracted with nothing in it
    server.chat_next("ungrounded", "ungrounded")
    extractor = LLMExtractor(client_for(server, max_concurrency=1), ["service"])
    [result] = extractor.extract_batch([ChunkInput("c1", "d1", TEXT, "Payments")])
    assert isinstance(result, Quarantined), result
    assert "none of the 2 entities you listed ('Acme Rocket', 'Mars')" in result.reason
    assert extractor.stats.reprompts == 1 and extractor.stats.calls == 2
    second = server.requests[-1]["body"]["messages"]
    assert "is written in the text" in second[-1]["content"]  # the re-prompt says why


def test_a_re_prompt_that_names_the_chunk_is_kept(server: OpenAITestServer) -> None:
    server.chat_next("ungrounded", "good")
    extractor = LLMExtractor(client_for(server, max_concurrency=1), ["service"])
    [result] = extractor.extract_batch([ChunkInput("c1", "d1", TEXT, "Payments")])
    assert isinstance(result, Extraction)
    assert {"payments-api", "PAY-5031"} <= {e.name for e in result.entities}
    assert extractor.stats.reprompts == 1


def test_an_explicitly_empty_extraction_is_kept() -> None:
    extractor = LLMExtractor(LLMClient(base_url="http://127.0.0.1:9/v1", model="m"), ["x"])
    prompt = extractor.prompt(ChunkInput("c1", "d1", TEXT, "Payments"))
    reply, _ = prompt.usable('{"entities": [], "relations": []}')
    assert reply.entities == []
    with pytest.raises(ValueError, match="none of the 1 entities"):
        prompt.usable('{"entities": [{"name": "Elsewhere"}], "relations": []}')


def test_names_the_chunk_does_not_contain_are_dropped_and_counted() -> None:
    reply = extract_graph.Reply.model_validate(
        {
            "entities": [
                {"name": "payments-api", "type": "service"},
                {"name": "...", "type": "concept"},
                {"name": "[*]"},
                {"name": "Billing Gateway"},  # not in TEXT
                {"name": "`PAY-5031`", "type": "error"},
            ],
            "relations": [
                {"source": "payments-api", "target": "PAY-5031", "strength": 8},
                {"source": "payments-api", "target": "Ledger Database"},  # not listed
                {"source": "...", "target": "payments-api"},
            ],
        }
    )
    stats = LLMStats()
    mentions = to_mentions(reply, TEXT, stats)
    assert [e.name for e in mentions.entities] == ["payments-api", "`PAY-5031`"]
    assert [(r.source, r.target) for r in mentions.relations] == [("payments-api", "PAY-5031")]
    assert stats.dropped_entities == 3 and stats.dropped_relations == 2


def test_a_refused_response_format_is_downgraded_once_not_retried(
    server: OpenAITestServer,
) -> None:
    server.refused_formats = {"json_schema"}
    client = client_for(server)
    assert ask(client).entities
    assert client.stats.retries == 0 and client.structured_output == "json_object_schema"
    assert ask(client, TEXT + " Also Billing Gateway.").entities
    forms = [r["body"]["response_format"] for r in server.requests if "messages" in r["body"]]
    assert [f["type"] for f in forms] == ["json_schema", "json_object", "json_object"]
    assert forms[1]["schema"]["additionalProperties"] is False
    # llama-cpp-python 0.3 cannot parse the grammar of $refs and length bounds (it crashed)
    assert "$ref" not in str(forms[1]["schema"]) and "maxLength" not in str(forms[1]["schema"])


def test_the_form_an_endpoint_honours_is_remembered_across_processes(
    server: OpenAITestServer, tmp_path: Path
) -> None:
    """A refusal is paid once per endpoint and model, not once per ``lore`` command."""
    server.refused_formats = {"json_schema"}
    cache = ReplyCache(tmp_path / "cache.sqlite3")
    first = client_for(server, cache)
    assert ask(first).entities and first.structured_output == "json_object_schema"
    later = client_for(server, ReplyCache(tmp_path / "cache.sqlite3"))  # another process
    assert later.structured_output == "json_object_schema"
    assert ask(later, TEXT + " Also Billing Gateway.").entities
    forms = [r["body"]["response_format"] for r in server.requests if "messages" in r["body"]]
    assert [f["type"] for f in forms] == ["json_schema", "json_object", "json_object"]
    other = LLMClient(base_url=server.base_url, model="other-model", cache=cache)
    assert other.structured_output == "json_schema"  # per endpoint and model


@pytest.mark.parametrize(
    ("options", "sent"),
    [({"structured_output": "json_object"}, {"type": "json_object"}), ({"json_mode": False}, None)],
)
def test_the_form_can_be_chosen(
    server: OpenAITestServer, options: dict[str, object], sent: object
) -> None:
    ask(client_for(server, None, **options))
    assert server.requests[-1]["body"].get("response_format") == sent


def test_a_name_spelt_with_other_separators_is_kept_as_the_text_spells_it() -> None:
    reply = extract_graph.Reply.model_validate(
        {
            "entities": [
                {"name": "Payments API", "type": "service"},  # the text: `payments-api`
                {"name": "pay 5031", "type": "error"},  # the text: PAY-5031
                {"name": "payments"},  # written in the text (inside a name): kept
                {"name": "ledger-data-base"},  # other words: dropped
            ],
            "relations": [{"source": "Payments API", "target": "pay 5031", "strength": 8}],
        }
    )
    stats = LLMStats()
    mentions = to_mentions(reply, TEXT, stats)
    assert [e.name for e in mentions.entities] == ["payments-api", "PAY-5031", "payments"]
    assert [(r.source, r.target) for r in mentions.relations] == [("payments-api", "PAY-5031")]
    assert stats.dropped_entities == 1


def test_the_prompt_lists_the_names_the_offline_extractor_finds_in_the_chunk(
    server: OpenAITestServer,
) -> None:
    chunk = ChunkInput("c1", "d1", TEXT, "Payments runbook")
    prompt = LLMExtractor(client_for(server), ["service"]).prompt(chunk)
    listed = prompt.user.split("Names found in the text: ", 1)[1].split(", ")
    assert {"payments-api", "PAY-5031", "Ledger Database"} <= set(listed)
    assert "Payments runbook" not in listed  # the title is not written in the text
    # the worked example shows the list too, and a reply that adds to it
    assert "Names found in the text: " in prompt.examples[0][0]
    bare = LLMExtractor(client_for(server), ["service"], name_hints=False).prompt(chunk)
    assert "Names found" not in bare.user


def test_the_cache_counts_the_calls_each_ask_took_failed_asks_included(
    server: OpenAITestServer, store_url: str | None, tmp_path: Path
) -> None:
    client = client_for(server, ReplyCache(tables_at(store_url, tmp_path / "cache.sqlite3")))
    assert client.reprompt_rate(extract_graph.TASK) is None  # no ask yet: none assumed
    ask(client)  # one call
    server.chat_next("invalid")
    ask(client, TEXT + " Also Billing Gateway.")  # re-prompted: two calls
    server.chat_next("invalid", "invalid")
    with pytest.raises(LLMReplyError):
        ask(client, TEXT + " And Ledger Replica.")  # two calls, then given up
    assert client.reprompt_rate(extract_graph.TASK) == (2 / 3, 3)
    # a new process reads the same counts; they hold no text
    again = client_for(server, ReplyCache(tables_at(store_url, tmp_path / "cache.sqlite3")))
    assert again.reprompt_rate(extract_graph.TASK) == (2 / 3, 3)
    assert again.reprompt_rate("summarize_community") is None
