"""Report vectors: written once per report text, reloaded without embedding, pruned."""

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from graph.models import CommunityReport, Finding
from lore.embedders import Matrix
from retrieval.analyzer import Analyzer, AnalyzerConfig
from retrieval.keypoints import ReportTerms
from retrieval.report_vectors import (
    ReportVectorIndex,
    ReportVectorStore,
    decode_terms,
    encode_terms,
    statements,
)
from tests.tables import another_process, tables_at
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


def test_unchanged_reports_are_never_embedded_again(store_url: str | None, tmp_path: Path) -> None:
    embedder = Counting()
    store = ReportVectorStore(tables_at(store_url, tmp_path / "s.sqlite3"))
    index = ReportVectorIndex(store, embedder)
    reports = [report("0-0", "The pool ran dry."), report("0-1", "Retries doubled.")]
    assert index.catch_up(reports) == 2
    embedded = sum(len(statements(r)) for r in reports)  # statements only, never whole texts
    assert embedder.embedded == embedded
    assert index.catch_up(reports) == 0  # nothing changed: nothing embedded
    vectors = index.vectors(reports[0])
    assert vectors is not None and vectors.shape == (len(statements(reports[0])), 64)

    # another process (a new index on the same tables) reads them back without embedding
    with another_process(store_url, tmp_path / "s.sqlite3") as elsewhere:
        fresh = Counting()
        again = ReportVectorIndex(ReportVectorStore(elsewhere), fresh)
        assert again.catch_up(reports) == 0 and fresh.embedded == 0
        assert set(again.by_text(reports)) == {t for r in reports for t in statements(r)}

        # a changed report is embedded again, a vanished one is dropped
        changed = [report("0-0", "The pool ran dry at noon.")]
        assert again.catch_up(changed) == 1
        assert again.vectors(reports[0]) is None and again.vectors(changed[0]) is not None
        assert set(again.store.hashes()) == {"0-0"}

        # the first process sees that write and reloads instead of serving old vectors
        assert index.catch_up(changed) == 0 and embedder.embedded == embedded
        assert index.vectors(changed[0]) is not None and index.vectors(reports[1]) is None
        again.store.close()
    store.close()


def shared(cid: str, *texts: str) -> CommunityReport:
    findings = tuple(Finding(t, ("pool",), (), ("c1",)) for t in texts)
    return CommunityReport(cid, 0, f"title {cid}", "summary", findings, 1.0, cid)


def test_a_sentence_quoted_by_many_reports_is_embedded_once(tmp_path: Path) -> None:
    embedder = Counting()
    index = ReportVectorIndex(ReportVectorStore(tmp_path / "s.sqlite3"), embedder)
    child = shared("0-0", "The pool ran dry.", "Retries doubled.")
    parent = shared("1-0", "The pool ran dry.", "Retries doubled.", "Nobody was paged.")
    assert index.catch_up([child, parent]) == 2
    distinct = set(statements(child)) | set(statements(parent))
    said = len(statements(child) + statements(parent))
    assert embedder.embedded == len(distinct) < said
    by_text = index.by_text([child, parent])
    assert set(by_text) == distinct

    # a changed report reuses the current vectors of the sentences it still quotes
    edited = shared("1-0", "The pool ran dry.", "Nobody was paged at all.")
    before = embedder.embedded
    assert index.catch_up([child, edited]) == 1
    new_texts = set(statements(edited)) - distinct
    assert embedder.embedded - before == len(new_texts)
    vectors = index.vectors(edited)
    assert vectors is not None and (vectors[0] == by_text["The pool ran dry."]).all()
    index.store.close()


class FailingAfter(Counting):
    """Embeds ``calls`` batches, then fails like a killed process would stop."""

    def __init__(self, calls: int) -> None:
        super().__init__()
        self.calls = calls

    def embed_documents(self, texts: Sequence[str]) -> Matrix:
        if self.calls == 0:
            raise RuntimeError("stopped")
        self.calls -= 1
        return super().embed_documents(texts)


def test_a_stopped_catch_up_keeps_the_reports_it_stored(tmp_path: Path) -> None:
    reports = [shared(f"0-{i}", f"Sentence number {i} of the corpus.") for i in range(5)]
    store = ReportVectorStore(tmp_path / "s.sqlite3")
    stopping = ReportVectorIndex(store, FailingAfter(calls=2), reports_per_write=2)
    with pytest.raises(RuntimeError, match="stopped"):
        stopping.catch_up(reports)
    assert set(store.hashes()) == {"0-0", "0-1", "0-2", "0-3"}  # two writes made it
    resumed = Counting()
    again = ReportVectorIndex(ReportVectorStore(tmp_path / "s.sqlite3"), resumed)
    assert again.catch_up(reports) == 1  # only the report never stored
    assert resumed.embedded == len(statements(reports[4]))
    store.close()
    again.store.close()


class CountingAnalyzer(Analyzer):
    """The analyzer, counting the texts it analyses."""

    def __init__(self, config: AnalyzerConfig | None = None) -> None:
        super().__init__(config or AnalyzerConfig())
        self.texts = 0

    def tokens(self, text: str) -> list[str]:
        self.texts += 1
        return super().tokens(text)


