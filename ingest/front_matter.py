"""Front matter: the YAML (``---``) or TOML (``+++``) block at the top of a Markdown file.

Parsed with real parsers (``yaml.safe_load``, ``tomllib``), so lists, quoting, multi-line
strings and nested maps mean what they mean in Hugo, MkDocs or Jekyll. The result is
flattened into document metadata: scalars stay scalars, dates become ISO strings, lists
become list metadata (which filters match element by element), nested maps become
dotted keys (``params.service``), and a list of maps becomes one list per inner key
(``authors: [{name: A}, {name: B}]`` → ``authors.name: [A, B]``). Front matter that does
not parse, or is not a map of keys, is a :class:`FrontMatterError` naming the line.
"""

from __future__ import annotations

import datetime as dt
import re
import tomllib
from collections.abc import Mapping
from typing import Any

import yaml

from lore.errors import InvalidRequestError

_YAML = re.compile(r"\A---[ \t]*\n(?:(.*?)\n)??(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.DOTALL)
_TOML = re.compile(r"\A\+\+\+[ \t]*\n(?:(.*?)\n)??\+\+\+[ \t]*(?:\n|\Z)", re.DOTALL)


class FrontMatterError(InvalidRequestError):
    """The front matter block is there but cannot be read as metadata."""


def split_front_matter(text: str) -> tuple[dict[str, Any], str, bool]:
    """Return (flat metadata, body, whether the text had a front matter block).

    Line ends must already be newlines (``loaders.decode_text`` makes them so).
    """
    for pattern, parse in ((_YAML, _parse_yaml), (_TOML, _parse_toml)):
        found = pattern.match(text)
        if found:
            return flatten(parse(found.group(1) or "")), text[found.end() :], True
    return {}, text, False


def _parse_yaml(block: str) -> Mapping[str, Any]:
    try:
        data = yaml.safe_load(block)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 2}" if mark is not None else ""  # +1 for the ---
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise FrontMatterError(f"invalid YAML front matter{where}: {problem}") from exc
    return _mapping(data, "YAML")


def _parse_toml(block: str) -> Mapping[str, Any]:
    try:
        data = tomllib.loads(block)
    except tomllib.TOMLDecodeError as exc:
        raise FrontMatterError(f"invalid TOML front matter: {exc}") from exc
    return _mapping(data, "TOML")


def _mapping(data: object, kind: str) -> Mapping[str, Any]:
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise FrontMatterError(
            f"{kind} front matter must be a map of keys to values, got a {type(data).__name__}"
        )
    return data


def flatten(data: Mapping[Any, Any], prefix: str = "") -> dict[str, Any]:
    """Flatten parsed front matter into metadata (see the module docstring)."""
    out: dict[str, Any] = {}
    for raw_key, value in data.items():
        key = f"{prefix}{raw_key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, f"{key}."))
        elif isinstance(value, list | tuple):
            _flatten_list(key, value, out)
        else:
            plain = _scalar(value)
            if plain is not None:
                out[key] = plain
    return out


def _flatten_list(key: str, items: list[Any] | tuple[Any, ...], out: dict[str, Any]) -> None:
    scalars: list[Any] = []
    for item in items:
        if isinstance(item, Mapping):
            for inner, value in flatten(item, f"{key}.").items():
                merged = out.setdefault(inner, [])
                if not isinstance(merged, list):
                    merged = out[inner] = [merged]
                merged.extend(value if isinstance(value, list) else [value])
        elif isinstance(item, list | tuple):
            nested: dict[str, Any] = {}
            _flatten_list(key, item, nested)
            scalars.extend(nested.pop(key, []))
            out.update(nested)
        else:
            plain = _scalar(item)
            if plain is not None:
                scalars.append(plain)
    if scalars or not items:
        out[key] = list(dict.fromkeys(scalars))


def _scalar(value: Any) -> str | int | float | bool | None:
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    return str(value)
