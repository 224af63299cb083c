"""Graph-augmented local search through the real runtime (a small multi-hop corpus)."""

from pathlib import Path

from app.runtime import Runtime
from lore.embedders import LocalEmbedder
from lore.models import SourceDocument
from retrieval.contract import QueryRequest
from tests import ops
from tests.conftest import make_runtime

DOCS = [
    SourceDocument(
        "p1", "p1", "Ardwen Falls is a waterfall fed by the Morrow Glacier.", "Ardwen Falls"
    ),
    SourceDocument(
        "p2",
        "p2",
        "The Morrow Glacier lies in the Kestrel Range and is retreating fast.",
        "Morrow Glacier",
    ),
    SourceDocument(
        "p3", "p3", "Tollan Bay is a harbour town known for its fish market.", "Tollan Bay"
    ),
    SourceDocument(
        "p4", "p4", "Kestrel Range is a chain of mountains in the north.", "Kestrel Range"
    ),
]


def test_graph_list_reaches_the_second_hop(tmp_path: Path, local_embedder: LocalEmbedder) -> None:
    rt = make_runtime(tmp_path, local_embedder)
    ops.ingest(rt, DOCS)
    question = "Which mountain range holds the glacier that feeds Ardwen Falls?"
    off = rt.queries().query_sync(QueryRequest(search_text=question, top_k=4))
    assert all(r.ranks.graph is None for r in off.results)  # no graph yet, weight 0
    ops.build_graph(rt)
    expander = rt.searcher().expander
    assert expander is not None
    assert expander.query_entities(question) == ["ardwen fall"]  # normalised
    on = rt.queries().query_sync(QueryRequest(search_text=question, top_k=4, graph_weight=1.0))
    graph_ranked = {r.document_id: r.ranks.graph for r in on.results if r.ranks.graph}
    assert "p2" in graph_ranked  # Ardwen Falls -> Morrow Glacier (one hop)
    assert _graph_documents(rt, question, []) == ["p1", "p2"]  # named title, then bridge
    filtered = rt.queries().query_sync(
        QueryRequest(search_text=question, top_k=4, graph_weight=1.0, metadata_filter=None)
    )
    assert filtered.total_retrieved == 4
    rt.close()


def _graph_documents(rt: Runtime, question: str, seed_rows: list[int]) -> list[str]:
    expander = rt.searcher().expander
    assert expander is not None
    ranked = expander.rank(question, seed_rows, 10)
    owners = rt.store.document_ids_of([row for row, _ in ranked])
    return [owners[row] for row, _ in ranked]


def test_title_walk_starts_from_the_best_chunks_when_no_title_is_named(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    rt = make_runtime(tmp_path, local_embedder)
    ops.ingest(rt, DOCS)
    ops.build_graph(rt)
    seeds = [c.rowid for c in rt.store.chunks_of_document("p2")]
    # "glacier" names no title; the seed (Morrow Glacier) names Kestrel Range.
    assert _graph_documents(rt, "Which glacier is retreating?", seeds) == ["p4"]
    rt.close()


def test_without_titles_the_entity_walk_ranks(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    rt = make_runtime(tmp_path, local_embedder)
    ops.ingest(rt, [SourceDocument(d.id, d.source, d.text, "") for d in DOCS])
    ops.build_graph(rt)
    ranked = _graph_documents(rt, "Where is the Morrow Glacier?", [])
    assert set(ranked[:2]) == {"p1", "p2"}  # both mention the named entity
    rt.close()
