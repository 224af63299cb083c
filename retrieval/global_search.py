"""Global search: map-reduce over community reports for corpus-wide questions.

1. **Level.** The hierarchy's view at level L is every report of level L plus the leaf
   reports of shallower levels (a community too small to be split has no children).
   Unless the caller names a level, the deepest view whose reports fit the budget is
   taken — the most detailed one a model could read whole — and when none fits, the
   deepest (its reports are the most specific; relevance cuts it to the budget).
2. **Relevance.** The view's reports are ranked against the question by
   :func:`~retrieval.report_ranking.rank_reports` (BM25 over the reports and, dense,
   each report's statement closest to the question: :func:`best_statements`; fused by
   RRF) and read best first until the budget is spent. The statement vectors come from
   :class:`~retrieval.report_vectors.ReportVectorIndex`, written with the reports: a
   question costs one query embedding, not one per report.
   **Focus.** When the caller passes ``relevance`` — the chunks the local engines rank
   for the question (:func:`chunk_relevance`; ``ask`` does) — a community is chosen by how
   well its *content* answers the question, not only by its report's wording: the
   relevance of the chunks it covers (:func:`content_order`) is fused with the report
   ranking, and only communities holding a relevant chunk are read. The key points then
   cite only the relevant chunks they rest on, and a point resting on none is dropped
   (:func:`focus_points`). A report summarises a whole community, so its wording drifts
   to whatever the community is mostly about (front matter, tables of contents); the
   local engines test relevance on the passages themselves at question time, as
   LazyGraphRAG does, with the summaries as the map.
   With lazy reports (``graph.reports = lazy``) the picked reports the LLM has not
   summarised yet are rewritten by it now (:mod:`graph.lazy_reports`), once.
3. **Map.** Batches of reports go to a :class:`~retrieval.keypoints.KeyPointMapper`
   (offline: scored statements; later, one LLM call per batch, bounded by a semaphore).
4. **Reduce.** The best key points within the reduce budget, duplicates merged and
   spread over as many communities as fit (:func:`~retrieval.keypoints.reduce_key_points`),
   become the answer's context.

Tokens are counted with the embedding model's word pieces: ``map_tokens`` is the report
text the map step read, ``reduce_tokens`` the key points the reduce step kept.
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from graph.communities import Community
from graph.models import CommunityReport
from graph.store import CommunityReader
from lore.embedders import Embedder, Matrix
from lore.errors import InvalidRequestError
from lore.memory import paused_gc
from retrieval.analyzer import Analyzer
from retrieval.fusion import weighted_rrf
from retrieval.keypoints import (
    ExtractiveKeyPointMapper,
    HybridScorer,
    KeyPoint,
    KeyPointMapper,
    ReportTerms,
    TokenCounter,
    frequencies_of,
    reduce_key_points,
    report_text,
)
from retrieval.report_ranking import ReportBM25, rank_reports
from retrieval.report_vectors import ReportVectorIndex, statements
from retrieval.view_snapshot import SnapshotKey, ViewSnapshots, code_key

DOCUMENT_SHARE = 0.15
"""A document's share of the best document's relevance below which a focus leaves it out."""
RRF_K = 60
CONTENT_WEIGHT = 2.0
"""Weight of the content ranking against the report-text ranking (weight 1) in RRF."""
POINT_RELEVANCE = 0.5
"""Share of a key point's score that follows the relevance of the chunks it rests on."""


@dataclass(frozen=True)
class GlobalResult:
    """What global search read and kept for one question."""

    level: int | None
    points: list[KeyPoint]
    map_tokens: int
    reduce_tokens: int
    reports_in_view: int
    reports_mapped: int
    points_mapped: int
    warnings: list[str] = field(default_factory=list)

    @property
    def context_tokens(self) -> int:
        """Everything the map and reduce steps read."""
        return self.map_tokens + self.reduce_tokens


def level_views(
    reports: Sequence[CommunityReport], communities: Sequence[Community]
) -> dict[int, list[CommunityReport]]:
    """Level → the reports that cover the graph at that depth (see the module docstring)."""
    parents = {c.parent for c in communities if c.parent is not None}
    levels = sorted({r.level for r in reports})
    views: dict[int, list[CommunityReport]] = {}
    for level in levels:
        views[level] = [
            r
            for r in reports
            if r.level == level or (r.level < level and r.community_id not in parents)
        ]
    return views


