"""Delete and prune on real workers: ``lore`` with a broker, one ``celery worker`` process.

The delete job (the graph cascade included) runs on the worker; the CLI follows it and
prints what the graph lost, exactly as without a broker.
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from tests.e2e.test_graph_lifecycle import lore, ok
from tests.workers.conftest import short_docs

pytestmark = pytest.mark.workers


def test_delete_and_prune_run_on_the_worker_with_the_cascade(
    one_worker: tuple[Path, dict[str, str]],
) -> None:
    home, env = one_worker
    data = home / "data"
    (home / "docs").mkdir()
    for doc_id, text in short_docs("lc", 6):
        (home / doc_id.replace("lc/", "docs/")).write_text(text)
    ingested = json.loads(ok(lore(home, data, "ingest", "docs", "--wait", "--json", **env)))
    assert ingested["state"] == "done" and ingested["failed"] == [], ingested
    ok(lore(home, data, "graph", "build", **env))
    assert "E_LC_0001" in ok(lore(home, data, "graph", "show", "E_LC_0001", **env))
    # the worker's levels embedded the reports they stored, and only those
    assert vectored(data) == reported(data) != set()

    deleted = json.loads(ok(lore(home, data, "delete", "docs/doc-0001.md", "--json", **env)))
    assert deleted["state"] == "done" and deleted["deleted"] == ["docs/doc-0001.md"]
    assert deleted["graph"]["entities_removed"] >= 1
    assert deleted["graph"]["reports_refreshed"] >= 1
    assert lore(home, data, "graph", "show", "E_LC_0001", **env).returncode != 0
    search = json.loads(ok(lore(home, data, "search", "E_LC_0001", "--json", **env)))
    assert all("E_LC_0001" not in hit["text"] for hit in search["results"])

    (home / "docs" / "doc-0002.md").unlink()
    pruned = json.loads(
        ok(lore(home, data, "ingest", "docs", "--prune", "--wait", "--json", **env))
    )
    assert pruned["pruned"]["state"] == "done"
    assert pruned["pruned"]["deleted"] == ["docs/doc-0002.md"]
    assert pruned["pruned"]["graph"]["entities_removed"] >= 1
    assert lore(home, data, "graph", "show", "E_LC_0002", **env).returncode != 0
    assert "E_LC_0003" in ok(lore(home, data, "graph", "show", "E_LC_0003", **env))
    jobs = json.loads(ok(lore(home, data, "jobs", "--json", **env)))
    assert [j["state"] for j in jobs if j["kind"] == "delete"] == ["done", "done"]
    log = "\n".join(p.read_text() for p in home.glob("w-*.log"))
    assert log.count("lore.delete_documents") >= 2  # the worker ran both deletions
    assert vectored(data) == reported(data)  # rewritten reports re-embedded, gone ones dropped


def _ids(data: Path, select: str) -> set[str]:
    with closing(sqlite3.connect(data / "lore.sqlite3")) as db:
        return {str(row[0]) for row in db.execute(select)}


def vectored(data: Path) -> set[str]:
    """Community ids with stored report vectors."""
    return _ids(data, "SELECT community_id FROM report_vectors")


def reported(data: Path) -> set[str]:
    """Community ids with a stored report."""
    return _ids(data, "SELECT community_id FROM community_reports")
