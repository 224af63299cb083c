"""Metadata values: what documents may carry and how values are compared.

Filters compare canonical strings so that ``2020`` and ``"2020"`` match, booleans read
``true``/``false``, and a list-valued field matches any of its elements. Nested objects
are flattened to dotted keys (``{"k8s": {"ns": "pay"}}`` → ``k8s.ns``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from lore.errors import InvalidRequestError

Scalar = str | int | float | bool
MetaValue = Scalar | list[Scalar]
Metadata = dict[str, MetaValue]

MAX_KEY_LENGTH = 128
MAX_VALUE_LENGTH = 1024
"""Characters of one string value, alone or in a list."""
MAX_LIST_ITEMS = 256
MAX_LIST_BYTES = 16_384
"""UTF-8 bytes of one list value's items, added up."""
MAX_METADATA_BYTES = 65_536
"""UTF-8 bytes of a document's keys and values, added up: what one document may carry."""
MAX_DEPTH = 8
"""Nesting of objects inside metadata (flattened to dotted keys)."""


def _size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def canonical_value(value: object) -> str:
    """Return the string a scalar metadata value is indexed and compared as."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidRequestError(f"metadata value {value!r} is not a finite number")
        return str(int(value)) if value.is_integer() else repr(value)
    if isinstance(value, str):
        return value
    raise InvalidRequestError(
        f"metadata values must be strings, numbers or booleans, got {type(value).__name__}"
    )


def normalize_metadata(raw: Mapping[str, Any] | None) -> Metadata:
    """Validate and flatten user metadata; raise ``InvalidRequestError`` on bad input.

    Besides types, sizes are bounded (every limit named in the message): a string value
    ``MAX_VALUE_LENGTH`` characters, a list ``MAX_LIST_ITEMS`` items and ``MAX_LIST_BYTES``,
    the whole ``MAX_METADATA_BYTES``, nesting ``MAX_DEPTH`` levels. Metadata is stored
    once per document, but it is returned with every search result and indexed per chunk,
    so one request must not be able to carry megabytes of it.
    """
    out = _flatten(raw, "", 0)
    total = sum(_size(k) + _value_bytes(v) for k, v in out.items())
    if total > MAX_METADATA_BYTES:
        raise InvalidRequestError(
            f"metadata is {total:,} bytes; the limit is {MAX_METADATA_BYTES:,} bytes per document"
        )
    return out


def _value_bytes(value: MetaValue) -> int:
    items = value if isinstance(value, list) else [value]
    return sum(_size(canonical_value(item)) for item in items)


def _flatten(raw: Mapping[str, Any] | None, prefix: str, depth: int) -> Metadata:
    out: Metadata = {}
    if raw is None:
        return out
    if not isinstance(raw, Mapping):
        raise InvalidRequestError(f"metadata must be an object, got {type(raw).__name__}")
    if depth >= MAX_DEPTH:
        raise InvalidRequestError(
            f"metadata under {prefix[:40]!r} is nested over {MAX_DEPTH} levels (the limit)"
        )
    for key, value in raw.items():
        if not isinstance(key, str) or not key.strip():
            raise InvalidRequestError(f"metadata keys must be non-empty strings, got {key!r}")
        full = f"{prefix}{key.strip()}"
        if len(full) > MAX_KEY_LENGTH:
            raise InvalidRequestError(
                f"metadata key {full[:40]!r}... is over {MAX_KEY_LENGTH} chars"
            )
        if value is None:
            continue
        if isinstance(value, Mapping):
            out.update(_flatten(value, f"{full}.", depth + 1))
        elif isinstance(value, list | tuple):
            out[full] = _list_value(full, value)
        else:
            _check_scalar(full, value)
            out[full] = value
    return out


def _check_scalar(key: str, value: object) -> None:
    canonical_value(value)
    if isinstance(value, str) and len(value) > MAX_VALUE_LENGTH:
        raise InvalidRequestError(
            f"metadata value for {key!r} is over {MAX_VALUE_LENGTH} characters (the limit)"
        )


def _list_value(key: str, value: list[Any] | tuple[Any, ...]) -> list[Scalar]:
    if len(value) > MAX_LIST_ITEMS:
        raise InvalidRequestError(
            f"metadata list {key!r} has {len(value):,} items; the limit is {MAX_LIST_ITEMS}"
        )
    items: list[Scalar] = []
    for item in value:
        _check_scalar(key, item)
        items.append(item)
    size = _value_bytes(items)
    if size > MAX_LIST_BYTES:
        raise InvalidRequestError(
            f"metadata list {key!r} is {size:,} bytes; the limit is {MAX_LIST_BYTES:,} bytes"
        )
    return items


def metadata_terms(metadata: Metadata) -> list[tuple[str, str]]:
    """Return the (key, canonical value) pairs a document is filterable by, sorted."""
    pairs: set[tuple[str, str]] = set()
    for key, value in metadata.items():
        values = value if isinstance(value, list) else [value]
        for item in values:
            pairs.add((key, canonical_value(item)))
    return sorted(pairs)
