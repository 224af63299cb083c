"""Writing the answer from the chosen context, with citations.

An :class:`AnswerWriter` receives the evidence — the local chunks that fit the budget,
the reduced key points of global search, or both — and returns the answer text with
``[n]`` markers and the citations they point to. With an LLM, the writer asks for a
grounded answer from that evidence. Offline, :class:`ExtractiveAnswerWriter` shows the
evidence itself, clearly marked as extractive: for each chunk its best whole sentences
(by the question's terms; the shared splitter of :mod:`lore.sentences`), each passage
once even when several chunks hold it; the key points under a short heading per
community, each point once, citing every report and chunk that holds it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from lore.sentences import is_whole, sentences
from retrieval.analyzer import Analyzer
from retrieval.ask_contract import Citation
from retrieval.contract import QueryResult
from retrieval.keypoints import KeyPoint, TokenCounter
from retrieval.router import Decision

SENTENCES_PER_CHUNK = 2
HEADING_CHARS = 60
LOCAL_HEADER = "Extractive answer (no LLM): the passages that best match the question."
GLOBAL_HEADER = (
    "Extractive answer (no LLM): key points from the community reports, most relevant first."
)
OTHER_PAGES = "Also on the question (pages no report above speaks for):"


@dataclass(frozen=True)
class Evidence:
    """The context an answer may use; ``sources`` maps cited chunk ids to their sources."""

    question: str
    decision: Decision
    chunks: Sequence[QueryResult] = ()
    points: Sequence[KeyPoint] = ()
    sources: Mapping[str, str] = field(default_factory=dict)
    max_tokens: int | None = None
    """Tokens the written answer may hold (``ask.answer_max_tokens``); None: unbounded."""


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
    found = [s for s in sentences(text) if len(s) > 2]
    if not found:
        return " ".join(text.split())
    whole = [s for s in found if is_whole(s)] or found  # a chunk cut mid-sentence: skip the cut
    overlap = [len(terms & set(analyzer.tokens(s))) for s in whole]
    ranked = sorted((i for i in range(len(whole)) if overlap[i]), key=lambda i: (-overlap[i], i))
    keep = sorted(ranked[:limit]) or [0]  # no sentence shares a term: the opening one
    return " ".join(whole[i] for i in keep)


def short_heading(title: str) -> str:
    """A community's heading in an answer: its title's entity part, cut at a word."""
    head = title.split(" — ", maxsplit=1)[0].strip() or title
    if len(head) <= HEADING_CHARS:
        return head
    return head[:HEADING_CHARS].rsplit(" ", 1)[0].rstrip(",;") + " …"


@dataclass
class ExtractiveAnswerWriter:
    """The offline writer: the evidence itself, ranked and cited.

    With ``Evidence.max_tokens`` the answer stops before the evidence line that would
    pass it (counted by ``counter``; without one, four characters a token) and says how
    many it left out; the citations are those of the lines shown.
    """

    analyzer: Analyzer
    sentences_per_chunk: int = SENTENCES_PER_CHUNK
    counter: TokenCounter | None = None
    name: str = field(default="extractive", init=False)

    def tokens(self, text: str) -> int:
        """Tokens of ``text`` by the writer's counter (or four characters a token)."""
        return self.counter.count(text) if self.counter is not None else -(-len(text) // 4)

    async def write(self, evidence: Evidence) -> WrittenAnswer:
        """Local evidence first (best sentences per chunk), then global key points."""
        return self.write_sync(evidence)

    def write_sync(self, evidence: Evidence) -> WrittenAnswer:
        """Blocking form of :meth:`write` (pure)."""
        lines: list[str] = []
        citations: list[Citation] = []
        size = _AnswerSize(self, evidence.max_tokens)
        both = bool(evidence.chunks) and bool(evidence.points)
        if evidence.decision == "global" and evidence.points:
            # key points first; passages of the pages no report speaks for after them
            lines.append(GLOBAL_HEADER)
            self._point_lines(evidence, size, lines, citations)
            if evidence.chunks:
                lines.extend(["", OTHER_PAGES])
                self._chunk_lines(evidence, size, lines, citations)
        else:
            if evidence.chunks:
                lines.append(LOCAL_HEADER)
                if both:
                    lines.append("Specific passages:")
                self._chunk_lines(evidence, size, lines, citations)
            if evidence.points:
                if both:
                    lines.extend(["", "Across the corpus:"])
                else:
                    lines.append(GLOBAL_HEADER)
                self._point_lines(evidence, size, lines, citations)
        if not citations:
            lines.append("No evidence found for this question in the indexed documents.")
        if size.left_out:
            lines.extend(
                [
                    "",
                    f"({size.left_out} more passages or points left out: the answer holds at "
                    f"most {size.limit} tokens, ask.answer_max_tokens)",
                ]
            )
        return WrittenAnswer("\n".join(lines), citations, extractive=True)

    def _chunk_lines(
        self, evidence: Evidence, size: _AnswerSize, lines: list[str], citations: list[Citation]
    ) -> None:
        """For each chunk its best sentences, each passage once, while the answer has room."""
        shown: dict[str, Citation] = {}
        for hit in evidence.chunks:
            where = hit.heading or hit.title or hit.source
            snippet = best_sentences(
                self.analyzer, evidence.question, hit.text, self.sentences_per_chunk
            )
            same = shown.get(" ".join(snippet.lower().split()))
            if same is not None:  # the same passage in another chunk: cite it, once
                same.chunk_ids.append(hit.chunk_id)
                if hit.source not in same.sources:
                    same.sources.append(hit.source)
                continue
            n = len(citations) + 1
            line = f"[{n}] {where} ({hit.source}): {snippet}"
            if not size.fits([line], first=not citations):
                continue
            lines.append(line)
            citation = Citation(
                id=n,
                kind="chunk",
                chunk_ids=[hit.chunk_id],
                sources=[hit.source],
                title=where,
                score=hit.rrf_score,
            )
            citations.append(citation)
            shown[" ".join(snippet.lower().split())] = citation

    def _point_lines(
        self, evidence: Evidence, size: _AnswerSize, lines: list[str], citations: list[Citation]
    ) -> None:
        """The key points under a heading per community, while the answer has room."""
        current = None
        for point in evidence.points:
            n = len(citations) + 1
            also = "".join(f"; also {rid}" for rid, _ in point.also_in)
            line = f"[{n}] {point.text} (report {point.report_id}{also})"
            heading = f"## {short_heading(point.report_title)}"
            new = ["", heading, line] if point.report_id != current else [line]
            if not size.fits(new, first=not citations):
                continue
            current = point.report_id
            lines.extend(new)
            sources = list(
                dict.fromkeys(evidence.sources[c] for c in point.chunk_ids if c in evidence.sources)
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


@dataclass
class _AnswerSize:
    """What an answer has used of ``limit`` tokens, and how many lines it left out."""

    writer: ExtractiveAnswerWriter
    limit: int | None
    used: int = 0
    left_out: int = 0

    def fits(self, new: Sequence[str], *, first: bool) -> bool:
        """Whether ``new`` lines fit (the first evidence line always does); counts them in."""
        cost = sum(self.writer.tokens(line) for line in new)
        if self.limit is not None and not first and self.used + cost > self.limit:
            self.left_out += 1
            return False
        self.used += cost
        return True
