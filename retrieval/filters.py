"""Metadata filters: parsing, validation and the resolved form the engines apply.

Grammar (AND across keys)::

    {"env": "production"}                        equality
    {"env": {"$eq": "production"}}               the same, spelled out
    {"service": {"$in": ["payments-api", "ledger-db"]}}   any of the values

An unknown operator, an unknown key or a value of the wrong type is a ``FilterError``
that names the problem and what would be accepted. Engines receive a
:class:`ResolvedFilter`: the canonical clauses (for engines that filter natively, such as
tantivy) and the set of chunk row ids that match (for engines that filter by id).
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass
from typing import Any

from lore.errors import FilterError, InvalidRequestError
from lore.metadata import canonical_value

OPERATORS = ("$eq", "$in")
MAX_IN_VALUES = 1000

Clauses = dict[str, tuple[str, ...]]


def parse_filter(raw: Mapping[str, Any] | None, known_keys: Set[str]) -> Clauses:
    """Validate a user filter and return canonical clauses ``{key: (values...)}``."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise FilterError(f"metadata_filter must be an object, got {type(raw).__name__}")
    clauses: Clauses = {}
    for key, condition in raw.items():
        if not isinstance(key, str) or not key:
            raise FilterError(f"filter keys must be non-empty strings, got {key!r}")
        if key not in known_keys:
            known = ", ".join(sorted(known_keys)[:30]) or "none: no document has metadata yet"
            raise FilterError(f"unknown filter key {key!r}; known metadata keys: {known}")
        clauses[key] = _values(key, condition)
    return clauses


def _values(key: str, condition: Any) -> tuple[str, ...]:
    if isinstance(condition, Mapping):
        if len(condition) != 1:
            raise FilterError(
                f"filter on {key!r} must have exactly one operator, one of {', '.join(OPERATORS)}"
            )
        op, operand = next(iter(condition.items()))
        if op == "$eq":
            return (_scalar(key, operand),)
        if op == "$in":
            if not isinstance(operand, list | tuple) or not operand:
                raise FilterError(f"$in on {key!r} needs a non-empty list of values")
            if len(operand) > MAX_IN_VALUES:
                raise FilterError(f"$in on {key!r} takes at most {MAX_IN_VALUES} values")
            return tuple(dict.fromkeys(_scalar(key, item) for item in operand))
        raise FilterError(
            f"unknown filter operator {op!r} on {key!r}; supported: {', '.join(OPERATORS)}"
        )
    if isinstance(condition, list | tuple):
        raise FilterError(
            f"filter on {key!r} got a list; to match any of them write "
            f'{{"{key}": {{"$in": [...]}}}}'
        )
    return (_scalar(key, condition),)


def _scalar(key: str, value: Any) -> str:
    if value is None or isinstance(value, Mapping | list | tuple):
        raise FilterError(
            f"filter value for {key!r} must be a string, number or boolean, got "
            f"{type(value).__name__}"
        )
    try:
        return canonical_value(value)
    except InvalidRequestError as exc:
        raise FilterError(f"filter value for {key!r}: {exc}") from exc


@dataclass(frozen=True, slots=True)
class ResolvedFilter:
    """A validated filter plus the chunk row ids it admits."""

    clauses: Clauses
    allowed: frozenset[int]

    def __contains__(self, row_id: object) -> bool:
        return row_id in self.allowed


def filter_term(key: str, value: str) -> str:
    """How a (key, value) pair is spelled as a single index term."""
    return f"{key}\x1f{value}"
