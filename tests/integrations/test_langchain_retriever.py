"""The LangChain retriever over the Python API and over HTTP (with a key)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr, ValidationError

from api.app import create_app
from api.integrations.langchain_retriever import LorekeeperRetriever
from lore.embedders import LocalEmbedder
from lore.errors import InvalidRequestError
from lore.keys import KeyStore
from lore.models import SourceDocument
from lore.settings import load_settings
from workers.namespaces import Namespaces
from workers.runtime import Runtime


def test_python_api_backend(demo_runtime: Runtime) -> None:
    retriever = LorekeeperRetriever(runtime=demo_runtime, top_k=3, filters={"env": "production"})
    docs = retriever.invoke("E_LEDGER_LOCK_TIMEOUT")
    assert len(docs) == 3 and all(d.metadata["env"] == "production" for d in docs)
    assert "E_LEDGER_LOCK_TIMEOUT" in docs[0].page_content and docs[0].id
    assert docs[0].metadata["score"] >= docs[-1].metadata["score"]


def test_http_backend_with_a_key(tmp_path: Path, local_embedder: LocalEmbedder) -> None:
    settings = load_settings(data_dir=tmp_path)
    settings.auth.enabled = True
    namespaces = Namespaces(settings, embedder=local_embedder)
    namespaces.runtime("ops").ingest(
        [SourceDocument("r.md", "r.md", "Rotate the TLS cert when HTTP 495 shows up.", "Certs", {})]
    )
    keys = KeyStore(tmp_path / "keys.sqlite3")
    key, _ = keys.create(["ops"])
    keys.close()
    with TestClient(create_app(settings, namespaces)) as client:
        retriever = LorekeeperRetriever(
            url="http://testserver", api_key=SecretStr(key), http_client=client
        )
        [doc] = retriever.invoke("HTTP 495")
        assert doc.metadata["namespace"] == "ops" and doc.metadata["source"] == "r.md"
        stranger = LorekeeperRetriever(url="http://testserver", http_client=client)
        with pytest.raises(InvalidRequestError, match="401"):
            stranger.invoke("HTTP 495")


def test_async_python_api(demo_runtime: Runtime) -> None:
    retriever = LorekeeperRetriever(runtime=demo_runtime, top_k=2)
    docs = asyncio.run(retriever.ainvoke("ledger lock timeout"))
    assert len(docs) == 2


def test_exactly_one_backend() -> None:
    with pytest.raises(ValidationError, match="exactly one"):
        LorekeeperRetriever()
