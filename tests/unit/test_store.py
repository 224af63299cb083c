"""The document store, the same tests against SQLite and PostgreSQL (``store_url``)."""

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from lore.db import open_database
from lore.errors import EmbeddingMismatchError, InvalidRequestError, NotFoundError
from lore.models import DocumentStatus, SourceDocument
from lore.store import NewChunk, Store


def _chunks(doc: str, texts: list[str]) -> list[NewChunk]:
    rng = np.random.default_rng(0)
    return [
        NewChunk(f"{doc}-{i}", i, t, "", 3, f"h{t}", rng.random(4, dtype=np.float32))
        for i, t in enumerate(texts)
    ]


@pytest.fixture
def store(tmp_path: Path, store_url: str | None) -> Iterator[Store]:
    opened = Store(open_database(store_url, tmp_path, "lore"))
    yield opened
    opened.close()


def test_replace_is_atomic_and_logged(store: Store) -> None:
    doc = SourceDocument("d", "d.md", "text", "T", {"env": "prod"})
    store.replace_document(doc, _chunks("d", ["a", "b"]))
    first = store.all_row_ids()
    store.replace_document(doc, _chunks("d2", ["c"]))
    assert len(store.all_row_ids()) == 1
    assert store.all_row_ids()[0] > max(first)  # row ids are never reused
    ops = [(c.op, c.row_id) for c in store.changes_since(0)]
    assert ops[:2] == [("upsert", first[0]), ("upsert", first[1])]
    assert ("delete", first[0]) in ops and ops[-1][0] == "upsert"
    info = store.get_document("d")
    assert info is not None and info.status is DocumentStatus.DONE and info.chunk_count == 1


def test_failed_update_keeps_previous_version(store: Store) -> None:
    doc = SourceDocument("d", "d.md", "text", "T", {})
    store.replace_document(doc, _chunks("d", ["a"]))
    store.mark_failed("d", "d.md", "boom")
    info = store.get_document("d")  # issue 31: still done, the attempt recorded apart
    assert info is not None and info.status is DocumentStatus.DONE and info.error is None
    ((doc_id, _, reason, _),) = store.rejected_replacements()
    assert doc_id == "d" and "boom" in reason and "previous version" in reason
    assert len(store.chunks_of_document("d")) == 1


def test_delete_and_missing(store: Store) -> None:
    store.replace_document(SourceDocument("d", "d.md", "t", "", {}), _chunks("d", ["a", "b"]))
    assert store.delete_document("d") == 2
    assert store.all_row_ids() == []
    with pytest.raises(NotFoundError):
        store.delete_document("d")


def test_metadata_matching(store: Store) -> None:
    store.replace_document(
        SourceDocument("p", "p", "t", "", {"env": "prod", "n": 3}), _chunks("p", ["a"])
    )
    store.replace_document(
        SourceDocument("s", "s", "t", "", {"env": "stage", "tags": ["x", "y"]}), _chunks("s", ["b"])
    )
    prod, stage = store.all_row_ids()
    assert store.metadata_keys() == {"env", "n", "tags"}
    assert store.row_ids_matching({"env": ("prod",)}) == {prod}
    assert store.row_ids_matching({"env": ("prod", "stage")}) == {prod, stage}
    assert store.row_ids_matching({"n": ("3",), "env": ("prod",)}) == {prod}
    assert store.row_ids_matching({"tags": ("y",)}) == {stage}
    assert store.row_ids_matching({"env": ("none",)}) == set()


def test_embedder_binding(store: Store) -> None:
    store.bind_embedder("m", 4)
    store.bind_embedder("m", 4)
    with pytest.raises(EmbeddingMismatchError, match="'m'"):
        store.bind_embedder("other", 8)


def test_writers_binding_a_new_store_at_once_all_succeed(
    tmp_path: Path, store_url: str | None
) -> None:
    """Two workers' first batches on a new PostgreSQL store bind the embedder at once."""
    database = open_database(store_url, tmp_path, "lore")
    store = Store(database)
    for _ in range(40):  # the race is on the first binding: each round starts unbound
        with database.write() as db:
            db.execute("DELETE FROM meta WHERE key IN ('embedding_model', 'embedding_dim')")
        start = threading.Barrier(4)

        def bind(start: threading.Barrier = start) -> None:
            start.wait()
            store.bind_embedder("m", 4)

        with ThreadPoolExecutor(4) as pool:
            for done in [pool.submit(bind) for _ in range(4)]:
                done.result()  # the losers compare with the winner's pair, no error
        assert (store.get_meta("embedding_model"), store.get_meta("embedding_dim")) == ("m", "4")
    with pytest.raises(EmbeddingMismatchError):
        store.bind_embedder("m", 8)
    store.close()


