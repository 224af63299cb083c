"""The router's collection terms are read again after a hundredth more changes, not per write."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from lore.embedders import LocalEmbedder
from lore.models import SourceDocument
from lore.store import NewChunk
from tests.conftest import make_runtime


def test_the_collection_is_read_again_once_a_hundredth_more_has_changed(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    runtime = make_runtime(tmp_path, local_embedder)
    dimension = local_embedder.dimension
    try:

        def put(doc_id: str, title: str, chunks: int = 1) -> None:
            doc = SourceDocument(doc_id, f"{doc_id}.md", "text", title, {})
            runtime.store.replace_document(
                doc,
                [
                    NewChunk(f"{doc_id}-{k}", k, "text", "", 1, f"{doc_id}{k}", np.zeros(dimension))
                    for k in range(chunks)
                ],
            )

        put("w1", "Widget manual", 150)
        put("w2", "Widget manual", 150)  # the change sequence stands at 300
        asker = runtime.asker()
        assert set(asker.collection()) == {"manual", "widget"}
        for i in range(3):  # three changes: within a hundredth of 300, not read again
            put(f"g{i}", "Gadget notes")
        assert set(asker.collection()) == {"manual", "widget"}
        put("g3", "Gadget notes")  # the fourth: read again
        terms = asker.collection()
        assert "gadget" in terms and "widget" not in terms, terms
    finally:
        runtime.close()
