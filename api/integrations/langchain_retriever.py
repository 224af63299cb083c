"""A LangChain retriever backed by Lorekeeper's HTTP API or its Python API.

    retriever = LorekeeperRetriever(url="http://localhost:8080", api_key="lk_…", top_k=5)
    retriever = LorekeeperRetriever(runtime=open_runtime(load_settings()))
    docs = retriever.invoke("HTTP 504", k=3, filters={"env": "staging"})

Per-call arguments (``invoke``, ``ainvoke``, ``batch``, ``abatch``) override the
constructor's: ``k`` (alias ``top_k``), ``filters``, ``graph_weight``,
``min_relative_score`` and ``mode``; any other keyword raises :class:`TypeError`.

``mode="local"`` (the default) returns hybrid-search passages: one ``Document`` per
chunk, metadata holding the chunk id, document id, source, title, heading, fused score
and namespace plus the document's own metadata. ``min_relative_score`` drops passages
scoring below that fraction of the best one (fused scores mean nothing across queries).

``mode="global"`` asks a corpus-wide question (map-reduce over the knowledge graph's
community reports) and returns ONE ``Document``: the answer text, with metadata
``{"mode": "global", "citations": [{id, kind, title, report_id, sources}], ...}``;
``k`` does not apply.

Over HTTP a refusal is the server's own error class (``UnauthorizedError`` for a 401,
``NotFoundError``, ``InvalidRequestError``, …) and a server out of reach a
``BackendUnavailableError`` naming the URL (:mod:`api.integrations.lore_http`, shared
with the vector store). Needs the ``langchain`` extra.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import AliasChoices, ConfigDict, Field, SecretStr, field_validator, model_validator

from api.integrations.lore_http import LoreHttp, check_url
from app.runtime import Runtime
from lore.aio import run_sync
from lore.extras import missing_extra
from retrieval.ask_contract import AskRequest, AskResponse
from retrieval.contract import QueryRequest, QueryResponse
from retrieval.queries import QueryService

try:
    from langchain_core.callbacks import (
        AsyncCallbackManagerForRetrieverRun,
        CallbackManagerForRetrieverRun,
    )
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
except ModuleNotFoundError as exc:  # the one-line error that names the extra
    raise (missing_extra(exc, "the LangChain retriever") or exc) from exc

CALL_ARGUMENTS = ("k", "top_k", "filters", "graph_weight", "min_relative_score", "mode")
Mode = Literal["local", "global"]


class LorekeeperRetriever(BaseRetriever):
    """Hybrid search results (or a global answer) as LangChain documents.

    Give ``url`` (the HTTP API) or ``runtime`` (in-process).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, populate_by_name=True)

    url: str | None = Field(None, description="the HTTP API, e.g. http://localhost:8080")
    api_key: SecretStr | None = None
    namespaces: list[str] = Field(default_factory=list, description="default: the key's")
    runtime: Any = Field(None, description="a Runtime: search in-process instead of over HTTP")
    top_k: int = Field(5, ge=1, le=100, validation_alias=AliasChoices("top_k", "k"))
    filters: dict[str, Any] | None = None
    graph_weight: float | None = Field(None, ge=0)
    min_relative_score: float | None = Field(
        None, gt=0, le=1, description="drop results below this fraction of the best score"
    )
    mode: Mode = "local"
    timeout_s: float = 30.0
    http_client: Any = Field(
        None, exclude=True, description="an httpx-style client to reuse (``request`` is called)"
    )
    async_http_client: Any = Field(
        None, exclude=True, description="an httpx.AsyncClient-style client to reuse (async calls)"
    )

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str | None) -> str | None:
        return None if url is None else check_url(url)

    @model_validator(mode="after")
    def _one_backend(self) -> LorekeeperRetriever:
        if (self.url is None) == (self.runtime is None):
            raise ValueError("give exactly one of `url` (HTTP API) or `runtime` (Python API)")
        if self.runtime is not None and not isinstance(self.runtime, Runtime):
            raise ValueError("`runtime` must be an app.runtime.Runtime")
        return self

    # -- one call's arguments ----------------------------------------------------------------

    def _call(
        self, query: str, overrides: dict[str, Any]
    ) -> tuple[Mode, QueryRequest | AskRequest]:
        """The request for ``query`` with this call's ``overrides`` applied."""
        unknown = sorted(set(overrides) - set(CALL_ARGUMENTS))
        if unknown:
            raise TypeError(
                f"LorekeeperRetriever got unknown argument(s) {', '.join(unknown)}; "
                f"it takes {', '.join(CALL_ARGUMENTS)}"
            )
        if "k" in overrides and "top_k" in overrides:
            raise TypeError("give `k` or `top_k`, not both")
        mode = overrides.get("mode", self.mode)
        if mode not in ("local", "global"):
            raise ValueError(f"mode must be 'local' or 'global', not {mode!r}")
        filters = overrides.get("filters", self.filters)
        if mode == "global":
            return mode, AskRequest(question=query, mode="global", filters=filters)
        return mode, QueryRequest(
            search_text=query,
            top_k=overrides.get("k", overrides.get("top_k", self.top_k)),
            metadata_filter=filters,
            graph_weight=overrides.get("graph_weight", self.graph_weight),
            min_relative_score=overrides.get("min_relative_score", self.min_relative_score),
        )

    # -- the two paths, each over the Python API or HTTP -------------------------------------

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        mode, request = self._call(query, kwargs)
        if self.runtime is not None:
            return run_sync(lambda: self._in_process(mode, request))
        body = request.model_dump(mode="json", exclude_none=True)
        return _documents(mode, self._http().call("POST", _PATHS[mode], json=body))

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        mode, request = self._call(query, kwargs)
        if self.runtime is not None:
            return await self._in_process(mode, request)
        body = request.model_dump(mode="json", exclude_none=True)
        return _documents(mode, await self._http().acall("POST", _PATHS[mode], json=body))

    async def _in_process(self, mode: Mode, request: QueryRequest | AskRequest) -> list[Document]:
        queries: QueryService = self.runtime.queries()
        if isinstance(request, AskRequest):
            return [answer_document(await queries.ask(request))]
        return search_documents(await queries.query(request))

    def _http(self) -> LoreHttp:
        return LoreHttp(
            str(self.url),
            api_key=self.api_key,
            namespaces=self.namespaces,
            timeout_s=self.timeout_s,
            client=self.http_client,
            async_client=self.async_http_client,
        )


_PATHS: dict[Mode, str] = {"local": "/v1/memory/query", "global": "/v1/ask"}


def _documents(mode: Mode, body: Any) -> list[Document]:
    if mode == "global":
        return [answer_document(AskResponse.model_validate(body))]
    return search_documents(QueryResponse.model_validate(body))


def search_documents(response: QueryResponse) -> list[Document]:
    """One ``Document`` per search result, the document's metadata plus where it came from."""
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
                "heading": r.heading,
                "score": r.rrf_score,
                "namespace": r.namespace,
            },
        )
        for r in response.results
    ]


def answer_document(response: AskResponse) -> Document:
    """A global answer as one ``Document``: the text, its route and citations in metadata."""
    return Document(
        page_content=response.answer,
        metadata={
            "mode": response.mode,
            "extractive": response.extractive,
            "citations": [
                {
                    "id": c.id,
                    "kind": c.kind,
                    "title": c.title,
                    "report_id": c.report_id,
                    "sources": c.sources,
                }
                for c in response.citations
            ],
            "warnings": response.warnings,
        },
    )
