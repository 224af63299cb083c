"""HNSW vector index on hnswlib (cosine), persisted next to a small state file.

* Grows by doubling its capacity; deletes mark elements (hnswlib never returns them).
* Filters run inside the search: selective filters (at most ``exact_scan_max_rows``
  allowed chunks, or fewer allowed chunks than requested) are answered by an exact scan
  of the allowed vectors; broader ones use hnswlib's filtered search, whose callback
  never admits a disallowed id. Either way top-k results come back whenever k chunks
  match.
* ``ef`` grows with the requested pool so recall does not collapse for large pools.
* Each vector is on disk twice in all: once in the store (the source of truth the index is
  rebuilt from) and once in ``index.bin``. The in-memory matrix the exact scans use is
  read back from ``index.bin`` at open (its element records, no second file); it holds
  hnswlib's own normalised copy, so exact and graph scores agree and a reopened index
  scores exactly as the one that wrote it. A ``vectors.npy``/``labels.npy`` pair left by
  an older version is removed at open (it only duplicated ``index.bin``).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence
from pathlib import Path

import hnswlib
import numpy as np
import numpy.typing as npt

from lore.db import ensure_dir
from lore.errors import EmbeddingMismatchError
from lore.store import IndexRow
from retrieval.dense import Hits
from retrieval.filters import ResolvedFilter
from retrieval.state import FileWatch, read_state, write_state

_INITIAL_CAPACITY = 1024
# The header hnswlib's saveIndex writes: six size_t fields (level-0 offset, capacity,
# element count, bytes per element record, where a record keeps its label and where its
# vector), an int and a uint32 (top level, entry point), three size_t (M limits), a
# double and a size_t; the element records follow it, one per element.
_HEADER = struct.Struct("<QQQQQQiIQQQdQ")
_OLD_FILES = ("vectors.npy", "labels.npy")  # written before the matrix came from index.bin


class HnswIndex:
    """hnswlib index over row ids; the caller serialises writers across processes."""

    def __init__(
        self,
        directory: Path,
        dimension: int,
        *,
        m: int = 16,
        ef_construction: int = 200,
        ef_search: int = 128,
        exact_scan_max_rows: int = 20_000,
        threads: int = 1,
    ) -> None:
        ensure_dir(directory)
        self._file = directory / "index.bin"
        self._state_path = directory / "state.json"
        self._dim, self._m, self._efc = dimension, m, ef_construction
        self._ef, self._exact_max, self._threads = ef_search, exact_scan_max_rows, threads
        self._deleted: set[int] = set()
        # A plain matrix of every vector, for exact scans (hnswlib's get_items is ~70 ms
        # per 1,000 ids); ~1.5 KB a chunk at 384 dims, in memory only.
        self._matrix = np.zeros((0, dimension), dtype=np.float32)
        self._row_of: dict[int, int] = {}
        state = read_state(self._state_path)
        if state and int(state.get("dim", -1)) != dimension:
            raise EmbeddingMismatchError(
                f"the dense index holds {state.get('dim')}-d vectors, the embedder makes "
                f"{dimension}-d ones"
            )
        self._index = hnswlib.Index(space="cosine", dim=dimension)
        self._applied = 0
        self._watch = FileWatch(directory)
        self.repaired: str | None = None
        """Why the files were discarded at open (None when they matched the state)."""
        if state.get("applied_seq") and not self._file.exists():
            self.repaired = f"index.bin missing while state.json records seq {state['applied_seq']}"
        if state and self._file.exists():
            try:
                self._index.load_index(str(self._file), max_elements=int(state["capacity"]))
                self._deleted = set(state.get("deleted", []))
                self._load_matrix()
                self._applied = int(state["applied_seq"])
                self._watch.adopt([self._file.name])
            except (RuntimeError, OSError, ValueError, KeyError, TypeError) as exc:
                # Damaged or written by another version: start empty; the next catch-up
                # rebuilds it from the stored embeddings.
                self._new(_INITIAL_CAPACITY)
                self._applied = 0
                self.repaired = f"hnswlib could not load the files ({exc})"
        else:
            self._new(_INITIAL_CAPACITY)
        for name in _OLD_FILES:  # the caller holds the index lock
            (directory / name).unlink(missing_ok=True)

    def _new(self, capacity: int) -> None:
        self._index = hnswlib.Index(space="cosine", dim=self._dim)
        self._index.init_index(max_elements=capacity, ef_construction=self._efc, M=self._m)
        self._deleted = set()
        self._matrix = np.zeros((0, self._dim), dtype=np.float32)
        self._row_of = {}
        self._watch.forget()

    def _load_matrix(self) -> None:
        read = self._read_records()
        if read is None:  # not the layout this reader knows: ask hnswlib (slower)
            labels = [int(x) for x in self._index.get_ids_list() if int(x) not in self._deleted]
            matrix = np.asarray(self._index.get_items(labels), dtype=np.float32).reshape(
                len(labels), self._dim
            )
        else:
            all_labels, all_vectors = read
            keep = np.fromiter(
                (int(label) not in self._deleted for label in all_labels),
                dtype=bool,
                count=len(all_labels),
            )
            labels = [int(x) for x in all_labels[keep]]
            matrix = all_vectors[keep]
        self._matrix = np.ascontiguousarray(matrix, dtype=np.float32)
        self._row_of = {label: row for row, label in enumerate(labels)}

    def _read_records(
        self,
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]] | None:
        """Labels and stored vectors of every element, read from ``index.bin`` directly.

        None when the header does not describe the loaded index (another hnswlib layout).
        """
        count = int(self._index.get_current_count())
        with self._file.open("rb") as handle:
            head = handle.read(_HEADER.size)
        if len(head) != _HEADER.size:
            return None
        level0, _, current, size, label_at, data_at = _HEADER.unpack(head)[:6]
        if (
            level0 != 0
            or current != count
            or data_at + 4 * self._dim > size
            or label_at + 8 > size
            or self._file.stat().st_size < _HEADER.size + current * size
        ):
            return None
        if count == 0:
            return np.zeros(0, dtype=np.int64), np.zeros((0, self._dim), dtype=np.float32)
        records = np.memmap(
            self._file, dtype=np.uint8, mode="r", offset=_HEADER.size, shape=(current, size)
        )
        try:
            vectors = np.ascontiguousarray(records[:, data_at : data_at + 4 * self._dim])
            labels = np.ascontiguousarray(records[:, label_at : label_at + 8])
        finally:
            del records
        return (
            labels.view("<u8").reshape(count).astype(np.int64),
            vectors.view("<f4").reshape(count, self._dim).astype(np.float32),
        )

    def _remember(self, labels: npt.NDArray[np.int64], vectors: npt.NDArray[np.float32]) -> None:
        fresh = [i for i, label in enumerate(labels) if int(label) not in self._row_of]
        for i, label in enumerate(labels):
            row = self._row_of.get(int(label))
            if row is not None:
                self._matrix[row] = vectors[i]
        if fresh:
            start = len(self._row_of)
            self._matrix = np.concatenate([self._matrix[:start], vectors[fresh]])
            for offset, i in enumerate(fresh):
                self._row_of[int(labels[i])] = start + offset

    @property
    def applied_seq(self) -> int:
        """Last applied change sequence number."""
        return self._applied

    def upsert(self, rows: Sequence[IndexRow]) -> None:
        """Add vectors, growing the index as needed."""
        if not rows:
            return
        needed = self._index.get_current_count() + len(rows)
        capacity = self._index.get_max_elements()
        if needed > capacity:
            while capacity < needed:
                capacity *= 2
            self._index.resize_index(capacity)
        labels = np.asarray([row.row_id for row in rows], dtype=np.int64)
        vectors = np.vstack([row.embedding for row in rows]).astype(np.float32, copy=False)
        if vectors.shape[1] != self._dim:
            raise EmbeddingMismatchError(
                f"vector of size {vectors.shape[1]} in a {self._dim}-d index"
            )
        self._index.add_items(vectors, labels, num_threads=self._threads)
        # hnswlib's own normalised copy: what index.bin holds and a reopen reads back
        stored = np.asarray(self._index.get_items(labels), dtype=np.float32)
        self._remember(labels, stored.reshape(len(labels), self._dim))
        self._deleted.difference_update(int(label) for label in labels)

    def delete(self, row_ids: Sequence[int]) -> None:
        """Mark vectors deleted."""
        for row_id in row_ids:
            if row_id in self._deleted:
                continue
            try:
                self._index.mark_deleted(int(row_id))
            except RuntimeError as exc:
                if "already deleted" not in str(exc):
                    continue  # never added: nothing to delete
            self._deleted.add(int(row_id))

    def commit(self, seq: int) -> None:
        """Save the index file, then the state that vouches for it."""
        # Replaced whole: a crash leaves the old file or the new one, and a state that
        # does not match the file makes the next open rebuild from the store.
        tmp = self._file.with_suffix(".tmp")
        self._index.save_index(str(tmp))
        os.replace(tmp, self._file)
        self._applied = seq
        write_state(
            self._state_path,
            {
                "applied_seq": seq,
                "dim": self._dim,
                "capacity": self._index.get_max_elements(),
                "deleted": sorted(self._deleted),
                "files": self._watch.adopt([self._file.name]),
            },
        )
        self._watch.adopt([self._file.name])  # and state.json as just written

    def damage(self) -> str | None:
        """Why ``index.bin`` or ``state.json`` is not what this process wrote or loaded."""
        return self._watch.damage()

    def reset(self) -> None:
        """Start an empty index."""
        self._new(_INITIAL_CAPACITY)
        self._applied = 0

    def vectors(self, row_ids: Sequence[int]) -> npt.NDArray[np.float32]:
        """Stored vectors by row id, from the in-memory matrix (zeros when unknown)."""
        out = np.zeros((len(row_ids), self._dim), dtype=np.float32)
        for i, row_id in enumerate(row_ids):
            row = self._row_of.get(int(row_id))
            if row is not None:
                out[i] = self._matrix[row]
        return out

    def __len__(self) -> int:
        return int(self._index.get_current_count()) - len(self._deleted)

    def search(
        self, vector: npt.NDArray[np.float32], limit: int, flt: ResolvedFilter | None = None
    ) -> Hits:
        """Top ``limit`` by cosine similarity among the vectors ``flt`` allows."""
        live = len(self)
        if limit <= 0 or live <= 0:
            return []
        if flt is not None:
            if len(flt.allowed) <= max(self._exact_max, limit):
                return self._exact(vector, sorted(flt.allowed), limit)
            k = min(limit, len(flt.allowed))
            allowed = flt.allowed
            return self._knn(vector, k, lambda label: label in allowed) or self._exact(
                vector, sorted(allowed), limit
            )
        k = min(limit, live)
        return self._knn(vector, k, None) or self._exact(vector, sorted(self._row_of), limit)

    def _knn(self, vector: npt.NDArray[np.float32], k: int, accept: object) -> Hits | None:
        self._index.set_ef(max(self._ef, 2 * k))
        try:
            labels, distances = self._index.knn_query(vector, k=k, filter=accept)
        except RuntimeError:
            return None  # hnswlib could not find k results (heavy deletes): scan instead
        return [
            (int(label), 1.0 - float(dist))
            for label, dist in zip(labels[0], distances[0], strict=True)
        ]

    def _exact(self, vector: npt.NDArray[np.float32], row_ids: list[int], limit: int) -> Hits:
        found = [r for r in row_ids if r not in self._deleted and r in self._row_of]
        if not found:
            return []
        rows = np.fromiter((self._row_of[r] for r in found), dtype=np.int64, count=len(found))
        sims = self._matrix[rows] @ np.asarray(vector, dtype=np.float32)
        top = min(limit, len(found))
        part = np.argpartition(-sims, top - 1)[:top]
        order = part[np.lexsort((np.asarray(found)[part], -sims[part]))]
        return [(found[i], float(sims[i])) for i in order]
