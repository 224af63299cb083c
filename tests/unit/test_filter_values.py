"""Case-insensitive values, ``$eq_case``, ``$prefix`` and hints, against a real store."""

from pathlib import Path

import numpy as np
import pytest

from ingest.resolve import resolve_document_id
from lore.errors import FilterError, InvalidRequestError, NotFoundError
from lore.models import SourceDocument
from lore.store import NewChunk, Store
from retrieval.filters import Condition, empty_result_hints, parse_filter, resolve_values


def _put(store: Store, doc_id: str, source: str, meta: dict[str, object]) -> None:
    vector = np.ones(4, dtype=np.float32)
    chunk = NewChunk(f"{doc_id}-0", 0, "text", "", 1, f"h-{doc_id}", vector)
    store.replace_document(SourceDocument(doc_id, source, "text", "", meta), [chunk])  # type: ignore[arg-type]


@pytest.fixture
def store(tmp_path: Path) -> Store:
    store = Store(tmp_path / "s.sqlite3")
    _put(store, "a", "docs/a.md", {"service": "PostgreSQL", "dir": "alerts/etcd"})
    _put(store, "b", "docs/b.md", {"service": "postgresql-exporter", "dir": "alerts/pg"})
    _put(store, "c", "docs/c.md", {"service": "Ledger", "dir": "Guides", "tags": ["Blue", "x"]})
    return store


def _rows(store: Store, raw: dict[str, object]) -> tuple[set[str], list[str]]:
    clauses = parse_filter(raw, store.metadata_keys())
    exact, hints = resolve_values(clauses, store.metadata_values)
    docs = set(store.document_ids_of(sorted(store.row_ids_matching(exact))).values())
    return docs, hints


def test_strings_match_case_insensitively_by_default(store: Store) -> None:
    assert _rows(store, {"service": "postgresql"}) == ({"a"}, [])
    assert _rows(store, {"service": {"$in": ["LEDGER", "nope"]}}) == ({"c"}, [])
    assert _rows(store, {"tags": "blue"}) == ({"c"}, [])  # list elements too


def test_eq_case_is_exact(store: Store) -> None:
    assert _rows(store, {"service": {"$eq_case": "PostgreSQL"}})[0] == {"a"}
    docs, hints = _rows(store, {"service": {"$eq_case": "postgresql"}})
    assert docs == set() and "PostgreSQL" in hints[0] and "exactly" in hints[0]


def test_prefix_matches_starts_case_insensitively(store: Store) -> None:
    assert _rows(store, {"dir": {"$prefix": "alerts/"}})[0] == {"a", "b"}
    assert _rows(store, {"dir": {"$prefix": "guides"}})[0] == {"c"}
    docs, hints = _rows(store, {"dir": {"$prefix": "alert/"}})
    assert docs == set() and "starting with 'alert/'" in hints[0] and "alerts/etcd" in hints[0]
    with pytest.raises(FilterError, match="non-empty"):
        parse_filter({"dir": {"$prefix": ""}}, {"dir"})


def test_wrong_value_hint_lists_nearest_known_values(store: Store) -> None:
    docs, hints = _rows(store, {"service": "postgress"})
    assert docs == set()
    assert hints == [
        "no document has 'service' equal to 'postgress'; nearest known values of 'service': "
        "PostgreSQL, postgresql-exporter (3 known)"
    ]
    far = _rows(store, {"service": "zzzz"})[1][0]
    assert "Ledger, PostgreSQL, postgresql-exporter" in far  # nothing close: some known ones


def test_conditions_that_never_meet_say_so(store: Store) -> None:
    clauses = parse_filter({"service": "ledger", "dir": "alerts/etcd"}, store.metadata_keys())
    exact, hints = resolve_values(clauses, store.metadata_values)
    assert hints == [] and store.row_ids_matching(exact) == set()
    (message,) = empty_result_hints(clauses, hints)
    assert "dir=alerts/etcd" in message and "service=ledger" in message


def test_conditions_compare_like_their_values() -> None:
    assert Condition(("a",)) == ("a",)
    assert Condition(("a",), "eq_case") != ("a",)
    assert Condition(("a",), "prefix") != Condition(("a",))
    assert len({Condition(("a",)), Condition(("a",), "prefix")}) == 2


def test_many_values_are_matched_in_batches(tmp_path: Path) -> None:
    store = Store(tmp_path / "many.sqlite3")
    for i in range(1200):
        _put(store, f"d{i}", f"src/{i}.md", {"path": f"src/{i:04d}.md"})
    _put(store, "other", "other.md", {"path": "docs/x.md"})
    docs, _ = _rows(store, {"path": {"$prefix": "SRC/"}})
    assert len(docs) == 1200 and "other" not in docs


def test_resolve_document_id_by_id_source_and_path(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _put(store, "rec-1", "data/records.jsonl#rec-1", {})
    _put(store, "up", "upload:notes.md", {})
    assert resolve_document_id(store, "a") == "a"
    assert resolve_document_id(store, "data/records.jsonl#rec-1") == "rec-1"
    assert resolve_document_id(store, "upload:notes.md") == "up"
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "records.jsonl").write_text("{}\n")
    assert resolve_document_id(store, "./data/records.jsonl#rec-1") == "rec-1"
    _put(store, "data/x.md", "data/x.md", {})
    (tmp_path / "data" / "x.md").write_text("x")
    assert resolve_document_id(store, "./data/../data/x.md") == "data/x.md"
    with pytest.raises(NotFoundError, match="not a document id, a source or a path"):
        resolve_document_id(store, "data/records.jsonl#rec-9")
    _put(store, "up2", "upload:notes.md", {})
    with pytest.raises(InvalidRequestError, match="source of 2 documents"):
        resolve_document_id(store, "upload:notes.md")
