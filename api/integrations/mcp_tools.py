"""The MCP tools: what each does, its argument bounds, its hints, and its handler.

Every argument carries its bounds in the input schema (so an agent sees them in
``tools/list``) and a call outside them is refused with a sentence naming the argument
and the bound. Each tool is annotated (``readOnlyHint``, ``destructiveHint``,
``idempotentHint``) so a client can tell browsing from forgetting.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, Any, Literal, ParamSpec, Protocol, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import Field, ValidationError

from api.integrations.mcp_answers import (
    AnswerShelf,
    cited_paragraphs,
    compact_citation,
    shaped_answer,
)
from api.routes.documents import document_out
from app import service
from app.ingest import ingest as ingest_documents
from app.lifecycle import delete_documents
from app.listing import MAX_PAGE, read_chunk, read_document
from app.readback import document_page
from graph.lookup import find_entities
from ingest.loaders import make_document
from lore.errors import LoreError, NotFoundError
from lore.models import DocumentStatus
from retrieval.ask_contract import AskRequest
from retrieval.contract import MAX_TOP_K, QueryRequest

if TYPE_CHECKING:
    from app.jobs import JobStore
    from app.services import GraphServices, JobServices
    from graph.store import GraphStore
    from lore.settings import Settings
    from lore.store import Store
    from retrieval.hybrid import HybridSearcher
    from retrieval.index_set import IndexSet
    from retrieval.queries import QueryService

P = ParamSpec("P")
R = TypeVar("R")

READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True)
# ingest replaces a document stored under the same id: destructive, and idempotent
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True)
# delete_document: a second call finds nothing to delete and changes nothing
FORGET = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True)

Filters = Annotated[
    dict[str, Any] | None,
    Field(description='metadata filter, e.g. {"env": "prod"}; keys from `list_metadata`'),
]
MetaValue = str | int | float | bool | list[str] | list[int] | list[float]
DocId = Annotated[str, Field(min_length=1, max_length=1000)]
CHUNK_TEXTS = 5


def readable_errors(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """Our errors and invalid requests reach the agent as a sentence (crashes stay generic)."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await fn(*args, **kwargs)
        except LoreError as exc:
            raise ToolError(f"{type(exc).__name__}: {exc}") from exc
        except ValidationError as exc:
            raise ToolError(f"invalid argument: {describe(exc)}") from exc

    return wrapper


def describe(exc: ValidationError) -> str:
    """A pydantic error list as one line: ``top_k: Input should be ≤ 100 (got 0)``."""
    parts = []
    for err in exc.errors(include_url=False):
        where = ".".join(str(p) for p in err["loc"]) or "value"
        parts.append(f"{where}: {err['msg']} (got {err.get('input')!r})")
    return "; ".join(parts)


class Searching(Protocol):
    """What ``search`` and ``list_metadata`` touch."""

    store: Store

    def queries(self) -> QueryService:
        """Search and questions on fresh indexes."""


class Answering(Protocol):
    """What ``ask`` and ``cited`` touch."""

    settings: Settings
    store: Store

    def queries(self) -> QueryService:
        """Search and questions on fresh indexes."""

    def graph(self) -> GraphStore:
        """Entities, relations, communities and their reports."""


class Documents(Protocol):
    """What ``ingest``, ``get_document``, ``list_documents`` and ``delete_document`` touch."""

    settings: Settings
    store: Store
    indexes: IndexSet

    def jobs(self) -> JobStore:
        """The job tables."""

    def searcher(self) -> HybridSearcher:
        """Resolves a metadata filter as a search does."""

    def job_services(self) -> JobServices:
        """What an ingest job touches."""

    def graph_services(self) -> GraphServices:
        """What the delete cascade touches."""


class Graph(Protocol):
    """What ``entity`` touches."""

    def graph(self) -> GraphStore:
        """Entities, relations, communities and their reports."""


class Tools(Searching, Answering, Documents, Graph, Protocol):
    """What the tools touch together: a :class:`~app.runtime.Runtime` is one.

    Each tool reads it when it runs, never when it is registered: over HTTP it stands
    for the runtime of the request's namespace (``api.integrations.mcp_http``).
    """


def register_tools(server: MCPServer, runtime: Tools) -> None:
    """Add every Lorekeeper tool to ``server``, each calling into ``runtime``."""
    _search_tools(server, runtime)
    _answer_tools(server, runtime, AnswerShelf())
    _document_tools(server, runtime)
    _graph_tools(server, runtime)


