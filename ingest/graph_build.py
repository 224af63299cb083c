"""Building the knowledge graph from stored chunks, as plain functions.

The graph catches up with the store like the search indexes do: chunks not yet
extracted are extracted, contributions of chunks that no longer exist (their document
changed or was deleted) are removed, so an unchanged chunk costs nothing on a re-run.
What changed is read from the store's change log since the last completed build (the
graph records its sequence and digest, :data:`CAUGHT_UP_META`), so a build after a small
edit reads that edit; with no usable record (the first build, a re-extraction, a
quarantine released for retry, a store restored or replaced, a log older than its chunk
ids) it compares every chunk id of the store with every extracted one.
:func:`extract_chunks` is the one extraction loop (this catch-up and the ingest path's
extraction both use it); :func:`build_communities` recomputes the hierarchy from the
merged relations (a full rebuild, ``app.refresh``). A chunk the extractor could not
handle is quarantined with its reason (``graph/quarantine.py``) and skipped until
retried; the report counts them and what the LLM cost (calls, tokens, cache hits). The
extractor's version is recorded with the data. When it changes (an LLM configured or
removed, another model or prompt) the graph is kept and the report warns; only
``reextract`` extracts every chunk again (``lore graph build --reextract``), replacing
each chunk's contributions as it goes, so even an interrupted re-extraction drops nothing.
A token budget stops a build between batches once reached: what was extracted is kept,
the chunks not reached are counted as not done, and the next build continues with them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from graph.cascade import extractor_warning, record_extractor, reextracting
from graph.communities import Community, hierarchical_communities
from graph.models import ChunkMentions
from graph.quarantine import Quarantine
from graph.store import GraphStore, MentionStore
from graph.stores.merging import checked_chunks
from ingest.extract_offline import DocumentWords
from ingest.extraction import (
    ChunkInput,
    Extraction,
    Extractor,
    Quarantined,
    chunk_input,
    words_of_documents,
)
from lore.errors import InvalidRequestError
from lore.flow import Step, Walk
from lore.llm import LLMStats
from lore.models import StoredChunk
from lore.store import Store


@dataclass
class GraphBuildReport:
    """What one build did, and what the LLM (if any) cost."""

    extractor: str = "offline"
    extracted: int = 0
    quarantined: int = 0
    removed: int = 0
    unchanged: int = 0
    reports_written: int = 0
    """Reports whose text is new (a new community's, or words that changed)."""
    reports_recovered: int = 0
    """Reports stored again with the same text: only their chunk ids and importance moved."""
    report_writer: str = "extractive"
    not_done: int = 0
    """Chunks left for the next build because the token budget was reached."""
    budget_reached: bool = False
    warnings: list[str] = field(default_factory=list)
    llm: LLMStats = field(default_factory=LLMStats)
    clustering: dict[str, Any] = field(default_factory=dict)
    """How the hierarchy was updated (``graph.refresh.Clustering.as_dict``)."""
    steps: list[str] = field(default_factory=list)
    """The pipeline steps the build walked, in order (``lore.flow``)."""


def store_extractions(
    graph: MentionStore,
    quarantine: Quarantine,
    extractor_name: str,
    chunks: Sequence[ChunkInput],
    results: Sequence[Extraction | Quarantined],
) -> tuple[int, int]:
    """Store a batch's extractions in one graph write; quarantine the rest, with reasons.

    An extraction the graph would refuse (a name without a key) is quarantined like a
    failed one, so one bad chunk never stops the batch. Returns (stored, quarantined).
    """
    stored: list[ChunkMentions] = []
    held = 0
    for chunk, result in zip(chunks, results, strict=True):
        reason = result.reason if isinstance(result, Quarantined) else None
        if isinstance(result, Extraction):
            mentions = ChunkMentions(
                chunk.chunk_id, chunk.document_id, result.entities, result.relations
            )
            try:
                checked_chunks([mentions])
                stored.append(mentions)
            except InvalidRequestError as exc:
                reason = str(exc)
        if reason is not None:
            quarantine.add(chunk.chunk_id, chunk.document_id, extractor_name, reason)
            held += 1
    graph.put_chunks(stored)
    return len(stored), held


def extract_chunks(
    graph: MentionStore, extractor: Extractor, quarantine: Quarantine, chunks: Sequence[ChunkInput]
) -> tuple[int, int]:
    """Extract the chunks' graph contributions and store them: the one extraction loop.

    A chunk the extractor cannot handle is quarantined with the reason (its document
    stays searchable; the chunk waits for a retry); the rest are stored in one graph
    write (:func:`store_extractions`). Returns (extracted, quarantined).
    """
    results = extractor.extract_batch(chunks)
    return store_extractions(graph, quarantine, extractor.name, chunks, results)


def build_graph(
    store: Store,
    graph: GraphStore,
    extractor: Extractor,
    quarantine: Quarantine,
    progress: Callable[[int, int], None] | None = None,
    batch: int = 64,
    *,
    reextract: bool = False,
    budget_tokens: int | None = None,
    walk: Walk | None = None,
) -> GraphBuildReport:
    """Extract pending chunks, then drop contributions of chunks that are gone.

    ``reextract`` extracts every chunk again with this extractor (a re-extraction cut
    short is continued by the next build). ``budget_tokens`` (prompt + completion)
    stops the extraction between batches once spent. ``walk`` is told as the build
    enters the ``extract`` and ``forget`` steps.
    """
    extractor.check()  # an unreachable LLM fails here, before anything is written
    upto = store.last_seq()
    mark = f"{upto}:{store.digest_at(upto)}"  # what the graph will have caught up with
    report = GraphBuildReport(extractor=extractor.name)
    redo = reextracting(store, extractor.version, start=reextract)
    if redo:
        quarantine.release()
    elif (warning := extractor_warning(store, graph, extractor.version)) is not None:
        report.warnings.append(warning)
    held = quarantine.chunk_ids()
    work = _work(store, graph, upto, held, redo=redo)
    pending, gone, released = work.pending, work.gone, work.released
    report.unchanged = work.unchanged
    if walk is not None:
        walk(Step.EXTRACT)
    before = LLMStats(**extractor.stats.as_dict())
    words: dict[str, DocumentWords] = {}
    for start in range(0, len(pending), batch):
        if budget_tokens is not None and _spent(extractor.stats, before) >= budget_tokens:
            report.budget_reached = True
            report.not_done = len(pending) - start
            break
        rows = pending[start : start + batch]
        by_row = store.chunks_by_row_ids(rows)
        words = _document_words(store, by_row.values(), words)
        chunks = [
            chunk_input(c, words)
            for row in rows
            if (c := by_row.get(row)) is not None  # deleted meanwhile: the next build sees it
        ]
        extracted, quarantined = extract_chunks(graph, extractor, quarantine, chunks)
        report.extracted += extracted
        report.quarantined += quarantined
        if progress is not None:
            progress(min(start + batch, len(pending)), len(pending))
    if walk is not None:
        walk(Step.FORGET)
    if gone:  # chunks an ingest's own cascade did not reach (a crash, a dropped task)
        graph.remove_chunks(gone)
        report.removed = len(gone)
    quarantine.release(sorted(released))
    if redo and not report.budget_reached:
        record_extractor(store, extractor.version)
    if not report.budget_reached:
        graph.set_graph_meta({CAUGHT_UP_META: mark})
    after = extractor.stats.as_dict()
    report.llm = LLMStats(**{k: v - before.as_dict()[k] for k, v in after.items()})
    return report


@dataclass
class _Work:
    """What a build has to do: rows to extract, chunks gone and released, how many kept."""

    pending: list[int]
    gone: list[str]
    released: set[str]
    unchanged: int


def _work(store: Store, graph: GraphStore, upto: int, held: set[str], *, redo: bool) -> _Work:
    """The chunks written since the last build, or (no usable record, a redo) all of them."""
    delta = None if redo else changed_since_build(store, graph, upto)
    if delta is None:  # compare everything: the first build, a re-extraction, an old log
        refs = store.chunk_refs()
        current = {chunk_id for _, chunk_id, _ in refs}
        known = graph.extracted_chunks()  # read once: what is done, and what is gone
        done = set() if redo else known
        pending = pending_chunks(refs, done, held)
        return _Work(pending, sorted(known - current), held - current, len(current & done))
    refs, deleted = delta
    done = graph.extracted_among([c for _, c, _ in refs])
    deleted -= {c for _, c, _ in refs}
    deleted -= store.row_ids_of_chunk_ids(sorted(deleted)).keys()  # stored again since
    gone = sorted(graph.extracted_among(sorted(deleted)))
    released = held - store.row_ids_of_chunk_ids(sorted(held)).keys()
    pending = pending_chunks(refs, done, held)
    unchanged = store.chunk_count() - len(pending) - len(held - released)
    return _Work(pending, gone, released, unchanged)


CAUGHT_UP_META = "store_caught_up"
"""Graph meta: ``seq:digest`` of the store's change log when the last build completed."""


def changed_since_build(
    store: Store, graph: GraphStore, upto: int
) -> tuple[list[tuple[int, str, str]], set[str]] | None:
    """The chunks written (their refs) and deleted since the last completed build.

    Read from the store's change log between the sequence the graph recorded and ``upto``,
    so a build after a small change reads what changed, not every chunk id of the store
    and the graph. None, and the build compares everything, when there is no record
    (the first build, a quarantine released for retry), when the log at the recorded
    sequence is not the one the graph saw (a store restored or replaced) or when the
    range holds entries logged before the log named its chunks.
    """
    recorded = graph.graph_meta(CAUGHT_UP_META) or ""
    seq, _, digest = recorded.partition(":")
    if not seq.isdigit() or int(seq) > upto or store.digest_at(int(seq)) != digest:
        return None
    found = store.chunk_changes(int(seq), upto)
    if found is None:
        return None
    upserted, deleted = found
    return store.chunk_refs_of_rows(upserted), deleted


def forget_caught_up(graph: GraphStore) -> None:
    """Make the next build compare everything (a quarantine was released for retry)."""
    graph.set_graph_meta({CAUGHT_UP_META: ""})


def _document_words(
    store: Store, chunks: Iterable[StoredChunk], known: dict[str, DocumentWords]
) -> dict[str, DocumentWords]:
    """The words of the documents of ``chunks``, from each one's whole text (all its chunks).

    ``known`` holds those of the previous batch: batches follow the store's order, so a
    document's chunks mostly arrive together and each document is read about once.
    """
    documents = {chunk.document_id for chunk in chunks}
    words = {d: w for d, w in known.items() if d in documents}
    missing = sorted(documents - words.keys())
    words.update(words_of_documents(c for d in missing for c in store.chunks_of_document(d)))
    return words


def pending_chunks(
    refs: Sequence[tuple[int, str, str]], done: set[str], held: set[str]
) -> list[int]:
    """Row ids of the chunks a build extracts: neither extracted nor quarantined."""
    return [row for row, chunk_id, _ in refs if chunk_id not in done and chunk_id not in held]


def _spent(now: LLMStats, before: LLMStats) -> int:
    """Prompt and completion tokens spent since ``before``."""
    return (
        now.prompt_tokens + now.completion_tokens - before.prompt_tokens - before.completion_tokens
    )


def build_communities(
    graph: GraphStore,
    *,
    max_cluster_size: int = 10,
    seed: int = 42,
) -> Sequence[Community]:
    """Recompute the community hierarchy from the graph's relations and store it."""
    communities = hierarchical_communities(
        graph.edges(), max_cluster_size=max_cluster_size, seed=seed
    )
    graph.replace_communities(communities)
    return communities
