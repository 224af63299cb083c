"""``lore ask``: a question routed to local search, global search, or both."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from api.cli_common import err, metadata_filter, out, runtime_context, validation_message
from api.cli_group import CliError

if TYPE_CHECKING:
    from retrieval.ask_contract import AskResponse


@click.command()
@click.argument("question")
@click.option(
    "--mode",
    type=click.Choice(["auto", "local", "global"]),
    default=None,
    help="Force a route (default: auto, or LORE_ASK__MODE).",
)
@click.option(
    "--filter",
    "filters",
    multiple=True,
    metavar="KEY=VALUE",
    help="Metadata filter (case-insensitive); repeat a key for any of its values; VALUE* = prefix.",
)
@click.option("--budget", type=int, default=None, help="Context tokens the answer may read.")
@click.option("--level", type=int, default=None, help="Community level for global search.")
@click.option("--json", "as_json", is_flag=True, help="Print the response JSON.")
@click.pass_context
def ask(
    ctx: click.Context,
    question: str,
    mode: str | None,
    filters: tuple[str, ...],
    budget: int | None,
    level: int | None,
    as_json: bool,
) -> None:
    """Answer a question with citations (extractive without an LLM)."""
    from pydantic import ValidationError

    from retrieval.ask_contract import AskRequest

    try:
        request = AskRequest.model_validate(
            {
                "question": question,
                "mode": mode,
                "filters": metadata_filter(filters),
                "budget": budget,
                "level": level,
            }
        )
    except ValidationError as exc:
        raise CliError(validation_message(exc, "question"), kind="InvalidRequestError") from exc
    with runtime_context(ctx) as runtime:
        response = runtime.queries().ask_sync(request)
        # out before the runtime closes: closing waits for the global view's snapshot,
        # written after the answer (about a second at 10k reports)
        if as_json:
            click.echo(response.model_dump_json(indent=2))
        else:
            print_answer(response)
        sys.stdout.flush()  # a pipe's buffer too, not at exit


def print_answer(response: AskResponse) -> None:
    """The route, the answer and where it comes from."""
    route = response.route
    weighed = (
        f" (local {route.scores.get('local', 0):g}, global {route.scores.get('global', 0):g})"
        if route.scores
        else ""  # a mode the caller forced: nothing was weighed
    )
    out.print(f"[bold]route:[/] {response.mode}{weighed}", highlight=False)
    for reason in route.reasons:
        out.print(f"  [dim]- {reason}[/]", highlight=False)
    out.print()
    out.print(response.answer, highlight=False, markup=False)
    out.print()
    for citation in response.citations:
        where = ", ".join(citation.sources[:3]) or ", ".join(citation.chunk_ids[:3])
        ref = f"report {citation.report_id}" if citation.report_id else citation.chunk_ids[0]
        out.print(f"[dim][{citation.id}] {ref} — {where}[/]", highlight=False)
    out.print(f"[dim]context tokens: {response.context_tokens}[/]")
    for warning in response.warnings:
        err.print(f"[yellow]warning:[/] {warning}", highlight=False)
