"""Write a grounded answer from numbered evidence, citing it."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from lore.llm import ChatPrompt

TASK = "answer_question"


class Reply(BaseModel):
    """The answer text with [n] markers."""

    model_config = ConfigDict(extra="forbid")  # a reply of another shape is invalid

    answer: str = Field(min_length=1, max_length=20_000)
    cited: list[int] = Field(default_factory=list, description="the evidence numbers used")


SYSTEM = """TASK: answer_question
Answer the question using only the numbered evidence. Put the evidence number in
brackets after each statement it supports, like [2]. If the evidence does not answer
the question, say so plainly. Do not invent facts.
Reply with one JSON object and nothing else:
{"answer": "text with [n] markers", "cited": [1, 2]}"""


def render(
    question: str,
    evidence: Sequence[tuple[int, str]],
    chunk_ids: Sequence[str] = (),
    report_ids: Sequence[str] = (),
    *,
    max_tokens: int | None = None,
) -> ChatPrompt[Reply]:
    """``evidence``: (number, text) pairs, from ``chunk_ids`` and ``report_ids``' reports.

    ``max_tokens`` (``ask.answer_max_tokens``) bounds the reply below :data:`ANSWER_TOKENS`.
    """
    body = "\n\n".join(f"[{n}] {text}" for n, text in evidence)
    return ChatPrompt(
        task=TASK,
        system=SYSTEM,
        user=f"Question: {question}\n\nEvidence:\n{body}",
        reply=Reply,
        max_tokens=min(ANSWER_TOKENS, max_tokens or ANSWER_TOKENS),
        chunk_ids=tuple(chunk_ids),
        report_ids=tuple(report_ids),
    )


ANSWER_TOKENS = 1000  # a cited answer of a few paragraphs
