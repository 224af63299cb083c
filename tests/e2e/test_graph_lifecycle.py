"""The graph's lifecycle as a user drives it: delete, edit, sync, a bad LLM setting.

Everything goes through ``lore`` subprocesses (and ``lore serve`` for the HTTP routes)
on a copy of the demo corpus in a temporary directory, so files can be edited and
removed; document ids are ``production/…`` and ``staging/…``, the roots' labels.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from ingest.roots import META_PREFIX
from lore.store import Store
from tests.conftest import CORPUS, ROOT
from tests.e2e.test_cli import serving

LORE = [sys.executable, "-m", "api.cli"]
# the code's number standing alone, not digits inside a score (16.410198922503…) or a
# hexadecimal id
THE_CODE = re.compile(r"(?<![0-9a-f.])5031(?![0-9a-f])")


def lore(cwd: Path, data: Path, *args: str, **env_extra: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "LORE_DATA_DIR": str(data),
        "COLUMNS": "200",
        **env_extra,
    }
    return subprocess.run(
        [*LORE, *args], cwd=cwd, env=env, text=True, capture_output=True, timeout=600, check=False
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo corpus under ``corpus/``, ingested and with its graph built (to copy)."""
    home = tmp_path_factory.mktemp("lifecycle")
    shutil.copytree(CORPUS, home / "corpus")
    for env in ("production", "staging"):
        ok(lore(home, home / "data", "ingest", f"corpus/{env}", "--meta", f"env={env}"))
    ok(lore(home, home / "data", "graph", "build"))
    return home


@pytest.fixture
def home(built: Path, tmp_path: Path) -> Path:
    """A private copy of the built directory (corpus files and data)."""
    target = tmp_path / "home"
    shutil.copytree(built, target)
    store = Store(target / "data" / "lore.sqlite3")  # the copy's roots are its own folders
    for env in ("production", "staging"):
        store.set_meta(META_PREFIX + env, str((target / "corpus" / env).resolve()))
    store.close()
    return target


def mentioning(home: Path, needle: str) -> list[str]:
    """Ids of the documents whose text mentions ``needle`` (files and JSON Lines records)."""
    ids = []
    for path in sorted((home / "corpus").rglob("*")):
        if not path.is_file() or needle not in path.read_text():
            continue
        rel = path.relative_to(home / "corpus").as_posix()  # production/…: the roots' labels
        if path.suffix == ".jsonl":
            ids += [
                json.loads(line)["id"] for line in path.read_text().splitlines() if needle in line
            ]
        else:
            ids.append(rel)
    return ids


def served_everywhere(home: Path, question: str) -> str:
    """Everything the CLI's read routes return for an entity question, as one text."""
    data = home / "data"
    parts = [
        lore(home, data, "graph", "show", "PAY-5031", "--json").stdout,
        ok(lore(home, data, "search", question, "--json", "--top-k", "50")),
        ok(lore(home, data, "graph", "reports", "--json")),
        ok(lore(home, data, "graph", "communities", "--json")),
        ok(lore(home, data, "graph", "export")),
    ]
    for mode in ("local", "global"):
        answer = json.loads(ok(lore(home, data, "ask", question, "--mode", mode, "--json")))
        answer.pop("question", None)
        answer.pop("route", None)  # the router's reasons quote the question
        parts.append(json.dumps(answer))
    return "\n".join(parts)


