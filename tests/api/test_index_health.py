"""``/readyz`` reports a derived index whose files did not match its recorded state."""

from __future__ import annotations

import json
from pathlib import Path

from fastapi.testclient import TestClient

from api.app import create_app
from app.namespaces import Namespaces
from lore.embedders import LocalEmbedder
from lore.models import SourceDocument
from lore.settings import load_settings
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
