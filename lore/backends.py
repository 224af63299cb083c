"""Backends chosen by name: a small table of ``"module:Class"`` strings, imported lazily.

A backend's module (and its heavy dependencies) is imported only when it is chosen, so
nobody pays for a driver they do not use.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import import_module
from typing import Any

from lore.errors import ConfigurationError


def resolve_backend(table: Mapping[str, str], name: str, role: str) -> Any:
    """The class registered under ``name`` in ``table`` (a ``ConfigurationError`` if none)."""
    try:
        target = table[name]
    except KeyError:
        raise ConfigurationError(
            f"unknown {role} {name!r}; choose one of {', '.join(table)}"
        ) from None
    module_name, _, class_name = target.partition(":")
    return getattr(import_module(module_name), class_name)