@dataclass(frozen=True)
class StatementMatrix:
    """A view's statement vectors, stacked once per view.

    ``rows[starts[i]:starts[i] + counts[i]]`` are the statements of the i-th report
    (none: count 0).

    Built when the view is first read and kept with its scorer, so a question costs one
    matrix product and a segmented argmax, not a restack of every statement vector.
    """

    rows: Matrix
    starts: np.ndarray
    counts: np.ndarray
    segment: np.ndarray = field(init=False, repr=False)  # report of each row

    def __post_init__(self) -> None:
        segment = np.repeat(np.arange(len(self.counts)), self.counts)
        object.__setattr__(self, "segment", segment)

    @classmethod
    def of(cls, scorer: HybridScorer, view: Sequence[CommunityReport]) -> StatementMatrix:
        """Stack the statement vectors of every report of ``view``, in view order."""
        said = [statements(r) for r in view]
        counts = np.fromiter((len(t) for t in said), dtype=np.int64, count=len(said))
        starts = np.concatenate(([0], np.cumsum(counts)[:-1])).astype(np.int64)
        rows = scorer.vectors([t for texts in said for t in texts])
        return cls(rows, starts, counts)

    def best(self, query: Matrix) -> Matrix:
        """Per report, the vector of its statement closest to ``query`` (zeros: none)."""
        out = np.zeros((len(self.counts), self.rows.shape[1]), dtype=np.float32)
        filled = np.flatnonzero(self.counts)
        if not len(filled):
            return out
        cosines = self.rows @ query
        # each report's best row: the first of its rows holding its largest cosine
        best = np.maximum.reduceat(cosines, self.starts[filled])
        at_best = np.flatnonzero(cosines == np.repeat(best, self.counts[filled]))
        _, first = np.unique(self.segment[at_best], return_index=True)
        out[filled] = self.rows[at_best[first]]
        return out


def best_statements(scorer: HybridScorer, view: Sequence[CommunityReport], query: Matrix) -> Matrix:
    """Per report, the vector of its statement closest to the question (zeros: none).

    A report is as relevant as the best thing it says: ranking by the closest statement
    beat one vector of the whole report text (gold passages covered by the top 10
    reports on 2Wiki, 926 relevant + 800 other reports of the deepest view: 0.970 vs
    0.950, MRR 0.985 vs 0.973), and the whole texts need not be embedded at all.
    """
    return StatementMatrix.of(scorer, view).best(query)


def choose_level(view_tokens: Mapping[int, int], budget_tokens: int) -> int:
    """The deepest level whose whole view fits the budget, else the deepest level.

    When nothing fits, relevance ranking cuts the view to the budget anyway, and the
    deepest view's reports are the most specific, so the cut keeps what matters.
    """
    fitting = [level for level, tokens in view_tokens.items() if tokens <= budget_tokens]
    return max(fitting) if fitting else max(view_tokens)


def pick_within_budget(
    ranked: Sequence[CommunityReport],
    tokens: Mapping[str, int],
    budget_tokens: int,
    floor: Mapping[str, int] | None = None,
) -> list[CommunityReport]:
    """Reports in ranked order while they fit; one too large is skipped, not the rest.

    ``floor`` (a lower bound of each report's tokens, cheap to know) skips a report that
    cannot fit without asking ``tokens`` for its exact count.
    """
    picked: list[CommunityReport] = []
    used = 0
    for report in ranked:
        if floor is not None and used + floor[report.community_id] > budget_tokens:
            continue
        cost = tokens[report.community_id]
        if used + cost <= budget_tokens:
            picked.append(report)
            used += cost
    return picked


class ReportSizes(Mapping[str, int]):
    """Word pieces of reports by community id, counted only when a decision needs them.

    Counting every report of a large graph costs seconds in a fresh process (thousands
    of tokenizer calls) while a question maps a few dozen. A report's words are a floor
    of its word pieces and its characters a ceiling, so a level whose floor already
    passes the budget, or whose ceiling fits it, is decided without counting
    (:meth:`level_tokens`), and :func:`pick_within_budget` skips by the floor.
    """

    def __init__(
        self,
        reports: Sequence[CommunityReport],
        count: Callable[[CommunityReport], int],
        bounds: dict[tuple[str, str], tuple[int, int]] | None = None,
    ) -> None:
        """``bounds`` may be a cache kept across questions, by (community, fingerprint)."""
        self._reports = {r.community_id: r for r in reports}
        self._count = count
        self._exact: dict[str, int] = {}
        self._bounds = {} if bounds is None else bounds

    def __getitem__(self, community_id: str) -> int:
        if community_id not in self._exact:
            self._exact[community_id] = self._count(self._reports[community_id])
        return self._exact[community_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._reports)

    def __len__(self) -> int:
        return len(self._reports)

    def bounds(self, community_id: str) -> tuple[int, int]:
        """(floor, ceiling) of a report's word pieces: its words, its characters."""
        report = self._reports[community_id]
        key = (community_id, report.fingerprint)
        if key not in self._bounds:
            text = report_text(report)
            self._bounds[key] = (len(text.split()), len(text))
        return self._bounds[key]

    def floors(self) -> Mapping[str, int]:
        """Every report's floor, each worked out when first asked for."""
        return _Floors(self)

    def level_tokens(self, view: Sequence[CommunityReport], budget_tokens: int) -> int:
        """A view's tokens, exact where it matters: as :func:`choose_level` compares them.

        A floor when even it passes the budget (of the reports it took to pass it: a
        large graph's deep views are decided by their first few hundred reports), the
        ceiling when even it fits, else the exact sum.
        """
        ids = [r.community_id for r in view]
        low = 0
        for community_id in ids:
            low += self.bounds(community_id)[0]
            if low > budget_tokens:
                return low
        high = sum(self.bounds(c)[1] for c in ids)
        return high if high <= budget_tokens else sum(self[c] for c in ids)


