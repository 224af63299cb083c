"""Neo4j GraphStore: the same contract as the embedded store, on a Neo4j server.

Provenance is kept per chunk, as relationships (the model is drawn in
:mod:`graph.stores.neo4j_cypher`, with every statement), so removing a chunk deletes
exactly what it contributed; merged entities and relations are computed from the raw
mention rows by :mod:`graph.stores.merging`, the rules the embedded store follows.

Every node carries the store's ``namespace`` (property ``ns``), matched by every
statement, so several data directories (or test runs) can share one database; a
dedicated ``database`` can be named instead or as well. Constraints and indexes are
created idempotently when the store opens. Writes run in managed write transactions
(retried by the driver on transient errors); lists are sent in ``UNWIND`` batches, and
the graph build stores many chunks per transaction (:meth:`Neo4jGraphStore.put_chunks`).
This module imports the ``neo4j`` driver, so it is imported only when chosen
(``LORE_GRAPH__BACKEND=neo4j``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import neo4j
import neo4j.exceptions

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
from graph.stores import neo4j_cypher as q
from graph.stores.merging import (
    MentionRow,
    checked_chunks,
    checked_reports,
    entity_rows,
    heaviest_neighbours,
    mention_row,
    merge_entity,
    merge_relations,
    relation_row,
    relation_rows,
    reports_to_store,
    required_ids,
)
from lore.errors import BackendUnavailableError, ConfigurationError

T = TypeVar("T")
Rows = list[dict[str, Any]]


@contextmanager
def _translated() -> Iterator[None]:
    """Driver errors as Lorekeeper's: bad settings are permanent, a lost server transient."""
    try:
        yield
    except (neo4j.exceptions.AuthError, neo4j.exceptions.ConfigurationError) as exc:
        raise ConfigurationError(f"Neo4j graph store: {exc}") from exc
    except neo4j.exceptions.ClientError as exc:
        if exc.code != "Neo.ClientError.Database.DatabaseNotFound":
            raise
        raise ConfigurationError(f"Neo4j graph store: {exc}") from exc
    except (
        neo4j.exceptions.ServiceUnavailable,
        neo4j.exceptions.SessionExpired,
        neo4j.exceptions.TransientError,
    ) as exc:
        raise BackendUnavailableError(f"Neo4j graph store did not answer: {exc}") from exc


def _batches(values: Sequence[T], size: int) -> Iterator[list[T]]:
    for start in range(0, len(values), size):
        yield list(values[start : start + size])


def _data(tx: neo4j.ManagedTransaction, query: str, params: dict[str, Any]) -> Rows:
    return tx.run(query, params).data()


def _deleted(tx: neo4j.ManagedTransaction, query: str, params: dict[str, Any]) -> int:
    return int(tx.run(query, params).single(strict=True)["deleted"])


def _communities(rows: Rows) -> list[Community]:
    found = [
        Community(
            str(r["id"]),
            int(r["level"]),
            int(r["cluster"]),
            None if r["parent"] is None else str(r["parent"]),
            tuple(str(m) for m in r["members"] or ()),
        )
        for r in rows
    ]
    return sorted(found, key=lambda c: (c.level, c.cluster, c.id))


def _reports(rows: Rows) -> list[CommunityReport]:
    ordered = sorted(rows, key=lambda r: (int(r["level"]), str(r["community_id"])))
    return [CommunityReport.from_json(str(r["json"])) for r in ordered]


def _report_row(report: CommunityReport) -> dict[str, Any]:
    return {
        "community_id": report.community_id,
        "level": report.level,
        "fingerprint": report.fingerprint,
        "json": report.to_json(),
        "chunks": len(report.chunk_ids),
    }


_COUNT_META = "communities"
_MAX_CLUSTER_META = "max_cluster"
_SIZES_META = "report_sizes"
_GENERATION_META = "view_generation"


def _member_rows(communities: Sequence[Community]) -> Rows:
    return [{"community": c.id, "key": k} for c in communities for k in sorted(set(c.members))]


def _pairs(pairs: set[tuple[str, str]]) -> Rows:
    return [{"community": c, "key": k} for c, k in sorted(pairs)]


