"""The narrow roles: ``Store`` plays every store role, the SQL graph store every graph role.

mypy checks the signatures (``lore/store_roles.py`` and ``graph/stores/local.py`` assign
the classes to role-typed names); this checks the instances at run time, and that the
roles together cover the whole of what each implementation offers.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from graph.store import (
    CommunityReader,
    CommunityStore,
    EntityReader,
    GraphStore,
    MentionStore,
    StalenessStore,
)
from graph.stores.local import LocalGraphStore
from lore.db import SQLiteDatabase
from lore.store import Store
from lore.store_roles import (
    ChangeLog,
    ChunkReader,
    DocumentCatalog,
    DocumentWriter,
    MetadataFilter,
    Sequenced,
    StoreSettings,
)

STORE_ROLES: list[type] = [
    StoreSettings,
    DocumentCatalog,
    DocumentWriter,
    Sequenced,
    ChangeLog,
    ChunkReader,
    MetadataFilter,
]
GRAPH_ROLES: list[type] = [
    EntityReader,
    MentionStore,
    CommunityReader,
    CommunityStore,
    StalenessStore,
    GraphStore,
]


def _methods(cls: type) -> set[str]:
    return {name for name in dir(cls) if not name.startswith("_") and callable(getattr(cls, name))}


@pytest.fixture
def database(tmp_path: Path) -> SQLiteDatabase:
    return SQLiteDatabase(tmp_path / "lore.sqlite3")


@pytest.mark.parametrize("role", STORE_ROLES, ids=lambda r: r.__name__)
def test_the_store_plays_every_store_role(database: SQLiteDatabase, role: type) -> None:
    store = Store(database)
    try:
        assert isinstance(store, role)
    finally:
        store.close()


@pytest.mark.parametrize("role", GRAPH_ROLES, ids=lambda r: r.__name__)
def test_the_sql_graph_store_plays_every_graph_role(database: SQLiteDatabase, role: type) -> None:
    graph = LocalGraphStore(database)
    try:
        assert isinstance(graph, role)
    finally:
        graph.close()


def test_the_store_roles_cover_the_store_without_overlap() -> None:
    owned = [_methods(role) for role in STORE_ROLES if role is not Sequenced]
    seen = set().union(*owned)
    assert sum(map(len, owned)) == len(seen) + 1  # last_seq: ChangeLog's and ChunkReader's
    assert _methods(Store) - seen == {"close"}  # the lifetime, not a role


def test_an_object_missing_a_method_plays_no_role() -> None:
    class OnlyTexts:
        def texts_by_chunk_ids(self, chunk_ids: list[str]) -> dict[str, str]:
            return {}

    assert not isinstance(OnlyTexts(), ChunkReader)
    assert not isinstance(OnlyTexts(), EntityReader)


def test_the_graph_store_is_its_roles_and_lifetime() -> None:
    roles = set().union(*(_methods(r) for r in GRAPH_ROLES if r is not GraphStore))
    assert _methods(GraphStore) - roles == {"counts", "close"}
    assert not _methods(GraphStore) - _methods(LocalGraphStore)
