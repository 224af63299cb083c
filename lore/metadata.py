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


def normalize_metadata(raw: Mapping[str, Any] | None, *, prefix: str = "") -> Metadata:
    """Validate and flatten user metadata; raise ``InvalidRequestError`` on bad types."""
    out: Metadata = {}
    if raw is None:
        return out
    if not isinstance(raw, Mapping):
        raise InvalidRequestError(f"metadata must be an object, got {type(raw).__name__}")
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
            out.update(normalize_metadata(value, prefix=f"{full}."))
        elif isinstance(value, list | tuple):
            items: list[Scalar] = []
            for item in value:
                canonical_value(item)
                items.append(item)
            out[full] = items
        else:
            canonical_value(value)
            if isinstance(value, str) and len(value) > MAX_VALUE_LENGTH:
                raise InvalidRequestError(
                    f"metadata value for {full!r} is over {MAX_VALUE_LENGTH} characters"
                )
            out[full] = value
    return out


def metadata_terms(metadata: Metadata) -> list[tuple[str, str]]:
    """Return the (key, canonical value) pairs a document is filterable by, sorted."""
    pairs: set[tuple[str, str]] = set()
    for key, value in metadata.items():
        values = value if isinstance(value, list) else [value]
        for item in values:
            pairs.add((key, canonical_value(item)))
    return sorted(pairs)
