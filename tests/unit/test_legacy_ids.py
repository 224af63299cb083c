"""A store made when ids were relative to the working directory adopts root-relative ids.

The older store is made as the loader of that time made it: ids (and sources) are the
files' paths relative to the directory ``lore ingest`` ran in, the path metadata
relative to the directory given; it is then opened as an older store is (no
``document_ids`` mark in its meta).
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from app.runtime import Runtime
from ingest.loaders import load_paths
from lore.embedders import LocalEmbedder
from lore.models import SourceDocument
from lore.store import IDS_KEY
from retrieval.contract import QueryRequest
from tests import ops
from tests.conftest import CORPUS, make_runtime


def older_ids(root: Path, cwd: Path) -> list[SourceDocument]:
    """``root``'s documents as the loader before issue 26 named them, run from ``cwd``."""
    out = []
    for item in load_paths([root], include=["*"], exclude=[], max_bytes=10**7):
        assert isinstance(item, SourceDocument)
        file_id = (root / item.source.split("/", 1)[1]).relative_to(cwd).as_posix()
        sep = ".jsonl#" in file_id
        legacy = SourceDocument(
            file_id if not sep else item.id, file_id, item.text, item.title, item.metadata
        )
        out.append(legacy)
    return out


def made_before(data: Path, embedder: LocalEmbedder, docs: list[SourceDocument]) -> None:
    runtime = make_runtime(data, embedder)
    assert not ops.ingest(runtime, docs).failed
    runtime.close()
    with sqlite3.connect(data / "lore.sqlite3") as db:  # as a store of that time: no mark
        db.execute("DELETE FROM meta WHERE key = ?", (IDS_KEY,))


def chunk_rows(runtime: Runtime) -> dict[str, list[int]]:
    return {
        d.id: [c.rowid for c in runtime.store.chunks_of_document(d.id)]
        for d in runtime.store.list_documents()
    }


def test_reingesting_a_root_renames_older_documents_without_embedding_again(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    home = tmp_path / "home"
    shutil.copytree(CORPUS / "staging", home / "corpus" / "staging")
    shutil.copytree(CORPUS / "production", home / "corpus" / "production")
    staging = home / "corpus" / "staging"
    made_before(tmp_path / "data", local_embedder, older_ids(staging, home))
    runtime = make_runtime(tmp_path / "data", local_embedder)
    assert runtime.store.get_meta(IDS_KEY) == "legacy"
    before = chunk_rows(runtime)
    assert "corpus/staging/ledger-db/runbook-failover.md" in before
    graph_before = runtime.graph().extracted_chunks()
    old_edited = {
        c.id
        for c in runtime.store.chunks_of_document("corpus/staging/ledger-db/service-overview.md")
    }
    held = runtime.store.chunks_of_document("corpus/staging/ledger-db/runbook-failover.md")[0]
    runtime.quarantine().add(held.id, held.document_id, "llm:test", "a reply that never parsed")
    edited = staging / "ledger-db" / "service-overview.md"
    edited.write_text(edited.read_text() + "\n\nA new line about E_EDITED_9.\n")

    report = ops.ingest_paths(runtime, [staging])
    after = chunk_rows(runtime)
    assert report.done == ["staging/ledger-db/service-overview.md"]  # the edited one only
    assert len(report.unchanged) == len(before) - 1 and report.failed == []
    assert report.embedded < 5  # the edit's chunks alone; the rest kept their vectors
    assert sorted(after) == sorted("staging/" + d.split("corpus/staging/", 1)[1] for d in before)
    kept = "staging/ledger-db/runbook-failover.md"
    assert after[kept] == before["corpus/staging/ledger-db/runbook-failover.md"]  # same rows
    (entry,) = runtime.quarantine().entries()
    assert (entry.chunk_id, entry.document_id) == (held.id, kept)  # it follows the rename
    assert graph_before and runtime.graph().extracted_chunks() >= graph_before - old_edited
    hit = runtime.queries().query_sync(QueryRequest(search_text="E_EDITED_9", top_k=1)).results[0]
    assert hit.document_id == "staging/ledger-db/service-overview.md"
    assert ops.ingest_paths(runtime, [staging]).done == []  # idempotent from then on

    other = ops.ingest_paths(runtime, [home / "corpus" / "production"])  # never stored before
    assert len(other.done) == 36 and "production/checkout-web/status-page.html" in other.done
    runtime.close()


def test_a_file_stored_twice_under_older_ids_is_not_guessed(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    root = tmp_path / "home" / "notes"
    root.mkdir(parents=True)
    (root / "a.md").write_text("# A\n\nThe kestrel-gateway note.\n")
    from_home = older_ids(root, tmp_path / "home")  # notes/a.md
    from_tmp = older_ids(root, tmp_path)  # home/notes/a.md
    made_before(tmp_path / "data", local_embedder, [*from_home, *from_tmp])
    runtime = make_runtime(tmp_path / "data", local_embedder)
    (root / "a.md").write_text("# A\n\nThe kestrel-gateway note, edited.\n")
    report = ops.ingest_paths(runtime, [root])
    ids = sorted(d.id for d in runtime.store.list_documents())
    assert report.done == ["notes/a.md"]
    assert ids == ["home/notes/a.md", "notes/a.md"]  # "notes/a.md" is the new one
    assert runtime.store.get_document("notes/a.md").source == "notes/a.md"  # type: ignore[union-attr]
    runtime.close()


def test_older_json_lines_records_keep_their_ids_and_take_the_new_source(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    home = tmp_path / "home"
    (home / "corpus").mkdir(parents=True)
    shutil.copy(CORPUS / "production" / "alert-catalog.jsonl", home / "corpus")
    older = older_ids(home / "corpus", home)
    assert older[0].source == "corpus/alert-catalog.jsonl#alert-001"
    made_before(tmp_path / "data", local_embedder, older)
    runtime = make_runtime(tmp_path / "data", local_embedder)
    before = chunk_rows(runtime)
    report = ops.ingest_paths(runtime, [home / "corpus"], label="alerts")
    assert report.done == [] and report.embedded == 0 and len(report.unchanged) == len(before)
    assert chunk_rows(runtime) == before  # same ids, same chunk rows
    stored = runtime.store.get_document("alert-001")
    assert stored is not None and stored.source == "alerts/alert-catalog.jsonl#alert-001"
    runtime.close()


def test_a_bare_older_name_is_renamed_only_when_its_content_is_the_files(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    root = tmp_path / "notes"
    root.mkdir()
    (root / "a.md").write_text("# A\n\nThe osprey-cache note.\n")
    (root / "b.md").write_text("# B\n\nThe heron-queue note.\n")
    made_before(tmp_path / "data", local_embedder, older_ids(root, root))  # a.md, b.md
    runtime = make_runtime(tmp_path / "data", local_embedder)
    (root / "b.md").write_text("# B\n\nA different heron-queue note.\n")  # any root's b.md?
    report = ops.ingest_paths(runtime, [root])
    assert report.unchanged == ["notes/a.md"] and report.done == ["notes/b.md"]
    ids = sorted(d.id for d in runtime.store.list_documents())
    assert ids == ["b.md", "notes/a.md", "notes/b.md"]  # the older b.md is not taken over
    runtime.close()
