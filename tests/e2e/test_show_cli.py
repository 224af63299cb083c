"""`lore show` reads a document back by any id the CLI printed; `delete` takes the same."""

import json
from pathlib import Path

from tests.e2e.test_cli import lore


def test_show_and_delete_take_ids_and_printed_sources(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "guide.md").write_text("# Guide\n\nWhen ERR_SHOW_GUIDE appears, restart the relay.\n")
    (tree / "alerts.jsonl").write_text(
        json.dumps({"id": "alert-001", "text": "ERR_SHOW_ALERT fires on a full disk."}) + "\n"
    )
    data = tmp_path / "data"
    done = lore(data, "ingest", str(tree), "--meta", "team=ops")
    assert done.returncode == 0, done.stderr
    guide_id = "tree/guide.md"  # its root's label (the folder's name) and its path there

    shown = lore(data, "show", guide_id)
    assert shown.returncode == 0, shown.stderr
    assert "done" in shown.stdout and "team: ops" in shown.stdout
    assert "When ERR_SHOW_GUIDE appears, restart the relay." in shown.stdout

    by_path = lore(data, "show", str(tree / "guide.md"), "--json")  # a path finds it too
    body = json.loads(by_path.stdout)
    assert body["id"] == guide_id and body["text"].startswith("# Guide")
    assert len(body["chunk_list"]) == body["chunks"] == 1

    search = lore(data, "search", "ERR_SHOW_ALERT", "--json")
    source = json.loads(search.stdout)["results"][0]["source"]
    assert source.endswith("alerts.jsonl#alert-001")
    record = lore(data, "show", source, "--json")
    assert record.returncode == 0, record.stderr
    assert json.loads(record.stdout)["id"] == "alert-001"

    missing = lore(data, "show", "no/such/doc.md")
    assert missing.returncode != 0 and "no document 'no/such/doc.md'" in missing.stderr

    deleted = lore(data, "delete", source)
    assert deleted.returncode == 0 and "deleted alert-001 (1 chunks)" in deleted.stdout
    assert lore(data, "show", "alert-001").returncode != 0
