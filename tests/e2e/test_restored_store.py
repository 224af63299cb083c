"""Issue 31: indexes that know what they reflect.

A store restored from a backup repeats the store id and, after more writes, the
sequence numbers the indexes recorded: the watermark's digest of the change log tells
them apart, so the indexes are rebuilt with a reason. Index directories removed under a
running process are rebuilt from the store in the background, noticed on the next read or
write: meanwhile searches get a 503 with Retry-After, never a 500.
"""

from __future__ import annotations

import shutil
import sqlite3
import time
from pathlib import Path

from fastapi.testclient import TestClient
from httpx import Response

from api.app import create_app
from api.cli_status import status_info
from app.namespaces import Namespaces
from app.runtime import Runtime
from lore.embedders import LocalEmbedder
from lore.models import SourceDocument
from lore.settings import load_settings
from retrieval.contract import QueryRequest
from retrieval.index_set import LOCK, REBUILD_RETRY_AFTER_S, REBUILDING
from retrieval.indexes import index_lock
from tests import ops
from tests.conftest import make_runtime


def _token(name: str, i: int) -> str:
    return f"tok{name.lower()}{'abcde'[i]}"  # one word for every analyzer


def _batch(name: str) -> list[SourceDocument]:
    return [
        SourceDocument(f"{name}-{i}.md", f"{name}-{i}.md", f"{_token(name, i)} lives here.", "", {})
        for i in range(5)
    ]


def _hits(runtime: Runtime, text: str) -> list[str]:
    request = QueryRequest(search_text=text, top_k=5, hybrid_params={"dense_weight": 0.0})
    return [hit.document_id for hit in runtime.queries().query_sync(request).results]


def _remove(directory: Path) -> None:
    """Remove an index directory at once (a server that heals it must not race a slow rm)."""
    gone = directory.with_name(directory.name + ".removed")
    directory.rename(gone)
    shutil.rmtree(gone)


def _backup(source: Path, target: Path) -> None:
    with sqlite3.connect(source) as live, sqlite3.connect(target) as copy:
        live.backup(copy)
    live.close()
    copy.close()


