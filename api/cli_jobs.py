"""Jobs on the command line: ``lore ingest`` through jobs, ``lore jobs``, ``lore graph refresh``.

``lore ingest`` calls the one ingest entry point (``app.ingest``): with a broker
configured (``LORE_BROKER__URL``) it queues a job for the workers and prints its id, or
follows it with a live progress bar (``--wait``); without one the same steps run in this
process. Either way the job is recorded, so ``lore jobs`` lists it with per-status
counts.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from api.cli_common import out, progress_reporter, runtime_context
from api.cli_graph import graph
from api.cli_group import CliError
from api.progress import GraphProgress, llm_counters

if TYPE_CHECKING:
    from app.jobs import JobInfo, JobStore
    from ingest.pipeline import IngestReport
    from lore.llm import LLMStats
    from lore.store_roles import DocumentCatalog


def ingest_command(
    ctx: click.Context,
    paths: list[Path],
    metadata: dict[str, str],
    wait: bool,
    as_json: bool,
    label: str | None = None,
) -> dict[str, Any]:
    """Ingest ``paths`` through the one entry point; returns the summary to print.

    Queued (a broker is configured) it returns at once unless ``wait``; in-process the
    documents are searchable when it returns, and the progress has a total (the files
    and JSON Lines records are counted first) and so an ETA.
    """
    from app.ingest import ingest_paths, queued
    from ingest.loaders import count_documents
    from ingest.roots import known_roots, plan_targets

    with (
        runtime_context(ctx, create=True) as runtime,
        progress_reporter(ctx, "ingest", quiet=as_json) as bar,
    ):

        def followed(info: JobInfo) -> None:
            bar.update(info.finished, info.total, last=_line(info))

        def progress(outcome: tuple[str, str, str]) -> None:
            bar.advance(1, last=f"{outcome[1]}: {outcome[0][-50:]}")

        started = time.monotonic()

        def extracting(done: int, total: int, stats: LLMStats) -> None:
            last = llm_counters(stats, time.monotonic() - started)
            if bar.label != "extracting":
                bar.phase("extracting", total)  # a line at once off a terminal
            bar.update(done, total, last=last)

        is_queued = queued(runtime.settings)
        plan_targets(paths, label, known_roots(runtime.store))  # a bad label: before counting
        if not is_queued:
            cfg = runtime.settings.ingest
            bar.phase("ingest", count_documents(paths, include=cfg.include, exclude=cfg.exclude))
        result = ingest_paths(
            runtime.job_services(),
            paths,
            metadata,
            label=label,
            wait=wait or not is_queued,
            progress=progress,
            on_update=followed,
            extract_progress=extracting,
        )
        if result.queued and not wait:
            return {"job_id": result.job_id, "queued": True}
        return _summary(
            runtime.jobs(), result.job_id, runtime.store, None if result.queued else result.report
        )


def _line(info: JobInfo) -> str:
    return " ".join(f"{k} {v}" for k, v in sorted(info.counts.items()))


def _summary(
    jobs: JobStore, job_id: str, store: DocumentCatalog, report: IngestReport | None
) -> dict[str, Any]:
    from app.jobs import JobStatus

    info = jobs.get(job_id)
    statuses = jobs.statuses(job_id)
    failed = [
        {"id": d, "reason": reason or ""}
        for d, (status, reason) in statuses.items()
        if status is JobStatus.FAILED
    ]
    skipped = [
        {"id": d, "reason": reason or ""}
        for d, (status, reason) in statuses.items()
        if status is JobStatus.SKIPPED
    ]
    repeated = info.detail.get("repeated", []) if info else []
    failed += [{"id": d, "reason": reason} for d, reason in repeated]
    done = sum(status is JobStatus.DONE for status, _ in statuses.values())
    summary: dict[str, Any] = {
        "job_id": job_id,
        "state": info.state if info else "unknown",
        "done": done,
        "failed": failed,
        "skipped": skipped,
        "store": store.counts(),
    }
    if info and info.detail.get("graph"):
        summary["graph"] = info.detail["graph"]  # what changed documents took out of it
    if report is not None:  # in-process: the pipeline's own counts
        summary["done"], summary["unchanged"] = len(report.done), len(report.unchanged)
        summary["chunks_written"], summary["chunks_embedded"] = report.chunks, report.embedded
    return summary


def print_ingest_summary(summary: dict[str, Any]) -> None:
    """The human-readable form of :func:`ingest_command`'s result."""
    from graph.cascade import describe

    if summary.get("queued"):
        out.print(
            f"queued job {summary['job_id']} (follow it with `lore jobs {summary['job_id']}`)"
        )
        return
    chunks = summary.get("chunks_written")
    written = ""
    if chunks is not None:
        written = f" — {chunks} chunks written ({summary['chunks_embedded']} embedded)"
    unchanged = f", {summary['unchanged']} unchanged" if "unchanged" in summary else ""
    skipped = summary.get("skipped", [])
    out.print(
        f"job {summary['job_id']}: [green]{summary['done']} done[/]{unchanged}, "
        f"[yellow]{len(skipped)} skipped[/], "
        f"[red]{len(summary['failed'])} failed[/]{written}; "
        f"store: {summary['store'].get('chunks', 0)} chunks",
        highlight=False,
    )
    for item in skipped:
        out.print(f"  [yellow]skipped[/] {item['id']}: {item['reason']}", highlight=False)
    if summary.get("graph"):
        out.print(f"changed documents — {describe(summary['graph'])}", highlight=False)
    for item in summary["failed"]:
        out.print(f"  [red]failed[/] {item['id']}: {item['reason']}", highlight=False)


