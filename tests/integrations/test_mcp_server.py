"""The MCP server answering a real MCP client session over stdio (a `lore mcp` subprocess)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.client.stdio import StdioServerParameters

from tests.conftest import ROOT


def payload(result: Any) -> dict[str, Any]:
    if result.structured_content is not None:
        data: dict[str, Any] = result.structured_content
        return data.get("result", data) if set(data) == {"result"} else data
    return dict(json.loads(result.content[0].text))


def test_an_agent_ingests_then_finds_it_over_stdio(tmp_path: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "api.cli", "mcp"],
        cwd=str(ROOT),
        env={**os.environ, "LORE_DATA_DIR": str(tmp_path / "data")},
    )

    async def session() -> None:
        async with Client(params, read_timeout_seconds=120) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            assert {"search", "ask", "ingest", "entity"} <= tools
            stored = payload(
                await client.call_tool(
                    "ingest",
                    {
                        "id": "notes/ledger.md",
                        "text": "When ERR_LEDGER_FENCE appears, fail over the ledger primary.",
                        "metadata": {"team": "payments"},
                    },
                )
            )
            assert stored["status"] == "done" and stored["chunks"] == 1
            found = payload(
                await client.call_tool(
                    "search", {"query": "ERR_LEDGER_FENCE", "filters": {"team": "payments"}}
                )
            )
            assert found["results"][0]["source"] == "mcp:notes/ledger.md"
            answer = payload(
                await client.call_tool("ask", {"question": "What does ERR_LEDGER_FENCE mean?"})
            )
            assert answer["mode"] == "local" and "ERR_LEDGER_FENCE" in answer["answer"]
            assert answer["citations"][0]["sources"] == ["mcp:notes/ledger.md"]
            bad = await client.call_tool("search", {"query": "x", "filters": {"colour": "red"}})
            assert bad.is_error and "unknown filter key 'colour'" in bad.content[0].text
            # the graph knows the new text at once: ingest went through the HTTP entry point
            known = payload(await client.call_tool("entity", {"name": "ERR_LEDGER_FENCE"}))
            assert known["found"] and known["chunk_ids"]
            filtered = payload(
                await client.call_tool(
                    "ask",
                    {
                        "question": "What does ERR_LEDGER_FENCE mean?",
                        "mode": "local",
                        "filters": {"team": "payments"},
                    },
                )
            )
            assert filtered["citations"][0]["sources"] == ["mcp:notes/ledger.md"]
            wrong_mode = await client.call_tool("ask", {"question": "x", "mode": "sideways"})
            assert wrong_mode.is_error
            doc = payload(
                await client.call_tool(
                    "get_document", {"id": "notes/ledger.md", "include_chunks": True}
                )
            )
            assert doc["status"] == "done" and doc["text"].startswith("When ERR_LEDGER_FENCE")
            assert len(doc["chunk_list"]) == 1 and doc["metadata"] == {"team": "payments"}
            listed = payload(
                await client.call_tool("list_documents", {"filters": {"team": "payments"}})
            )
            assert listed["total"] == 1 and listed["documents"][0]["id"] == "notes/ledger.md"
            gone = payload(await client.call_tool("delete_document", {"id": "notes/ledger.md"}))
            assert gone == {"id": "notes/ledger.md", "deleted": True, "chunks_removed": 1}
            missing = await client.call_tool("get_document", {"id": "notes/ledger.md"})
            assert missing.is_error and "no document" in missing.content[0].text
            after = payload(await client.call_tool("search", {"query": "ERR_LEDGER_FENCE"}))
            assert all(r["source"] != "mcp:notes/ledger.md" for r in after["results"])

    asyncio.run(session())


def test_streamable_http_transport(tmp_path: Path) -> None:
    import socket
    import subprocess
    import time

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "LORE_DATA_DIR": str(tmp_path / "data")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "api.cli", "mcp", "--transport", "http", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.2)

        async def session() -> list[str]:
            async with Client(f"http://127.0.0.1:{port}/mcp", read_timeout_seconds=120) as c:
                missing = payload(await c.call_tool("entity", {"name": "nothing-here"}))
                assert missing == {"found": False, "name": "nothing-here", "suggestions": []}
                return sorted(t.name for t in (await c.list_tools()).tools)

        assert asyncio.run(session()) == [
            "ask",
            "cited",
            "delete_document",
            "entity",
            "get_document",
            "ingest",
            "list_documents",
            "list_metadata",
            "search",
        ]
    finally:
        proc.terminate()
        proc.wait(timeout=20)
