"""Helpers shared by the ``lore`` command modules: consoles and the runtime context."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import click
from rich.console import Console

from lore.errors import LoreError
from lore.settings import Settings
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
    except LoreError as exc:
        raise click.ClickException(str(exc)) from exc
    try:
        yield runtime
    except LoreError as exc:
        raise click.ClickException(str(exc)) from exc
    finally:
        runtime.close()
