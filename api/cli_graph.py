"""``lore graph …``: build the knowledge graph, look at communities and entities, export."""

from __future__ import annotations

import io
import json
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING

import click

from api.cli_common import err, out, progress_reporter, runtime_context
from api.cli_group import CliError
from api.progress import GraphProgress

if TYPE_CHECKING:
    from graph.store import GraphStore
    from ingest.graph_build import GraphBuildReport
    from ingest.graph_cost import BuildEstimate


@click.group()
def graph() -> None:
    """Knowledge graph: entities, relations and their communities."""


@graph.command()
@click.option(
    "--retry-quarantined", is_flag=True, help="extract again the chunks that failed before"
)
@click.option(
    "--reextract",
    is_flag=True,
    help="extract every chunk again with the configured extractor (after an extractor change)",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="print what would be sent to the LLM (calls, cache hits, tokens, cost); change nothing",
)
@click.option(
    "--sample",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="with --dry-run: make this many of the calls first, per task the model has not "
    "answered here yet, and price the rest by their replies (cached: the build reuses them)",
)
@click.option(
    "--rebuild",
    is_flag=True,
    help="re-cluster from scratch (reports whose inputs are unchanged are still kept)",
)
@click.option("--json", "as_json", is_flag=True, help="print the build report as JSON")
@click.pass_context
def build(
    ctx: click.Context,
    retry_quarantined: bool,
    reextract: bool,
    dry_run: bool,
    sample: int,
    rebuild: bool,
    as_json: bool,
) -> None:
    """Extract entities from new chunks, drop what is gone, update the communities.

    Only communities whose inputs changed get a new report; the hierarchy is computed
    afresh with --rebuild, or when it drifted (graph.recluster_margin).

    With an LLM configured its endpoint is probed first; an unreachable or refusing one
    fails the build (exit 1) before anything changes. An extractor change keeps the
    existing graph (with a warning) until --reextract. With llm.budget_tokens_per_run a
    build stops cleanly once it has spent that many tokens (exit 4): what was extracted
    is kept and the next build continues.
    """
    if sample and not dry_run:
        raise click.UsageError("--sample goes with --dry-run")
    if dry_run:
        from app.lifecycle import estimate_build

        with runtime_context(ctx) as runtime:
            estimate = estimate_build(
                runtime.graph_services(),
                retry_quarantined=retry_quarantined,
                reextract=reextract,
                rebuild=rebuild,
                sample=sample,
            )
        print_estimate(estimate, as_json)
        return
    from app.refresh import refresh_in_process

    with (
        runtime_context(ctx) as runtime,
        progress_reporter(ctx, "extracting", quiet=as_json) as bar,
    ):
        shown = GraphProgress(bar)
        report, refreshed = refresh_in_process(
            runtime.graph_services(),
            progress=shown.extracted,
            retry_quarantined=retry_quarantined,
            reextract=reextract,
            rebuild=rebuild,
            report_progress=shown.reports,
            llm_stats=shown.stats,
        )
        communities = refreshed.communities
        counts = runtime.graph().counts()
        levels = len({c.level for c in runtime.graph().communities()})
    print_build(report, communities, levels, counts, as_json)
    if report.budget_reached:
        ctx.exit(BUDGET_REACHED)


BUDGET_REACHED = 4  # exit status of `lore graph build` stopped by its token budget


def print_build(
    report: GraphBuildReport,
    communities: int,
    levels: int,
    counts: dict[str, int],
    as_json: bool,
) -> None:
    """The build report, as JSON or as lines (warnings on stderr)."""
    llm = report.llm
    if as_json:
        summary = {
            **{k: v for k, v in asdict(report).items() if k != "llm"},
            "communities": communities,
            "levels": levels,
            "entities": counts["entities"],
            "relations": counts["relations"],
            "llm": llm.as_dict(),
        }
        click.echo(json.dumps(summary, indent=2))
    else:
        reports = (
            "communities and reports left as they were"
            if report.budget_reached
            else f"{report.reports_written} {report.report_writer} reports written"
            + (f", {report.reports_recovered} re-covered" if report.reports_recovered else "")
        )
        out.print(
            f"extracted {report.extracted} chunks with the {report.extractor} extractor "
            f"({report.unchanged} unchanged, {report.removed} removed, "
            f"{report.quarantined} quarantined); {counts['entities']} entities, "
            f"{counts['relations']} relations; {communities} communities on {levels} levels; "
            f"{reports}"
        )
        if report.extractor == "offline" and report.report_writer == "extractive":
            out.print("LLM calls: 0 (offline extractor and extractive reports)")
        else:
            out.print(
                f"LLM calls: {llm.calls} ({llm.retries} retries, {llm.reprompts} re-prompts, "
                f"{llm.repaired} repaired replies); tokens: {llm.prompt_tokens} prompt + "
                f"{llm.completion_tokens} completion; cache hits: {llm.cache_hits}"
            )
    for warning in report.warnings:
        err.print(f"[yellow]warning:[/] {warning}", highlight=False)
    if report.budget_reached:
        err.print(
            f"token budget reached (llm.budget_tokens_per_run): {report.not_done} chunks not "
            "extracted yet; what was extracted is kept and the next `lore graph build` "
            "continues",
            highlight=False,
        )
    if report.quarantined:
        err.print(
            f"{report.quarantined} chunks quarantined: `lore graph quarantined` lists why; "
            "`lore graph build --retry-quarantined` tries them again"
        )