def _search_tools(server: MCPServer, runtime: Searching) -> None:
    """``search`` and ``list_metadata``."""

    @server.tool(annotations=READ)
    @readable_errors
    async def search(
        query: Annotated[str, Field(min_length=1, max_length=8192)],
        top_k: Annotated[int, Field(ge=1, le=MAX_TOP_K, description="results wanted")] = 5,
        filters: Filters = None,
        graph_weight: Annotated[
            float | None, Field(ge=0, le=10, description="weight of the knowledge-graph list")
        ] = None,
    ) -> dict[str, Any]:
        """Hybrid keyword + semantic search; exact identifiers (error codes) work.

        Each result has its text, source, title, heading and the document's metadata;
        `also_in` names the other documents holding the same passage (folded into it).
        """
        request = QueryRequest(
            search_text=query, top_k=top_k, metadata_filter=filters, graph_weight=graph_weight
        )
        response = await runtime.queries().query(request)
        return {
            "results": [
                {
                    "chunk_id": r.chunk_id,
                    "document_id": r.document_id,
                    "source": r.source,
                    "title": r.title,
                    "heading": r.heading,
                    "metadata": r.metadata,
                    "score": r.rrf_score,
                    "text": r.text,
                    **({"also_in": [d.source for d in r.duplicates]} if r.duplicates else {}),
                }
                for r in response.results
            ],
            "warnings": response.warnings,
        }

    @server.tool(annotations=READ)
    @readable_errors
    async def list_metadata(
        values_per_key: Annotated[int, Field(ge=1, le=100)] = 10,
    ) -> dict[str, Any]:
        """The metadata keys documents carry, each with its commonest values and counts.

        Use the keys and values in `filters` of `search`, `ask` and `list_documents`.
        """
        rows = await asyncio.to_thread(runtime.store.metadata_counts)
        keys: dict[str, dict[str, Any]] = {}
        for key, value, count in rows:
            entry = keys.setdefault(key, {"key": key, "distinct_values": 0, "values": []})
            entry["distinct_values"] += 1
            if len(entry["values"]) < values_per_key:
                entry["values"].append({"value": value, "documents": count})
        return {"keys": list(keys.values())}


def _answer_tools(server: MCPServer, runtime: Answering, shelf: AnswerShelf) -> None:
    """``ask`` and ``cited`` (which reads what ``ask`` left on ``shelf``)."""

    @server.tool(annotations=READ)
    @readable_errors
    async def ask(
        question: Annotated[str, Field(min_length=1, max_length=8192)],
        mode: Literal["auto", "local", "global"] = "auto",
        filters: Filters = None,
        max_answer_tokens: Annotated[
            int | None,
            Field(
                ge=50, le=100_000, description="answer size cap (default: ask.answer_max_tokens)"
            ),
        ] = None,
    ) -> dict[str, Any]:
        """Answer from the memory with numbered citations [n].

        The answer is cut at `max_answer_tokens` (`truncated` says so); pass its
        `answer_id` and a citation id to `cited` for the full citation, the answer's
        paragraphs citing it and the text behind it.
        """
        # the answer is written to ask.answer_max_tokens and kept whole on the shelf;
        # what this reply shows is cut at max_answer_tokens (`cited` reads past the cut)
        request = AskRequest(question=question, mode=mode, filters=filters)
        response = await runtime.queries().ask(request)
        budget = max_answer_tokens or runtime.settings.ask.answer_max_tokens
        return shaped_answer(response, shelf.keep(response), budget)

    @server.tool(annotations=READ)
    @readable_errors
    async def cited(
        answer_id: Annotated[str, Field(min_length=1, max_length=64)],
        citation_id: Annotated[int, Field(ge=1, description="the n of [n] in the answer")],
    ) -> dict[str, Any]:
        """The rest of an `ask` answer for one citation: sources, cited paragraphs, text."""
        response = shelf.get(answer_id)
        if response is None:
            raise NotFoundError(f"no answer {answer_id!r} kept (ask again)")
        citation = next((c for c in response.citations if c.id == citation_id), None)
        if citation is None:
            ids = [c.id for c in response.citations]
            raise NotFoundError(f"answer {answer_id} has no citation {citation_id}; it has {ids}")
        out = compact_citation(citation) | {
            "sources": citation.sources,
            "chunk_ids": citation.chunk_ids,
            "paragraphs": cited_paragraphs(response.answer, citation_id),
        }
        if citation.report_id is not None:
            reports = await asyncio.to_thread(runtime.graph().reports_by_id, [citation.report_id])
            if reports:
                report = reports[0]
                out["report"] = {
                    "title": report.title,
                    "summary": report.summary,
                    "findings": [f.text for f in report.findings],
                }
        else:
            chunks = [
                await asyncio.to_thread(read_chunk, runtime.store, cid)
                for cid in citation.chunk_ids[:CHUNK_TEXTS]
            ]
            out["chunks"] = [
                {"chunk_id": c.id, "source": c.source, "heading": c.heading, "text": c.text}
                for c in chunks
                if c is not None
            ]
        return out


