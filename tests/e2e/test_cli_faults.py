"""Hostile files and damaged data directories through the ``lore`` command (issue 12).

Every case must end in a clear message and an exit code, never a traceback; valid input
next to bad input is still ingested, and no job is left running.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.e2e.test_cli import lore

DEEP = "[" * 1000 + "]" * 1000


def no_traceback(*outputs: str) -> None:
    for out in outputs:
        assert "Traceback" not in out, out[-2000:]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory with one document, made by the CLI."""
    root = tmp_path_factory.mktemp("faults")
    source = root / "one.md"
    source.write_text("# One\n\nThe ledger raises E_FAULT_ONE on a full pool.\n")
    done = lore(root / "data", "ingest", str(source), "--json")
    assert done.returncode == 0, done.stderr
    return root / "data"


def test_3_deep_jsonl_line_fails_alone_and_the_job_ends(tmp_path: Path) -> None:
    path = tmp_path / "deep.jsonl"
    path.write_text(
        '{"id": "deep", "text": "deep", "extra": ' + DEEP + "}\n"
        '{"id": "ok-1", "text": "E_CLI_DEEP_OK_ONE line"}\n'
        '{"id": "ok-2", "text": "E_CLI_DEEP_OK_TWO line"}\n'
    )
    data = tmp_path / "data"
    done = lore(data, "ingest", str(path), "--json")
    no_traceback(done.stdout, done.stderr)
    assert done.returncode == 3, done.stderr  # partial
    report = json.loads(done.stdout)
    assert report["done"] == 2
    assert any("limit is 64" in f["reason"] for f in report["failed"])
    jobs = json.loads(lore(data, "jobs", "--json").stdout)
    assert jobs and all(j["state"] != "running" for j in jobs)
    hit = json.loads(lore(data, "search", "E_CLI_DEEP_OK_TWO", "--json").stdout)
    assert hit["results"][0]["document_id"] == "ok-2"


def test_3_deep_search_request_is_a_clear_error(store: Path, tmp_path: Path) -> None:
    request = tmp_path / "deep.json"
    request.write_text('{"search_text": "x", "metadata_filter": ' + DEEP + "}")
    out = lore(store, "search", "--request", str(request))
    no_traceback(out.stdout, out.stderr)
    assert out.returncode == 1 and "nested" in out.stderr and "limit is 64" in out.stderr


def test_9_a_truncated_store_is_a_clear_error(store: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    whole = (store / "lore.sqlite3").read_bytes()
    (data / "lore.sqlite3").write_bytes(whole[: len(whole) // 3])
    for args in (("status",), ("search", "ledger"), ("ingest", str(tmp_path))):
        out = lore(data, *args)
        no_traceback(out.stdout, out.stderr)
        assert out.returncode == 1 and "damaged, truncated" in out.stderr, (args, out.stderr)


def test_9_paths_of_the_wrong_kind_are_clear_errors(store: Path, tmp_path: Path) -> None:
    as_file = tmp_path / "file-not-dir"
    as_file.write_text("not a directory")
    out = lore(as_file, "ingest", str(tmp_path / "none.md"))
    no_traceback(out.stdout, out.stderr)
    assert out.returncode == 1 and "is a file where a directory belongs" in out.stderr
    assert as_file.read_text() == "not a directory"  # reported, never replaced

    copy = tmp_path / "copy"
    shutil.copytree(store, copy)
    index = next(copy.glob("sparse-*"))
    shutil.rmtree(index)
    index.write_text("in the way")
    out = lore(copy, "search", "ledger")
    no_traceback(out.stdout, out.stderr)
    assert out.returncode == 1 and str(index) in out.stderr

    store_dir = tmp_path / "store-dir"
    (store_dir / "lore.sqlite3").mkdir(parents=True)
    out = lore(store_dir, "ingest", str(tmp_path / "none.md"))
    no_traceback(out.stdout, out.stderr)
    assert out.returncode == 1 and "is a directory" in out.stderr


def test_6_a_tantivy_index_without_meta_json_is_rebuilt_and_reported(
    store: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(store, copy)
    (next(copy.glob("sparse-*")) / "meta.json").unlink()
    out = lore(copy, "status", "--json")
    assert out.returncode == 0, out.stderr
    sparse = json.loads(out.stdout)["indexes"]["sparse"]["health"]
    assert sparse.startswith("rebuilt from the store") and "meta.json" in sparse
    again = json.loads(lore(copy, "status", "--json").stdout)["indexes"]
    assert again["sparse"]["health"] == "ok" and again["dense"]["health"] == "ok"
    keyword_only = lore(copy, "search", "E_FAULT_ONE", "--dense-weight", "0", "--json")
    results = json.loads(keyword_only.stdout)["results"]
    assert results and "E_FAULT_ONE" in results[0]["text"]


def test_8_a_rejected_write_leaves_the_other_document_alone(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text('{"id": "shared", "text": "E_OWNED_BY_A text of a"}\n')
    (tmp_path / "b.jsonl").write_text('{"id": "shared", "text": "E_CLAIMED_BY_B text"}\n')
    data = tmp_path / "data"
    assert lore(data, "ingest", str(tmp_path / "a.jsonl")).returncode == 0
    refused = lore(data, "ingest", str(tmp_path / "b.jsonl"), "--json")
    assert refused.returncode != 0 and "already belongs to" in refused.stdout
    status = json.loads(lore(data, "status", "--json").stdout)
    assert status["counts"].get("documents_done") == 1, status
    assert not status["counts"].get("documents_failed"), status
    hit = json.loads(lore(data, "search", "E_OWNED_BY_A", "--json").stdout)["results"][0]
    assert hit["document_id"] == "shared" and "E_OWNED_BY_A" in hit["text"]
