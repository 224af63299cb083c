"""Answers sized for an agent's context, and the citations behind them on request.

A global answer with every citation in full runs to tens of kilobytes. The ``ask`` tool
returns the answer cut at a token budget (at a paragraph or line break where one is
near), compact citations of what the shown text cites (title, a few sources, counts)
and an ``answer_id``; the ``cited`` tool returns, for any citation id of that answer,
the whole citation, every paragraph of the answer that cites it (also those past the
cut) and the text it rests on (the community report, or the cited chunks). Recent
answers are kept in memory, a bounded number of them, by the server process that gave
them.
"""

from __future__ import annotations

import re
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from retrieval.ask_contract import AskResponse, Citation

CHARS_PER_TOKEN = 4  # the usual estimate for English text; the bound is approximate
SOURCES_SHOWN = 2
KEPT_ANSWERS = 64


@dataclass(frozen=True)
class Bounded:
    """An answer cut to a budget: the text shown and whether anything was left out."""

    text: str
    truncated: bool


def bound_text(text: str, max_tokens: int) -> Bounded:
    """``text`` cut to about ``max_tokens`` tokens, at a paragraph or line break if near."""
    limit = max_tokens * CHARS_PER_TOKEN
    if len(text) <= limit:
        return Bounded(text, False)
    head = text[:limit]
    for breaker in ("\n\n", "\n", ". "):
        cut = head.rfind(breaker)
        if cut >= limit // 2:
            return Bounded(head[: cut + (1 if breaker == ". " else 0)].rstrip(), True)
    return Bounded(head.rstrip(), True)


def compact_citation(citation: Citation) -> dict[str, Any]:
    """A citation without its chunk id list: what an agent needs to decide to read on."""
    out: dict[str, Any] = {
        "id": citation.id,
        "kind": citation.kind,
        "title": citation.title,
        "sources": citation.sources[:SOURCES_SHOWN],
        "sources_total": len(citation.sources),
        "chunks_total": len(citation.chunk_ids),
        "score": citation.score,
    }
    if citation.report_id is not None:
        out["report_id"] = citation.report_id
    return out


def cited_paragraphs(answer: str, citation_id: int) -> list[str]:
    """The paragraphs (or lines) of ``answer`` that carry the marker ``[citation_id]``."""
    marker = re.compile(rf"\[(?:\d+,\s*)*{citation_id}(?:,\s*\d+)*\]")
    parts = [p.strip() for p in re.split(r"\n\s*\n|\n", answer) if p.strip()]
    return [p for p in parts if marker.search(p)]


class AnswerShelf:
    """The last :data:`KEPT_ANSWERS` answers by id (oldest dropped first)."""

    def __init__(self, size: int = KEPT_ANSWERS) -> None:
        """An empty shelf holding at most ``size`` answers."""
        self._size = size
        self._answers: OrderedDict[str, AskResponse] = OrderedDict()

    def keep(self, response: AskResponse) -> str:
        """Store ``response``; return the id to fetch its citations with."""
        answer_id = uuid.uuid4().hex[:16]
        self._answers[answer_id] = response
        while len(self._answers) > self._size:
            self._answers.popitem(last=False)
        return answer_id

    def get(self, answer_id: str) -> AskResponse | None:
        """The answer kept under ``answer_id``, if it is still kept."""
        return self._answers.get(answer_id)


def shaped_answer(response: AskResponse, answer_id: str, max_tokens: int) -> dict[str, Any]:
    """The ``ask`` tool's reply: bounded answer, compact citations, the id for ``cited``."""
    bounded = bound_text(response.answer, max_tokens)
    shown = cited_ids(bounded.text)
    return {
        "answer_id": answer_id,
        "mode": response.mode,
        "route": response.route.decision,
        "answer": bounded.text,
        "truncated": bounded.truncated,
        "answer_tokens_total": -(-len(response.answer) // CHARS_PER_TOKEN),
        "citations": [compact_citation(c) for c in response.citations if c.id in shown],
        "citations_total": len(response.citations),
        "warnings": response.warnings,
    }


def cited_ids(text: str) -> set[int]:
    """The citation ids that ``[n]`` or ``[n, m]`` markers in ``text`` point to."""
    return {
        int(n) for group in re.findall(r"\[(\d+(?:,\s*\d+)*)\]", text) for n in group.split(",")
    }
