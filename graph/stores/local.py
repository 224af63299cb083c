"""Embedded GraphStore: tables next to the documents (the SQLite store, or PostgreSQL).

Mentions are stored per chunk (``entity_mentions``, ``relation_mentions``); merged
entities and relations are computed from them by SQL, so removing a chunk's rows is the
whole cascade: an entity or relation no other chunk mentions is gone. A chunk's mention
descriptions are stored once each (``mention_texts``, numbered per chunk; a mention holds
the number in ``text_n``): the offline extractor gives every relation of a chunk the same
"mentioned in …" and every entity of a sentence that sentence, which stored per mention
made the mention tables larger than the text they came from. Rows written before keep
their text in ``description``. Graph algorithms
(Leiden) read :meth:`edges`; a NetworkX view is built on demand by :meth:`to_networkx`.
Rows that feed the graph algorithms are sorted here, not by the database, so their order
is the same on either engine whatever PostgreSQL's collation.
"""

from __future__ import annotations

import json
import math
import secrets
from collections import defaultdict
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graph.communities import Community, Edge
from graph.models import (
    ChunkMentions,
    CommunityReport,
    Entity,
    EntityMention,
    Relation,
    RelationMention,
    ReportVersion,
    entity_key,
)
from graph.stores.merging import (
    MentionRow,
    checked_chunks,
    checked_reports,
    merge_entity,
    reports_to_store,
    required_ids,
)
from lore.db import Conn, Database, Tables, upsert_sql
from lore.jsonsafe import loads_stored

_SCHEMA = """
CREATE TABLE IF NOT EXISTS entity_mentions (
    entity_key TEXT NOT NULL, chunk_id TEXT NOT NULL,
    document_id TEXT NOT NULL, -- unused: a chunk's document is in extracted_chunks
    name TEXT NOT NULL, type TEXT NOT NULL, description TEXT NOT NULL, count INTEGER NOT NULL,
    text_n INTEGER,
    PRIMARY KEY (entity_key, chunk_id)
);
CREATE INDEX IF NOT EXISTS entity_mentions_by_chunk ON entity_mentions(chunk_id);
CREATE TABLE IF NOT EXISTS relation_mentions (
    source_key TEXT NOT NULL, target_key TEXT NOT NULL, chunk_id TEXT NOT NULL,
    weight REAL NOT NULL, description TEXT NOT NULL, text_n INTEGER,
    PRIMARY KEY (source_key, target_key, chunk_id)
);
CREATE TABLE IF NOT EXISTS mention_texts (
    chunk_id TEXT NOT NULL, n INTEGER NOT NULL, text TEXT NOT NULL, PRIMARY KEY (chunk_id, n)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS relation_mentions_by_chunk ON relation_mentions(chunk_id);
CREATE INDEX IF NOT EXISTS relation_mentions_by_target ON relation_mentions(target_key);
CREATE TABLE IF NOT EXISTS extracted_chunks (chunk_id TEXT PRIMARY KEY, document_id TEXT);
CREATE INDEX IF NOT EXISTS extracted_chunks_by_document ON extracted_chunks(document_id);
CREATE TABLE IF NOT EXISTS community_reports (
    community_id TEXT PRIMARY KEY, level INTEGER NOT NULL, fingerprint TEXT NOT NULL,
    report TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS touched_entities (entity_key TEXT PRIMARY KEY);
CREATE TABLE IF NOT EXISTS stale_communities (community_id TEXT PRIMARY KEY);
CREATE TABLE IF NOT EXISTS communities (
    id TEXT PRIMARY KEY, level INTEGER NOT NULL, cluster INTEGER NOT NULL, parent TEXT,
    members TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS communities_by_parent ON communities(parent);
CREATE TABLE IF NOT EXISTS community_members (
    community_id TEXT NOT NULL, entity_key TEXT NOT NULL, PRIMARY KEY (community_id, entity_key)
);
CREATE INDEX IF NOT EXISTS community_members_by_key ON community_members(entity_key);
CREATE TABLE IF NOT EXISTS report_sizes (
    community_id TEXT PRIMARY KEY, level INTEGER NOT NULL, chunks INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS report_sizes_by_level ON report_sizes(level, chunks);
CREATE TABLE IF NOT EXISTS graph_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS view_log (generation INTEGER NOT NULL, community_id TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS view_log_by_generation ON view_log(generation);
CREATE TABLE IF NOT EXISTS view_tokens (generation INTEGER PRIMARY KEY, token TEXT NOT NULL);
"""
_COLUMNS = {
    "entity_mentions": (
        "entity_key",
        "chunk_id",
        "document_id",
        "name",
        "type",
        "description",
        "count",
        "text_n",
    ),
    "relation_mentions": (
        "source_key",
        "target_key",
        "chunk_id",
        "weight",
        "description",
        "text_n",
    ),
    "mention_texts": ("chunk_id", "n", "text"),
    "extracted_chunks": ("chunk_id", "document_id"),
    "communities": ("id", "level", "cluster", "parent", "members"),
    "community_reports": ("community_id", "level", "fingerprint", "report"),
    "report_sizes": ("community_id", "level", "chunks"),
    "graph_meta": ("name", "value"),
}
_KEYS = {
    "entity_mentions": ("entity_key", "chunk_id"),
    "relation_mentions": ("source_key", "target_key", "chunk_id"),
    "mention_texts": ("chunk_id", "n"),
    "extracted_chunks": ("chunk_id",),
    "community_reports": ("community_id",),
    "communities": ("id",),
    "report_sizes": ("community_id",),
    "graph_meta": ("name",),
}


