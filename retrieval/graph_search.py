"""Graph-augmented local search: a third ranked list from the entity graph.

Two walks feed the list, both starting from what the question names:

* **Title walk.** Documents whose *title* the question names (matched as word n-grams,
  see :mod:`retrieval.titles`) come first. Their chunks' extracted entities are looked up
  as titles in turn: "When did Lothair II's mother die?" names the page "Lothair II",
  whose chunk mentions "Ermengarde of Tours", the title of the page holding the answer.
  That second page shares no word with the question, so no engine ranks it high. When
  the question names no title, the best hybrid chunks are the starting points instead.
* **Entity walk.** Entities named in the question (as whole n-grams of the graph's entity
  keys) and the entities of the best hybrid chunks, one hop out along the relations;
  every chunk mentioning one is scored by the entities it holds (question entities count
  most, frequent entities less). It orders the chunks the title walk reaches and ranks
  the rest after them.

The list is fused by weighted RRF with the others; with no graph it is empty.
"""

from __future__ import annotations

import math
import re
import threading
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from graph.models import entity_key
from graph.store import EntityReader
from lore.store_roles import ChunkReader
from retrieval.filters import ResolvedFilter
from retrieval.titles import TitleIndex

_WORDS = re.compile(r"[^\W_][\w'\u2019.\-/]*")
MAX_NGRAM = 6
QUERY_ENTITY = 3.0
CHUNK_ENTITY = 1.0
NEIGHBOURS = 15
NEIGHBOUR_ENTITY = 1.0


@dataclass
class GraphExpander:
    """Ranks chunks through the entity graph (see the module docstring)."""

    graph: EntityReader
    store: ChunkReader
    named_title: float = 100.0
    bridge: float = 50.0
    seed_source: float = 0.5
    _titles: TitleIndex = field(default_factory=lambda: TitleIndex({}), init=False)
    _titles_seq: int = field(default=-1, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def title_index(self) -> TitleIndex:
        """The titles of the stored documents, rebuilt when the store changes."""
        seq = self.store.last_seq()
        with self._lock:
            if seq != self._titles_seq:
                self._titles = TitleIndex.build(self.store.titled_chunks())
                self._titles_seq = seq
            return self._titles

    def query_entities(self, query: str) -> list[str]:
        """Entity keys named in the query (longest first, no overlaps needed)."""
        words = [w.rstrip(".?!,;:") for w in _WORDS.findall(query)]
        candidates: dict[str, None] = {}
        for size in range(min(MAX_NGRAM, len(words)), 0, -1):
            for start in range(len(words) - size + 1):
                key = entity_key(" ".join(words[start : start + size]))
                if len(key) >= 3:
                    candidates.setdefault(key, None)
        known = self.graph.chunks_of_entities(list(candidates))
        return [key for key in candidates if key in known]

    def rank(
        self,
        query: str,
        seed_rows: Sequence[int],
        limit: int,
        flt: ResolvedFilter | None = None,
    ) -> list[tuple[int, float]]:
        """Best ``limit`` (row id, score) pairs reached through the graph.

        With a filter only the chunks it admits are ranked, like in the other sources.
        """
        seed_chunks = [c.id for c in self.store.chunks_by_row_ids(list(seed_rows)).values()]
        scores = self.title_walk(query, seed_chunks) or self.entity_walk(query, seed_chunks)
        best = sorted(scores.items(), key=lambda item: (-item[1], item[0]))
        if flt is None:
            best = best[: limit * 2]  # a few spare for chunks deleted meanwhile
        rows = self.store.row_ids_of_chunk_ids([chunk_id for chunk_id, _ in best])
        ranked = [
            (rows[c], s) for c, s in best if c in rows and (flt is None or rows[c] in flt.allowed)
        ]
        return ranked[:limit]

    def title_walk(self, query: str, seed_chunks: Sequence[str]) -> dict[str, float]:
        """Chunks titled by what the question names, then by what those chunks name.

        Each starting document votes once for every title its chunks name, however many
        of its chunks name it; votes of different starting documents add up. A long
        document's later chunks count less (``1 / (1 + position)``), unless hybrid search
        ranked them among its best, so its chunks do not crowd out the next hop.
        """
        titles = self.title_index()
        seeds = set(seed_chunks)

        def share(chunk_id: str) -> float:
            return 1.0 if chunk_id in seeds else 1.0 / (1 + titles.position.get(chunk_id, 0))

        groups = [match.chunks for match in titles.find(query)]
        weight = self.named_title
        scores = {chunk_id: weight * share(chunk_id) for group in groups for chunk_id in group}
        if not groups:
            groups = [(chunk_id,) for chunk_id in seed_chunks]
            weight = self.named_title * self.seed_source
        starts = {chunk_id for group in groups for chunk_id in group}
        entities = self.graph.entities_of_chunks(sorted(starts))
        vote = self.bridge * weight / self.named_title
        for group in groups:
            reached = {
                target
                for chunk_id in group
                for key in entities.get(chunk_id, ())
                for match in titles.find(key, part_min_words=2)
                for target in match.chunks
            }
            for target in sorted(reached - starts):
                scores[target] = scores.get(target, 0.0) + vote * share(target)
        return scores

    def entity_walk(self, query: str, seed_chunks: Sequence[str]) -> dict[str, float]:
        """Chunks scored by the question's entities, the seeds' entities, and neighbours."""
        weights: dict[str, float] = defaultdict(float)
        named = self.query_entities(query)
        for key in named:
            weights[key] += QUERY_ENTITY
        for keys in self.graph.entities_of_chunks(seed_chunks).values():
            for key in keys:
                weights[key] += CHUNK_ENTITY
        if not weights:
            return {}
        for key in named:
            for neighbour, weight in self.graph.neighbours(key, NEIGHBOURS):
                weights[neighbour.key] += NEIGHBOUR_ENTITY * min(1.0, 0.5 * weight)
        postings = self.graph.chunks_of_entities(sorted(weights))
        scores: dict[str, float] = defaultdict(float)
        for key, chunk_ids in postings.items():
            rarity = 1.0 / math.log(2.0 + len(chunk_ids))
            for chunk_id in chunk_ids:
                scores[chunk_id] += weights[key] * rarity
        return scores
