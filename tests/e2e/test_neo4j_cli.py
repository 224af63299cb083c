"""``lore`` end to end with ``LORE_GRAPH__BACKEND=neo4j``: the embedded e2e's assertions.

Runs against the server at ``NEO4J_URI`` (CI: the ArcadeDB Bolt stand-in for Neo4j,
see ``tests/neo4j_server.py``), in a namespace of its own, dropped afterwards: ingest the
demo corpus, ``lore graph build``, ``lore graph show`` / ``communities`` / ``export``,
``lore ask`` global, then an edited document re-ingested and ``lore graph refresh``.
"""

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

pytestmark = pytest.mark.neo4j

EDITED = Path("notification-worker") / "runbook-queue-backlog.md"
CANARY = "E_NEO4J_REFRESH_CANARY"


@pytest.fixture(scope="module")
def server() -> Neo4jServer:
    return neo4j_server()


@pytest.fixture(scope="module")
def graph_env(server: Neo4jServer) -> Iterator[dict[str, str]]:
    namespace = fresh_namespace("e2e-cli")
    yield server.lore_env(namespace)
    from graph.stores.neo4j import Neo4jGraphStore

    store = Neo4jGraphStore(**server.store_options(namespace))
    store.drop()
    store.close()


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory, graph_env: dict[str, str]) -> Path:
    root = tmp_path_factory.mktemp("neo4j-cli")
    directory = root / "data"
    extra = root / "extra"
    (extra / EDITED).parent.mkdir(parents=True)
    shutil.copy(CORPUS / "production" / EDITED, extra / EDITED)
    for folder, env in ((CORPUS / "production", "production"), (CORPUS / "staging", "staging")):
        done = lore(directory, "ingest", str(folder), "--meta", f"env={env}", **graph_env)
        assert done.returncode == 0, done.stderr
    done = lore(directory, "ingest", str(extra), "--meta", "env=production", **graph_env)
    assert done.returncode == 0, done.stderr
    built = lore(directory, "graph", "build", **graph_env)
    assert built.returncode == 0, built.stderr
    assert "entities" in built.stdout and "communities" in built.stdout
    assert "LLM calls: 0" in built.stdout
    return directory


def test_the_graph_lives_on_the_server_not_in_sqlite(
    data: Path, graph_env: dict[str, str], server: Neo4jServer
) -> None:
    from graph.stores.neo4j import Neo4jGraphStore

    store = Neo4jGraphStore(**server.store_options(graph_env["LORE_GRAPH__NEO4J_NAMESPACE"]))
    try:
        counts = store.counts()
    finally:
        store.close()
    assert counts["entities"] > 100 and counts["communities"] > 50
    db = sqlite3.connect(data / "lore.sqlite3")
    try:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "entity_mentions" in tables:
            assert db.execute("SELECT COUNT(*) FROM entity_mentions").fetchone()[0] == 0
    finally:
        db.close()


def test_graph_show_communities_and_export(
    data: Path, graph_env: dict[str, str], tmp_path: Path
) -> None:
    shown = lore(data, "graph", "show", "E_LEDGER_LOCK_TIMEOUT", "--json", **graph_env)
    assert shown.returncode == 0, shown.stderr
    entity = json.loads(shown.stdout)
    assert entity["type"] == "error_code" and entity["chunk_ids"]
    assert lore(data, "graph", "show", "no-such-thing-here", **graph_env).returncode != 0
    listed = lore(data, "graph", "communities", "--json", **graph_env)
    assert listed.returncode == 0, listed.stderr
    assert len({c["level"] for c in json.loads(listed.stdout)}) >= 2
    target = tmp_path / "g.graphml"
    exported = lore(
        data, "graph", "export", "--format", "graphml", "--output", str(target), **graph_env
    )
    assert exported.returncode == 0, exported.stderr
    assert "<graphml" in target.read_text()
    nodes = json.loads(lore(data, "graph", "export", **graph_env).stdout)["nodes"]
    assert any(node.get("type") == "metric" for node in nodes)


