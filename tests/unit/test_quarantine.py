"""The quarantine table on both engines: added, replaced, listed, released."""

from pathlib import Path

from graph.quarantine import Quarantine
from tests.tables import tables_at


def test_entries_are_replaced_listed_and_released(store_url: str | None, tmp_path: Path) -> None:
    held = Quarantine(tables_at(store_url, tmp_path / "lore.sqlite3"))
    assert held.chunk_ids() == set() and held.entries() == []
    held.add("c2", "d1", "offline", "no key")
    held.add("c1", "d2", "llm", "invalid reply")
    held.add("c0", "d1", "llm", "timeout")
    held.add("c2", "d1", "llm", "a later reason")  # replaces the first
    entries = held.entries()
    assert [(e.document_id, e.chunk_id) for e in entries] == [
        ("d1", "c0"),
        ("d1", "c2"),
        ("d2", "c1"),
    ]
    assert entries[1].reason == "a later reason" and entries[1].extractor == "llm"
    assert entries[1].at > 0
    assert held.chunk_ids() == {"c0", "c1", "c2"}
    assert held.release(["c0", "never-held"]) == 1
    assert held.release([]) == 0
    assert held.release() == 2 and held.entries() == []
    held.close()
