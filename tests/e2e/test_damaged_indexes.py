"""Issue 31: index files damaged (not removed) under a running ``lore serve`` heal.

A real server process; its index files truncated, zeroed, overwritten with garbage, or
rotted in place (same size and time, as a bad sector leaves them: noticed when the engine
fails on it). The next read or write notices, or the periodic sweep does when nothing is
asked; the indexes are rebuilt from
the store in the background, answers meanwhile are 503 with ``Retry-After`` — never a
500 — and afterwards every document is found again, a write during the damage too.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from retrieval.index_set import REBUILD_RETRY_AFTER_S
from tests.e2e.test_cli import serving

DOCS = 12


def _token(i: int) -> str:
    return f"tokdmg{'abcdefghijklmnopqrstuvwxyz'[i % 26]}{'qwxz'[i // 26]}"


def _write(client: httpx.Client, doc_id: str, token: str) -> None:
    body = {"id": doc_id, "text": f"{token} is kept in this runbook.", "wait": True}
    reply = client.post("/v1/documents", json=body)
    assert reply.status_code == 200, reply.text
    assert reply.json()["state"] == "done", reply.text


def _served(client: httpx.Client, token: str, timeout_s: float = 90) -> httpx.Response:
    """The first answer to a search for ``token`` that is not a rebuild's 503."""
    deadline = time.monotonic() + timeout_s
    while True:
        reply = client.post("/v1/memory/query", json={"search_text": token, "top_k": 3})
        assert reply.status_code != 500, reply.text
        if reply.status_code != 503 or time.monotonic() > deadline:
            return reply
        assert reply.headers["Retry-After"] == str(REBUILD_RETRY_AFTER_S), reply.text
        assert "rebuil" in reply.json()["detail"], reply.text
        time.sleep(0.1)


def _all_found(client: httpx.Client, docs: dict[str, str]) -> None:
    for doc_id, token in docs.items():
        reply = _served(client, token)
        assert reply.status_code == 200, reply.text
        assert reply.json()["results"][0]["document_id"] == doc_id, (token, reply.text)


def _files(data: Path, pattern: str) -> list[Path]:
    found = sorted(data.glob(pattern))
    assert found, pattern
    return found


def _truncate(path: Path) -> None:
    with path.open("r+b") as handle:
        handle.truncate(path.stat().st_size // 3)


def _zero(path: Path) -> None:
    path.write_bytes(b"\0" * path.stat().st_size)


def _garbage(path: Path) -> None:
    path.write_bytes(os.urandom(path.stat().st_size))


def _rot(path: Path) -> None:
    """Flip bytes in place and put the modification time back (what a bad sector does)."""
    before = path.stat()
    data = bytearray(path.read_bytes())
    for at in range(len(data) // 4, len(data) - 16):
        data[at] ^= 0xA5
    path.write_bytes(bytes(data))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


DAMAGE: list[tuple[str, str, Callable[[Path], None]]] = [
    ("dense index.bin truncated", "dense-hnswlib/index.bin", _truncate),
    ("tantivy postings zeroed", "sparse-*/*.idx", _zero),
    ("tantivy meta.json garbage", "sparse-*/meta.json", _garbage),
    ("tantivy term dictionaries truncated", "sparse-*/*.term", _truncate),
    ("tantivy postings rotted in place", "sparse-*/*.idx", _rot),
    ("dense state.json garbage", "dense-hnswlib/state.json", _garbage),
]


def test_index_files_damaged_under_a_live_server_are_rebuilt(tmp_path: Path) -> None:
    data = tmp_path / "data"
    docs = {f"doc-{i}.md": _token(i) for i in range(DOCS)}
    env = {"LORE_JOBS__ORPHAN_SWEEP_S": "3600"}  # the reads and writes must notice
    with (
        serving(data, tmp_path / "serve.log", env=env) as base,
        httpx.Client(base_url=base, timeout=60) as client,
    ):
        for doc_id, token in docs.items():
            _write(client, doc_id, token)
        _all_found(client, docs)
        for round_, (what, pattern, damage) in enumerate(DAMAGE):
            rebuilds = (tmp_path / "serve.log").read_text().count("rebuilt the")
            for path in _files(data, pattern):
                damage(path)
            if round_ % 2:  # a write first: stored, not lost, while the indexes heal
                doc_id, token = f"during-{round_}.md", _token(DOCS + round_)
                _write(client, doc_id, token)
                docs[doc_id] = token
            _all_found(client, docs)
            ready = client.get("/readyz")
            assert ready.status_code == 200, (what, ready.text)
            assert "damaged while serving" in ready.text, (what, ready.text)
            log = (tmp_path / "serve.log").read_text()
            assert log.count("rebuilt the") > rebuilds, (what, log[-3000:])
            assert "internal error" not in log, (what, log[-3000:])


def test_the_periodic_sweep_rebuilds_damaged_index_files(tmp_path: Path) -> None:
    data, log = tmp_path / "data", tmp_path / "serve.log"
    docs = {f"doc-{i}.md": _token(i) for i in range(4)}
    env = {"LORE_JOBS__ORPHAN_SWEEP_S": "0.5"}
    with serving(data, log, env=env) as base, httpx.Client(base_url=base, timeout=60) as client:
        for doc_id, token in docs.items():
            _write(client, doc_id, token)
        index_bin = data / "dense-hnswlib" / "index.bin"
        terms = _files(data, "sparse-*/*.term")
        _truncate(index_bin)
        damaged = index_bin.stat().st_size
        for path in terms:
            _zero(path)
        deadline = time.monotonic() + 60  # no read or write in between
        while log.read_text().count("rebuilt the") < 2:
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)
        assert "rebuilt the dense index" in log.read_text()
        assert index_bin.stat().st_size > damaged  # written whole again
        assert not any(path.exists() for path in terms)  # the damaged segments went whole
        _all_found(client, docs)
