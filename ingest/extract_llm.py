"""Entity and relation extraction by an LLM (any OpenAI-compatible endpoint).

Each chunk is one ``extract_graph`` prompt (``lore/prompts/extract_graph.py``); the
client validates, repairs, re-prompts once and caches (``lore/llm.py``). A chunk whose
reply stays invalid, or whose endpoint keeps failing, is quarantined with the reason.
A valid reply is still checked against the chunk: entities with placeholder names
(``...``) or names the chunk text does not contain are dropped, and so are relations
naming an entity the reply did not keep; both are counted in :class:`LLMStats`.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections.abc import Sequence
from dataclasses import replace
from functools import partial

from graph.models import EntityMention, RelationMention, entity_key
from ingest.extraction import ChunkInput, Extraction, Quarantined
from lore.errors import LLMReplyError, TransientError
from lore.llm import ChatPrompt, LLMClient, LLMStats
from lore.prompts import extract_graph


class LLMExtractor:
    """The extractor role over an :class:`LLMClient`."""

    name = "llm"

    def __init__(self, client: LLMClient, entity_types: Sequence[str]) -> None:
        self.client = client
        self.entity_types = list(entity_types)

    @property
    def version(self) -> str:
        """The model and a hash of the prompt: either changing redoes the graph."""
        prompt = extract_graph.render("", "", self.entity_types)
        digest = hashlib.sha256(prompt.system.encode()).hexdigest()[:12]
        return f"llm-{self.client.model}-{digest}"

    @property
    def stats(self) -> LLMStats:
        """The client's counters."""
        return self.client.stats

    def extract_batch(self, chunks: Sequence[ChunkInput]) -> list[Extraction | Quarantined]:
        """Extract a batch with the client's concurrency (blocking)."""
        return asyncio.run(self._batch(chunks))

    async def _batch(self, chunks: Sequence[ChunkInput]) -> list[Extraction | Quarantined]:
        async with self.client.connected():
            return list(await asyncio.gather(*(self._one(c) for c in chunks)))

    def check(self) -> None:
        """Probe the endpoint once (see :meth:`LLMClient.probe`)."""
        self.client.probe()

    def prompt(self, chunk: ChunkInput) -> ChatPrompt[extract_graph.Reply]:
        """The prompt one chunk is extracted with (also what a dry run counts).

        A reply that lists entities of which none occurs in the chunk is not usable (it
        would be stored as an empty extraction): re-prompted once, then quarantined.
        """
        prompt = extract_graph.render(chunk.text, chunk.title, self.entity_types, chunk.chunk_id)
        return replace(prompt, check=partial(ungrounded, text=chunk.text))

    async def _one(self, chunk: ChunkInput) -> Extraction | Quarantined:
        prompt = self.prompt(chunk)
        try:
            reply = await self.client.ask(prompt)
        except (LLMReplyError, TransientError) as exc:
            # about this chunk, or an endpoint that stayed down; bad settings propagate
            return Quarantined(f"{type(exc).__name__}: {exc}")
        return to_mentions(reply, chunk.text, self.client.stats)


# names a small model copies from the prompt's example instead of the text
_PLACEHOLDERS = frozenset({"name", "entity", "source", "target", "none", "null", "n/a", "unknown"})


def _normal(text: str) -> str:
    """Lower case, backticks removed, whitespace runs made one space."""
    return " ".join(text.replace("`", "").lower().split())


def is_placeholder(name: str) -> bool:
    """A name with no letter or digit (``...``, ``[*]``) or a template word (``name``)."""
    return not any(ch.isalnum() for ch in name) or _normal(name) in _PLACEHOLDERS


def ungrounded(reply: extract_graph.Reply, text: str) -> str | None:
    """Why ``reply`` is no extraction of ``text``: it lists entities, none of them in it."""
    if not reply.entities or to_mentions(reply, text).entities:
        return None
    names = ", ".join(repr(e.name) for e in reply.entities[:3])
    return (
        f"none of the {len(reply.entities)} entities you listed ({names}) is written in the "
        'text; list only names that occur in it, or reply {"entities": [], "relations": []}'
    )


def to_mentions(reply: extract_graph.Reply, text: str, stats: LLMStats | None = None) -> Extraction:
    """Mentions from a validated reply; counts are occurrences in the chunk (at least 1).

    Entities that are placeholders or that the chunk does not name are dropped, as are
    relations whose ends are not kept entities; ``stats`` counts both.
    """
    stats = stats if stats is not None else LLMStats()
    lowered = _normal(text)
    entities: dict[str, EntityMention] = {}
    for item in reply.entities:
        name = item.name.strip()
        key = entity_key(name)
        if key in entities:
            continue
        found = len(re.findall(re.escape(_normal(name)), lowered))
        if not key or is_placeholder(name) or not found:
            stats.dropped_entities += 1
            continue
        entities[key] = EntityMention(name, item.type, item.description.strip(), found)
    relations: list[RelationMention] = []
    for rel in reply.relations:
        ends = [rel.source.strip(), rel.target.strip()]
        keys = [entity_key(e) for e in ends]
        if not all(k in entities for k in keys) or keys[0] == keys[1]:
            stats.dropped_relations += 1
            continue
        relations.append(RelationMention(ends[0], ends[1], rel.strength, rel.description.strip()))
    return Extraction(list(entities.values()), relations)
