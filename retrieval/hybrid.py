"""Hybrid local search: ranked lists from several sources, fused, shaped, returned.

One request goes through small steps (:meth:`HybridSearcher.search`):

1. **plan** — the request's weights, k and candidate pools over the service defaults
   (:class:`~lore.settings.SearchSettings`); the metadata filter is validated and
   resolved to the allowed chunk row ids;
2. **sources** — each source is a function taking the plan (and so the filter) and
   returning a ranked list of (row id, score), the filter applied *inside* it:

   * ``sparse`` (BM25) and ``dense`` (query embedding + HNSW), run concurrently
     (``asyncio.gather`` over worker threads; tantivy, hnswlib and torch release the GIL);
   * ``feedback``: a second dense search, right after the first in the same thread, for
     the query moved toward the first list's best passages (:mod:`retrieval.feedback`),
     weight ``dense_weight * feedback_boost``; not for a query of identifiers (below),
     which names what it wants;
   * ``exact``: when identifiers (``E_LEDGER_LOCK_TIMEOUT``, ``pool.idle_timeout_ms``,
     ``504``) make up at least ``exact_min_share`` of the query's words, the sparse
     engine is asked for the chunks holding all of them verbatim — a second keyword vote
     (weight ``sparse_weight * exact_boost``), so the chunk holding the identifier beats
     chunks that only share its parts (on SciFact, whose claims mention gene names in
     prose, a vote on every query cost 0.01 nDCG@10); it runs alongside the first two;
   * ``defines``: of the ``exact`` list, the chunks that *define* an identifier of the
     query (a definition-list term, a table row's first cell, a heading:
     :mod:`retrieval.defines`), with the same weight — the defining place outranks a
     changelog that mentions the name. A qualified name (``Class.member``) is also
     defined by a keyword result naming the member in a defining place under a title or
     heading naming the qualifier; such a chunk joins the ``exact`` list too (after the
     verbatim ones), as it holds the name the way its page writes it;
   * ``graph`` (when ``graph_weight`` > 0): the knowledge graph walked from the best
     chunks of a first fusion of the other lists (:mod:`retrieval.graph_search`);
3. **fuse** — weighted RRF, or relative score fusion, ordered on lists cut to a pool
   that does not grow with top_k (so the first results never depend on top_k), the first
   places kept for chunks some list ranks well (:func:`stable_fusion`);
4. **shape** — rerank the head, diversify (MMR), apply the relative cut-off;
5. **respond** — cut to top_k, attach the stored text and each source's rank.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from lore.aio import run_sync
from lore.embedders import Embedder
from lore.errors import LoreError
from lore.models import StoredChunk
from lore.settings import RerankSettings, SearchSettings
from lore.store import Store
from retrieval.analyzer import Analyzer
from retrieval.contract import (
    CandidateLimits,
    Duplicate,
    EngineRanks,
    QueryRequest,
    QueryResponse,
    QueryResult,
)
from retrieval.defines import defined_terms, defines_member, named_by, qualified
from retrieval.dense import DenseIndex
from retrieval.feedback import feedback_query
from retrieval.filters import (
    ResolvedFilter,
    clauses_key,
    empty_result_hints,
    parse_filter,
    resolve_values,
)
from retrieval.fusion import guard_consensus, relative_score_fusion, weighted_rrf
from retrieval.graph_search import GraphExpander
from retrieval.rerank import Reranker
from retrieval.rwlock import ReadWriteLock
from retrieval.shaping import fold_duplicates, mmr
from retrieval.sparse import SparseIndex

FILTER_CACHE_SIZE = 64
CONSENSUS_DEPTH = 10
"""The first places of a fused list go to chunks some list ranks within this depth."""
_T = TypeVar("_T")
Ranked = list[tuple[int, float]]
"""A source's answer: (chunk row id, score), best first."""


def pool_size(settings: SearchSettings, top_k: int) -> int:
    """Candidates asked of each engine: a multiple of top_k within the bounds."""
    pool = min(
        max(top_k * settings.candidate_multiplier, settings.min_candidates),
        settings.max_candidates,
    )
    return max(pool, top_k)


@dataclass(frozen=True)
class _Plan:
    """One request's parameters, resolved against the service defaults."""

    text: str
    flt: ResolvedFilter | None
    weights: Mapping[str, float]
    k: int
    sparse_pool: int
    dense_pool: int
    identifiers: tuple[str, ...]
    head_pool: int
    feedback_passages: int
    """Passages the dense feedback query moves toward (0: no feedback list)."""


