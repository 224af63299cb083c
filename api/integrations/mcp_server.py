"""An MCP server over one data directory: search, ask, ingest, read back, delete, entities.

Runs over stdio (``lore mcp``, for desktop agents that start it as a subprocess) or
streamable HTTP (``lore mcp --transport http --port 8765``). Each tool is a thin call
into the :class:`~app.runtime.Runtime`; errors come back as tool errors carrying
the same message the HTTP API gives. Needs the ``mcp`` extra.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import Any, Literal, ParamSpec, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from api.routes.documents import document_out
from app import service
from app.ingest import ingest as ingest_documents
from app.listing import MAX_PAGE, read_document
from app.readback import document_page
from app.runtime import Runtime
from ingest.loaders import make_document
from lore.errors import LoreError, NotFoundError
from lore.models import DocumentStatus
from retrieval.contract import QueryRequest

INSTRUCTIONS = (
    "Lorekeeper is a long-term memory. Use `search` to find passages (exact identifiers such "
    "as error codes work), `ask` for a question answered from the memory with citations, "
    "`ingest` to remember a new text, `list_documents` / `get_document` / `delete_document` "
    "to browse, read back and forget stored documents, and `entity` to see what the "
    "knowledge graph knows about a name."
)


P = ParamSpec("P")
R = TypeVar("R")


def _clear_errors(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """Our errors reach the agent with their message (others stay generic, logged here)."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await fn(*args, **kwargs)
        except LoreError as exc:
            raise ToolError(f"{type(exc).__name__}: {exc}") from exc

    return wrapper


def build_mcp_server(runtime: Runtime) -> MCPServer:
    """The MCP server exposing ``runtime``."""
    server = MCPServer(name="lorekeeper", instructions=INSTRUCTIONS)

    @server.tool()
    @_clear_errors
    async def search(
        query: str, top_k: int = 5, filters: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Hybrid keyword + semantic search. `filters` matches metadata, e.g. {"env": "prod"}."""
        request = QueryRequest(search_text=query, top_k=top_k, metadata_filter=filters)
        response = await runtime.query(request)
        return {
            "results": [
                {
                    "chunk_id": r.chunk_id,
                    "source": r.source,
                    "title": r.title,
                    "score": r.rrf_score,
                    "text": r.text,
                }
                for r in response.results
            ],
            "warnings": response.warnings,
        }

    @server.tool()
    @_clear_errors
    async def ask(
        question: str,
        mode: Literal["auto", "local", "global"] = "auto",
        filters: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Answer from the memory with citations. `filters` matches metadata as in `search`."""
        response = await runtime.ask(question, mode=mode, filters=filters)
        return response.model_dump(mode="json", include={"mode", "route", "answer", "citations"})

    @server.tool()
    @_clear_errors
    async def ingest(
        id: str, text: str, title: str = "", metadata: dict[str, str] | None = None
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
        result = await asyncio.to_thread(ingest_documents, runtime, [document], wait=True)
        job = await asyncio.to_thread(service.get_job, runtime, result.job_id)
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

    @server.tool()
    @_clear_errors
    async def get_document(
        id: str, include_text: bool = True, include_chunks: bool = False
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

    @server.tool()
    @_clear_errors
    async def list_documents(
        offset: int = 0,
        limit: int = 50,
        status: Literal["pending", "done", "failed"] | None = None,
        filters: dict[str, Any] | None = None,
        prefix: str = "",
    ) -> dict[str, Any]:
        """Stored documents by id, a page at a time, filtered by metadata and status."""
        page = await asyncio.to_thread(
            document_page,
            runtime,
            offset=max(0, offset),
            limit=max(1, min(limit, MAX_PAGE)),
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

    @server.tool()
    @_clear_errors
    async def delete_document(id: str) -> dict[str, Any]:
        """Forget a document: store, search indexes and its graph provenance."""
        target = await asyncio.to_thread(runtime.store.resolve_document_id, id)
        if target is None:
            raise NotFoundError(f"no document {id!r}")
        report = await asyncio.to_thread(runtime.delete, target)
        return {"id": target, "deleted": True, "chunks_removed": report.chunks}

    @server.tool()
    @_clear_errors
    async def entity(name: str) -> dict[str, Any]:
        """What the knowledge graph knows about a name: type, description, neighbours."""
        graph = runtime.graph()
        found = await asyncio.to_thread(graph.entity, name)
        if found is None:
            return {"found": False, "name": name}
        neighbours = await asyncio.to_thread(graph.neighbours, name, 10)
        return {
            "found": True,
            "name": found.name,
            "type": found.type,
            "description": found.description,
            "chunk_ids": list(found.chunk_ids[:20]),
            "neighbours": [{"name": e.name, "weight": w} for e, w in neighbours],
        }

    return server
