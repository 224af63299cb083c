"""Writing the answer from the chosen context, with citations.

An :class:`AnswerWriter` receives the evidence — the local chunks that fit the budget,
the reduced key points of global search, or both — and returns the answer text with
``[n]`` markers and the citations they point to. With an LLM, the writer asks for a
grounded answer from that evidence. Offline, :class:`ExtractiveAnswerWriter` shows the
evidence itself, clearly marked as extractive: for each chunk its best sentences (by the
question's terms), for each key point its statement and report.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from retrieval.analyzer import Analyzer
from retrieval.ask_contract import Citation
from retrieval.contract import QueryResult
from retrieval.keypoints import KeyPoint, TokenCounter
from retrieval.router import Decision

SENTENCES_PER_CHUNK = 2
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
LOCAL_HEADER = "Extractive answer (no LLM): the passages that best match the question."
GLOBAL_HEADER = (
    "Extractive answer (no LLM): key points from the community reports, most relevant first."
)


@dataclass(frozen=True)
class Evidence:
    """The context an answer may use; ``sources`` maps cited chunk ids to their sources."""

    question: str
    decision: Decision
    chunks: Sequence[QueryResult] = ()
    points: Sequence[KeyPoint] = ()
    sources: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class WrittenAnswer:
    """Answer text with ``[n]`` markers and the citations they point to."""

    text: str
    citations: list[Citation]
    extractive: bool


class AnswerWriter(Protocol):
    """Turns evidence into an answer (offline: extractive; with an LLM: grounded prose)."""

    name: str

    async def write(self, evidence: Evidence) -> WrittenAnswer:
        """The answer and its citations."""
        ...


def stuff_chunks(
    results: Sequence[QueryResult], budget_tokens: int, counter: TokenCounter
) -> tuple[list[QueryResult], int]:
    """Results in rank order while their texts fit the budget; and the tokens used."""
    picked: list[QueryResult] = []
    used = 0
    for result in results:
        cost = counter.count(result.text)
        if used + cost > budget_tokens:
            continue
        picked.append(result)
        used += cost
    return picked, used


def best_sentences(analyzer: Analyzer, question: str, text: str, limit: int) -> str:
    """The ``limit`` sentences of ``text`` sharing most question terms, in text order.

    Sentences sharing no term are left out; if none shares one, the first is taken.
    """
    terms = set(analyzer.query_terms(question))
    sentences = [" ".join(s.split()) for s in _SENTENCE.split(text)]
    sentences = [s for s in sentences if len(s) > 2]
    if not sentences:
        return " ".join(text.split())
    overlap = [len(terms & set(analyzer.tokens(s))) for s in sentences]
    ranked = sorted(
        (i for i in range(len(sentences)) if overlap[i]), key=lambda i: (-overlap[i], i)
    )
    keep = sorted(ranked[:limit]) or [0]  # no sentence shares a term: the opening one
    return " ".join(sentences[i] for i in keep)


@dataclass
class ExtractiveAnswerWriter:
    """The offline writer: the evidence itself, ranked and cited."""

    analyzer: Analyzer
    sentences_per_chunk: int = SENTENCES_PER_CHUNK
    name: str = field(default="extractive", init=False)

    async def write(self, evidence: Evidence) -> WrittenAnswer:
        """Local evidence first (best sentences per chunk), then global key points."""
        return self.write_sync(evidence)

    def write_sync(self, evidence: Evidence) -> WrittenAnswer:
        """Blocking form of :meth:`write` (pure)."""
        lines: list[str] = []
        citations: list[Citation] = []
        both = bool(evidence.chunks) and bool(evidence.points)
        if evidence.chunks:
            lines.append(LOCAL_HEADER)
            if both:
                lines.append("Specific passages:")
            for hit in evidence.chunks:
                n = len(citations) + 1
                where = hit.heading or hit.title or hit.source
                snippet = best_sentences(
                    self.analyzer, evidence.question, hit.text, self.sentences_per_chunk
                )
                lines.append(f"[{n}] {where} ({hit.source}): {snippet}")
                citations.append(
                    Citation(
                        id=n,
                        kind="chunk",
                        chunk_ids=[hit.chunk_id],
                        sources=[hit.source],
                        title=where,
                        score=hit.rrf_score,
                    )
                )
        if evidence.points:
            if both:
                lines.extend(["", "Across the corpus:"])
            else:
                lines.append(GLOBAL_HEADER)
            for point in evidence.points:
                n = len(citations) + 1
                lines.append(f"[{n}] {point.text} (report {point.report_id}: {point.report_title})")
                sources = list(
                    dict.fromkeys(
                        evidence.sources[c] for c in point.chunk_ids if c in evidence.sources
                    )
                )
                citations.append(
                    Citation(
                        id=n,
                        kind="report",
                        chunk_ids=list(point.chunk_ids),
                        sources=sources,
                        report_id=point.report_id,
                        title=point.report_title,
                        score=point.score,
                    )
                )
        if not citations:
            lines.append("No evidence found for this question in the indexed documents.")
        return WrittenAnswer("\n".join(lines), citations, extractive=True)
