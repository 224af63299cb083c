import sqlite3
from pathlib import Path

import numpy as np

from app.listing import list_documents, read_chunk, read_document
from lore.models import DocumentStatus, SourceDocument
from lore.store import NewChunk, Store


def _chunks(doc: str, texts: list[str]) -> list[NewChunk]:
    rng = np.random.default_rng(0)
    return [
        NewChunk(f"{doc}-{i}", i, t, f"H{i}", 3, f"h{t}", rng.random(4, dtype=np.float32))
        for i, t in enumerate(texts)
    ]


def test_a_document_reads_back_by_id_or_source(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.sqlite3")
    doc = SourceDocument("rec-1", "alerts.jsonl#rec-1", "alpha beta", "T", {"env": "prod"})
    store.replace_document(doc, _chunks("rec-1", ["alpha", "beta"]))
    by_id = read_document(store, "rec-1", text=True, chunks=True)
    by_source = read_document(store, "alerts.jsonl#rec-1", text=True)
    assert by_id is not None and by_source is not None
    assert by_id.text == by_source.text == "alpha beta" and not by_id.text_reconstructed
    assert [c.heading for c in by_id.chunks or []] == ["H0", "H1"] and by_source.chunks is None
    assert read_document(store, "nope") is None
    chunk = read_chunk(store, "rec-1-1")
    assert chunk is not None and chunk.text == "beta" and chunk.source == "alerts.jsonl#rec-1"
    assert read_chunk(store, "rec-1-9") is None
    store.close()


def test_a_store_from_before_texts_were_kept_gets_the_column_and_joined_chunks(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.sqlite3"
    store = Store(path)
    store.replace_document(SourceDocument("d", "d.md", "x"), _chunks("d", ["one", "two"]))
    store.close()
    db = sqlite3.connect(path)  # the documents table as it was: no text column
    with db:
        db.execute("ALTER TABLE documents DROP COLUMN text")
    db.close()
    reopened = Store(path)
    view = read_document(reopened, "d", text=True)
    assert view is not None and view.text == "one\n\ntwo" and view.text_reconstructed
    reopened.replace_document(SourceDocument("d", "d.md", "fresh"), _chunks("d", ["fresh"]))
    again = read_document(reopened, "d", text=True)
    assert again is not None and again.text == "fresh" and not again.text_reconstructed
    reopened.close()


def test_pages_filter_by_status_prefix_and_allowed_rows(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.sqlite3")
    for i in range(5):
        doc = SourceDocument(f"docs/{i}.md", f"docs/{i}.md", f"t{i}")
        store.replace_document(doc, _chunks(f"docs/{i}", [f"t{i}"]))
    store.mark_failed("bad.md", "bad.md", "document is empty")
    page = list_documents(store, limit=2, offset=1)
    assert page.total == 6 and [d.id for d in page.documents] == ["docs/0.md", "docs/1.md"]
    failed = list_documents(store, status=DocumentStatus.FAILED)
    assert [(d.id, d.error) for d in failed.documents] == [("bad.md", "document is empty")]
    assert list_documents(store, prefix="docs/").total == 5
    rows = store.row_ids_of_chunk_ids(["docs/3-0"])
    allowed = list_documents(store, allowed_rows=set(rows.values()))
    assert [d.id for d in allowed.documents] == ["docs/3.md"]
    assert list_documents(store, allowed_rows=set()).total == 0
    store.close()
