"""Which stored documents ``lore ingest PATH --prune`` finds gone (and never more)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ingest.sync import missing_documents
from lore.errors import InvalidRequestError
from lore.models import DocumentInfo, DocumentStatus


def doc(doc_id: str, source: str | None = None) -> DocumentInfo:
    return DocumentInfo(doc_id, source or doc_id, "", {}, "h", DocumentStatus.DONE, None, 1, "t")


def test_only_what_is_gone_from_under_the_path(tmp_path: Path) -> None:
    (tmp_path / "docs" / "sub").mkdir(parents=True)
    (tmp_path / "docs" / "kept.md").write_text("x")
    (tmp_path / "docs" / "sub" / "kept.txt").write_text("x")
    (tmp_path / "docs-other").mkdir()
    records = [{"id": "r1", "text": "a"}, {"id": 2, "text": "b"}]
    (tmp_path / "docs" / "alerts.jsonl").write_text("\n".join(json.dumps(r) for r in records))
    stored = [
        doc("docs/kept.md"),
        doc("docs/sub/kept.txt"),
        doc("docs/gone.md"),
        doc("docs/sub/gone.md"),
        doc("r1", "docs/alerts.jsonl#r1"),
        doc("2", "docs/alerts.jsonl#2"),
        doc("r3", "docs/alerts.jsonl#r3"),  # no longer in its file
        doc("x", "docs/old.jsonl#x"),  # its file is gone
        doc("docs-other/gone.md"),  # a sibling directory with a common prefix
        doc("elsewhere.md"),
        doc("/abs/gone.md"),
        doc("wiki/page", "wiki/page"),
    ]
    roots = {"docs": tmp_path / "docs", "docs-other": tmp_path / "docs-other"}
    docs = tmp_path / "docs"
    plan = missing_documents(stored, [docs], roots)
    assert plan.missing == ["docs/gone.md", "docs/sub/gone.md", "r3", "x"]
    assert plan.kept == []
    assert missing_documents(stored, [docs / "alerts.jsonl"], roots).missing == ["r3"]
    assert missing_documents(stored, [docs / "sub"], roots).missing == ["docs/sub/gone.md"]
    everything = missing_documents(stored, [tmp_path], roots).missing
    assert "/abs/gone.md" not in everything and "docs-other/gone.md" in everything
    assert "elsewhere.md" not in everything  # no root's: an upload's or an older id
    other_root = {"docs": tmp_path.parent / "elsewhere"}
    assert missing_documents(stored, [tmp_path], other_root).missing == []  # not the cwd's


def test_a_root_label_unlike_its_directory_name(tmp_path: Path) -> None:
    (tmp_path / "prod" / "a").mkdir(parents=True)
    (tmp_path / "prod" / "a" / "kept.md").write_text("x")
    stored = [doc("live/a/kept.md"), doc("live/a/gone.md"), doc("prod/a/gone.md")]
    plan = missing_documents(stored, [tmp_path / "prod"], {"live": tmp_path / "prod"})
    assert plan.missing == ["live/a/gone.md"]


def test_a_broken_jsonl_file_keeps_its_records_and_a_missing_path_prunes_nothing(
    tmp_path: Path,
) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "alerts.jsonl").write_text('{"id": "r1", "text": "a"}\n{not json\n')
    stored = [doc("r1", "docs/alerts.jsonl#r1"), doc("r2", "docs/alerts.jsonl#r2")]
    roots = {"docs": tmp_path / "docs"}
    plan = missing_documents(stored, [tmp_path / "docs"], roots)
    assert plan.missing == []
    assert [d for d, _ in plan.kept] == ["r1", "r2"] and "line 2" in plan.kept[0][1]
    with pytest.raises(InvalidRequestError, match="does not exist: nothing pruned"):
        missing_documents(stored, [tmp_path / "no-such-dir"], roots)
