"""Document ids through ``lore`` subprocesses: root-relative, whatever the folder it runs in.

The demo's two roots, ``production/`` and ``staging/``, share eight relative paths;
their documents must not collide, the same folder ingested from anywhere must keep its
ids, and a second folder with a taken name must be refused until given ``--as``.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

from tests.conftest import CORPUS
from tests.e2e.test_graph_lifecycle import lore, ok


def stored(data: Path) -> dict[str, str]:
    with sqlite3.connect(data / "lore.sqlite3") as db:
        return dict(db.execute("SELECT id, source FROM documents WHERE status = 'done'"))


def test_ids_do_not_depend_on_the_working_directory_and_labels_do_not_collide(
    tmp_path: Path,
) -> None:
    home, data = tmp_path / "home", tmp_path / "data"
    shutil.copytree(CORPUS, home / "corpus")
    elsewhere = tmp_path / "elsewhere" / "deep"
    elsewhere.mkdir(parents=True)
    shared = {
        p.relative_to(CORPUS / "staging").as_posix()
        for p in (CORPUS / "staging").rglob("*")
        if p.is_file() and (CORPUS / "production" / p.relative_to(CORPUS / "staging")).exists()
    }
    assert len(shared) == 8

    ok(lore(home, data, "ingest", "corpus/production", "--meta", "env=production"))
    ok(lore(home / "corpus", data, "ingest", "staging", "--meta", "env=staging"))
    ids = stored(data)
    assert {f"production/{p}" for p in shared} <= set(ids)
    assert {f"staging/{p}" for p in shared} <= set(ids)
    assert ids["staging/ledger-db/runbook-failover.md"] == "staging/ledger-db/runbook-failover.md"
    assert ids["alert-004"] == "production/alert-catalog.jsonl#alert-004"
    assert not [i for i in ids if i.startswith(("corpus/", "/"))]

    # the same folder from another working directory, by absolute path: nothing new
    again = json.loads(
        ok(
            lore(
                elsewhere,
                data,
                "ingest",
                str(home / "corpus" / "staging"),
                "--meta",
                "env=staging",
                "--json",
            )
        )
    )
    assert again["done"] == 0 and again["unchanged"] == 15 and stored(data) == ids
    # "." is the folder it names; a subfolder keeps its root's ids
    sub = json.loads(
        ok(
            lore(
                home / "corpus" / "staging" / "ledger-db",
                data,
                "ingest",
                ".",
                "--meta",
                "env=staging",
                "--json",
            )
        )
    )
    assert sub["done"] == 0 and sub["unchanged"] == 4 and stored(data) == ids

    # another folder called "staging" is refused, naming both roots, and nothing is written
    other = tmp_path / "eu" / "staging"
    shutil.copytree(CORPUS / "staging", other)
    refused = lore(tmp_path, data, "ingest", str(other))
    assert refused.returncode != 0
    said = " ".join((refused.stdout + refused.stderr).split())
    assert str((home / "corpus" / "staging").resolve()) in said
    assert str(other.resolve()) in said and "--as" in said
    assert stored(data) == ids

    # --as gives it a label of its own; a typed path finds its document from anywhere
    ok(lore(tmp_path, data, "ingest", str(other), "--as", "staging-eu"))
    now = stored(data)
    assert {f"staging-eu/{p}" for p in shared} <= set(now) and len(now) == len(ids) + 15
    bad = lore(tmp_path, data, "ingest", str(other), "--as", "../x")
    assert bad.returncode != 0 and "root label" in bad.stdout + bad.stderr
    roots = json.loads(ok(lore(tmp_path, data, "status", "--json")))["roots"]
    assert roots == {
        "production": str((home / "corpus" / "production").resolve()),
        "staging": str((home / "corpus" / "staging").resolve()),
        "staging-eu": str(other.resolve()),
    }
    ok(lore(other / "ledger-db", data, "delete", "runbook-failover.md"))
    assert "staging-eu/ledger-db/runbook-failover.md" not in stored(data)
    assert "staging/ledger-db/runbook-failover.md" in stored(data)


def test_prune_finds_its_root_from_any_folder(tmp_path: Path) -> None:
    home, data = tmp_path / "home", tmp_path / "data"
    shutil.copytree(CORPUS / "staging", home / "staging")
    ok(lore(home, data, "ingest", "staging"))
    (home / "staging" / "ledger-db" / "runbook-failover.md").unlink()
    pruned = json.loads(
        ok(lore(tmp_path, data, "ingest", str(home / "staging" / "ledger-db"), "--prune", "--json"))
    )
    assert pruned["pruned"]["deleted"] == ["staging/ledger-db/runbook-failover.md"]
    assert len(stored(data)) == 14
