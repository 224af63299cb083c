"""JSON parsing with a nesting limit, for every JSON text that comes from outside.

``json.loads`` recurses once per level and raises ``RecursionError`` near depth 1000:
6 KB of brackets was a 500 in the API and a traceback in the CLI. :func:`loads` measures
the depth first (string literals removed by one regex, the brackets counted with a
cumulative sum, both at C speed) and refuses a text nested deeper than the limit with an
:class:`InvalidRequestError` naming it, before anything recurses.
"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np
import orjson

from lore.errors import InvalidRequestError

MAX_JSON_DEPTH = 64
"""Deepest nesting accepted: far beyond any document or request we define."""

_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_OPEN = np.frombuffer(b"[{", dtype=np.uint8)


def json_depth(text: str) -> int:
    """The deepest nesting of arrays and objects in ``text`` (0 for a scalar)."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    if not brackets:
        return 0
    codes = np.frombuffer(brackets.encode("ascii"), dtype=np.uint8)
    steps = np.where(np.isin(codes, _OPEN), 1, -1)
    return int(np.cumsum(steps).max())


def loads(text: str | bytes, *, what: str = "JSON", max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Parse ``text``; a syntax error or deeper nesting is an ``InvalidRequestError``."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise InvalidRequestError(f"{what} is not UTF-8 text") from exc
    depth = json_depth(text)
    if depth > max_depth:
        raise InvalidRequestError(
            f"{what} is nested too deeply ({depth} levels; the limit is {max_depth})"
        )
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidRequestError(
            f"{what} is not valid JSON: {exc.msg} (at character {exc.pos})"
        ) from exc
    except ValueError as exc:  # an integer of more digits than int() converts (4,300)
        raise InvalidRequestError(f"{what} cannot be read: {exc}") from exc


def loads_stored(raw: str | bytes) -> Any:
    """Parse JSON that our own stores wrote (reports, terms, members): not outside input.

    orjson's parser (a global question of a new process parses every report: 0.44 s of
    json at 10k reports), with :func:`json.loads` when orjson refuses what ``json.dumps``
    may write (a lone surrogate, which it escapes).
    """
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return json.loads(raw)