def _ranks(hits: Ranked) -> dict[int, int]:
    return {row: rank for rank, (row, _) in enumerate(hits, start=1)}


def stable_fusion(
    lists: Mapping[str, Ranked], weights: Mapping[str, float], k: int, fusion: str, head: int
) -> Ranked:
    """Fusion whose order does not depend on how deep the lists go.

    The order is decided on every list cut to its first ``head`` entries (a pool that does
    not grow with top_k), so asking for more results only appends to the same first
    results; what only the deeper lists found follows, its scores capped below the last
    of the head. The first places then go to chunks some list ranks well
    (:func:`~retrieval.fusion.guard_consensus`).
    """
    cut = {name: hits[:head] for name, hits in lists.items()}
    first = fuse(cut, weights, k, fusion)
    used = {name: [row for row, _ in hits] for name, hits in cut.items() if weights.get(name, 1.0)}
    first = guard_consensus(first, used, CONSENSUS_DEPTH)
    seen = {row for row, _ in first}
    floor = min((score for _, score in first), default=0.0)
    deeper = [
        (row, min(score, floor))
        for row, score in fuse(lists, weights, k, fusion)
        if row not in seen
    ]
    return first + deeper


def fuse(lists: Mapping[str, Ranked], weights: Mapping[str, float], k: int, fusion: str) -> Ranked:
    """Weighted RRF over the lists' orders, or relative score fusion over their scores."""
    if fusion == "rrf":
        return weighted_rrf(
            {name: [row for row, _ in hits] for name, hits in lists.items()}, weights, k
        )
    return relative_score_fusion(lists, weights)


