"""An MCP server over one data directory: ``search``, ``ask``, ``ingest`` and ``entity``.

Runs over stdio (``lore mcp``, for desktop agents that start it as a subprocess) or
streamable HTTP (``lore mcp --transport http --port 8765``). Each tool is a thin call
into the :class:`~workers.runtime.Runtime`; errors come back as tool errors carrying
the same message the HTTP API gives. Needs the ``mcp`` extra.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from ingest.loaders import make_document
from lore.errors import LoreError
from retrieval.contract import QueryRequest
from workers.runtime import Runtime

INSTRUCTIONS = (
    "Lorekeeper is a long-term memory. Use `search` to find passages (exact identifiers such "
    "as error codes work), `ask` for a question answered from the memory with citations, "
    "`ingest` to remember a new text, and `entity` to see what the knowledge graph knows "
    "about a name."
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
    async def ask(question: str, mode: str = "auto") -> dict[str, Any]:
        """Answer from the memory with citations; mode: auto, local or global."""
        if mode not in ("auto", "local", "global"):
            raise ToolError("mode must be auto, local or global")
        response = await runtime.ask(question, mode=mode)  # type: ignore[arg-type]
        return response.model_dump(mode="json", include={"mode", "route", "answer", "citations"})

    @server.tool()
    @_clear_errors
    async def ingest(
        id: str, text: str, title: str = "", metadata: dict[str, str] | None = None
    ) -> dict[str, Any]:
        """Store a text under an id (the same id again replaces it); searchable on return."""
        if not id.strip():
            raise ToolError("id must have a character that is not whitespace")
        limit = runtime.settings.ingest.max_document_bytes
        document = make_document(
            id, f"mcp:{id}", text, title or id, dict(metadata or {}), max_bytes=limit
        )
        report = await asyncio.to_thread(runtime.ingest, [document])
        return {
            "id": id,
            "status": "failed" if report.failed else "unchanged" if report.unchanged else "done",
            "reason": report.failed[0][1] if report.failed else None,
            "chunks": report.chunks,
        }

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
