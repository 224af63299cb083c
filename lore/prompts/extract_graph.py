"""Extract entities and relations from one chunk of text."""

from __future__ import annotations

import json
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field, field_validator

from lore.llm import GRAMMAR_OMIT, ChatPrompt

TASK = "extract_graph"


def _cut_name(value: object) -> object:
    # a runaway name is cut, not refused: cut, it is in no text, and the entity is dropped
    return value[:200] if isinstance(value, str) else value


class ExtractedEntity(BaseModel):
    """One entity the text names."""

    name: str = Field(min_length=1, max_length=200)
    type: str = Field("concept", max_length=50)
    description: str = Field("", max_length=2000, json_schema_extra={GRAMMAR_OMIT: True})

    @field_validator("type", mode="before")
    @classmethod
    def _lower(cls, value: object) -> object:
        # a long or odd type is cut, not refused: the entity is what matters
        return value.strip().lower()[:50] or "concept" if isinstance(value, str) else value

    @field_validator("description", mode="before")
    @classmethod
    def _cut(cls, value: object) -> object:
        return value[:2000] if isinstance(value, str) else value

    _name = field_validator("name", mode="before")(_cut_name)


class ExtractedRelation(BaseModel):
    """A relation between two entities of the same text."""

    source: str = Field(min_length=1, max_length=200)
    target: str = Field(min_length=1, max_length=200)
    description: str = Field("", max_length=2000, json_schema_extra={GRAMMAR_OMIT: True})
    strength: float = Field(5.0, description="1 (weak) to 10 (strong)")

    _ends = field_validator("source", "target", mode="before")(_cut_name)

    @field_validator("strength")
    @classmethod
    def _clamp(cls, value: float) -> float:
        return min(10.0, max(1.0, value))


class Reply(BaseModel):
    """The whole reply."""

    model_config = ConfigDict(extra="forbid")  # a reply of another shape is invalid

    # required: an empty extraction must say so ({"entities": [], "relations": []})
    entities: list[ExtractedEntity]
    relations: list[ExtractedRelation]


SYSTEM = """TASK: extract_graph
You build a knowledge graph from technical documents. From the text you are given,
list the entities it names and the relations between them.

Entities: services, components, error codes, HTTP statuses, configuration keys, function
and metric names, hostnames, file paths, people, organizations, products, places, events
and important concepts. Keep identifiers exactly as written (e.g. `ERR-1234`,
`cache.max_entries`). Use one of these types when one fits: {types}.
Give each entity a one-sentence description based only on the text.

Relations: pairs of entities the text connects, with a one-sentence description of how,
and a strength from 1 (mentioned together) to 10 (one directly causes, contains or
depends on the other). Both ends must be entities you listed.

Reply with one JSON object and nothing else, in the form of the example reply. Every
name must be written in the text exactly as it appears there. The names a parser found
in the text are listed after it: keep those that matter and add others the text names.
If the text names nothing worth keeping, reply {{"entities": [], "relations": []}}."""


# a worked example, sent as an earlier turn: small models copy a schematic example
# ("name": "...") or one quoted in the instructions literally
EXAMPLE_TEXT = (
    "The `billing-worker` retries failed invoices every 5 minutes. After three failures "
    "it raises BILL-042 and pages the Finance team."
)
EXAMPLE = json.dumps(
    {
        "entities": [
            {
                "name": "billing-worker",
                "type": "service",
                "description": "Retries failed invoices every 5 minutes.",
            },
            {
                "name": "BILL-042",
                "type": "error",
                "description": "Raised after three failed invoice retries.",
            },
            {
                "name": "Finance team",
                "type": "organization",
                "description": "Paged when BILL-042 is raised.",
            },
        ],
        "relations": [
            {
                "source": "billing-worker",
                "target": "BILL-042",
                "description": "billing-worker raises BILL-042 after three failures",
                "strength": 9,
            },
            {
                "source": "BILL-042",
                "target": "Finance team",
                "description": "BILL-042 pages the Finance team",
                "strength": 7,
            },
        ],
    }
)


# what the parser finds in the example text: the reply keeps them and adds a name
EXAMPLE_CANDIDATES = ("billing-worker", "BILL-042", "Finance")
MAX_CANDIDATES = 24


def render(
    text: str,
    title: str,
    entity_types: Sequence[str],
    chunk_id: str = "",
    candidates: Sequence[str] = (),
) -> ChatPrompt[Reply]:
    """The prompt for one chunk (the document title gives context).

    ``candidates`` are names a parser found in the text (the offline extractor's): a small
    model that copies names from a list writes them as the text does, where it otherwise
    paraphrases them into names the text does not contain.
    """
    return ChatPrompt(
        task=TASK,
        system=SYSTEM.format(types=", ".join(entity_types)),
        examples=((user_turn("Billing notes", EXAMPLE_TEXT, EXAMPLE_CANDIDATES), EXAMPLE),),
        user=user_turn(title, text, candidates),
        reply=Reply,
        chunk_ids=(chunk_id,) if chunk_id else (),
        max_tokens=reply_budget(text),
    )


def user_turn(title: str, text: str, candidates: Sequence[str] = ()) -> str:
    """The user message for one chunk: its document's title, its text, the parser's names."""
    names = ", ".join(list(dict.fromkeys(c for c in candidates if c.strip()))[:MAX_CANDIDATES])
    found = f"\n\nNames found in the text: {names}" if names else ""
    return f"Document: {title}\n\nText:\n{text}{found}"


def reply_budget(text: str) -> int:
    """Completion tokens an extraction of ``text`` needs at most: it grows with the text.

    About 4 characters a token; names and descriptions restate the text at most about
    twice over, plus the JSON around them.
    """
    return 400 + 2 * (len(text) // 4)
