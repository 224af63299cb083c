"""Decide whether a question needs specific passages (local) or the whole corpus (global)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from lore.llm import ChatPrompt

TASK = "route_question"


class Reply(BaseModel):
    """The decision and why."""

    model_config = ConfigDict(extra="forbid")  # a reply of another shape is invalid

    decision: Literal["local", "global", "both"]
    reason: str = Field("", max_length=500)
    confidence: float = Field(0.5, ge=0, le=1)


SYSTEM = """TASK: route_question
You route questions asked of a memory of documents (runbooks, incidents, notes).
- "local": the answer is in a few specific passages (an identifier, an error code, a
  named service or person, one event, a quoted phrase, a how-to).
- "global": the answer needs the whole corpus (themes, trends, all/every/across,
  comparisons between many things, summaries).
- "both": it asks something specific AND something corpus-wide.
Reply with one JSON object and nothing else:
{"decision": "local" | "global" | "both", "reason": "one sentence", "confidence": 0.0-1.0}"""


def render(question: str, hints: str) -> ChatPrompt[Reply]:
    """The prompt for one question; ``hints`` lists what the offline router noticed."""
    return ChatPrompt(
        task=TASK,
        system=SYSTEM,
        user=f"Question: {question}\nNoticed: {hints or 'nothing'}",
        reply=Reply,
        max_tokens=REPLY_TOKENS,
    )


REPLY_TOKENS = 150  # a decision, a one-line reason and a confidence