def test_meta_is_kept_and_replaced(store: Store, tmp_path: Path, store_url: str | None) -> None:
    store_id = store.get_meta("store_id")
    assert store_id and store.get_meta("schema_version") == "1"
    store.set_meta("k", "1")
    store.set_meta("k", "2")
    assert store.get_meta("k") == "2" and store.get_meta("missing") is None
    again = Store(open_database(store_url, tmp_path, "lore"))  # a second open keeps the id
    assert again.get_meta("store_id") == store_id
    again.close()


def test_pages_prefixes_and_failures(store: Store) -> None:
    for name in ("a/1", "a/2", "b/1"):
        store.replace_document(
            SourceDocument(name, f"{name}.md", "t", "", {}), _chunks(name, ["x"])
        )
    store.mark_failed("a/3", "a/3.md", "boom", metadata={"k": "v"})
    store.mark_skipped("a/4", "a/4.md", "empty")
    total, page = store.page_documents(prefix="a/", limit=2, offset=1)
    assert total == 4 and [d.id for d in page] == ["a/2", "a/3"]
    total, page = store.page_documents(status=DocumentStatus.DONE, among={"a/2", "b/1", "zz"})
    assert total == 2 and [d.id for d in page] == ["a/2", "b/1"]
    many = {f"n{i}" for i in range(1200)} | {"b/1"}  # more than one IN-list batch
    assert store.page_documents(among=many, limit=5) == (1, [store.get_document("b/1")])
    assert store.clear_failures("a/") == 2
    assert [d.id for d in store.list_documents()] == ["a/1", "a/2", "b/1"]
    assert store.resolve_document_id("a/1.md") == "a/1"
    assert store.resolve_document_id("b/1") == "b/1" and store.resolve_document_id("?") is None
    assert store.counts() == {"documents_done": 3, "chunks": 3, "last_seq": 3}
    # a source two documents share names neither: the error lists both, nothing is guessed
    store.replace_document(SourceDocument("c/1", "a/1.md", "t", "", {}), _chunks("c/1", ["y"]))
    with pytest.raises(InvalidRequestError, match=r"source of 2 documents \(a/1, c/1\)"):
        store.resolve_document_id("a/1.md")
    assert store.resolve_document_id("c/1") == "c/1"  # an id still names its document


def test_texts_vectors_and_lookups(store: Store) -> None:
    chunks = _chunks("d", [f"t{i}" for i in range(700)])
    doc = SourceDocument("d", "d.md", "the text", "Title", {"env": "prod"})
    assert store.replace_document(doc, chunks)
    assert not store.replace_document(doc, chunks, skip_if_stored=True)
    assert store.document_text("d") == "the text"
    rows = store.all_row_ids()
    assert len(store.chunks_by_row_ids(rows)) == 700
    assert set(store.document_ids_of(rows).values()) == {"d"}
    by_id = store.row_ids_of_chunk_ids([c.id for c in chunks])
    assert sorted(by_id.values()) == rows
    assert store.texts_by_chunk_ids(["d-5", "nope"]) == {"d-5": "t5"}
    index_rows = store.index_rows(rows[:2])
    assert index_rows[0].text == "Title\nt0" and ("env", "prod") in index_rows[0].terms
    np.testing.assert_array_equal(index_rows[0].embedding, chunks[0].embedding)
    reused = store.reusable("d")
    np.testing.assert_array_equal(reused.vectors["ht1"], chunks[1].embedding)
    assert reused.ids[(1, "ht1")] == "d-1"
    assert store.titled_chunks()[0] == ("d-0", "d", "Title")
    assert store.metadata_values("env") == ["prod"]
    assert store.row_ids_matching({"env": (*[f"v{i}" for i in range(600)], "prod")}) == set(rows)


def test_a_new_sqlite_file_has_8k_pages_an_old_one_keeps_its_own(tmp_path: Path) -> None:
    import sqlite3

    from lore.db import PAGE_SIZE, connect_sqlite

    fresh = connect_sqlite(tmp_path / "new.sqlite3")
    fresh.execute("CREATE TABLE t (x)")
    assert fresh.execute("PRAGMA page_size").fetchone()[0] == PAGE_SIZE == 8192
    fresh.close()
    old = sqlite3.connect(tmp_path / "old.sqlite3")
    old.execute("PRAGMA page_size=4096")
    old.execute("CREATE TABLE t (x)")
    old.close()
    again = connect_sqlite(tmp_path / "old.sqlite3")
    assert again.execute("PRAGMA page_size").fetchone()[0] == 4096
    assert again.execute("SELECT COUNT(*) FROM t").fetchone()[0] == 0
    again.close()
