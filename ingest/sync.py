"""Which stored documents a path no longer holds (``lore ingest PATH --prune``).

A document came from under PATH when its source is PATH's id, lies below it (PATH a
directory) or is a record of a JSON Lines file there (``file.jsonl#record-id``). It is
*missing* when its file no longer exists, or when it is a record its (still existing)
file no longer has. Nothing outside PATH is ever considered, a PATH that does not
exist prunes nothing (a missing mount must not empty the store), and a JSON Lines file
with a line that cannot be read keeps all its records (which record a broken line held
is unknown), reported as kept with the reason.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ingest.loaders import document_id_for
from lore.errors import InvalidRequestError
from lore.models import DocumentInfo

JSONL_RECORD = ".jsonl#"


@dataclass
class SyncPlan:
    """Documents to delete, and those kept although they might look missing."""

    missing: list[str] = field(default_factory=list)
    kept: list[tuple[str, str]] = field(default_factory=list)


def missing_documents(documents: Sequence[DocumentInfo], paths: Sequence[Path]) -> SyncPlan:
    """The documents from under ``paths`` that are no longer there (ids relative to cwd)."""
    plan = SyncPlan()
    records: dict[str, set[str] | str] = {}
    for path in paths:
        if not path.exists():
            raise InvalidRequestError(
                f"{path} does not exist: nothing pruned (to forget its documents, "
                "`lore delete` them)"
            )
        base = document_id_for(path)
        prefix = "" if base == "." else base + "/"
        for doc in documents:
            source = doc.source
            file_id, sep, _ = source.partition(JSONL_RECORD)
            file_id = file_id + ".jsonl" if sep else source
            under = file_id == base or (path.is_dir() and file_id.startswith(prefix))
            if not under or (prefix == "" and file_id.startswith("/")):
                continue
            file = Path(file_id)
            if not file.exists():
                plan.missing.append(doc.id)
            elif sep:
                held = records.setdefault(file_id, _record_ids(file))
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
