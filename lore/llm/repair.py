"""Validating a model's reply against its pydantic model, repairing broken JSON first.

A reply that does not validate as sent is repaired (code fences, text around the object,
trailing commas, Python literals, a truncated tail) and validated again.
"""

from __future__ import annotations

import json
import re
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

ReplyT = TypeVar("ReplyT", bound=BaseModel)

_FENCE = re.compile(r"```[a-zA-Z0-9_-]*\s*\n?(.*?)(?:```|$)", re.DOTALL)
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")
_PY_LITERALS = {"True": "true", "False": "false", "None": "null"}


def repair_json(text: str) -> Any:
    """Best-effort JSON out of a model's reply; raises ValueError when nothing is left."""
    fenced = _FENCE.search(text)
    body = fenced.group(1) if fenced else text
    starts = [i for i in (body.find("{"), body.find("[")) if i >= 0]
    if not starts:
        raise ValueError("no JSON object in the reply")
    body = body[min(starts) :]
    decoder = json.JSONDecoder()
    candidates = [body, _clean(body), _close_brackets(_clean(body))]
    last_error: json.JSONDecodeError | None = None
    for candidate in candidates:
        try:
            value, _ = decoder.raw_decode(candidate)  # ignores trailing text
        except json.JSONDecodeError as exc:
            last_error = exc
            continue
        return value
    raise ValueError(f"unparseable JSON: {last_error}")


def _clean(body: str) -> str:
    """Trailing commas and Python literals outside strings."""
    out: list[str] = []
    for piece, in_string in _split_strings(body):
        if in_string:
            out.append(piece)
            continue
        fixed = _TRAILING_COMMA.sub(r"\1", piece)
        out.append(re.sub(r"\b(True|False|None)\b", lambda m: _PY_LITERALS[m.group(1)], fixed))
    return "".join(out)


def _split_strings(body: str) -> list[tuple[str, bool]]:
    """Cut text into (piece, is_inside_a_JSON_string) runs."""
    pieces: list[tuple[str, bool]] = []
    start, inside, escaped = 0, False, False
    for i, ch in enumerate(body):
        if inside and escaped:
            escaped = False
        elif inside and ch == "\\":
            escaped = True
        elif ch == '"':
            if inside:
                pieces.append((body[start : i + 1], True))
                start = i + 1
            else:
                pieces.append((body[start:i], False))
                start = i
            inside = not inside
    pieces.append((body[start:], inside))
    return pieces


def _close_brackets(body: str) -> str:
    """Close what a truncated reply left open (an unterminated string, arrays, objects)."""
    stack: list[str] = []
    pieces = _split_strings(body)
    for piece, in_string in pieces:
        if in_string:
            continue
        for ch in piece:
            if ch in "{[":
                stack.append("}" if ch == "{" else "]")
            elif ch in "}]" and stack:
                stack.pop()
    tail = '"' if pieces and pieces[-1][1] else ""
    trimmed = (body + tail).rstrip().rstrip(",")
    return trimmed + "".join(reversed(stack))


def parse_reply(text: str, model: type[ReplyT]) -> tuple[ReplyT, bool]:
    """Validate a reply, repairing it if needed; returns (reply, was_repaired)."""
    try:
        return model.model_validate_json(text.strip()), False
    except ValidationError:
        pass
    try:
        return model.model_validate(repair_json(text)), True
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'reply'}: {e['msg']}" for e in exc.errors()[:3]
        )
        raise ValueError(f"reply does not match {model.__name__}: {problems}") from None
