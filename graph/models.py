"""What the graph holds: entity and relation mentions in, merged entities and relations out."""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from lore.jsonsafe import loads_stored


@dataclass(frozen=True, slots=True)
class EntityMention:
    """An entity found in one chunk."""

    name: str
    type: str
    description: str
    count: int = 1


@dataclass(frozen=True, slots=True)
class RelationMention:
    """Two entities related in one chunk (names as in the mentions), with a weight."""

    source: str
    target: str
    weight: float
    description: str


@dataclass(frozen=True, slots=True)
class ChunkMentions:
    """Everything one chunk contributes to the graph (what ``put_chunks`` stores)."""

    chunk_id: str
    document_id: str
    entities: Sequence[EntityMention]
    relations: Sequence[RelationMention]


@dataclass(frozen=True, slots=True)
class Entity:
    """An entity merged over all the chunks that mention it."""

    key: str
    name: str
    type: str
    description: str
    mentions: int
    chunk_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Relation:
    """A relation merged over its chunks; ``weight`` sums the chunk weights."""

    source: str
    target: str
    weight: float
    description: str
    chunk_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Finding:
    """One statement of a report with what it rests on."""

    text: str
    entities: tuple[str, ...] = ()
    relations: tuple[tuple[str, str], ...] = ()
    chunks: tuple[str, ...] = ()

    def __reduce__(self) -> tuple[type[Finding], tuple[Any, ...]]:
        """Pickled as its fields in order (a view snapshot holds tens of thousands)."""
        return (Finding, (self.text, self.entities, self.relations, self.chunks))


# (method, fingerprint) of a report, what a conditional ``put_reports`` compares
ReportVersion = tuple[str, str]


@dataclass(frozen=True, slots=True)
class CommunityReport:
    """A community's report; ``importance`` is 0-10 relative to the largest community."""

    community_id: str
    level: int
    title: str
    summary: str
    findings: tuple[Finding, ...]
    importance: float
    fingerprint: str
    chunk_ids: tuple[str, ...] = field(default=())
    method: str = "extractive"

    def __reduce__(self) -> tuple[type[CommunityReport], tuple[Any, ...]]:
        """Pickled as its fields in order: a slots dataclass's own state is slower."""
        return (
            CommunityReport,
            (
                self.community_id,
                self.level,
                self.title,
                self.summary,
                self.findings,
                self.importance,
                self.fingerprint,
                self.chunk_ids,
                self.method,
            ),
        )

    @property
    def version(self) -> ReportVersion:
        """``(method, fingerprint)``: how and from what the report was written."""
        return (self.method, self.fingerprint)

    def to_json(self) -> str:
        """Serialised form for storage (the fields as ``dataclasses.asdict`` names them).

        Not through ``asdict``, which deep-copies every value: the chunk ids of an upper
        community's report run to thousands (a third of a profiled delete went there).
        """
        data = {f.name: getattr(self, f.name) for f in fields(self)}  # shallow
        data["findings"] = [{f.name: getattr(x, f.name) for f in fields(x)} for x in self.findings]
        return json.dumps(data, sort_keys=True)

    @staticmethod
    def from_json(raw: str) -> CommunityReport:
        """Inverse of :meth:`to_json`."""
        data = loads_stored(raw)
        data["findings"] = tuple(
            Finding(
                f["text"],
                tuple(f["entities"]),
                tuple(map(tuple, f["relations"])),
                tuple(f["chunks"]),
            )
            for f in data["findings"]
        )
        data["chunk_ids"] = tuple(data["chunk_ids"])
        return CommunityReport(**data)


MAX_DESCRIPTION_CHARS = 600


def merge_descriptions(descriptions: Iterable[str]) -> str:
    """Distinct non-empty descriptions in the given (chunk) order, joined, bounded."""
    seen: dict[str, None] = {}
    for text in descriptions:
        clean = " ".join(text.split())
        if clean and clean.lower() not in {s.lower() for s in seen}:
            seen[clean] = None
    merged = " | ".join(seen)
    return (
        merged
        if len(merged) <= MAX_DESCRIPTION_CHARS
        else merged[: MAX_DESCRIPTION_CHARS - 1] + "…"
    )


def fold_accents(text: str) -> str:
    """``text`` without accents and case (Unicode NFKD, combining marks dropped, casefold)."""
    return "".join(
        ch for ch in unicodedata.normalize("NFKD", text) if not unicodedata.combining(ch)
    ).casefold()


def entity_key(name: str) -> str:
    """Normalised name used to merge mentions.

    A name made of letters (any script) and spaces is folded for case and accents
    (Unicode NFKD, combining marks dropped, casefold: "Akinoshū Kenji" meets "akinoshu
    kenji") and loses a plural ending; an identifier (digits, ``_``, ``.``, ``-``, ``/``)
    only loses case and surrounding punctuation, its characters kept exactly.
    """
    key = " ".join(name.strip(" \t`'\"()[]{}.,;:").split()).lower()
    folded = fold_accents(key)
    if not re.fullmatch(r"[^\W\d_]+(?: [^\W\d_]+)*", folded):
        return key  # identifiers are kept exactly (but for case)
    key = folded
    if len(key) < 4 or not key.isascii():
        return key
    if key.endswith("ies"):
        return key[:-3] + "y"  # "dependencies" -> "dependency"
    if key.endswith("s") and not key.endswith(("ss", "us", "is")):
        return key[:-1]  # "Incident Commanders" -> "incident commander"
    return key