def test_deleting_every_document_mentioning_pay_5031_forgets_it(home: Path) -> None:
    data = home / "data"
    before = json.loads(ok(lore(home, data, "graph", "show", "PAY-5031", "--json")))
    assert before["mentions"] >= 5
    lost_chunks = before["chunk_ids"]
    ids = mentioning(home, "PAY-5031")
    assert len(ids) >= 5
    result = json.loads(ok(lore(home, data, "delete", *ids, "--json")))
    assert sorted(result["deleted"]) == sorted(ids)
    assert result["graph"]["entities_removed"] >= 1
    assert result["graph"]["reports_refreshed"] >= 1
    shown = lore(home, data, "graph", "show", "PAY-5031")
    assert shown.returncode != 0 and "no entity named 'PAY-5031'" in shown.stderr
    everything = served_everywhere(home, "What does PAY-5031 mean for payments?")
    assert not THE_CODE.search(everything), THE_CODE.search(everything)
    assert not [c for c in lost_chunks if c in everything]
    with serving(data, home / "serve.log") as base:
        assert httpx.get(f"{base}/readyz", timeout=600).status_code == 200  # model loaded
        assert httpx.get(f"{base}/v1/entities/PAY-5031", timeout=30).status_code == 404
        listed = httpx.get(f"{base}/v1/communities", params={"reports": True}, timeout=30)
        assert listed.status_code == 200 and listed.json()
        pages = [listed.text] + [
            httpx.get(f"{base}/v1/communities/{c['id']}", timeout=30).text for c in listed.json()
        ]
        query = {"search_text": "PAY-5031", "top_k": 50}
        pages.append(httpx.post(f"{base}/v1/memory/query", json=query, timeout=300).text)
        for mode in ("local", "global"):
            asked = {"question": "What does PAY-5031 mean?", "mode": mode}
            reply = httpx.post(f"{base}/v1/ask", json=asked, timeout=300).json()
            reply.pop("question", None)
            reply.pop("route", None)
            pages.append(json.dumps(reply))
        served = "\n".join(pages)
        assert not THE_CODE.search(served), THE_CODE.search(served)
        assert not [c for c in lost_chunks if c in served]


def test_http_delete_and_prune_say_what_the_graph_lost(home: Path) -> None:
    data = home / "data"
    doc = "production/payments-api/runbook-db-timeouts.md"
    with serving(data, home / "serve.log") as base:
        assert httpx.get(f"{base}/readyz", timeout=600).status_code == 200  # model loaded
        reply = httpx.delete(f"{base}/v1/documents/{doc}", timeout=300)
        assert reply.status_code == 200, reply.text
        body = reply.json()
        assert body["deleted"] == [doc] and body["chunks_removed"] >= 1
        assert body["graph"]["chunks"] >= 1
        assert body["graph"]["entity_mentions_removed"] >= 1
        assert body["graph"]["reports_refreshed"] >= 1
        assert httpx.get(f"{base}/v1/documents/{doc}", timeout=30).status_code == 404
        assert httpx.delete(f"{base}/v1/documents/{doc}", timeout=30).status_code == 404

        pages = [
            {"id": "wiki/a", "text": "The kestrel-gateway rejects expired tokens with E_WIKI_A."},
            {"id": "wiki/b", "text": "The osprey-cache evicts hot keys and logs E_WIKI_B."},
        ]
        posted = httpx.post(
            f"{base}/v1/documents", json={"documents": pages, "wait": True}, timeout=300
        )
        assert posted.status_code == 200, posted.text
        assert httpx.get(f"{base}/v1/entities/E_WIKI_B", timeout=30).status_code == 200
        sync = {"prefix": "wiki/", "keep": ["wiki/a"]}
        preview = httpx.post(
            f"{base}/v1/documents/prune", json={**sync, "dry_run": True}, timeout=60
        ).json()
        assert preview["would_delete"] == ["wiki/b"] and preview["deleted"] == []
        pruned = httpx.post(f"{base}/v1/documents/prune", json=sync, timeout=300)
        assert pruned.status_code == 200, pruned.text
        assert pruned.json()["deleted"] == ["wiki/b"]
        assert pruned.json()["graph"]["entities_removed"] >= 1
        assert httpx.get(f"{base}/v1/entities/E_WIKI_B", timeout=30).status_code == 404
        assert httpx.get(f"{base}/v1/entities/E_WIKI_A", timeout=30).status_code == 200
        kept = "production/payments-api/service-overview.md"
        assert httpx.get(f"{base}/v1/documents/{kept}", timeout=30).status_code == 200
        empty = httpx.post(f"{base}/v1/documents/prune", json={"prefix": ""}, timeout=30)
        assert empty.status_code == 422


