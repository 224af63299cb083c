"""Write the report of one community of the knowledge graph."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field, field_validator

from lore.llm import ChatPrompt

TASK = "summarize_community"


class ReportFinding(BaseModel):
    """One insight with the material it rests on."""

    summary: str = Field(min_length=1, max_length=400)
    explanation: str = Field("", max_length=4000)
    entities: list[str] = Field(default_factory=list, description="entity ids cited")
    relations: list[str] = Field(default_factory=list, description="relation ids cited")
    chunks: list[str] = Field(default_factory=list, description="chunk ids cited")


class Reply(BaseModel):
    """The whole reply."""

    model_config = ConfigDict(extra="forbid")  # a reply of another shape is invalid

    title: str = Field(min_length=1, max_length=200)
    summary: str = Field(min_length=1, max_length=4000)
    rating: float = Field(5.0, description="importance 0-10")
    rating_explanation: str = Field("", max_length=1000)
    findings: list[ReportFinding] = Field(default_factory=list, max_length=12)

    @field_validator("rating")
    @classmethod
    def _clamp(cls, value: float) -> float:
        return min(10.0, max(0.0, value))


SYSTEM = """TASK: summarize_community
You write a report about one community of a knowledge graph built from technical
documents: a group of entities that are closely related. Use only the material given.

Reply with one JSON object and nothing else:
{"title": "a short specific name for the community (its key entities)",
 "summary": "2-4 sentences: what the community is about and how its parts relate",
 "rating": 0-10 (how important this community is for someone operating these systems),
 "rating_explanation": "one sentence",
 "findings": [{"summary": "one-line insight", "explanation": "a few sentences",
               "entities": ["E1"], "relations": ["R2"], "chunks": ["C3"]}]}
Give 3 to 8 findings. Cite the ids shown in the material (E…, R…, C…, or S… for
sub-community reports); cite nothing you were not shown."""


def render(
    entities: Sequence[tuple[str, str, str, str]],
    relations: Sequence[tuple[str, str, str, str]],
    sources: Sequence[tuple[str, str]],
    chunk_ids: Sequence[str] = (),
    report_ids: Sequence[str] = (),
) -> ChatPrompt[Reply]:
    """The prompt from labelled material (from ``chunk_ids`` and ``report_ids``' reports).

    ``entities``: (label, name, type, description); ``relations``: (label, source name,
    target name, description); ``sources``: (label, text) — chunk excerpts (``C…``) or
    sub-community reports (``S…``).
    """
    lines = ["Entities:"]
    lines += [f"{label} | {name} | {kind} | {desc}" for label, name, kind, desc in entities]
    lines.append("\nRelations:")
    lines += [f"{label} | {a} -> {b} | {desc}" for label, a, b, desc in relations]
    lines.append("\nSources:")
    lines += [f"{label}: {text}" for label, text in sources]
    user = "\n".join(lines)
    return ChatPrompt(
        task=TASK,
        system=SYSTEM,
        user=user,
        reply=Reply,
        max_tokens=reply_budget(user),
        chunk_ids=tuple(chunk_ids),
        report_ids=tuple(report_ids),
    )


def reply_budget(material: str) -> int:
    """Completion tokens a report needs at most: 600, plus a sixteenth of its material.

    A report summarizes: a title, a summary and a few findings, longer for a larger
    community but far shorter than what it reads (about 4 characters a token).
    """
    return 600 + len(material) // 16