def test_lore_ask_global(data: Path, graph_env: dict[str, str]) -> None:
    question = "What recurring root causes show up across the incident postmortems?"
    glob = lore(data, "ask", question, "--json", **graph_env)
    assert glob.returncode == 0, glob.stderr
    body = json.loads(glob.stdout)
    assert body["mode"] == "global" and body["route"]["scores"]["global"] > 0
    assert global_citations_ok(body["citations"]), body["citations"]
    details = body["details"]
    assert body["context_tokens"] == (
        details["map_tokens"] + details["reduce_tokens"] + details["local_tokens"]
    )


def test_an_edit_is_refreshed(data: Path, graph_env: dict[str, str]) -> None:
    quiet = lore(data, "graph", "refresh", "--json", **graph_env)
    assert quiet.returncode == 0, quiet.stderr
    counts = json.loads(quiet.stdout)
    assert (counts["stale"], counts["refreshed"], counts["llm_calls"]) == (0, 0, 0)

    edited = data.parent / "extra" / EDITED
    edited.write_text(
        edited.read_text() + f"\n\nSince the last incident {CANARY} pages the "
        "notification-worker on-call before the queue backlog alert fires.\n"
    )
    again = lore(
        data,
        "ingest",
        str(data.parent / "extra"),
        "--meta",
        "env=production",
        "--json",
        **graph_env,
    )
    assert again.returncode == 0, again.stderr
    # the ingest itself rewrites the reports the edit touched (the lifecycle cascade)
    said = json.loads(again.stdout)["graph"]
    listed = json.loads(lore(data, "graph", "communities", "--json", **graph_env).stdout)
    levels = len({c["level"] for c in listed})
    # at most two leaf-to-root chains (the existing entity it names, the new one), or 5 %;
    # a report is written anew, or stored again with its chunks when the extractive text
    # did not move (the new sentence may not be among those it quotes)
    redone = said["reports_refreshed"] + said.get("reports_recovered", 0)
    assert 0 < redone <= max(0.05 * len(listed), 2 * levels)
    after = json.loads(lore(data, "graph", "refresh", "--json", **graph_env).stdout)
    assert (after["stale"], after["refreshed"]) == (0, 0)

    shown = lore(data, "graph", "show", CANARY, "--json", **graph_env)
    assert shown.returncode == 0, shown.stderr
    canary_chunks = set(json.loads(shown.stdout)["chunk_ids"])
    communities = json.loads(lore(data, "graph", "communities", "--json", **graph_env).stdout)
    leaf = max(
        (c for c in communities if entity_key(CANARY) in c["members"]), key=lambda c: c["level"]
    )
    reports = json.loads(lore(data, "graph", "reports", "--json", **graph_env).stdout)
    report = next(r for r in reports if r["community_id"] == leaf["id"])
    assert canary_chunks <= set(report["chunk_ids"])


def test_a_delete_cascades_out_of_the_server_graph(data: Path, graph_env: dict[str, str]) -> None:
    """Deleting the only document that names the canary removes it from Neo4j and reports."""
    shown = lore(data, "graph", "show", CANARY, "--json", **graph_env)
    assert shown.returncode == 0, shown.stderr
    canary_chunks = set(json.loads(shown.stdout)["chunk_ids"])
    assert canary_chunks
    gone = lore(data, "delete", str(data.parent / "extra" / EDITED), **graph_env)
    assert gone.returncode == 0, gone.stderr
    after = lore(data, "graph", "show", CANARY, **graph_env)
    assert after.returncode != 0
    reports = json.loads(lore(data, "graph", "reports", "--json", **graph_env).stdout)
    assert reports and not canary_chunks & {c for r in reports for c in r["chunk_ids"]}
    assert CANARY not in json.dumps(reports)
    exported = json.loads(lore(data, "graph", "export", **graph_env).stdout)
    assert not any(CANARY.lower() in json.dumps(node).lower() for node in exported["nodes"])