def test_ingest_prune_deletes_what_is_gone_and_nothing_else(home: Path) -> None:
    data = home / "data"
    extra = home / "corpus/staging/extra.md"
    extra.write_text("# Extra\n\nThe kestrel-gateway raises E_PRUNE_42 on expired tokens.\n")
    outside = home / "notes.md"
    outside.write_text("# Notes\n\nThe osprey-cache logs E_OUTSIDE_7 when it evicts.\n")
    ok(lore(home, data, "ingest", "corpus/staging", "--meta", "env=staging"))
    ok(lore(home, data, "ingest", "notes.md"))
    assert "E_PRUNE_42" in ok(lore(home, data, "graph", "show", "E_PRUNE_42"))
    extra.unlink()
    outside.unlink()  # gone too, but not under the pruned paths: it stays
    catalog = home / "corpus/production/alert-catalog.jsonl"
    lines = catalog.read_text().splitlines()
    dropped = json.loads(lines[1])["id"]
    catalog.write_text("\n".join(lines[:1] + lines[2:]) + "\n")
    staging = json.loads(
        ok(
            lore(
                home, data, "ingest", "corpus/staging", "--meta", "env=staging", "--prune", "--json"
            )
        )
    )
    assert staging["pruned"]["deleted"] == ["staging/extra.md"]
    assert staging["pruned"]["graph"]["entities_removed"] >= 1
    production = lore(
        home, data, "ingest", "corpus/production", "--meta", "env=production", "--prune"
    )
    assert production.returncode == 0, production.stderr
    assert f"deleted {dropped}" in production.stdout and "pruned 1 documents" in production.stdout
    assert "reports refreshed" in production.stdout
    assert lore(home, data, "graph", "show", "E_PRUNE_42").returncode != 0
    assert "E_OUTSIDE_7" in ok(lore(home, data, "graph", "show", "E_OUTSIDE_7"))
    again = ok(lore(home, data, "ingest", "corpus/production", "--prune"))
    assert "pruned nothing" in again
    missing = lore(home, data, "ingest", "corpus/nope", "--prune")
    assert missing.returncode == 2 and "does not exist; nothing was done" in missing.stderr


def test_an_edit_replaces_the_old_fact_with_the_new_one(home: Path) -> None:
    data = home / "data"
    old, new = "PAY-5031", "PAY-7777"
    assert old in ok(lore(home, data, "graph", "show", old))
    edited = [p for p in sorted((home / "corpus").rglob("*.*")) if old in p.read_text()]
    assert len(edited) >= 4
    for path in edited:  # the error code was renamed everywhere it is documented
        path.write_text(path.read_text().replace(old, new))
    said = [
        json.loads(
            ok(lore(home, data, "ingest", f"corpus/{env}", "--meta", f"env={env}", "--json"))
        )
        for env in ("production", "staging")
    ]
    assert sum(s["graph"]["entity_mentions_removed"] for s in said) >= 4
    assert said[-1]["graph"]["entities_removed"] >= 1  # the last mention of the old code
    assert all(s["graph"]["reports_refreshed"] >= 1 for s in said)
    assert lore(home, data, "graph", "show", old).returncode != 0
    shown = json.loads(ok(lore(home, data, "graph", "show", new, "--json")))
    assert shown["mentions"] >= 4 and old not in json.dumps(shown)
    reports = ok(lore(home, data, "graph", "reports", "--json"))
    assert old not in reports  # the touched communities were rewritten ...
    assert set(shown["chunk_ids"]) & {c for r in json.loads(reports) for c in r["chunk_ids"]}
    assert old not in ok(lore(home, data, "graph", "export"))


def test_an_unreachable_llm_leaves_the_graph_intact(home: Path) -> None:
    data = home / "data"
    before = ok(lore(home, data, "graph", "export"))
    counts = json.loads(ok(lore(home, data, "status", "--json")))["counts"]
    (home / "new.md").write_text(
        "# Kestrel\n\nThe kestrel-gateway rejects tokens with E_KESTREL_9.\n"
    )
    down = {"LORE_LLM__BASE_URL": "http://127.0.0.1:9/v1", "LORE_LLM__MAX_RETRIES": "0"}
    result = lore(home, data, "ingest", "new.md", **down)
    assert result.returncode != 0
    assert "cannot be reached" in result.stderr and "LORE_LLM__BASE_URL" in result.stderr
    assert "1 documents stored and searchable" in result.stderr
    assert ok(lore(home, data, "graph", "export")) == before  # nothing in the graph touched
    hits = json.loads(ok(lore(home, data, "search", "E_KESTREL_9", "--json")))
    assert hits["results"][0]["source"] == "home/new.md"  # a file's root: its folder
    again = json.loads(ok(lore(home, data, "status", "--json")))["counts"]
    assert again["documents_done"] == counts["documents_done"] + 1
    build = lore(home, data, "graph", "build", **down)
    assert build.returncode != 0 and "cannot be reached" in build.stderr
    assert ok(lore(home, data, "graph", "export")) == before
    # the next good run (the LLM unset again) catches the graph up
    ok(lore(home, data, "graph", "build"))
    assert "E_KESTREL_9" in ok(lore(home, data, "graph", "show", "E_KESTREL_9"))
