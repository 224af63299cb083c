"""Adapters for agent frameworks (optional extras): an MCP server, a LangChain retriever."""
