"""The graph side of a document's deletion or change, and of an extractor change.

:func:`forget_chunks` is the cascade: the chunks a document lost (deleted, or replaced
by a new version) lose their mentions, the entities and relations only they supported
go, the quarantine forgets them, and the communities the removal touched — and their
ancestors — are re-clustered and get their reports rewritten by the configured writer
(extractive by default), all in the caller's operation. So deleted text is not served
again by the graph, the community reports or global answers. A graph without
communities yet has no reports to rewrite; its touched marks wait for the first build.

:func:`gone_chunks` finds chunks the graph holds but the store no longer has (the
catch-up after a change, or after a crash between the store write and the cascade).

An extractor change (an LLM configured or removed, another model or prompt) never drops
a graph: :func:`extractor_warning` says the graph was made by another extractor and new
chunks use the new one; only ``lore graph build --reextract`` extracts every chunk
again, replacing each chunk's contributions as it goes (an interrupted re-extraction
keeps the old ones of the chunks it has not reached, and the next build continues it:
:func:`reextracting`), and records the new version (:func:`record_extractor`) once it
has done them all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

from graph.lifecycle import Removal, remove_contributions
from graph.quarantine import Quarantine
from graph.refresh import RefreshReport, Summarizer, plan_refresh, run_plan
from graph.store import GraphStore, MentionStore
from lore.store_roles import ChunkReader, StoreSettings

EXTRACTOR_META = "graph_extractor"
REEXTRACT_META = "graph_reextract"


@dataclass
class CascadeReport:
    """What forgetting some chunks removed, and the reports it rewrote."""

    removal: Removal
    released: int = 0
    """Quarantine entries of those chunks forgotten."""
    refresh: RefreshReport | None = None
    """The refresh run in the same operation (None: nothing to refresh)."""
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """Counts for a CLI line, an HTTP response or a job's detail."""
        refresh = self.refresh or RefreshReport()
        return {
            "chunks": self.removal.chunks,
            "entity_mentions_removed": self.removal.entity_mentions,
            "relation_mentions_removed": self.removal.relation_mentions,
            "entities_removed": len(self.removal.entities),
            "relations_removed": len(self.removal.relations),
            "entities_changed": len(self.removal.changed_entities),
            "quarantine_released": self.released,
            "communities": refresh.communities,
            "communities_stale": refresh.stale,
            "reports_refreshed": refresh.refreshed,
            "reports_recovered": refresh.recovered,
            "llm_calls": refresh.llm_calls,
        }

    def summary(self) -> str:
        """One line: what was removed and how many reports were refreshed."""
        return describe(self.as_dict())


def describe(counts: Mapping[str, int]) -> str:
    """A cascade's counts (:meth:`CascadeReport.as_dict`) as one line."""
    if not counts["chunks"]:
        return "graph: nothing extracted from these chunks"
    return (
        f"graph: {counts['entities_removed']} entities and {counts['relations_removed']} "
        f"relations removed ({counts['entity_mentions_removed']} entity and "
        f"{counts['relation_mentions_removed']} relation mentions from {counts['chunks']} "
        f"chunks), {counts['reports_refreshed']} of {counts['communities']} community "
        "reports refreshed"
        + (f", {n} re-covered" if (n := counts.get("reports_recovered", 0)) else "")
    )


@dataclass
class DeletionReport:
    """What deleting documents did: in the store, the indexes and the graph."""

    deleted: list[str]
    chunks: int
    graph: CascadeReport

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: the ids deleted, their chunks, and the graph cascade's counts."""
        return {
            "deleted": list(self.deleted),
            "chunks_removed": self.chunks,
            "graph": self.graph.as_dict(),
            "warnings": list(self.graph.warnings),
        }


def forget_chunks(
    graph: GraphStore,
    quarantine: Quarantine,
    chunk_ids: Sequence[str],
    summarizer: Summarizer,
    *,
    max_cluster_size: int = 10,
    seed: int = 42,
    lock: AbstractContextManager[None] | None = None,
) -> CascadeReport:
    """Remove these chunks' contributions and rewrite the reports that relied on them.

    Under ``lock`` (:func:`graph.upkeep_lock.upkeep_lock`) when given: two cascades, or a
    cascade and a build, then run one after the other; the second plans on the marks the
    first left, so both changes reach the reports.
    """
    with lock or nullcontext():
        removal = remove_contributions(graph, chunk_ids)
        released = quarantine.release(sorted(set(chunk_ids))) if chunk_ids else 0
        report = CascadeReport(removal, released)
        if removal.chunks and graph.hierarchy_stats()[0]:
            plan = plan_refresh(graph, max_cluster_size=max_cluster_size, seed=seed)
            report.refresh = run_plan(graph, summarizer, plan)
    return report


def gone_chunks(
    store: ChunkReader, graph: MentionStore, document_ids: Sequence[str] | None = None
) -> list[str]:
    """Chunk ids the graph holds contributions of but the store no longer has.

    With ``document_ids``, only those documents' chunks are compared, through indexed
    lookups on both sides: what an ingest of those documents replaced, at a cost that
    follows the documents, not the corpus. Without, every chunk (what a crash between a
    store write and its cascade left anywhere; the graph build's catch-up looks so).
    """
    if document_ids is not None:
        held = graph.extracted_of_documents(document_ids)
        return sorted(held - store.chunk_ids_of_documents(document_ids)) if held else []
    current = {chunk_id for _, chunk_id, _ in store.chunk_refs()}
    return sorted(graph.extracted_chunks() - current)


def extractor_warning(store: StoreSettings, graph: MentionStore, version: str) -> str | None:
    """A warning when the stored graph was extracted by another extractor version.

    The first extraction records the version; a graph is never dropped because the
    version changed (new chunks are extracted by the new extractor, old ones keep theirs).
    """
    recorded = store.get_meta(EXTRACTOR_META)
    if recorded == version:
        return None
    if recorded is None or not graph.extracted_chunks():
        store.set_meta(EXTRACTOR_META, version)
        return None
    return (
        f"the graph was extracted by {recorded!r}; the configured extractor is {version!r}. "
        "The existing graph is kept and only new chunks use the new extractor; run "
        "`lore graph build --reextract` to extract every chunk again with it."
    )


def reextracting(store: StoreSettings, version: str, *, start: bool) -> bool:
    """Whether a build re-extracts every chunk with ``version``.

    ``start`` begins a re-extraction (``--reextract``); one that was interrupted (by the
    token budget, a crash) is continued by the next build with the same extractor.
    """
    if start:
        store.set_meta(REEXTRACT_META, version)
        return True
    return store.get_meta(REEXTRACT_META) == version


def record_extractor(store: StoreSettings, version: str) -> None:
    """Record that every chunk of the graph is now extracted by ``version``."""
    store.set_meta(EXTRACTOR_META, version)
    store.set_meta(REEXTRACT_META, "")
