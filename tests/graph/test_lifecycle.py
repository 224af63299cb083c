"""Forgetting chunks: the graph cascade of a deletion or change, on every backend.

The removal goes through the GraphStore protocol only, so it runs on the embedded store
and on Neo4j (``NEO4J_URI``; skipped without it, as in the store contract suite).
"""

from __future__ import annotations

import json
from pathlib import Path

from graph.cascade import forget_chunks
from graph.lifecycle import remove_contributions
from graph.models import EntityMention
from graph.quarantine import Quarantine
from graph.refresh import Summarizer, plan_refresh, run_plan
from graph.reports import ExtractiveWriter
from graph.store import GraphStore
from tests.graph.test_graph_store_contract import backend, mention, rel, store  # noqa: F401
from tests.tables import tables_at

TEXTS = {
    "chunk-one": "The payments-api raised PAY-5031 when the ledger-db pool was exhausted.",
    "c2": "The payments-api talks to ledger-db through the pool.",
    "c3": "The ledger-db replica lags behind the primary at night.",
}


def _fill(store: GraphStore) -> None:  # noqa: F811
    store.put_chunk(
        "chunk-one",
        "d1",
        [mention("payments-api"), mention("PAY-5031", "error"), mention("ledger-db")],
        [rel("payments-api", "PAY-5031"), rel("PAY-5031", "ledger-db")],
    )
    store.put_chunk(
        "c2",
        "d2",
        [mention("payments-api"), mention("ledger-db")],
        [rel("payments-api", "ledger-db", 2.0)],
    )
    store.put_chunk(
        "c3", "d3", [mention("ledger-db"), mention("replica")], [rel("ledger-db", "replica")]
    )


def test_removal_takes_what_only_those_chunks_supported(store: GraphStore) -> None:  # noqa: F811
    _fill(store)
    removal = remove_contributions(store, ["chunk-one", "never-extracted"])
    assert removal.chunks == 1
    assert removal.entity_mentions == 3 and removal.relation_mentions == 2
    assert removal.entities == ["pay-5031"]
    assert removal.relations == [("ledger-db", "pay-5031"), ("pay-5031", "payments-api")]
    assert removal.changed_entities == ["ledger-db", "payments-api"]
    assert store.entity("PAY-5031") is None
    kept = store.entity("payments-api")
    assert kept is not None and kept.chunk_ids == ("c2",)
    assert "pay-5031" not in json.dumps(store.edges())
    assert [(r.source, r.target) for r in store.relations_among(["payments-api", "ledger-db"])] == [
        ("ledger-db", "payments-api")
    ]
    assert store.extracted_chunks() == {"c2", "c3"}
    assert {"pay-5031", "payments-api", "ledger-db"} <= store.touched_entities()
    assert remove_contributions(store, ["chunk-one"]).chunks == 0  # idempotent


def test_descriptions_of_a_removed_chunk_leave_the_merged_entity(
    store: GraphStore,  # noqa: F811
) -> None:
    store.put_chunk("a", "d1", [EntityMention("vault", "service", "stores secrets", 1)], [])
    store.put_chunk("b", "d2", [EntityMention("Vault", "service", "the key is hunter2", 1)], [])
    before = store.entity("vault")
    assert before is not None and "hunter2" in before.description
    removal = remove_contributions(store, ["b"])
    assert removal.entities == [] and removal.changed_entities == ["vault"]
    after = store.entity("vault")
    assert after is not None and after.description == "stores secrets"


def test_forgetting_rewrites_the_reports_that_cited_the_chunks(
    store_url: str | None, tmp_path: Path
) -> None:
    from graph.stores import open_graph_store

    graph = open_graph_store("local", path=tables_at(store_url, tmp_path / "g.sqlite3"))
    held = Quarantine(tables_at(store_url, tmp_path / "g.sqlite3"))
    _fill(graph)
    held.add("chunk-one", "d1", "offline", "an old reason")

    def texts(ids: object) -> dict[str, str]:
        return {c: TEXTS[c] for c in ids if c in TEXTS}  # type: ignore[attr-defined]

    first = run_plan(graph, Summarizer(ExtractiveWriter(), texts), plan_refresh(graph))
    assert first.refreshed >= 1
    graph.clear_touched(sorted(graph.touched_entities()))
    assert "PAY-5031" in json.dumps([json.loads(r.to_json()) for r in graph.reports()])
    lost = TEXTS.pop("chunk-one")  # the store lost it first
    try:
        summarizer = Summarizer(ExtractiveWriter(), texts)
        report = forget_chunks(graph, held, ["chunk-one"], summarizer)
    finally:
        TEXTS["chunk-one"] = lost
    counts = report.as_dict()
    assert counts["entities_removed"] == 1 and counts["relations_removed"] == 2
    assert counts["reports_refreshed"] >= 1 and counts["quarantine_released"] == 1
    served = json.dumps(
        [json.loads(r.to_json()) for r in graph.reports()]
        + [list(c.members) for c in graph.communities()]
    ).lower()
    assert "pay-5031" not in served and "chunk-one" not in served
    assert graph.stale_communities() == set() and graph.touched_entities() == set()
    assert "1 entities and 2 relations removed" in report.summary()
    graph.close()
    held.close()
