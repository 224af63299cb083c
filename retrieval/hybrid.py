"""Hybrid local search: BM25 and dense run concurrently, fused by weighted RRF.

Order of work for one request:

1. validate the metadata filter and resolve it to the allowed chunk row ids;
2. ask each engine with a non-zero weight for a candidate pool larger than top_k,
   the filter applied *inside* each engine, both at once (``asyncio.gather`` over
   worker threads; tantivy, hnswlib and torch release the GIL);
3. when the query holds identifiers (``E_LEDGER_LOCK_TIMEOUT``, ``pool.idle_timeout_ms``,
   ``504``), ask the sparse engine a third time for the chunks containing all of them
   verbatim: this "exact" list is a second keyword vote (weight ``sparse_weight *
   exact_boost``), so for an identifier lookup the chunk holding it beats chunks that
   only share its parts or are merely close in meaning. It is cast only when
   identifiers make up at least ``exact_min_share`` of the query's words: on SciFact,
   whose claims mention gene names in prose, a vote on every query cost 0.01 nDCG@10;
4. fuse (weighted RRF, or relative score fusion), cut to top_k, attach the stored text.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from lore.embedders import Embedder
from lore.errors import LoreError
from lore.store import Store
from retrieval.analyzer import Analyzer
from retrieval.contract import (
    CandidateLimits,
    EngineRanks,
    QueryRequest,
    QueryResponse,
    QueryResult,
)
from retrieval.dense import DenseIndex
from retrieval.dense import Hits as DenseHits
from retrieval.filters import (
    ResolvedFilter,
    clauses_key,
    empty_result_hints,
    parse_filter,
    resolve_values,
)
from retrieval.fusion import relative_score_fusion, weighted_rrf
from retrieval.graph_search import GraphExpander
from retrieval.rerank import Reranker
from retrieval.rwlock import ReadWriteLock
from retrieval.shaping import mmr
from retrieval.sparse import Hits as SparseHits
from retrieval.sparse import SparseIndex

FILTER_CACHE_SIZE = 64
_T = TypeVar("_T")


@dataclass(frozen=True)
class SearchDefaults:
    """Service-wide defaults a request may override."""

    rrf_k: int = 60
    dense_weight: float = 1.0
    sparse_weight: float = 1.0
    exact_boost: float = 1.0
    exact_min_share: float = 0.5
    diversity: float = 0.0
    graph_weight: float = 0.0
    graph_seeds: int = 5
    rerank_top_n: int = 50
    rerank_timeout_s: float = 10.0
    candidate_multiplier: int = 4
    min_candidates: int = 50
    max_candidates: int = 2000

    def pool_size(self, top_k: int) -> int:
        """Candidates asked of each engine: a multiple of top_k within the bounds."""
        pool = min(max(top_k * self.candidate_multiplier, self.min_candidates), self.max_candidates)
        return max(pool, top_k)


@dataclass
class HybridSearcher:
    """Runs local queries against one store and its two indexes."""

    store: Store
    sparse: SparseIndex
    dense: DenseIndex
    embedder: Embedder
    analyzer: Analyzer
    defaults: SearchDefaults
    reranker: Reranker | None = None
    expander: GraphExpander | None = None
    guard: ReadWriteLock = field(default_factory=ReadWriteLock)
    # Long-lived worker threads: torch and OpenMP set up per calling thread, so a fresh
    # thread per query (asyncio's default executor under asyncio.run) costs milliseconds.
    executor: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(max_workers=4, thread_name_prefix="search")
    )
    # The query embedding always runs on this one thread, so torch keeps a single warm
    # OpenMP team instead of one per worker (measured: ~6 ms a query on 2 cores).
    embed_executor: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(max_workers=1, thread_name_prefix="embed")
    )

    _filter_cache: OrderedDict[tuple[int, str], ResolvedFilter] = field(
        default_factory=OrderedDict, init=False, repr=False
    )

    def resolve_filter(self, raw: dict[str, object] | None) -> ResolvedFilter | None:
        """Validate a request's filter; None when there is none.

        Resolved row-id sets are cached per filter until the store changes, so a filter
        used again and again (``env=production``) costs one SQLite query per change.
        """
        clauses = parse_filter(raw, self.store.metadata_keys() if raw else set())
        if not clauses:
            return None
        key = (self.store.last_seq(), clauses_key(clauses))
        cached = self._filter_cache.get(key)
        if cached is None:
            exact, value_hints = resolve_values(clauses, self.store.metadata_values)
            allowed = frozenset(self.store.row_ids_matching(exact))
            hints = () if allowed else empty_result_hints(clauses, value_hints)
            cached = ResolvedFilter(exact, allowed, hints)
            self._filter_cache[key] = cached
            while len(self._filter_cache) > FILTER_CACHE_SIZE:
                self._filter_cache.popitem(last=False)
        else:
            self._filter_cache.move_to_end(key)
        return cached

    async def search(self, request: QueryRequest) -> QueryResponse:
        """Answer one request (see the module docstring)."""
        params = request.hybrid_params
        dense_w = self.defaults.dense_weight if params.dense_weight is None else params.dense_weight
        sparse_w = (
            self.defaults.sparse_weight if params.sparse_weight is None else params.sparse_weight
        )
        k = self.defaults.rrf_k if params.rrf_k_constant is None else params.rrf_k_constant
        flt = self.resolve_filter(request.metadata_filter)
        pool = self.defaults.pool_size(request.top_k)
        limits = request.candidate_limits or CandidateLimits()
        sparse_pool, dense_pool = limits.sparse or pool, limits.dense or pool

        sparse_task = (
            self._in_thread(self._sparse_search, request.search_text, sparse_pool, flt)
            if sparse_w > 0
            else _nothing()
        )
        dense_task = (
            asyncio.get_running_loop().run_in_executor(
                self.embed_executor, self._dense_search, request.search_text, dense_pool, flt
            )
            if dense_w > 0
            else _nothing()
        )
        identifiers, share = self.analyzer.identifiers(request.search_text)
        exact_w = sparse_w * self.defaults.exact_boost
        if exact_w <= 0 or share < self.defaults.exact_min_share:
            identifiers, exact_w = [], 0.0
        exact_task = (
            self._in_thread(self._sparse_search, request.search_text, sparse_pool, flt, identifiers)
            if identifiers
            else _nothing()
        )
        sparse_hits, dense_hits, exact_hits = await asyncio.gather(
            sparse_task, dense_task, exact_task
        )

        weights = {"sparse": sparse_w, "dense": dense_w, "exact": exact_w}
        scored = {"sparse": sparse_hits, "dense": dense_hits, "exact": exact_hits}
        graph_w = (
            self.defaults.graph_weight if request.graph_weight is None else request.graph_weight
        )
        graph_hits: list[tuple[int, float]] = []
        if graph_w > 0 and self.expander is not None:
            seeds = [
                row
                for row, _ in weighted_rrf(
                    {n: [r for r, _ in h] for n, h in scored.items()}, weights, k
                )[: self.defaults.graph_seeds]
            ]
            graph_hits = await self._in_thread(
                self.expander.rank, request.search_text, seeds, max(sparse_pool, dense_pool)
            )
            if flt is not None:
                graph_hits = [(row, s) for row, s in graph_hits if row in flt.allowed]
            weights["graph"] = graph_w
            scored["graph"] = graph_hits
        if request.fusion == "rrf":
            fused = weighted_rrf(
                {name: [row for row, _ in hits] for name, hits in scored.items()}, weights, k
            )
        else:
            fused = relative_score_fusion(scored, weights)
        shaped = await self._shape(request, fused)
        top = shaped.rows[: request.top_k]
        chunks = self.store.chunks_by_row_ids([row for row, _ in top])
        sparse_rank = {row: rank for rank, (row, _) in enumerate(sparse_hits, start=1)}
        dense_rank = {row: rank for rank, (row, _) in enumerate(dense_hits, start=1)}
        exact_rank = {row: rank for rank, (row, _) in enumerate(exact_hits, start=1)}
        graph_rank = {row: rank for rank, (row, _) in enumerate(graph_hits, start=1)}
        results = [
            QueryResult(
                chunk_id=chunk.id,
                rrf_score=score,
                text=chunk.text,
                source=chunk.source,
                document_id=chunk.document_id,
                title=chunk.title,
                heading=chunk.heading,
                metadata=dict(chunk.metadata),
                ranks=EngineRanks(
                    sparse=sparse_rank.get(row),
                    dense=dense_rank.get(row),
                    exact=exact_rank.get(row),
                    graph=graph_rank.get(row),
                ),
                rerank_score=shaped.rerank_scores.get(row),
            )
            for row, score in top
            if (chunk := chunks.get(row)) is not None
        ]
        if not results and flt is not None:
            shaped.warnings.extend(flt.hints)
        return QueryResponse(
            query_id=request.query_id or uuid.uuid4().hex,
            results=results,
            fusion=request.fusion,
            reranker=shaped.reranker,
            warnings=shaped.warnings,
        )

    async def _shape(self, request: QueryRequest, fused: list[tuple[int, float]]) -> _Shaped:
        """Rerank the head, diversify (MMR), apply the relative cut-off; best first."""
        shaped = _Shaped(rows=list(fused))
        wants_rerank = request.rerank if request.rerank is not None else self.reranker is not None
        if wants_rerank and fused:
            await self._rerank(request.search_text, shaped)
        diversity = self.defaults.diversity if request.diversity is None else request.diversity
        if diversity > 0 and shaped.rows:
            head = shaped.rows[: self.defaults.pool_size(request.top_k)]
            if shaped.rerank_scores:  # diversify within what the reranker ordered
                head = shaped.rows[: len(shaped.rerank_scores)]
            relevance = [shaped.rerank_scores.get(row, score) for row, score in head]
            vectors = await self._in_thread(self._vectors, [row for row, _ in head])
            owners = self.store.document_ids_of([row for row, _ in head])
            picked = mmr(
                relevance,
                vectors,
                diversity,
                min(request.top_k, len(head)),
                groups=[owners.get(row, row) for row, _ in head],
            )
            rest = sorted(set(range(len(head))) - set(picked))
            shaped.rows = [head[i] for i in [*picked, *rest]] + shaped.rows[len(head) :]
        if request.min_relative_score is not None and fused:
            floor = fused[0][1] * request.min_relative_score
            shaped.rows = [(row, score) for row, score in shaped.rows if score >= floor]
        return shaped

    async def _rerank(self, text: str, shaped: _Shaped) -> None:
        if self.reranker is None:
            shaped.warnings.append("rerank requested but no reranker is configured")
            return
        head = shaped.rows[: self.defaults.rerank_top_n]
        chunks = self.store.chunks_by_row_ids([row for row, _ in head])
        head = [(row, score) for row, score in head if row in chunks]
        passages = [chunks[row].text for row, _ in head]
        call = asyncio.get_running_loop().run_in_executor(
            self.embed_executor, self.reranker.rerank, text, passages
        )
        try:
            scores = await asyncio.wait_for(call, self.defaults.rerank_timeout_s)
        except TimeoutError:
            shaped.warnings.append(
                f"reranker {self.reranker.name} timed out after "
                f"{self.defaults.rerank_timeout_s:g} s; results are in fused order"
            )
            return
        except (LoreError, OSError, RuntimeError, ValueError) as exc:
            shaped.warnings.append(
                f"reranker {self.reranker.name} unavailable ({exc}); results are in fused order"
            )
            return
        order = sorted(range(len(head)), key=lambda i: (-scores[i], i))
        shaped.rerank_scores = {head[i][0]: scores[i] for i in range(len(head))}
        shaped.reranker = self.reranker.name
        reranked = {row for row, _ in head}
        shaped.rows = [head[i] for i in order] + [
            item for item in shaped.rows if item[0] not in reranked
        ]

    def _in_thread(self, fn: Callable[..., _T], *args: object) -> asyncio.Future[_T]:
        return asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)

    def _vectors(self, rows: list[int]) -> npt.NDArray[np.float32]:
        with self.guard.read():
            return self.dense.vectors(rows)

    def _sparse_search(
        self, text: str, pool: int, flt: ResolvedFilter | None, require: list[str] | None = None
    ) -> SparseHits:
        with self.guard.read():
            return self.sparse.search(text, pool, flt, require or ())

    def _dense_search(self, text: str, pool: int, flt: ResolvedFilter | None) -> DenseHits:
        with self.guard.read():
            if len(self.dense) == 0:
                return []
        vector = self.embedder.embed_query(text)
        with self.guard.read():
            return self.dense.search(vector, pool, flt)

    def search_sync(self, request: QueryRequest) -> QueryResponse:
        """Blocking wrapper for the CLI and benchmarks."""
        return asyncio.run(self.search(request))


@dataclass
class _Shaped:
    rows: list[tuple[int, float]]
    rerank_scores: dict[int, float] = field(default_factory=dict)
    reranker: str | None = None
    warnings: list[str] = field(default_factory=list)


async def _nothing() -> SparseHits:
    return []