class _Floors(Mapping[str, int]):
    """:meth:`ReportSizes.floors`: a report's floor, worked out when asked for."""

    def __init__(self, sizes: ReportSizes) -> None:
        self._sizes = sizes

    def __getitem__(self, community_id: str) -> int:
        return self._sizes.bounds(community_id)[0]

    def __iter__(self) -> Iterator[str]:
        return iter(self._sizes)

    def __len__(self) -> int:
        return len(self._sizes)


def batches(
    reports: Sequence[CommunityReport], tokens: Mapping[str, int], batch_tokens: int
) -> list[list[CommunityReport]]:
    """Consecutive groups of reports of at most ``batch_tokens`` (one report at least)."""
    out: list[list[CommunityReport]] = []
    current: list[CommunityReport] = []
    used = 0
    for report in reports:
        cost = tokens[report.community_id]
        if current and used + cost > batch_tokens:
            out.append(current)
            current, used = [], 0
        current.append(report)
        used += cost
    if current:
        out.append(current)
    return out


@dataclass(frozen=True)
class _Positions:
    """A view's reports by id (their index in it), and by the chunks they hold."""

    index: dict[str, int]
    holders: dict[str, list[int]]


_Scorer = tuple[HybridScorer, ReportBM25, StatementMatrix]
"""A view's statement scorer (IDF over the view), report BM25 and stacked statements."""

_Patch = tuple[list[CommunityReport], list[str]]
"""The reports a patched view read again, and the ids gone from it."""
_Changed = Literal[True] | _Patch | None
"""What a new read of the view changed: nothing, everything, or a patch."""


@dataclass(frozen=True)
class _View:
    """Every report, the level views and the hierarchy, as of one graph generation."""

    generation: object
    reports: list[CommunityReport]
    views: dict[int, list[CommunityReport]]
    communities: list[Community]


