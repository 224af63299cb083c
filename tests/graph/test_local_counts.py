"""The embedded graph's counts are cached, but never stale.

Not even after another connection (a worker process) writes to the same file or schema.
"""

from pathlib import Path

from graph.models import EntityMention
from graph.stores.local import LocalGraphStore
from tests.tables import another_process, tables_at


def test_counts_follow_writes_from_this_and_other_connections(
    store_url: str | None, tmp_path: Path
) -> None:
    with another_process(store_url, tmp_path / "g.sqlite3") as elsewhere:
        _counts_follow_writes(
            LocalGraphStore(tables_at(store_url, tmp_path / "g.sqlite3")),
            LocalGraphStore(elsewhere),
        )


def _counts_follow_writes(mine: LocalGraphStore, other: LocalGraphStore) -> None:
    assert mine.counts()["entities"] == 0
    mine.put_chunk("c1", "d1", [EntityMention("a-svc", "service", "")], [])
    assert mine.counts()["entities"] == 1 and mine.counts()["extracted_chunks"] == 1
    other.put_chunk("c2", "d2", [EntityMention("b-svc", "service", "")], [])
    assert mine.counts()["entities"] == 2
    other.remove_chunks(["c1", "c2"])
    assert (
        mine.counts()
        == other.counts()
        == {
            "entities": 0,
            "relations": 0,
            "communities": 0,
            "extracted_chunks": 0,
        }
    )
    mine.close()
    other.close()
