"""Graph building: a changed extractor version re-extracts every chunk."""

from pathlib import Path

from graph.stores.local import LocalGraphStore
from ingest.extract_offline import extract
from ingest.graph_build import build_graph
from lore.embedders import LocalEmbedder
from lore.models import SourceDocument
from tests.conftest import make_runtime


def test_a_new_extractor_version_redoes_the_graph(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    rt = make_runtime(tmp_path, local_embedder)
    rt.ingest([SourceDocument("d1", "d1", "The Kestrel Range lies north of Tollan Bay.", "")])
    graph = LocalGraphStore(tmp_path / "lore.sqlite3")
    first = build_graph(rt.store, graph, extract, version="a")
    assert first.extracted == 1
    assert build_graph(rt.store, graph, extract, version="a").extracted == 0
    again = build_graph(rt.store, graph, extract, version="b")
    assert again.extracted == 1 and again.unchanged == 0
    assert graph.entity("Kestrel Range") is not None
    graph.close()
    rt.close()
