"""Repair and validation of model replies (pure functions of lore/llm.py)."""

import json
from typing import Any

import pytest
from pydantic import BaseModel

from lore.llm import parse_reply, repair_json, response_format
from lore.prompts import (
    answer_global_map,
    answer_question,
    extract_graph,
    route_question,
    summarize_community,
)


class Pair(BaseModel):
    a: int
    b: list[str]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"a": 1, "b": ["x"]}', {"a": 1, "b": ["x"]}),
        ('Here you go:\n```json\n{"a": 1, "b": ["x"]}\n```\nAnything else?', {"a": 1, "b": ["x"]}),
        ('{"a": 1, "b": ["x",],}', {"a": 1, "b": ["x"]}),
        ('{"a": 1, "b": ["x"]} trailing words {"c": 2}', {"a": 1, "b": ["x"]}),
        ('{"a": True, "b": [None]}', {"a": True, "b": [None]}),
        ('{"a": 1, "b": ["x", "unfinished', {"a": 1, "b": ["x", "unfinished"]}),
        ('{"a": 1, "b": ["True, None,]"]}', {"a": 1, "b": ["True, None,]"]}),  # strings untouched
    ],
)
def test_repair_recovers_common_damage(raw: str, expected: object) -> None:
    assert repair_json(raw) == expected


@pytest.mark.parametrize("raw", ["", "no json here", "```\n```"])
def test_repair_gives_up_with_a_reason(raw: str) -> None:
    with pytest.raises(ValueError, match="JSON"):
        repair_json(raw)


def test_parse_reply_reports_repairs_and_validation_errors() -> None:
    reply, repaired = parse_reply('{"a": 2, "b": []}', Pair)
    assert reply == Pair(a=2, b=[]) and not repaired
    reply, repaired = parse_reply('```json\n{"a": 2, "b": [],}\n```', Pair)
    assert reply == Pair(a=2, b=[]) and repaired
    with pytest.raises(ValueError, match=r"does not match Pair: b: Field required"):
        parse_reply('{"a": 2}', Pair)


def test_every_prompt_renders_with_its_task_first_and_a_reply_model() -> None:
    extraction = extract_graph.render("PAY-5031 hits payments-api.", "Payments", ["service"])
    report = summarize_community.render(
        [("E1", "payments-api", "service", "the API")],
        [("R1", "payments-api", "ledger-db", "writes to")],
        [("C1", "payments-api writes to ledger-db.")],
    )
    route = route_question.render("What does PAY-5031 mean?", "identifiers pay-5031")
    mapped = answer_global_map.render("Main themes?", [("R1", "Timeouts everywhere")])
    answer = answer_question.render("Why?", [(1, "Because the pool was full.")])
    rendered = (
        (extraction, "extract_graph"),
        (report, "summarize_community"),
        (route, "route_question"),
        (mapped, "answer_global_map"),
        (answer, "answer_question"),
    )
    for prompt, task in rendered:
        messages = prompt.messages()
        assert messages[0]["content"].splitlines()[0] == f"TASK: {task}"
        assert prompt.task == task and messages[1]["role"] == "user"
    assert "PAY-5031" in extraction.user and "Types" not in extraction.system
    assert "service" in extraction.system and "E1 | payments-api" in report.user
    assert "R1:\nTimeouts everywhere" in mapped.user and "[1] Because" in answer.user
    strength = extract_graph.ExtractedRelation(source="a", target="b", strength=42)
    assert strength.strength == 10.0  # clamped to the scale the prompt asks for


@pytest.mark.parametrize(
    ("module", "field"),
    [(summarize_community, "title"), (answer_global_map, "description")],
)
def test_the_grammar_form_keeps_properties_named_like_schema_keywords(
    module: Any, field: str
) -> None:
    # a report's "title" and a point's "description" are required fields, not keywords
    sent = response_format("json_object_schema", "t", module.Reply)
    assert sent is not None
    schema = sent["schema"]
    text = json.dumps(schema)
    assert f'"{field}": {{"type": "string"}}' in text
    for node in _objects(schema):
        assert set(node.get("required", [])) <= set(node.get("properties", {})), node


def test_the_grammar_form_leaves_out_extraction_descriptions_and_no_other_form_does() -> None:
    grammar = response_format("json_object_schema", "t", extract_graph.Reply)
    assert grammar is not None
    entity = grammar["schema"]["properties"]["entities"]["items"]
    assert set(entity["properties"]) == {"name", "type"}
    schema = json.dumps(response_format("json_schema", "t", extract_graph.Reply))
    assert '"description": {"default": ""' in schema and "x-grammar-omit" not in schema


def _objects(node: Any) -> list[dict[str, Any]]:
    if isinstance(node, list):
        return [o for item in node for o in _objects(item)]
    if not isinstance(node, dict):
        return []
    return [node, *(o for value in node.values() for o in _objects(value))]
