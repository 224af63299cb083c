"""Queued work runs in the namespace that queued it: real Redis, one real ``celery worker``.

Issue 30 found that with a broker a job queued in a named namespace never ran: the tasks
carried no namespace, so the worker looked for the job in the default data directory,
found nothing, and the job stayed ``running`` for ever. Here two namespaces ingest, build
their graphs and delete through the CLI exactly as a user would, on one worker; each
sees only its own documents, and the default namespace stays empty.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.test_graph_lifecycle import lore, ok
from tests.workers.conftest import short_docs

pytestmark = pytest.mark.workers


def _write(home: Path, folder: str, prefix: str, count: int) -> None:
    (home / folder).mkdir()
    for doc_id, text in short_docs(prefix, count):
        (home / folder / Path(doc_id).name).write_text(text)


def test_each_namespace_runs_its_own_queued_jobs(one_worker: tuple[Path, dict[str, str]]) -> None:
    home, env = one_worker
    data = home / "data"
    _write(home, "a", "na", 3)
    _write(home, "b", "nb", 2)

    def ns(name: str, *args: str) -> str:
        return ok(lore(home, data, "--namespace", name, *args, **env))

    for name, folder, count in (("team-a", "a", 3), ("team-b", "b", 2)):
        result = json.loads(ns(name, "ingest", folder, "--wait", "--json"))
        assert result["state"] == "done", result
        assert result["failed"] == [] and result["done"] == count, result

    def documents(*namespace: str) -> int:
        args = ("--namespace", *namespace) if namespace else ()
        status = json.loads(ok(lore(home, data, *args, "status", "--json", **env)))
        return int(status["counts"].get("documents_done", 0))

    assert (documents("team-a"), documents("team-b"), documents()) == (3, 2, 0)
    assert "E_NA_0001" in ns("team-a", "show", "a/doc-0001.md")
    shown_in_b = lore(home, data, "--namespace", "team-b", "show", "a/doc-0001.md", **env)
    assert shown_in_b.returncode != 0

    hits = json.loads(ns("team-b", "search", "E_NA_0001", "--json"))["results"]
    assert all("E_NA_" not in hit["text"] for hit in hits)  # A's text never reaches B

    ns("team-a", "graph", "build")
    assert "E_NA_0001" in ns("team-a", "graph", "show", "E_NA_0001")
    assert lore(home, data, "--namespace", "team-b", "graph", "show", "E_NA_0001", **env).returncode

    deleted = json.loads(ns("team-a", "delete", "a/doc-0001.md", "--json"))
    assert deleted["state"] == "done" and deleted["deleted"] == ["a/doc-0001.md"], deleted
    assert (documents("team-a"), documents("team-b")) == (2, 2)  # B untouched

    for name in ("team-a", "team-b"):
        jobs = json.loads(ns(name, "jobs", "--json"))
        assert jobs and all(j["state"] == "done" for j in jobs), jobs
