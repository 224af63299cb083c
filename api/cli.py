"""The ``lore`` command line: ingest, search, show, delete, status, reindex, serve.

Every command reads settings once (environment ``LORE_*``, ``--data-dir``), builds a
runtime and calls it; nothing here knows how search or ingestion work.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from api.cli_ask import ask
from api.cli_common import (
    err,
    key_values,
    metadata_filter,
    out,
    progress_reporter,
    runtime_context,
    settings_of,
    validation_message,
)
from api.cli_config import config, init
from api.cli_graph import graph
from api.cli_group import CliError, LoreGroup
from api.cli_jobs import ingest_command, jobs, print_ingest_summary
from api.cli_keys import keys
from api.cli_migrate import migrate_command
from api.cli_status import status

if TYPE_CHECKING:
    from collections.abc import Callable

    from lore.settings import Settings
    from retrieval.contract import QueryResponse


@click.group(cls=LoreGroup)
@click.option(
    "--data-dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Data directory (env LORE_DATA_DIR, default ./.lore).",
)
@click.option(
    "--namespace",
    default=None,
    help="Work in this namespace (a data directory of its own; default: the default one).",
)
@click.option(
    "--config",
    "config_file",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Settings file, TOML or YAML (env LORE_CONFIG, default ./lore.toml if present).",
)
@click.option(
    "--quiet", "-q", is_flag=True, help="No progress output (results and errors still print)."
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Machine-readable output; errors as JSON on stderr (any command).",
)
@click.version_option(package_name="lorekeeper")
@click.pass_context
def main(
    ctx: click.Context,
    data_dir: Path | None,
    namespace: str | None,
    config_file: Path | None,
    quiet: bool,
    as_json: bool,
) -> None:
    """Lorekeeper: a memory that finds exact identifiers and paraphrased concepts.

    The options above may also follow the subcommand (`lore status -q --data-dir D`).
    With --json every command prints JSON, and its errors as
    {"error": {"type", "message", "hint"}} on stderr, with the same exit status.
    """
    from pydantic import ValidationError

    from lore.errors import LoreError
    from lore.memory import limit_malloc_arenas
    from lore.settings import load_settings

    limit_malloc_arenas()  # before any thread starts: a server's memory stays flat
    overrides = {"data_dir": data_dir}
    try:
        settings = load_settings(config_file, **overrides)
        root, root_settings = settings.data_dir, settings
        if namespace is not None:
            from app.namespaces import namespace_settings  # imports the runtime: not for --help

            settings = namespace_settings(settings, namespace)
    except (ValidationError, LoreError) as exc:
        raise CliError.of(exc, "invalid settings: ") from exc
    ctx.obj = {"settings": settings, "root": root, "config_file": config_file}
    ctx.obj["overrides"] = overrides
    ctx.obj["root_settings"] = root_settings  # before --namespace: keys span namespaces
    ctx.obj["namespace"] = namespace  # queued work carries it to the workers
    ctx.obj["quiet"] = quiet
    ctx.obj["json"] = as_json


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--meta",
    "meta",
    multiple=True,
    metavar="KEY=VALUE",
    help="Metadata added to every document of this run (repeatable).",
)
@click.option("--include", multiple=True, help="Glob of file names to take from directories.")
@click.option("--exclude", multiple=True, help="Glob of paths to skip in directories.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option(
    "--wait/--no-wait",
    default=False,
    help="With a broker: follow the job with a live progress bar until it ends.",
)
@click.option(
    "--prune",
    is_flag=True,
    help="Then delete the stored documents that came from under PATHS and are no longer "
    "there (files removed, JSON Lines records gone from their file), graph included.",
)
@click.option(
    "--as",
    "label",
    metavar="LABEL",
    help="The root label that prefixes the ids (LABEL/path/in/dir.md); default: the "
    "directory's name (a file's: its directory's).",
)
@click.pass_context
def ingest(
    ctx: click.Context,
    paths: tuple[Path, ...],
    meta: tuple[str, ...],
    include: tuple[str, ...],
    exclude: tuple[str, ...],
    as_json: bool,
    wait: bool,
    prune: bool,
    label: str | None,
) -> None:
    """Ingest files and directories (.md, .txt, .html, .jsonl) as one job.

    A file's id is its root's label and its path below that root: `lore ingest
    docs/prod` stores docs/prod/a/b.md as `prod/a/b.md`, from any working directory.
    A directory whose name is already another directory's label is refused: give
    it its own with --as LABEL.

    Without a broker the job runs here; with one (LORE_BROKER__URL) it is queued for
    the workers and its id printed, or followed with a progress bar (--wait).
    Every document ends done, unchanged, skipped (nothing to index, e.g. a page of front
    matter only) or failed, with a reason; the batch goes on past failures.
    With --prune, documents from under PATHS that are no longer there are deleted
    afterwards (never anything outside PATHS; a PATH that does not exist prunes nothing).
    Exit status: 0 when nothing failed (skips included), 3 when some failed (listed).
    """
    metadata = {k: v[-1] for k, v in key_values(meta, "--meta").items()}
    settings = settings_of(ctx)
    loading = settings.ingest
    if include:
        loading = loading.model_copy(update={"include": list(include)})
    if exclude:
        loading = loading.model_copy(update={"exclude": [*loading.exclude, *exclude]})
    ctx.obj["settings"] = settings.model_copy(update={"ingest": loading})
    if prune and (absent := [str(p) for p in paths if not p.exists()]):
        raise click.UsageError(f"--prune: {', '.join(absent)} does not exist; nothing was done")
    summary = ingest_command(ctx, list(paths), metadata, wait, as_json, label)
    if prune:
        summary["pruned"] = prune_command(ctx, list(paths), wait or not settings.broker.url)
    if as_json:
        click.echo(json.dumps(summary, indent=2))
    else:
        print_ingest_summary(summary)
        if prune:
            print_pruned(summary["pruned"])
    if summary.get("failed"):
        ctx.exit(INGEST_PARTIAL)


def prune_command(ctx: click.Context, paths: list[Path], wait: bool) -> dict[str, Any]:
    """Delete what ``paths`` no longer hold (one delete job); returns its result."""
    from app.lifecycle import delete as delete_documents
    from ingest.roots import known_roots
    from ingest.sync import missing_documents

    with runtime_context(ctx) as runtime:
        roots = known_roots(runtime.store)
        plan = missing_documents(runtime.store.list_documents(), paths, roots)
        kept = [{"id": d, "reason": why} for d, why in plan.kept]
        if not plan.missing:
            return {"deleted": [], "kept": kept}
        return {**delete_documents(runtime.job_services(), plan.missing, wait=wait), "kept": kept}


def print_pruned(result: dict[str, Any]) -> None:
    """What ``--prune`` deleted (and kept)."""
    from graph.cascade import describe

    if not result.get("job_id"):
        out.print("pruned nothing: every stored document under the paths is still there")
    elif result.get("queued"):
        out.print(f"queued prune job {result['job_id']} (`lore jobs {result['job_id']}`)")
    else:
        out.print(f"pruned {len(result['deleted'])} documents no longer there:", highlight=False)
        for document_id in result["deleted"]:
            out.print(f"  deleted {document_id}", highlight=False)
        out.print(f"  {describe(result['graph'])}", highlight=False)
    for item in result["kept"]:
        err.print(f"[yellow]kept[/] {item['id']}: {item['reason']}", highlight=False)


INGEST_PARTIAL = 3  # exit status of `lore ingest` when some documents failed


@main.command()
@click.argument("text", required=False)
@click.option(
    "--request",
    "request_file",
    type=click.File("r"),
    default=None,
    help="Read a query request JSON from FILE ('-' for stdin); print response JSON.",
)
@click.option("--top-k", type=int, default=10, show_default=True)
@click.option(
    "--filter",
    "filters",
    multiple=True,
    metavar="KEY=VALUE",
    help="Metadata filter (case-insensitive); repeat a key for any of its values; VALUE* = prefix.",
)
@click.option("--dense-weight", type=float, default=None)
@click.option("--sparse-weight", type=float, default=None)
@click.option("--rrf-k", type=int, default=None)
@click.option(
    "--feedback",
    "feedback_boost",
    type=float,
    default=None,
    help="Weight of the dense feedback list, relative to the dense weight (0 = off).",
)
@click.option(
    "--preset",
    metavar="NAME",
    default=None,
    help="Named settings (hybrid_rrf, sparse, dense, relative_score, mmr, graph); "
    "options given besides win.",
)
@click.option("--fusion", type=click.Choice(["rrf", "relative_score"]), default=None)
@click.option("--diversity", type=float, default=None, help="MMR diversity 0..1 (0 = off).")
@click.option("--rerank/--no-rerank", default=None, help="Use the configured reranker.")
@click.option(
    "--min-relative-score",
    type=float,
    default=None,
    help="Drop results below this fraction of the best fused score.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the response JSON.")
@click.pass_context
def search(
    ctx: click.Context,
    text: str | None,
    request_file: Any,
    top_k: int,
    filters: tuple[str, ...],
    dense_weight: float | None,
    sparse_weight: float | None,
    rrf_k: int | None,
    feedback_boost: float | None,
    preset: str | None,
    fusion: str | None,
    diversity: float | None,
    rerank: bool | None,
    min_relative_score: float | None,
    as_json: bool,
) -> None:
    """Hybrid search (BM25 + dense, weighted RRF)."""
    from pydantic import ValidationError

    from lore import jsonsafe
    from lore.errors import InvalidRequestError
    from retrieval.contract import QueryRequest

    try:
        if request_file is not None:
            try:
                payload = jsonsafe.loads(request_file.read(), what="request")
            except InvalidRequestError as exc:
                raise CliError.of(exc) from exc
            request = QueryRequest.model_validate(payload)
            as_json = True
        elif text is None:
            raise click.UsageError("give the search TEXT or --request FILE")
        else:
            request = QueryRequest.model_validate(
                {
                    "search_text": text,
                    "top_k": top_k,
                    "preset": preset,
                    **({"fusion": fusion} if fusion else {}),
                    "metadata_filter": metadata_filter(filters),
                    "diversity": diversity,
                    "rerank": rerank,
                    "min_relative_score": min_relative_score,
                    "hybrid_params": {
                        "dense_weight": dense_weight,
                        "sparse_weight": sparse_weight,
                        "rrf_k_constant": rrf_k,
                        "feedback_boost": feedback_boost,
                    },
                }
            )
    except ValidationError as exc:
        raise CliError(validation_message(exc, "request"), kind="InvalidRequestError") from exc
    with runtime_context(ctx) as runtime:
        response = runtime.queries().query_sync(request)
    if as_json:
        click.echo(response.model_dump_json(indent=2))
    else:
        print_results(response)


def print_results(response: QueryResponse) -> None:
    """A readable table of results."""
    from rich.table import Table

    table = Table(show_lines=False, expand=True)
    table.add_column("#", justify="right", width=3)
    table.add_column("score", width=7)
    table.add_column("source / section", ratio=2, overflow="fold")
    table.add_column("text", ratio=5)
    for rank, hit in enumerate(response.results, start=1):
        where = hit.source + (f"\n[dim]{hit.heading}[/]" if hit.heading else "")
        if hit.duplicates:  # the same passage in other documents, folded into this one
            where += f"\n[dim]also in {', '.join(d.source for d in hit.duplicates)}[/]"
        snippet = " ".join(hit.text.split())
        table.add_row(
            str(rank),
            f"{hit.rrf_score:.4f}",
            where,
            snippet[:220] + ("…" if len(snippet) > 220 else ""),
        )
    out.print(table)
    out.print(f"[dim]{response.total_retrieved} results · query_id {response.query_id}[/]")
    for warning in response.warnings:
        err.print(f"[yellow]warning:[/] {warning}", highlight=False)


@main.command()
@click.argument("document_ids", nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option(
    "--wait/--no-wait", default=True, help="With a broker: follow the delete job (default)."
)
@click.pass_context
def delete(ctx: click.Context, document_ids: tuple[str, ...], as_json: bool, wait: bool) -> None:
    """Delete documents from the store, every index and the knowledge graph.

    Their chunks' mentions, the entities and relations only they supported go too, and
    the reports of the communities they touched are rewritten in the same job (on the
    workers when a broker is set). Each may be a document id, a source as printed in
    results (``file.jsonl#id``) or a path to the ingested file; an unknown one deletes
    nothing.
    """
    from app.lifecycle import delete as delete_documents
    from ingest.resolve import resolve_document_id

    with runtime_context(ctx) as runtime:
        ids = [resolve_document_id(runtime.store, d) for d in document_ids]
        result = delete_documents(runtime.job_services(), ids, wait=wait)
    print_deletion(result, as_json)


def print_deletion(result: dict[str, Any], as_json: bool) -> None:
    """A delete job's result: JSON, or what was deleted and what the graph lost."""
    from graph.cascade import describe

    if as_json:
        click.echo(json.dumps(result, indent=2))
    elif result.get("queued"):
        out.print(f"queued delete job {result['job_id']} (`lore jobs {result['job_id']}`)")
    elif result["state"] == "done":
        deleted, chunks = result["deleted"], result["chunks_removed"]
        if len(deleted) == 1:
            out.print(f"deleted {deleted[0]} ({chunks} chunks)", highlight=False)
        else:
            for document_id in deleted:
                out.print(f"deleted {document_id}", highlight=False)
            out.print(f"{chunks} chunks removed", highlight=False)
        out.print(describe(result["graph"]), highlight=False)
    for warning in result.get("warnings", []):
        err.print(f"[yellow]warning:[/] {warning}", highlight=False)
    if result["state"] not in ("done", "running"):
        raise CliError(
            f"delete job {result['job_id']} {result['state']}: {result.get('error', '')}",
            kind="JobFailed",
        )


@main.command()
@click.argument("document_id")
@click.option("--chunks", "with_chunks", is_flag=True, help="List the stored chunks too.")
@click.option("--json", "as_json", is_flag=True, help="Print the document as JSON.")
@click.pass_context
def show(ctx: click.Context, document_id: str, with_chunks: bool, as_json: bool) -> None:
    """Read a document back: status, metadata, text (and chunks). Takes an id or a source."""
    from api.routes.documents import document_out
    from app.listing import read_document
    from ingest.resolve import resolve_document_id

    with runtime_context(ctx) as runtime:
        ref = resolve_document_id(runtime.store, document_id)
        view = read_document(runtime.store, ref, text=True, chunks=with_chunks or as_json)
    if view is None:
        raise CliError(
            f"no document {document_id!r}",
            hint="Give a document id, a source as printed in results, or the ingested path.",
            kind="NotFoundError",
        )
    if as_json:
        click.echo(document_out(view.info, view).model_dump_json(indent=2))
        return
    info = view.info
    out.print(
        f"[bold]{info.id}[/]  {info.status.value}  {info.chunk_count} chunks", highlight=False
    )
    out.print(
        f"source: {info.source}  title: {info.title}  updated: {info.updated_at}", highlight=False
    )
    if info.error:
        out.print(f"[red]failed:[/] {info.error}", highlight=False)
    for key, value in sorted(info.metadata.items()):
        out.print(f"  {key}: {value}", highlight=False)
    if view.text is not None:
        note = " (joined from the chunks)" if view.text_reconstructed else ""
        out.print(f"[dim]--- text{note} ---[/]")
        click.echo(view.text)
    for chunk in view.chunks or []:
        out.print(f"[dim]--- chunk {chunk.ordinal} {chunk.id} {chunk.heading}[/]", highlight=False)
        click.echo(chunk.text)


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print the chunks indexed as JSON.")
@click.pass_context
def reindex(ctx: click.Context, as_json: bool) -> None:
    """Rebuild the derived indexes (BM25 and HNSW) from the store."""
    with (
        runtime_context(ctx) as runtime,
        progress_reporter(ctx, "sparse", quiet=as_json) as bar,
    ):

        def phase(name: str) -> Callable[[int, int], None]:
            if bar.label != name:
                bar.phase(name)
            return bar.update

        applied = runtime.indexes.reset(phase)
    if as_json:
        click.echo(json.dumps({"sparse": applied["sparse"], "dense": applied["dense"]}))
    else:
        out.print(f"rebuilt: sparse {applied['sparse']} chunks, dense {applied['dense']} chunks")


def _loopback(host: str) -> bool:
    """Whether ``host`` is a loopback name or address (reachable from this machine only)."""
    import ipaddress

    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _check_exposure(settings: Settings, host: str, allow_unauthenticated: bool) -> None:
    """Refuse to bind a non-loopback address with auth off unless the user opts in."""
    if _loopback(host) or settings.auth.enabled:
        return
    if allow_unauthenticated or settings.api.allow_unauthenticated:
        return
    raise click.UsageError(
        f"--host {host} is reachable from other machines and auth is off: anyone there could "
        "read and change the memory. Turn auth on (--auth, or LORE_AUTH__ENABLED=true, and "
        "`lore keys create`), or opt in with --allow-unauthenticated "
        "(LORE_API__ALLOW_UNAUTHENTICATED=true)"
    )


_UNAUTHENTICATED = click.option(
    "--allow-unauthenticated",
    is_flag=True,
    help="Allow a non-loopback --host with auth off (anyone who reaches it can read and write).",
)


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8080, show_default=True, type=int)
@click.option(
    "--auth/--no-auth",
    default=None,
    help="Require API keys (`lore keys create`); default from LORE_AUTH__ENABLED (off).",
)
@_UNAUTHENTICATED
@click.pass_context
def serve(
    ctx: click.Context, host: str, port: int, auth: bool | None, allow_unauthenticated: bool
) -> None:
    """Serve the HTTP API (FastAPI + uvicorn) over every namespace of the data directory."""
    import uvicorn

    from api.app import create_app

    settings = settings_of(ctx)
    auth_settings = settings.auth
    if auth is not None:
        auth_settings = auth_settings.model_copy(update={"enabled": auth})
    settings = settings.model_copy(update={"data_dir": ctx.obj["root"], "auth": auth_settings})
    _check_exposure(settings, host, allow_unauthenticated)
    with runtime_context(ctx, create=True):  # a damaged store: a clear error, no traceback
        pass
    uvicorn.run(create_app(settings), host=host, port=port, log_level="info")


