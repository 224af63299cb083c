"""The GraphStore protocol, and the roles it is made of.

A caller types a parameter with the narrowest role it uses: report writers and graph
search only read entities and relations (:class:`EntityReader`), extraction writes
mentions (:class:`MentionStore`), global search reads communities and their reports
(:class:`CommunityReader`), the refresh writes them (:class:`CommunityStore`) and keeps
the marks of what changed (:class:`StalenessStore`). :class:`GraphStore` is all of them,
what a backend implements.

Entities are keyed by a normalised name; every entity and relation keeps the chunks it
came from (provenance), so removing a chunk's contributions makes whatever no other
chunk supports disappear. Writes leave *touched* marks on the entities they changed;
the refresh turns those into *stale* marks on the communities holding them
(:func:`graph.staleness.stale_communities_for`) and clears both once re-summarised.

Backends: ``graph.stores.local`` (tables in the SQLite store, NetworkX for graph
algorithms) and ``graph.stores.neo4j`` (a Neo4j server), chosen by name through
:func:`graph.stores.open_graph_store`; one contract suite runs over both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from graph.communities import Community, Edge
from graph.models import (
    ChunkMentions,
    CommunityReport,
    Entity,
    EntityMention,
    Relation,
    RelationMention,
    ReportVersion,
)


@runtime_checkable
class EntityReader(Protocol):
    """The entity graph as read: merged entities, their relations and the chunks citing them.

    What report writers, entity lookup and graph search read; never writes.
    """

    def entity(self, name: str) -> Entity | None:
        """The merged entity for a name (any spelling that normalises the same)."""
        ...

    def entities(self, keys: Sequence[str]) -> dict[str, Entity]:
        """The merged entities of these keys, by key (one read; a missing key is left out)."""
        ...

    def neighbours(self, name: str, limit: int = 20) -> list[tuple[Entity, float]]:
        """Entities related to ``name``, heaviest relation first."""
        ...

    def relations_among(self, keys: Sequence[str]) -> list[Relation]:
        """Relations whose both ends are among ``keys`` (a subgraph)."""
        ...

    def entity_keys(self) -> set[str]:
        """Every entity key."""
        ...

    def entities_of_chunks(self, chunk_ids: Sequence[str]) -> dict[str, list[str]]:
        """Entity keys each chunk mentions."""
        ...

    def chunks_of_entities(self, keys: Sequence[str]) -> dict[str, list[str]]:
        """Chunk ids that mention each entity."""
        ...

    def mentioned_as(self, chunk_ids: Sequence[str], kind: str) -> dict[str, list[tuple[str, str]]]:
        """``(entity key, name as written)`` of what each chunk mentions with type ``kind``.

        The type of that mention in that chunk, not the entity's merged one (a page's title
        is a ``title`` in the page's own chunks); sorted by key. Reads no description.
        """
        ...

    def edges(self) -> list[Edge]:
        """Every relation as (source key, target key, weight), sorted (O(graph))."""
        ...

    def edges_of(self, keys: Sequence[str]) -> list[Edge]:
        """Every relation with at least one end among ``keys``, as :meth:`edges` gives it.

        Read through indexes on either end: the cost is the degree of those keys.
        """
        ...

    def to_networkx(self) -> Any:
        """The entity graph as a weighted ``networkx.Graph`` (built from :meth:`edges`)."""
        ...


@runtime_checkable
class MentionStore(EntityReader, Protocol):
    """What extraction writes: each chunk's entity and relation mentions (provenance).

    With the lookups of :class:`EntityReader`, and which chunks were extracted already.
    """

    def put_chunk(
        self,
        chunk_id: str,
        document_id: str,
        entities: Sequence[EntityMention],
        relations: Sequence[RelationMention],
    ) -> None:
        """Replace everything ``chunk_id`` contributes with these mentions."""
        ...

    def put_chunks(self, chunks: Sequence[ChunkMentions]) -> None:
        """:meth:`put_chunk` for many chunks at once, in one transaction.

        A repeated chunk id: the last wins. A blank id or a name without a key raises
        ``InvalidRequestError`` and nothing is written.
        """
        ...

    def remove_chunks(self, chunk_ids: Sequence[str]) -> int:
        """Drop these chunks' contributions; return how many entities disappeared."""
        ...

    def extracted_chunks(self) -> set[str]:
        """Chunk ids whose contributions are stored (extracted, possibly with nothing).

        Every one: O(corpus). :meth:`extracted_among` asks about a few.
        """
        ...

    def extracted_among(self, chunk_ids: Sequence[str]) -> set[str]:
        """Those of ``chunk_ids`` whose contributions are stored; the cost is the ids asked."""
        ...

    def extracted_of_documents(self, document_ids: Sequence[str]) -> set[str]:
        """The extracted chunk ids of these documents (by an index, not a scan)."""
        ...


