"""Report vectors: embedded when a report is written, stored once, read by every question.

Global search ranks community reports and scores their statements against the question
by cosine similarity. Embedding them per question cost minutes on a fresh process, so
each report's statements — those that can become key points — are embedded when the
report is written or refreshed (global search ranks a report by its statement closest
to the question, so the whole report text is never embedded) and stored in the store's
``report_vectors`` table (its SQLite file or PostgreSQL schema), keyed by community id
with a hash of those texts and the embedding model. Whatever the graph backend, the
vectors live next to the documents. :class:`ReportVectorIndex` is the derived, in-memory
view (an exact numpy matrix per report): it catches up with the stored reports like the
other indexes do — a report whose texts are unchanged is never embedded again, a vanished
one is dropped — and reloads only when the table changed. A text is embedded once per
catch-up however many reports quote it (a parent's findings are often its children's,
and a current report's vectors serve a changed one quoting the same sentence), and the
vectors are stored every ``reports_per_write`` reports, so a build that stops half-way
keeps what it embedded.
"""

from __future__ import annotations

import hashlib
import json
import threading
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from graph.models import CommunityReport
from lore.db import Conn, Database, Tables, upsert_sql
from lore.embedders import Embedder, Matrix
from lore.jsonsafe import loads_stored
from retrieval.analyzer import Analyzer
from retrieval.keypoints import ReportTerms, report_units

_SCHEMA = """
CREATE TABLE IF NOT EXISTS report_vectors (
    community_id TEXT PRIMARY KEY, content_hash TEXT NOT NULL, model TEXT NOT NULL,
    dimension INTEGER NOT NULL, rows INTEGER NOT NULL, vectors BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS report_terms (
    community_id TEXT PRIMARY KEY, text_hash TEXT NOT NULL, terms BLOB NOT NULL
);
"""
_COLUMNS = ("community_id", "content_hash", "model", "dimension", "rows", "vectors")
_TERM_COLUMNS = ("community_id", "text_hash", "terms")
_SEP = "\n"  # between a part's terms: no term holds a line break


def text_hash(report: CommunityReport, analyzer_key: str) -> str:
    """Hash of what a report's analysed terms come from: its texts and the analyzer."""
    parts = [analyzer_key, report.title, report.summary, *(f.text for f in report.findings)]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:24]


def encode_terms(terms: ReportTerms) -> bytes:
    """A report's analysed terms as stored: JSON (title, summary, findings), compressed.

    Compressed, they take a third of the room (6.7 MB → 2.3 MB for SciFact's 4,745 reports).
    """
    parts = [
        _SEP.join(terms.title),
        _SEP.join(terms.summary),
        [_SEP.join(f) for f in terms.findings],
    ]
    return zlib.compress(json.dumps(parts).encode())


def decode_terms(raw: bytes) -> ReportTerms:
    """What :func:`encode_terms` stored."""

    def split(part: str) -> tuple[str, ...]:
        return tuple(part.split(_SEP)) if part else ()

    title, summary, findings = loads_stored(zlib.decompress(raw))
    return ReportTerms(split(title), split(summary), tuple(split(f) for f in findings))


def statements(report: CommunityReport) -> list[str]:
    """What is embedded for a report: each statement that can become a key point."""
    return [text for text, _ in report_units(report)]


def content_hash(texts: Sequence[str], model: str) -> str:
    """Hash of a report's statements and the model that embeds them."""
    return hashlib.sha256(json.dumps([model, "statements", *texts]).encode()).hexdigest()[:24]


_VECTOR_SELECT = "SELECT community_id, content_hash, dimension, rows, vectors FROM report_vectors"
_TERM_SELECT = "SELECT community_id, text_hash, terms FROM report_terms"


def _vector_rows(rows: Sequence[Any]) -> dict[str, tuple[str, Matrix]]:
    """Community id → (content hash, vectors) from (id, hash, dimension, rows, blob) rows."""
    out: dict[str, tuple[str, Matrix]] = {}
    for cid, digest, dim, n, blob in rows:
        matrix = np.frombuffer(bytes(blob), dtype=np.float32).reshape(int(n), int(dim))
        out[str(cid)] = (str(digest), matrix)
    return out


def _term_rows(rows: Sequence[Any]) -> dict[str, tuple[str, bytes]]:
    """Community id → (text hash, encoded terms) from (id, hash, terms) rows."""
    return {
        str(cid): (str(digest), raw.encode() if isinstance(raw, str) else bytes(raw))
        for cid, digest, raw in rows
    }