def test_a_store_restored_from_a_backup_rebuilds_the_indexes(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    data = tmp_path / "data"
    runtime = make_runtime(data, local_embedder)
    ops.ingest(runtime, _batch("BASE"), extract_graph=False)
    _backup(data / "lore.sqlite3", tmp_path / "backup.sqlite3")
    ops.ingest(runtime, _batch("ONE"), extract_graph=False)
    assert _hits(runtime, _token("ONE", 3))[0] == "ONE-3.md"
    runtime.close()
    for suffix in ("", "-wal", "-shm"):  # copy the backup back, as an operator would
        (data / f"lore.sqlite3{suffix}").unlink(missing_ok=True)
    shutil.copy(tmp_path / "backup.sqlite3", data / "lore.sqlite3")
    runtime = make_runtime(data, local_embedder)
    ops.ingest(runtime, _batch("TWO"), extract_graph=False)  # reaches the same seq as batch ONE
    assert _hits(runtime, _token("TWO", 2))[0] == "TWO-2.md"
    assert _hits(runtime, _token("ONE", 3)) == []  # nothing of the lost batch, nothing wrong
    indexes = status_info(runtime)["indexes"]
    assert indexes["current"]
    for name in ("sparse", "dense"):
        assert "restored from a backup" in indexes[name]["health"], indexes
    runtime.close()
    again = make_runtime(data, local_embedder)  # the rebuilt indexes are trusted next time
    assert status_info(again)["indexes"]["sparse"]["health"] == "ok"
    assert _hits(again, _token("TWO", 4))[0] == "TWO-4.md"
    again.close()


def _until_served(client: TestClient, method: str, path: str, **kwargs: object) -> Response:
    """The first answer that is not a 503 of a rebuild (which must carry Retry-After)."""
    deadline = time.monotonic() + 60
    while True:
        reply = client.request(method, path, **kwargs)  # type: ignore[arg-type]
        if reply.status_code != 503 or time.monotonic() > deadline:
            return reply
        assert reply.headers["Retry-After"] == str(REBUILD_RETRY_AFTER_S), reply.text
        assert "rebuil" in reply.text, reply.text
        time.sleep(0.05)


def test_index_directories_removed_under_a_live_server_heal(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    settings = load_settings(data_dir=tmp_path)
    app = create_app(settings, Namespaces(settings, embedder=local_embedder))
    query = {"search_text": "E_LIVE_1", "top_k": 3}
    with TestClient(app, raise_server_exceptions=False) as client:
        first = {"id": "live-1.md", "text": "E_LIVE_1 before the removal", "wait": True}
        assert client.post("/v1/documents", json=first).json()["state"] == "done"
        assert client.post("/v1/memory/query", json=query).json()["total_retrieved"] == 1
        for directory in [*tmp_path.glob("sparse-*"), *tmp_path.glob("dense-*")]:
            _remove(directory)
        second = {"id": "live-2.md", "text": "E_LIVE_2 after the removal", "wait": True}
        reply = client.post("/v1/documents", json=second)
        assert reply.status_code == 200, reply.text
        assert reply.json()["state"] == "done"
        for text, doc in (("E_LIVE_1", "live-1.md"), ("E_LIVE_2", "live-2.md")):
            body = {"search_text": text, "top_k": 3}
            found = _until_served(client, "POST", "/v1/memory/query", json=body)
            assert found.status_code == 200, found.text
            assert found.json()["results"][0]["document_id"] == doc
        ready = _until_served(client, "GET", "/readyz")
        assert ready.status_code == 200, ready.text
        assert "removed while serving" in ready.text
        assert any(tmp_path.glob("sparse-*/meta.json"))  # written again


def test_a_rebuild_runs_in_the_background_and_searches_get_503_meanwhile(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    settings = load_settings(data_dir=tmp_path)
    app = create_app(settings, Namespaces(settings, embedder=local_embedder))
    with TestClient(app, raise_server_exceptions=False) as client:
        first = {"id": "bg-1.md", "text": "E_BG_ONE before the removal", "wait": True}
        assert client.post("/v1/documents", json=first).json()["state"] == "done"
        for directory in [*tmp_path.glob("sparse-*"), *tmp_path.glob("dense-*")]:
            _remove(directory)
        # another process writing the index files holds their lock: the rebuild waits
        with index_lock(tmp_path / LOCK):
            started = time.monotonic()
            busy = client.post("/v1/memory/query", json={"search_text": "E_BG_ONE"})
            assert busy.status_code == 503, busy.text
            assert busy.headers["Retry-After"] == str(REBUILD_RETRY_AFTER_S)
            assert busy.json()["error"] == "IndexRebuildingError"
            assert "removed while serving" in busy.json()["detail"]
            ready = client.get("/readyz")
            assert ready.status_code == 503 and "Retry-After" in ready.headers, ready.text
            assert ready.json()["checks"]["indexes"] == REBUILDING
            second = {"id": "bg-2.md", "text": "E_BG_TWO during the rebuild", "wait": True}
            stored = client.post("/v1/documents", json=second)
            assert stored.status_code == 200 and stored.json()["state"] == "done", stored.text
            assert time.monotonic() - started < 30  # nothing waited for the rebuild
        for text, doc in (("E_BG_ONE", "bg-1.md"), ("E_BG_TWO", "bg-2.md")):
            body = {"search_text": text, "top_k": 3}
            found = _until_served(client, "POST", "/v1/memory/query", json=body)
            assert found.status_code == 200, found.text
            assert found.json()["results"][0]["document_id"] == doc
        assert _until_served(client, "GET", "/readyz").status_code == 200


def test_the_periodic_sweep_rebuilds_removed_index_directories(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    from app.orphans import OrphanSweep

    runtime = make_runtime(tmp_path, local_embedder)
    ops.ingest(runtime, _batch("SWEEP"), extract_graph=False)
    assert _hits(runtime, _token("SWEEP", 1))[0] == "SWEEP-1.md"
    for directory in [*tmp_path.glob("sparse-*"), *tmp_path.glob("dense-*")]:
        _remove(directory)
    sweep = OrphanSweep(runtime.store, runtime.jobs(), runtime.indexes, 0)
    assert sweep.step()  # no read or write in between
    assert any(tmp_path.glob("sparse-*/meta.json")) and any(tmp_path.glob("dense-*/index.bin"))
    assert "removed while serving" in runtime.indexes.state()["dense"]["health"]  # type: ignore[index]
    assert _hits(runtime, _token("SWEEP", 2))[0] == "SWEEP-2.md"
    runtime.close()
