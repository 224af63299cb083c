"""The derived search indexes of one data directory and their lifecycle.

:class:`IndexSet` opens the sparse and dense indexes on first use, marks them with the
id of the store they are built from (index files of another store — the database was
replaced — start empty and are rebuilt), catches them up with the store's change
sequence and resets them for a full rebuild.

The id and the sequence number alone cannot tell a store restored from a backup (same
id, and later writes reach the same sequence numbers again) from the one the indexes
saw. So each index's watermark (``indexes.watermark.json``) also records the change
log's rolling digest at the sequence it applied (:meth:`lore.store.Store.digest_at`):
when the store's digest there differs, that index is rebuilt, and :attr:`IndexSet.rebuilt`
says why (``lore status``, ``/readyz``). Index files removed, truncated or overwritten
under a running process are noticed before the next search or catch-up (their directory
is gone, or a file's size or modification time differs from what the process wrote or
loaded: :class:`~retrieval.state.FileWatch`), when an engine fails on them, and by the
periodic sweep, and rebuilt from the store on a background thread
(:meth:`IndexSet.heal_in_background`): meanwhile
searches are refused with :class:`~lore.errors.IndexRebuildingError` (HTTP 503 with
``Retry-After``) instead of waiting inside the request, and writes are stored without
touching the indexes (the rebuild, or the next catch-up, applies them).

Index files are written under a file lock, so two processes never write them at once;
inside a process a readers-writer lock (``guard``, shared with the searcher) keeps
searches off an index being updated.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from lore.db import ensure_dir
from lore.settings import DenseSettings, SparseSettings
from lore.store import Store
from retrieval.analyzer import Analyzer
from retrieval.dense import DenseIndex, open_dense_index
from retrieval.indexes import (
    DerivedIndex,
    catch_up,
    engine_failure,
    index_lock,
    index_lock_if_free,
)
from retrieval.rwlock import ReadWriteLock
from retrieval.sparse import SparseIndex, open_sparse_index

log = logging.getLogger("lore.indexes")

MARKER = "indexes.store-id"
LOCK = "indexes.lock"
WATERMARK = "indexes.watermark.json"
REBUILDING = "rebuilding from the store"  # what health says during a background rebuild
REBUILD_RETRY_AFTER_S = 2  # rebuilding ~10k chunks takes seconds; a client retries soon
BLIND_REBUILD_EVERY_S = 600.0  # rebuilds for damage the files' marks do not show, at most


@dataclass
class IndexSet:
    """The sparse and dense indexes of ``data_dir``, kept caught up with ``store``."""

    store: Store
    data_dir: Path
    analyzer: Analyzer
    sparse_settings: SparseSettings
    dense_settings: DenseSettings
    dimension: int
    """The embedder's dimension; the one recorded in the store wins."""
    guard: ReadWriteLock = field(default_factory=ReadWriteLock)
    _sparse: SparseIndex | None = field(default=None, init=False)
    _dense: DenseIndex | None = field(default=None, init=False)
    _open_lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    _on_disk: set[str] = field(default_factory=set, init=False)
    _rebuilding: dict[str, str] = field(default_factory=dict, init=False)
    _heal_lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    _heal_thread: threading.Thread | None = field(default=None, init=False)
    _blind_at: float = field(default=-BLIND_REBUILD_EVERY_S, init=False)
    rebuilt: dict[str, str] = field(default_factory=dict, init=False)
    """Index name → why it was last rebuilt from the store by this process."""

    def open(self) -> tuple[SparseIndex, DenseIndex]:
        """Both indexes, opened (and checked against the store's id) on first use."""
        sparse, dense = self._sparse, self._dense
        if sparse is not None and dense is not None:  # never waits for a rebuild under way
            return sparse, dense
        with self._open_lock:
            if self._sparse is None or self._dense is None:
                with index_lock(self.data_dir / LOCK):
                    sparse, dense = self._open_sparse(), self._open_dense()
                    self._check_marker(sparse, dense)
                    self._check_watermark({"sparse": sparse, "dense": dense})
                    self._on_disk = {n for n, d in self._directories().items() if d.is_dir()}
                self._sparse, self._dense = sparse, dense
            return self._sparse, self._dense

    def _sparse_dir(self) -> Path:
        return self.data_dir / f"sparse-{self.sparse_settings.engine}-{self.analyzer.config.key()}"

    def _open_sparse(self) -> SparseIndex:
        cfg = self.sparse_settings
        options: dict[str, object] = {}
        if cfg.engine == "rank_bm25":
            options = {
                "variant": cfg.bm25_variant,
                "k1": cfg.k1,
                "b": cfg.b,
                "epsilon": cfg.epsilon,
                "delta": cfg.delta,
            }
        return open_sparse_index(cfg.engine, self._sparse_dir(), self.analyzer, **options)

    def _open_dense(self) -> DenseIndex:
        cfg = self.dense_settings
        recorded = self.store.get_meta("embedding_dim")
        return open_dense_index(
            "hnswlib",
            self.data_dir / "dense-hnswlib",
            int(recorded) if recorded else self.dimension,
            m=cfg.m,
            ef_construction=cfg.ef_construction,
            ef_search=cfg.ef_search,
            exact_scan_max_rows=cfg.exact_scan_max_rows,
            threads=cfg.build_threads,
            vector_source=self.store.vectors_of_rows,
        )

    def _check_marker(self, sparse: SparseIndex, dense: DenseIndex) -> None:
        """Start the indexes empty when their files belong to another store."""
        marker = self.data_dir / MARKER
        store_id = self.store.get_meta("store_id") or ""
        if marker.exists() and marker.read_text().strip() == store_id:
            return
        for index in (sparse, dense):
            index.reset()
            index.commit(0)
        marker.write_text(store_id)

    def _check_watermark(self, indexes: dict[str, DerivedIndex]) -> None:
        """Reset each index whose recorded digest differs from the store's at its seq.

        The caller holds the index lock. An index without a recorded watermark (made
        before watermarks) is trusted once and recorded at the next catch-up.
        """
        recorded = self._read_watermark()
        for name, index in indexes.items():
            mark = recorded.get(name)
            if index.applied_seq == 0 or not isinstance(mark, list) or len(mark) != 2:
                continue
            seq, digest = int(mark[0]), str(mark[1])
            if seq > index.applied_seq:  # files older than their watermark: trust the files
                continue
            actual = self.store.digest_at(seq)
            if actual != digest:
                why = (
                    "the store's change log at seq "
                    f"{seq} is not the one this index was built from (the store was restored "
                    "from a backup or replaced)"
                )
                index.reset()
                index.commit(0)
                self.rebuilt[name] = why

    def _read_watermark(self) -> dict[str, object]:
        path = self.data_dir / WATERMARK
        try:
            loaded = json.loads(path.read_text())
        except (OSError, ValueError):
            return {}
        return loaded if isinstance(loaded, dict) else {}

    def _write_watermark(self, indexes: dict[str, DerivedIndex]) -> None:
        """Record each saved index's seq and the store's digest there (under the lock).

        An index that left its last changes to a later checkpoint (the dense one) keeps
        the mark of the last save, by whichever process made it: its files on disk are
        those, and an open checks them and replays from there.
        """
        marks = self._read_watermark()
        for name, i in indexes.items():
            if i.saved_seq == i.applied_seq:
                marks[name] = [i.applied_seq, self.store.digest_at(i.applied_seq)]
        path = self.data_dir / WATERMARK
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(marks))
        os.replace(tmp, path)

    def _vanished(self) -> dict[str, str]:
        """Indexes whose files were removed under this process (name → what is missing)."""
        out: dict[str, str] = {}
        for name, directory in self._directories().items():
            if name in self._on_disk and not directory.is_dir():
                out[name] = f"its directory {directory.name} was removed while serving"
        return out

    def _damaged(self) -> dict[str, str]:
        """Indexes whose files changed under this process, unconfirmed (name → what changed).

        Another process committing under the index lock changes them too, until it records
        them; :meth:`_confirmed` tells the two apart.
        """
        out: dict[str, str] = {}
        if self._sparse is None or self._dense is None:
            return out
        for name, index in (("sparse", self._sparse), ("dense", self._dense)):
            directory = self._directories()[name]
            if name in self._on_disk and directory.is_dir() and (why := index.damage()):
                out[name] = f"its file {why} in {directory.name} (damaged while serving)"
        return out

    def _confirmed(self) -> dict[str, str]:
        """Vanished indexes, and damaged ones when the index lock is free to confirm it.

        Never waits: while the lock is held (a writer is committing) damage is not judged.
        """
        broken = self._vanished()
        if self._damaged():
            with index_lock_if_free(self.data_dir / LOCK) as held:
                if held:
                    broken = {**self._damaged(), **broken}
        return broken

    def _directories(self) -> dict[str, Path]:
        return {"sparse": self._sparse_dir(), "dense": self.data_dir / "dense-hnswlib"}

    def rebuilding(self) -> dict[str, str]:
        """The indexes being rebuilt from the store right now (name → why; {}: none)."""
        with self._heal_lock:
            return dict(self._rebuilding)

    def heal_in_background(self, suspected: dict[str, str] | None = None) -> dict[str, str]:
        """Start rebuilding vanished or damaged indexes on a thread; what is being rebuilt.

        Returns at once ({}: nothing to rebuild): the caller answers "not now" (503)
        instead of waiting for it. ``suspected``: indexes to rebuild though the damage is
        not confirmed yet (an engine failed on them); the thread confirms it under the lock.
        """
        with self._heal_lock:
            if self._rebuilding:
                return dict(self._rebuilding)
            if self._sparse is None or self._dense is None:
                return {}
            gone = suspected or self._confirmed()
            if not gone:
                return {}
            self._rebuilding = dict(gone)
            self._heal_thread = threading.Thread(
                target=self._heal_and_log,
                args=(suspected or {},),
                name="lore-index-heal",
                daemon=True,
            )
            self._heal_thread.start()
            return dict(gone)

    def recover(self, exc: BaseException) -> dict[str, str]:
        """After an index engine raised ``exc``: the rebuild under way ({}: not damage).

        An engine failing on files that changed under this process starts their rebuild in
        the background (:meth:`heal_in_background`); any other error is the caller's.
        """
        if not engine_failure(exc):
            return {}
        damaged = self._damaged() or self._blindly_damaged(exc)
        if damaged:
            log.warning("an index failed on files damaged under this process: %s", exc)
        return self.heal_in_background(damaged) if damaged else self.rebuilding()

    def _blindly_damaged(self, exc: BaseException) -> dict[str, str]:
        """The keyword index, when its engine reports corruption its files' marks do not show.

        A bad sector keeps a file's size and time; tantivy says so (a panic, or
        "corrupted" — hnswlib never does: its index is read whole at open). Rebuilt at most
        once per :data:`BLIND_REBUILD_EVERY_S`, so an error that is not damage stays visible
        instead of looping through rebuilds.
        """
        said = type(exc).__name__ == "PanicException" or "corrupt" in str(exc).lower()
        now = time.monotonic()
        directory = self._sparse_dir()
        if not said or "sparse" not in self._on_disk or not directory.is_dir():
            return {}
        if now - self._blind_at < BLIND_REBUILD_EVERY_S:
            return {}
        self._blind_at = now
        why = f"its engine failed on its files ({str(exc)[:200]}) (damaged while serving)"
        return {"sparse": why}

    def flush(self, unsaved_for_s: float = 0.0) -> bool:
        """Save the changes an index applied but left to a later checkpoint.

        Only when the oldest of them is ``unsaved_for_s`` seconds old or older (0: any);
        the process closing flushes them all, the periodic sweep those a minute old.
        True when something was saved. Nothing is done while a rebuild runs (it saves).
        """
        dense = self._dense
        if dense is None or self._rebuilding:
            return False
        age = dense.unsaved_for()
        pending = dense.saved_seq != dense.applied_seq or age is not None
        if not pending or (age is not None and age < unsaved_for_s):
            return False
        with index_lock(self.data_dir / LOCK), self.guard.write():
            if self._damaged() or self._vanished():
                return False  # the sweep's heal rebuilds them (and saves)
            dense.flush()
            if self._sparse is not None:
                self._write_watermark({"sparse": self._sparse, "dense": dense})
        return True

    def wait_rebuilt(self, timeout_s: float | None = None) -> bool:
        """Wait for a background rebuild to end; False when it is still running."""
        thread = self._heal_thread
        if thread is not None:
            thread.join(timeout_s)
            return not thread.is_alive()
        return True

    def _heal_and_log(self, suspected: dict[str, str]) -> None:
        try:
            for name, why in self._heal(suspected).items():
                log.warning("rebuilt the %s index from the store: %s", name, why)
        except Exception:  # the thread must not die silently; the next read starts another
            log.exception("rebuilding the indexes from the store failed")
        finally:
            with self._heal_lock:
                self._rebuilding = {}

    def heal(self) -> dict[str, str]:
        """Rebuild from the store any index whose files vanished or were damaged.

        In the calling thread (the periodic sweep, ``reindex``), which waits for the index
        lock to confirm damage; name → reason, {} while a background rebuild is under way.
        """
        with self._heal_lock:
            if self._rebuilding or self._sparse is None or self._dense is None:
                return {}
            gone = {**self._damaged(), **self._vanished()}
            if not gone:
                return {}
            self._rebuilding = dict(gone)
        try:
            return self._heal()
        finally:
            with self._heal_lock:
                self._rebuilding = {}

    def _heal(self, suspected: dict[str, str] | None = None) -> dict[str, str]:
        """Rebuild what the lock confirms vanished or damaged, and the blind suspicions.

        Blind: in ``suspected`` though no file's marks show it (an engine said "corrupt").
        """
        if self._sparse is None or self._dense is None:
            return {}
        with self._open_lock, index_lock(self.data_dir / LOCK), self.guard.write():
            blind = {n: why for n, why in (suspected or {}).items() if "engine failed" in why}
            gone = {**blind, **self._damaged(), **self._vanished()}  # confirmed: we hold the lock
            by_name: dict[str, DerivedIndex] = {"sparse": self._sparse, "dense": self._dense}
            for name, why in gone.items():
                index, directory = by_name[name], self._directories()[name]
                shutil.rmtree(directory, ignore_errors=True)  # damaged files go whole
                ensure_dir(directory)
                getattr(index, "recreate", index.reset)()  # tantivy reopens its directory
                catch_up(self.store, index)
                self.rebuilt[name] = why
            if gone:
                (self.data_dir / MARKER).write_text(self.store.get_meta("store_id") or "")
                self._write_watermark(by_name)
            return gone

    def behind(self) -> bool:
        """True when an index is not open yet or has not applied the store's last change."""
        head = self.store.last_seq()
        return (
            bool(self._vanished())
            or self._sparse is None
            or self._dense is None
            or self._sparse.applied_seq != head
            or self._dense.applied_seq != head
        )

    def catch_up(self) -> dict[str, int]:
        """Catch both indexes up with the store; return the changes each applied.

        Applies nothing while index files that vanished are rebuilt in the background
        (which this starts when needed): that rebuild reads the store to its end.
        """
        sparse, dense = self.open()
        if self.heal_in_background() or not self.behind():
            return {"sparse": 0, "dense": 0}
        failed: BaseException | None = None
        with index_lock(self.data_dir / LOCK), self.guard.write():
            # confirmed now that the lock is held (a writer held it when heal_in_background
            # looked): no engine may merge files cut short under it, as reading a mapped
            # file past its end is a SIGBUS, not an exception
            damaged = self._damaged()
            if not damaged:
                self._check_watermark({"sparse": sparse, "dense": dense})
                try:
                    done = {
                        "sparse": catch_up(self.store, sparse),
                        "dense": catch_up(self.store, dense),
                    }
                except BaseException as exc:
                    if not engine_failure(exc) or not self._damaged():
                        raise
                    failed = exc  # files damaged under us: rebuilt once the lock is released
                else:
                    self._write_watermark({"sparse": sparse, "dense": dense})
                    return done
        if damaged:
            self.heal_in_background(damaged)
        elif failed is not None and not self.recover(failed):
            raise failed
        return {"sparse": 0, "dense": 0}

    def state(self) -> dict[str, object]:
        """Each index's engine and applied change sequence against the store's (read only)."""
        sparse, dense = self.open()
        head = self.store.last_seq()

        def health(name: str, index: object) -> str:
            reason = self.rebuilt.get(name) or getattr(index, "repaired", None)
            return f"rebuilt from the store: {reason}" if reason else "ok"

        return {
            "store_seq": head,
            "sparse": {
                "engine": self.sparse_settings.engine,
                "applied_seq": sparse.applied_seq,
                "health": health("sparse", sparse),
            },
            "dense": {
                "engine": "hnswlib",
                "applied_seq": dense.applied_seq,
                "health": health("dense", dense),
            },
            "current": sparse.applied_seq == head and dense.applied_seq == head,
        }

    def health(self) -> dict[str, str]:
        """Each index's state after a catch-up: ``ok``, why it was rebuilt, or is being."""
        sparse, dense = self.open()
        self.catch_up()
        out: dict[str, str] = {}
        rebuilding = self.rebuilding()
        for name, index in (("sparse", sparse), ("dense", dense)):
            reason = self.rebuilt.get(name) or getattr(index, "repaired", None)
            out[name] = f"rebuilt from the store: {reason}" if reason else "ok"
            if name in rebuilding:
                out[name] = f"{REBUILDING}: {rebuilding[name]}"
        return out

    def reset(
        self, progress: Callable[[str], Callable[[int, int], None]] | None = None
    ) -> dict[str, int]:
        """Rebuild both indexes from the stored chunks.

        ``progress(name)`` gives the ``(done, total)`` callback of index ``name``'s rebuild.
        """
        sparse, dense = self.open()
        self.heal()
        with index_lock(self.data_dir / LOCK), self.guard.write():
            sparse.reset()
            dense.reset()
            done = {
                name: catch_up(self.store, index, progress(name) if progress else None)
                for name, index in (("sparse", sparse), ("dense", dense))
            }
            self._write_watermark({"sparse": sparse, "dense": dense})
            return done
