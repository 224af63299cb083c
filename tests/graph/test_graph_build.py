"""Graph building: an extractor change keeps the graph (--reextract redoes it); batches."""

from pathlib import Path

from graph.models import EntityMention
from graph.quarantine import Quarantine
from graph.stores.local import LocalGraphStore
from ingest.extraction import ChunkInput, Extraction, OfflineExtractor, Quarantined
from ingest.graph_build import build_graph, store_extractions
from lore.embedders import LocalEmbedder
from lore.models import SourceDocument
from tests import ops
from tests.conftest import make_runtime
from tests.tables import tables_at


class Versioned(OfflineExtractor):
    def __init__(self, version: str) -> None:
        super().__init__()
        self.version = version


def test_a_new_extractor_version_keeps_the_graph_until_reextract(
    store_url: str | None, tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    rt = make_runtime(tmp_path, local_embedder)
    ops.ingest(
        rt,
        [SourceDocument("d1", "d1", "The Kestrel Range lies north of Tollan Bay.", "")],
        extract_graph=False,
    )
    graph = LocalGraphStore(tables_at(store_url, tmp_path / "lore.sqlite3"))
    held = Quarantine(tables_at(store_url, tmp_path / "lore.sqlite3"))
    held.add("old-chunk", "d0", "offline", "a reason from the old extractor")
    first = build_graph(rt.store, graph, Versioned("a"), held)
    assert first.extracted == 1 and first.warnings == []
    assert build_graph(rt.store, graph, Versioned("a"), held).extracted == 0
    kept = build_graph(rt.store, graph, Versioned("b"), held)
    assert kept.extracted == 0 and kept.unchanged == 1
    assert graph.entity("Kestrel Range") is not None  # nothing dropped
    assert len(kept.warnings) == 1 and "--reextract" in kept.warnings[0]
    assert "'a'" in kept.warnings[0] and "'b'" in kept.warnings[0]
    again = build_graph(rt.store, graph, Versioned("b"), held, reextract=True)
    assert again.extracted == 1 and again.unchanged == 0 and again.warnings == []
    assert graph.entity("Kestrel Range") is not None
    assert held.entries() == []  # the new extractor gets a fresh chance at every chunk
    assert build_graph(rt.store, graph, Versioned("b"), held).warnings == []
    graph.close()
    held.close()
    rt.close()


def test_a_batch_is_stored_at_once_and_keyless_extractions_are_quarantined(
    store_url: str | None, tmp_path: Path
) -> None:
    graph = LocalGraphStore(tables_at(store_url, tmp_path / "lore.sqlite3"))
    held = Quarantine(tables_at(store_url, tmp_path / "lore.sqlite3"))
    chunks = [ChunkInput(f"c{i}", "d1", "text", "") for i in range(3)]
    results: list[Extraction | Quarantined] = [
        Extraction([EntityMention("kestrel-svc", "service", "")], []),
        Extraction([EntityMention("()", "title", "")], []),  # no key: Neo4j would refuse it
        Quarantined("the model said nothing"),
    ]
    assert store_extractions(graph, held, "offline", chunks, results) == (1, 2)
    assert graph.extracted_chunks() == {"c0"} and graph.entity_keys() == {"kestrel-svc"}
    reasons = {e.chunk_id: e.reason for e in held.entries()}
    assert reasons["c2"] == "the model said nothing" and "has no key" in reasons["c1"]
    graph.close()
    held.close()


def _paragraph(n: int, extra: str) -> str:
    filler = " ".join(f"The relay node {n} forwards each batch it reads." for _ in range(12))
    return f"## Part {n}\n\n{filler} {extra}\n"


def test_a_chunk_is_extracted_with_its_whole_documents_words_by_ingest_and_by_build(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    # "Output" is capitalised inside a sentence only in the last part; the document's
    # other parts write "output" in lower case: an ordinary word, however it is cut
    text = "\n".join(
        [
            _paragraph(1, "Its output is kept; the output of a relay is checked."),
            _paragraph(2, "A relay on Windows writes output too, and Windows keeps it."),
            _paragraph(3, "The rest goes to Output, as on Windows."),
        ]
    )
    rt = make_runtime(tmp_path, local_embedder, chunk={"size_tokens": 128, "overlap_tokens": 0})
    ops.ingest(rt, [SourceDocument("d1", "d1", text, "Relay notes")])  # extracted at ingest
    assert len(rt.store.chunks_of_document("d1")) >= 3
    graph = rt.graph()
    at_ingest = graph.entity_keys()
    assert graph.entity("Windows") is not None and graph.entity("Output") is None
    # a build re-extracts one chunk per batch: the words still come from the whole document
    build_graph(rt.store, graph, OfflineExtractor(), rt.quarantine(), batch=1, reextract=True)
    assert graph.entity_keys() == at_ingest
    rt.close()
