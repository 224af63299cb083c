"""The map step of global search: community reports in, scored key points out.

With an LLM, each batch of reports is one call that returns key points with importance
scores 0-100 (GraphRAG's map). Offline, :class:`ExtractiveKeyPointMapper` does the same
without a model: every statement of a report (its summary and findings) is scored
against the question with the machinery of hybrid search — the keyword analyzer with
corpus-level IDF on one side, the embedder's cosine similarity on the other — and the
best statements of each report become its key points. Both sides are normalised to
[0, 1] independently of the batch (IDF-weighted share of the question's terms a
statement holds; cosine clipped at 0), so points from different batches compare like an
LLM's scores do. :func:`reduce_key_points` is the pure part of the reduce step.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from itertools import chain
from typing import Protocol

import numpy as np

from graph.models import CommunityReport
from lore.embedders import Embedder, Matrix
from retrieval.analyzer import Analyzer

POINTS_PER_REPORT = 3
VECTOR_CACHE = 50_000
_SPACE = re.compile(r"\s+")
_PUNCT = re.compile(r"[^\w\s]+")


class TokenCounter(Protocol):
    """Counts the tokens of a text (``lore.tokens.WordPieceCounter`` fits)."""

    def count(self, text: str) -> int:
        """Tokens in ``text``."""
        ...


@dataclass(frozen=True, slots=True)
class KeyPoint:
    """One statement relevant to the question, with what it rests on."""

    text: str
    score: float  # 0-100, like an LLM map step's importance
    report_id: str
    report_title: str
    chunk_ids: tuple[str, ...]
    also_in: tuple[tuple[str, str], ...] = ()  # (report id, title) of other reports saying it


class KeyPointMapper(Protocol):
    """Turns one batch of reports into key points (offline scoring or one LLM call)."""

    name: str

    async def map(self, question: str, batch: Sequence[CommunityReport]) -> list[KeyPoint]:
        """Key points of the batch with importance 0-100."""
        ...


def report_units(report: CommunityReport) -> list[tuple[str, tuple[str, ...]]]:
    """A report's statements that can stand as key points, with the chunks each cites.

    Every finding is a sentence of the corpus; a report without findings offers its
    summary. (Reports written before findings were whole sentences paired two entities,
    "A and B (together in 3 sentences): …"; such a line is a statistic, never a point.)
    """
    return [(text, chunks) for _, text, chunks in _units(report)]


_Unit = tuple[int, str, tuple[str, ...]]
# report → its units, by identity: a question asks for the same view's units several times
# (vectors, frequencies, matrix); a report is immutable, and the entry holds it alive
_UNITS: dict[int, tuple[CommunityReport, list[_Unit]]] = {}
_UNITS_MAX = 50_000


def _units(report: CommunityReport) -> list[_Unit]:
    """:func:`report_units` with where each comes from: a finding's index, -1 the summary."""
    found = _UNITS.get(id(report))
    if found is not None and found[0] is report:
        return found[1]
    units = _units_now(report)
    if len(_UNITS) >= _UNITS_MAX:
        _UNITS.clear()
    _UNITS[id(report)] = (report, units)
    return units


def _units_now(report: CommunityReport) -> list[_Unit]:
    units = [
        (i, f.text, f.chunks)
        for i, f in enumerate(report.findings)
        if "(together in " not in f.text
    ]
    units = units or [(-1, report.summary, report.chunk_ids[:5])]
    return [(i, " ".join(text.split()), chunks) for i, text, chunks in units if text.strip()]


