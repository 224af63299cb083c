"""Lorekeeper where Chroma stands in LangChain's hybrid recipe, and the standard suites.

The vector store is tested in both of its modes: in-process (a runtime) and over HTTP
against a real `lore serve --auth` (one server for the module, a fresh namespace and key
per test).
"""

from __future__ import annotations

import json
import socket
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from langchain_classic.retrievers import EnsembleRetriever
from langchain_core.documents import Document
from langchain_tests.integration_tests import (
    RetrieversIntegrationTests,
    VectorStoreIntegrationTests,
)

from api.integrations.langchain_retriever import LorekeeperRetriever
from api.integrations.langchain_vectorstore import LorekeeperVectorStore
from app.runtime import Runtime
from lore.embedders import LocalEmbedder
from lore.errors import BackendUnavailableError, NotFoundError, UnauthorizedError
from tests.conftest import make_runtime
from tests.e2e.test_cli import lore, serving

with warnings.catch_warnings():
    # the recipe's BM25Retriever still lives in langchain-community, which warns on import
    # that it is being sunset; the warning is about the package, not about our use of it
    warnings.simplefilter("ignore", DeprecationWarning)
    from langchain_community.retrievers import BM25Retriever

RUNBOOKS = [
    Document(
        page_content="When the ledger reports E_LEDGER_LOCK_TIMEOUT, raise the lock wait "
        "and retry the settlement batch.",
        metadata={"env": "production", "service": "ledger"},
        id="ledger-lock",
    ),
    Document(
        page_content="Checkout answers HTTP 504 when the payments gateway is slow; scale "
        "the gateway pods.",
        metadata={"env": "staging", "service": "checkout"},
        id="checkout-504",
    ),
    Document(
        page_content="The search indexer falls behind when shards time out; reindex the "
        "backlog overnight.",
        metadata={"env": "production", "service": "search"},
        id="indexer-backlog",
    ),
    Document(
        page_content="Database connections pile up when the pool is too small for the "
        "traffic; raise the pool size.",
        metadata={"env": "production", "service": "ledger"},
        id="db-pool",
    ),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """`lore serve --auth` on an empty data directory: its URL and an admin key."""
    root = tmp_path_factory.mktemp("vectorstore-http")
    created = lore(root / "data", "keys", "create", "--admin", "--json")
    assert created.returncode == 0, created.stderr
    with serving(root / "data", root / "serve.log", "--auth") as base:
        yield base, json.loads(created.stdout)["key"]


def namespace_key(server: tuple[str, str]) -> tuple[str, str]:
    """A fresh namespace and a key that holds only it (made by the admin key over HTTP)."""
    base, admin = server
    namespace = f"lc-{uuid.uuid4().hex[:12]}"
    made = httpx.post(
        f"{base}/v1/keys",
        json={"namespaces": [namespace], "name": "langchain test"},
        headers={"Authorization": f"Bearer {admin}"},
        timeout=30,
    )
    assert made.status_code == 201, made.text
    return namespace, str(made.json()["key"])


def http_store(server: tuple[str, str]) -> LorekeeperVectorStore:
    """A store over HTTP on an empty namespace of its own."""
    _, key = namespace_key(server)
    return LorekeeperVectorStore(url=server[0], api_key=key, timeout_s=120)


@pytest.fixture(params=["runtime", "http"])
def store(
    request: pytest.FixtureRequest, tmp_path: Path, local_embedder: LocalEmbedder
) -> Iterator[LorekeeperVectorStore]:
    if request.param == "http":
        yield http_store(request.getfixturevalue("server"))
        return
    runtime = make_runtime(tmp_path / "data", local_embedder)
    yield LorekeeperVectorStore(runtime)
    runtime.close()


def test_the_hybrid_recipe_with_lorekeeper_in_place_of_chroma(
    store: LorekeeperVectorStore,
) -> None:
    """EnsembleRetriever(BM25Retriever 0.4, vector-store retriever 0.6), as the recipe has it."""
    assert store.add_documents(RUNBOOKS) == [d.id for d in RUNBOOKS]
    bm25 = BM25Retriever.from_documents(RUNBOOKS)
    bm25.k = 2
    vector = store.as_retriever(search_kwargs={"k": 2})
    hybrid = EnsembleRetriever(retrievers=[bm25, vector], weights=[0.4, 0.6])
    found = hybrid.invoke("E_LEDGER_LOCK_TIMEOUT settlement retry")
    assert found[0].id == "ledger-lock"
    # words the keyword list cannot match: the vector-store side finds the meaning
    meaning = hybrid.invoke("gateway timeouts at checkout")
    assert meaning[0].id == "checkout-504"
    filtered = store.as_retriever(search_kwargs={"k": 3, "filter": {"env": "staging"}})
    assert [d.id for d in filtered.invoke("slow gateway")] == ["checkout-504"]
    scored = store.similarity_search_with_relevance_scores("database pool size", k=3)
    assert scored[0][0].id == "db-pool" and scored[0][1] == 1.0
    assert all(0 < s <= 1 for _, s in scored)
    store.delete(["db-pool", "never-stored"])
    assert store.get_by_ids(["db-pool"]) == []
    assert all(d.id != "db-pool" for d in store.similarity_search("database pool size", k=4))


class TestLorekeeperVectorStoreStandard(VectorStoreIntegrationTests):
    """LangChain's own vector-store suite over an empty namespace per test."""

    @pytest.fixture
    def vectorstore(
        self, tmp_path: Path, local_embedder: LocalEmbedder
    ) -> Iterator[LorekeeperVectorStore]:
        runtime = make_runtime(tmp_path / "data", local_embedder)
        yield LorekeeperVectorStore(runtime)
        runtime.close()


class TestLorekeeperVectorStoreOverHttpStandard(VectorStoreIntegrationTests):
    """LangChain's own vector-store suite against `lore serve`, a new namespace per test."""

    @pytest.fixture
    def vectorstore(self, server: tuple[str, str]) -> LorekeeperVectorStore:
        return http_store(server)


def test_over_http_ids_with_slashes_and_query_characters(server: tuple[str, str]) -> None:
    store = http_store(server)
    ids = ["runbooks/payments/504.md", "faq?q=1#top", "100% sure"]
    texts = ["HTTP 504: check the ledger pool.", "Questions people ask.", "Certainty levels."]
    assert store.add_texts(texts, [{"n": i} for i in range(3)], ids=ids) == ids
    found = store.get_by_ids([*ids, "never-stored"])
    assert [(d.id, d.page_content, d.metadata) for d in found] == [
        (i, t, {"n": n}) for n, (i, t) in enumerate(zip(ids, texts, strict=True))
    ]
    assert store.similarity_search("ledger pool 504", k=1)[0].id == ids[0]
    assert store.delete([ids[0], "never-stored"]) is True
    assert [d.id for d in store.get_by_ids(ids)] == ids[1:]


def test_over_http_an_ingest_outlasting_the_servers_wait_is_followed_to_its_end(
    tmp_path: Path,
) -> None:
    """The server answers 202 once `api.wait_timeout_s` passed; the store polls the job."""
    seen: list[tuple[str, str, int]] = []

    def record(reply: httpx.Response) -> None:
        seen.append((reply.request.method, reply.request.url.path, reply.status_code))

    impatient = {"LORE_API__WAIT_TIMEOUT_S": "0.001"}
    with (
        serving(tmp_path / "data", tmp_path / "serve.log", env=impatient) as base,
        httpx.Client(base_url=base, timeout=120, event_hooks={"response": [record]}) as client,
    ):
        store = LorekeeperVectorStore(url=base, http_client=client)
        assert store.add_documents(RUNBOOKS) == [d.id for d in RUNBOOKS]
        assert store.similarity_search("E_LEDGER_LOCK_TIMEOUT", k=1)[0].id == "ledger-lock"
    assert seen[0] == ("POST", "/v1/documents", 202)
    polls = [s for s in seen if s[0] == "GET" and s[1].startswith("/v1/jobs/")]
    assert polls and all(status == 200 for _, _, status in polls)


def test_over_http_errors_say_what_went_wrong(server: tuple[str, str]) -> None:
    base, _ = server
    with pytest.raises(ValueError, match=r"url must be the server's http\(s\) address"):
        LorekeeperVectorStore(url="127.0.0.1:8080")
    with pytest.raises(ValueError, match="exactly one of `url`"):
        LorekeeperVectorStore()
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}"
    with pytest.raises(BackendUnavailableError, match=f"cannot reach Lorekeeper at {closed}"):
        LorekeeperVectorStore(url=closed).similarity_search("HTTP 504")
    with pytest.raises(UnauthorizedError, match=r"HTTP 401: .*give api_key="):
        LorekeeperVectorStore(url=base).similarity_search("HTTP 504")
    with pytest.raises(UnauthorizedError, match="HTTP 401"):
        LorekeeperVectorStore(url=base, api_key="lk_not-a-key").add_texts(["x"])
    namespace, key = namespace_key(server)
    other, _ = namespace_key(server)
    elsewhere = LorekeeperVectorStore(url=base, api_key=key, namespace=other)
    with pytest.raises(NotFoundError, match=f"HTTP 404: no namespace '{other}'"):
        elsewhere.add_texts(["HTTP 504"])
    own = LorekeeperVectorStore(url=base, api_key=key, namespace=namespace)
    assert own.similarity_search("HTTP 504") == []


class TestLorekeeperRetrieverStandard(RetrieversIntegrationTests):
    """LangChain's own retriever suite over the demo corpus (``k`` per call and per instance)."""

    runtime: Runtime | None = None

    @pytest.fixture(autouse=True)
    def _demo(self, demo_runtime: Runtime) -> None:
        type(self).runtime = demo_runtime

    @property
    def retriever_constructor(self) -> type[LorekeeperRetriever]:
        return LorekeeperRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, object]:
        return {"runtime": type(self).runtime}

    @property
    def retriever_query_example(self) -> str:
        return "ledger lock timeout"
