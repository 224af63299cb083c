"""Metadata filters: parsing, validation and the resolved form the engines apply.

Grammar (AND across keys)::

    {"env": "production"}                        equality, case-insensitive for text
    {"env": {"$eq": "production"}}               the same, spelled out
    {"env": {"$eq_case": "Production"}}          exact, case included
    {"service": {"$in": ["payments-api", "ledger-db"]}}   any of the values
    {"dir": {"$prefix": "alerts/"}}              starts with (case-insensitive)

An unknown operator, an unknown key or a value of the wrong type is a ``FilterError``
that names the problem and what would be accepted. A parsed filter is resolved against
the values the store actually holds (:func:`resolve_values`): every condition becomes
the exact stored values it matches, so engines that filter natively (tantivy's terms)
and those that filter by row id agree. A condition that matches no stored value, or
conditions that no document meets together, leave ``hints`` naming the nearest known
values, which a query that comes back empty reports.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import dataclass
from typing import Any

from lore.errors import FilterError, InvalidRequestError
from lore.metadata import canonical_value

OPERATORS = ("$eq", "$eq_case", "$in", "$prefix")
MAX_IN_VALUES = 1000
HINT_VALUES = 5


class Condition(tuple[str, ...]):
    """One key's values, tagged with how they compare (``op``).

    ``eq`` (the default: case-insensitive), ``eq_case`` (exact) or ``prefix``
    (case-insensitive starts-with). A plain tuple of values equals the default ``eq``.
    """

    op: str

    def __new__(cls, values: Sequence[str], op: str = "eq") -> Condition:
        """Values in order, duplicates kept out by the parser."""
        self = super().__new__(cls, tuple(values))
        self.op = op
        return self

    @property
    def values(self) -> tuple[str, ...]:
        """The values as a plain tuple."""
        return tuple(self)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, tuple):
            return NotImplemented
        other_op = other.op if isinstance(other, Condition) else "eq"
        return self.op == other_op and tuple(self) == tuple(other)

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    def __hash__(self) -> int:
        return hash((self.op, tuple(self)))

    def matches(self, stored: str) -> bool:
        """Whether a stored (canonical) value meets the condition."""
        if self.op == "eq_case":
            return stored in self.values
        folded = stored.casefold()
        if self.op == "prefix":
            return any(folded.startswith(v.casefold()) for v in self.values)
        return any(folded == v.casefold() for v in self.values)

    def describe(self, key: str) -> str:
        """The condition as a person would write it on the command line."""
        shown = "|".join(self.values)
        return f"{key}={shown}*" if self.op == "prefix" else f"{key}={shown}"


Clauses = dict[str, Condition]
ExactClauses = dict[str, tuple[str, ...]]


def parse_filter(raw: Mapping[str, Any] | None, known_keys: Set[str]) -> Clauses:
    """Validate a user filter and return its clauses ``{key: Condition}``."""
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
        clauses[key] = _condition(key, condition)
    return clauses


def _condition(key: str, condition: Any) -> Condition:
    if isinstance(condition, Mapping):
        if len(condition) != 1:
            raise FilterError(
                f"filter on {key!r} must have exactly one operator, one of {', '.join(OPERATORS)}"
            )
        op, operand = next(iter(condition.items()))
        if op in ("$eq", "$eq_case", "$prefix"):
            value = _scalar(key, operand)
            if op == "$prefix" and not value:
                raise FilterError(f"$prefix on {key!r} needs a non-empty string")
            return Condition((value,), op[1:])
        if op == "$in":
            if not isinstance(operand, list | tuple) or not operand:
                raise FilterError(f"$in on {key!r} needs a non-empty list of values")
            if len(operand) > MAX_IN_VALUES:
                raise FilterError(f"$in on {key!r} takes at most {MAX_IN_VALUES} values")
            return Condition(tuple(dict.fromkeys(_scalar(key, item) for item in operand)))
        raise FilterError(
            f"unknown filter operator {op!r} on {key!r}; supported: {', '.join(OPERATORS)}"
        )
    if isinstance(condition, list | tuple):
        raise FilterError(
            f"filter on {key!r} got a list; to match any of them write "
            f'{{"{key}": {{"$in": [...]}}}}'
        )
    return Condition((_scalar(key, condition),))


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


def clauses_key(clauses: Clauses) -> str:
    """A stable text form of parsed clauses (for caches)."""
    return "\x1e".join(
        f"{key}\x1f{c.op}\x1f" + "\x1f".join(c.values) for key, c in sorted(clauses.items())
    )


def resolve_values(
    clauses: Clauses, values_of: Callable[[str], Sequence[str]]
) -> tuple[ExactClauses, list[str]]:
    """The exact stored values each condition matches, and hints for those matching none.

    ``values_of(key)`` lists the distinct canonical values stored under ``key``.
    """
    exact: ExactClauses = {}
    hints: list[str] = []
    for key, condition in sorted(clauses.items()):
        known = values_of(key)
        found = tuple(v for v in known if condition.matches(v))
        exact[key] = found
        if not found:
            hints.append(no_match_hint(key, condition, known))
    return exact, hints


def no_match_hint(key: str, condition: Condition, known: Sequence[str]) -> str:
    """Why a condition matched nothing, with the nearest values the store knows."""
    by_fold: dict[str, list[str]] = {}
    for value in sorted(known):
        by_fold.setdefault(value.casefold(), []).append(value)
    nearest: list[str] = []
    for wanted in condition.values:
        target = wanted.casefold()
        if condition.op == "prefix":  # compare with the stored values' starts
            starts: dict[str, list[str]] = {}
            for fold, originals in by_fold.items():
                starts.setdefault(fold[: len(target)], []).extend(originals)
        else:
            starts = by_fold
        for close in difflib.get_close_matches(target, list(starts), HINT_VALUES, 0.5):
            nearest.extend(v for v in starts[close] if v not in nearest)
    if not nearest:
        nearest = [originals[0] for originals in by_fold.values()]
    shown = ", ".join(nearest[:HINT_VALUES]) or "none"
    kind = "starting with" if condition.op == "prefix" else "equal to"
    if condition.op == "eq_case":
        kind = "exactly equal to"
    wanted_text = " or ".join(repr(v) for v in condition.values)
    return (
        f"no document has {key!r} {kind} {wanted_text}; nearest known values of "
        f"{key!r}: {shown} ({len(set(known))} known)"
    )


@dataclass(frozen=True, slots=True)
class ResolvedFilter:
    """A validated filter: the exact stored values per key and the chunk row ids it admits.

    ``hints`` say why it admits nothing, when it does not (empty otherwise).
    """

    clauses: ExactClauses
    allowed: frozenset[int]
    hints: tuple[str, ...] = ()

    def __contains__(self, row_id: object) -> bool:
        return row_id in self.allowed


def empty_result_hints(clauses: Clauses, value_hints: Sequence[str]) -> tuple[str, ...]:
    """What to tell a user whose filter admits no chunk at all."""
    if value_hints:
        return tuple(f"the filter matches nothing: {hint}" for hint in value_hints)
    together = ", ".join(c.describe(k) for k, c in sorted(clauses.items()))
    return (
        f"the filter matches nothing: no document has all of {together} together "
        "(each matches some documents on its own)",
    )


def filter_term(key: str, value: str) -> str:
    """How a (key, value) pair is spelled as a single index term."""
    return f"{key}\x1f{value}"