@dataclass(frozen=True)
class ReportTerms:
    """A report's analysed parts: the terms of its title, summary and each finding.

    Each part is analysed with its whitespace collapsed (as :func:`report_units` gives
    it), so a statement's terms serve both its document frequency and its report's BM25
    text. Kept with the report vectors, so a new process need not analyse them again.
    """

    title: tuple[str, ...]
    summary: tuple[str, ...]
    findings: tuple[tuple[str, ...], ...]

    @classmethod
    def of(cls, report: CommunityReport, tokens: Callable[[str], list[str]]) -> ReportTerms:
        """Analyse ``report`` with ``tokens`` (an analyzer's, or a memo of it)."""

        def terms(text: str) -> tuple[str, ...]:
            return tuple(tokens(" ".join(text.split())))

        return cls(
            terms(report.title),
            terms(report.summary),
            tuple(terms(f.text) for f in report.findings),
        )

    def all(self) -> list[str]:
        """The terms of :func:`report_text` (title, summary, findings), in order."""
        return [*self.title, *self.summary, *chain.from_iterable(self.findings)]

    def units(self, report: CommunityReport) -> list[tuple[str, ...]]:
        """The terms of each of ``report``'s :func:`report_units`, in order."""
        if len(self.findings) != len(report.findings):
            raise ValueError("these terms are another report's")
        return [self.findings[i] if i >= 0 else self.summary for i, _, _ in _units(report)]


def report_text(report: CommunityReport) -> str:
    """The text a map step reads for one report (title, summary, findings)."""
    lines = [f"# {report.title}", report.summary]
    lines.extend(f"- {f.text}" for f in report.findings)
    return "\n".join(lines)


def document_frequencies(analyzer: Analyzer, texts: Iterable[str]) -> tuple[dict[str, int], int]:
    """Term → number of texts holding it, and the number of texts."""
    return frequencies_of(analyzer.tokens(text) for text in texts)


def frequencies_of(texts: Iterable[Sequence[str]]) -> tuple[dict[str, int], int]:
    """:func:`document_frequencies` of texts given by their terms."""
    sets = list(map(set, texts))  # the loop in C, not a comprehension
    return dict(Counter(chain.from_iterable(sets))), len(sets)


@dataclass
class HybridScorer:
    """Scores texts against a question: keyword coverage and dense cosine, fused."""

    analyzer: Analyzer
    embedder: Embedder
    document_frequency: Mapping[str, int]
    documents: int
    sparse_weight: float = 1.0
    dense_weight: float = 1.0
    cache: OrderedDict[str, Matrix] = field(default_factory=OrderedDict)
    known: Mapping[str, Matrix] = field(default_factory=dict)  # stored report vectors

    def idf(self, term: str) -> float:
        """BM25's IDF (never negative) of a term over the scorer's documents."""
        df = self.document_frequency.get(term, 0)
        return math.log(1.0 + (self.documents - df + 0.5) / (df + 0.5))

    def keyword(self, question_terms: Sequence[str], text: str) -> float:
        """IDF-weighted share of the question's terms that ``text`` holds (0-1)."""
        if not question_terms:
            return 0.0
        held = set(self.analyzer.tokens(text))
        total = sum(self.idf(t) for t in question_terms)
        if total <= 0:
            return 0.0
        return sum(self.idf(t) for t in question_terms if t in held) / total

    def vectors(self, texts: Sequence[str]) -> Matrix:
        """Unit vectors of ``texts`` (cached by text)."""
        missing = list(
            dict.fromkeys(t for t in texts if t not in self.cache and t not in self.known)
        )
        if missing:
            for text, vector in zip(missing, self.embedder.embed_documents(missing), strict=True):
                self.cache[text] = vector
            while len(self.cache) > VECTOR_CACHE:
                self.cache.popitem(last=False)
        if not texts:
            return np.zeros((0, self.embedder.dimension), dtype=np.float32)
        return np.stack([self.known[t] if t in self.known else self.cache[t] for t in texts])

    def query_vector(self, question: str) -> Matrix:
        """The question's vector (embedded once)."""
        key = "\x00query\x00" + question
        if key not in self.cache:
            self.cache[key] = self.embedder.embed_query(question)
        return self.cache[key]

    def score(self, question: str, texts: Sequence[str]) -> list[tuple[float, float, float]]:
        """(fused 0-100, keyword 0-1, cosine 0-1) for each text."""
        terms = self.analyzer.query_terms(question)
        if not texts:
            return []
        cosines = self.vectors(texts) @ self.query_vector(question)
        total = self.sparse_weight + self.dense_weight
        out = []
        for text, cosine in zip(texts, cosines, strict=True):
            kw = self.keyword(terms, text)
            dense = max(0.0, float(cosine))
            fused = 100.0 * (self.sparse_weight * kw + self.dense_weight * dense) / total
            out.append((round(fused, 2), kw, dense))
        return out