@dataclass
class GlobalSearcher:
    """Answers corpus-wide questions from the graph's community reports."""

    graph: CommunityReader
    analyzer: Analyzer
    embedder: Embedder
    counter: TokenCounter
    mapper: KeyPointMapper | None = None  # None: the offline extractive mapper
    executor: Executor | None = None
    vectors: ReportVectorIndex | None = None  # None: report texts embedded on demand
    # lazy reports: rewrites the picked reports the LLM has not summarised yet
    upgrade: Callable[[Sequence[CommunityReport]], list[CommunityReport]] | None = None
    # the view kept on disk for the next process (None: every process builds its own)
    snapshots: ViewSnapshots | None = None
    _tokens: dict[tuple[str, str], int] = field(default_factory=dict, init=False)
    # (floor, ceiling) of each report's word pieces, kept across questions (ReportSizes)
    _bounds: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict, init=False)
    _scorers: dict[int, _Scorer] = field(default_factory=dict, init=False)
    _vectors: OrderedDict[str, Matrix] = field(default_factory=OrderedDict, init=False)
    _view: _View | None = field(default=None, init=False)
    _view_lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    # one reader of the view at a time: a question that arrives while another (or its
    # own :meth:`prepare`) reads it waits for that read and finds it cached
    _ready_lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    # per view (by identity: a view is replaced, never changed): the sizes for a budget
    # (views, budget, sizes, tokens per level, floors), the scorer's key, the positions
    _sized: tuple[object, int, ReportSizes, dict[int, int], Mapping[str, int]] | None = field(
        default=None, init=False
    )
    _keyed: tuple[object, int] | None = field(default=None, init=False)
    _positions_of: tuple[object, _Positions] | None = field(default=None, init=False)
    # a view was read whole (or from a snapshot behind the store): write the snapshot
    _snapshot_due: bool = field(default=False, init=False)
    # the view came from a snapshot: the report vector index has not read the store yet
    _vectors_partial: bool = field(default=False, init=False)
    _saving: threading.Thread | None = field(default=None, init=False)  # the snapshot's write
    # a snapshot's write waiting for the question that read the view to be answered
    _pending: Callable[[], None] | None = field(default=None, init=False)
    _pending_lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    # the snapshots' forget count when the view was last read from the store or disk
    _read_epoch: int | None = field(default=None, init=False)
    # the forget count when this process last wrote back a snapshot a delete removed
    _put_back_at: int | None = field(default=None, init=False)
    # the graph store's count of deletes that changed reports (on any host), read before
    # the view was last read; None: a store that keeps no such count
    _read_forgotten: int | None = field(default=None, init=False)

    def reports_view(
        self,
    ) -> tuple[list[CommunityReport], dict[int, list[CommunityReport]], _Changed]:
        """Every report and the level views, read once per graph generation.

        A store that tells its generation (``generation()``) is read again only after a
        write of its communities or reports; one that also tells which communities a
        write touched (``view_changes``) has the cached view patched with those alone.
        The third value says what changed: nothing (None), everything (True) or the
        reports written and the ids gone (report vectors then catch up with those). A
        store that tells no generation is read per question.
        """
        tell = getattr(self.graph, "generation", None)
        generation = tell() if tell is not None else None
        with self._view_lock:
            cached = self._view
        restored = False
        if cached is None and isinstance(generation, tuple):
            cached = self._restored(generation)  # a new process: the view kept on disk
            restored = cached is not None
            if cached is not None:
                with self._view_lock:
                    self._view = cached
        if generation is not None and cached is not None and cached.generation == generation:
            return cached.reports, cached.views, None
        seen_forgotten = self._read_forgotten
        if self.snapshots is not None and not restored:  # before reading: see _save_snapshot
            self._read_epoch = self.snapshots.epoch()
            self._read_forgotten = self._forgotten()
        patched = self._patched(cached) if generation is not None else None
        changed: _Changed
        if patched is not None:
            view, changed = patched
            # a snapshot behind the store, patched, or one a delete removed (here or on
            # another host): the next process reads this view instead of every report
            self._snapshot_due = self._snapshot_due or (
                changed is not None
                and (restored or self._snapshot_gone() or self._snapshot_stale(seen_forgotten))
            )
        else:
            reports = self.graph.reports()
            communities = self.graph.communities() if reports else []
            view = _View(generation, reports, level_views(reports, communities), communities)
            changed = True
            self._snapshot_due = True
        if generation is not None:
            with self._view_lock:
                self._view = view
        return view.reports, view.views, changed

    def _snapshot_gone(self) -> bool:
        """Whether a delete removed the snapshot since this process last put one back.

        A delete that changes a report's text removes the snapshot (the text it quoted
        must be in no file); a process that keeps its view current by patches writes
        it back, once per delete, so that the next new process does not read the store
        whole. (Once: a folder that cannot be written is not tried at every question.)
        """
        snapshots, epoch = self.snapshots, self._read_epoch
        if snapshots is None or epoch is None or epoch == self._put_back_at:
            return False
        if snapshots.path.exists():
            return False
        self._put_back_at = epoch
        return True

    def _forgotten(self) -> int | None:
        """The graph store's count of deletes that changed reports (None: it keeps none)."""
        tell = getattr(self.graph, "view_forgotten", None)
        return int(tell()) if tell is not None else None

    def _snapshot_stale(self, seen: int | None) -> bool:
        """Whether this host's snapshot predates a delete made elsewhere (then removed).

        A delete removes its own host's snapshot; the file of another host still quotes
        the reports it rewrote. When the graph store's count of such deletes has moved
        since this process last read its view (``seen``) past the count the file
        records, the file is removed at once, and this process's view, patched since,
        is written back in its place.
        """
        snapshots, now = self.snapshots, self._read_forgotten
        if snapshots is None or now is None or seen is None or now == seen:
            return False
        if not snapshots.remove_if_older(now):
            return False
        self._read_epoch = snapshots.epoch()  # this view was read after that delete
        return True

    def _patched(self, cached: _View | None) -> tuple[_View, _Patch | None] | None:
        """The cached view with the communities written since read again (None: can't).

        With it, the patch (the reports read again, the ids gone), or None when the write
        left every report and the hierarchy's shape as they were (a community's members
        changed, say): the view then keeps its lists, and with them its scorer.
        """
        changes = getattr(self.graph, "view_changes", None)
        if cached is None or changes is None or not isinstance(cached.generation, tuple):
            return None
        found = changes(*cached.generation)
        if found is None:
            return None
        now, ids = found
        written = self.graph.reports_by_id(sorted(ids))
        read = self.graph.communities_by_id(sorted(ids))
        communities = [c for c in cached.communities if c.id not in ids]
        communities.extend(read)
        communities.sort(key=lambda c: (c.level, c.cluster))
        before = {r.community_id: r for r in cached.reports if r.community_id in ids}
        shape = {c.id: (c.level, c.parent) for c in cached.communities if c.id in ids}
        if {r.community_id: r for r in written} == before and shape == {
            c.id: (c.level, c.parent) for c in read
        }:
            return _View(now, cached.reports, cached.views, communities), None
        reports = [r for r in cached.reports if r.community_id not in ids]
        reports.extend(written)
        reports.sort(key=lambda r: (r.level, r.community_id))
        gone = sorted(ids - {r.community_id for r in written})
        views = level_views(reports, communities) if reports else {}
        return _View(now, reports, views, communities), (written, gone)

    def report_tokens(self, report: CommunityReport) -> int:
        """Tokens of a report's text (cached by its fingerprint)."""
        key = (report.community_id, report.fingerprint)
        if key not in self._tokens:
            self._tokens[key] = self.counter.count(report_text(report))
        return self._tokens[key]

    def scorer(self, view: Sequence[CommunityReport]) -> _Scorer:
        """Statement scorer (IDF over the view), BM25, stacked statements: cached per view."""
        keyed = self._keyed
        if keyed is not None and keyed[0] is view:
            key = keyed[1]
        else:
            key = hash(tuple((r.community_id, r.fingerprint, r.method, r.title) for r in view))
            self._keyed = (view, key)
        if key not in self._scorers:
            memo: dict[str, list[str]] = {}  # a statement is analysed once, not per use

            def tokens(text: str) -> list[str]:
                found = memo.get(text)
                if found is None:
                    found = memo[text] = self.analyzer.tokens(text)
                return found

            stored: Mapping[str, ReportTerms] = {}
            if self.vectors is not None:
                stored = self.vectors.analysed(view, self.analyzer.config.key())
            analysed = [stored.get(r.community_id) or ReportTerms.of(r, tokens) for r in view]
            df, n = frequencies_of(
                u for r, t in zip(view, analysed, strict=True) for u in t.units(r)
            )
            known = self.vectors.by_text(view) if self.vectors is not None else {}
            scorer = HybridScorer(
                self.analyzer, self.embedder, df, n, cache=self._vectors, known=known
            )
            bm25 = ReportBM25(self.analyzer, (), terms=[t.all() for t in analysed])
            matrix = StatementMatrix.of(scorer, view)
            self._scorers = {key: (scorer, bm25, matrix)}  # one view at a time; vectors outlive it
        return self._scorers[key]

    def rank(
        self,
        question: str,
        view: Sequence[CommunityReport],
        scorer: HybridScorer,
        bm25: ReportBM25,
        matrix: StatementMatrix,
    ) -> list[CommunityReport]:
        """The view's relevant reports, most relevant first (see the module docstring)."""
        query = scorer.query_vector(question)
        ranked = rank_reports(bm25, matrix.best(query), query, question)
        return [view[i] for i, _ in ranked]

    def prepare(self, budget_tokens: int, level: int | None = None) -> asyncio.Future[None]:
        """Start reading the view a question will need, in a thread of its own.

        A fresh process reads every report once (see :meth:`reports_view`); started when
        a question is known to go global, the read runs while the local engines find the
        passages that focus it (model load included), and :meth:`search` finds it done
        or waits for it. A failure here is left for :meth:`search` to raise.
        """

        def read() -> None:
            try:
                self._ready(budget_tokens, level)
            except Exception:  # search reads again and raises it to its caller
                return

        return asyncio.get_running_loop().run_in_executor(None, read)

    def _ready(
        self, budget_tokens: int, level: int | None
    ) -> tuple[ReportSizes, int, list[CommunityReport], _Scorer] | None:
        """The reports' sizes, the level to read, its view and scorer (None: no reports).

        Each is cached (per graph generation, per view): a second call costs lookups.
        A read builds millions of objects that live on with the view: the cyclic
        collector is paused meanwhile (:func:`~lore.memory.paused_gc`).
        """
        with self._ready_lock, paused_gc():
            return self._ready_now(budget_tokens, level)

    def _ready_now(
        self, budget_tokens: int, level: int | None
    ) -> tuple[ReportSizes, int, list[CommunityReport], _Scorer] | None:
        reports, views, changed = self.reports_view()
        if not reports:
            return None
        if level is not None and level not in views:
            raise InvalidRequestError(
                f"no community reports at level {level}; levels: {sorted(views)}"
            )
        sized = self._sized
        if sized is None or sized[0] is not views or sized[1] != budget_tokens:
            tokens = ReportSizes(reports, self.report_tokens, self._bounds)  # counted when needed
            view_tokens = {lv: tokens.level_tokens(v, budget_tokens) for lv, v in views.items()}
            sized = self._sized = (views, budget_tokens, tokens, view_tokens, tokens.floors())
        tokens, view_tokens = sized[2], sized[3]
        chosen = level if level is not None else choose_level(view_tokens, budget_tokens)
        view = views[chosen]
        if (
            self.vectors is not None
            and changed is not None
            and (changed is True or self._vectors_partial)
        ):
            self.vectors.catch_up(reports)  # after a snapshot: the first change reads them all
            self._vectors_partial = False
        elif self.vectors is not None and isinstance(changed, tuple):
            self.vectors.refresh(*changed)
        self._positions(view)  # which report holds which chunk: read with the view
        scored = self.scorer(view)
        if self._snapshot_due:
            self._snapshot_due = False
            self._save_snapshot(view, scored)
        return tokens, chosen, view, scored

    def _snapshot_key(self, generation: tuple[int, int]) -> SnapshotKey:
        return SnapshotKey(
            generation,
            self.embedder.name,
            int(self.embedder.dimension),
            self.analyzer.config.key(),
            code_key(),
            self._read_forgotten or 0,
        )

    def _restored(self, generation: tuple[int, int]) -> _View | None:
        """A new process's view, read from the snapshot on disk (None: none usable).

        Usable when it is of the graph's generation now, or of an earlier one whose
        token the store's view log still holds (its writes since are then patched in by
        :meth:`reports_view`, and the snapshot written again).
        """
        if self.snapshots is None or generation[1] == 0:
            return None
        self._read_epoch = self.snapshots.epoch()
        self._read_forgotten = self._forgotten()
        key = self.snapshots.key()
        if key is None or key.generation[1] == 0:
            return None
        # a file older than a delete made on another host is loaded like any file behind
        # the store: the reports that delete rewrote are patched in, and the file written
        # again from the patched view (the third value of reports_view says so)
        if not key.derived_like(self._snapshot_key(generation)):
            return None
        if key.generation != generation:
            changes = getattr(self.graph, "view_changes", None)
            if changes is None or changes(*key.generation) is None:
                return None
        state = self.snapshots.load(key)
        if state is None:
            return None
        try:
            view = self._install(state)
        except (KeyError, TypeError, ValueError, IndexError):
            return None  # another layout: read the view from the store
        return view

    def _install(self, state: Mapping[str, Any]) -> _View:
        """Put a snapshot's view, scorer and positions in place (see :meth:`_save_snapshot`)."""
        view, keyed, positions = state["view"], state["keyed"], state["positions"]
        df, n, texts, bm25, matrix = state["scorer"]
        if not (
            isinstance(view, _View)
            and isinstance(matrix, StatementMatrix)
            and isinstance(keyed, tuple)
            and isinstance(positions, tuple)
            and isinstance(positions[1], _Positions)
            and len(texts) == len(matrix.rows)
        ):
            raise TypeError("not a view snapshot")
        known: dict[str, Matrix] = {}
        for text, row in zip(texts, matrix.rows, strict=True):
            known.setdefault(text, row)
        scorer = HybridScorer(self.analyzer, self.embedder, df, n, cache=self._vectors, known=known)
        self._scorers = {keyed[1]: (scorer, ReportBM25.restored(self.analyzer, bm25), matrix)}
        self._keyed = keyed
        self._positions_of = positions
        self._bounds.update(state["bounds"])
        self._tokens.update(state["tokens"])
        self._vectors_partial = True
        return view

    def _save_snapshot(self, view: list[CommunityReport], scored: _Scorer) -> None:
        """Keep this view's reports, scorer and positions on disk for the next process.

        Written by a thread of its own once the question that read the view is answered
        (the asker calls :meth:`answered`): pickling 10k reports takes about a second of
        the interpreter, which the answer would otherwise share.
        :meth:`wait_for_snapshot` starts a write still waiting and waits for it (a
        runtime's close does). Everything it pickles is immutable, or copied here.
        """
        current = self._view
        if self.snapshots is None or current is None:
            return
        generation = current.generation
        if not isinstance(generation, tuple) or generation[1] == 0:
            return  # a store without view tokens: a restore could not be told apart
        scorer, bm25, matrix = scored
        snapshots, key, epoch = self.snapshots, self._snapshot_key(generation), self._read_epoch
        forgotten = self._forgotten if self._read_forgotten is not None else None
        state: dict[str, Any] = {
            "view": current,
            "keyed": self._keyed,
            "positions": self._positions_of,
            "bounds": dict(self._bounds),
            "tokens": dict(self._tokens),
        }
        frequencies = dict(scorer.document_frequency)

        def write() -> None:
            # the statement texts in the matrix's row order: the scorer's known vectors
            texts = [text for report in view for text in statements(report)]
            state["scorer"] = (frequencies, scorer.documents, texts, bm25.state(), matrix)
            snapshots.save(key, state, epoch, forgotten)  # not after a delete since the read

        with self._pending_lock:
            self._pending = write  # the latest view's write replaces one not yet started

    def answered(self) -> None:
        """The question is answered: start the snapshot write that waits for it, if any.

        Writes run one at a time, in a thread of their own; this never blocks.
        """
        with self._pending_lock:
            write, self._pending = self._pending, None
            if write is None:
                return
            previous = self._saving

            def in_turn() -> None:  # never blocks the caller (the event loop, often)
                if previous is not None:
                    previous.join()
                write()

            self._saving = threading.Thread(target=in_turn, name="view-snapshot")
            self._saving.start()

    def wait_for_snapshot(self, timeout: float | None = 60.0) -> None:
        """Start a snapshot write still waiting, then wait until it is on disk."""
        self.answered()
        saving = self._saving
        if saving is not None:
            saving.join(timeout)

    def _floors(self, tokens: ReportSizes) -> Mapping[str, int]:
        """Every report's floor (as :meth:`ReportSizes.floors`), kept with the sizes."""
        sized = self._sized
        return sized[4] if sized is not None and sized[2] is tokens else tokens.floors()

    def _positions(self, view: list[CommunityReport]) -> _Positions:
        """Each report's index in ``view``, and the indices of the reports holding a chunk."""
        found = self._positions_of
        if found is not None and found[0] is view:
            return found[1]
        holders: dict[str, list[int]] = {}
        for index, report in enumerate(view):
            for chunk in report.chunk_ids:
                holders.setdefault(chunk, []).append(index)
        positions = _Positions({r.community_id: i for i, r in enumerate(view)}, holders)
        self._positions_of = (view, positions)
        return positions

    async def search(
        self,
        question: str,
        *,
        budget_tokens: int,
        reduce_tokens: int,
        batch_tokens: int,
        level: int | None = None,
        allowed_chunks: set[str] | None = None,
        relevance: Mapping[str, float] | None = None,
    ) -> GlobalResult:
        """Map-reduce the relevant reports of one level (see the module docstring).

        ``relevance`` (chunk id → relevance in (0, 1], :func:`chunk_relevance`) focuses
        the search on the communities and points resting on those chunks.
        """
        loop = asyncio.get_running_loop()
        ready = await loop.run_in_executor(self.executor, self._ready, budget_tokens, level)
        if ready is None:
            return GlobalResult(None, [], 0, 0, 0, 0, 0, ["the graph has no community reports"])
        tokens, chosen, view, (scorer, bm25, matrix) = ready
        ranked = await loop.run_in_executor(
            self.executor, self.rank, question, view, scorer, bm25, matrix
        )
        if relevance:
            positions = self._positions(view)
            order = focused_order(
                [positions.index[r.community_id] for r in ranked],
                content_order(view, relevance, positions.holders),
            )
            ranked = [view[i] for i in order]
        picked = pick_within_budget(ranked, tokens, budget_tokens, self._floors(tokens))
        if self.upgrade is not None:  # a thread of its own: the LLM may take seconds
            picked = await loop.run_in_executor(None, self.upgrade, picked)
            tokens = ReportSizes(picked, self.report_tokens)  # the upgraded reports' own
        mapper = self.mapper or ExtractiveKeyPointMapper(scorer, executor=self.executor)
        mapped = await asyncio.gather(
            *(mapper.map(question, batch) for batch in batches(picked, tokens, batch_tokens))
        )
        points = [p for found in mapped for p in found]
        warnings: list[str] = []
        if relevance:
            focused = focus_points(points, relevance)
            if focused or not points:
                points = focused
            else:
                warnings.append(
                    "no key point rests on a passage the local engines found for the question; "
                    "showing the reports' points unfocused"
                )
        if allowed_chunks is not None:
            points = _restrict(points, allowed_chunks)
            warnings.append("key points restricted to chunks matching the metadata filter")
        kept = reduce_key_points(points, reduce_tokens, self.counter)
        return GlobalResult(
            level=chosen,
            points=kept,
            map_tokens=sum(tokens[r.community_id] for r in picked),
            reduce_tokens=sum(self.counter.count(p.text) for p in kept),
            reports_in_view=len(view),
            reports_mapped=len(picked),
            points_mapped=len(points),
            warnings=warnings,
        )


