"""Keeping derived indexes caught up with the store, and the lock that serialises it.

An index records the last change sequence it applied. Catching up replays the changes
after it (net effect per chunk: the last operation wins; rows deleted since are skipped).
A new or reset index is built from the stored chunks directly. Replaying is idempotent,
so a crash between the store write and the index commit only means more replay later;
so does an index that left its save to a later checkpoint (the dense index: a save
writes its whole file), which records only the sequence it saved (``saved_seq``).
"""

from __future__ import annotations

import fcntl
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

from lore.db import ensure_dir
from lore.store import IndexRow
from lore.store_roles import ChangeLog

BATCH = 2000


class DerivedIndex(Protocol):
    """What every derived index has: it replays the store's changes and remembers how far."""

    @property
    def applied_seq(self) -> int:
        """Last applied change sequence number."""
        ...

    def upsert(self, rows: Sequence[IndexRow]) -> None:
        """Add or replace chunks."""
        ...

    def delete(self, row_ids: Sequence[int]) -> None:
        """Remove chunks."""
        ...

    @property
    def saved_seq(self) -> int:
        """The change sequence its files reflect (``applied_seq`` once all is saved)."""
        ...

    def commit(self, seq: int) -> None:
        """Record ``seq`` as applied and persist (an index may leave that to :meth:`flush`)."""
        ...

    def flush(self) -> None:
        """Persist what was applied and not saved yet."""
        ...

    def reset(self) -> None:
        """Drop everything (before a rebuild)."""
        ...

    def damage(self) -> str | None:
        """Why its files on disk are not the ones it last wrote or loaded; None if they are."""
        ...

    def __len__(self) -> int:
        """Number of searchable chunks."""
        ...


def engine_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is how an index engine fails on files it cannot read.

    tantivy raises ValueError (and panics, surfacing as pyo3's ``PanicException``, a
    BaseException) on damaged segments; hnswlib raises RuntimeError; both OSError.
    """
    return isinstance(exc, OSError | RuntimeError | ValueError) or (
        type(exc).__name__ == "PanicException"
    )


Progress = Callable[[int, int], None]
"""``(done, total)`` chunks of a rebuild."""


def catch_up(store: ChangeLog, index: DerivedIndex, progress: Progress | None = None) -> int:
    """Bring ``index`` up to the store's last change; return the changes applied.

    ``progress`` follows a rebuild from scratch (chunks done of all).
    """
    head = store.last_seq()
    applied = index.applied_seq
    if applied == head:
        return 0
    if applied == 0 or applied > head:
        return _rebuild(store, index, head, progress)
    count = 0
    while True:
        changes = store.changes_since(applied, BATCH)
        if not changes:
            break
        last_op: dict[int, str] = {}
        for change in changes:
            last_op[change.row_id] = change.op
        index.delete([row for row, op in last_op.items() if op == "delete"])
        index.upsert(store.index_rows([row for row, op in last_op.items() if op == "upsert"]))
        applied = changes[-1].seq
        count += len(changes)
    index.commit(applied)
    return count


def _rebuild(store: ChangeLog, index: DerivedIndex, head: int, progress: Progress | None) -> int:
    index.reset()
    row_ids = store.all_row_ids()
    for start in range(0, len(row_ids), BATCH):
        index.upsert(store.index_rows(row_ids[start : start + BATCH]))
        if progress is not None:
            progress(min(start + BATCH, len(row_ids)), len(row_ids))
    index.commit(head)
    index.flush()  # a rebuild is saved whole, however it compares with a checkpoint
    return len(row_ids)


@contextmanager
def index_lock(path: Path) -> Iterator[None]:
    """Exclusive lock across processes for writing the index files under a data dir."""
    ensure_dir(path.parent)
    with path.open("a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextmanager
def index_lock_if_free(path: Path) -> Iterator[bool]:
    """:func:`index_lock` when nobody holds it (True inside), else at once False."""
    ensure_dir(path.parent)
    with path.open("a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
