"""Graph-augmented local search: a third ranked list from the entity graph.

Seeds are the entities named in the question (matched as whole word n-grams against the
graph's entity keys) and the entities of the best hybrid chunks. One hop out along the
relations gives their neighbours; every chunk that mentions a seed or a neighbour is
scored by the entities it holds (seeds from the question count most, frequent entities
count less). This connects a question about "Lothair II's mother" to the passage about
Teutberga, which no single engine ranks high. The list is fused by weighted RRF with
the others; with no graph it is empty.
"""

from __future__ import annotations

import math
import re
import threading
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from graph.models import entity_key
from graph.store import GraphStore
from lore.store import Store

_WORDS = re.compile(r"[^\W_][\w'\u2019.\-/]*")
MAX_NGRAM = 6
QUERY_ENTITY = 3.0
CHUNK_ENTITY = 1.0
NEIGHBOURS = 15
NEIGHBOUR_ENTITY = 1.0


@dataclass
class GraphExpander:
    """Ranks chunks through the entity graph (see the module docstring)."""

    graph: GraphStore
    store: Store
    _keys: set[str] = field(default_factory=set, init=False)
    _version: int = field(default=-1, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def _entity_keys(self) -> set[str]:
        version = self.graph.counts()["extracted_chunks"]
        with self._lock:
            if version != self._version:
                self._keys = self.graph.entity_keys()
                self._version = version
            return self._keys

    def query_entities(self, query: str) -> list[str]:
        """Entity keys named in the query (longest first, no overlaps needed)."""
        keys = self._entity_keys()
        if not keys:
            return []
        words = [w.rstrip(".?!,;:") for w in _WORDS.findall(query)]
        found: dict[str, None] = {}
        for size in range(min(MAX_NGRAM, len(words)), 0, -1):
            for start in range(len(words) - size + 1):
                key = entity_key(" ".join(words[start : start + size]))
                if len(key) >= 3 and key in keys:
                    found.setdefault(key, None)
        return list(found)

    def rank(self, query: str, seed_rows: Sequence[int], limit: int) -> list[tuple[int, float]]:
        """Best ``limit`` (row id, score) pairs reached through the graph."""
        weights: dict[str, float] = defaultdict(float)
        named = self.query_entities(query)
        for key in named:
            weights[key] += QUERY_ENTITY
        seed_chunks = [c.id for c in self.store.chunks_by_row_ids(list(seed_rows)).values()]
        for keys in self.graph.entities_of_chunks(seed_chunks).values():
            for key in keys:
                weights[key] += CHUNK_ENTITY
        if not weights:
            return []
        for key in named:
            for neighbour, weight in self.graph.neighbours(key, NEIGHBOURS):
                weights[neighbour.key] += NEIGHBOUR_ENTITY * min(1.0, 0.5 * weight)
        postings = self.graph.chunks_of_entities(sorted(weights))
        scores: dict[str, float] = defaultdict(float)
        for key, chunk_ids in postings.items():
            rarity = 1.0 / math.log(2.0 + len(chunk_ids))
            for chunk_id in chunk_ids:
                scores[chunk_id] += weights[key] * rarity
        best = sorted(scores.items(), key=lambda item: (-item[1], item[0]))[: limit * 2]
        rows = self.store.row_ids_of_chunk_ids([chunk_id for chunk_id, _ in best])
        ranked = [(rows[c], s) for c, s in best if c in rows]
        return ranked[:limit]