def chunk_relevance(
    ranked: Sequence[tuple[str, str, float]],
    document_share: float = DOCUMENT_SHARE,
    keep: Collection[str] = (),
) -> dict[str, float]:
    """Chunk id → relevance in (0, 1], for the chunks of the documents a question is about.

    ``ranked`` is the local engines' ranking for the question, best first: (chunk id,
    document id, fused score). A document is as relevant as the passages the engines
    rank in it: the sum of their reciprocal ranks (``1 / (60 + rank)``, as in RRF). A
    document holding less than ``document_share`` of the best document's sum merely
    mentions the question's words in passing; its chunks are left out. The document of
    the engines' first passage always stays: a short page (one chunk, a runbook that
    alone names the question's identifier) cannot gather the sum a long page gathers
    from many passages, and the best passage is not a mention in passing. So do the
    documents in ``keep`` (``ask`` passes the pages a local answer to the same question
    cites: a global answer leaves none of them out). A kept chunk's relevance is its
    fused score relative to the best one.
    """
    mass: dict[str, float] = {}
    for rank, (_, document, _) in enumerate(ranked, start=1):
        mass[document] = mass.get(document, 0.0) + 1.0 / (RRF_K + rank)
    if not mass:
        return {}
    floor = document_share * max(mass.values())
    kept = {ranked[0][1], *keep}
    best = max(score for _, _, score in ranked)
    out: dict[str, float] = {}
    for rank, (chunk, document, score) in enumerate(ranked, start=1):
        if mass[document] >= floor or document in kept:
            out[chunk] = max(score, 0.0) / best if best > 0 else 1.0 / rank
    return out