class Neo4jGraphStore:
    """GraphStore on a Neo4j 5 server (or newer), through the official driver."""

    def __init__(
        self,
        uri: str,
        user: str = "neo4j",
        password: str = "",
        database: str | None = None,
        *,
        namespace: str = "lore",
        batch_size: int = 1000,
    ) -> None:
        if not namespace:
            raise ConfigurationError("the Neo4j graph store needs a non-empty namespace")
        if batch_size < 1:
            raise ConfigurationError("batch_size must be at least 1")
        self._ns = namespace
        self._database = database
        self._batch = batch_size
        # one bookmark manager for all this store's sessions: a read sees earlier writes,
        # even when a cluster routes it to another member
        self._bookmarks = neo4j.GraphDatabase.bookmark_manager()
        with _translated():
            self._driver = neo4j.GraphDatabase.driver(uri, auth=(user, password))
        try:
            with _translated():
                self._driver.verify_connectivity()
                for statement in q.SCHEMA:
                    self._driver.execute_query(
                        statement, database_=database, bookmark_manager_=self._bookmarks
                    )
            self._backfill()
        except BaseException:
            self._driver.close()
            raise

    def close(self) -> None:
        """Close the driver and its connections."""
        self._driver.close()

    # -- plumbing --------------------------------------------------------------------------

    def _params(self, **params: Any) -> dict[str, Any]:
        return {"ns": self._ns, **params}

    def _session(self) -> neo4j.Session:
        return self._driver.session(database=self._database, bookmark_manager=self._bookmarks)

    def _write(self, work: Callable[[neo4j.ManagedTransaction], T], *, view: bool = False) -> T:
        """Run ``work`` in a write transaction.

        ``view``: it writes communities or reports, and bumps their generation in the
        same transaction (:meth:`generation`).
        """

        def bumped(tx: neo4j.ManagedTransaction) -> T:
            out = work(tx)
            _data(tx, q.BUMP_GENERATION, self._params(name=_GENERATION_META))
            return out

        with _translated(), self._session() as session:
            return session.execute_write(bumped if view else work)

    def generation(self) -> tuple[int, int]:
        """Changes whenever communities or reports were written, by any process.

        What a global question reads (every report, the hierarchy) is read again only
        after it changed: one indexed read per question instead of the whole view. Only
        the writes of communities and reports bump it (under the upkeep lock), so
        extraction's concurrent writes never contend for it.
        """
        return int(self.graph_meta(_GENERATION_META) or 0), 0

    def _read(self, work: Callable[[neo4j.ManagedTransaction], T]) -> T:
        with _translated(), self._session() as session:
            return session.execute_read(work)

    def _run_batched(
        self,
        tx: neo4j.ManagedTransaction,
        query: str,
        name: str,
        values: Sequence[Any],
        **params: Any,
    ) -> Rows:
        """Run ``query`` once per batch of ``values`` (bound to ``$name``); all the rows."""
        out: Rows = []
        for batch in _batches(values, self._batch):
            out.extend(_data(tx, query, self._params(**params, **{name: batch})))
        return out

    def _select(
        self, query: str, name: str | None = None, values: Sequence[Any] = (), **params: Any
    ) -> Rows:
        """Rows of a read query, in one read transaction (batched over ``values`` if named)."""

        def work(tx: neo4j.ManagedTransaction) -> Rows:
            if name is None:
                return _data(tx, query, self._params(**params))
            return self._run_batched(tx, query, name, values, **params)

        return self._read(work)

    # -- a chunk's contributions -------------------------------------------------------------

    def _detach(
        self, tx: neo4j.ManagedTransaction, chunk_ids: Sequence[str]
    ) -> tuple[set[str], set[str]]:
        """Delete the chunks' mentions and relations: (keys they mentioned, every key affected).

        Only chunks stored before are looked at (their ``LoreChunk`` is written in the same
        transaction as their relationships): a new chunk has nothing to delete, and the
        relationship lookup by ``chunk_id``, a scan on servers without relationship
        indexes, is skipped for it.
        """
        stored = self._run_batched(tx, q.STORED_CHUNKS, "chunk_ids", chunk_ids)
        chunk_ids = sorted({str(r["id"]) for r in stored})
        if not chunk_ids:
            return set(), set()
        mentioned = {
            str(r["key"]) for r in self._run_batched(tx, q.DELETE_MENTIONS, "chunk_ids", chunk_ids)
        }
        ends = self._run_batched(tx, q.DELETE_RELATIONS, "chunk_ids", chunk_ids)
        affected = mentioned | {str(r[end]) for r in ends for end in ("source", "target")}
        return mentioned, affected

    def _touch_and_tidy(
        self, tx: neo4j.ManagedTransaction, touched: set[str], affected: set[str]
    ) -> None:
        self._run_batched(tx, q.TOUCH, "keys", sorted(touched))
        self._run_batched(tx, q.DELETE_ORPHANS, "keys", sorted(affected))

    def put_chunk(
        self,
        chunk_id: str,
        document_id: str,
        entities: Sequence[EntityMention],
        relations: Sequence[RelationMention],
    ) -> None:
        """Replace the chunk's contributions (one write transaction)."""
        self.put_chunks([ChunkMentions(chunk_id, document_id, entities, relations)])

    def put_chunks(self, chunks: Sequence[ChunkMentions]) -> None:
        """Replace many chunks' contributions in one write transaction, ``UNWIND`` batches.

        Every id and key is checked first: a bad one raises ``InvalidRequestError`` and
        nothing is written.
        """
        todo = checked_chunks(chunks)
        if not todo:
            return
        heads = [{"chunk_id": c.chunk_id, "document_id": c.document_id} for c in todo]
        ents = [{**row, "chunk_id": c.chunk_id} for c in todo for row in entity_rows(c.entities)]
        rels = [{**row, "chunk_id": c.chunk_id} for c in todo for row in relation_rows(c.relations)]

        def work(tx: neo4j.ManagedTransaction) -> None:
            _, affected = self._detach(tx, [c.chunk_id for c in todo])
            self._run_batched(tx, q.MERGE_CHUNKS, "chunks", heads)
            self._run_batched(tx, q.CREATE_MENTIONS, "rows", ents)
            self._run_batched(tx, q.CREATE_RELATIONS, "rows", rels)
            ends = {row[end] for row in rels for end in ("source", "target")}
            self._touch_and_tidy(tx, affected | ends | {row["key"] for row in ents}, affected)

        self._write(work)

    def remove_chunks(self, chunk_ids: Sequence[str]) -> int:
        """Drop contributions; return how many entities no longer exist."""
        ids = sorted(set(chunk_ids))

        def work(tx: neo4j.ManagedTransaction) -> int:
            mentioned, affected = self._detach(tx, ids)
            self._run_batched(tx, q.DELETE_CHUNKS, "chunk_ids", ids)
            gone = self._run_batched(tx, q.COUNT_UNMENTIONED, "keys", sorted(mentioned))
            self._touch_and_tidy(tx, affected, affected)
            return sum(int(r["gone"]) for r in gone)

        return self._write(work) if ids else 0

    def extracted_among(self, chunk_ids: Sequence[str]) -> set[str]:
        """Those of these chunk ids already extracted (read by the chunk constraint)."""
        rows = self._select(q.STORED_CHUNKS, "chunk_ids", sorted(set(chunk_ids)))
        return {str(r["id"]) for r in rows}

    def extracted_of_documents(self, document_ids: Sequence[str]) -> set[str]:
        """The extracted chunk ids of these documents (by the chunk-document index)."""
        ids = sorted(set(document_ids))
        rows = self._select(q.CHUNKS_OF_DOCUMENTS, "document_ids", ids)
        return {str(r["id"]) for r in rows}

    def extracted_chunks(self) -> set[str]:
        """Chunk ids already extracted."""
        return {str(r["id"]) for r in self._select(q.EXTRACTED_CHUNKS)}

    # -- entities and relations --------------------------------------------------------------

    def entities(self, keys: Sequence[str]) -> dict[str, Entity]:
        """The merged entities of these keys (one query)."""
        grouped: dict[str, list[MentionRow]] = defaultdict(list)
        for r in self._select(q.ENTITY_MENTIONS, "keys", sorted(set(keys))):
            grouped[str(r["key"])].append(mention_row(r))
        return {k: e for k, rows in grouped.items() if (e := merge_entity(k, rows)) is not None}

    def entity(self, name: str) -> Entity | None:
        """Merged entity: most frequent spelling and type, merged descriptions, provenance."""
        key = entity_key(name)
        return self.entities([key]).get(key)

    def neighbours(self, name: str, limit: int = 20) -> list[tuple[Entity, float]]:
        """Related entities by summed relation weight."""
        rows = self._select(q.INCIDENT_RELATIONS, key=entity_key(name))
        best = heaviest_neighbours(((str(r["other"]), float(r["weight"])) for r in rows), limit)
        entities = self.entities([key for key, _ in best])
        return [(entities[key], weight) for key, weight in best if key in entities]

    def relations_among(self, keys: Sequence[str]) -> list[Relation]:
        """Relations inside a set of entity keys."""
        wanted = sorted(set(keys))
        if not wanted:
            return []
        rows = self._select(q.RELATIONS_AMONG, "sources", wanted, keys=wanted)
        return merge_relations(relation_row(r) for r in rows)

    def entity_keys(self) -> set[str]:
        """Every entity key."""
        return {str(r["key"]) for r in self._select(q.ENTITY_KEYS)}

    def entities_of_chunks(self, chunk_ids: Sequence[str]) -> dict[str, list[str]]:
        """Entity keys by chunk."""
        return self._pairs(q.ENTITIES_OF_CHUNKS, chunk_ids)

    def chunks_of_entities(self, keys: Sequence[str]) -> dict[str, list[str]]:
        """Chunk ids by entity key."""
        return self._pairs(q.CHUNKS_OF_ENTITIES, keys)

    def mentioned_as(self, chunk_ids: Sequence[str], kind: str) -> dict[str, list[tuple[str, str]]]:
        """What each chunk mentions with type ``kind``: ``(key, name)``, by key."""
        rows = self._select(q.MENTIONED_AS, "values", sorted(set(chunk_ids)), kind=kind)
        out: dict[str, list[tuple[str, str]]] = {}
        for chunk, key, name in sorted((str(r["k"]), str(r["key"]), str(r["name"])) for r in rows):
            out.setdefault(chunk, []).append((key, name))
        return out

    def _pairs(self, query: str, values: Sequence[str]) -> dict[str, list[str]]:
        rows = self._select(query, "values", sorted(set(values)))
        out: dict[str, list[str]] = {}
        for k, v in sorted((str(r["k"]), str(r["v"])) for r in rows):
            out.setdefault(k, []).append(v)
        return out

    def edges(self) -> list[Edge]:
        """All relations as weighted edges, sorted."""
        relations = merge_relations(relation_row(r) for r in self._select(q.ALL_RELATIONS))
        return [(r.source, r.target, r.weight) for r in relations]

    def counts(self) -> dict[str, int]:
        """Entities, relations, communities, extracted chunks (one read transaction)."""
        queries = {
            "entities": q.COUNT_ENTITIES,
            "relations": q.COUNT_RELATIONS,
            "communities": q.COUNT_COMMUNITIES,
            "extracted_chunks": q.COUNT_CHUNKS,
        }

        def work(tx: neo4j.ManagedTransaction) -> dict[str, int]:
            return {
                name: int(_data(tx, query, self._params())[0]["n"])
                for name, query in queries.items()
            }

        return self._read(work)

    # -- communities and reports ---------------------------------------------------------------

    def replace_communities(self, communities: Sequence[Community]) -> None:
        """Store a new hierarchy and drop the reports of communities not in it, atomically.

        The reports to drop are found in Python (every stored report's id, less the
        hierarchy's) and deleted by id, in the transaction that replaces the hierarchy.
        """
        rows = [asdict(c) for c in communities]  # the driver sends tuples as lists
        ids = {c.id for c in communities}
        top = max((c.cluster for c in communities), default=-1)

        def work(tx: neo4j.ManagedTransaction) -> None:
            _data(tx, q.DELETE_COMMUNITIES, self._params())
            _data(tx, q.DELETE_ALL_MEMBERS, self._params())
            self._run_batched(tx, q.CREATE_COMMUNITIES, "rows", rows)
            self._run_batched(tx, q.CREATE_MEMBERS, "rows", _member_rows(communities))
            reported = {str(r["id"]) for r in _data(tx, q.REPORT_IDS, self._params())}
            self._run_batched(tx, q.DELETE_REPORTS_OF, "ids", sorted(reported - ids))
            self._set_meta(tx, {_COUNT_META: str(len(ids)), _MAX_CLUSTER_META: str(top)})

        self._write(work, view=True)

    def update_communities(self, upserts: Sequence[Community], deletes: Sequence[str]) -> None:
        """Store these communities and drop those ids (and their reports), atomically."""
        required_ids([c.id for c in upserts], "a community id")
        ordered = sorted(upserts, key=lambda c: c.id)
        gone = sorted(set(deletes) - {c.id for c in ordered})

        def work(tx: neo4j.ManagedTransaction) -> None:
            count, top = self._hierarchy_stats(tx)
            asked = sorted({c.id for c in ordered} | set(gone))
            existing = {
                str(r["id"]) for r in self._run_batched(tx, q.CURRENT_COMMUNITIES, "ids", asked)
            }
            held = {
                (str(r["community"]), str(r["key"]))
                for r in self._run_batched(tx, q.MEMBERS_OF, "ids", asked)
            }
            wanted = {(c.id, key) for c in ordered for key in c.members}
            self._run_batched(tx, q.DELETE_COMMUNITIES_BY_ID, "ids", gone)
            self._run_batched(tx, q.DELETE_REPORTS_OF, "ids", gone)
            # member rows as a diff: a changed community's unchanged members stay put
            self._run_batched(tx, q.DELETE_MEMBER_ROWS, "rows", _pairs(held - wanted))
            self._run_batched(tx, q.UPSERT_COMMUNITIES, "rows", [asdict(c) for c in ordered])
            self._run_batched(tx, q.CREATE_MEMBERS, "rows", _pairs(wanted - held))
            count += len({c.id for c in ordered} - existing) - len(existing.intersection(gone))
            top = max([top, *(c.cluster for c in ordered)])
            self._set_meta(tx, {_COUNT_META: str(count), _MAX_CLUSTER_META: str(top)})

        self._write(work, view=True)

    def hierarchy_stats(self) -> tuple[int, int]:
        """(communities stored, largest cluster number or -1), from two stored counters."""
        return self._read(self._hierarchy_stats)

    def _hierarchy_stats(self, tx: neo4j.ManagedTransaction) -> tuple[int, int]:
        found = self._meta(tx, [_COUNT_META, _MAX_CLUSTER_META])
        if len(found) == 2:
            return int(found[_COUNT_META]), int(found[_MAX_CLUSTER_META])
        row = _data(tx, q.HIERARCHY_COUNTED, self._params())[0]
        return int(row["n"]), -1 if row["top"] is None else int(row["top"])

    def communities_holding(self, keys: Sequence[str]) -> list[Community]:
        """The communities (every level) with one of these keys among their members."""
        rows = self._select(q.COMMUNITIES_HOLDING, "keys", sorted(set(keys)))
        return self.communities_by_id(sorted({str(r["id"]) for r in rows}))

    def edges_of(self, keys: Sequence[str]) -> list[Edge]:
        """The relations with an end among ``keys``, as weighted edges, sorted."""
        wanted = sorted(set(keys))

        def work(tx: neo4j.ManagedTransaction) -> Rows:
            out = self._run_batched(tx, q.RELATIONS_FROM, "keys", wanted)
            return out + self._run_batched(tx, q.RELATIONS_TO, "keys", wanted)

        unique = {row[:3]: row for row in (relation_row(r) for r in self._read(work))}
        relations = merge_relations(unique.values())
        return [(r.source, r.target, r.weight) for r in relations]

    def largest_reports(self, level: int, limit: int) -> list[tuple[str, int]]:
        """The ``limit`` reports of ``level`` citing the most chunks: (id, chunks) each."""
        rows = self._select(q.LARGEST_REPORTS, level=level, limit=max(0, int(limit)))
        return [(str(r["id"]), int(r["chunks"])) for r in rows]

    def graph_meta(self, name: str) -> str | None:
        """A value the graph's upkeep keeps (see :meth:`GraphStore.graph_meta`)."""
        return self._read(lambda tx: self._meta(tx, [name])).get(name)

    def set_graph_meta(self, values: Mapping[str, str]) -> None:
        """Store upkeep values, in one transaction."""
        required_ids(list(values), "a meta name")
        if values:
            self._write(lambda tx: self._set_meta(tx, values))

    def _meta(self, tx: neo4j.ManagedTransaction, names: Sequence[str]) -> dict[str, str]:
        rows = _data(tx, q.META, self._params(names=list(names)))
        return {str(r["name"]): str(r["value"]) for r in rows}

    def _set_meta(self, tx: neo4j.ManagedTransaction, values: Mapping[str, str]) -> None:
        rows = [{"name": k, "value": v} for k, v in sorted(values.items())]
        _data(tx, q.SET_META, self._params(rows=rows))

    def _backfill(self) -> None:
        """Member nodes and report sizes for a namespace written before they existed (once)."""

        def work(tx: neo4j.ManagedTransaction) -> None:
            if self._meta(tx, [_SIZES_META]):
                return
            communities = _communities(_data(tx, q.COMMUNITIES, self._params(level=None)))
            _data(tx, q.DELETE_ALL_MEMBERS, self._params())
            self._run_batched(tx, q.CREATE_MEMBERS, "rows", _member_rows(communities))
            reports = _reports(_data(tx, q.REPORTS, self._params(level=None)))
            self._run_batched(tx, q.PUT_REPORTS, "rows", [_report_row(r) for r in reports])
            self._set_meta(tx, {_SIZES_META: "1"})

        self._write(work)

    def communities(self, level: int | None = None) -> list[Community]:
        """Stored communities ordered by level and cluster."""
        return _communities(self._select(q.COMMUNITIES, level=level))

    def communities_by_id(self, ids: Sequence[str]) -> list[Community]:
        """The stored communities with these ids, ordered by level and cluster."""
        return _communities(self._select(q.COMMUNITIES_BY_ID, "ids", sorted(set(ids))))

    def child_communities(self, parent_ids: Sequence[str]) -> list[Community]:
        """The stored communities whose parent is one of these (``lore_community_parent``)."""
        return _communities(self._select(q.CHILD_COMMUNITIES, "ids", sorted(set(parent_ids))))

    def put_reports(
        self,
        reports: Sequence[CommunityReport],
        *,
        expected: Mapping[str, ReportVersion] | None = None,
    ) -> set[str]:
        """Store these reports only, in one write transaction; with ``expected``, compare-and-set.

        The reports compared are locked before they are read (``q.LOCK_REPORTS``), so the
        comparison and the write see the same report: a concurrent writer either committed
        first or waits for this transaction.
        """
        todo = checked_reports(reports, expected)
        if not todo:
            return set()
        ids = [r.community_id for r in todo]

        def work(tx: neo4j.ManagedTransaction) -> set[str]:
            found = self._run_batched(tx, q.CURRENT_COMMUNITIES, "ids", ids)
            before: dict[str, CommunityReport] = {}
            if expected is not None:
                locked = self._run_batched(tx, q.LOCK_REPORTS, "ids", ids)
                before = {
                    str(r["community_id"]): CommunityReport.from_json(str(r["json"]))
                    for r in locked
                }
            chosen = reports_to_store(todo, {str(r["id"]) for r in found}, before, expected)
            self._run_batched(tx, q.PUT_REPORTS, "rows", [_report_row(r) for r in chosen])
            return {r.community_id for r in chosen}

        return self._write(work, view=True)

    def reports(self, level: int | None = None) -> list[CommunityReport]:
        """Stored reports ordered by level and community id."""
        return _reports(self._select(q.REPORTS, level=level))

    def reports_by_id(self, community_ids: Sequence[str]) -> list[CommunityReport]:
        """The stored reports of these communities, ordered by level and community id."""
        return _reports(self._select(q.REPORTS_BY_ID, "ids", sorted(set(community_ids))))

    # -- staleness marks ------------------------------------------------------------------------

    def _write_batched(self, query: str, name: str, values: Sequence[str]) -> None:
        unique = sorted(set(values))
        if unique:
            self._write(lambda tx: self._run_batched(tx, query, name, unique))

    def touched_entities(self) -> set[str]:
        """Entity keys changed since the marks were last cleared."""
        return {str(r["key"]) for r in self._select(q.TOUCHED)}

    def clear_touched(self, keys: Sequence[str]) -> None:
        """Forget these touched marks."""
        self._write_batched(q.CLEAR_TOUCHED, "keys", keys)

    def mark_stale(self, community_ids: Sequence[str]) -> None:
        """Mark communities stale."""
        self._write_batched(q.MARK_STALE, "ids", required_ids(community_ids, "a community id"))

    def stale_communities(self) -> set[str]:
        """Communities marked stale."""
        return {str(r["id"]) for r in self._select(q.STALE)}

    def clear_stale(self, community_ids: Sequence[str]) -> None:
        """Unmark communities."""
        self._write_batched(q.CLEAR_STALE, "ids", community_ids)

    # -- views and housekeeping -----------------------------------------------------------------

    def to_networkx(self) -> Any:
        """The entity graph as a weighted ``networkx.Graph``."""
        import networkx as nx

        graph = nx.Graph()
        graph.add_weighted_edges_from(self.edges())
        return graph

    def drop(self, batch: int = 10_000) -> None:
        """Delete everything stored under this namespace (bounded transactions)."""
        for query in q.DROP_BATCH:
            work = partial(_deleted, query=query, params=self._params(batch=batch))
            while self._write(work) > 0:
                pass


if TYPE_CHECKING:  # mypy checks the backend against every role (and so the whole contract)
    from graph.store import GraphStore

    _CONFORMS: type[GraphStore] = Neo4jGraphStore
