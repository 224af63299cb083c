"""Issue 30: MCP over HTTP takes the HTTP API's keys and namespaces (a real `lore mcp`).

The matrix is tests/api/test_auth.py's: no key, a bad key and a revoked key are 401; a
namespace the key does not hold is 404 like one that does not exist; a key with several
namespaces must choose one (422); each key sees only its namespaces, an admin key every
existing one.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from app.keys import KeyStore
from app.namespaces import Namespaces
from lore.embedders import LocalEmbedder
from lore.models import SourceDocument
from lore.settings import load_settings
from tests import ops
from tests.conftest import ROOT
from tests.integrations.test_mcp_server import payload

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "probe", "version": "0"},
    },
}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@dataclass
class Server:
    url: str
    a: str
    ab: str
    admin: str
    revoked: str


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, local_embedder: LocalEmbedder
) -> Iterator[Server]:
    data = tmp_path_factory.mktemp("mcpauth") / "data"
    settings = load_settings(data_dir=data, auth={"enabled": True})
    namespaces = Namespaces(settings, embedder=local_embedder)
    for space in ("team-a", "team-b"):
        ops.ingest(
            namespaces.runtime(space),
            [
                SourceDocument(
                    f"{space}/runbook.md", f"{space}/runbook.md", f"{space} runbook: 504."
                )
            ],
        )
    namespaces.close()
    keys = KeyStore(data / "keys.sqlite3")
    a, _ = keys.create(["team-a"])
    ab, _ = keys.create(["team-a", "team-b"])
    admin, _ = keys.create([], admin=True)
    revoked, record = keys.create(["team-a"])
    keys.revoke(record.id)
    keys.close()
    port = _free_port()
    env = {**os.environ, "LORE_DATA_DIR": str(data), "LORE_AUTH__ENABLED": "true"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "api.cli", "mcp", "--transport", "http", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert proc.poll() is None, "lore mcp exited"
            time.sleep(0.2)
        yield Server(f"http://127.0.0.1:{port}/mcp", a, ab, admin, revoked)
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def _post(url: str, key: str | None) -> httpx.Response:
    headers = dict(ACCEPT)
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    return httpx.post(url, json=INITIALIZE, headers=headers, timeout=30)


def test_no_key_bad_key_and_revoked_key_are_401(server: Server) -> None:
    for key in (None, "lk_000000000000_not-a-real-secret-at-all", server.revoked):
        reply = _post(server.url, key)
        assert reply.status_code == 401, (key, reply.text)
        assert reply.headers["www-authenticate"] == "Bearer"
        assert reply.json()["error"] == "UnauthorizedError"


def test_another_namespace_is_404_like_a_missing_one(server: Server) -> None:
    for space in ("team-b", "nope"):
        reply = _post(f"{server.url}?namespace={space}", server.a)
        assert reply.status_code == 404, (space, reply.text)


def test_a_key_with_two_namespaces_must_choose(server: Server) -> None:
    reply = _post(server.url, server.ab)
    assert reply.status_code == 422 and "?namespace=" in reply.json()["detail"]


def _documents(url: str, key: str) -> list[str]:
    async def session() -> list[str]:
        headers = {"Authorization": f"Bearer {key}"}
        async with (
            create_mcp_http_client(headers=headers) as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):
            result: dict[str, Any] = payload(await client.call_tool("list_documents", {}))
            return [d["id"] for d in result["documents"]]

    return asyncio.run(session())


def test_each_key_sees_only_its_namespaces(server: Server) -> None:
    assert _documents(server.url, server.a) == ["team-a/runbook.md"]
    assert _documents(f"{server.url}?namespace=team-b", server.ab) == ["team-b/runbook.md"]
    assert _documents(f"{server.url}?namespace=team-b", server.admin) == ["team-b/runbook.md"]