class ReportVectorStore(Tables):
    """The ``report_vectors`` table (system of record for report embeddings)."""

    COMPONENT = "report_vectors"

    def __init__(self, where: Path | Database) -> None:
        super().__init__(where, _SCHEMA)

    def generation(self) -> tuple[int, int]:
        """Changes whenever the vectors were written (by this or another process)."""
        return self._generation()

    @contextmanager
    def _write(self) -> Iterator[Conn]:
        """A write transaction that :meth:`generation` readers notice."""
        with self._transaction() as db:
            yield db
            self.database.bump_generation(db)

    def hashes(self) -> dict[str, str]:
        """Community id → content hash of its stored vectors."""
        with self._read() as db:
            rows = db.execute("SELECT community_id, content_hash FROM report_vectors")
            return {str(c): str(h) for c, h in rows}

    def hashes_of(self, community_ids: Sequence[str]) -> dict[str, str]:
        """Community id → content hash for these ids only (an indexed read)."""
        select = "SELECT community_id, content_hash FROM report_vectors"
        return {str(c): str(h) for c, h in self._rows_of(select, community_ids)}

    def load(self) -> dict[str, tuple[str, Matrix]]:
        """Community id → (content hash, vectors) for every stored report."""
        with self._read() as db:
            return _vector_rows(db.execute(_VECTOR_SELECT).fetchall())

    def load_of(self, community_ids: Sequence[str]) -> dict[str, tuple[str, Matrix]]:
        """:meth:`load` for these ids only (an indexed read)."""
        return _vector_rows(self._rows_of(_VECTOR_SELECT, community_ids))

    def load_terms_of(self, community_ids: Sequence[str]) -> dict[str, tuple[str, bytes]]:
        """:meth:`load_terms` for these ids only (an indexed read)."""
        return _term_rows(self._rows_of(_TERM_SELECT, community_ids))

    def _rows_of(self, select: str, community_ids: Sequence[str]) -> list[Any]:
        """The rows of ``select`` for these community ids (asked 500 at a time)."""
        ids = sorted(set(community_ids))
        rows: list[Any] = []
        with self._read() as db:
            for start in range(0, len(ids), 500):
                part = ids[start : start + 500]
                marks = ", ".join("?" * len(part))
                rows.extend(db.execute(f"{select} WHERE community_id IN ({marks})", part))
        return rows

    def load_terms(self) -> dict[str, tuple[str, bytes]]:
        """Community id → (text hash, encoded terms) for every analysed report."""
        with self._read() as db:
            return _term_rows(db.execute(_TERM_SELECT).fetchall())

    def put_terms(self, rows: Sequence[tuple[str, str, bytes]], gone: Sequence[str]) -> None:
        """Store (community id, text hash, encoded terms) rows; drop ``gone`` ids."""
        if not rows and not gone:
            return
        with self._write() as db:
            db.executemany("DELETE FROM report_terms WHERE community_id = ?", [(c,) for c in gone])
            db.executemany(upsert_sql("report_terms", _TERM_COLUMNS, ("community_id",)), rows)

    def put(self, rows: Sequence[tuple[str, str, str, Matrix]], gone: Sequence[str]) -> None:
        """Store (community id, hash, model, vectors) rows; drop ``gone`` ids."""
        if not rows and not gone:
            return
        with self._write() as db:
            db.executemany(
                "DELETE FROM report_vectors WHERE community_id = ?", [(c,) for c in gone]
            )
            db.executemany(
                upsert_sql("report_vectors", _COLUMNS, ("community_id",)),
                [
                    (cid, digest, model, m.shape[1], m.shape[0], m.astype(np.float32).tobytes())
                    for cid, digest, model, m in rows
                ],
            )


