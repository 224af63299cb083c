"""``lore migrate --to postgresql://…``: move an embedded data directory into PostgreSQL."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

from api.cli_common import out
from api.cli_group import CliError

if TYPE_CHECKING:
    from app.migrate import MigrationReport


@click.command(name="migrate")
@click.option(
    "--to",
    "url",
    required=True,
    metavar="URL",
    help="The PostgreSQL database to fill (postgresql://user:pw@host/db); must be empty.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_context
def migrate_command(ctx: click.Context, url: str, as_json: bool) -> None:
    """Copy the data directory's SQLite stores into an empty PostgreSQL database.

    Documents, chunks, the change log, the graph, jobs, keys and the LLM cache of every
    namespace are copied with their ids; then run with LORE_STORE__URL=URL (and the same
    LORE_STORE__SCHEMA_PREFIX) on any data directory.

    Indexes are not copied: each replica rebuilds its own from the store on first use.
    """
    from app.migrate import migrate
    from lore.errors import LoreError

    settings = ctx.obj["root_settings"]  # the whole data directory, every namespace
    try:
        report = migrate(settings, url)
    except LoreError as exc:
        raise CliError.of(exc) from exc
    if as_json:
        click.echo(json.dumps(report.as_json(), indent=2))
    else:
        print_report(report)
    if not report.ok:
        raise CliError(
            "row counts differ between SQLite and PostgreSQL (see above)", kind="MigrationMismatch"
        )


def print_report(report: MigrationReport) -> None:
    """One line per table, then the total."""
    for t in report.tables:
        mark = "" if t.rows == t.target_rows else f"  MISMATCH: {t.target_rows} in PostgreSQL"
        out.print(f"{t.schema}.{t.table}: {t.rows} rows{mark}", highlight=False)
    total = sum(t.rows for t in report.tables)
    out.print(
        f"migrated {report.source} → {report.target}: {len(report.tables)} tables, {total} rows"
        f"{'' if report.ok else ' (counts differ)'}",
        highlight=False,
    )
