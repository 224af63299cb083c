"""Document ids relative to their ingest root, the same from any working directory."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from ingest.loaders import document_id_for, load_paths
from ingest.resolve import resolve_document_id
from ingest.roots import (
    check_label,
    file_of,
    known_roots,
    locate,
    plain_target,
    plan_targets,
    record_roots,
)
from lore.errors import InvalidRequestError
from lore.models import SourceDocument
from lore.store import Store


def tree(root: Path) -> Path:
    (root / "alerts").mkdir(parents=True)
    (root / "alerts" / "x.md").write_text("# X\n\nBody of x.\n")
    (root / "top.txt").write_text("top level")
    (root / "cat.jsonl").write_text('{"id": "r1", "text": "one"}\n')
    return root


def ids(paths: list[Path], label: str | None = None) -> dict[str, str]:
    targets, _ = plan_targets(paths, label, {})
    items = load_paths(targets, include=["*"], exclude=[], max_bytes=10_000)
    return {i.id: i.source for i in items}


def test_ids_are_label_slash_path_relative_to_the_root(tmp_path: Path) -> None:
    prod = tree(tmp_path / "corpus" / "production")
    assert ids([prod]) == {
        "production/alerts/x.md": "production/alerts/x.md",
        "r1": "production/cat.jsonl#r1",  # a record keeps its own id
        "production/top.txt": "production/top.txt",
    }
    assert set(ids([prod], "live")) == {"live/alerts/x.md", "r1", "live/top.txt"}
    assert document_id_for(prod / "alerts" / "x.md") == "alerts/x.md"  # its own directory
    assert document_id_for(prod / "top.txt", "notes") == "notes/top.txt"


def test_the_working_directory_does_not_matter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prod = tree(tmp_path / "corpus" / "production")
    seen = []
    for cwd in (tmp_path, prod / "alerts", Path("/")):
        monkeypatch.chdir(cwd)
        given = Path(os.path.relpath(prod, cwd)) if cwd != Path("/") else prod
        seen.append(ids([given]))
    monkeypatch.chdir(prod)
    seen.append(ids([Path(".")]))  # "." is the directory it resolves to
    assert all(s == seen[0] for s in seen) and "production/top.txt" in seen[0]


def test_labels_are_checked() -> None:
    assert check_label("team/docs") == "team/docs"
    for bad in ("", " ", "/x", "x/", "a/../b", "..", "a//b", "a#b", "a\nb", "./a"):
        with pytest.raises(InvalidRequestError, match="root label"):
            check_label(bad)
    with pytest.raises(InvalidRequestError, match=r"no name .* --as LABEL"):
        plain_target(Path("/"))
    assert plain_target(Path("/"), "disk").root.label == "disk"
    with pytest.raises(InvalidRequestError, match=r"the name of .*: choose one with --as"):
        plain_target(Path("/tmp/C#notes/x.md"))


def test_a_label_is_one_roots_and_paths_inside_a_root_keep_its_ids(tmp_path: Path) -> None:
    a, b = tree(tmp_path / "a" / "docs"), tree(tmp_path / "b" / "docs")
    store = Store(tmp_path / "store.sqlite3")
    _, added = plan_targets([a], None, known_roots(store))
    record_roots(store, added)
    assert known_roots(store) == {"docs": a.resolve()}
    with pytest.raises(InvalidRequestError) as refused:
        plan_targets([b], None, known_roots(store))
    message = str(refused.value)
    assert str(a.resolve()) in message and str(b.resolve()) in message and "--as" in message
    typo, added = plan_targets([tmp_path / "c" / "typo.md"], None, known_roots(store))
    assert added == {} and typo[0].id_of(typo[0].path) == "c/typo.md"  # no root for a typo
    again, added = plan_targets([a, a / "alerts", a / "alerts" / "x.md"], None, known_roots(store))
    assert added == {} and [t.prefix for t in again] == [
        "docs/",
        "docs/alerts/",
        "docs/alerts/x.md",
    ]
    other, added = plan_targets([b], "docs-b", known_roots(store))
    assert added == {"docs-b": b.resolve()} and other[0].id_of(b / "top.txt") == "docs-b/top.txt"
    with pytest.raises(InvalidRequestError, match="overlaps the label 'docs'"):
        plan_targets([b], "docs/b", known_roots(store))
    with pytest.raises(InvalidRequestError, match="already the root"):
        plan_targets([b], "docs", known_roots(store))  # --as an existing label elsewhere
    with pytest.raises(InvalidRequestError, match="stored as `docs/…`; ingest it without --as"):
        plan_targets([a / "alerts"], "alerts", known_roots(store))  # would store them twice


def test_a_root_inside_a_new_root_keeps_its_ids(tmp_path: Path) -> None:
    outer = tree(tmp_path / "outer")
    (outer / "inner").mkdir()
    (outer / "inner" / "n.md").write_text("nested")
    _, added = plan_targets([outer / "inner"], None, {})
    targets, _ = plan_targets([outer], None, added)
    items = load_paths(targets, include=["*"], exclude=[], max_bytes=10_000)
    assert "inner/n.md" in {i.id for i in items}  # not outer/inner/n.md: stored once


def test_a_moved_root_takes_its_label_along(tmp_path: Path) -> None:
    store = Store(tmp_path / "store.sqlite3")
    old = tree(tmp_path / "old" / "docs")
    record_roots(store, plan_targets([old], None, {})[1])
    old.rename(tmp_path / "gone")
    new = tree(tmp_path / "new" / "docs")
    _, added = plan_targets([new], None, known_roots(store))
    record_roots(store, added)
    assert known_roots(store) == {"docs": new.resolve()}


def test_ids_map_back_to_files_and_typed_paths_to_ids(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prod = tree(tmp_path / "production")
    roots = {"production": prod.resolve()}
    assert file_of("production/alerts/x.md", roots) == prod.resolve() / "alerts" / "x.md"
    assert file_of("staging/alerts/x.md", roots) is None
    assert locate(prod / "alerts" / "x.md", roots) == "production/alerts/x.md"
    assert locate(prod / "alerts", roots) == "production/alerts"
    store = Store(tmp_path / "store.sqlite3")
    record_roots(store, roots)
    doc = SourceDocument("production/alerts/x.md", "production/alerts/x.md", "x")
    store.replace_document(doc, [])
    monkeypatch.chdir(prod / "alerts")
    assert resolve_document_id(store, "x.md") == "production/alerts/x.md"
    assert resolve_document_id(store, "../alerts/./x.md") == "production/alerts/x.md"


def test_roots_and_renames_on_both_store_backends(tmp_path: Path, store_url: str | None) -> None:
    from lore.db import PostgresDatabase
    from lore.store import IDS_KEY, NewChunk

    def open_store() -> Store:
        return Store(PostgresDatabase(store_url, "lore") if store_url else tmp_path / "s.sqlite3")

    store = open_store()
    assert store.get_meta(IDS_KEY) == "rooted"  # made empty, after root-relative ids
    record_roots(store, {"docs": tmp_path / "docs"})
    assert store.claim_meta("root:docs", "/elsewhere") == str(tmp_path / "docs")
    assert known_roots(store) == {"docs": tmp_path / "docs"}
    vector = np.ones(4, dtype=np.float32)
    old = SourceDocument("old/a.md", "old/a.md", "text", "A", {"env": "x"})
    store.replace_document(old, [NewChunk("c0", 0, "text", "", 1, "h", vector)])
    rows = store.all_row_ids()
    new = SourceDocument("docs/a.md", "docs/a.md", "text", "A", {"env": "x"})
    assert not store.rename_document("old/a.md", new, "wrong-hash")
    assert store.rename_document("old/a.md", new, old.content_hash())
    assert store.get_document("old/a.md") is None
    renamed = store.get_document("docs/a.md")
    assert renamed is not None and renamed.content_hash == new.content_hash()
    assert [c.id for c in store.chunks_of_document("docs/a.md")] == ["c0"]
    assert store.all_row_ids() == rows and store.row_ids_matching({"env": ["x"]}) == set(rows)
    store.close()
    assert open_store().get_meta(IDS_KEY) == "rooted"  # a mark, set once