@dataclass
class ReportVectorIndex:
    """Report vectors in memory, caught up with the stored reports on demand."""

    store: ReportVectorStore
    embedder: Embedder
    reports_per_write: int = 256  # progress is stored every this many reports
    analyzer: Analyzer | None = None  # given: each report's analysed terms are kept too
    _vectors: dict[str, tuple[str, Matrix]] = field(default_factory=dict, init=False)
    _terms: dict[str, tuple[str, bytes]] = field(default_factory=dict, init=False)
    _generation: tuple[int, int] | None = field(default=None, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    # community id → (report, [analyzer key,] its hash): the statement and text hashes of
    # the reports a catch-up checked, so the question that follows does not hash them
    # again (by the report's identity: a report is immutable, a rewritten one another object)
    _content: dict[str, tuple[CommunityReport, str]] = field(default_factory=dict, init=False)
    _texts: dict[str, tuple[CommunityReport, str, str]] = field(default_factory=dict, init=False)
    # community id → (its stored terms, decoded): a view read again after a write decodes
    # only the terms that changed (by the stored bytes' identity)
    _decoded: dict[str, tuple[bytes, ReportTerms]] = field(default_factory=dict, init=False)

    def catch_up(self, reports: Sequence[CommunityReport]) -> int:
        """Embed reports whose texts changed, drop vanished ones; return reports embedded."""
        with self._lock:  # two questions at once embed a new report once
            return self._catch_up(reports)

    def _catch_up(self, reports: Sequence[CommunityReport]) -> int:
        self._reload()
        if self._analyse(reports, sorted(set(self._terms) - {r.community_id for r in reports})):
            self._generation = self.store.generation()  # our write: nothing to reload
        model = self.embedder.name
        wanted = {r.community_id: statements(r) for r in reports}
        digests = {cid: content_hash(texts, model) for cid, texts in wanted.items()}
        self._content = {r.community_id: (r, digests[r.community_id]) for r in reports}
        stale = [cid for cid in sorted(wanted) if self._digest(cid) != digests[cid]]
        gone = sorted(set(self._vectors) - set(wanted))
        if not stale and not gone:
            return 0
        known = self._reusable(wanted, digests, {t for cid in stale for t in wanted[cid]})
        for start in range(0, max(1, len(stale)), self.reports_per_write):
            part = stale[start : start + self.reports_per_write]
            # every distinct statement once, in one call (the embedder sorts it by length)
            missing = list(dict.fromkeys(t for cid in part for t in wanted[cid] if t not in known))
            if missing:
                known.update(zip(missing, self.embedder.embed_documents(missing), strict=True))
            rows = [(cid, digests[cid], model, self._matrix(wanted[cid], known)) for cid in part]
            self.store.put(rows, gone if start == 0 else ())
            for cid, digest, _, matrix in rows:
                self._vectors[cid] = (digest, matrix)
            self._generation = self.store.generation()
        for cid in gone:
            self._vectors.pop(cid, None)
        return len(stale)

    def update(self, written: Sequence[CommunityReport], gone: Sequence[str]) -> int:
        """Embed only these new or rewritten reports and drop ``gone``; return embedded.

        A refresh's cost: the stored hashes of just these ids are read (a report whose
        statements are unchanged is not embedded again), nothing else. The in-memory view
        is updated for them; another process's writes are still seen by the next
        :meth:`catch_up`.
        """
        with self._lock:
            self._analyse(written, gone)
            model = self.embedder.name
            wanted = {r.community_id: statements(r) for r in written}
            digests = {cid: content_hash(texts, model) for cid, texts in wanted.items()}
            stored = self.store.hashes_of(list(wanted))
            stale = [cid for cid in sorted(wanted) if stored.get(cid) != digests[cid]]
            known = self._reusable(wanted, digests, {t for cid in stale for t in wanted[cid]})
            missing = list(dict.fromkeys(t for cid in stale for t in wanted[cid] if t not in known))
            if missing:
                known.update(zip(missing, self.embedder.embed_documents(missing), strict=True))
            rows = [(cid, digests[cid], model, self._matrix(wanted[cid], known)) for cid in stale]
            self.store.put(rows, list(gone))
            for cid, digest, _, matrix in rows:
                self._vectors[cid] = (digest, matrix)
            for cid in gone:
                self._vectors.pop(cid, None)
            return len(stale)

    def refresh(self, written: Sequence[CommunityReport], gone: Sequence[str]) -> int:
        """Catch up with these reports alone (written since the view was read); drop ``gone``.

        Their stored vectors and terms are read by id (another process's refresh may
        have written them), then :meth:`update` embeds those still not current. What a
        patched view costs: the reports it read again, not every report.
        """
        ids = [r.community_id for r in written]
        stored = self.store.load_of(ids)
        terms = self.store.load_terms_of(ids) if self.analyzer is not None else {}
        with self._lock:
            self._vectors.update(stored)
            self._terms.update(terms)
        return self.update(written, gone)

    def _matrix(self, texts: Sequence[str], known: dict[str, Matrix]) -> Matrix:
        if not texts:
            return np.zeros((0, self.embedder.dimension), dtype=np.float32)
        return np.stack([known[t] for t in texts])

    def _reusable(
        self, wanted: dict[str, list[str]], digests: dict[str, str], needed: set[str]
    ) -> dict[str, Matrix]:
        """Vectors of ``needed`` statements that current reports hold (not embedded twice)."""
        known: dict[str, Matrix] = {}
        for cid, texts in wanted.items():
            found = self._vectors.get(cid)
            if found is None or found[0] != digests[cid]:
                continue
            for text, vector in zip(texts, found[1], strict=True):
                if text in needed:
                    known.setdefault(text, vector)
        return known

    def _digest(self, community_id: str) -> str | None:
        found = self._vectors.get(community_id)
        return found[0] if found else None

    def _reload(self) -> None:
        generation = self.store.generation()
        if generation != self._generation:
            self._vectors = self.store.load()
            self._terms = self.store.load_terms() if self.analyzer is not None else {}
            self._generation = generation

    def _analyse(self, reports: Sequence[CommunityReport], gone: Sequence[str]) -> bool:
        """Analyse and store the terms of ``reports`` whose stored terms are not current.

        Whether it wrote. (The caller decides whether the write leaves it current: a
        refresh's :meth:`update` does not, so another process's writes are still read.)
        """
        if self.analyzer is None:
            return False
        key = self.analyzer.config.key()
        rows = []
        for report in reports:
            digest = self._text_hash(report, key)
            found = self._terms.get(report.community_id)
            if found is None or found[0] != digest:
                terms = encode_terms(ReportTerms.of(report, self.analyzer.tokens))
                rows.append((report.community_id, digest, terms))
        self.store.put_terms(rows, list(gone))
        for cid, digest, terms in rows:
            self._terms[cid] = (digest, terms)
        for cid in gone:
            self._terms.pop(cid, None)
            self._texts.pop(cid, None)
            self._decoded.pop(cid, None)
        return bool(rows or gone)

    def analysed(
        self, reports: Sequence[CommunityReport], analyzer_key: str
    ) -> dict[str, ReportTerms]:
        """Community id → stored terms of those of ``reports`` analysed as they are now."""
        if self.analyzer is None or self.analyzer.config.key() != analyzer_key:
            return {}
        out: dict[str, ReportTerms] = {}
        for report in reports:
            found = self._terms.get(report.community_id)
            if found is None or found[0] != self._text_hash(report, analyzer_key):
                continue
            decoded = self._decoded.get(report.community_id)
            if decoded is not None and decoded[0] is found[1]:
                out[report.community_id] = decoded[1]
                continue
            try:
                out[report.community_id] = decode_terms(found[1])
            except (zlib.error, ValueError, TypeError):
                # unreadable: analysed for this question, stored again at the next catch-up
                self._terms.pop(report.community_id, None)
                continue
            self._decoded[report.community_id] = (found[1], out[report.community_id])
        return out

    def vectors(self, report: CommunityReport) -> Matrix | None:
        """The report's statement vectors (in :func:`statements` order), if current."""
        found = self._vectors.get(report.community_id)
        if found is None:
            return None
        checked = self._content.get(report.community_id)
        if checked is not None and checked[0] is report:
            digest = checked[1]
        else:
            digest = content_hash(statements(report), self.embedder.name)
        return found[1] if found[0] == digest else None

    def _text_hash(self, report: CommunityReport, analyzer_key: str) -> str:
        """:func:`text_hash`, once per report object and analyzer."""
        checked = self._texts.get(report.community_id)
        if checked is not None and checked[0] is report and checked[1] == analyzer_key:
            return checked[2]
        digest = text_hash(report, analyzer_key)
        self._texts[report.community_id] = (report, analyzer_key, digest)
        return digest

    def by_text(self, reports: Sequence[CommunityReport]) -> dict[str, Matrix]:
        """Text → vector for every embedded text of these reports (current ones only)."""
        out: dict[str, Matrix] = {}
        for report in reports:
            matrix = self.vectors(report)
            if matrix is not None:
                for text, vector in zip(statements(report), matrix, strict=True):
                    out.setdefault(text, vector)
        return out
