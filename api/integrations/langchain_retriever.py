"""A LangChain retriever backed by Lorekeeper's HTTP API or its Python API.

    retriever = LorekeeperRetriever(url="http://localhost:8080", api_key="lk_…", top_k=5)
    retriever = LorekeeperRetriever(runtime=open_runtime(load_settings()))
    docs = retriever.invoke("HTTP 504 in production")

Each result becomes a ``Document`` whose metadata holds the chunk id, source, title,
fused score and namespace, plus the document's own metadata. Needs the ``langchain`` extra.
"""

from __future__ import annotations

from typing import Any

import httpx
from pydantic import ConfigDict, Field, SecretStr, model_validator

from app.runtime import Runtime
from lore.aio import run_sync
from lore.errors import InvalidRequestError
from lore.extras import missing_extra
from retrieval.contract import QueryRequest, QueryResponse

try:
    from langchain_core.callbacks import (
        AsyncCallbackManagerForRetrieverRun,
        CallbackManagerForRetrieverRun,
    )
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
except ModuleNotFoundError as exc:  # the one-line error that names the extra
    raise (missing_extra(exc, "the LangChain retriever") or exc) from exc


class LorekeeperRetriever(BaseRetriever):
    """Hybrid search results as LangChain documents (give ``url`` or ``runtime``)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    url: str | None = Field(None, description="the HTTP API, e.g. http://localhost:8080")
    api_key: SecretStr | None = None
    namespaces: list[str] = Field(default_factory=list, description="default: the key's")
    runtime: Any = Field(None, description="a Runtime: search in-process instead of over HTTP")
    top_k: int = Field(5, ge=1, le=100)
    filters: dict[str, Any] | None = None
    timeout_s: float = 30.0
    http_client: Any = Field(
        None, exclude=True, description="an httpx-style client to reuse (``post`` is called)"
    )
    async_http_client: Any = Field(
        None, exclude=True, description="an httpx.AsyncClient-style client to reuse (async calls)"
    )

    @model_validator(mode="after")
    def _one_backend(self) -> LorekeeperRetriever:
        if (self.url is None) == (self.runtime is None):
            raise ValueError("give exactly one of `url` (HTTP API) or `runtime` (Python API)")
        if self.runtime is not None and not isinstance(self.runtime, Runtime):
            raise ValueError("`runtime` must be an app.runtime.Runtime")
        return self

    def _request(self, query: str) -> QueryRequest:
        return QueryRequest(search_text=query, top_k=self.top_k, metadata_filter=self.filters)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        if self.runtime is not None:
            request = self._request(query)
            return _documents(run_sync(lambda: self.runtime.query(request)))
        client = self.http_client or httpx.Client(base_url=str(self.url), timeout=self.timeout_s)
        try:
            reply = client.post(
                "/v1/memory/query",
                json=self._request(query).model_dump(mode="json", exclude_none=True),
                params=[("namespace", n) for n in self.namespaces],
                headers=self._headers(),
            )
        finally:
            if self.http_client is None:
                client.close()
        return _documents(_parse(reply))

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        if self.runtime is not None:
            return _documents(await self.runtime.query(self._request(query)))
        client = self.async_http_client or httpx.AsyncClient(
            base_url=str(self.url), timeout=self.timeout_s
        )
        try:
            reply = await client.post(
                "/v1/memory/query",
                json=self._request(query).model_dump(mode="json", exclude_none=True),
                params=[("namespace", n) for n in self.namespaces],
                headers=self._headers(),
            )
        finally:
            if self.async_http_client is None:
                await client.aclose()
        return _documents(_parse(reply))

    def _headers(self) -> dict[str, str]:
        if self.api_key is None:
            return {}
        return {"Authorization": f"Bearer {self.api_key.get_secret_value()}"}


def _parse(reply: Any) -> QueryResponse:
    if reply.status_code != 200:
        try:
            detail = reply.json().get("detail", reply.text)
        except ValueError:
            detail = reply.text
        raise InvalidRequestError(f"Lorekeeper answered {reply.status_code}: {detail}")
    return QueryResponse.model_validate(reply.json())


def _documents(response: QueryResponse) -> list[Document]:
    return [
        Document(
            page_content=r.text,
            id=r.chunk_id,
            metadata={
                **r.metadata,
                "chunk_id": r.chunk_id,
                "document_id": r.document_id,
                "source": r.source,
                "title": r.title,
                "score": r.rrf_score,
                "namespace": r.namespace,
            },
        )
        for r in response.results
    ]
