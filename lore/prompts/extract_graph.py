"""Extract entities and relations from one chunk of text."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field, field_validator

from lore.llm import ChatPrompt

TASK = "extract_graph"


class ExtractedEntity(BaseModel):
    """One entity the text names."""

    name: str = Field(min_length=1, max_length=200)
    type: str = Field("concept", max_length=50)
    description: str = Field("", max_length=2000)

    @field_validator("type")
    @classmethod
    def _lower(cls, value: str) -> str:
        return value.strip().lower() or "concept"


class ExtractedRelation(BaseModel):
    """A relation between two entities of the same text."""

    source: str = Field(min_length=1, max_length=200)
    target: str = Field(min_length=1, max_length=200)
    description: str = Field("", max_length=2000)
    strength: float = Field(5.0, description="1 (weak) to 10 (strong)")

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
and important concepts. Keep identifiers exactly as written (e.g. `PAY-5031`,
`ledger.lock_timeout_ms`). Use one of these types when one fits: {types}.
Give each entity a one-sentence description based only on the text.

Relations: pairs of entities the text connects, with a one-sentence description of how,
and a strength from 1 (mentioned together) to 10 (one directly causes, contains or
depends on the other). Both ends must be entities you listed.

Reply with one JSON object and nothing else:
{{"entities": [{{"name": "...", "type": "...", "description": "..."}}],
 "relations": [{{"source": "...", "target": "...", "description": "...", "strength": 7}}]}}
If the text names nothing worth keeping, reply {{"entities": [], "relations": []}}."""


def render(
    text: str, title: str, entity_types: Sequence[str], chunk_id: str = ""
) -> ChatPrompt[Reply]:
    """The prompt for one chunk (the document title gives context)."""
    return ChatPrompt(
        task=TASK,
        system=SYSTEM.format(types=", ".join(entity_types)),
        user=f"Document: {title}\n\nText:\n{text}",
        reply=Reply,
        chunk_ids=(chunk_id,) if chunk_id else (),
        max_tokens=reply_budget(text),
    )


def reply_budget(text: str) -> int:
    """Completion tokens an extraction of ``text`` needs at most: it grows with the text.

    About 4 characters a token; names and descriptions restate the text at most about
    twice over, plus the JSON around them.
    """
    return 400 + 2 * (len(text) // 4)