@dataclass
class HybridSearcher:
    """Runs local queries against one store and its two indexes."""

    store: Store
    sparse: SparseIndex
    dense: DenseIndex
    embedder: Embedder
    analyzer: Analyzer
    settings: SearchSettings = field(default_factory=SearchSettings)
    rerank_settings: RerankSettings = field(default_factory=RerankSettings)
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
        """Answer one request: plan, sources, fuse, shape, respond (module docstring)."""
        plan = self._plan(request)
        sparse, (dense, feedback), exact = await asyncio.gather(
            self._sparse_source(plan), self._dense_source(plan), self._exact_source(plan)
        )
        lists = {"sparse": sparse, "dense": dense, "feedback": feedback, "exact": exact}
        lists["graph"] = await self._graph_source(plan, lists)
        defines, qualified_defines = self._defines_source(plan, exact, sparse)
        lists["defines"] = defines
        # a definer of a qualified name holds it as its page writes it (the qualifier in
        # the title or headings): it counts in the exact vote too, as a verbatim one does
        lists["exact"] = [*exact, *qualified_defines]
        fused = stable_fusion(lists, plan.weights, plan.k, request.fusion, plan.head_pool)
        shaped = await self._shape(request, fused)
        if plan.flt is not None and not plan.flt.allowed:
            shaped.warnings.extend(plan.flt.hints)  # why nothing came back
        return self._respond(request, shaped, lists)

    def _plan(self, request: QueryRequest) -> _Plan:
        cfg, params = self.settings, request.hybrid_params
        dense_w = cfg.dense_weight if params.dense_weight is None else params.dense_weight
        sparse_w = cfg.sparse_weight if params.sparse_weight is None else params.sparse_weight
        graph_w = cfg.graph_weight if request.graph_weight is None else request.graph_weight
        if self.expander is None:
            graph_w = 0.0
        identifiers, share = self.analyzer.identifiers(request.search_text)
        exact_w = sparse_w * cfg.exact_boost
        if exact_w <= 0 or share < cfg.exact_min_share or not identifiers:
            identifiers, exact_w = [], 0.0
        boost = cfg.feedback_boost if params.feedback_boost is None else params.feedback_boost
        # a query of identifiers (the exact vote is cast) names what it wants: no feedback
        feedback_w = 0.0 if identifiers else dense_w * boost
        pool = pool_size(cfg, request.top_k)
        limits = request.candidate_limits or CandidateLimits()
        return _Plan(
            text=request.search_text,
            flt=self.resolve_filter(request.metadata_filter),
            weights={
                "sparse": sparse_w,
                "dense": dense_w,
                "feedback": feedback_w,
                "exact": exact_w,
                "defines": exact_w,
                "graph": graph_w,
            },
            k=cfg.rrf_k if params.rrf_k_constant is None else params.rrf_k_constant,
            sparse_pool=limits.sparse or pool,
            dense_pool=limits.dense or pool,
            identifiers=tuple(identifiers),
            head_pool=min(limits.sparse or pool, limits.dense or pool, pool_size(cfg, 1)),
            feedback_passages=cfg.feedback_passages if feedback_w > 0 else 0,
        )

    # -- sources: each takes the plan (with its filter) and returns a ranked list --------

    async def _sparse_source(self, plan: _Plan) -> Ranked:
        """BM25 over the chunks the filter admits."""
        if plan.weights["sparse"] <= 0:
            return []
        return await self._in_thread(self._sparse_search, plan.text, plan.sparse_pool, plan.flt)

    async def _dense_source(self, plan: _Plan) -> tuple[Ranked, Ranked]:
        """The dense list and the feedback list, each within the filter.

        The feedback list holds the chunks nearest to the query moved toward its best
        passages (:mod:`retrieval.feedback`); it is empty when feedback is off.
        """
        if plan.weights["dense"] <= 0:
            return [], []
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            self.embed_executor,
            self._dense_search,
            plan.text,
            plan.dense_pool,
            plan.flt,
            plan.feedback_passages,
        )

    async def _exact_source(self, plan: _Plan) -> Ranked:
        """Chunks holding every identifier of the query verbatim (see the module docstring)."""
        if plan.weights["exact"] <= 0:
            return []
        return await self._in_thread(
            self._sparse_search, plan.text, plan.sparse_pool, plan.flt, list(plan.identifiers)
        )

    def _defines_source(self, plan: _Plan, exact: Ranked, sparse: Ranked) -> tuple[Ranked, Ranked]:
        """Of the chunks holding the query's identifiers, those that define one.

        A page titled by the identifier, then a definition-list term, a table row's first
        cell or a heading naming it (:mod:`retrieval.defines`): a third vote, so the place
        that defines a setting or function ranks above pages that merely mention it. A
        qualified name (``CharSequenceUtils.toCharArray``) is also defined by a keyword
        result whose defining place names the member under a page or heading naming the
        qualifier (:func:`~retrieval.defines.defines_member`): the class page's heading
        ``toCharArray``, which never writes the whole name, before the source file of
        another class that calls it. Returns the list, and those qualified definers.
        """
        if not plan.identifiers:
            return [], []
        wanted = set(plan.identifiers)
        members = [parts for parts in map(qualified, plan.identifiers) if parts is not None]
        holding = {row for row, _ in exact}
        # within the head of the keyword list, a pool that does not grow with top_k: a
        # definer found deeper only for a larger top_k would reorder the first results
        head = sparse[: plan.head_pool] if members else []
        others = [(row, score) for row, score in head if row not in holding]
        if not exact and not others:
            return [], []
        chunks = self.store.chunks_by_row_ids([row for row, _ in [*exact, *others]])
        # a page whose title is the identifier defines it, before a list of them
        # elsewhere (git-write-tree(1) itself, then git(1)'s list of commands)
        titled: list[tuple[int, float]] = []
        defining: list[tuple[int, float]] = []
        for row, score in exact:
            chunk = chunks.get(row)
            if chunk is None:
                continue
            if named_by(self.analyzer, chunk.title, wanted):
                titled.append((row, score))
            elif wanted & defined_terms(self.analyzer, chunk.text, chunk.heading):
                defining.append((row, score))
        members_defined = [
            (row, score)
            for row, score in others
            if (chunk := chunks.get(row)) is not None
            and any(
                defines_member(chunk.title, chunk.text, chunk.heading, *parts) for parts in members
            )
        ]
        return titled + members_defined + defining, members_defined

    async def _graph_source(self, plan: _Plan, lists: Mapping[str, Ranked]) -> Ranked:
        """Chunks reached through the graph from the best of a first fusion, filtered."""
        if plan.weights["graph"] <= 0 or self.expander is None:
            return []
        cut = {name: hits[: plan.head_pool] for name, hits in lists.items()}
        seeds = [
            row for row, _ in fuse(cut, plan.weights, plan.k, "rrf")[: self.settings.graph_seeds]
        ]
        limit = max(plan.sparse_pool, plan.dense_pool)
        return await self._in_thread(self.expander.rank, plan.text, seeds, limit, plan.flt)

    # -- respond ---------------------------------------------------------------------------

    def _respond(
        self, request: QueryRequest, shaped: _Shaped, lists: Mapping[str, Ranked]
    ) -> QueryResponse:
        top, chunks = self._folded(shaped.rows, request.top_k)
        ranks = {name: _ranks(hits) for name, hits in lists.items()}
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
                    **{n: ranks[n].get(row) for n in ranks if n in EngineRanks.model_fields}
                ),
                rerank_score=shaped.rerank_scores.get(row),
                duplicates=[
                    Duplicate(
                        chunk_id=chunks[copy].id,
                        document_id=chunks[copy].document_id,
                        source=chunks[copy].source,
                        title=chunks[copy].title,
                    )
                    for copy in copies
                ],
            )
            for row, score, copies in top
            if (chunk := chunks.get(row)) is not None
        ]
        return QueryResponse(
            query_id=request.query_id or uuid.uuid4().hex,
            results=results,
            fusion=request.fusion,
            reranker=shaped.reranker,
            warnings=shaped.warnings,
        )

    def _folded(
        self, rows: list[tuple[int, float]], top_k: int
    ) -> tuple[list[tuple[int, float, list[int]]], dict[int, StoredChunk]]:
        """The first ``top_k`` results (row, score, rows of their copies) and their chunks.

        With ``fold_duplicates`` the same passage in another document is folded into the
        result above it (:func:`~retrieval.shaping.fold_duplicates`); the rows read grow
        until ``top_k`` results are found or the list ends.
        """
        chunks: dict[int, StoredChunk] = {}
        if not self.settings.fold_duplicates:
            first = rows[:top_k]
            chunks.update(self.store.chunks_by_row_ids([row for row, _ in first]))
            return [(row, score, []) for row, score in first], chunks
        size = 2 * top_k
        read = 0  # rows whose chunks were asked for (a deleted one has none)
        while True:
            window = rows[:size]
            chunks.update(self.store.chunks_by_row_ids([row for row, _ in window[read:]]))
            read = len(window)
            present = [(row, score) for row, score in window if row in chunks]
            groups = fold_duplicates(
                [(chunks[r].document_id, chunks[r].heading, chunks[r].text) for r, _ in present],
                top_k,
            )
            if len(groups) >= top_k or len(window) == len(rows):
                break
            size *= 2
        top = [(present[g[0]][0], present[g[0]][1], [present[i][0] for i in g[1:]]) for g in groups]
        return top, chunks

    async def _shape(self, request: QueryRequest, fused: list[tuple[int, float]]) -> _Shaped:
        """Rerank the head, diversify (MMR), apply the relative cut-off; best first."""
        shaped = _Shaped(rows=list(fused))
        wants_rerank = request.rerank if request.rerank is not None else self.reranker is not None
        if wants_rerank and fused:
            await self._rerank(request.search_text, shaped)
        diversity = self.settings.diversity if request.diversity is None else request.diversity
        if diversity > 0 and shaped.rows:
            head = shaped.rows[: max(pool_size(self.settings, 1), request.top_k)]
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
        head = shaped.rows[: self.rerank_settings.top_n]
        chunks = self.store.chunks_by_row_ids([row for row, _ in head])
        head = [(row, score) for row, score in head if row in chunks]
        passages = [chunks[row].text for row, _ in head]
        call = asyncio.get_running_loop().run_in_executor(
            self.embed_executor, self.reranker.rerank, text, passages
        )
        try:
            scores = await asyncio.wait_for(call, self.rerank_settings.timeout_s)
        except TimeoutError:
            shaped.warnings.append(
                f"reranker {self.reranker.name} timed out after "
                f"{self.rerank_settings.timeout_s:g} s; results are in fused order"
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
    ) -> Ranked:
        with self.guard.read():
            return self.sparse.search(text, pool, flt, require or ())

    def _dense_search(
        self, text: str, pool: int, flt: ResolvedFilter | None, passages: int = 0
    ) -> tuple[Ranked, Ranked]:
        """The dense list, and the feedback list (none when ``passages`` is 0).

        The feedback query moves toward the first ``passages`` of the dense list; both
        searches keep to the filter and share one embedding of the query.
        """
        with self.guard.read():
            if len(self.dense) == 0:
                return [], []
        vector = self.embedder.embed_query(text)
        with self.guard.read():
            hits = self.dense.search(vector, pool, flt)
            if passages <= 0 or not hits:
                return hits, []
            seeds = self.dense.vectors([row for row, _ in hits[:passages]])
            return hits, self.dense.search(feedback_query(vector, seeds), pool, flt)

    def search_sync(self, request: QueryRequest) -> QueryResponse:
        """Blocking wrapper for the CLI and benchmarks."""
        return run_sync(lambda: self.search(request))


@dataclass
class _Shaped:
    rows: list[tuple[int, float]]
    rerank_scores: dict[int, float] = field(default_factory=dict)
    reranker: str | None = None
    warnings: list[str] = field(default_factory=list)
