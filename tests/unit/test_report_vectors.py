"""Report vectors: written once per report text, reloaded without embedding, pruned."""

from collections.abc import Sequence
from pathlib import Path

from graph.models import CommunityReport, Finding
from lore.embedders import Matrix
from retrieval.report_vectors import ReportVectorIndex, ReportVectorStore, report_texts
from tests.unit.test_global_map_reduce import BagOfWords


class Counting(BagOfWords):
    """The bag-of-words embedder, counting the texts it embeds."""

    def __init__(self) -> None:
        self.embedded = 0

    def embed_documents(self, texts: Sequence[str]) -> Matrix:
        self.embedded += len(texts)
        return super().embed_documents(texts)


def report(cid: str, text: str) -> CommunityReport:
    finding = Finding(text, ("pool",), (), ("c1",))
    return CommunityReport(cid, 0, f"title {cid}", "summary", (finding,), 1.0, cid)


def test_unchanged_reports_are_never_embedded_again(tmp_path: Path) -> None:
    embedder = Counting()
    index = ReportVectorIndex(ReportVectorStore(tmp_path / "s.sqlite3"), embedder)
    reports = [report("0-0", "The pool ran dry."), report("0-1", "Retries doubled.")]
    assert index.catch_up(reports) == 2
    assert embedder.embedded == sum(len(report_texts(r)) for r in reports)
    assert index.catch_up(reports) == 0  # nothing changed: nothing embedded
    vectors = index.vectors(reports[0])
    assert vectors is not None and vectors.shape == (len(report_texts(reports[0])), 64)

    # another process (a new index on the same file) reads them back without embedding
    fresh = Counting()
    again = ReportVectorIndex(ReportVectorStore(tmp_path / "s.sqlite3"), fresh)
    assert again.catch_up(reports) == 0 and fresh.embedded == 0
    assert set(again.by_text(reports)) == {t for r in reports for t in report_texts(r)}

    # a changed report is embedded again, a vanished one is dropped
    changed = [report("0-0", "The pool ran dry at noon.")]
    assert again.catch_up(changed) == 1
    assert again.vectors(reports[0]) is None and again.vectors(changed[0]) is not None
    assert set(again.store.hashes()) == {"0-0"}
