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
import json
import uuid
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TypeVar

from lore.embedders import Embedder
from lore.store import Store
from retrieval.analyzer import Analyzer
from retrieval.contract import EngineRanks, QueryRequest, QueryResponse, QueryResult
from retrieval.dense import DenseIndex
from retrieval.dense import Hits as DenseHits
from retrieval.filters import ResolvedFilter, parse_filter
from retrieval.fusion import relative_score_fusion, weighted_rrf
from retrieval.rwlock import ReadWriteLock
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
        key = (self.store.last_seq(), json.dumps(clauses, sort_keys=True))
        cached = self._filter_cache.get(key)
        if cached is None:
            cached = ResolvedFilter(clauses, frozenset(self.store.row_ids_matching(clauses)))
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

        sparse_task = (
            self._in_thread(self._sparse_search, request.search_text, pool, flt)
            if sparse_w > 0
            else _nothing()
        )
        dense_task = (
            asyncio.get_running_loop().run_in_executor(
                self.embed_executor, self._dense_search, request.search_text, pool, flt
            )
            if dense_w > 0
            else _nothing()
        )
        identifiers, share = self.analyzer.identifiers(request.search_text)
        exact_w = sparse_w * self.defaults.exact_boost
        if exact_w <= 0 or share < self.defaults.exact_min_share:
            identifiers, exact_w = [], 0.0
        exact_task = (
            self._in_thread(self._sparse_search, request.search_text, pool, flt, identifiers)
            if identifiers
            else _nothing()
        )
        sparse_hits, dense_hits, exact_hits = await asyncio.gather(
            sparse_task, dense_task, exact_task
        )

        weights = {"sparse": sparse_w, "dense": dense_w, "exact": exact_w}
        scored = {"sparse": sparse_hits, "dense": dense_hits, "exact": exact_hits}
        if request.fusion == "rrf":
            fused = weighted_rrf(
                {name: [row for row, _ in hits] for name, hits in scored.items()}, weights, k
            )
        else:
            fused = relative_score_fusion(scored, weights)
        top = fused[: request.top_k]
        chunks = self.store.chunks_by_row_ids([row for row, _ in top])
        sparse_rank = {row: rank for rank, (row, _) in enumerate(sparse_hits, start=1)}
        dense_rank = {row: rank for rank, (row, _) in enumerate(dense_hits, start=1)}
        exact_rank = {row: rank for rank, (row, _) in enumerate(exact_hits, start=1)}
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
                ),
            )
            for row, score in top
            if (chunk := chunks.get(row)) is not None
        ]
        return QueryResponse(
            query_id=request.query_id or uuid.uuid4().hex, results=results, fusion=request.fusion
        )

    def _in_thread(self, fn: Callable[..., _T], *args: object) -> asyncio.Future[_T]:
        return asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)

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


async def _nothing() -> SparseHits:
    return []
