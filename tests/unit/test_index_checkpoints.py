"""A dense index that leaves its saves to checkpoints, seen through a runtime.

``DEFER_SAVES_FROM`` is lowered so that this small corpus's index behaves as one of
20,000 vectors and more: a delete is applied in memory and left to a checkpoint, another
process opening the data directory replays it from the change log, the watermark keeps
the mark of the last save, and closing the runtime saves what was left.
"""

import json
from pathlib import Path

from pytest import MonkeyPatch

import retrieval.dense.hnsw
from app.runtime import Runtime
from lore.embedders import LocalEmbedder
from lore.models import SourceDocument
from retrieval.contract import QueryRequest
from retrieval.state import read_state
from tests import ops
from tests.conftest import make_runtime


def _found(runtime: Runtime, token: str) -> set[str]:
    """The documents a query finds, caught up first as every door does."""
    response = runtime.queries().query_sync(QueryRequest(search_text=token, top_k=5))
    return {r.document_id for r in response.results}


def test_a_delete_left_to_a_checkpoint_is_never_served_and_is_saved_at_close(
    tmp_path: Path, local_embedder: LocalEmbedder, monkeypatch: MonkeyPatch
) -> None:
    monkeypatch.setattr(retrieval.dense.hnsw, "DEFER_SAVES_FROM", 1)
    data = tmp_path / "data"
    docs = [
        SourceDocument(f"d{i}.md", f"d{i}.md", f"Runbook {i}: the ledger pool ZQ_{i}7 drains.", "")
        for i in range(4)
    ]
    first = make_runtime(data, local_embedder)
    ops.ingest(first, docs, extract_graph=False)  # the first catch-up rebuilds: saved
    dense = data / "dense-hnswlib" / "state.json"
    saved = read_state(dense)["applied_seq"]
    assert saved == first.store.last_seq()

    ops.delete(first, "d2.md")
    head = first.store.last_seq()
    assert read_state(dense)["applied_seq"] == saved < head  # left to a checkpoint
    marks = json.loads((data / "indexes.watermark.json").read_text())
    assert marks["dense"][0] == saved and marks["sparse"][0] == head
    assert "d2.md" not in _found(first, "ZQ_27 ledger pool")

    second = make_runtime(data, local_embedder)  # another process: replays from the save
    assert "d2.md" not in _found(second, "ZQ_27 ledger pool")
    assert "d1.md" in _found(second, "ZQ_17 ledger pool")
    second.close()  # and saves what it replayed
    assert read_state(dense)["applied_seq"] == head

    ops.delete(first, "d3.md")
    last = first.store.last_seq()
    assert read_state(dense)["applied_seq"] == head < last
    first.close()  # saves what was left
    assert read_state(dense)["applied_seq"] == last
    marks = json.loads((data / "indexes.watermark.json").read_text())
    assert marks["dense"][0] == last
    third = make_runtime(data, local_embedder)
    assert third.indexes.open()[1].applied_seq == last
    assert not {"d2.md", "d3.md"} & _found(third, "ZQ_27 ZQ_37 ledger pool")
    third.close()
