"""``lore status``: what a data directory holds and how it is configured.

Documents per status (failed and skipped ones with their reasons), chunks, the roots
ids are labelled by (``ingest.roots``), the
embedding model (the one the data was embedded with, or the configured one before the
first ingest), whether the search indexes are caught up with the store, graph counts,
quarantined chunks and the LLM settings (whether a key is set, never the key).

``--forget-missing`` first deletes the *failed* documents whose source file no longer
exists (a typo'd path, a file removed after its failure); a failed document whose file
is still there stays listed, as do done and skipped ones (``lore ingest --prune``
handles those).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from api.cli_common import out, runtime_context

if TYPE_CHECKING:
    from app.runtime import Runtime
    from app.services import JobServices
    from lore.store import Store

LISTED = 50  # failed / skipped documents listed by name


def status_info(runtime: Runtime) -> dict[str, Any]:
    """Everything ``lore status`` shows, as JSON-ready data."""
    from ingest.roots import known_roots
    from lore.errors import LoreError
    from lore.models import DocumentStatus
    from lore.store import IDS_KEY

    settings = runtime.settings
    store = runtime.store
    recorded = store.get_meta("embedding_model")
    problems = {
        state.value: [
            {"id": d.id, "source": d.source, "reason": d.error or ""}
            for d in store.list_documents(state)
        ]
        for state in (DocumentStatus.FAILED, DocumentStatus.SKIPPED)
    }
    graph: dict[str, Any]
    try:
        graph = {"backend": settings.graph.backend, **runtime.graph().counts()}
    except LoreError as exc:
        graph = {"backend": settings.graph.backend, "error": str(exc)}
    llm = settings.llm
    return {
        "data_dir": str(runtime.data_dir),
        "counts": store.counts(),
        "roots": {label: str(path) for label, path in sorted(known_roots(store).items())},
        "document_ids": store.get_meta(IDS_KEY),
        "embedding_model": recorded or runtime.embedder.name,
        "embedding_model_source": "recorded with the data" if recorded else "configured",
        "embedding_dim": int(store.get_meta("embedding_dim") or runtime.embedder.dimension),
        "indexes": runtime.indexes.state(),
        "graph": graph,
        "quarantined_chunks": len(runtime.quarantine().chunk_ids()),
        "llm": {
            "base_url": llm.base_url,
            "model": llm.model if llm.base_url else None,
            "api_key": "set" if llm.api_key is not None else "not set",
            "extractor": settings.graph.extractor,
            "reports": settings.graph.reports,
        },
        "failed": problems["failed"],
        "skipped": problems["skipped"],
        "rejected_replacements": [
            {"id": d, "source": src, "reason": why, "at": at}
            for d, src, why, at in store.rejected_replacements()
        ],
    }


def missing_failed(store: Store) -> list[str]:
    """Failed documents whose source file does not exist.

    A source under one of the store's roots is that root's file; any other (stored
    before ids were root-relative) is read as a path relative to the working directory.
    """
    from ingest.legacy_ids import file_part
    from ingest.roots import file_of, known_roots
    from lore.models import DocumentStatus

    roots = known_roots(store)
    gone = []
    for doc in store.list_documents(DocumentStatus.FAILED):
        source = file_part(doc.source)
        file = file_of(source, roots) or Path(source)
        if not file.exists():
            gone.append(doc.id)
    return gone


def forget_missing_documents(services: JobServices) -> list[str]:
    """Delete :func:`missing_failed` documents (one delete job); returns their ids."""
    from app.lifecycle import delete

    gone = missing_failed(services.store)
    if gone:
        delete(services, gone, wait=True)
    return gone


def say(text: str) -> None:
    """One line of the human-readable status."""
    out.print(text, highlight=False)


@click.command()
@click.option("--json", "as_json", is_flag=True)
@click.option(
    "--forget-missing",
    is_flag=True,
    help="First delete the failed documents whose source file no longer exists.",
)
@click.pass_context
def status(ctx: click.Context, as_json: bool, forget_missing: bool) -> None:
    """Documents, chunks, indexes, graph and settings of the data directory."""
    forgotten: list[str] = []
    with runtime_context(ctx) as runtime:
        if forget_missing:
            forgotten = forget_missing_documents(runtime.job_services())
        info = status_info(runtime)
    if forget_missing:
        info["forgotten"] = forgotten
    if as_json:
        click.echo(json.dumps(info, indent=2))
    else:
        print_status(info)


def print_status(info: dict[str, Any]) -> None:
    """The human-readable status."""
    if "forgotten" in info:
        forgotten = info["forgotten"]
        say(f"forgot {len(forgotten)} failed documents whose file no longer exists")
        for document_id in forgotten:
            say(f"  forgot {document_id}")
    say(f"data dir: {info['data_dir']}")
    say(
        f"embedding model: {info['embedding_model']} ({info['embedding_dim']} dims, "
        f"{info['embedding_model_source']})"
    )
    for key, value in sorted(info["counts"].items()):
        say(f"  {key}: {value}")
    for label, path in info["roots"].items():
        say(f"root {label}/ ← {path}")
    if info["document_ids"] == "legacy":
        say("some ids may predate root labels: ingesting a root again renames its documents")
    idx = info["indexes"]
    state = "current" if idx["current"] else "behind (caught up on the next search)"
    say(
        f"indexes: {state} — store seq {idx['store_seq']}, sparse {idx['sparse']['engine']} "
        f"at {idx['sparse']['applied_seq']}, dense {idx['dense']['engine']} "
        f"at {idx['dense']['applied_seq']}"
    )
    for name in ("sparse", "dense"):
        if idx[name]["health"] != "ok":
            say(f"  {name} index {idx[name]['health']}")
    graph = info["graph"]
    shown = ", ".join(f"{k} {v}" for k, v in sorted(graph.items()) if k != "backend")
    say(f"graph ({graph['backend']}): {shown}")
    say(f"quarantined chunks: {info['quarantined_chunks']}")
    llm = info["llm"]
    if llm["base_url"]:
        say(f"llm: {llm['model']} at {llm['base_url']} (api key {llm['api_key']})")
    else:
        say("llm: none configured (offline extractor and extractive reports)")
    say(f"graph extractor: {llm['extractor']}, reports: {llm['reports']}")
    for label, colour in (
        ("failed", "red"),
        ("skipped", "yellow"),
        ("rejected_replacements", "yellow"),
    ):
        items = info[label]
        for item in items[:LISTED]:
            say(f"  [{colour}]{label}[/] {item['id']}: {item['reason']}")
        if len(items) > LISTED:
            say(f"  … and {len(items) - LISTED} more {label} (`lore status --json` lists all)")