def print_estimate(estimate: BuildEstimate, as_json: bool) -> None:
    """A dry run's estimate, as JSON or as lines."""
    if as_json:
        click.echo(json.dumps(estimate.as_dict(), indent=2))
        return
    out.print(
        f"dry run ({estimate.extractor} extractor, {estimate.report_writer} reports"
        + (f", model {estimate.model}" if estimate.model else "")
        + (
            f"): nothing was changed; {estimate.sampled_calls} calls were sent to sample the "
            f"model ({estimate.sampled_tokens} tokens; their replies are cached for the build)"
            if estimate.sampled_calls
            else "): nothing was changed or sent"
        ),
        highlight=False,
    )
    out.print(
        f"  chunks to extract: {estimate.chunks} — {estimate.extraction_calls} LLM calls, "
        f"{estimate.extraction_cache_hits} cache hits",
        highlight=False,
    )
    if estimate.stored_extractor is not None:
        cost = (
            f"{estimate.reextract_calls} LLM calls ({estimate.reextract_cache_hits} cache "
            f"hits), about {estimate.reextract_tokens} tokens"
            if estimate.reextract_calls or estimate.reextract_cache_hits
            else "no LLM calls"
        )
        out.print(
            f"  the stored graph was extracted by {estimate.stored_extractor!r}, not the "
            f"configured {estimate.extractor!r} extractor: its chunks are kept as they are "
            "and not counted above; `lore graph build --reextract` would extract all "
            f"{estimate.reextract_chunks} chunks again: {cost}",
            highlight=False,
        )
    bound = "" if estimate.communities_final else " (at least: the extraction may add more)"
    out.print(
        f"  community reports to write: {estimate.communities}{bound} — "
        f"{estimate.report_calls} LLM calls, {estimate.report_cache_hits} cache hits",
        highlight=False,
    )
    again = f", {estimate.reprompt_tokens} of them re-prompts" if estimate.reprompt_tokens else ""
    out.print(
        f"  estimated tokens: {estimate.prompt_tokens} prompt + {estimate.completion_tokens} "
        f"completion = {estimate.total_tokens}{again} ({estimate.tokenizer})",
        highlight=False,
    )
    for basis in estimate.completion_basis:
        hint = " — --sample N measures them" if "assumed" in basis else ""
        out.print(f"  completion {basis}{hint}", highlight=False)
    for basis in estimate.reprompt_basis:
        out.print(f"  re-prompts {basis}", highlight=False)
    if estimate.cost is not None:
        out.print(f"  estimated cost: {estimate.cost:.4f} (llm.price_*_per_million)")
    if estimate.budget_tokens is not None:
        verdict = "within" if estimate.total_tokens <= estimate.budget_tokens else "over"
        out.print(
            f"  budget: {estimate.budget_tokens} tokens per run — the estimate is {verdict} it",
            highlight=False,
        )


@graph.command()
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def quarantined(ctx: click.Context, as_json: bool) -> None:
    """List chunks whose extraction failed, with the reason."""
    with runtime_context(ctx) as runtime:
        entries = runtime.quarantine().entries()
    if as_json:
        click.echo(json.dumps([asdict(e) for e in entries], indent=2))
        return
    if not entries:
        out.print("no quarantined chunks")
    for e in entries:
        out.print(f"{e.chunk_id}  ({e.document_id}, {e.extractor}): {e.reason}", highlight=False)


@graph.command()
@click.option("--level", type=int, default=None)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def communities(ctx: click.Context, level: int | None, as_json: bool) -> None:
    """List communities (id, level, parent, size, first members)."""
    from graph.reports import ranked_members

    with runtime_context(ctx) as runtime:
        graph = runtime.graph()
        found = [
            replace(c, members=tuple(ranked_members(graph, c.members)))
            for c in graph.communities(level)
        ]
        if not as_json:  # a person reads names ("TargetDown"), not keys ("targetdown")
            shown = {k for c in found for k in c.members[:6]}
            names = {k: e.name for k in shown if (e := graph.entity(k)) is not None}
    if as_json:
        click.echo(
            json.dumps(
                [
                    {"id": c.id, "level": c.level, "parent": c.parent, "members": list(c.members)}
                    for c in found
                ],
                indent=2,
            )
        )
        return
    for c in found:
        preview = ", ".join(names.get(k, k) for k in c.members[:6])
        preview += " …" if len(c.members) > 6 else ""
        out.print(
            f"{c.id:>8}  level {c.level}  parent {c.parent or '-':>6}  "
            f"{len(c.members):>4} members: {preview}",
            highlight=False,
        )


