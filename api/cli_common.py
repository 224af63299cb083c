"""Helpers shared by the ``lore`` command modules: consoles and the runtime context."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click
from pydantic import ValidationError
from rich.console import Console

from lore.errors import LoreError
from lore.settings import Settings
from lore.sqlite import damaged
from workers.orphans import end_orphaned_jobs
from workers.runtime import Runtime, open_runtime

out = Console()
err = Console(stderr=True)


def settings_of(ctx: click.Context) -> Settings:
    """The settings the top-level command built."""
    settings: Settings = ctx.obj["settings"]
    return settings


@contextmanager
def runtime_context(ctx: click.Context) -> Iterator[Runtime]:
    """Open the runtime of the command's settings; LoreErrors become clean CLI errors."""
    try:
        runtime = open_runtime(settings_of(ctx))
        end_orphaned_jobs(runtime)  # a job whose process died never reads "running"
    except LoreError as exc:
        raise click.ClickException(str(exc)) from exc
    try:
        yield runtime
    except LoreError as exc:
        raise click.ClickException(str(exc)) from exc
    except sqlite3.DatabaseError as exc:  # damage found past the first pages
        raise click.ClickException(str(damaged(runtime.store.path, exc))) from exc
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
    """``--filter`` options as a metadata filter: a repeated key matches any of its values."""
    flt = {
        key: values[0] if len(values) == 1 else {"$in": values}
        for key, values in key_values(filters, "--filter").items()
    }
    return flt or None


def validation_message(exc: ValidationError, what: str) -> str:
    """One line naming each invalid field and why."""
    problems = [f"{'.'.join(str(p) for p in e['loc']) or what}: {e['msg']}" for e in exc.errors()]
    return f"invalid {what}: " + "; ".join(problems)
