"""The ``lore`` command line: ingest, search, delete, status, reindex, serve.

Every command reads settings once (environment ``LORE_*``, ``--data-dir``), builds a
runtime and calls it; nothing here knows how search or ingestion work.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click
from pydantic import ValidationError
from rich.table import Table

from api.cli_ask import ask
from api.cli_common import (
    err,
    key_values,
    metadata_filter,
    out,
    runtime_context,
    settings_of,
    validation_message,
)
from api.cli_graph import graph
from api.cli_jobs import ingest_command, jobs, print_ingest_summary
from api.cli_keys import keys
from ingest.loaders import document_id_for
from lore import jsonsafe
from lore.errors import InvalidRequestError, LoreError
from lore.settings import load_settings
from retrieval.contract import QueryRequest, QueryResponse
from workers.namespaces import namespace_settings


@click.group()
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
@click.version_option(package_name="lorekeeper")
@click.pass_context
def main(ctx: click.Context, data_dir: Path | None, namespace: str | None) -> None:
    """Lorekeeper: a memory that finds exact identifiers and paraphrased concepts."""
    try:
        settings = load_settings(data_dir=data_dir)
        root = settings.data_dir
        if namespace is not None:
            settings = namespace_settings(settings, namespace)
    except (ValidationError, LoreError) as exc:
        raise click.ClickException(f"invalid settings: {exc}") from exc
    ctx.obj = {"settings": settings, "root": root}


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
@click.pass_context
def ingest(
    ctx: click.Context,
    paths: tuple[Path, ...],
    meta: tuple[str, ...],
    include: tuple[str, ...],
    exclude: tuple[str, ...],
    as_json: bool,
    wait: bool,
) -> None:
    """Ingest files and directories (.md, .txt, .html, .jsonl) as one job.

    Without a broker the job runs here; with one (LORE_BROKER__URL) it is queued for
    the workers and its id printed, or followed with a progress bar (--wait).
    Every document ends done or failed with a reason; the batch goes on past failures.
    Exit status: 0 when nothing failed, 3 when some documents failed (listed).
    """
    metadata = {k: v[-1] for k, v in key_values(meta, "--meta").items()}
    settings = settings_of(ctx)
    loading = settings.ingest
    if include:
        loading = loading.model_copy(update={"include": list(include)})
    if exclude:
        loading = loading.model_copy(update={"exclude": [*loading.exclude, *exclude]})
    ctx.obj["settings"] = settings.model_copy(update={"ingest": loading})
    summary = ingest_command(ctx, list(paths), metadata, wait, as_json)
    if as_json:
        click.echo(json.dumps(summary, indent=2))
    else:
        print_ingest_summary(summary)
    if summary.get("failed"):
        ctx.exit(INGEST_PARTIAL)


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
    help="Metadata filter; repeat a key to match any of its values.",
)
@click.option("--dense-weight", type=float, default=None)
@click.option("--sparse-weight", type=float, default=None)
@click.option("--rrf-k", type=int, default=None)
@click.option("--fusion", type=click.Choice(["rrf", "relative_score"]), default="rrf")
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
    fusion: str,
    diversity: float | None,
    rerank: bool | None,
    min_relative_score: float | None,
    as_json: bool,
) -> None:
    """Hybrid search (BM25 + dense, weighted RRF)."""
    try:
        if request_file is not None:
            try:
                payload = jsonsafe.loads(request_file.read(), what="request")
            except InvalidRequestError as exc:
                raise click.ClickException(str(exc)) from exc
            request = QueryRequest.model_validate(payload)
            as_json = True
        elif text is None:
            raise click.UsageError("give the search TEXT or --request FILE")
        else:
            request = QueryRequest.model_validate(
                {
                    "search_text": text,
                    "top_k": top_k,
                    "fusion": fusion,
                    "metadata_filter": metadata_filter(filters),
                    "diversity": diversity,
                    "rerank": rerank,
                    "min_relative_score": min_relative_score,
                    "hybrid_params": {
                        "dense_weight": dense_weight,
                        "sparse_weight": sparse_weight,
                        "rrf_k_constant": rrf_k,
                    },
                }
            )
    except ValidationError as exc:
        raise click.ClickException(validation_message(exc, "request")) from exc
    with runtime_context(ctx) as runtime:
        response = runtime.query_sync(request)
    if as_json:
        click.echo(response.model_dump_json(indent=2))
    else:
        print_results(response)


def print_results(response: QueryResponse) -> None:
    """A readable table of results."""
    table = Table(show_lines=False, expand=True)
    table.add_column("#", justify="right", width=3)
    table.add_column("score", width=7)
    table.add_column("source / section", ratio=2, overflow="fold")
    table.add_column("text", ratio=5)
    for rank, hit in enumerate(response.results, start=1):
        where = hit.source + (f"\n[dim]{hit.heading}[/]" if hit.heading else "")
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
@click.argument("document_id")
@click.pass_context
def delete(ctx: click.Context, document_id: str) -> None:
    """Delete a document from the store and every index."""
    with runtime_context(ctx) as runtime:
        if runtime.store.get_document(document_id) is None and Path(document_id).exists():
            document_id = document_id_for(Path(document_id))  # e.g. ./docs/a.md
        removed = runtime.delete(document_id)
    out.print(f"deleted {document_id} ({removed} chunks)", highlight=False)


@main.command()
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def status(ctx: click.Context, as_json: bool) -> None:
    """Counts of documents and chunks, failures with reasons, index state."""
    with runtime_context(ctx) as runtime:
        counts = runtime.store.counts()
        failed = [
            {"id": d.id, "error": d.error}
            for d in runtime.store.list_documents()
            if d.status.value == "failed"
        ]
        model = runtime.store.get_meta("embedding_model")
        indexes = runtime.index_health()
    info = {
        "data_dir": str(runtime.data_dir),
        "counts": counts,
        "embedding_model": model,
        "indexes": indexes,
        "failed": failed,
    }
    if as_json:
        click.echo(json.dumps(info, indent=2))
        return
    out.print(f"data dir: {info['data_dir']}  embedding model: {model}", highlight=False)
    for key, value in sorted(counts.items()):
        out.print(f"  {key}: {value}")
    for name, state in indexes.items():
        colour = "green" if state == "ok" else "yellow"
        out.print(f"  {name} index: [{colour}]{state}[/]", highlight=False)
    for item in failed:
        out.print(f"  [red]failed[/] {item['id']}: {item['error']}", highlight=False)


@main.command()
@click.pass_context
def reindex(ctx: click.Context) -> None:
    """Rebuild the derived indexes (BM25 and HNSW) from the store."""
    with runtime_context(ctx) as runtime:
        applied = runtime.reindex()
    out.print(f"rebuilt: sparse {applied['sparse']} chunks, dense {applied['dense']} chunks")


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8080, show_default=True, type=int)
@click.option(
    "--auth/--no-auth",
    default=None,
    help="Require API keys (`lore keys create`); default from LORE_AUTH__ENABLED (off).",
)
@click.pass_context
def serve(ctx: click.Context, host: str, port: int, auth: bool | None) -> None:
    """Serve the HTTP API (FastAPI + uvicorn) over every namespace of the data directory."""
    import uvicorn

    from api.app import create_app

    settings = settings_of(ctx)
    auth_settings = settings.auth
    if auth is not None:
        auth_settings = auth_settings.model_copy(update={"enabled": auth})
    settings = settings.model_copy(update={"data_dir": ctx.obj["root"], "auth": auth_settings})
    with runtime_context(ctx):  # a damaged store is a clear error here, not a traceback
        pass
    uvicorn.run(create_app(settings), host=host, port=port, log_level="info")


@main.command()
@click.option("--transport", type=click.Choice(["stdio", "http"]), default="stdio")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8765, show_default=True, type=int)
@click.pass_context
def mcp(ctx: click.Context, transport: str, host: str, port: int) -> None:
    """Serve the memory to agents over MCP (stdio, or streamable HTTP at /mcp)."""
    try:
        from api.integrations.mcp_server import build_mcp_server
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise click.ClickException("the MCP server needs `pip install lorekeeper[mcp]`") from exc
    with runtime_context(ctx) as runtime:
        server = build_mcp_server(runtime)
        if transport == "stdio":
            server.run("stdio")
        else:
            server.run("streamable-http", host=host, port=port)


main.add_command(graph)
main.add_command(keys)
main.add_command(ask)
main.add_command(jobs)

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