@dataclass
class ExtractiveKeyPointMapper:
    """Offline map step: each report's best-scoring statements become its key points."""

    scorer: HybridScorer
    per_report: int = POINTS_PER_REPORT
    executor: Executor | None = None
    name: str = field(default="extractive", init=False)

    async def map(self, question: str, batch: Sequence[CommunityReport]) -> list[KeyPoint]:
        """Score every statement of the batch; keep the best few per report."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, self.map_sync, question, batch)

    def map_sync(self, question: str, batch: Sequence[CommunityReport]) -> list[KeyPoint]:
        """Blocking form of :meth:`map`."""
        units = [
            (report, text, chunks) for report in batch for text, chunks in report_units(report)
        ]
        scores = self.scorer.score(question, [text for _, text, _ in units])
        by_report: dict[str, list[KeyPoint]] = {}
        for (report, text, chunks), (fused, kw, _) in zip(units, scores, strict=True):
            if kw <= 0 and fused <= 0:
                continue
            by_report.setdefault(report.community_id, []).append(
                KeyPoint(text, fused, report.community_id, report.title, tuple(chunks))
            )
        points: list[KeyPoint] = []
        for found in by_report.values():
            found.sort(key=lambda p: (-p.score, p.text))
            points.extend(found[: self.per_report])
        return points


def point_key(text: str) -> str:
    """What two statements share when they say the same thing (case, spacing, punctuation)."""
    return _SPACE.sub(" ", _PUNCT.sub(" ", text.lower())).strip()


def merge_duplicates(points: Sequence[KeyPoint]) -> list[KeyPoint]:
    """One point per statement, citing every report and chunk that holds it."""
    groups: dict[str, list[KeyPoint]] = {}
    for point in sorted(points, key=lambda p: (-p.score, p.report_id, p.text)):
        groups.setdefault(point_key(point.text), []).append(point)
    out = []
    for same in groups.values():
        best = same[0]
        others = tuple(
            dict.fromkeys(
                (p.report_id, p.report_title) for p in same[1:] if p.report_id != best.report_id
            )
        )
        chunks = tuple(dict.fromkeys(c for p in same for c in p.chunk_ids))
        out.append(
            KeyPoint(best.text, best.score, best.report_id, best.report_title, chunks, others)
        )
    return out


def reduce_key_points(
    points: Sequence[KeyPoint],
    budget_tokens: int,
    counter: TokenCounter,
    *,
    min_relative_score: float = 0.35,
) -> list[KeyPoint]:
    """The best points within a token budget, spread over as many reports as fit.

    Duplicates are merged first (:func:`merge_duplicates`: reports often share a
    sentence). A point scoring below ``min_relative_score`` of the best one is left out
    (relative to this question, like the local cut-off). The rest are taken in rounds —
    each report's best remaining point per round, reports ordered by their best point —
    so a broad question reads many communities before any one community's third point.
    The result is grouped by report, reports in the order they were first taken.
    """
    merged = merge_duplicates(points)
    if not merged or max(p.score for p in merged) <= 0:
        return []
    floor = max(p.score for p in merged) * min_relative_score
    by_report: dict[str, list[KeyPoint]] = {}
    for point in sorted(merged, key=lambda p: (-p.score, p.report_id, p.text)):
        if point.score >= floor:
            by_report.setdefault(point.report_id, []).append(point)
    taken: dict[str, list[KeyPoint]] = {}
    used = 0
    depth = 0
    while any(len(found) > depth for found in by_report.values()):
        for report_id, found in by_report.items():
            if len(found) <= depth:
                continue
            point = found[depth]
            tokens = counter.count(point.text)
            if used + tokens > budget_tokens:
                continue
            used += tokens
            taken.setdefault(report_id, []).append(point)
        depth += 1
    return [point for found in taken.values() for point in found]
