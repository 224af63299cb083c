"""Building the knowledge graph from stored chunks, as plain functions.

The graph catches up with the store like the search indexes do: chunks not yet
extracted are extracted, contributions of chunks that no longer exist (their document
changed or was deleted) are removed, so an unchanged chunk costs nothing on a re-run.
Communities are then recomputed from the merged relations. The extractor's version is
recorded with the data: when it changes, every chunk is extracted again, so an improved
extractor never leaves a graph half made by its predecessor.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from graph.communities import Community, hierarchical_communities
from graph.models import EntityMention, RelationMention
from graph.store import GraphStore
from lore.store import Store

Extractor = Callable[[str, str], tuple[list[EntityMention], list[RelationMention]]]
EXTRACTOR_META = "graph_extractor"


@dataclass
class GraphBuildReport:
    """What one build did."""

    extracted: int = 0
    removed: int = 0
    unchanged: int = 0
    reports_written: int = 0


def build_graph(
    store: Store,
    graph: GraphStore,
    extract: Extractor,
    progress: Callable[[int, int], None] | None = None,
    batch: int = 200,
    version: str = "",
) -> GraphBuildReport:
    """Extract pending chunks, drop contributions of chunks that are gone.

    ``version`` names the extractor; a graph extracted by another version is redone.
    """
    refs = store.chunk_refs()
    current = {chunk_id for _, chunk_id, _ in refs}
    done = graph.extracted_chunks()
    if done and store.get_meta(EXTRACTOR_META) != version:
        graph.remove_chunks(sorted(done))
        done = set()
    report = GraphBuildReport(unchanged=len(current & done))
    gone = sorted(done - current)
    if gone:
        graph.remove_chunks(gone)
        report.removed = len(gone)
    pending = [row for row, chunk_id, _ in refs if chunk_id not in done]
    for start in range(0, len(pending), batch):
        rows = pending[start : start + batch]
        chunks = store.chunks_by_row_ids(rows)
        for row in rows:
            chunk = chunks.get(row)
            if chunk is None:
                continue  # deleted meanwhile; the next build sees it gone
            entities, relations = extract(chunk.text, chunk.title)
            graph.put_chunk(chunk.id, chunk.document_id, entities, relations)
            report.extracted += 1
        if progress is not None:
            progress(min(start + batch, len(pending)), len(pending))
    store.set_meta(EXTRACTOR_META, version)
    return report


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
