"""Map step of global search: key points of a batch of community reports."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from lore.llm import ChatPrompt

TASK = "answer_global_map"


class Point(BaseModel):
    """One key point and the reports it comes from."""

    description: str = Field(min_length=1, max_length=1500)
    score: float = Field(ge=0, le=100, description="importance for the question")
    reports: list[str] = Field(default_factory=list, description="report labels, e.g. R2")


class Reply(BaseModel):
    """The key points (possibly none)."""

    model_config = ConfigDict(extra="forbid")  # a reply of another shape is invalid

    points: list[Point] = Field(max_length=20)  # required: none is said as []


SYSTEM = """TASK: answer_global_map
You read reports about communities of a knowledge graph and list the key points that
help answer the user's question. Use only the reports. Each point: a self-contained
statement, an importance score from 0 (useless) to 100 (essential), and the labels of
the reports (R1, R2, …) it rests on. If nothing helps, return no points.
Reply with one JSON object and nothing else:
{"points": [{"description": "...", "score": 75, "reports": ["R1"]}]}"""


def render(
    question: str, reports: Sequence[tuple[str, str]], report_ids: Sequence[str] = ()
) -> ChatPrompt[Reply]:
    """``reports``: (label, text) pairs; ``report_ids``: their communities."""
    body = "\n\n".join(f"{label}:\n{text}" for label, text in reports)
    return ChatPrompt(
        task=TASK,
        system=SYSTEM,
        user=f"Question: {question}\n\nReports:\n{body}",
        reply=Reply,
        max_tokens=200 + 150 * len(reports),  # a few scored points per report shown
        report_ids=tuple(report_ids),
    )