@graph.command()
@click.option("--level", type=int, default=None)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def reports(ctx: click.Context, level: int | None, as_json: bool) -> None:
    """Community reports: title, summary and cited findings."""
    with runtime_context(ctx) as runtime:
        found = runtime.graph().reports(level)
    if as_json:
        click.echo(json.dumps([json.loads(r.to_json()) for r in found], indent=2))
        return
    for r in found:
        out.print(
            f"[bold]{r.community_id}[/] (level {r.level}, importance {r.importance:g}) {r.title}",
            highlight=False,
        )
        out.print(f"  {r.summary}", highlight=False)
        for finding in r.findings[:3]:
            out.print(
                f"  - {finding.text[:160]} [{', '.join(finding.chunks[:2])}]", highlight=False
            )


@graph.command()
@click.argument("name")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def show(ctx: click.Context, name: str, as_json: bool) -> None:
    """An entity, where it comes from, and its neighbours.

    An unknown NAME lists the nearest names (prefix, substring, close spelling: the
    lookup behind ``GET /v1/entities?q=``).
    """
    with runtime_context(ctx) as runtime:
        entity = runtime.graph().entity(name)
        if entity is None:
            raise not_found(runtime.graph(), name)
        neighbours = runtime.graph().neighbours(name, limit=15)
    related = [{"name": n.name, "type": n.type, "weight": w} for n, w in neighbours]
    data = {
        "name": entity.name,
        "type": entity.type,
        "description": entity.description,
        "mentions": entity.mentions,
        "chunk_ids": list(entity.chunk_ids),
        "neighbours": related,
    }
    if as_json:
        click.echo(json.dumps(data, indent=2))
        return
    out.print(
        f"[bold]{entity.name}[/] ({entity.type}), {entity.mentions} mentions in "
        f"{len(entity.chunk_ids)} chunks",
        highlight=False,
    )
    out.print(f"  {entity.description}", highlight=False)
    for item in related:
        out.print(
            f"  - {item['name']} ({item['type']}), weight {item['weight']:g}", highlight=False
        )


SUGGESTED = 5  # near names listed when `lore graph show NAME` finds no entity


def not_found(store: GraphStore, name: str) -> CliError:
    """No entity ``name``: the near names when there is a graph, else how to build one."""
    from graph.lookup import find_entities

    if not store.counts().get("entities"):
        return CliError(
            f"no entity named {name!r}: the graph is empty",
            hint="Run `lore graph build` first.",
            kind="NotFoundError",
        )
    near = [e.name for e in find_entities(store, name, SUGGESTED)]
    hint = (
        f"Did you mean: {', '.join(near)}?"
        if near
        else "`lore graph communities` and `lore graph export` list the entities."
    )
    return CliError(f"no entity named {name!r}", hint=hint, kind="NotFoundError")


@graph.command()
@click.option("--format", "fmt", type=click.Choice(["graphml", "json"]), default="json")
@click.option(
    "--output",
    type=click.Path(path_type=Path),
    default=None,
    help="Write to FILE instead of stdout.",
)
@click.option(
    "--json", "as_json", is_flag=True, help='With --output: print {"written": FILE} as JSON.'
)
@click.pass_context
def export(ctx: click.Context, fmt: str, output: Path | None, as_json: bool) -> None:
    """Export the entity graph (GraphML or node-link JSON)."""
    import networkx as nx

    with runtime_context(ctx) as runtime:
        store = runtime.graph()
        nxg = store.to_networkx()
        for key in list(nxg.nodes):
            entity = store.entity(key)
            if entity is not None:
                nxg.nodes[key].update(name=entity.name, type=entity.type, mentions=entity.mentions)
    if fmt == "json":
        text = json.dumps(nx.node_link_data(nxg, edges="links"), indent=2)
    else:
        buffer = io.BytesIO()
        nx.write_graphml(nxg, buffer)
        text = buffer.getvalue().decode("utf-8")
    if output is None:
        click.echo(text)
    else:
        output.write_text(text, encoding="utf-8")
        if as_json:
            click.echo(json.dumps({"written": str(output), "format": fmt}))
        else:
            out.print(f"wrote {output}")
