"""BM25 keyword index on tantivy (Rust), fed with our analyzer's tokens.

Text is analyzed in Python (:mod:`retrieval.analyzer`) and indexed as pre-tokenized
strings, so documents and queries always share one analyzer. Metadata terms live in a
``meta`` field; a filter is a constant-score clause that must match, so it restricts the
candidates inside the engine without changing BM25 scores.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

import tantivy

from lore.db import ensure_dir
from lore.store import IndexRow
from retrieval.analyzer import Analyzer
from retrieval.filters import ResolvedFilter, filter_term
from retrieval.sparse import Hits
from retrieval.state import STATE, FileWatch, read_state, write_state

_HEAP_BYTES = 64_000_000


def _schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    builder.add_unsigned_field("row_id", stored=False, indexed=True, fast=True)
    builder.add_text_field("body", tokenizer_name="raw", index_option="freq")
    builder.add_text_field("meta", tokenizer_name="raw", index_option="basic")
    return builder.build()


class TantivyIndex:
    """On-disk tantivy index in ``directory``; one writer at a time (the caller locks).

    Its health is checked when it opens, not assumed: ``state.json`` records the change
    sequence applied and the number of documents committed, and files that disagree
    (tantivy silently starts an empty index when ``meta.json`` is gone) are discarded so
    the catch-up rebuilds them from the store; :attr:`repaired` says why.
    """

    def __init__(self, directory: Path, analyzer: Analyzer) -> None:
        self._dir = directory
        self._analyzer = analyzer
        self._state_path = directory / "state.json"
        self._schema = _schema()
        ensure_dir(directory)
        state = read_state(self._state_path)
        if state.get("analyzer") != analyzer.config.key():
            # Built with another analyzer (or never finished): rebuild from the store.
            shutil.rmtree(directory)
            directory.mkdir(parents=True)
            state = {}
        self._applied = int(state.get("applied_seq", 0))
        self._watch = FileWatch(directory)
        self.repaired: str | None = None
        """Why the files were discarded at open (None when they matched the state)."""
        if self._applied and not (directory / "meta.json").exists():
            self._discard(f"meta.json missing while state.json records seq {self._applied}")
        try:
            self._index = tantivy.Index(self._schema, path=str(directory), reuse=True)
        except ValueError as exc:  # damaged files: start empty, the catch-up rebuilds
            self._discard(f"tantivy could not open the files ({exc})")
            self._index = tantivy.Index(self._schema, path=str(directory), reuse=True)
        recorded = state.get("docs")
        found = self._index.searcher().num_docs
        if self._applied and isinstance(recorded, int) and found != recorded:
            del self._index
            self._discard(f"{found} documents on disk, state.json records {recorded}")
            self._index = tantivy.Index(self._schema, path=str(directory), reuse=True)
        self._writer: tantivy.IndexWriter | None = None
        if self._applied:
            self._watch.adopt(self._files())

    def _discard(self, reason: str) -> None:  # before the watch adopts anything
        shutil.rmtree(self._dir)
        self._dir.mkdir(parents=True)
        self._applied = 0
        self.repaired = reason

    @property
    def applied_seq(self) -> int:
        """Last applied change sequence number."""
        return self._applied

    @property
    def saved_seq(self) -> int:
        """Every commit is saved: the applied sequence."""
        return self._applied

    def flush(self) -> None:
        """Nothing to save: every commit was."""

    def _w(self) -> tantivy.IndexWriter:
        if self._writer is None:
            self._writer = self._index.writer(_HEAP_BYTES, 1)
        return self._writer

    def upsert(self, rows: Sequence[IndexRow]) -> None:
        """Replace-or-add each row."""
        if not rows:
            return
        writer = self._w()
        self._delete_ids(writer, [row.row_id for row in rows])
        for row in rows:
            doc = tantivy.Document()
            doc.add_unsigned("row_id", row.row_id)
            tokens = [
                tantivy.Token(term, position, 0, 0)
                for position, term in enumerate(self._analyzer.tokens(row.text))
            ]
            doc.add_pre_tokenized_text("body", tantivy.PreTokenizedString("", tokens))
            for key, value in row.terms:
                doc.add_text("meta", filter_term(key, value))
            writer.add_document(doc)

    def delete(self, row_ids: Sequence[int]) -> None:
        """Delete by row id."""
        if row_ids:
            self._delete_ids(self._w(), row_ids)

    def _delete_ids(self, writer: tantivy.IndexWriter, row_ids: Sequence[int]) -> None:
        for start in range(0, len(row_ids), 1000):
            batch = list(row_ids[start : start + 1000])
            writer.delete_documents_by_query(
                tantivy.Query.term_set_query(self._schema, "row_id", batch)
            )

    def commit(self, seq: int) -> None:
        """Commit, release the writer lock, reload readers, record ``seq``."""
        if self._writer is not None:
            self._writer.commit()
            self._writer.wait_merging_threads()
            self._writer = None
        self._index.reload()
        self._applied = seq
        write_state(
            self._state_path,
            {
                "applied_seq": seq,
                "analyzer": self._analyzer.config.key(),
                "docs": self._index.searcher().num_docs,
                "files": self._watch.adopt(self._files()),
            },
        )
        self._watch.adopt(self._files())  # and state.json as just written

    def _files(self) -> list[str]:
        """The files of the committed index (segments, ``meta.json``), not locks or state."""
        return sorted(
            p.name
            for p in self._dir.iterdir()
            if p.is_file()
            and not p.name.startswith(".tantivy-")
            and p.name != STATE
            and not p.name.endswith(".tmp")
        )

    def damage(self) -> str | None:
        """Why the committed files are not what this process wrote or loaded (None: intact)."""
        return self._watch.damage()

    def recreate(self) -> None:
        """Start an empty index in a new directory (the old one was removed under us)."""
        self._writer = None
        ensure_dir(self._dir)
        self._index = tantivy.Index(self._schema, path=str(self._dir), reuse=True)
        self._applied = 0
        self._watch.forget()

    def reset(self) -> None:
        """Delete every document."""
        self._w().delete_all_documents()
        self._applied = 0

    def search(
        self,
        query: str,
        limit: int,
        flt: ResolvedFilter | None = None,
        require: Sequence[str] = (),
    ) -> Hits:
        """BM25 top ``limit`` hits, restricted by the filter inside the engine."""
        terms = self._analyzer.query_terms(query)
        if not terms or limit <= 0:
            return []
        text_query = tantivy.Query.boolean_query(
            [(tantivy.Occur.Should, self._body_term(term)) for term in terms]
        )
        clauses = [(tantivy.Occur.Must, text_query)]
        clauses.extend((tantivy.Occur.Must, self._constant(self._body_term(t))) for t in require)
        if flt is not None:
            if not flt.allowed:
                return []
            for key, values in flt.clauses.items():
                allowed = tantivy.Query.term_set_query(
                    self._schema, "meta", [filter_term(key, v) for v in values]
                )
                clauses.append((tantivy.Occur.Must, self._constant(allowed)))
        query_obj = text_query if len(clauses) == 1 else tantivy.Query.boolean_query(clauses)
        searcher = self._index.searcher()
        result = searcher.search(query_obj, limit, count=False)
        if not result.hits:
            return []
        row_ids = searcher.fast_field_values("row_id", [addr for _, addr in result.hits])
        return [
            (int(row_id), float(score))
            for (score, _), row_id in zip(result.hits, row_ids, strict=True)
            if row_id is not None
        ]

    def _body_term(self, term: str) -> tantivy.Query:
        return tantivy.Query.term_query(self._schema, "body", term)

    @staticmethod
    def _constant(query: tantivy.Query) -> tantivy.Query:
        """A clause that must match but adds nothing to the BM25 score."""
        return tantivy.Query.const_score_query(query, 0.0)

    def __len__(self) -> int:
        return int(self._index.searcher().num_docs)
