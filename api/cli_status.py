"""``lore status``: what a data directory holds and how it is configured.

Documents per status (failed and skipped ones with their reasons), chunks, the
embedding model (the one the data was embedded with, or the configured one before the
first ingest), whether the search indexes are caught up with the store, graph counts,
quarantined chunks and the LLM settings (whether a key is set, never the key).
"""

from __future__ import annotations

import json
from typing import Any

import click

from api.cli_common import out, runtime_context
from app.runtime import Runtime
from lore.errors import LoreError
from lore.models import DocumentStatus

LISTED = 50  # failed / skipped documents listed by name


def status_info(runtime: Runtime) -> dict[str, Any]:
    """Everything ``lore status`` shows, as JSON-ready data."""
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
        "embedding_model": recorded or runtime.embedder.name,
        "embedding_model_source": "recorded with the data" if recorded else "configured",
        "embedding_dim": int(store.get_meta("embedding_dim") or runtime.embedder.dimension),
        "indexes": runtime.index_state(),
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


def say(text: str) -> None:
    """One line of the human-readable status."""
    out.print(text, highlight=False)


@click.command()
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def status(ctx: click.Context, as_json: bool) -> None:
    """Documents, chunks, indexes, graph and settings of the data directory."""
    with runtime_context(ctx) as runtime:
        info = status_info(runtime)
    if as_json:
        click.echo(json.dumps(info, indent=2))
        return
    say(f"data dir: {info['data_dir']}")
    say(
        f"embedding model: {info['embedding_model']} ({info['embedding_dim']} dims, "
        f"{info['embedding_model_source']})"
    )
    for key, value in sorted(info["counts"].items()):
        say(f"  {key}: {value}")
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
