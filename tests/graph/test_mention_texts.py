"""Issue 31: a chunk's mention descriptions are stored once each, on both engines."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from graph.models import EntityMention, RelationMention
from graph.stores.local import LocalGraphStore
from tests.tables import tables_at

SENTENCE = "Kubelet and Etcd and Apiserver failed together at dawn."


def _count(graph: LocalGraphStore, table: str) -> int:
    with graph.database.read() as db:
        return int(db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])


def test_a_chunks_descriptions_are_stored_once_and_read_back(
    store_url: str | None, tmp_path: Path
) -> None:
    graph = LocalGraphStore(tables_at(store_url, tmp_path / "lore.sqlite3"))
    names = ("Kubelet", "Etcd", "Apiserver")
    entities = [EntityMention(n, "service", SENTENCE) for n in names]
    relations = [
        RelationMention(a, b, 1.0, "mentioned in Node Down")
        for a, b in (("Kubelet", "Etcd"), ("Etcd", "Apiserver"), ("Kubelet", "Apiserver"))
    ]
    graph.put_chunk("c1", "d1", [*entities, EntityMention("Quiet", "thing", "")], relations)
    graph.put_chunk("c2", "d2", [EntityMention("Kubelet", "service", "Kubelet restarts.")], [])
    assert _count(graph, "mention_texts") == 3  # 4 + 3 mentions, 3 distinct texts
    kubelet = graph.entity("kubelet")
    assert kubelet is not None and SENTENCE in kubelet.description
    assert "Kubelet restarts." in kubelet.description
    quiet = graph.entity("quiet")
    assert quiet is not None and quiet.description == ""
    found = graph.relations_among(["kubelet", "etcd", "apiserver"])
    assert len(found) == 3 and {r.description for r in found} == {"mentioned in Node Down"}
    graph.put_chunk("c1", "d1", [EntityMention("Etcd", "service", "Etcd alone.")], [])
    assert _count(graph, "mention_texts") == 2  # c1's old texts replaced
    graph.remove_chunks(["c1", "c2"])
    assert _count(graph, "mention_texts") == 0 and graph.entity("etcd") is None
    graph.close()


def test_a_graph_from_before_keeps_its_descriptions(tmp_path: Path) -> None:
    path = tmp_path / "lore.sqlite3"
    old = sqlite3.connect(path)
    with old:
        old.execute(
            "CREATE TABLE entity_mentions (entity_key TEXT NOT NULL, chunk_id TEXT NOT NULL, "
            "document_id TEXT NOT NULL, name TEXT NOT NULL, type TEXT NOT NULL, "
            "description TEXT NOT NULL, count INTEGER NOT NULL, PRIMARY KEY (entity_key, chunk_id))"
        )
        old.execute(
            "CREATE TABLE relation_mentions (source_key TEXT NOT NULL, target_key TEXT NOT NULL, "
            "chunk_id TEXT NOT NULL, weight REAL NOT NULL, description TEXT NOT NULL, "
            "PRIMARY KEY (source_key, target_key, chunk_id))"
        )
        old.execute(
            "INSERT INTO entity_mentions VALUES ('etcd', 'c0', 'd0', 'Etcd', 'db', 'Old etcd.', 1)"
        )
        old.execute("INSERT INTO relation_mentions VALUES ('etcd', 'kubelet', 'c0', 2.0, 'old')")
    old.close()
    graph = LocalGraphStore(path)
    graph.put_chunk("c1", "d1", [EntityMention("Etcd", "db", "New etcd.")], [])
    etcd = graph.entity("etcd")
    assert etcd is not None and etcd.chunk_ids == ("c0", "c1")
    assert "Old etcd." in etcd.description and "New etcd." in etcd.description
    assert [r.description for r in graph.relations_among(["etcd", "kubelet"])] == ["old"]
    graph.close()
