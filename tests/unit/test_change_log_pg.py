"""The change log on PostgreSQL: readers catching up by "seq > last" never skip a change.

A slow writer takes its sequence number and then sleeps before committing (a trigger on
``changes`` sleeps in the writer's transaction, for connections that set ``lore.slow``);
a fast writer commits meanwhile. Without the change-log lock the fast writer's higher
seq becomes visible first, a reader moves past it, and the slow writer's lower seq,
committed later, is never read. With the lock (what :class:`Store` does) the fast writer
waits, and the reader sees every seq. The unlocked case runs too, as proof that the test
can see the skip it guards against.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from lore.db import Conn, PostgresDatabase
from lore.models import SourceDocument
from lore.store import NewChunk, Store

SLOW_S = 1.0

_SLOW_TRIGGER = (
    "CREATE FUNCTION slow_change() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    "PERFORM pg_sleep(COALESCE(NULLIF(current_setting('lore.slow', true), ''), '0')::float8); "
    "RETURN NEW; END $$",
    "CREATE TRIGGER slow_change AFTER INSERT ON changes FOR EACH ROW "
    "EXECUTE FUNCTION slow_change()",
)


class UnlockedPostgres(PostgresDatabase):
    """A PostgreSQL database whose writers skip the change-log lock (the bug, on purpose)."""

    def lock_change_log(self, conn: Conn) -> None:
        """Take no lock."""


def _document(name: str) -> tuple[SourceDocument, list[NewChunk]]:
    vector = np.ones(4, dtype=np.float32)
    chunk = NewChunk(f"{name}-0", 0, f"text of {name}", "", 3, f"h-{name}", vector)
    return SourceDocument(name, f"{name}.md", f"text of {name}", "", {}), [chunk]


def _run(url: str, *, locked: bool) -> tuple[list[int], list[int], dict[str, float]]:
    """Slow and fast writers with a polling reader.

    Returns the seqs the reader collected, the final log, and per writer its seq and
    when it committed.
    """
    kind = PostgresDatabase if locked else UnlockedPostgres
    setup = Store(PostgresDatabase(url, "lore"))
    with setup.database.write() as db:
        for statement in _SLOW_TRIGGER:
            db.execute(statement)
    slow_url = f"{url}?options=-c%20lore.slow%3D{SLOW_S}"
    slow, fast = Store(kind(slow_url, "lore")), Store(kind(url, "lore"))
    reader = Store(PostgresDatabase(url, "lore"))
    done = threading.Event()
    seen: list[int] = []
    committed: dict[str, float] = {}

    def write(store: Store, name: str, delay_s: float) -> None:
        time.sleep(delay_s)
        store.replace_document(*_document(name))
        committed[f"{name}_at"] = time.monotonic()

    def read() -> None:
        last = 0
        while True:
            finished = done.is_set()
            for change in reader.changes_since(last):
                seen.append(change.seq)
                last = change.seq
            if finished:
                return
            time.sleep(0.01)

    writers = [
        threading.Thread(target=write, args=(slow, "slow", 0.0)),
        threading.Thread(target=write, args=(fast, "fast", 0.2)),
    ]
    polling = threading.Thread(target=read)
    polling.start()
    for thread in writers:
        thread.start()
    for thread in writers:
        thread.join()
    done.set()
    polling.join()
    log = reader.changes_since(0)
    documents = reader.document_ids_of([c.row_id for c in log])
    by_doc: dict[str, float] = {documents[c.row_id]: c.seq for c in log}
    final = [c.seq for c in log]
    for store in (setup, slow, fast, reader):
        store.database.close()
    return seen, final, {**by_doc, **committed}


@pytest.mark.parametrize("locked", [True, False], ids=["with-lock", "without-lock"])
def test_reader_never_skips_a_change_committed_late(postgres_url: str, locked: bool) -> None:
    seen, final, got = _run(postgres_url, locked=locked)
    assert len(final) == 2
    assert got["slow"] < got["fast"]  # the slow writer took its seq first either way
    if locked:
        assert got["fast_at"] > got["slow_at"]  # the fast writer waited for the slow one
        assert seen == final  # every change read, in order, exactly once
    else:  # the interleaving the lock prevents: the fast commit first, the slow seq skipped
        assert got["fast_at"] < got["slow_at"]
        assert got["fast"] in seen and got["slow"] not in seen


def _commit_times(url: str, slow_schema: str, fast_schema: str) -> dict[str, float]:
    """A slow writer on one schema, a fast one 0.2 s later on another (or the same).

    Returns when each began and committed, and the seq each took.
    """
    setup = Store(PostgresDatabase(url, slow_schema))
    with setup.database.write() as db:
        for statement in _SLOW_TRIGGER:
            db.execute(statement)
    slow_url = f"{url}?options=-c%20lore.slow%3D{SLOW_S}"
    stores = {
        "slow": Store(PostgresDatabase(slow_url, slow_schema)),
        "fast": Store(PostgresDatabase(url, fast_schema)),
    }
    times: dict[str, float] = {}

    def write(name: str, delay_s: float) -> None:
        time.sleep(delay_s)
        times[f"{name}_began"] = time.monotonic()
        stores[name].replace_document(*_document(name))
        times[f"{name}_at"] = time.monotonic()

    writers = [
        threading.Thread(target=write, args=("slow", 0.0)),
        threading.Thread(target=write, args=("fast", 0.2)),
    ]
    for thread in writers:
        thread.start()
    for thread in writers:
        thread.join()
    for name, store in stores.items():
        times[f"{name}_seqs"] = len(store.changes_since(0))
    for store in (setup, *stores.values()):
        store.database.close()
    return times


@pytest.mark.parametrize("same_schema", [True, False], ids=["same-schema", "other-schema"])
def test_change_log_lock_is_per_schema(postgres_url: str, same_schema: bool) -> None:
    """Writers of one schema wait for each other; a namespace in another schema does not."""
    got = _commit_times(postgres_url, "ns_a", "ns_a" if same_schema else "ns_b")
    fast_took = got["fast_at"] - got["fast_began"]
    if same_schema:
        assert got["fast_at"] > got["slow_at"]  # queued behind the slow writer's lock
        assert fast_took > SLOW_S / 2
        assert got["slow_seqs"] == got["fast_seqs"] == 2  # one log holding both
    else:
        assert got["fast_at"] < got["slow_at"]  # committed while the slow one still held its lock
        assert fast_took < SLOW_S / 2
        assert (got["slow_seqs"], got["fast_seqs"]) == (1, 1)  # a log per schema