def content_order(
    view: Sequence[CommunityReport],
    relevance: Mapping[str, float],
    holders: Mapping[str, Sequence[int]] | None = None,
) -> list[tuple[int, float]]:
    """(index into ``view``, relevance of the chunks it covers), for reports holding any.

    A community's content answers the question as well as the relevant passages it
    covers: the sum of their relevance, best first. ``holders`` (chunk id → indices of
    the reports holding it) limits the work to the reports holding a relevant chunk.
    """
    scored = []
    if holders is None:
        candidates: Iterable[int] = range(len(view))
    else:
        candidates = sorted({i for chunk in relevance for i in holders.get(chunk, ())})
    for index in candidates:
        report = view[index]
        mass = sum(relevance.get(chunk, 0.0) for chunk in report.chunk_ids)
        if mass > 0:
            scored.append((index, mass))
    scored.sort(key=lambda item: (-item[1], item[0]))
    return scored


def focused_order(text_ranked: Sequence[int], content: Sequence[tuple[int, float]]) -> list[int]:
    """The reports to read, best first: content and text rankings fused, content-holders only.

    Without any report holding a relevant chunk the text ranking stands alone.
    """
    if not content:
        return list(text_ranked)
    holding = [index for index, _ in content]
    held = set(holding)
    fused = weighted_rrf(
        {"content": holding, "text": [i for i in text_ranked if i in held]},
        {"content": CONTENT_WEIGHT},
    )
    return [index for index, _ in fused]


