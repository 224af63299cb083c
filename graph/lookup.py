"""Finding entities by a partial or misspelt name (``GET /v1/entities?q=``).

Works over any :class:`~graph.store.GraphStore` through ``entity_keys`` and ``entity``:
keys that start with the normalised query come first, then keys containing it, then
close spellings (difflib ratio), each group by mentions.
"""

from __future__ import annotations

import difflib

from graph.models import Entity, entity_key
from graph.store import EntityReader

FUZZY_CUTOFF = 0.75
MAX_CANDIDATES = 200


def find_entities(graph: EntityReader, query: str, limit: int = 20) -> list[Entity]:
    """Entities whose name matches ``query`` (prefix, substring, then fuzzy), best first."""
    needle = entity_key(query)
    if not needle:
        return []
    keys = sorted(graph.entity_keys())
    prefix = [k for k in keys if k.startswith(needle)]
    inside = [k for k in keys if needle in k and not k.startswith(needle)]
    fuzzy: list[str] = []
    if len(prefix) + len(inside) < limit:
        seen = set(prefix) | set(inside)
        close = difflib.get_close_matches(needle, keys, n=limit, cutoff=FUZZY_CUTOFF)
        fuzzy = [k for k in close if k not in seen]
    rank = {k: 0 for k in prefix} | {k: 1 for k in inside} | {k: 2 for k in fuzzy}
    candidates = [*prefix, *inside, *fuzzy][:MAX_CANDIDATES]
    entities = graph.entities(candidates)
    found = [entities[k] for k in candidates if k in entities]
    found.sort(key=lambda e: (rank.get(e.key, 3), -e.mentions, e.key))
    return found[:limit]
