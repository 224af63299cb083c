"""Which stored document a person means: by id, by the source they were shown, or by path.

Search results, ingest reports and ``lore status`` print a document's ``document_id``
and its ``source`` (``production/alert-catalog.jsonl#alert-001`` for a JSON Lines
record, ``upload:notes.md`` for an upload). Every one of those, and a path to the file
as typed in a shell (``./docs/a.md``, found through the store's roots:
``ingest.roots``), names the same document here, so what a user sees is what a user
can act on (delete, show).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ingest.legacy_ids import legacy_id_for
from ingest.roots import known_roots, locate
from lore.errors import InvalidRequestError, NotFoundError
from lore.store import Store


def resolve_document_id(store: Store, ref: str) -> str:
    """The id of the stored document ``ref`` names; ``NotFoundError`` when none does.

    Tried in order: a document id or a recorded source (``Store.resolve_document_id``,
    what HTTP and MCP use too); then a file path under one of the store's roots (and,
    for documents stored before ids were root-relative, relative to the working
    directory), alone or with a ``#record`` suffix. A source shared by
    several documents is an ``InvalidRequestError`` listing them.
    """
    ref = ref.strip()
    if not ref:
        raise InvalidRequestError("give a document id, a source or a file path")
    for candidate in _spellings(ref, known_roots(store)):
        found = store.resolve_document_id(candidate)  # a shared source raises, listing ids
        if found is not None:
            return found
    raise NotFoundError(
        f"no document {ref!r}: it is not a document id, a source or a path the store knows "
        "(`lore status` and search results show both ids and sources)"
    )


def _spellings(ref: str, roots: Mapping[str, Path]) -> list[str]:
    """``ref`` as given, then as the loader would have named the file it points to."""
    out = [ref]
    path_part, sep, record = ref.partition("#")
    for text in dict.fromkeys((ref, path_part)):
        if not text:
            continue
        path = Path(text)
        try:
            exists = path.exists()
        except OSError:  # e.g. a name too long for the filesystem
            exists = False
        if exists:
            for named in (locate(path, roots), legacy_id_for(path)):
                if named is not None:
                    out.append(named if text == ref else f"{named}{sep}{record}")
    return list(dict.fromkeys(out))
