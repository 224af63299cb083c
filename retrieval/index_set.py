"""The derived search indexes of one data directory and their lifecycle.

:class:`IndexSet` opens the sparse and dense indexes on first use, marks them with the
id of the store they are built from (index files of another store — the database was
replaced — start empty and are rebuilt), catches them up with the store's change
sequence and resets them for a full rebuild. Index files are written under a file lock,
so two processes never write them at once; inside a process a readers-writer lock
(``guard``, shared with the searcher) keeps searches off an index being updated.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

from lore.settings import DenseSettings, SparseSettings
from lore.store import Store
from retrieval.analyzer import Analyzer
from retrieval.dense import DenseIndex, open_dense_index
from retrieval.indexes import catch_up, index_lock
from retrieval.rwlock import ReadWriteLock
from retrieval.sparse import SparseIndex, open_sparse_index

MARKER = "indexes.store-id"
LOCK = "indexes.lock"


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

    def open(self) -> tuple[SparseIndex, DenseIndex]:
        """Both indexes, opened (and checked against the store's id) on first use."""
        with self._open_lock:
            if self._sparse is None or self._dense is None:
                with index_lock(self.data_dir / LOCK):
                    sparse, dense = self._open_sparse(), self._open_dense()
                    self._check_marker(sparse, dense)
                self._sparse, self._dense = sparse, dense
            return self._sparse, self._dense

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
        directory = self.data_dir / f"sparse-{cfg.engine}-{self.analyzer.config.key()}"
        return open_sparse_index(cfg.engine, directory, self.analyzer, **options)

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

    def behind(self) -> bool:
        """True when an index is not open yet or has not applied the store's last change."""
        head = self.store.last_seq()
        return (
            self._sparse is None
            or self._dense is None
            or self._sparse.applied_seq != head
            or self._dense.applied_seq != head
        )

    def catch_up(self) -> dict[str, int]:
        """Catch both indexes up with the store; return the changes each applied."""
        sparse, dense = self.open()
        if not self.behind():
            return {"sparse": 0, "dense": 0}
        with index_lock(self.data_dir / LOCK), self.guard.write():
            return {"sparse": catch_up(self.store, sparse), "dense": catch_up(self.store, dense)}

    def reset(self) -> dict[str, int]:
        """Rebuild both indexes from the stored chunks."""
        sparse, dense = self.open()
        with index_lock(self.data_dir / LOCK), self.guard.write():
            sparse.reset()
            dense.reset()
            return {"sparse": catch_up(self.store, sparse), "dense": catch_up(self.store, dense)}
