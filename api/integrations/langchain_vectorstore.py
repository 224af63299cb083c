"""Lorekeeper as a LangChain ``VectorStore``: where Chroma stands in the usual recipes.

    store = LorekeeperVectorStore(runtime=open_runtime(load_settings()))
    store.add_documents([Document(page_content="…", metadata={"env": "prod"}, id="a")])
    hybrid = EnsembleRetriever(
        retrievers=[BM25Retriever.from_documents(docs), store.as_retriever()],
        weights=[0.4, 0.6],
    )

Each added ``Document`` is one Lorekeeper document (its ``id``, or a fresh one), so it
is chunked, embedded by the runtime's own embedder (an ``embedding`` passed to
``from_texts`` is not used), indexed for keyword and semantic search and put in the
knowledge graph. Searches are Lorekeeper's hybrid search: a returned ``Document`` is a
chunk, with the stored document's metadata and the document's id as ``id``. Scores are
fused (RRF) and only relative within one query, so relevance scores are the score
divided by the best one's (the best result has 1.0). Needs the ``langchain`` extra.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from app.ingest import ingest as ingest_documents
from app.listing import read_document
from app.runtime import Runtime
from ingest.loaders import make_document
from lore.errors import InvalidRequestError
from lore.extras import missing_extra
from lore.models import DocumentStatus
from retrieval.contract import MAX_TOP_K, QueryRequest

try:
    from langchain_core.documents import Document
    from langchain_core.embeddings import Embeddings
    from langchain_core.vectorstores import VectorStore
except ModuleNotFoundError as exc:  # the one-line error that names the extra
    raise (missing_extra(exc, "the LangChain vector store") or exc) from exc


class LorekeeperVectorStore(VectorStore):
    """A namespace of Lorekeeper (a :class:`~app.runtime.Runtime`) as a LangChain store."""

    def __init__(self, runtime: Runtime) -> None:
        """Store into and search ``runtime``."""
        if not isinstance(runtime, Runtime):
            raise TypeError("`runtime` must be an app.runtime.Runtime")
        self.runtime = runtime

    @property
    def embeddings(self) -> Embeddings | None:
        """None: Lorekeeper embeds with its own configured model."""
        return None

    # -- writing -----------------------------------------------------------------------------

    def add_texts(
        self,
        texts: Iterable[str],
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        **kwargs: Any,
    ) -> list[str]:
        """Store each text as a document (an existing id is replaced); return the ids."""
        if kwargs:
            raise TypeError(f"unknown argument(s): {', '.join(sorted(kwargs))}")
        items = list(texts)
        metas = metadatas or [{} for _ in items]
        given: list[str | None] = list(ids) if ids else [None] * len(items)
        chosen = [i or str(uuid.uuid4()) for i in given]
        if not len(items) == len(metas) == len(chosen):
            raise ValueError("texts, metadatas and ids must have the same length")
        if not items:
            return []
        limit = self.runtime.settings.ingest.max_document_bytes
        documents = [
            make_document(doc_id, doc_id, text, "", meta, max_bytes=limit)
            for doc_id, text, meta in zip(chosen, items, metas, strict=True)
        ]
        result = ingest_documents(self.runtime, documents, wait=True)
        if result.report.failed:
            reasons = "; ".join(f"{doc_id}: {why}" for doc_id, why in result.report.failed)
            raise InvalidRequestError(f"not stored: {reasons}")
        return chosen

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> bool | None:
        """Forget the documents with these ids (unknown ids are ignored); True when done."""
        if ids is None:
            raise ValueError("give the ids to delete (deleting everything is `lore reset`)")
        known = [i for i in ids if self.runtime.store.get_document(i) is not None]
        if known:
            self.runtime.delete_documents(known)
        return True

    # -- reading -----------------------------------------------------------------------------

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        """The stored documents with these ids (whole text), in the order found."""
        found = []
        for doc_id in ids:
            view = read_document(self.runtime.store, doc_id, text=True, chunks=False)
            if view is None or view.info.status is not DocumentStatus.DONE:
                continue
            found.append(
                Document(page_content=view.text or "", metadata=dict(view.info.metadata), id=doc_id)
            )
        return found

    def similarity_search_with_score(
        self, query: str, k: int = 4, filter: dict[str, Any] | None = None, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        """Hybrid search: chunks with their fused (RRF) score, best first."""
        if kwargs:
            raise TypeError(f"unknown argument(s): {', '.join(sorted(kwargs))}")
        request = QueryRequest(
            search_text=query, top_k=max(1, min(k, MAX_TOP_K)), metadata_filter=filter or None
        )
        response = self.runtime.query_sync(request)
        return [
            (
                Document(page_content=r.text, metadata=dict(r.metadata), id=r.document_id),
                r.rrf_score,
            )
            for r in response.results
        ]

    def similarity_search(self, query: str, k: int = 4, **kwargs: Any) -> list[Document]:
        """Hybrid search: the ``k`` best chunks (``filter=`` a metadata filter)."""
        return [doc for doc, _ in self.similarity_search_with_score(query, k, **kwargs)]

    def _similarity_search_with_relevance_scores(
        self, query: str, k: int = 4, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        """Scores relative to the best result of this query (fused scores have no scale)."""
        scored = self.similarity_search_with_score(query, k, **kwargs)
        best = max((s for _, s in scored), default=0.0)
        return [(doc, s / best if best > 0 else 0.0) for doc, s in scored]

    @classmethod
    def from_texts(
        cls,
        texts: list[str],
        embedding: Embeddings | None = None,
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        runtime: Runtime | None = None,
        **kwargs: Any,
    ) -> LorekeeperVectorStore:
        """A store on ``runtime`` holding ``texts`` (``embedding`` is not used)."""
        if runtime is None:
            raise TypeError("LorekeeperVectorStore.from_texts needs runtime=<app.runtime.Runtime>")
        store = cls(runtime)
        store.add_texts(texts, metadatas, ids=ids, **kwargs)
        return store
