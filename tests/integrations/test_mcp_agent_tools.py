"""MCP tools as an agent meets them over stdio: bounds, reasons, hints, sizes (issue 32)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.client.stdio import StdioServerParameters

from app.runtime import Runtime
from lore import __version__
from tests.conftest import ROOT
from tests.integrations.test_mcp_server import payload


def over_stdio(data_dir: Path, body: Callable[[Client], Awaitable[None]]) -> None:
    """Run ``body`` against a ``lore mcp`` subprocess serving ``data_dir``."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "api.cli", "mcp"],
        cwd=str(ROOT),
        env={**os.environ, "LORE_DATA_DIR": str(data_dir)},
    )

    async def session() -> None:
        async with Client(params, read_timeout_seconds=180) as client:
            await body(client)

    asyncio.run(session())


def error_text(result: Any) -> str:
    assert result.is_error, result
    return str(result.content[0].text)


def test_bounds_hints_version_and_readable_errors(tmp_path: Path) -> None:
    async def body(client: Client) -> None:
        assert client.server_info is not None and client.server_info.version == __version__
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert {"list_metadata", "cited"} <= set(tools)
        for tool in tools.values():
            hints = tool.annotations
            assert hints is not None, tool.name
            assert None not in (
                hints.read_only_hint,
                hints.destructive_hint,
                hints.idempotent_hint,
            ), tool.name
        assert tools["delete_document"].annotations.destructive_hint is True  # type: ignore[union-attr]
        assert tools["search"].annotations.read_only_hint is True  # type: ignore[union-attr]
        top_k = tools["search"].input_schema["properties"]["top_k"]
        assert (top_k["minimum"], top_k["maximum"]) == (1, 1000)
        for bad in (0, 100000):
            text = error_text(await client.call_tool("search", {"query": "x", "top_k": bad}))
            assert "top_k" in text and ("greater than or equal to 1" in text or "1000" in text)
        text = error_text(await client.call_tool("search", {"query": ""}))
        assert "query" in text and "at least 1 character" in text
        text = error_text(await client.call_tool("list_documents", {"limit": 0}))
        assert "limit" in text
        text = error_text(await client.call_tool("cited", {"answer_id": "nope", "citation_id": 1}))
        assert "no answer 'nope' kept" in text

    over_stdio(tmp_path / "data", body)


def test_typed_metadata_listing_headings_and_near_names(tmp_path: Path) -> None:
    async def body(client: Client) -> None:
        text = (
            "# Ledger\n\n## Fencing\n\nWhen ERR_LEDGER_FENCE appears, fail over the ledger "
            "primary and page the payments on-call."
        )
        stored = payload(
            await client.call_tool(
                "ingest",
                {
                    "id": "notes/ledger.md",
                    "text": text,
                    "metadata": {"year": 2024, "team": "payments", "tags": ["db", "ha"]},
                },
            )
        )
        assert stored["status"] == "done", stored
        for i, team in enumerate(("payments", "payments", "search")):
            await client.call_tool(
                "ingest",
                {
                    "id": f"n{i}.md",
                    "text": f"note {i} about HTTP 50{i}",
                    "metadata": {"team": team},
                },
            )
        listed = payload(await client.call_tool("list_metadata", {}))
        keys = {k["key"]: k for k in listed["keys"]}
        assert set(keys) == {"year", "team", "tags"}
        assert keys["team"]["values"][0] == {"value": "payments", "documents": 3}
        assert keys["team"]["distinct_values"] == 2
        assert keys["year"]["values"] == [{"value": "2024", "documents": 1}]
        found = payload(
            await client.call_tool(
                "search", {"query": "ERR_LEDGER_FENCE", "filters": {"year": 2024}}
            )
        )
        top = found["results"][0]
        assert top["source"] == "mcp:notes/ledger.md"
        assert top["heading"] and "Fencing" in top["heading"]
        assert top["metadata"]["year"] == 2024 and top["metadata"]["team"] == "payments"
        near = payload(await client.call_tool("entity", {"name": "ERR_LEDGER_FENSE"}))
        assert near["found"] is False and "ERR_LEDGER_FENCE" in near["suggestions"]

    over_stdio(tmp_path / "data", body)


def test_answers_are_bounded_and_citations_fetched_by_id(demo_graph_runtime: Runtime) -> None:
    question = "How do the services handle database timeouts?"
    sizes: dict[str, int] = {}

    async def body(client: Client) -> None:
        full = payload(await client.call_tool("ask", {"question": question, "mode": "global"}))
        sizes["default"] = len(json.dumps(full))
        # the last key point (passages of pages no report covers may follow it)
        last = max(c["id"] for c in full["citations"] if c["kind"] == "report")
        bound = 300  # halved until the bound cuts that key point off (the graph decides)
        while True:
            small = payload(
                await client.call_tool(
                    "ask", {"question": question, "mode": "global", "max_answer_tokens": bound}
                )
            )
            listed = {c["id"] for c in small["citations"]}
            if last not in listed or bound <= 50:
                break
            bound //= 2
        sizes["bounded"] = len(json.dumps(small))
        assert small["truncated"] is True and len(small["answer"]) <= bound * 4
        assert small["answer_tokens_total"] > bound
        assert listed and all(f"{n}]" in small["answer"] for n in listed)
        assert "chunk_ids" not in small["citations"][0]
        assert small["citations_total"] > len(listed)  # the rest is cut off, not lost
        assert last > max(listed)
        rest = payload(
            await client.call_tool("cited", {"answer_id": small["answer_id"], "citation_id": last})
        )
        assert rest["id"] == last and rest["kind"] == "report" and rest["paragraphs"]
        assert all(str(last) in p for p in rest["paragraphs"])
        assert rest["report"]["title"] == rest["title"] and rest["report"]["summary"]
        assert rest["chunk_ids"] and rest["sources"]
        missing = error_text(
            await client.call_tool("cited", {"answer_id": small["answer_id"], "citation_id": 999})
        )
        assert "has no citation 999" in missing

    over_stdio(demo_graph_runtime.data_dir, body)
    print("global answer over MCP, JSON bytes:", sizes)
    assert sizes["bounded"] < sizes["default"]