@main.command()
@click.option("--transport", type=click.Choice(["stdio", "http"]), default="stdio")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8765, show_default=True, type=int)
@_UNAUTHENTICATED
@click.pass_context
def mcp(
    ctx: click.Context, transport: str, host: str, port: int, allow_unauthenticated: bool
) -> None:
    """Serve the memory to agents over MCP (stdio, or streamable HTTP at /mcp).

    Over HTTP it takes the HTTP API's keys and namespaces (``Authorization: Bearer``,
    ``/mcp?namespace=NAME``) when auth is on; stdio is local and has no auth.
    """
    import functools

    from app.orphans import OrphanSweep, forget_stale_view
    from lore.errors import MissingExtraError
    from lore.extras import require

    try:
        build_mcp_server = require("api.integrations.mcp_server", "the MCP server").build_mcp_server
    except MissingExtraError as exc:
        raise CliError.of(exc) from exc
    if transport == "http":
        from api.integrations.mcp_http import serve_http

        settings = settings_of(ctx).model_copy(update={"data_dir": ctx.obj["root"]})
        _check_exposure(settings, host, allow_unauthenticated)
        with runtime_context(ctx, create=True) as runtime:  # auth off: this namespace
            serve_http(settings, host, port, local=runtime)
        return
    with runtime_context(ctx, create=True) as runtime:
        server = build_mcp_server(runtime)
        sweep = OrphanSweep(  # a long-lived process
            runtime.store,
            runtime.jobs(),
            runtime.indexes,
            runtime.settings.jobs.orphan_sweep_s,
            views=functools.partial(forget_stale_view, runtime.graph, runtime.data_dir),
        )
        sweep.start()
        try:
            server.run("stdio")
        finally:
            sweep.stop()


main.add_command(status)
main.add_command(graph)
main.add_command(init)
main.add_command(config)
main.add_command(keys)
main.add_command(ask)
main.add_command(jobs)
main.add_command(migrate_command)

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
