"""GraphStore backends, one module each, chosen by name and imported only when chosen."""

from __future__ import annotations

from graph.store import GraphStore
from lore.backends import resolve_backend

BACKENDS = {
    "local": "graph.stores.local:LocalGraphStore",
    "neo4j": "graph.stores.neo4j:Neo4jGraphStore",
}


def open_graph_store(backend: str, **options: object) -> GraphStore:
    """Open the named backend with its options (see each class).

    ``local`` takes ``path`` (a SQLite file or a ``lore.db.Database``); ``neo4j`` takes
    ``uri``, ``user``, ``password``, ``database`` and ``namespace``.
    """
    store: GraphStore = resolve_backend(BACKENDS, backend, "graph backend")(**options)
    return store
