"""Helpers shared by the ``lore`` command modules: consoles and the runtime context.

Importing this module (and every ``api/cli*`` module) must stay cheap: ``lore
--version`` and ``lore --help`` import them all. The runtime, rich, pydantic models
and everything under ``app/`` are imported inside the functions that need them
(``tests/unit/test_cli_start.py`` checks that torch, onnxruntime, tantivy and FastAPI
stay out).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import click

from api.cli_group import CliError

if TYPE_CHECKING:
    from pydantic import ValidationError
    from rich.console import Console

    from api.progress import ProgressReporter
    from app.runtime import Runtime
    from lore.settings import Settings


class LazyConsole:
    """A rich console made on first use, that never wraps lines off a terminal.

    Piped into ``grep`` or a file, a line is printed whole (rich would fold it at 80
    columns); on a terminal rich wraps as usual. Tables keep the console's width
    (``COLUMNS`` off a terminal, 80 by default).
    """

    def __init__(self, *, stderr: bool) -> None:
        self._stderr = stderr
        self._console: Console | None = None

    @property
    def console(self) -> Console:
        """The rich console (writes to the current ``sys.stdout``/``sys.stderr``)."""
        if self._console is None:
            from rich.console import Console

            self._console = Console(stderr=self._stderr)
        return self._console

    @property
    def is_terminal(self) -> bool:
        """Whether the stream is a terminal."""
        return self.console.is_terminal

    def print(self, *objects: Any, **options: Any) -> None:
        """``Console.print``, soft-wrapped (no folding) off a terminal."""
        console = self.console
        options.setdefault("soft_wrap", not console.is_terminal)
        console.print(*objects, **options)


out = LazyConsole(stderr=False)
err = LazyConsole(stderr=True)


def progress_reporter(ctx: click.Context, label: str, quiet: bool = False) -> ProgressReporter:
    """A progress reporter for a long command (silent with ``--quiet`` or when ``quiet``)."""
    from api.progress import ProgressReporter

    return ProgressReporter(
        label,
        quiet=quiet or bool(ctx.obj.get("quiet")),
        console=err.console,
        interval_s=settings_of(ctx).cli.progress_interval_s,
    )


def settings_of(ctx: click.Context) -> Settings:
    """The settings the top-level command built."""
    settings: Settings = ctx.obj["settings"]
    return settings


def require_store(settings: Settings) -> None:
    """Fail (exit 1) with where we looked and how to ingest when there is no store yet.

    Read commands call this before opening anything, so a typo'd ``--data-dir`` or the
    wrong working directory creates nothing and does not answer "0 results".
    """
    from app.builders import local_file, store_exists, store_schema
    from lore.db import redact

    if store_exists(settings):
        return
    where = (
        f"schema {store_schema(settings)} does not exist on {redact(settings.store.url)}"
        if settings.store.url
        else f"{local_file(settings, 'lore')} does not exist"
    )
    raise CliError(
        f"no Lorekeeper data here: {where}.",
        hint="Ingest documents first (`lore ingest PATH`), or point at existing data with "
        "--data-dir DIR (or LORE_DATA_DIR).",
        kind="NoDataError",
    )


@contextmanager
def runtime_context(ctx: click.Context, *, create: bool = False) -> Iterator[Runtime]:
    """Open the runtime of the command's settings; LoreErrors become clean CLI errors.

    Without ``create`` (every command that only reads or changes existing data) a
    missing store is an error that creates nothing (:func:`require_store`).
    """
    from app.builders import local_file
    from app.orphans import end_orphaned_jobs
    from app.runtime import open_runtime
    from lore.db import damaged
    from lore.errors import LoreError

    if not create:
        require_store(settings_of(ctx))
    try:
        runtime = open_runtime(settings_of(ctx), namespace=ctx.obj.get("namespace"))
        # a job whose process died never reads "running"
        end_orphaned_jobs(runtime.store, runtime.jobs())
    except LoreError as exc:
        raise CliError.of(exc) from exc
    try:
        yield runtime
    except LoreError as exc:
        raise CliError.of(exc) from exc
    except sqlite3.DatabaseError as exc:  # a SQLite file damaged past its first pages
        raise CliError.of(damaged(local_file(runtime.settings, "lore"), exc)) from exc
    finally:
        runtime.close()


def key_values(values: tuple[str, ...], option: str) -> dict[str, list[str]]:
    """``KEY=VALUE`` options by key (a key may repeat); a malformed one is a usage error."""
    pairs: dict[str, list[str]] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint=option)
        pairs.setdefault(key.strip(), []).append(value.strip())
    return pairs


def metadata_filter(filters: tuple[str, ...]) -> dict[str, Any] | None:
    """``--filter`` options as a metadata filter.

    ``KEY=VALUE`` matches the value (case-insensitively), a repeated key any of its
    values, and ``KEY=VALUE*`` values that start with VALUE (``--filter 'dir=alerts/*'``).
    """
    flt: dict[str, Any] = {}
    for key, values in key_values(filters, "--filter").items():
        prefixes = [v[:-1] for v in values if v.endswith("*") and len(v) > 1]
        if prefixes and len(values) > 1:
            raise click.BadParameter(
                f"{key}: a prefix (KEY=VALUE*) cannot be combined with other values of the key",
                param_hint="--filter",
            )
        if prefixes:
            flt[key] = {"$prefix": prefixes[0]}
        else:
            flt[key] = values[0] if len(values) == 1 else {"$in": values}
    return flt or None


def validation_message(exc: ValidationError, what: str) -> str:
    """One line naming each invalid field and why."""
    problems = [f"{'.'.join(str(p) for p in e['loc']) or what}: {e['msg']}" for e in exc.errors()]
    return f"invalid {what}: " + "; ".join(problems)
