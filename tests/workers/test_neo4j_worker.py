"""One real Celery worker with ``LORE_GRAPH__BACKEND=neo4j``: ingest, extract, refresh.

The worker and the CLI share the Neo4j server at ``NEO4J_URI`` (CI: the ArcadeDB Bolt
stand-in for Neo4j) in a namespace of their own. ``lore ingest --wait`` queues the job;
the worker embeds, extracts into Neo4j and marks the documents done; ``lore graph
refresh`` runs on the worker too. The CLI then reads the graph the worker wrote: ``lore
graph show`` and a global ``lore ask``; an edited document reaches its community report.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from graph.models import entity_key
from tests.conftest import CORPUS, global_citations_ok
from tests.e2e.test_cli import lore
from tests.neo4j_server import Neo4jServer, fresh_namespace, neo4j_server
from tests.workers.conftest import Workers

pytestmark = [pytest.mark.workers, pytest.mark.neo4j]

EDITED = Path("notification-worker") / "runbook-queue-backlog.md"
CANARY = "E_NEO4J_WORKER_CANARY"


@pytest.fixture(scope="module")
def setup(
    tmp_path_factory: pytest.TempPathFactory, broker_env: dict[str, str]
) -> Iterator[tuple[Path, dict[str, str], Neo4jServer]]:
    server = neo4j_server()
    namespace = fresh_namespace("e2e-worker")
    root = tmp_path_factory.mktemp("neo4j-worker")
    data = root / "data"
    env = {
        **broker_env,
        **server.lore_env(namespace),
        "LORE_DATA_DIR": str(data),
        "LORE_EMBEDDING__THREADS": "1",
    }
    workers = Workers(env=env, logs=root)
    workers.start("a")
    try:
        workers.wait_ready("a")
        yield data, env, server
    finally:
        workers.stop_all()
        from graph.stores.neo4j import Neo4jGraphStore

        store = Neo4jGraphStore(**server.store_options(namespace))
        store.drop()
        store.close()


def _json(data: Path, env: dict[str, str], *args: str) -> dict[str, object]:
    done = lore(data, *args, "--json", **env)
    assert done.returncode == 0, done.stderr
    body: dict[str, object] = json.loads(done.stdout)
    return body


def test_ingest_extract_refresh_and_ask_through_a_worker(
    setup: tuple[Path, dict[str, str], Neo4jServer],
) -> None:
    data, env, server = setup
    extra = data.parent / "extra"
    (extra / EDITED).parent.mkdir(parents=True)
    shutil.copy(CORPUS / "production" / EDITED, extra / EDITED)
    for folder in (CORPUS / "production", extra):
        report = _json(data, env, "ingest", str(folder), "--meta", "env=production", "--wait")
        assert report["state"] == "done" and report["failed"] == [], report

    from graph.stores.neo4j import Neo4jGraphStore

    store = Neo4jGraphStore(**server.store_options(env["LORE_GRAPH__NEO4J_NAMESPACE"]))
    db = sqlite3.connect(data / "lore.sqlite3")
    try:
        chunks = db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
        assert store.counts()["extracted_chunks"] == chunks > 30  # the worker extracted all
    finally:
        db.close()
        store.close()

    built = _json(data, env, "graph", "refresh", "--rebuild")
    assert built["state"] == "done", built
    assert isinstance(built["communities"], int) and built["communities"] > 20

    shown = _json(data, env, "graph", "show", "E_LEDGER_LOCK_TIMEOUT")
    assert shown["type"] == "error_code" and shown["chunk_ids"]
    question = "What recurring root causes show up across the incident postmortems?"
    body = _json(data, env, "ask", question)
    assert body["mode"] == "global"
    citations = body["citations"]
    assert isinstance(citations, list) and citations
    assert global_citations_ok(citations), citations

    edited = extra / EDITED
    edited.write_text(
        edited.read_text() + f"\n\nSince the last incident {CANARY} pages the "
        "notification-worker on-call before the queue backlog alert fires.\n"
    )
    again = _json(data, env, "ingest", str(extra), "--meta", "env=production", "--wait")
    assert again["state"] == "done" and again["failed"] == [], again
    refreshed = _json(data, env, "graph", "refresh")
    assert refreshed["state"] == "done", refreshed
    stale, fresh, communities = (
        int(str(refreshed[k])) for k in ("stale", "refreshed", "communities")
    )
    recovered = int(str(refreshed["recovered"]))  # stored again with the same words
    assert fresh + recovered <= stale
    assert refreshed["unchanged"] == communities - fresh - recovered
    # the edit's reports were rewritten by the worker's cascade (issue 13) or by the refresh
    cascade = again.get("graph") or {}
    assert isinstance(cascade, dict)
    assert int(str(cascade.get("reports_refreshed", 0))) + fresh > 0

    canary_chunks = set(_json(data, env, "graph", "show", CANARY)["chunk_ids"])
    listed = lore(data, "graph", "communities", "--json", **env)
    leaf = max(
        (c for c in json.loads(listed.stdout) if entity_key(CANARY) in c["members"]),
        key=lambda c: c["level"],
    )
    reports = json.loads(lore(data, "graph", "reports", "--json", **env).stdout)
    assert canary_chunks <= set(
        next(r for r in reports if r["community_id"] == leaf["id"])["chunk_ids"]
    )
