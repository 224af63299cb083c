"""Entity and relation extraction by an LLM (any OpenAI-compatible endpoint).

Each chunk is one ``extract_graph`` prompt (``lore/prompts/extract_graph.py``); the
client validates, repairs, re-prompts once and caches (``lore/llm.py``). A chunk whose
reply stays invalid, or whose endpoint keeps failing, is quarantined with the reason.
A valid reply is still checked against the chunk: entities with placeholder names
(``...``) or names the chunk text does not contain are dropped, and so are relations
naming an entity the reply did not keep; both are counted in :class:`LLMStats`.

The prompt lists the names the offline extractor finds in the chunk (identifiers and
proper names) as a start: a small model copies a name from a list as the text writes it,
where on its own it paraphrases names into ones the text does not hold. A name the text
holds in another spelling of the same words (``ledger db`` for ``ledger-db``: the same
letters and digits, other separators or case; or one word one letter off, ``payment-api``
for ``payments-api``) is kept, spelt as the text spells it. An entity or relation the
reply gives no description (the grammar-constrained form asks for none) gets the first
sentence of the chunk that names it.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections.abc import Sequence
from dataclasses import replace
from functools import partial

from graph.models import EntityMention, RelationMention, entity_key
from ingest import extract_offline
from ingest.extraction import ChunkInput, Extraction, Quarantined
from lore.errors import LLMReplyError, TransientError
from lore.llm import ChatPrompt, LLMClient, LLMStats
from lore.prompts import extract_graph
from lore.sentences import segments


class LLMExtractor:
    """The extractor role over an :class:`LLMClient`."""

    name = "llm"

    def __init__(
        self, client: LLMClient, entity_types: Sequence[str], *, name_hints: bool = True
    ) -> None:
        self.client = client
        self.entity_types = list(entity_types)
        self.name_hints = name_hints
        """List the offline extractor's names in each prompt (off: the bench's baseline)."""

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
        prompt = extract_graph.render(
            chunk.text,
            chunk.title,
            self.entity_types,
            chunk.chunk_id,
            candidates(chunk) if self.name_hints else (),
        )
        return replace(prompt, check=partial(ungrounded, text=chunk.text))

    async def _one(self, chunk: ChunkInput) -> Extraction | Quarantined:
        prompt = self.prompt(chunk)
        try:
            reply = await self.client.ask(prompt)
        except (LLMReplyError, TransientError) as exc:
            # about this chunk, or an endpoint that stayed down; bad settings propagate
            return Quarantined(f"{type(exc).__name__}: {exc}")
        return to_mentions(reply, chunk.text, self.client.stats)


def candidates(chunk: ChunkInput) -> list[str]:
    """Names the offline extractor finds in the chunk's text, most mentioned first.

    Only names written in the text itself (not the document title, which the offline
    extractor adds as an entity of every chunk), in the order of their counts, then of
    their first place in the text.
    """
    entities, _ = extract_offline.extract(chunk.text, heading=chunk.heading)
    lowered = _normal(chunk.text)
    placed = [(e, lowered.find(_normal(e.name))) for e in entities]
    written = [(e, at) for e, at in placed if at >= 0]
    return [e.name for e, _ in sorted(written, key=lambda item: (-item[0].count, item[1]))]


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
    words = _Words(text)
    sentences = [(_normal(seg.text), seg.text) for seg in segments(text)]

    def sentence_with(*names: str) -> str:
        """The first sentence of the text naming all of ``names`` (a reply's missing say)."""
        wanted = [_normal(n) for n in names]
        found = next((raw for low, raw in sentences if all(w in low for w in wanted)), "")
        return found if len(found) <= 240 else found[:239] + "…"

    entities: dict[str, EntityMention] = {}
    spelt: dict[str, str] = {}  # a reply's key -> the key of the name as the text writes it
    for item in reply.entities:
        name = item.name.strip()
        found = len(re.findall(re.escape(_normal(name)), lowered)) if name else 0
        if not found and not is_placeholder(name):
            name, found = words.find(name)
        key = entity_key(name)
        if not key or is_placeholder(name) or not found:
            stats.dropped_entities += 1
            continue
        spelt[entity_key(item.name.strip())] = key
        if key not in entities:
            said = item.description.strip() or sentence_with(name)
            entities[key] = EntityMention(name, item.type, said, found)
    relations: list[RelationMention] = []
    for rel in reply.relations:
        given = [rel.source.strip(), rel.target.strip()]
        keys = [spelt.get(entity_key(e), "") for e in given]
        # an end is written as the relation writes it, or as the text does when respelt
        ends = [
            e if entity_key(e) == k else entities[k].name if k in entities else e
            for e, k in zip(given, keys, strict=True)
        ]
        if not all(k in entities for k in keys) or keys[0] == keys[1]:
            stats.dropped_relations += 1
            continue
        said = rel.description.strip() or sentence_with(*ends)
        relations.append(RelationMention(ends[0], ends[1], rel.strength, said))
    return Extraction(list(entities.values()), relations)


_ALNUM = re.compile(r"[^\W_]+")


class _Words:
    """A text's runs of letters and digits, to find a name written with other separators."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.runs = [(m.group().lower(), m.start(), m.end()) for m in _ALNUM.finditer(text)]

    def find(self, name: str) -> tuple[str, int]:
        """The text's spelling of ``name``'s words and how often it occurs, or ``("", 0)``.

        The same letters and digits in the same order, joined by anything else: ``ledger
        db`` finds ``ledger-db``, ``err 1234`` finds ``ERR-1234``.
        """
        wanted = [w.lower() for w in _ALNUM.findall(name)]
        if not wanted:
            return "", 0
        n = len(wanted)
        windows = [
            (i, [w for w, _, _ in self.runs[i : i + n]]) for i in range(len(self.runs) - n + 1)
        ]
        spans = [i for i, words in windows if words == wanted]
        if not spans:  # one word off by one letter: ``payment-api`` for ``payments-api``
            spans = [i for i, words in windows if _one_letter_off(words, wanted)]
        if not spans:
            return "", 0
        start, end = self.runs[spans[0]][1], self.runs[spans[0] + n - 1][2]
        return " ".join(self.text[start:end].split()), len(spans)


def _one_letter_off(words: list[str], wanted: list[str]) -> bool:
    """The same words but one, which differs by one letter added, dropped or changed.

    That word has at least 4 letters on both sides, and a name of one word at least 6:
    ``cache`` is never respelt as ``catch``, nor ``v2`` as ``v3``.
    """
    odd = [(a, b) for a, b in zip(words, wanted, strict=True) if a != b]
    if len(odd) != 1:
        return False
    a, b = odd[0]
    if min(len(a), len(b)) < (6 if len(words) == 1 else 4) or a.isdigit() or b.isdigit():
        return False
    if len(a) == len(b):
        return sum(x != y for x, y in zip(a, b, strict=True)) == 1
    short, long = sorted((a, b), key=len)
    return len(long) - len(short) == 1 and any(
        long[:i] + long[i + 1 :] == short for i in range(len(long))
    )
