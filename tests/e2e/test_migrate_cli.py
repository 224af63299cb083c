"""``lore migrate --to postgresql://…`` as a user runs it, then the store served from PostgreSQL.

The demo corpus is ingested into the embedded SQLite store and its graph built, all with
the CLI; the data directory is migrated into a fresh PostgreSQL database; a new, empty
data directory with ``LORE_STORE__URL`` then rebuilds its indexes from PostgreSQL and
answers exactly as the SQLite directory does.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.conftest import CORPUS, ROOT, global_citations_ok
from tests.e2e.test_cli import lore
from tests.postgres_server import fresh_database

IDENTIFIERS = json.loads((ROOT / "tests/fixtures/identifier_queries.json").read_text())
QUERIES = [q["query"] for q in IDENTIFIERS[:2]] + ["how are database connection timeouts handled"]
Migrated = tuple[Path, Path, str, dict[str, Any]]
STORE, KEYS = "lore_lore", "lore_keys"  # the schemas of the default store.schema_prefix
TEAM = "team-b"  # a second namespace


@pytest.fixture(scope="module")
def migrated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Migrated]:
    """(SQLite data dir, fresh data dir on PostgreSQL, URL, the migrate report)."""
    root = tmp_path_factory.mktemp("migrate")
    old, new = root / "sqlite", root / "replica"
    done = lore(old, "ingest", str(CORPUS))
    assert done.returncode == 0, done.stderr
    built = lore(old, "graph", "build")
    assert built.returncode == 0 and "communities" in built.stdout, built.stderr
    team = lore(old, "--namespace", TEAM, "ingest", str(CORPUS / "staging"))
    assert team.returncode == 0, team.stderr
    key = lore(old, "keys", "create", "--namespace", TEAM, "--name", "migrated", "--json")
    assert key.returncode == 0, key.stderr
    with fresh_database() as url:
        moved = lore(old, "migrate", "--to", url, "--json")
        assert moved.returncode == 0, moved.stderr
        yield old, new, url, json.loads(moved.stdout)


def _rows(url: str, sql: str, schema: str = STORE) -> list[tuple[object, ...]]:
    with psycopg.connect(url) as conn:
        conn.execute(f'SET search_path TO "{schema}"')
        return [tuple(r) for r in conn.execute(sql).fetchall()]


def _ints(url: str, sql: str) -> list[tuple[int, ...]]:
    return [tuple(int(v) for v in row) for row in _rows(url, sql)]


def test_every_table_is_copied_with_its_ids(migrated: Migrated) -> None:
    old, _, url, report = migrated
    assert report["ok"]
    tables = {(t["schema"], t["table"]): t for t in report["tables"]}
    source = sqlite3.connect(old / "lore.sqlite3")
    try:
        for name in ("documents", "chunks", "changes", "entity_mentions", "communities", "jobs"):
            n = source.execute(f"SELECT COUNT(*) FROM {name}").fetchone()[0]
            copied = tables[(STORE, name)]
            assert n > 0 and copied["rows"] == copied["target_rows"] == n, name
        chunks = source.execute("SELECT row_id, id, embedding FROM chunks ORDER BY row_id")
        chunks = [(r, i, bytes(e)) for r, i, e in chunks]
        changes = source.execute("SELECT seq, op, row_id FROM changes ORDER BY seq").fetchall()
        store_id = source.execute("SELECT value FROM meta WHERE key = 'store_id'").fetchone()[0]
    finally:
        source.close()
    target = _rows(url, "SELECT row_id, id, embedding FROM chunks ORDER BY row_id")
    assert chunks == target
    assert changes == _rows(url, "SELECT seq, op, row_id FROM changes ORDER BY seq")
    assert _rows(url, "SELECT value FROM meta WHERE key = 'store_id'") == [(store_id,)]
    assert tables[(STORE, "changes")]["identity"] == {"seq": changes[-1][0] + 1}


def test_a_second_migrate_is_refused_and_writes_nothing(
    migrated: Migrated,
) -> None:
    old, _, url, _ = migrated
    before = _rows(url, "SELECT COUNT(*), MAX(seq) FROM changes")
    schemas = _rows(url, "SELECT nspname FROM pg_namespace ORDER BY 1")
    again = lore(old, "migrate", "--to", url)
    assert again.returncode == 1
    assert "already holds data" in again.stderr and "Nothing was written" in again.stderr
    assert f"{STORE}.documents" in again.stderr
    assert _rows(url, "SELECT COUNT(*), MAX(seq) FROM changes") == before
    assert _rows(url, "SELECT nspname FROM pg_namespace ORDER BY 1") == schemas


def _top(data: Path, *args: str, **env: str) -> list[str]:
    """Chunk ids of the top 3 results of ``lore [OPTIONS] search QUERY``."""
    *options, query = args
    found = lore(data, *options, "search", query, "--json", "--top-k", "3", **env)
    assert found.returncode == 0, found.stderr
    return [r["chunk_id"] for r in json.loads(found.stdout)["results"]]


def test_a_fresh_replica_on_postgresql_answers_as_sqlite_did(
    migrated: Migrated,
) -> None:
    old, new, url, _ = migrated
    pg = {"LORE_STORE__URL": url}
    for query in QUERIES:
        assert _top(new, query, **pg) == _top(old, query), query
    assert not (new / "lore.sqlite3").exists(), "the replica keeps only indexes locally"
    status_old = json.loads(lore(old, "status", "--json").stdout)
    status_new = json.loads(lore(new, "status", "--json", **pg).stdout)
    assert status_new["counts"] == status_old["counts"]
    assert status_new["graph"]["communities"] == status_old["graph"]["communities"] > 0
    question = "What recurring root causes show up across the incident postmortems?"
    glob = lore(new, "ask", question, "--json", **pg)
    assert glob.returncode == 0, glob.stderr
    body = json.loads(glob.stdout)
    assert body["mode"] == "global" and body["citations"]
    assert global_citations_ok(body["citations"]), body["citations"]


def test_namespaces_and_keys_move_too(migrated: Migrated) -> None:
    old, new, url, report = migrated
    pg = {"LORE_STORE__URL": url}
    query = "E_LEDGER_LOCK_TIMEOUT staging"
    team_old = _top(old, "--namespace", TEAM, query)
    assert team_old and _top(new, "--namespace", TEAM, query, **pg) == team_old
    assert any(t["schema"].startswith("lore_ns_team_b_") for t in report["tables"])
    keys = lore(new, "keys", "list", "--json", **pg)
    assert keys.returncode == 0, keys.stderr
    assert [(k["name"], k["namespaces"]) for k in json.loads(keys.stdout)] == [("migrated", [TEAM])]
    assert _rows(url, "SELECT COUNT(*) FROM api_keys", schema=KEYS) == [(1,)]


def test_new_writes_after_the_migration_take_new_ids(migrated: Migrated, tmp_path: Path) -> None:
    _, new, url, _ = migrated
    ((last_row, last_seq),) = _ints(
        url, "SELECT (SELECT MAX(row_id) FROM chunks), MAX(seq) FROM changes"
    )
    doc = tmp_path / "after-migrate.md"
    doc.write_text("# After the move\n\nThe ledger raises E_AFTER_MIGRATE_0001 once moved.\n")
    done = lore(new, "ingest", str(doc), LORE_STORE__URL=url)
    assert done.returncode == 0, done.stderr
    rows = _ints(url, "SELECT row_id FROM chunks WHERE document_id LIKE '%after-migrate.md'")
    assert rows and all(r > last_row for (r,) in rows)
    assert _ints(url, f"SELECT MIN(seq) FROM changes WHERE seq > {last_seq}") == [(last_seq + 1,)]
    assert _top(new, "E_AFTER_MIGRATE_0001", LORE_STORE__URL=url)
