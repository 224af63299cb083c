"""Optional dependencies: which extra brings which module, and the one-line error without it.

A backend chosen in settings may need a driver the default install leaves out. Importing
it through :func:`require` (or choosing it through :func:`lore.backends.resolve_backend`)
turns a missing module into a :class:`MissingExtraError` that says what to install,
instead of an ``ImportError`` traceback.
"""

from __future__ import annotations

from importlib import import_module
from types import ModuleType

from lore.errors import MissingExtraError

# top-level module -> the extra of pyproject.toml that installs it
EXTRA_OF_MODULE = {
    "neo4j": "neo4j",
    "mcp": "mcp",
    "langchain_core": "langchain",
}


def missing_extra(exc: ModuleNotFoundError, feature: str) -> MissingExtraError | None:
    """The error to raise for ``exc`` when it is a missing optional driver, else None."""
    top = (exc.name or "").partition(".")[0]
    extra = EXTRA_OF_MODULE.get(top)
    if extra is None:
        return None
    return MissingExtraError(
        f"{feature} needs the {top!r} package: pip install 'lorekeeper[{extra}]'"
    )


def require(module: str, feature: str) -> ModuleType:
    """Import ``module`` for ``feature``, or raise the one-line :class:`MissingExtraError`."""
    try:
        return import_module(module)
    except ModuleNotFoundError as exc:
        error = missing_extra(exc, feature)
        if error is None:
            raise
        raise error from exc
