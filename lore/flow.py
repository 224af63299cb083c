"""The pipeline's steps, in order: the one list every path walks.

A document goes in, and a question comes out answered, through these steps. Three paths
walk them — an ingest run in this process (``app.ingest``), the same ingest on Celery
workers (``workers.tasks``: a chain of tasks per batch) and ``lore graph build`` /
``lore graph refresh`` (``app.refresh``, or its worker form) — each the part it owns, always
in this order. Each records the steps it walked in its job (``detail.steps``, see
``lore jobs JOB_ID --json``) or its report (``graph build --json``), which is how a test checks that
the three walk the same list.

==================  ================================================================
step                done by
==================  ================================================================
``load``            ``ingest.loaders`` reads files (or the HTTP body is parsed); the
                    job stages each input (``app.jobs.JobStore.stage``)
``store``           chunk, embed and store: ``ingest.pipeline.IngestPipeline`` (the
                    change log records each write, ``lore.store.Store``)
``extract``         entities and relations of new chunks: ``app.steps.extract_ready``
                    (an ingest), ``ingest.graph_build.build_graph`` (a build)
``forget``          what replaced or deleted chunks contributed leaves the graph:
                    ``app.lifecycle.forget_gone`` (the cascade, ``graph.cascade``)
``cluster``         hierarchical Leiden over the touched region: ``graph.refresh``
                    (``plan_refresh``)
``summarise``       a report per stale community, level by level: ``graph.refresh
                    .run_plan`` (workers: one task per community, a chord per level)
``embed_reports``   the new reports' vectors for global search:
                    ``retrieval.report_vectors.ReportVectorIndex.update``
``sync_indexes``    BM25 and HNSW catch up with the change log:
                    ``retrieval.index_set.IndexSet.catch_up``
==================  ================================================================

An ingest walks ``load`` to ``forget``, then ``sync_indexes``; a build walks ``extract`` to
``embed_reports`` (its extraction also catches up chunks an ingest left unextracted).
Questions read what these steps wrote: ``retrieval.queries.QueryService``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from enum import StrEnum


class Step(StrEnum):
    """One step of the pipeline (see the module's table)."""

    LOAD = "load"
    STORE = "store"
    EXTRACT = "extract"
    FORGET = "forget"
    CLUSTER = "cluster"
    SUMMARISE = "summarise"
    EMBED_REPORTS = "embed_reports"
    SYNC_INDEXES = "sync_indexes"


STEPS: tuple[Step, ...] = tuple(Step)
"""Every step, in the order every path walks them."""

INGEST: tuple[Step, ...] = (Step.LOAD, Step.STORE, Step.EXTRACT, Step.FORGET, Step.SYNC_INDEXES)
"""What an ingest walks (in this process or on the workers)."""

BUILD: tuple[Step, ...] = (
    Step.EXTRACT,
    Step.FORGET,
    Step.CLUSTER,
    Step.SUMMARISE,
    Step.EMBED_REPORTS,
)
"""What a graph build or refresh walks."""

Walk = Callable[[Step], None]
"""Called as a path enters each step (records it)."""


def in_order(walked: Sequence[str]) -> bool:
    """True when ``walked`` names known steps, each once, in the list's order."""
    names = [str(s) for s in STEPS]
    if any(w not in names for w in walked) or len(set(walked)) != len(walked):
        return False
    return list(walked) == sorted(walked, key=names.index)