def focus_points(points: Sequence[KeyPoint], relevance: Mapping[str, float]) -> list[KeyPoint]:
    """Each point citing only the relevant chunks it rests on, most relevant first.

    A point that rests on no relevant chunk does not bear on the question and is
    dropped. A kept point's score moves toward the relevance of its best chunk
    (``POINT_RELEVANCE`` of it), so the passages the engines found first lead.
    """
    out = []
    for point in points:
        chunks = sorted(
            (c for c in point.chunk_ids if relevance.get(c, 0.0) > 0),
            key=lambda c: -relevance[c],
        )
        if not chunks:
            continue
        weight = (1 - POINT_RELEVANCE) + POINT_RELEVANCE * relevance[chunks[0]]
        out.append(
            KeyPoint(
                point.text,
                point.score * weight,
                point.report_id,
                point.report_title,
                tuple(chunks),
                point.also_in,
            )
        )
    return out


def _restrict(points: Sequence[KeyPoint], allowed: set[str]) -> list[KeyPoint]:
    out = []
    for point in points:
        chunks = tuple(c for c in point.chunk_ids if c in allowed)
        if chunks:
            out.append(
                KeyPoint(
                    point.text,
                    point.score,
                    point.report_id,
                    point.report_title,
                    chunks,
                    point.also_in,
                )
            )
    return out