def test_analysed_terms_are_kept_with_the_vectors_and_read_back_by_another_process(
    store_url: str | None, tmp_path: Path
) -> None:
    analyzer = CountingAnalyzer()
    key = analyzer.config.key()
    store = ReportVectorStore(tables_at(store_url, tmp_path / "s.sqlite3"))
    index = ReportVectorIndex(store, Counting(), analyzer=analyzer)
    odd = report("0-2", "Zürich\u2019s E11000 -- see pool.idle_timeout_ms\u3000and   __init__.")
    reports = [report("0-0", "The pool ran dry."), report("0-1", "Retries doubled."), odd]
    index.catch_up(reports)
    expected = {r.community_id: ReportTerms.of(r, Analyzer().tokens) for r in reports}
    assert index.analysed(reports, key) == expected
    assert index.analysed(reports, AnalyzerConfig(stemming=False).key()) == {}

    with another_process(store_url, tmp_path / "s.sqlite3") as elsewhere:
        fresh = CountingAnalyzer()
        again = ReportVectorIndex(ReportVectorStore(elsewhere), Counting(), analyzer=fresh)
        again.catch_up(reports)
        assert again.analysed(reports, key) == expected and fresh.texts == 0  # read, not analysed

        # a report whose text changed is analysed again; a vanished one is dropped
        retitled = replace(reports[0], title="a new title")
        assert again.analysed([retitled], key) == {}  # stale terms are never served
        again.catch_up([retitled, reports[1]])
        assert again.analysed([retitled], key) == {
            "0-0": ReportTerms.of(retitled, Analyzer().tokens)
        }
        assert set(again.store.load_terms()) == {"0-0", "0-1"}
        # a refresh's update stores the rewritten report's terms and drops the gone ones
        again.update([reports[0]], ["0-1"])
        assert set(again.store.load_terms()) == {"0-0"}
        assert again.analysed([reports[0]], key) == {"0-0": expected["0-0"]}
        again.store.close()
    store.close()


def test_terms_survive_encoding_whatever_they_hold() -> None:
    terms = ReportTerms(("a", "zürich\u3000x", "e11000"), (), ((), ("pool.idle", "b"), ("",)))
    assert decode_terms(encode_terms(terms)) == ReportTerms(
        terms.title, (), ((), ("pool.idle", "b"), ())
    )


def test_unreadable_stored_terms_are_analysed_again(tmp_path: Path) -> None:
    analyzer = CountingAnalyzer()
    store = ReportVectorStore(tmp_path / "s.sqlite3")
    index = ReportVectorIndex(store, Counting(), analyzer=analyzer)
    reports = [report("0-0", "The pool ran dry.")]
    index.catch_up(reports)
    digest = store.load_terms()["0-0"][0]
    store.put_terms([("0-0", digest, b"not compressed json")], [])
    again = ReportVectorIndex(
        ReportVectorStore(tmp_path / "s.sqlite3"), Counting(), analyzer=analyzer
    )
    again.catch_up(reports)
    assert again.analysed(reports, analyzer.config.key()) == {}  # never a failed question
    again.catch_up(reports)  # the next question's catch-up stores them again
    assert again.analysed(reports, analyzer.config.key()) == {
        "0-0": ReportTerms.of(reports[0], Analyzer().tokens)
    }
    store.close()


def test_a_refresh_that_only_stores_terms_still_reads_what_another_process_wrote(
    store_url: str | None, tmp_path: Path
) -> None:
    store = ReportVectorStore(tables_at(store_url, tmp_path / "s.sqlite3"))
    index = ReportVectorIndex(store, Counting(), analyzer=Analyzer())
    first = report("0-0", "The pool ran dry.")
    index.catch_up([first])
    with another_process(store_url, tmp_path / "s.sqlite3") as elsewhere:
        other = ReportVectorIndex(ReportVectorStore(elsewhere), Counting(), analyzer=Analyzer())
        second = report("0-1", "Retries doubled.")
        other.update([second], [])  # another process's refresh
        retitled = replace(first, title="a new title")  # same statements: no new vectors
        index.update([retitled], [])  # only its terms are stored
        index.catch_up([retitled, second])
        assert index.vectors(second) is not None  # read back, not embedded here
        assert isinstance(index.embedder, Counting) and index.embedder.embedded == 1
        other.store.close()
    store.close()


def test_a_patched_view_reads_the_rewritten_reports_by_id_and_embeds_nothing_current(
    store_url: str | None, tmp_path: Path
) -> None:
    # global search patches its view after a write of reports: it reads those reports'
    # vectors and terms by id (another process's refresh wrote them), embedding none
    analyzer = Analyzer()
    here = Counting()
    reader = ReportVectorIndex(
        ReportVectorStore(tables_at(store_url, tmp_path / "s.sqlite3")), here, analyzer=analyzer
    )
    reports = [report("0-0", "The pool ran dry."), report("0-1", "Retries doubled.")]
    reader.catch_up(reports)
    embedded = here.embedded
    rewritten = report("0-0", "The pool ran dry at noon.")
    with another_process(store_url, tmp_path / "s.sqlite3") as elsewhere:
        writer = ReportVectorIndex(ReportVectorStore(elsewhere), Counting(), analyzer=analyzer)
        assert writer.update([rewritten], ["0-1"]) == 1
    assert reader.vectors(rewritten) is None  # not read yet
    assert reader.refresh([rewritten], ["0-1"]) == 0  # current in the store: nothing embedded
    assert here.embedded == embedded
    assert reader.vectors(rewritten) is not None and reader.vectors(reports[1]) is None
    assert set(reader.analysed([rewritten], analyzer.config.key())) == {"0-0"}
    assert set(reader.by_text([rewritten])) == set(statements(rewritten))
