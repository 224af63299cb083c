"""``lore init`` and ``lore config``: write a commented settings file, show what is in force."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from api.cli_common import out, settings_of
from api.cli_group import CliError

if TYPE_CHECKING:
    from lore.settings import Settings


@click.command()
@click.option(
    "--path",
    "target",
    type=click.Path(path_type=Path),
    default=Path("lore.toml"),
    show_default=True,
    help="Where to write the file.",
)
@click.option("--force", is_flag=True, help="Overwrite an existing file.")
@click.option("--json", "as_json", is_flag=True, help='Print {"written": PATH} as JSON.')
def init(target: Path, force: bool, as_json: bool) -> None:
    """Write a commented settings file with every setting and its default."""
    from api.settings_docs import config_template
    from lore.settings import Settings

    if target.exists() and not force:
        raise CliError(
            f"{target} exists", hint="Use --force to overwrite it.", kind="FileExistsError"
        )
    target.write_text(config_template(Settings), encoding="utf-8")
    if as_json:
        click.echo(json.dumps({"written": str(target)}))
    else:
        out.print(f"wrote {target}: every setting, commented out; `lore config` shows them")


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the settings as JSON.")
@click.option("--reference", is_flag=True, help="Print the README's settings reference (Markdown).")
@click.pass_context
def config(ctx: click.Context, as_json: bool, reference: bool) -> None:
    """Print the effective settings and where each came from (secrets masked)."""
    from rich.table import Table

    from api.settings_docs import settings_reference
    from lore.config_file import find_config_file, read_config_file, setting_paths, setting_sources
    from lore.settings import Settings

    if reference:
        click.echo(settings_reference(Settings))
        return
    settings = settings_of(ctx)
    path = find_config_file(ctx.obj.get("config_file"))
    data = read_config_file(path) if path is not None else {}
    sources = setting_sources(Settings, data, path, ctx.obj.get("overrides", {}))
    rows = {
        ".".join(leaf): {"value": _shown(_value(settings, leaf)), "source": sources[".".join(leaf)]}
        for leaf in setting_paths(Settings)
    }
    if as_json:
        click.echo(json.dumps({"config_file": str(path) if path else None, "settings": rows}))
        return
    out.print(f"config file: {path or '(none)'}", highlight=False)
    table = Table(expand=True)
    for column in ("setting", "value", "source"):
        table.add_column(column, overflow="fold")
    for key, row in rows.items():
        table.add_row(key, json.dumps(row["value"]), str(row["source"]))
    out.print(table)


def _value(settings: Settings, leaf: tuple[str, ...]) -> Any:
    value: Any = settings
    for part in leaf:
        value = getattr(value, part)
    return value


def _shown(value: Any) -> Any:
    """A JSON-able value; secrets (and passwords in URLs: store, broker) masked."""
    from pydantic import SecretStr

    from lore.db import redact

    if isinstance(value, SecretStr):
        return "**********"
    if isinstance(value, str) and "://" in value:
        return redact(value)
    if isinstance(value, Path):
        return str(value)
    return value
