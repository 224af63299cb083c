"""``app.migrate`` on real SQLite files and a real, fresh PostgreSQL database."""

from pathlib import Path

import numpy as np
import psycopg
import pytest

from app.builders import database_for
from app.keys import KeyStore
from app.migrate import NonEmptyTargetError, migrate
from lore.errors import BackendUnavailableError, ConfigurationError, StorageError
from lore.llm import ReplyCache
from lore.models import SourceDocument
from lore.settings import Settings, load_settings
from lore.store import NewChunk, Store


def _chunks(doc: str, count: int) -> list[NewChunk]:
    rng = np.random.default_rng(0)
    return [
        NewChunk(f"{doc}-{i}", i, f"text {doc} {i}", "", 3, f"h{doc}{i}", rng.random(4, np.float32))
        for i in range(count)
    ]


def _source(tmp_path: Path) -> Settings:
    """A data directory whose last chunk and change ids were deleted (SQLite keeps counting)."""
    settings = load_settings(data_dir=tmp_path / "data")
    store = Store(database_for(settings, "lore"))
    store.replace_document(SourceDocument("a", "a.md", "a", "A", {"env": "x"}), _chunks("a", 2))
    store.replace_document(SourceDocument("b", "b.md", "b", "B", {}), _chunks("b", 1))
    store.delete_document("b")
    store.close()
    keys = KeyStore(database_for(settings, "keys"))
    keys.create(["default"], name="k")
    keys.close()
    cache = ReplyCache(database_for(settings, "llm-cache"))
    cache.put("p1", "m", "extract", '{"ok": 1}')
    cache.close()
    return settings


def _target(settings: Settings, url: str) -> Settings:
    return settings.model_copy(update={"store": settings.store.model_copy(update={"url": url})})


def test_ids_survive_and_new_ids_never_reuse_one(tmp_path: Path, postgres_url: str) -> None:
    source = _source(tmp_path)
    report = migrate(source, postgres_url, batch_rows=2)
    assert report.ok
    copied = {(t.schema, t.table): t for t in report.tables}
    assert copied[("lore_lore", "chunks")].rows == 2
    assert copied[("lore_lore", "chunks")].identity == {"row_id": 4}  # 3 was handed out
    assert copied[("lore_lore", "changes")].identity == {"seq": 5}
    assert copied[("lore_keys", "api_keys")].rows == 1
    assert copied[("lore_llm_cache", "llm_replies")].rows == 1

    old = Store(database_for(source, "lore"))
    target = _target(source, postgres_url)
    new = Store(database_for(target, "lore"))
    assert new.changes_since(0) == old.changes_since(0)
    assert new.get_meta("store_id") == old.get_meta("store_id")
    assert new.all_row_ids() == old.all_row_ids() == [1, 2]
    new.replace_document(SourceDocument("c", "c.md", "c", "C", {}), _chunks("c", 1))
    assert new.all_row_ids() == [1, 2, 4]
    assert new.changes_since(4)[0].seq == 5
    old.close()
    assert [k.name for k in KeyStore(database_for(target, "keys")).list()] == ["k"]
    assert ReplyCache(database_for(target, "llm-cache")).get("p1") == '{"ok": 1}'


def test_a_non_empty_target_is_refused_and_nothing_is_written(
    tmp_path: Path, postgres_url: str
) -> None:
    source = _source(tmp_path)
    KeyStore(database_for(_target(source, postgres_url), "keys")).create([], admin=True)
    with pytest.raises(NonEmptyTargetError, match=r"lore_keys\.api_keys.*Nothing was written"):
        migrate(source, postgres_url)
    with psycopg.connect(postgres_url) as conn:
        schemas = {r[0] for r in conn.execute("SELECT nspname FROM pg_namespace")}
        (keys,) = conn.execute("SELECT COUNT(*) FROM lore_keys.api_keys").fetchone()
    assert "lore_lore" not in schemas and "lore_llm_cache" not in schemas and keys == 1


def test_a_store_opened_on_the_target_but_empty_is_filled(
    tmp_path: Path, postgres_url: str
) -> None:
    source = _source(tmp_path)
    opened = Store(database_for(_target(source, postgres_url), "lore"))  # a server started early
    assert opened.get_meta("store_id") is not None
    assert migrate(source, postgres_url).ok
    old = Store(database_for(source, "lore"))
    assert opened.get_meta("store_id") == old.get_meta("store_id")
    assert [d.id for d in opened.list_documents()] == ["a"]
    old.close()


def test_wrong_urls_and_empty_sources_are_clear_errors(tmp_path: Path) -> None:
    source = _source(tmp_path)
    with pytest.raises(ConfigurationError, match="needs a postgresql:// URL"):
        migrate(source, "sqlite:///x.db")
    with pytest.raises(BackendUnavailableError, match="cannot reach PostgreSQL"):
        migrate(source, "postgresql://postgres@127.0.0.1:1/nowhere")
    with pytest.raises(StorageError, match="nothing to migrate"):
        migrate(load_settings(data_dir=tmp_path / "empty"), "postgresql://postgres@127.0.0.1/x")