@runtime_checkable
class CommunityReader(Protocol):
    """The community hierarchy and its reports, as read by search and report jobs."""

    def hierarchy_stats(self) -> tuple[int, int]:
        """(number of communities, largest cluster number or -1 when there are none).

        Read from counters the hierarchy writes keep (one indexed read), so a refresh
        numbers new communities after every previous one and knows whether a hierarchy
        exists without reading it.
        """
        ...

    def communities(self, level: int | None = None) -> list[Community]:
        """Stored communities, optionally of one level (the whole hierarchy: O(graph))."""
        ...

    def communities_by_id(self, ids: Sequence[str]) -> list[Community]:
        """The stored communities with these ids (unknown ids are left out).

        Ordered as :meth:`communities`. The cost is that of the ids asked, not of the
        hierarchy: one community's report job reads it and its children, no more.
        """
        ...

    def child_communities(self, parent_ids: Sequence[str]) -> list[Community]:
        """The stored communities whose parent is one of ``parent_ids``.

        Ordered as :meth:`communities`; read by an index on the parent, so the cost is
        that of the children found.
        """
        ...

    def communities_holding(self, keys: Sequence[str]) -> list[Community]:
        """The communities, at every level, with one of these entity keys as a member.

        Ordered as :meth:`communities`; read through an index of members by entity key,
        so the cost is that of the communities found.
        """
        ...

    def reports(self, level: int | None = None) -> list[CommunityReport]:
        """Stored reports, optionally of one level."""
        ...

    def reports_by_id(self, community_ids: Sequence[str]) -> list[CommunityReport]:
        """The stored reports of these communities (a community without one: left out).

        Ordered as :meth:`reports`; the cost is that of the ids asked.
        """
        ...

    def largest_reports(self, level: int, limit: int) -> list[tuple[str, int]]:
        """The ``limit`` stored reports of ``level`` citing the most chunks.

        ``(community id, number of chunks)`` each, most first (ties in any order); read
        from an index on (level, chunks), so the cost is ``limit`` rows.
        """
        ...


@runtime_checkable
class CommunityStore(CommunityReader, Protocol):
    """The community hierarchy and its reports, as the refresh (or ``graph build``) writes them."""

    def replace_communities(self, communities: Sequence[Community]) -> None:
        """Store a new hierarchy, replacing the previous one.

        The reports of communities not in it are deleted in the same transaction, so a
        report of a vanished community is never served, even before the refresh that
        follows has written a single report; the others are left as they are.
        """
        ...

    def update_communities(self, upserts: Sequence[Community], deletes: Sequence[str]) -> None:
        """Change the stored hierarchy by a diff: store ``upserts``, drop ``deletes``.

        The incremental refresh's write: the cost is that of the communities given (their
        rows and member rows), not of the hierarchy. The reports of the deleted ids go in
        the same transaction; the reports of upserted communities stay (their stale marks
        say whether to rewrite them). An id in both lists is kept (upserted).
        """
        ...

    def put_reports(
        self,
        reports: Sequence[CommunityReport],
        *,
        expected: Mapping[str, ReportVersion] | None = None,
    ) -> set[str]:
        """Store these reports, each over its community's report; return the ids stored.

        Every other report is left as it is: the cost is that of the reports given, not
        of all those stored. A report of a
        community not in the current hierarchy is not stored; of a repeated id the last
        wins. With ``expected`` (community id → ``(method, fingerprint)``, see
        :attr:`CommunityReport.version`) it is a compare-and-set: a report is stored
        only over a stored report of that version (none stored: not stored).

        The comparison is the store's, in the write's own transaction, atomic with the
        write rather than checked in Python beforehand (where a refresh committing between
        the read and the write would see its newer report replaced by a rewrite of the
        older one): SQL replaces the exact row it read (``UPDATE … WHERE report = ?``),
        Cypher locks each report before reading it. A concurrent writer therefore commits
        first and is seen, or waits (or, on an optimistic server, has its commit refused
        and retries); a report it rewrote meanwhile, even to the same version, may be left
        as it wrote it. A blank id, or a report ``expected`` names no version for, raises
        ``InvalidRequestError`` and nothing is written.
        """
        ...


@runtime_checkable
class StalenessStore(Protocol):
    """What changed since the reports were written: touched entities, stale communities.

    Plus the upkeep values (drift counters) the refresh keeps by name between runs.
    """

    def touched_entities(self) -> set[str]:
        """Entity keys whose mentions were added, changed or removed since last cleared."""
        ...

    def clear_touched(self, keys: Sequence[str]) -> None:
        """Forget these touched marks (after the communities they affect were marked)."""
        ...

    def mark_stale(self, community_ids: Sequence[str]) -> None:
        """Mark communities whose report no longer reflects their members."""
        ...

    def stale_communities(self) -> set[str]:
        """Community ids marked stale and not refreshed since."""
        ...

    def clear_stale(self, community_ids: Sequence[str]) -> None:
        """Unmark communities (their reports were rewritten or found unchanged)."""
        ...

    def graph_meta(self, name: str) -> str | None:
        """A value the graph's upkeep keeps by name (None: never set); one indexed read."""
        ...

    def set_graph_meta(self, values: Mapping[str, str]) -> None:
        """Store upkeep values by name (each over its previous value), in one write."""
        ...


@runtime_checkable
class GraphStore(MentionStore, CommunityStore, StalenessStore, Protocol):
    """Entities, relations with provenance, and communities: every role, one backend."""

    def counts(self) -> dict[str, int]:
        """Numbers of entities, relations and communities."""
        ...

    def close(self) -> None:
        """Release the connection(s); the store is not used afterwards."""
        ...
