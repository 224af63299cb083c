"""``ask``: route a question, gather its context, write the answer.

The steps are separate roles so an LLM can replace any of them: the
:class:`~retrieval.router.RouteClassifier` (route), the
:class:`~retrieval.keypoints.KeyPointMapper` inside global search (map), and the
:class:`~retrieval.answer.AnswerWriter` (answer). Offline each has a deterministic
implementation; :class:`Asker` only wires them together.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from graph.store import GraphStore
from lore.settings import AskSettings
from lore.store import Store
from retrieval.answer import AnswerWriter, Evidence, stuff_chunks
from retrieval.ask_contract import AskDetails, AskRequest, AskResponse
from retrieval.contract import HybridParams, QueryRequest, QueryResult
from retrieval.global_search import GlobalResult, GlobalSearcher, chunk_relevance
from retrieval.hybrid import HybridSearcher
from retrieval.keypoints import KeyPoint, TokenCounter
from retrieval.router import (
    Mode,
    RouteClassifier,
    RouteContext,
    RouteDecision,
    choose_route,
    collection_terms,
)

RECOLLECT_EVERY = 100
"""The collection's title terms are read again after a hundredth more changes."""


@dataclass
class Asker:
    """Wires router, local search, global search and the answer writer together."""

    searcher: HybridSearcher
    global_searcher: GlobalSearcher
    graph: GraphStore
    store: Store
    counter: TokenCounter
    classifier: RouteClassifier
    writer: AnswerWriter
    settings: AskSettings
    """Service-wide defaults a request may override."""
    _collection: tuple[int, dict[str, float]] = field(default=(-1, {}), init=False, repr=False)

    def route_context(
        self, question: str, has_filters: bool, local: Sequence[QueryResult] = ()
    ) -> RouteContext:
        """What the router may know besides the question.

        Filters, graph entities named and their coverage, what the local search found
        (``local``, best first; empty when not searched) and the collection's title terms.
        """
        entities: list[tuple[str, float]] = []
        extracted = self.graph.counts()["extracted_chunks"]
        if self.searcher.expander is not None and extracted:
            keys = self.searcher.expander.query_entities(question)
            postings = self.graph.chunks_of_entities(keys)
            entities = [(key, len(postings.get(key, ())) / extracted) for key in keys]
        return RouteContext(
            has_filters=has_filters,
            entities=entities,
            graph_ready=self.graph_ready(),
            local=tuple(local),
            collection=self.collection() if local else {},  # weighed with a search only
        )

    def collection(self) -> dict[str, float]:
        """The terms in most document titles (the collection's subject).

        Every title is read again once the store's change sequence has moved on by more
        than a hundredth of where it stood at the last reading (at once while the store is
        small; after a restore, which moves it back): a share of titles barely moves with
        a few documents, and a busy server that read every title after each write paid
        for the whole corpus on the next question.
        """
        seq = self.store.last_seq()
        read_at = self._collection[0]
        if read_at < 0 or seq < read_at or seq - read_at > read_at // RECOLLECT_EVERY:
            titles = [doc.title for doc in self.store.list_documents()]
            self._collection = (seq, collection_terms(titles, self.searcher.analyzer))
        return self._collection[1]

    def local_request(self, request: AskRequest) -> QueryRequest:
        """The local search an answer reads (and the ``auto`` router weighs)."""
        return QueryRequest(
            search_text=request.question,
            top_k=request.top_k or self.settings.local_top_k,
            metadata_filter=request.filters,
            diversity=self.settings.local_diversity,
        )

    async def route(
        self,
        question: str,
        mode: Mode,
        has_filters: bool,
        local: Sequence[QueryResult] | None = None,
    ) -> RouteDecision:
        """The route for a question: classified, then forced / fallen back as needed.

        In ``auto`` mode the router weighs what the local search finds; ``local`` passes
        results already searched (without it the question is searched here, unfiltered).
        A forced mode is the caller's decision: the classifier is not asked (an LLM
        classifier would cost a call) and no cue is weighed; only the fallback to local
        when the graph has no reports still applies.
        """
        if mode != "auto":  # the caller decided: no cue is weighed, no classifier asked
            ready = RouteContext(has_filters=has_filters, graph_ready=self.graph_ready())
            return choose_route(mode, RouteDecision(decision=mode, classifier="caller"), ready)
        if local is None:
            searched = await self.searcher.search(self.local_request(AskRequest(question=question)))
            local = searched.results
        context = self.route_context(question, has_filters, local or ())
        classified = await self.classifier.classify(question, context)
        return choose_route(mode, classified, context)

    def graph_ready(self) -> bool:
        """Whether the graph has communities (their reports answer global questions)."""
        return self.graph.hierarchy_stats()[0] > 0  # stored counters: no table is counted

    async def ask(self, request: AskRequest) -> AskResponse:
        """Answer one question (see the module docstring)."""
        try:
            return await self._ask(request)
        finally:  # a snapshot of the global view read for it is written once it is answered
            self.global_searcher.answered()

    async def _ask(self, request: AskRequest) -> AskResponse:
        flt = self.searcher.resolve_filter(request.filters)  # bad filters fail early
        mode = request.mode or self.settings.mode
        budget = request.budget or self.settings.budget_tokens
        # a global question's reports are read while the local engines search
        preparing = (
            self.global_searcher.prepare(budget, request.level) if mode == "global" else None
        )
        # auto: search locally first; the router weighs the results, a local route reuses them
        searched = (
            await self.searcher.search(self.local_request(request)) if mode == "auto" else None
        )
        route = await self.route(
            request.question, mode, flt is not None, searched.results if searched else None
        )
        warnings: list[str] = []
        chunks: list[QueryResult] = []
        local_tokens = 0
        found: GlobalResult | None = None
        if route.decision in ("local", "both"):
            response = searched or await self.searcher.search(self.local_request(request))
            warnings.extend(response.warnings)
            chunks, local_tokens = stuff_chunks(response.results, budget, self.counter)
        if route.decision in ("global", "both"):
            allowed = None
            if flt is not None:  # the filter's chunks, read by row: not the whole corpus
                allowed = self.store.chunk_ids_of_rows(flt.allowed)
            if preparing is None:
                preparing = self.global_searcher.prepare(budget, request.level)
            focus = await self.focus(request, searched.results if searched else None)
            await preparing
            found = await self.global_searcher.search(
                request.question,
                budget_tokens=budget,
                reduce_tokens=self.settings.reduce_tokens,
                batch_tokens=self.settings.map_batch_tokens,
                level=request.level,
                allowed_chunks=allowed,
                relevance=focus[0] if focus else None,
            )
            warnings.extend(found.warnings)
            if focus is not None:  # the pages the reports leave out, by their best passage
                shown = {c.chunk_id for c in chunks}
                missing = uncovered(focus[1], focus[0], found.points)
                extra, tokens = stuff_chunks(
                    [hit for hit in missing if hit.chunk_id not in shown],
                    self.settings.reduce_tokens,
                    self.counter,
                )
                chunks += extra
                local_tokens += tokens
            if flt is not None and not flt.allowed:
                warnings.extend(w for w in flt.hints if w not in warnings)
        points = found.points if found else []
        cited = sorted({c for p in points for c in p.chunk_ids})
        written = await self.writer.write(
            Evidence(
                question=request.question,
                decision=route.decision,
                chunks=chunks,
                points=points,
                sources=self.sources(cited),
                max_tokens=request.max_answer_tokens or self.settings.answer_max_tokens,
            )
        )
        details = AskDetails(
            local_tokens=local_tokens,
            chunks_used=len(chunks),
            answer_writer=self.writer.name,
        )
        if found is not None:
            details.map_tokens = found.map_tokens
            details.reduce_tokens = found.reduce_tokens
            details.level = found.level
            details.reports_in_view = found.reports_in_view
            details.reports_mapped = found.reports_mapped
            details.points_mapped = found.points_mapped
            details.mapper = (
                self.global_searcher.mapper.name if self.global_searcher.mapper else "extractive"
            )
        return AskResponse(
            mode=route.decision,
            route=route,
            answer=written.text,
            citations=written.citations,
            context_tokens=local_tokens + (found.context_tokens if found else 0),
            extractive=written.extractive,
            details=details,
            warnings=warnings,
        )

    async def focus(
        self, request: AskRequest, local: Sequence[QueryResult] | None = None
    ) -> tuple[dict[str, float], list[QueryResult]] | None:
        """The passages the local engines find for a global question (``ask.focus_chunks``).

        Their relevance (chunk id → (0, 1]) and the engines' results. Global search reads
        only the communities holding them and keeps only the key points resting on them
        (:mod:`retrieval.global_search`, "Focus"); None: off. The pages a local answer to
        the same question cites (``local``: its passages, searched here when not given)
        are never left out of the focus: a global answer reads at least the pages a local
        one would (within its reduce and answer bounds).
        """
        if not self.settings.focus_chunks:
            return None
        if local is None:  # first: the pool's search then reuses the question's embedding
            local = (await self.searcher.search(self.local_request(request))).results
        pool = await self.searcher.search(
            QueryRequest(
                search_text=request.question,
                top_k=self.settings.focus_chunks,
                metadata_filter=request.filters,
                diversity=0.0,
                # a corpus-wide question wants breadth: the dense feedback list would pull
                # the passages toward its first few (retrieval.feedback), so it is off here
                hybrid_params=HybridParams(feedback_boost=0.0),
            )
        )
        relevance = chunk_relevance(
            [(r.chunk_id, r.document_id, r.rrf_score) for r in pool.results],
            keep={hit.document_id for hit in local},
        )
        return relevance, pool.results

    def sources(self, chunk_ids: list[str]) -> dict[str, str]:
        """Chunk id → source, for the chunks key points cite."""
        rows = self.store.row_ids_of_chunk_ids(chunk_ids)
        chunks = self.store.chunks_by_row_ids(list(rows.values()))
        return {chunk.id: chunk.source for chunk in chunks.values()}


def uncovered(
    pool: Sequence[QueryResult], relevance: Mapping[str, float], points: Sequence[KeyPoint]
) -> list[QueryResult]:
    """The best passage of each focused page no key point cites, best page first.

    A page the engines found relevant but no community report speaks for (its chunks
    name no entity, or its community's points fell below the reduce step's cut) would
    be missing from a global answer; its best passage stands in for it.
    """
    document_of = {hit.chunk_id: hit.document_id for hit in pool}
    cited = {document_of[c] for point in points for c in point.chunk_ids if c in document_of}
    out: list[QueryResult] = []
    for hit in pool:
        if hit.chunk_id in relevance and hit.document_id not in cited:
            out.append(hit)
            cited.add(hit.document_id)
    return out