def _document_tools(server: MCPServer, runtime: Documents) -> None:
    """``ingest``, ``get_document``, ``list_documents``, ``delete_document``."""

    @server.tool(annotations=WRITE)
    @readable_errors
    async def ingest(
        id: DocId,
        text: Annotated[str, Field(min_length=1)],
        title: Annotated[str, Field(max_length=1000)] = "",
        metadata: Annotated[
            dict[str, MetaValue] | None,
            Field(description='strings, numbers, booleans or lists: {"year": 2024}'),
        ] = None,
    ) -> dict[str, Any]:
        """Store a text under an id (the same id again replaces it).

        On return it is searchable and its entities are in the knowledge graph.
        """
        if not id.strip():
            raise ToolError("id must have a character that is not whitespace")
        limit = runtime.settings.ingest.max_document_bytes
        document = make_document(
            id, f"mcp:{id}", text, title or id, dict(metadata or {}), max_bytes=limit
        )
        services = await asyncio.to_thread(runtime.job_services)
        result = await asyncio.to_thread(ingest_documents, services, [document], wait=True)
        job = await asyncio.to_thread(service.get_job, services.jobs, result.job_id)
        if job is None:  # pragma: no cover - the job was just created
            raise NotFoundError(f"job {result.job_id} vanished")
        entry = next((d for d in job.documents if d["id"] == id), None)
        stored = await asyncio.to_thread(runtime.store.get_document, id)
        status = entry["status"] if entry else "failed"
        return {
            "id": id,
            "job_id": job.job_id,
            "status": status,
            "reason": entry.get("reason") if entry else "the job did not record the document",
            "chunks": stored.chunk_count if stored is not None and status != "failed" else 0,
        }

    @server.tool(annotations=READ)
    @readable_errors
    async def get_document(
        id: DocId, include_text: bool = True, include_chunks: bool = False
    ) -> dict[str, Any]:
        """Read a stored document back: status (or failure reason), metadata, text, chunks.

        `id` may be a document id or the `source` a search result printed.
        """
        view = await asyncio.to_thread(
            read_document, runtime.store, id, text=include_text, chunks=include_chunks
        )
        if view is None:
            raise NotFoundError(f"no document {id!r}")
        return document_out(view.info, view).model_dump(mode="json", exclude_none=True)

    @server.tool(annotations=READ)
    @readable_errors
    async def list_documents(
        offset: Annotated[int, Field(ge=0)] = 0,
        limit: Annotated[int, Field(ge=1, le=MAX_PAGE)] = 50,
        status: Literal["pending", "done", "failed"] | None = None,
        filters: Filters = None,
        prefix: Annotated[str, Field(max_length=1000)] = "",
    ) -> dict[str, Any]:
        """Stored documents by id, a page at a time, filtered by metadata and status."""
        page = await asyncio.to_thread(
            document_page,
            runtime.store,
            runtime.searcher,
            offset=offset,
            limit=limit,
            status=DocumentStatus(status) if status else None,
            metadata_filter=filters,
            prefix=prefix,
        )
        return {
            "total": page.total,
            "offset": page.offset,
            "limit": page.limit,
            "documents": [
                {"id": d.id, "source": d.source, "title": d.title, "status": d.status.value}
                for d in page.documents
            ],
        }

    @server.tool(annotations=FORGET)
    @readable_errors
    async def delete_document(id: DocId) -> dict[str, Any]:
        """Forget a document: store, search indexes and its graph provenance. Not undoable."""
        target = await asyncio.to_thread(runtime.store.resolve_document_id, id)
        if target is None:
            raise NotFoundError(f"no document {id!r}")
        report = await asyncio.to_thread(
            lambda: delete_documents(
                runtime.graph_services(), runtime.jobs(), [target], indexes=runtime.indexes
            )
        )
        return {"id": target, "deleted": True, "chunks_removed": report.chunks}


def _graph_tools(server: MCPServer, runtime: Graph) -> None:
    """``entity``."""

    @server.tool(annotations=READ)
    @readable_errors
    async def entity(
        name: Annotated[str, Field(min_length=1, max_length=300)],
        neighbours: Annotated[int, Field(ge=0, le=200)] = 10,
    ) -> dict[str, Any]:
        """What the knowledge graph knows about a name: type, description, neighbours.

        An unknown name comes back with `suggestions`: near spellings that exist.
        """
        graph = runtime.graph()
        found = await asyncio.to_thread(graph.entity, name)
        if found is None:
            near = await asyncio.to_thread(find_entities, graph, name, 5)
            return {"found": False, "name": name, "suggestions": [e.name for e in near]}
        near_by = await asyncio.to_thread(graph.neighbours, name, neighbours)
        return {
            "found": True,
            "name": found.name,
            "type": found.type,
            "description": found.description,
            "chunk_ids": list(found.chunk_ids[:20]),
            "neighbours": [{"name": e.name, "weight": w} for e, w in near_by],
        }
