"""Replies a real model gave to our prompts (``tests/fixtures/llm_replies``), checked offline.

Recorded by ``scripts/record_llm_replies.py`` from llama-cpp-python serving
SmolLM2-135M-Instruct: the current client's ``json_object`` calls during ingest, graph
build and questions, and the same first-turn prompts re-sent with llama.cpp's
``json_object`` + ``schema`` and with OpenAI's ``json_schema`` form. They are real,
messy replies for fast tests of validation and repair.
"""

from __future__ import annotations

import json
from importlib import import_module
from pathlib import Path
from typing import Any

import pytest

from lore.llm import parse_reply, prompt_key
from scripts.record_llm_replies import first_turn_prompt
from tests.conftest import FIXTURES

REPLIES = FIXTURES / "llm_replies"
FORMS = {"json_object", "json_object_schema", "json_schema"}


def load(path: Path) -> dict[str, Any]:
    record: dict[str, Any] = json.loads(path.read_text())
    return record


def fixtures(**where: object) -> list[Path]:
    paths = sorted(REPLIES.rglob("*.json"))
    return [p for p in paths if all(load(p).get(k) == v for k, v in where.items())]


def reply_model(task: str) -> Any:
    return import_module(f"lore.prompts.{task}").Reply


def ids(paths: list[Path]) -> list[str]:
    return [p.relative_to(REPLIES).as_posix() for p in paths]


ALL = fixtures()
EXTRACTIONS = fixtures(task="extract_graph", form="json_object", turn=1, status=200)
SCHEMA_REPLIES = fixtures(form="json_object_schema", status=200)


def test_the_fixtures_are_real_extraction_replies() -> None:
    records = [load(p) for p in ALL]
    assert records and {r["form"] for r in records} <= FORMS
    assert all(r["status"] != 200 or r["usage"]["completion_tokens"] > 0 for r in records)


@pytest.mark.parametrize("path", ALL, ids=ids(ALL))
def test_a_fixture_names_its_prompt_by_the_cache_key(path: Path) -> None:
    record = load(path)
    prompt = first_turn_prompt(record["request"]["messages"])
    assert prompt.task == record["task"] and prompt.reply is reply_model(record["task"])
    assert prompt_key(record["model"], prompt) == record["prompt_hash"]
    assert path.name.startswith(record["prompt_hash"][:16])


def test_the_openai_json_schema_form_is_refused_by_llama_cpp_python() -> None:
    refused = [load(p) for p in fixtures(form="json_schema")]
    if not refused:
        pytest.skip("no json_schema replies recorded yet (scripts/record_llm_replies.py)")
    assert {r["status"] for r in refused} == {500}
    assert all(r["content"] is None for r in refused)


# A real reply of SmolLM2-135M to the extraction prompt with plain json_object (issue 28).
WRONG_SHAPE = '{"type":"json","data":{"entities":[{"name":"ledger-db"}]}}'


def wrong_shape_replies() -> list[str]:
    """Recorded extraction replies whose top level names neither entities nor relations."""
    found = [WRONG_SHAPE]
    for path in EXTRACTIONS:
        try:
            top = json.loads(load(path)["content"])
        except ValueError:
            continue
        if isinstance(top, dict) and not set(top) & {"entities", "relations"}:
            found.append(load(path)["content"])
    return found


@pytest.mark.parametrize("content", wrong_shape_replies())
def test_a_reply_of_the_wrong_shape_is_invalid(content: str) -> None:
    from lore.prompts import extract_graph

    with pytest.raises(ValueError):
        parse_reply(content, extract_graph.Reply)


@pytest.mark.parametrize("path", EXTRACTIONS, ids=ids(EXTRACTIONS))
def test_no_recorded_json_object_reply_passes_as_an_extraction(path: Path) -> None:
    from lore.prompts import extract_graph

    with pytest.raises(ValueError, match="does not match Reply"):
        parse_reply(load(path)["content"], extract_graph.Reply)


def test_an_empty_extraction_is_valid_only_when_said() -> None:
    from lore.prompts import extract_graph

    said, _ = parse_reply('{"entities": [], "relations": []}', extract_graph.Reply)
    assert said.entities == [] and said.relations == []
    for unsaid in ("{}", '{"entities": []}', '{"entities": [], "relations": [], "x": 1}'):
        with pytest.raises(ValueError):
            parse_reply(unsaid, extract_graph.Reply)


@pytest.mark.parametrize(
    ("task", "content"),
    [
        ("route_question", '{"decision": "local", "answer": "x"}'),
        ("answer_question", '{"answer": "yes", "cited": [], "sources": []}'),
        ("answer_global_map", '{"type": "json"}'),
        ("summarize_community", '{"title": "t", "summary": "s", "data": {}}'),
    ],
)
def test_every_prompt_refuses_unknown_top_level_keys(task: str, content: str) -> None:
    with pytest.raises(ValueError, match="does not match Reply"):
        parse_reply(content, reply_model(task))


SCHEMA_EXTRACTIONS = fixtures(task="extract_graph", form="json_object_schema", status=200)


@pytest.mark.parametrize("path", SCHEMA_EXTRACTIONS, ids=ids(SCHEMA_EXTRACTIONS))
def test_a_grammar_constrained_reply_keeps_only_names_the_chunk_writes(path: Path) -> None:
    from ingest.extract_llm import to_mentions
    from lore.llm import LLMStats
    from lore.prompts import extract_graph

    record = load(path)
    reply, _ = parse_reply(record["content"], extract_graph.Reply)  # the shape holds
    text = record["request"]["messages"][-1]["content"].split("Text:\n", 1)[1]
    text = text.split("\n\nNames found in the text:", 1)[0]
    stats = LLMStats()
    mentions = to_mentions(reply, text, stats)
    flat = " ".join(text.replace("`", "").lower().split())
    for entity in mentions.entities:  # as the text writes it, or respelt to it
        assert " ".join(entity.name.replace("`", "").lower().split()) in flat, entity
        assert entity.description, entity  # the grammar asks none: the chunk's sentence
    assert mentions.entities or stats.dropped_entities == len(reply.entities)
