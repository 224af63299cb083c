"""Backends chosen by name: a small table of ``"module:Class"`` strings, imported lazily.

A backend's module (and its heavy dependencies) is imported only when it is chosen, so
nobody pays for a driver they do not use.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import import_module
from typing import Any

from lore.errors import ConfigurationError
from lore.extras import missing_extra


def resolve_backend(table: Mapping[str, str], name: str, role: str) -> Any:
    """The class registered under ``name`` in ``table`` (a ``ConfigurationError`` if none)."""
    try:
        target = table[name]
    except KeyError:
        raise ConfigurationError(
            f"unknown {role} {name!r}; choose one of {', '.join(table)}"
        ) from None
    module_name, _, class_name = target.partition(":")
    try:
        module = import_module(module_name)
    except ModuleNotFoundError as exc:
        error = missing_extra(exc, f"the {name!r} {role}")
        if error is None:
            raise
        raise error from exc
    return getattr(module, class_name)
