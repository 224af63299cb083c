"""Entity and relation extraction by an LLM (any OpenAI-compatible endpoint).

Each chunk is one ``extract_graph`` prompt (``lore/prompts/extract_graph.py``); the
client validates, repairs, re-prompts once and caches (``lore/llm.py``). A chunk whose
reply stays invalid, or whose endpoint keeps failing, is quarantined with the reason.
Relations naming an entity the reply did not list keep that entity (typed ``concept``)
rather than being dropped.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections.abc import Sequence

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
        """The prompt one chunk is extracted with (also what a dry run counts)."""
        return extract_graph.render(chunk.text, chunk.title, self.entity_types, chunk.chunk_id)

    async def _one(self, chunk: ChunkInput) -> Extraction | Quarantined:
        prompt = self.prompt(chunk)
        try:
            reply = await self.client.ask(prompt)
        except (LLMReplyError, TransientError) as exc:
            # about this chunk, or an endpoint that stayed down; bad settings propagate
            return Quarantined(f"{type(exc).__name__}: {exc}")
        return to_mentions(reply, chunk.text)


def to_mentions(reply: extract_graph.Reply, text: str) -> Extraction:
    """Mentions from a validated reply; counts are occurrences in the chunk (at least 1)."""
    lowered = text.lower()
    entities: dict[str, EntityMention] = {}
    for item in reply.entities:
        name = item.name.strip()
        key = entity_key(name)
        if not key or key in entities:
            continue
        count = max(1, len(re.findall(re.escape(name.lower()), lowered)))
        entities[key] = EntityMention(name, item.type, item.description.strip(), count)
    relations: list[RelationMention] = []
    for rel in reply.relations:
        ends = [rel.source.strip(), rel.target.strip()]
        keys = [entity_key(e) for e in ends]
        if not all(keys) or keys[0] == keys[1]:
            continue
        for name, key in zip(ends, keys, strict=True):
            if key not in entities:
                entities[key] = EntityMention(name, "concept", "", 1)
        relations.append(RelationMention(ends[0], ends[1], rel.strength, rel.description.strip()))
    return Extraction(list(entities.values()), relations)
