"""``/readyz`` reports a derived index whose files did not match its recorded state."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from app.namespaces import Namespaces
from lore.embedders import LocalEmbedder
from lore.models import SourceDocument
from lore.settings import load_settings
from retrieval.index_set import IndexSet
from tests import ops


def test_6_readyz_says_the_keyword_index_was_rebuilt(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    settings = load_settings(data_dir=tmp_path)
    first = Namespaces(settings, embedder=local_embedder)
    runtime = first.runtime(settings.auth.default_namespace)
    doc = SourceDocument("a.md", "a.md", "The gateway raises E_READY_TANTIVY on restart.", "A", {})
    assert not ops.ingest(runtime, [doc]).failed
    first.close()
    (next(tmp_path.glob("sparse-*")) / "meta.json").unlink()

    app = create_app(settings, Namespaces(settings, embedder=local_embedder))
    with TestClient(app) as client:
        ready = client.get("/readyz")
        assert ready.status_code == 200
        checks = ready.json()["checks"]
        assert "meta.json missing" in checks["sparse_index"], checks
        assert checks["dense_index"] == "ok"
        hits = client.post("/v1/memory/query", json={"search_text": "E_READY_TANTIVY"})
        assert hits.json()["results"][0]["source"] == "a.md"
        state = json.loads((next(tmp_path.glob("sparse-*")) / "state.json").read_text())
        assert state["docs"] == 1  # the keyword index holds the chunk again


def test_a_write_that_waited_is_indexed_when_it_returns(
    tmp_path: Path, local_embedder: LocalEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``wait: true`` answers once the indexes hold the document, not once it is stored.

    A slow catch-up (a big batch, a busy disk) must not let the answer overtake it: the
    caller searches next. The damage tests rely on it too (a commit after the answer
    would write whole files over the damage they make).
    """
    slow = IndexSet.catch_up

    def catch_up_slowly(self: IndexSet) -> dict[str, int]:
        time.sleep(1.0)
        return slow(self)

    monkeypatch.setattr(IndexSet, "catch_up", catch_up_slowly)
    settings = load_settings(data_dir=tmp_path)
    spaces = Namespaces(settings, embedder=local_embedder)
    with TestClient(create_app(settings, spaces)) as client:
        body = {"id": "w.md", "text": "E_WAITED_WRITE is in the index.", "wait": True}
        reply = client.post("/v1/documents", json=body)
        assert reply.status_code == 200 and reply.json()["state"] == "done", reply.text
        state = spaces.runtime(settings.auth.default_namespace).indexes.state()
        assert state["current"], state
