"""Which stored documents a path no longer holds (``lore ingest PATH --prune``).

A stored document came from a file when its source (``<label>/<path>``, or
``<label>/<path>.jsonl#record-id`` for a JSON Lines record) starts with the label of a
root the store knows (``ingest.roots``): that root's directory joined with the path is
its file, whatever the working directory. It came from under PATH when that file is
PATH or lies below it (PATH a directory). It is *missing* when its file no longer
exists, or when it is a record its (still existing) file no longer has. Nothing outside
PATH is ever considered (documents stored from uploads, HTTP or MCP have no root), a
PATH that does not exist prunes nothing (a missing mount must not empty the store),
and a JSON Lines file with a line that cannot be read keeps all its records (which
record a broken line held is unknown), reported as kept with the reason.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ingest.roots import directory_of, file_of
from lore.errors import InvalidRequestError
from lore.models import DocumentInfo

JSONL_RECORD = ".jsonl#"


@dataclass
class SyncPlan:
    """Documents to delete, and those kept although they might look missing."""

    missing: list[str] = field(default_factory=list)
    kept: list[tuple[str, str]] = field(default_factory=list)


def missing_documents(
    documents: Sequence[DocumentInfo], paths: Sequence[Path], roots: Mapping[str, Path]
) -> SyncPlan:
    """The documents from under ``paths`` that are no longer there (``roots``: label → dir)."""
    plan = SyncPlan()
    records: dict[Path, set[str] | str] = {}
    for path in paths:
        if not path.exists():
            raise InvalidRequestError(
                f"{path} does not exist: nothing pruned (to forget its documents, "
                "`lore delete` them)"
            )
        base = directory_of(path) if path.is_dir() else directory_of(path) / path.name
        for doc in documents:
            head, sep, _ = doc.source.partition(JSONL_RECORD)
            file = file_of(head + ".jsonl" if sep else doc.source, roots)
            if file is None or not (file == base or (path.is_dir() and base in file.parents)):
                continue
            if not file.exists():
                plan.missing.append(doc.id)
            elif sep:
                held = records.setdefault(file, _record_ids(file))
                if isinstance(held, str):
                    plan.kept.append((doc.id, held))
                elif doc.id not in held:
                    plan.missing.append(doc.id)
    plan.missing = sorted(set(plan.missing))
    return plan


def _record_ids(path: Path) -> set[str] | str:
    """The record ids of a JSON Lines file, or why they cannot all be known."""
    ids: set[str] = set()
    try:
        with path.open("rb") as handle:
            for lineno, raw in enumerate(handle, start=1):
                if not raw.strip():
                    continue
                try:
                    record = json.loads(raw.decode("utf-8-sig"))
                except (UnicodeDecodeError, json.JSONDecodeError):
                    return f"kept: line {lineno} of {path} cannot be read"
                rid = record.get("id", record.get("_id")) if isinstance(record, dict) else None
                if not isinstance(rid, str | int) or isinstance(rid, bool) or not str(rid).strip():
                    return f"kept: line {lineno} of {path} has no usable id"
                ids.add(str(rid))
    except OSError as exc:
        return f"kept: {path} cannot be read ({exc.strerror or exc})"
    return ids
