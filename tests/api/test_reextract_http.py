"""An extractor change over HTTP: the graph is kept until ``{"reextract": true}``."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from api.app import create_app
from app.namespaces import Namespaces
from lore.embedders import LocalEmbedder
from lore.settings import load_settings
from tests.openai_test_server import OpenAITestServer


def test_configuring_an_llm_keeps_the_graph_until_reextract(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    offline = load_settings(data_dir=tmp_path)
    doc = {"id": "a.md", "text": "Kestrel Gateway rejects tokens signed by Osprey Vault."}
    with TestClient(create_app(offline, Namespaces(offline, embedder=local_embedder))) as c:
        assert c.post("/v1/documents", json={**doc, "wait": True}).status_code == 200
        assert c.post("/v1/communities/refresh", json={"rebuild": True}).status_code == 200
        before = c.get("/v1/entities/Kestrel Gateway").json()["entity"]
    with OpenAITestServer() as server:
        llm = load_settings(
            data_dir=tmp_path, llm={"base_url": server.base_url, "model": "test-model"}
        )
        with TestClient(create_app(llm, Namespaces(llm, embedder=local_embedder))) as c:
            kept = c.post("/v1/communities/refresh", json={})
            assert kept.status_code == 200, kept.text
            assert server.chat_calls == 0  # the offline graph stays; nothing re-extracted
            assert c.get("/v1/entities/Kestrel Gateway").json()["entity"] == before
            redone = c.post("/v1/communities/refresh", json={"reextract": True})
            assert redone.status_code == 200, redone.text
            extract_calls = [r for r in server.requests if "extract_graph" in str(r["body"] or "")]
            assert len(extract_calls) == 1
            after = c.get("/v1/entities/Kestrel Gateway").json()["entity"]
            assert after["description"] == "Kestrel Gateway as named in the text"