@click.command()
@click.argument("job_id", required=False)
@click.option("--limit", type=int, default=20, show_default=True)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def jobs(ctx: click.Context, job_id: str | None, limit: int, as_json: bool) -> None:
    """List recent jobs, or show one job's documents and their status."""
    with runtime_context(ctx) as runtime:
        store = runtime.jobs()
        found = [store.get(job_id)] if job_id else store.list_jobs(limit)
        if job_id and found[0] is None:
            raise CliError(
                f"no job {job_id!r}", hint="`lore jobs` lists recent jobs.", kind="NotFoundError"
            )
        documents = store.statuses(job_id) if job_id else {}
    rows: list[dict[str, Any]] = [
        {
            "id": j.id,
            "kind": j.kind,
            "state": j.state,
            "created_at": j.created_at,
            "counts": j.counts,
            "detail": j.detail,
        }
        for j in found
        if j is not None
    ]
    if as_json:
        body: Any = rows
        if job_id:
            body = {
                **rows[0],
                "documents": {d: {"status": s, "error": e} for d, (s, e) in documents.items()},
            }
        click.echo(json.dumps(body, indent=2))
        return
    for row in rows:
        counts = row["detail"] if row["kind"] == "refresh" else row["counts"]
        shown = ", ".join(
            f"{k} {v}" for k, v in sorted(counts.items()) if not isinstance(v, list | dict)
        )
        out.print(
            f"{row['id']}  {row['kind']:<8} {row['state']:<8} {row['created_at']}  {shown}",
            highlight=False,
        )
    for document_id, (status, error) in documents.items():
        out.print(
            f"  {status.value:<9} {document_id}" + (f": {error}" if error else ""), highlight=False
        )


@graph.command()
@click.option("--rebuild", is_flag=True, help="Recompute the hierarchy from scratch first.")
@click.option(
    "--reextract", is_flag=True, help="Extract every chunk again with the configured extractor."
)
@click.option("--wait/--no-wait", default=True, help="With a broker: follow the job.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def refresh(ctx: click.Context, rebuild: bool, reextract: bool, wait: bool, as_json: bool) -> None:
    """Re-summarise only the communities whose members or their content changed."""
    from app.service import refresh as start_refresh

    with (
        runtime_context(ctx) as runtime,
        progress_reporter(ctx, "extracting", quiet=as_json) as bar,
    ):
        jobs = runtime.jobs()
        result = start_refresh(
            runtime.job_services(),
            rebuild=rebuild,
            reextract=reextract,
            progress=GraphProgress(bar),
        )
        if result.pop("queued"):
            from app.jobs import follow

            job_id = result["job_id"]
            info = follow(jobs, job_id) if wait else jobs.get(job_id)
            result = {"job_id": job_id, **(info.detail if info else {})}
            result["state"] = info.state if info else "unknown"
    if as_json:
        click.echo(json.dumps(result, indent=2))
        return
    shown = ", ".join(f"{k} {v}" for k, v in result.items() if k not in ("rebuild", "reextract"))
    out.print(f"refresh: {shown}", highlight=False)
