"""Documents stored before ids were root-relative take their new ids when ingested again.

Before issue 26 a file's id (and source) was its path relative to the working directory
of the ingest, absolute outside it: ``examples/corpus/production/alerts/x.md`` from the
repository, ``/home/me/notes/a.md`` from elsewhere. A store made then is marked
``legacy`` (``lore.store.IDS_KEY``). When a root is ingested into it, every loaded file
whose new id (``production/alerts/x.md``) is not stored yet is looked for among the
older documents: one whose source is the file's absolute path, or a tail of it (``…/``
cut at a directory boundary; for a file changed since, a tail that names the root's
folder too, as ``corpus/production/alerts/x.md`` does, not a bare ``alerts/x.md`` that
any root could hold). That document is renamed in place: id, source and
content hash; its chunks, embeddings and graph stay, so an unchanged file is then
skipped as unchanged, and a changed one is re-chunked reusing the embeddings of its
unchanged chunks, as any edit. A JSON Lines record keeps its own id; only its source
(``<file's id>#<record id>``) is updated the same way.

Nothing is renamed on a guess: two older documents that could both be the file (the
same file ingested from two working directories) are left alone when neither holds
exactly the new content, and the file is then stored under its new id beside them
(``lore delete`` removes the older copy).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path, PurePosixPath

from ingest.roots import file_of, owner
from lore.models import DocumentInfo, Loaded, SourceDocument
from lore.store import IDS_KEY, Store
from lore.store_roles import StoreSettings

JSONL_RECORD = ".jsonl#"


def is_legacy(store: StoreSettings) -> bool:
    """True for a store made before file ids were relative to their root."""
    return store.get_meta(IDS_KEY) == "legacy"


def legacy_id_for(path: Path) -> str:
    """The id a file got before: its path relative to the working directory, or absolute."""
    resolved = path.resolve()
    try:
        return resolved.relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return resolved.as_posix()


def file_part(source: str) -> str:
    """A source's file: ``dir/a.jsonl`` for ``dir/a.jsonl#id``, else the source itself."""
    head, sep, _ = source.partition(JSONL_RECORD)
    return head + ".jsonl" if sep else source


def _names_the_root(old_file: str, depth: int) -> bool:
    """True when an older file id reaches up to the root's own folder (or is absolute)."""
    return old_file.startswith("/") or len(PurePosixPath(old_file).parts) > depth


def _tail_of(old_file: str, absolute: str) -> bool:
    return old_file == absolute or (
        not old_file.startswith("/") and absolute.endswith("/" + old_file)
    )


class LegacyIds:
    """Renames older documents to the ids of the files being loaded (see the module)."""

    def __init__(
        self,
        store: Store,
        roots: Mapping[str, Path],
        on_rename: Callable[[str, str], None] | None = None,
    ) -> None:
        self.store = store
        self.roots = roots
        self.on_rename = on_rename
        """Told (old id, new id) after each rename (the quarantine's entries follow)."""
        self._by_name: dict[str, list[DocumentInfo]] | None = None
        self.renamed: list[tuple[str, str]] = []

    def _older(self, name: str) -> list[DocumentInfo]:
        if self._by_name is None:
            self._by_name = {}
            for doc in self.store.list_documents():
                if doc.chunk_count > 0 and not doc.source.startswith("upload:"):
                    key = Path(file_part(doc.source)).name
                    self._by_name.setdefault(key, []).append(doc)
        return self._by_name.get(name, [])

    def adopt(self, doc: SourceDocument) -> None:
        """Rename the older document ``doc`` was stored as, when there is exactly one."""
        new_file = file_part(doc.source)
        file = file_of(new_file, self.roots)
        if file is None:
            return
        stored = self.store.get_document(doc.id)
        record = doc.source != doc.id  # a JSON Lines record: same id, new source
        if stored is not None and (not record or stored.source == doc.source):
            return
        absolute = file.as_posix()
        suffix = doc.source[len(new_file) :]  # "#record-id" or ""
        candidates = [
            old
            for old in ([stored] if stored is not None else self._older(file.name))
            if old.source.endswith(suffix)
            and old.source != doc.source
            and (old.id == doc.id if record else old.source == old.id)
            and _tail_of(file_part(old.source), absolute)
        ]
        same = [old for old in candidates if old.content_hash == _hash_with(doc, old.source)]
        label = owner(new_file, self.roots) or ""
        depth = len(PurePosixPath(new_file[len(label) + 1 :]).parts)  # the path in the root
        pick = same or [old for old in candidates if _names_the_root(file_part(old.source), depth)]
        if len(pick) != 1:
            return
        old = pick[0]
        # changed content: renamed with a hash no content has, so the ingest re-chunks it
        written = doc if same else SourceDocument(doc.id, doc.source, f"renamed from {old.id}")
        if self.store.rename_document(old.id, written, old.content_hash):
            self.renamed.append((old.id, doc.id))
            if self.on_rename is not None:
                self.on_rename(old.id, doc.id)

    def through(self, items: Iterable[Loaded]) -> Iterator[Loaded]:
        """``items`` as they come, each document's older copy renamed first."""
        for item in items:
            if isinstance(item, SourceDocument):
                self.adopt(item)
            yield item


def _hash_with(doc: SourceDocument, source: str) -> str:
    return SourceDocument(doc.id, source, doc.text, doc.title, doc.metadata).content_hash()
