"""Lorekeeper where Chroma stands in LangChain's hybrid recipe, and the standard suites."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path

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
from tests.conftest import make_runtime

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


@pytest.fixture
def store(tmp_path: Path, local_embedder: LocalEmbedder) -> Iterator[LorekeeperVectorStore]:
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
