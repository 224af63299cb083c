"""The asking roles played by an LLM: route classifier, key-point mapper, answer writer.

Each wraps an :class:`~lore.llm.LLMClient` and the matching prompt module; each falls
back to its offline counterpart when the model's reply stays invalid or the endpoint
is down, and says so (a route reason, a key point's report note, the answer's header),
so a question is always answered.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import partial

from graph.models import CommunityReport
from lore.errors import LLMReplyError, TransientError
from lore.llm import LLMClient
from lore.prompts import answer_global_map, answer_question, route_question
from retrieval.answer import Evidence, ExtractiveAnswerWriter, WrittenAnswer
from retrieval.ask_contract import Citation
from retrieval.keypoints import KeyPoint, report_units
from retrieval.router import HeuristicRouteClassifier, RouteContext, RouteDecision

_MARKER = re.compile(r"\[(\d+)\]")
LLMFailure = (LLMReplyError, TransientError)


@dataclass
class LLMRouteClassifier:
    """Asks the model; the offline cues are shown to it and kept as the scores."""

    client: LLMClient
    fallback: HeuristicRouteClassifier
    name: str = field(default="llm", init=False)

    async def classify(self, question: str, context: RouteContext) -> RouteDecision:
        """The model's decision, or the heuristic one when the model fails."""
        offline = self.fallback.decide(question, context)
        try:
            async with self.client.connected():
                reply = await self.client.ask(
                    route_question.render(question, "; ".join(offline.reasons))
                )
        except LLMFailure as exc:
            return offline.model_copy(
                update={"reasons": [*offline.reasons, f"LLM router unavailable ({exc})"]}
            )
        return RouteDecision(
            decision=reply.decision,
            reasons=[f"LLM ({reply.confidence:.2f}): {reply.reason}", *offline.reasons],
            scores=offline.scores,
            classifier="llm",
        )


@dataclass
class LLMKeyPointMapper:
    """One model call per batch of reports (batches run concurrently, bounded)."""

    client: LLMClient
    name: str = field(default="llm", init=False)

    async def map(self, question: str, batch: Sequence[CommunityReport]) -> list[KeyPoint]:
        """Key points with importance 0-100, each citing the chunks of its reports."""
        labels = {f"R{i}": r for i, r in enumerate(batch, start=1)}
        material = [
            (label, f"{r.title}\n{r.summary}\n" + "\n".join(f"- {t}" for t, _ in report_units(r)))
            for label, r in labels.items()
        ]
        held = tuple(r.community_id for r in batch)
        try:
            async with self.client.connected():
                reply = await self.client.ask(answer_global_map.render(question, material, held))
        except LLMFailure:
            return _report_points(batch)
        points = []
        for p in reply.points:
            used = [labels[x] for x in p.reports if x in labels] or list(batch[:1])
            chunks = tuple(dict.fromkeys(c for r in used for c in _cited(r)))
            points.append(
                KeyPoint(p.description, p.score, used[0].community_id, used[0].title, chunks)
            )
        return points


def _cited(report: CommunityReport) -> list[str]:
    return [c for f in report.findings for c in f.chunks] or list(report.chunk_ids[:5])


def _report_points(batch: Sequence[CommunityReport]) -> list[KeyPoint]:
    """Offline stand-in: each report's first statement, scored by its importance."""
    out = []
    for report in batch:
        units = report_units(report)
        if units:
            text, chunks = units[0]
            out.append(
                KeyPoint(
                    f"{text} (LLM map step unavailable)",
                    report.importance * 10,
                    report.community_id,
                    report.title,
                    tuple(chunks),
                )
            )
    return out


@dataclass
class LLMAnswerWriter:
    """A grounded answer from numbered evidence; citations are the numbers it used."""

    client: LLMClient
    fallback: ExtractiveAnswerWriter
    name: str = field(default="llm", init=False)

    async def write(self, evidence: Evidence) -> WrittenAnswer:
        """The model's answer, or the extractive one (with the reason) when it fails."""
        offline = self.fallback.write_sync(evidence)
        numbered = [(c.id, _evidence_text(c, evidence)) for c in offline.citations]
        if not numbered:
            return offline
        by_id = {c.id: c for c in offline.citations}
        chunks, reports = _held(offline.citations, evidence)
        prompt = answer_question.render(
            evidence.question, numbered, chunks, reports, max_tokens=evidence.max_tokens
        )
        prompt = replace(prompt, check=partial(uncited, numbers=set(by_id)))
        try:
            async with self.client.connected():
                reply = await self.client.ask(prompt)
        except LLMFailure as exc:
            return WrittenAnswer(
                f"(LLM answer unavailable: {exc})\n{offline.text}", offline.citations, True
            )
        used = [int(n) for n in _MARKER.findall(reply.answer)] + reply.cited
        citations = [by_id[n] for n in dict.fromkeys(used) if n in by_id]
        text = _MARKER.sub(lambda m: m.group(0) if int(m.group(1)) in by_id else "", reply.answer)
        return WrittenAnswer(text.strip(), citations, False)


def uncited(reply: answer_question.Reply, numbers: set[int]) -> str | None:
    """Why an answer cannot be used: it cites none of the evidence it was given.

    An answer nobody can check against its sources is not served: re-prompted once with
    this reason, then the extractive answer (which shows the evidence) stands in.
    """
    used = {int(n) for n in _MARKER.findall(reply.answer)} | set(reply.cited)
    if used & numbers:
        return None
    return (
        "the answer cites none of the evidence: put the number of the evidence each "
        f"statement rests on in brackets after it, like [{min(numbers)}]"
    )


def _held(
    citations: Sequence[Citation], evidence: Evidence
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """What the numbered evidence quotes: chunks, and the reports stating its key points."""
    chunks: list[str] = []
    reports: list[str] = []
    for citation in citations:
        if citation.kind == "chunk":
            chunks += citation.chunk_ids
        elif citation.report_id:
            reports.append(citation.report_id)
            for point in evidence.points:
                if point.report_id == citation.report_id:
                    reports += [other for other, _ in point.also_in]
    return tuple(dict.fromkeys(chunks)), tuple(dict.fromkeys(reports))


def _evidence_text(citation: Citation, evidence: Evidence) -> str:
    if citation.kind == "chunk":
        hit = next((h for h in evidence.chunks if h.chunk_id in citation.chunk_ids), None)
        if hit is not None:
            return f"({hit.source}) {hit.text}"
    point = next((p for p in evidence.points if p.report_id == citation.report_id), None)
    return point.text if point is not None else citation.title