# a mention's description: its numbered text, or (rows written before) its own column; a
# correlated lookup, so each mention read probes the key of its text (a join lets
# PostgreSQL hash the whole table for a few mentions)
_DESCRIPTION = (
    "COALESCE((SELECT t.text FROM mention_texts t"
    " WHERE t.chunk_id = m.chunk_id AND t.n = m.text_n), m.description)"
)


def _number(numbers: dict[str, int], text: str) -> int | None:
    """``text``'s number among its chunk's mention texts (None: no text)."""
    return numbers.setdefault(text, len(numbers)) if text else None


def _upsert(table: str) -> str:
    return upsert_sql(table, _COLUMNS[table], _KEYS[table])


class LocalGraphStore(Tables):
    """GraphStore on the store's database (the same SQLite file or PostgreSQL schema)."""

    COMPONENT = "graph"

    def __init__(
        self, where: Path | Database | None = None, *, path: Path | Database | None = None
    ) -> None:
        """Open on ``where`` (``path`` is the same, the option ``open_graph_store`` passes)."""
        target = where if where is not None else path
        if target is None:
            raise TypeError("LocalGraphStore needs a path or a Database")
        super().__init__(target, _SCHEMA)
        self._add_text_numbers()
        self._counts: tuple[tuple[int, int], dict[str, int]] | None = None
        self._backfill()
        self._seed_view_token()

    def _seed_view_token(self) -> None:
        """Give a graph written before view tokens one (a one-row read on every open).

        A graph never written gets its first token with its first write: opening an
        empty store writes nothing (``lore migrate`` still finds the target empty).
        """
        with self._read() as db:
            found = _view_meta(db)
        if _VIEW_TOKEN in found or _VIEW_GENERATION not in found:
            return
        token = _new_token()
        with self._transaction() as db:
            db.execute(
                "INSERT INTO graph_meta(name, value) VALUES (?, ?) ON CONFLICT(name) DO NOTHING",
                (_VIEW_TOKEN, token),
            )
            db.execute(
                "INSERT INTO view_tokens(generation, token) VALUES (?, ?) "
                "ON CONFLICT(generation) DO NOTHING",
                (int(found[_VIEW_GENERATION]), token),
            )

    def _backfill(self) -> None:
        """Fill the member and report-size tables of a store written before they existed.

        Two one-row reads on every open; the fill itself reads every community and report
        once, on the first open after the upgrade.
        """

        def some(db: Conn, table: str) -> bool:
            return db.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone() is not None

        with self._read() as db:
            members = some(db, "communities") and not some(db, "community_members")
            sizes = some(db, "community_reports") and not some(db, "report_sizes")
        if not (members or sizes):
            return
        with self._write() as db:
            if members:
                rows = db.execute("SELECT id, members FROM communities").fetchall()
                db.executemany(
                    "INSERT INTO community_members(community_id, entity_key) VALUES (?, ?) "
                    "ON CONFLICT DO NOTHING",
                    [(str(cid), key) for cid, raw in rows for key in sorted(set(json.loads(raw)))],
                )
            if sizes:
                reports = db.execute("SELECT report FROM community_reports").fetchall()
                db.executemany(
                    _upsert("report_sizes"),
                    [_size_row(CommunityReport.from_json(str(r[0]))) for r in reports],
                )

    def _add_text_numbers(self) -> None:
        """A graph made before ``mention_texts``: its mention tables get ``text_n``."""
        with self._transaction() as db:
            for table in ("entity_mentions", "relation_mentions"):
                if self.database.kind == "sqlite":
                    columns = {str(r[1]) for r in db.execute(f"PRAGMA table_info({table})")}
                    if "text_n" not in columns:
                        db.execute(f"ALTER TABLE {table} ADD COLUMN text_n INTEGER")
                    continue
                found = db.execute(  # looked up first: ALTER TABLE waits for every reader
                    "SELECT 1 FROM information_schema.columns WHERE table_schema = "
                    "current_schema() AND table_name = ? AND column_name = 'text_n'",
                    (table,),
                ).fetchone()
                if found is None:
                    db.execute(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS text_n BIGINT")

    def generation(self) -> tuple[int, int]:
        """Changes whenever communities or reports were written, by any process.

        (the write count, the write's token). What a global question reads (every report,
        the hierarchy) is read again only after it changed: one indexed read per
        question. Only the writes of communities and reports bump it, so an ingest (its
        documents, its extraction) leaves a cached view current. The token is drawn at
        random by each write, so a restored store whose count comes back to a number it
        had in another history does not pass for that history (a view kept on disk,
        :mod:`retrieval.view_snapshot`, is keyed by both).
        """
        with self._read() as db:
            found = _view_meta(db)
        return int(found.get(_VIEW_GENERATION) or 0), _token_number(found.get(_VIEW_TOKEN))

    def view_changes(
        self, since: int, token: int | None = None
    ) -> tuple[tuple[int, int], set[str]] | None:
        """(the generation now, the communities written after generation ``since``).

        The ids of the communities whose community or report rows were written (or
        deleted) since, so a cached view is patched by reading those alone. None when
        the log does not reach back to ``since`` (a full rebuild's writes are not
        logged, old entries are dropped, a restored store may be behind), or when
        ``token`` is given and generation ``since`` of this store had another token (a
        restored store went on in another history): read it all.
        """
        with self._read() as db:
            found = _view_meta(db)
            now = int(found.get(_VIEW_GENERATION) or 0)
            start = found.get(_VIEW_LOG_FROM)
            if start is None or since > now or since + 1 < int(start):
                return None
            if token is not None:
                had = db.execute(
                    "SELECT token FROM view_tokens WHERE generation = ?", (since,)
                ).fetchone()
                if had is None or _token_number(str(had[0])) != token:
                    return None
            rows = db.execute(
                "SELECT DISTINCT community_id FROM view_log WHERE generation > ?", (since,)
            ).fetchall()
        return (now, _token_number(found.get(_VIEW_TOKEN))), {str(r[0]) for r in rows}

    def view_forgotten(self) -> int:
        """How many deletes have changed report text, on any host (see :meth:`forgot_view`)."""
        with self._read() as db:
            found = db.execute(
                "SELECT value FROM graph_meta WHERE name = ?", (_VIEW_FORGOTTEN,)
            ).fetchone()
        return int(found[0]) if found is not None else 0

    def forgot_view(self) -> int:
        """Count a delete that changed report text; the count now.

        A view kept on disk (:mod:`retrieval.view_snapshot`) records the count it was read
        at. Every host keeps its own file: the host that deleted removes its own, and any
        other host finds the count moved past its file's at its next global question and
        rewrites that file, so the deleted text stays in none.
        """
        with self._transaction() as db:
            (now,) = db.execute(
                "INSERT INTO graph_meta(name, value) VALUES (?, '1') ON CONFLICT(name) DO "
                "UPDATE SET value = CAST(CAST(graph_meta.value AS INTEGER) + 1 AS TEXT) "
                "RETURNING value",
                (_VIEW_FORGOTTEN,),
            ).fetchone()
        return int(now)

    def _view_written(self, db: Conn, community_ids: Collection[str]) -> None:
        """Inside a write of communities or reports: bump the generation, log the ids.

        The bump locks its row until the write commits (PostgreSQL; SQLite writes one at
        a time), so generations are taken in commit order and a reader that sees one sees
        its log rows. A write of more than ``VIEW_LOG_MAX`` ids (a first build, a
        rebuild) is not logged: a reader behind it reads the whole view.
        """
        (now,) = db.execute(
            "INSERT INTO graph_meta(name, value) VALUES (?, '1') ON CONFLICT(name) DO "
            "UPDATE SET value = CAST(CAST(graph_meta.value AS INTEGER) + 1 AS TEXT) "
            "RETURNING value",
            (_VIEW_GENERATION,),
        ).fetchone()
        now = int(now)
        token = _new_token()
        db.execute(
            "INSERT INTO view_tokens(generation, token) VALUES (?, ?) "
            "ON CONFLICT(generation) DO UPDATE SET token = excluded.token",
            (now, token),
        )
        db.execute("DELETE FROM view_tokens WHERE generation < ?", (now - VIEW_LOG_KEEP,))
        ids = sorted(set(community_ids))
        logged = db.execute(
            "SELECT value FROM graph_meta WHERE name = ?", (_VIEW_LOG_FROM,)
        ).fetchone()
        if len(ids) > VIEW_LOG_MAX:
            start = now + 1  # this write's ids are not in the log
        else:
            start = now if logged is None else max(int(logged[0]), now - VIEW_LOG_KEEP + 1)
            db.executemany(
                "INSERT INTO view_log(generation, community_id) VALUES (?, ?)",
                [(now, cid) for cid in ids],
            )
        db.execute("DELETE FROM view_log WHERE generation < ?", (start,))
        _set_meta(db, {_VIEW_LOG_FROM: str(start), _VIEW_TOKEN: token})

    @contextmanager
    def _write(self) -> Iterator[Conn]:
        """A write transaction that :meth:`counts` (and other processes' caches) notice."""
        with self._transaction() as db:
            yield db
            self.database.bump_generation(db)

    def put_chunk(
        self,
        chunk_id: str,
        document_id: str,
        entities: Sequence[EntityMention],
        relations: Sequence[RelationMention],
    ) -> None:
        """Replace the chunk's contributions."""
        self.put_chunks([ChunkMentions(chunk_id, document_id, entities, relations)])

    def put_chunks(self, chunks: Sequence[ChunkMentions]) -> None:
        """Replace many chunks' contributions in one transaction (bad ids: nothing written)."""
        todo = checked_chunks(chunks)
        ent_rows: list[tuple[Any, ...]] = []
        rel_rows: list[tuple[Any, ...]] = []
        text_rows: list[tuple[str, int, str]] = []
        for c in todo:
            numbers: dict[str, int] = {}  # a chunk's mention texts, each stored once
            for e in c.entities:
                n = _number(numbers, e.description)
                ent_rows.append(
                    (entity_key(e.name), c.chunk_id, "", e.name, e.type, "", e.count, n)
                )
            for r in c.relations:
                a, b = sorted((entity_key(r.source), entity_key(r.target)))
                if a != b:
                    rel_rows.append(
                        (a, b, c.chunk_id, r.weight, "", _number(numbers, r.description))
                    )
            text_rows += [(c.chunk_id, n, text) for text, n in numbers.items()]
        if not todo:
            return
        with self._write() as db:
            gone = set().union(*_delete_chunks(db, [c.chunk_id for c in todo]))
            ends = {key for row in rel_rows for key in row[:2]}
            _touch(db, gone | ends | {row[0] for row in ent_rows})
            db.executemany(_upsert("mention_texts"), text_rows)
            db.executemany(_upsert("entity_mentions"), ent_rows)
            db.executemany(_upsert("relation_mentions"), rel_rows)
            db.executemany(_upsert("extracted_chunks"), [(c.chunk_id, c.document_id) for c in todo])

    def remove_chunks(self, chunk_ids: Sequence[str]) -> int:
        """Drop contributions; return how many entities no longer exist."""
        if not chunk_ids:
            return 0
        with self._write() as db:
            mentioned, ends = _delete_chunks(db, chunk_ids)
            _touch(db, mentioned | ends)
            select = "SELECT DISTINCT entity_key FROM entity_mentions"
            still = {str(r[0]) for r in _rows_of(db, select, sorted(mentioned), "entity_key")}
            return len(mentioned - still)

    def extracted_chunks(self) -> set[str]:
        """Chunk ids already extracted."""
        return self._column("SELECT chunk_id FROM extracted_chunks")

    def extracted_among(self, chunk_ids: Sequence[str]) -> set[str]:
        """Those of these chunk ids already extracted (read by the primary key)."""
        select = "SELECT chunk_id FROM extracted_chunks"
        with self._read() as db:
            return {str(r[0]) for r in _rows_of(db, select, sorted(set(chunk_ids)), "chunk_id")}

    def extracted_of_documents(self, document_ids: Sequence[str]) -> set[str]:
        """The extracted chunk ids of these documents (by ``extracted_chunks_by_document``)."""
        select = "SELECT chunk_id FROM extracted_chunks"
        with self._read() as db:
            rows = _rows_of(db, select, sorted(set(document_ids)), "document_id")
        return {str(r[0]) for r in rows}

    def entity(self, name: str) -> Entity | None:
        """Merged entity: most frequent spelling and type, merged descriptions, provenance."""
        key = entity_key(name)
        return self.entities([key]).get(key)

    def entities(self, keys: Sequence[str]) -> dict[str, Entity]:
        """The merged entities of these keys (``entity_key`` index, 500 keys a statement)."""
        grouped: dict[str, list[MentionRow]] = defaultdict(list)
        wanted = sorted(set(keys))
        with self._read() as db:
            for start in range(0, len(wanted), 500):
                batch = wanted[start : start + 500]
                marks = ",".join("?" * len(batch))
                for key, chunk, name, kind, text, count in db.execute(
                    f"SELECT m.entity_key, m.chunk_id, m.name, m.type, {_DESCRIPTION}, m.count "
                    f"FROM entity_mentions m WHERE m.entity_key IN ({marks})",
                    batch,
                ):
                    row = (str(chunk), str(name), str(kind), str(text), int(count))
                    grouped[str(key)].append(row)
        return {k: e for k, rows in grouped.items() if (e := merge_entity(k, rows)) is not None}

    def neighbours(self, name: str, limit: int = 20) -> list[tuple[Entity, float]]:
        """Related entities by summed relation weight."""
        key = entity_key(name)
        with self._read() as db:
            rows = db.execute(
                "SELECT CASE WHEN source_key = ? THEN target_key ELSE source_key END AS other, "
                "SUM(weight) AS w FROM relation_mentions WHERE source_key = ? OR target_key = ? "
                "GROUP BY other",
                (key, key, key),
            ).fetchall()
        ranked = sorted(((str(o), float(w)) for o, w in rows), key=lambda p: (-p[1], p[0]))
        out = []
        for other, weight in ranked[: max(0, int(limit))]:
            entity = self.entity(other)
            if entity is not None:
                out.append((entity, weight))
        return out

    def relations_among(self, keys: Sequence[str]) -> list[Relation]:
        """Relations inside a set of entity keys."""
        wanted = sorted(set(keys))
        if not wanted:
            return []
        inside = set(wanted)
        select = (
            f"SELECT m.source_key, m.target_key, m.weight, {_DESCRIPTION}, m.chunk_id "
            "FROM relation_mentions m"
        )
        with self._read() as db:  # by source only: the keys' degrees, not len(keys) squared
            found = _rows_of(db, select, wanted, "m.source_key")
        rows = sorted(
            (r for r in found if str(r[1]) in inside),
            key=lambda r: (str(r[0]), str(r[1]), str(r[4])),
        )
        merged: dict[tuple[str, str], tuple[float, str, list[str]]] = {}
        for a, b, w, d, c in rows:
            pair = (str(a), str(b))
            weight, description, chunk_ids = merged.get(pair, (0.0, str(d), []))
            merged[pair] = (weight + float(w), min(description, str(d)), [*chunk_ids, str(c)])
        return [
            Relation(a, b, w, d, tuple(sorted(c))) for (a, b), (w, d, c) in sorted(merged.items())
        ]

    def entity_keys(self) -> set[str]:
        """Every entity key."""
        return self._column("SELECT DISTINCT entity_key FROM entity_mentions")

    def entities_of_chunks(self, chunk_ids: Sequence[str]) -> dict[str, list[str]]:
        """Entity keys by chunk."""
        return self._pairs("chunk_id", "entity_key", chunk_ids)

    def chunks_of_entities(self, keys: Sequence[str]) -> dict[str, list[str]]:
        """Chunk ids by entity key."""
        return self._pairs("entity_key", "chunk_id", keys)

    def mentioned_as(self, chunk_ids: Sequence[str], kind: str) -> dict[str, list[tuple[str, str]]]:
        """What each chunk mentions with type ``kind``: ``(key, name)``, by key."""
        rows: list[tuple[str, str, str]] = []
        wanted = sorted(set(chunk_ids))
        with self._read() as db:
            for start in range(0, len(wanted), 500):
                batch = wanted[start : start + 500]
                marks = ",".join("?" * len(batch))
                rows += db.execute(
                    "SELECT chunk_id, entity_key, name FROM entity_mentions "
                    f"WHERE chunk_id IN ({marks}) AND type = ?",
                    [*batch, kind],
                ).fetchall()
        out: dict[str, list[tuple[str, str]]] = {}
        for chunk, key, name in sorted((str(c), str(k), str(n)) for c, k, n in rows):
            out.setdefault(chunk, []).append((key, name))
        return out

    def _pairs(self, by: str, other: str, values: Sequence[str]) -> dict[str, list[str]]:
        pairs: list[tuple[str, str]] = []
        with self._read() as db:
            for start in range(0, len(values), 500):
                batch = list(values[start : start + 500])
                marks = ",".join("?" * len(batch))
                rows = db.execute(
                    f"SELECT {by}, {other} FROM entity_mentions WHERE {by} IN ({marks})", batch
                ).fetchall()
                pairs.extend((str(k), str(v)) for k, v in rows)
        out: dict[str, list[str]] = {}
        for key, value in sorted(pairs):
            out.setdefault(key, []).append(value)
        return out

    def edges(self) -> list[Edge]:
        """All relations as weighted edges."""
        with self._read() as db:
            rows = db.execute(
                "SELECT source_key, target_key, SUM(weight) FROM relation_mentions "
                "GROUP BY source_key, target_key"
            ).fetchall()
        return sorted((str(a), str(b), float(w)) for a, b, w in rows)

    def counts(self) -> dict[str, int]:
        """Entities, relations, communities, extracted chunks (recounted after writes).

        Counting distinct entities and relations scans the mention tables (~50 ms at 7k
        chunks), and the router and metrics ask on every question and scrape.
        """
        generation = self._generation()
        cached = self._counts
        if cached is not None and cached[0] == generation:
            return dict(cached[1])
        with self._read() as db:
            relations = db.execute(
                "SELECT COUNT(*) FROM (SELECT 1 AS one FROM relation_mentions "
                "GROUP BY source_key, target_key) AS pairs"
            ).fetchone()[0]
            communities = db.execute("SELECT COUNT(*) FROM communities").fetchone()[0]
            extracted = db.execute("SELECT COUNT(*) FROM extracted_chunks").fetchone()[0]
            counts = {
                "entities": _entity_count(db),
                "relations": int(relations),
                "communities": int(communities),
                "extracted_chunks": int(extracted),
            }
        self._counts = (generation, counts)
        return dict(counts)

    def replace_communities(self, communities: Sequence[Community]) -> None:
        """Store a new hierarchy and drop the reports of communities not in it, atomically.

        Reads every stored community (a rebuild's cost); writes only the rows that differ.
        """
        rows = {c.id: _community_row(c) for c in communities}
        with self._write() as db:
            stored = {
                str(row[0]): tuple(row)
                for row in db.execute("SELECT id, level, cluster, parent, members FROM communities")
            }
            gone = sorted(stored.keys() - rows.keys())
            changed = [c for c in communities if stored.get(c.id) != rows[c.id]]
            _write_communities(db, changed, gone)
            orphans = [
                str(r[0])
                for r in db.execute(
                    "SELECT community_id FROM community_reports "
                    "WHERE community_id NOT IN (SELECT id FROM communities)"
                )
            ]
            for table in ("community_reports", "report_sizes"):
                db.execute(
                    f"DELETE FROM {table} WHERE community_id NOT IN (SELECT id FROM communities)"
                )
            top = max((c.cluster for c in communities), default=-1)
            _set_meta(db, {_COUNT_META: str(len(rows)), _MAX_CLUSTER_META: str(top)})
            self._view_written(db, [*gone, *(c.id for c in changed), *orphans])

    def update_communities(self, upserts: Sequence[Community], deletes: Sequence[str]) -> None:
        """Store these communities and drop those ids (and their reports), atomically."""
        required_ids([c.id for c in upserts], "a community id")
        gone = sorted(set(deletes) - {c.id for c in upserts})
        with self._write() as db:
            count, top = _hierarchy_stats(db)
            asked = sorted({c.id for c in upserts} | set(gone))
            existing = {str(r[0]) for r in _rows_of(db, "SELECT id FROM communities", asked)}
            added = len({c.id for c in upserts} - existing)
            removed = len(existing.intersection(gone))
            _write_communities(db, upserts, gone)
            top = max([top, *(c.cluster for c in upserts)])
            _set_meta(db, {_COUNT_META: str(count + added - removed), _MAX_CLUSTER_META: str(top)})
            self._view_written(db, [*gone, *(c.id for c in upserts)])

    def hierarchy_stats(self) -> tuple[int, int]:
        """(communities stored, largest cluster number or -1), from two stored counters."""
        with self._read() as db:
            return _hierarchy_stats(db)

    def communities_holding(self, keys: Sequence[str]) -> list[Community]:
        """The communities (every level) with one of these keys among their members."""
        select = "SELECT DISTINCT community_id FROM community_members"
        with self._read() as db:
            ids = {str(r[0]) for r in _rows_of(db, select, sorted(set(keys)), "entity_key")}
        return self.communities_by_id(sorted(ids))

    def edges_of(self, keys: Sequence[str]) -> list[Edge]:
        """The relations with an end among ``keys``, as weighted edges, sorted."""
        wanted = sorted(set(keys))
        select = "SELECT source_key, target_key, chunk_id, weight FROM relation_mentions"
        with self._read() as db:
            rows = {
                (str(a), str(b), str(c)): float(w)
                for column in ("source_key", "target_key")
                for a, b, c, w in _rows_of(db, select, wanted, column)
            }
        weights: dict[tuple[str, str], list[float]] = {}
        for (a, b, _), weight in sorted(rows.items()):
            weights.setdefault((a, b), []).append(weight)
        return [(a, b, math.fsum(w)) for (a, b), w in sorted(weights.items())]

    def largest_reports(self, level: int, limit: int) -> list[tuple[str, int]]:
        """The ``limit`` reports of ``level`` citing the most chunks: (id, chunks) each."""
        with self._read() as db:
            rows = db.execute(
                "SELECT community_id, chunks FROM report_sizes WHERE level = ? "
                "ORDER BY chunks DESC LIMIT ?",
                (level, max(0, int(limit))),
            ).fetchall()
        return [(str(cid), int(chunks)) for cid, chunks in rows]

    def graph_meta(self, name: str) -> str | None:
        """A value the graph's upkeep keeps (see :meth:`GraphStore.graph_meta`)."""
        with self._read() as db:
            row = db.execute("SELECT value FROM graph_meta WHERE name = ?", (name,)).fetchone()
        return None if row is None else str(row[0])

    def set_graph_meta(self, values: Mapping[str, str]) -> None:
        """Store upkeep values, in one transaction."""
        required_ids(list(values), "a meta name")
        if values:
            with self._write() as db:
                _set_meta(db, values)

    def communities(self, level: int | None = None) -> list[Community]:
        """Stored communities ordered by level and cluster."""
        rows = self._by_level(
            "SELECT id, level, cluster, parent, members FROM communities", level, "cluster"
        )
        return [_community(row) for row in rows]

    def communities_by_id(self, ids: Sequence[str]) -> list[Community]:
        """The stored communities with these ids, ordered by level and cluster."""
        return self._communities_where("id", ids)

    def child_communities(self, parent_ids: Sequence[str]) -> list[Community]:
        """The stored communities whose parent is one of these, by level and cluster."""
        return self._communities_where("parent", parent_ids)

    def _communities_where(self, column: str, values: Sequence[str]) -> list[Community]:
        select = "SELECT id, level, cluster, parent, members FROM communities"
        with self._read() as db:
            rows = _rows_of(db, select, sorted(set(values)), column)
        return sorted((_community(row) for row in rows), key=lambda c: (c.level, c.cluster, c.id))

    def put_reports(
        self,
        reports: Sequence[CommunityReport],
        *,
        expected: Mapping[str, ReportVersion] | None = None,
    ) -> set[str]:
        """Store these reports only, in one transaction; with ``expected``, compare-and-set.

        The rows compared are read in the write transaction and each is replaced by an
        ``UPDATE`` that matches the exact row read: SQLite holds the write lock throughout
        (``BEGIN IMMEDIATE``); PostgreSQL re-checks the ``WHERE`` on a row another
        transaction changed meanwhile, so a newer report is never overwritten.
        """
        todo = checked_reports(reports, expected)
        if not todo:
            return set()
        ids = [r.community_id for r in todo]
        stored: set[str] = set()
        with self._write() as db:
            current = {str(r[0]) for r in _rows_of(db, "SELECT id FROM communities", ids)}
            raw: dict[str, str] = {}
            if expected is not None:
                select = "SELECT community_id, report FROM community_reports"
                raw = {str(k): str(v) for k, v in _rows_of(db, select, ids, "community_id")}
            before = {k: CommunityReport.from_json(v) for k, v in raw.items()}
            for r in reports_to_store(todo, current, before, expected):
                row = (r.community_id, r.level, r.fingerprint, r.to_json())
                if expected is None:
                    db.execute(_upsert("community_reports"), row)
                    db.execute(_upsert("report_sizes"), _size_row(r))
                elif not db.execute(
                    "UPDATE community_reports SET level = ?, fingerprint = ?, report = ? "
                    "WHERE community_id = ? AND report = ?",
                    (*row[1:], r.community_id, raw[r.community_id]),
                ).rowcount:
                    continue  # changed since read, by a transaction that committed first
                else:
                    db.execute(_upsert("report_sizes"), _size_row(r))
                stored.add(r.community_id)
            self._view_written(db, stored)
        return stored

    def reports(self, level: int | None = None) -> list[CommunityReport]:
        """Stored reports ordered by level and community id."""
        rows = self._by_level(
            "SELECT report, level, community_id FROM community_reports", level, None
        )
        ordered = sorted(rows, key=lambda r: (int(r[1]), str(r[2])))
        return [CommunityReport.from_json(str(r[0])) for r in ordered]

    def reports_by_id(self, community_ids: Sequence[str]) -> list[CommunityReport]:
        """The stored reports of these communities, ordered by level and community id."""
        select = "SELECT report, level, community_id FROM community_reports"
        with self._read() as db:
            rows = _rows_of(db, select, sorted(set(community_ids)), "community_id")
        ordered = sorted(rows, key=lambda r: (int(r[1]), str(r[2])))
        return [CommunityReport.from_json(str(r[0])) for r in ordered]

    def touched_entities(self) -> set[str]:
        """Entity keys changed since the marks were last cleared."""
        return self._column("SELECT entity_key FROM touched_entities")

    def clear_touched(self, keys: Sequence[str]) -> None:
        """Forget these touched marks."""
        self._delete_keys("touched_entities", "entity_key", keys)

    def mark_stale(self, community_ids: Sequence[str]) -> None:
        """Mark communities stale."""
        rows = [(c,) for c in sorted(set(required_ids(community_ids, "a community id")))]
        if not rows:
            return
        with self._write() as db:
            db.executemany(
                "INSERT INTO stale_communities(community_id) VALUES (?) ON CONFLICT DO NOTHING",
                rows,
            )

    def stale_communities(self) -> set[str]:
        """Communities marked stale."""
        return self._column("SELECT community_id FROM stale_communities")

    def clear_stale(self, community_ids: Sequence[str]) -> None:
        """Unmark communities."""
        self._delete_keys("stale_communities", "community_id", community_ids)

    def _column(self, select: str) -> set[str]:
        with self._read() as db:
            return {str(r[0]) for r in db.execute(select)}

    def _delete_keys(self, table: str, column: str, keys: Sequence[str]) -> None:
        if not keys:
            return
        with self._write() as db:
            db.executemany(
                f"DELETE FROM {table} WHERE {column} = ?", [(k,) for k in sorted(set(keys))]
            )

    def _by_level(self, select: str, level: int | None, then: str | None) -> list[tuple[Any, ...]]:
        where, args = (" WHERE level = ?", (level,)) if level is not None else ("", ())
        order = f" ORDER BY level, {then}" if then else ""
        with self._read() as db:
            return list(db.execute(f"{select}{where}{order}", args).fetchall())

    def to_networkx(self) -> Any:
        """The entity graph as a weighted ``networkx.Graph``."""
        import networkx as nx

        graph = nx.Graph()
        graph.add_weighted_edges_from(self.edges())
        return graph


def _community(row: Sequence[Any]) -> Community:
    cid, level, cluster, parent, members = row
    return Community(
        str(cid),
        int(level),
        int(cluster),
        None if parent is None else str(parent),
        tuple(loads_stored(members)),
    )


_COUNT_META = "communities"
_VIEW_GENERATION = "view_generation"  # bumped by every write of communities or reports
_VIEW_LOG_FROM = "view_log_from"  # the oldest generation whose written ids are in view_log
_VIEW_TOKEN = "view_token"  # drawn at random by every write of communities or reports
_VIEW_FORGOTTEN = "view_forgotten"  # deletes that changed report text (LocalGraphStore.forgot_view)
VIEW_LOG_MAX = 500
"""A write of more community ids is not logged (a reader behind it reads the whole view)."""
VIEW_LOG_KEEP = 64
"""Generations the log keeps: a reader further behind reads the whole view."""
_MAX_CLUSTER_META = "max_cluster"


def _community_row(c: Community) -> tuple[Any, ...]:
    return (c.id, c.level, c.cluster, c.parent, json.dumps(c.members))


def _size_row(report: CommunityReport) -> tuple[str, int, int]:
    return (report.community_id, report.level, len(report.chunk_ids))


def _new_token() -> str:
    """A view token: 15 random hex digits (a positive 60-bit number)."""
    return secrets.token_hex(8)[:15]


def _token_number(token: str | None) -> int:
    """A stored view token as a number (0: none, a store not opened by this version)."""
    try:
        return int(token, 16) if token else 0
    except ValueError:
        return 0


def _view_meta(db: Conn) -> dict[str, str]:
    """The view's generation, token and log start, in one read."""
    rows = db.execute(
        "SELECT name, value FROM graph_meta WHERE name IN (?, ?, ?)",
        (_VIEW_GENERATION, _VIEW_TOKEN, _VIEW_LOG_FROM),
    ).fetchall()
    return {str(name): str(value) for name, value in rows}


def _set_meta(db: Conn, values: Mapping[str, str]) -> None:
    db.executemany(_upsert("graph_meta"), sorted(values.items()))


def _hierarchy_stats(db: Conn) -> tuple[int, int]:
    """(communities, max cluster) from the counters; counted once on a store without them."""
    marks = ",".join("?" * 2)
    found = dict(
        db.execute(
            f"SELECT name, value FROM graph_meta WHERE name IN ({marks})",
            (_COUNT_META, _MAX_CLUSTER_META),
        ).fetchall()
    )
    if len(found) == 2:
        return int(found[_COUNT_META]), int(found[_MAX_CLUSTER_META])
    count, top = db.execute("SELECT COUNT(*), MAX(cluster) FROM communities").fetchone()
    return int(count), -1 if top is None else int(top)


def _write_communities(db: Conn, upserts: Sequence[Community], deletes: Sequence[str]) -> None:
    """Upsert these communities and their member rows; delete those ids and their reports."""
    gone = [(cid,) for cid in sorted(set(deletes))]
    for table, column in _BY_COMMUNITY:
        db.executemany(f"DELETE FROM {table} WHERE {column} = ?", gone)
    ordered = sorted(upserts, key=lambda c: c.id)
    # member rows change by their diff with the stored list: a top-level community of
    # thousands gaining one member writes one row, not thousands
    stored = {
        str(cid): set(json.loads(members))
        for cid, members in _rows_of(
            db, "SELECT id, members FROM communities", [c.id for c in ordered]
        )
    }
    db.executemany(
        "DELETE FROM community_members WHERE community_id = ? AND entity_key = ?",
        [(c.id, k) for c in ordered for k in sorted(stored.get(c.id, set()) - set(c.members))],
    )
    db.executemany(_upsert("communities"), [_community_row(c) for c in ordered])
    db.executemany(
        "INSERT INTO community_members(community_id, entity_key) VALUES (?, ?)",
        [(c.id, k) for c in ordered for k in sorted(set(c.members) - stored.get(c.id, set()))],
    )


_BY_COMMUNITY = (
    ("communities", "id"),
    ("community_members", "community_id"),
    ("community_reports", "community_id"),
    ("report_sizes", "community_id"),
)


def _touch(db: Conn, keys: set[str]) -> None:
    """Mark entities touched, in key order (concurrent writers then never deadlock)."""
    db.executemany(
        "INSERT INTO touched_entities(entity_key) VALUES (?) ON CONFLICT DO NOTHING",
        [(k,) for k in sorted(keys)],
    )


def _delete_chunks(db: Conn, chunk_ids: Sequence[str]) -> tuple[set[str], set[str]]:
    """Drop the chunks' rows; return the keys they mentioned, and their relations' ends."""
    mentioned: set[str] = set()
    related: set[str] = set()
    for start in range(0, len(chunk_ids), 500):
        batch = list(chunk_ids[start : start + 500])
        marks = ",".join("?" * len(batch))
        gone = db.execute(
            f"SELECT entity_key FROM entity_mentions WHERE chunk_id IN ({marks})",
            batch,
        ).fetchall()
        ends = db.execute(
            f"SELECT source_key, target_key FROM relation_mentions WHERE chunk_id IN ({marks})",
            batch,
        ).fetchall()
        mentioned.update(str(r[0]) for r in gone)
        related.update(str(key) for row in ends for key in row)
    rows = [(c,) for c in sorted(set(chunk_ids))]
    for table in ("entity_mentions", "relation_mentions", "mention_texts", "extracted_chunks"):
        db.executemany(f"DELETE FROM {table} WHERE chunk_id = ?", rows)
    return mentioned, related


def _rows_of(db: Conn, select: str, values: Sequence[str], column: str = "id") -> list[Any]:
    """The rows of ``select`` whose ``column`` is among ``values`` (asked 500 at a time)."""
    out: list[Any] = []
    for start in range(0, len(values), 500):
        batch = list(values[start : start + 500])
        marks = ",".join("?" * len(batch))
        out.extend(db.execute(f"{select} WHERE {column} IN ({marks})", batch).fetchall())
    return out


def _entity_count(db: Conn) -> int:
    row = db.execute("SELECT COUNT(DISTINCT entity_key) FROM entity_mentions").fetchone()
    return int(row[0])


if TYPE_CHECKING:  # mypy checks the backend against every role (and so the whole contract)
    from graph.store import GraphStore

    _CONFORMS: type[GraphStore] = LocalGraphStore
