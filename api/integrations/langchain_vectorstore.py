"""Lorekeeper as a LangChain ``VectorStore``: where Chroma stands in the usual recipes.

    store = LorekeeperVectorStore(url="http://127.0.0.1:8080", api_key="lk_…")  # lore serve
    store = LorekeeperVectorStore(runtime=open_runtime(load_settings()))       # in-process
    store.add_documents([Document(page_content="…", metadata={"env": "prod"}, id="a")])
    hybrid = EnsembleRetriever(
        retrievers=[BM25Retriever.from_documents(docs), store.as_retriever()],
        weights=[0.4, 0.6],
    )

Give exactly one of ``runtime`` (the Python API) or ``url`` (a server's HTTP API, with
``api_key`` and ``namespace`` as the retriever takes them; the HTTP client and its
errors are :mod:`api.integrations.lore_http`'s). Both behave alike:

Each added ``Document`` is one Lorekeeper document (its ``id``, or a fresh one), so it
is chunked, embedded by the store's own embedder (an ``embedding`` passed to
``from_texts`` is not used), indexed for keyword and semantic search and put in the
knowledge graph; ``add_documents`` returns once they are searchable (over HTTP: the
ingest job has ended). Searches are Lorekeeper's hybrid search: a returned ``Document``
is a chunk, with the stored document's metadata and the document's id as ``id``. Scores
are fused (RRF) and only relative within one query, so relevance scores are the score
divided by the best one's (the best result has 1.0). ``get_by_ids`` returns whole stored
documents; ``delete`` forgets documents everywhere (unknown ids are ignored). Needs the
``langchain`` extra.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import quote

from pydantic import SecretStr

from api.integrations.lore_http import LoreHttp
from app.ingest import ingest as ingest_documents
from app.lifecycle import delete_documents
from app.listing import read_document
from app.runtime import Runtime
from ingest.loaders import make_document
from lore.errors import InvalidRequestError, NotFoundError, TransientError
from lore.extras import missing_extra
from lore.models import DocumentStatus
from retrieval.contract import MAX_TOP_K, QueryRequest, QueryResponse

try:
    from langchain_core.documents import Document
    from langchain_core.embeddings import Embeddings
    from langchain_core.vectorstores import VectorStore
except ModuleNotFoundError as exc:  # the one-line error that names the extra
    raise (missing_extra(exc, "the LangChain vector store") or exc) from exc

BATCH_DOCUMENTS = 100
"""Documents per ``POST /v1/documents`` (the server's default ``api.max_batch_documents``)."""
JOB_WAIT_S = 3600.0
"""Longest an ``add_texts`` over HTTP follows an ingest job the server stopped waiting for."""


class LorekeeperVectorStore(VectorStore):
    """A namespace of Lorekeeper, in-process (a :class:`Runtime`) or over HTTP, as a store."""

    def __init__(
        self,
        runtime: Runtime | None = None,
        *,
        url: str | None = None,
        api_key: SecretStr | str | None = None,
        namespace: str | None = None,
        timeout_s: float = 30.0,
        http_client: Any = None,
    ) -> None:
        """Store into and search ``runtime``, or the server at ``url`` (``lore serve``).

        Over HTTP, ``api_key`` is the server's key (with auth on), ``namespace`` the one
        to use (optional when the key holds exactly one), ``timeout_s`` the longest one
        request may take and ``http_client`` an httpx client to reuse.
        """
        if (runtime is None) == (url is None):
            raise ValueError("give exactly one of `url` (HTTP API) or `runtime` (Python API)")
        self.runtime: Runtime | None = None
        self.http: LoreHttp | None = None
        if runtime is not None:
            if not isinstance(runtime, Runtime):
                raise TypeError("`runtime` must be an app.runtime.Runtime")
            if api_key is not None or namespace is not None or http_client is not None:
                raise ValueError("api_key, namespace and http_client go with `url`, not `runtime`")
            self.runtime = runtime
        else:
            self.http = LoreHttp(
                str(url),
                api_key=api_key,
                namespaces=(namespace,) if namespace else (),
                timeout_s=timeout_s,
                client=http_client,
            )

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
        """Store each text as a document (an existing id is replaced); return the ids.

        Returns once they are searchable; a document the store refuses raises
        :class:`InvalidRequestError` with each refused id and the reason.
        """
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
        if self.http is not None:
            for start in range(0, len(items), BATCH_DOCUMENTS):
                batch = slice(start, start + BATCH_DOCUMENTS)
                self._post(self.http, chosen[batch], items[batch], metas[batch])
            return chosen
        runtime = self._runtime()
        limit = runtime.settings.ingest.max_document_bytes
        documents = [
            make_document(doc_id, doc_id, text, "", meta, max_bytes=limit)
            for doc_id, text, meta in zip(chosen, items, metas, strict=True)
        ]
        result = ingest_documents(runtime.job_services(), documents, wait=True)
        if result.report.failed:
            reasons = "; ".join(f"{doc_id}: {why}" for doc_id, why in result.report.failed)
            raise InvalidRequestError(f"not stored: {reasons}")
        return chosen

    @staticmethod
    def _post(
        http: LoreHttp, ids: list[str], texts: list[str], metas: list[dict[str, Any]]
    ) -> None:
        """One ``POST /v1/documents`` with ``wait``, followed to the job's end."""
        documents = [
            {"id": doc_id, "text": text, "metadata": meta}
            for doc_id, text, meta in zip(ids, texts, metas, strict=True)
        ]
        job = http.call("POST", "/v1/documents", json={"documents": documents, "wait": True})
        deadline = time.monotonic() + JOB_WAIT_S
        delay = 0.1
        while job["state"] == "running":  # the server stopped waiting (api.wait_timeout_s)
            if time.monotonic() >= deadline:
                raise TransientError(
                    f"ingest job {job['job_id']} still running after {JOB_WAIT_S:g} s; "
                    f"GET {http.url}/v1/jobs/{job['job_id']} tells when it ends"
                )
            time.sleep(delay)
            delay = min(delay * 2, 1.0)
            job = http.call("GET", f"/v1/jobs/{quote(job['job_id'], safe='')}")
        failed = [d for d in job["documents"] if d.get("status") == "failed"]
        if failed:
            reasons = "; ".join(f"{d['id']}: {d.get('reason')}" for d in failed)
            raise InvalidRequestError(f"not stored: {reasons}")
        if job["state"] != "done":
            why = job.get("detail", {}).get("error") or job["state"]
            raise InvalidRequestError(f"ingest job {job['job_id']} ended {job['state']}: {why}")

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> bool | None:
        """Forget the documents with these ids (unknown ids are ignored); True when done."""
        if ids is None:
            raise ValueError("give the ids to delete (deleting everything is `lore reset`)")
        if self.http is not None:
            for doc_id in ids:
                try:
                    self.http.call("DELETE", _document_path(doc_id))
                except NotFoundError:
                    continue  # never stored, or already gone
            return True
        runtime = self._runtime()
        known = [i for i in ids if runtime.store.get_document(i) is not None]
        if known:
            delete_documents(
                runtime.graph_services(), runtime.jobs(), known, indexes=runtime.indexes
            )
        return True

    # -- reading -----------------------------------------------------------------------------

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        """The stored documents with these ids (whole text), in the order found."""
        found = []
        for doc_id in ids:
            if self.http is not None:
                try:
                    stored = self.http.call(
                        "GET", _document_path(doc_id), params=[("include", "text")]
                    )
                except NotFoundError:
                    continue
                if stored["status"] != DocumentStatus.DONE.value:
                    continue
                text, metadata = stored.get("text") or "", dict(stored["metadata"])
            else:
                view = read_document(self._runtime().store, doc_id, text=True, chunks=False)
                if view is None or view.info.status is not DocumentStatus.DONE:
                    continue
                text, metadata = view.text or "", dict(view.info.metadata)
            found.append(Document(page_content=text, metadata=metadata, id=doc_id))
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
        if self.http is not None:
            body = request.model_dump(mode="json", exclude_none=True)
            response = QueryResponse.model_validate(
                self.http.call("POST", "/v1/memory/query", json=body)
            )
        else:
            response = self._runtime().queries().query_sync(request)
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

    def _runtime(self) -> Runtime:
        if self.runtime is None:  # pragma: no cover - the constructor made one of the two
            raise TypeError("this store talks HTTP")
        return self.runtime

    @classmethod
    def from_texts(
        cls,
        texts: list[str],
        embedding: Embeddings | None = None,
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        runtime: Runtime | None = None,
        url: str | None = None,
        api_key: SecretStr | str | None = None,
        namespace: str | None = None,
        timeout_s: float = 30.0,
        http_client: Any = None,
        **kwargs: Any,
    ) -> LorekeeperVectorStore:
        """A store on ``runtime`` or ``url`` holding ``texts`` (``embedding`` is not used)."""
        if runtime is None and url is None:
            raise TypeError(
                "LorekeeperVectorStore.from_texts needs url=<lore serve's address> "
                "or runtime=<app.runtime.Runtime>"
            )
        store = cls(
            runtime,
            url=url,
            api_key=api_key,
            namespace=namespace,
            timeout_s=timeout_s,
            http_client=http_client,
        )
        store.add_texts(texts, metadatas, ids=ids, **kwargs)
        return store


def _document_path(doc_id: str) -> str:
    """``/v1/documents/<id>``, the id percent-encoded (ids may hold ``/``, ``?``, ``#``)."""
    return "/v1/documents/" + quote(doc_id, safe="")
