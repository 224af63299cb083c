"""An MCP server over one data directory: search, ask, ingest, read back, delete, entities.

Runs over stdio (``lore mcp``, for desktop agents that start it as a subprocess) or
streamable HTTP (``lore mcp --transport http --port 8765``). Each tool is a thin call
into the :class:`~app.runtime.Runtime` (the tools, their bounds and hints are in
:mod:`api.integrations.mcp_tools`); errors come back as tool errors carrying the same
message the HTTP API gives. Needs the ``mcp`` extra.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

from api.integrations.mcp_tools import Tools, register_tools
from lore import __version__

INSTRUCTIONS = (
    "Lorekeeper is a long-term memory. Use `search` to find passages (exact identifiers such "
    "as error codes work), `ask` for a question answered from the memory with citations "
    "(`cited` reads one citation in full), `ingest` to remember a new text, "
    "`list_documents` / `get_document` / `delete_document` to browse, read back and forget "
    "stored documents, `list_metadata` for the metadata keys and values that `filters` "
    "accept, and `entity` to see what the knowledge graph knows about a name."
)


def build_mcp_server(runtime: Tools) -> MCPServer:
    """The MCP server exposing ``runtime`` (a :class:`~app.runtime.Runtime`)."""
    server = MCPServer(name="lorekeeper", instructions=INSTRUCTIONS, version=__version__)
    register_tools(server, runtime)
    return server
