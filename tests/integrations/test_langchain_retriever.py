"""The LangChain retriever over the Python API and over HTTP (with a key)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import uvicorn
from fastapi.testclient import TestClient
from pydantic import SecretStr, ValidationError

from api.app import create_app
from api.integrations.langchain_retriever import LorekeeperRetriever
from app.keys import KeyStore
from app.namespaces import Namespaces
from app.runtime import Runtime
from lore.embedders import LocalEmbedder
from lore.errors import UnauthorizedError
from lore.models import SourceDocument
from lore.settings import Settings, load_settings
from tests import ops


def test_python_api_backend(demo_runtime: Runtime) -> None:
    retriever = LorekeeperRetriever(runtime=demo_runtime, top_k=3, filters={"env": "production"})
    docs = retriever.invoke("E_LEDGER_LOCK_TIMEOUT")
    assert len(docs) == 3 and all(d.metadata["env"] == "production" for d in docs)
    assert "E_LEDGER_LOCK_TIMEOUT" in docs[0].page_content and docs[0].id
    assert docs[0].metadata["score"] >= docs[-1].metadata["score"]


def test_http_backend_with_a_key(tmp_path: Path, local_embedder: LocalEmbedder) -> None:
    settings = load_settings(data_dir=tmp_path, auth={"enabled": True})
    namespaces = Namespaces(settings, embedder=local_embedder)
    ops.ingest(
        namespaces.runtime("ops"),
        [
            SourceDocument(
                "r.md", "r.md", "Rotate the TLS cert when HTTP 495 shows up.", "Certs", {}
            )
        ],
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
        with pytest.raises(UnauthorizedError, match="HTTP 401"):
            stranger.invoke("HTTP 495")


def test_async_python_api(demo_runtime: Runtime) -> None:
    retriever = LorekeeperRetriever(runtime=demo_runtime, top_k=2)
    docs = asyncio.run(retriever.ainvoke("ledger lock timeout"))
    assert len(docs) == 2


def test_exactly_one_backend() -> None:
    with pytest.raises(ValidationError, match="exactly one"):
        LorekeeperRetriever()


def test_sync_invoke_inside_a_running_loop(demo_runtime: Runtime) -> None:
    """Jupyter / LangGraph nodes call the sync API from inside a running event loop."""
    retriever = LorekeeperRetriever(runtime=demo_runtime, top_k=2)

    async def node() -> list[str]:
        return [d.page_content for d in retriever.invoke("E_LEDGER_LOCK_TIMEOUT")]

    texts = asyncio.run(node())
    assert len(texts) == 2 and "E_LEDGER_LOCK_TIMEOUT" in texts[0]


def test_async_invoke_inside_a_running_loop(demo_runtime: Runtime) -> None:
    retriever = LorekeeperRetriever(runtime=demo_runtime, top_k=2)

    async def node() -> tuple[list[str], list[str]]:
        first, second = await asyncio.gather(
            retriever.ainvoke("E_LEDGER_LOCK_TIMEOUT"), retriever.ainvoke("ledger lock timeout")
        )
        return [d.page_content for d in first], [d.page_content for d in second]

    first, second = asyncio.run(node())
    assert len(first) == 2 and "E_LEDGER_LOCK_TIMEOUT" in first[0] and len(second) == 2


@contextmanager
def real_server(settings: Settings, namespaces: Namespaces) -> Iterator[str]:
    """The HTTP app under a real uvicorn server on a free loopback port."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    config = uvicorn.Config(
        create_app(settings, namespaces), host="127.0.0.1", port=port, log_level="warning"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def test_http_backend_sync_and_async_inside_and_outside_a_loop(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    settings = load_settings(data_dir=tmp_path)
    namespaces = Namespaces(settings, embedder=local_embedder)
    ops.ingest(
        namespaces.runtime("default"),
        [
            SourceDocument(
                "r.md", "r.md", "Rotate the TLS cert when HTTP 495 shows up.", "Certs", {}
            )
        ],
    )
    with real_server(settings, namespaces) as url:
        retriever = LorekeeperRetriever(url=url, top_k=1)
        assert retriever.invoke("HTTP 495")[0].metadata["source"] == "r.md"
        assert asyncio.run(retriever.ainvoke("HTTP 495"))[0].metadata["source"] == "r.md"

        async def node() -> tuple[str, str]:
            sync_doc = retriever.invoke("HTTP 495")[0]
            async_doc = (await retriever.ainvoke("HTTP 495"))[0]
            return sync_doc.metadata["source"], async_doc.metadata["source"]

        assert asyncio.run(node()) == ("r.md", "r.md")
    namespaces.close()


# -- per-call arguments (issue 32) -------------------------------------------------------


def test_per_call_arguments_on_every_path(demo_runtime: Runtime) -> None:
    """`invoke(query, k=…, filters=…)` is honoured on sync, async and batch paths."""
    retriever = LorekeeperRetriever(runtime=demo_runtime, top_k=5)
    staging = {"filters": {"env": "staging"}, "k": 2}
    docs = retriever.invoke("HTTP 504", **staging)
    assert len(docs) == 2 and all(d.metadata["env"] == "staging" for d in docs)
    docs = asyncio.run(retriever.ainvoke("HTTP 504", **staging))
    assert len(docs) == 2 and all(d.metadata["env"] == "staging" for d in docs)
    for batch in (
        retriever.batch(["HTTP 504", "ledger lock"], **staging),  # type: ignore[arg-type]
        asyncio.run(retriever.abatch(["HTTP 504", "ledger lock"], **staging)),  # type: ignore[arg-type]
    ):
        assert [len(b) for b in batch] == [2, 2]
        assert all(d.metadata["env"] == "staging" for b in batch for d in b)
    assert len(retriever.invoke("HTTP 504", k=1)) == 1
    assert len(retriever.invoke("HTTP 504", top_k=3)) == 3
    assert len(retriever.invoke("HTTP 504")) == 5  # the constructor's default is untouched


def test_unknown_arguments_raise(demo_runtime: Runtime) -> None:
    retriever = LorekeeperRetriever(runtime=demo_runtime)
    with pytest.raises(TypeError, match=r"unknown argument.*filtres.*it takes k, top_k, filters"):
        retriever.invoke("HTTP 504", filtres={"env": "staging"})
    with pytest.raises(TypeError, match="unknown argument"):
        asyncio.run(retriever.ainvoke("HTTP 504", colour="red"))
    with pytest.raises(ValueError, match="mode must be 'local' or 'global'"):
        retriever.invoke("HTTP 504", mode="sideways")
    with pytest.raises(ValidationError, match="less than or equal to 1000"):
        retriever.invoke("HTTP 504", k=100000)


def test_relative_score_cut_off_and_graph_weight(demo_runtime: Runtime) -> None:
    retriever = LorekeeperRetriever(runtime=demo_runtime, top_k=20)
    every = retriever.invoke("ledger lock timeout")
    kept = retriever.invoke("ledger lock timeout", min_relative_score=0.8)
    best = every[0].metadata["score"]
    assert 0 < len(kept) < len(every)
    assert all(d.metadata["score"] >= 0.8 * best - 1e-12 for d in kept)
    assert [d.id for d in kept] == [d.id for d in every[: len(kept)]]
    graphless = retriever.invoke("ledger lock timeout", graph_weight=0.0, k=3)
    assert len(graphless) == 3 and "heading" in graphless[0].metadata


def test_global_mode_returns_the_answer_as_one_document(demo_graph_runtime: Runtime) -> None:
    retriever = LorekeeperRetriever(runtime=demo_graph_runtime)
    [doc] = retriever.invoke("How do the services handle database timeouts?", mode="global")
    assert doc.metadata["mode"] == "global" and doc.page_content
    citations = doc.metadata["citations"]
    assert citations and citations[0]["kind"] == "report" and citations[0]["report_id"]
    assert all(c["report_id"] for c in citations if c["kind"] == "report")
    assert f"[{citations[0]['id']}]" in doc.page_content


def test_per_call_arguments_over_http(tmp_path: Path, local_embedder: LocalEmbedder) -> None:
    settings = load_settings(data_dir=tmp_path)
    namespaces = Namespaces(settings, embedder=local_embedder)
    ops.ingest(
        namespaces.runtime("default"),
        [
            SourceDocument(
                f"{env}.md", f"{env}.md", f"HTTP 504 in {env}: restart", "", {"env": env}
            )
            for env in ("production", "staging")
        ],
    )
    with TestClient(create_app(settings, namespaces)) as client:
        retriever = LorekeeperRetriever(url="http://testserver", http_client=client)
        [doc] = retriever.invoke("HTTP 504", filters={"env": "staging"})
        assert doc.metadata["source"] == "staging.md"
        assert len(retriever.invoke("HTTP 504", k=1)) == 1
        assert len(retriever.invoke("HTTP 504")) == 2
        with pytest.raises(TypeError, match="unknown argument"):
            retriever.invoke("HTTP 504", filter={"env": "staging"})
    namespaces.close()
