"""HNSW vector index on hnswlib (cosine), persisted next to a small state file.

* Grows by doubling its capacity; deletes mark elements (hnswlib never returns them).
* An index of at most ``exact_scan_max_rows`` live vectors is searched exactly: scoring
  them all costs a few milliseconds, and a graph search can miss even a clear best match
  (a one-word query far from every passage: ``FreeBSD`` missed its 0.46 passage, the
  next being 0.24, in one build of a 2,867-vector index and not in another).
* Filters run inside the search: selective filters (at most ``exact_scan_max_rows``
  allowed chunks, or fewer allowed chunks than requested) are answered by an exact scan
  of the allowed vectors; broader ones use hnswlib's filtered search, whose callback
  never admits a disallowed id. Either way top-k results come back whenever k chunks
  match.
* ``ef`` grows with the requested pool so recall does not collapse for large pools.
* Vectors are normalised here (hnswlib's inner-product space holds them as given), so the
  graph, the exact scans' in-memory matrix and a reopened index all score with the same
  bits.
* Given a ``vector_source`` (the store's vectors by row id, as :class:`IndexSet` passes),
  each live vector is on disk once, in the store: ``index.bin`` holds hnswlib's file
  without its vectors (the links, labels and header; ~10 % of it at 384 dimensions), plus
  the vectors of elements marked deleted, which the store no longer has but the graph
  still routes through. An open reads the live vectors back from the store and hands
  hnswlib its whole file again. A row the store no longer holds (deleted after the index's
  last commit) comes back as a zero vector, marked deleted: the catch-up would delete it.
  Without a source (a standalone index) ``index.bin`` is hnswlib's own whole file, which
  an open also reads (an index written before the source existed is one).
* A ``vectors.npy``/``labels.npy`` pair left by an older version is removed at open.
* hnswlib can only save its whole file, so a save costs what the index holds, not what
  changed. An index of ``defer_saves_from`` live vectors or more (20,000 by default) saves
  once ``CHECKPOINT_SHARE`` of it (at least ``CHECKPOINT_MIN_CHANGES`` vectors) changed
  since the last save, or when told to (:meth:`HnswIndex.flush`: the process closes, or
  the periodic sweep finds changes a minute old); until then its changes live in memory
  and in the store's change log, which a new process replays from :attr:`saved_seq`, as
  after a crash. A single-document write then costs what it changed, and a restart
  replays at most a few percent of the index. A smaller index saves at every commit (a
  fraction of a second).
"""

from __future__ import annotations

import os
import struct
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

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
_LINKS = b"lore-hnsw-links\x01"  # starts an index.bin whose live vectors are in the store
_COUNT = struct.Struct("<Q")
DEFER_SAVES_FROM = 20_000
"""Live vectors from which a commit may leave the save to a later checkpoint."""
CHECKPOINT_SHARE = 0.01
"""Share of the live vectors changed since the last save that makes a commit save."""
CHECKPOINT_MIN_CHANGES = 200
"""Vectors changed since the last save that make a commit save, at the least."""

VectorSource = Callable[[Sequence[int]], dict[int, npt.NDArray[np.float32]]]
"""Stored vectors by row id (rows no longer stored are left out)."""


def normalised(vectors: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """Rows scaled to unit length (zero rows stay zero), in float32."""
    matrix = np.asarray(vectors, dtype=np.float32)
    norms = np.sqrt(np.einsum("ij,ij->i", matrix, matrix, dtype=np.float32))
    return np.ascontiguousarray(matrix / (norms[:, None] + np.float32(1e-30)), dtype=np.float32)


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
        vector_source: VectorSource | None = None,
        defer_saves_from: int | None = None,
    ) -> None:
        ensure_dir(directory)
        self._defer_from = DEFER_SAVES_FROM if defer_saves_from is None else defer_saves_from
        self._saved = 0
        self._unsaved = 0  # vectors added or deleted since the last save
        self._unsaved_since: float | None = None
        self._file = directory / "index.bin"
        self._state_path = directory / "state.json"
        self._dim, self._m, self._efc = dimension, m, ef_construction
        self._ef, self._exact_max, self._threads = ef_search, exact_scan_max_rows, threads
        self._source = vector_source
        self._deleted: set[int] = set()
        self._live: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]] | None = None
        """Live labels and their matrix rows, for an exact scan of the whole index."""
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
        self._index = self._empty()
        self._applied = 0
        self._watch = FileWatch(directory)
        self.repaired: str | None = None
        """Why the files were discarded at open (None when they matched the state)."""
        if state.get("applied_seq") and not self._file.exists():
            self.repaired = f"index.bin missing while state.json records seq {state['applied_seq']}"
        if state and self._file.exists():
            try:
                self._deleted = {int(label) for label in state.get("deleted", [])}
                self._live = None
                self._load(int(state["capacity"]))
                self._applied = self._saved = int(state["applied_seq"])
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

    def _empty(self) -> hnswlib.Index:
        return hnswlib.Index(space="ip", dim=self._dim)  # vectors arrive normalised

    def _new(self, capacity: int) -> None:
        self._index = self._empty()
        self._index.init_index(max_elements=capacity, ef_construction=self._efc, M=self._m)
        self._deleted = set()
        self._matrix = np.zeros((0, self._dim), dtype=np.float32)
        self._row_of = {}
        self._live = None
        self._watch.forget()

    def _load(self, capacity: int) -> None:
        """Load ``index.bin``: hnswlib's whole file, or links-only with the store's vectors."""
        with self._file.open("rb") as handle:
            links_only = handle.read(len(_LINKS)) == _LINKS
        if not links_only:
            self._index.load_index(str(self._file), max_elements=capacity)
            read = self._read_records(self._file)
            if read is None:  # not the layout this reader knows: ask hnswlib (slower)
                ids = [int(x) for x in self._index.get_ids_list() if int(x) not in self._deleted]
                labels = np.asarray(ids, dtype=np.int64)
                vectors = np.asarray(self._index.get_items(ids), dtype=np.float32)
                read = labels, vectors.reshape(len(ids), self._dim)
            self._keep_live(*read)
            return
        if self._source is None:
            raise ValueError("index.bin keeps its vectors in the store, and no store was given")
        whole = self._file.with_suffix(".whole")
        try:
            labels, vectors, forgotten = self._rejoin(whole)
            self._index.load_index(str(whole), max_elements=capacity)
        finally:
            whole.unlink(missing_ok=True)
        for label in forgotten:  # deleted from the store after this index's last commit
            self._index.mark_deleted(label)
            self._deleted.add(label)
            self._live = None
        self._keep_live(labels, vectors)

    def _keep_live(self, labels: npt.NDArray[np.int64], vectors: npt.NDArray[np.float32]) -> None:
        """The exact scans' matrix: the vectors of ``labels`` not marked deleted."""
        live = np.fromiter(
            (int(label) not in self._deleted for label in labels), dtype=bool, count=len(labels)
        )
        self._matrix = np.ascontiguousarray(vectors[live], dtype=np.float32)
        self._row_of = {int(label): row for row, label in enumerate(labels[live])}
        self._live = None

    def _layout(self, data: bytes | np.memmap[Any, Any], at: int) -> tuple[int, int, int, int]:
        """(element count, bytes per record, label offset, vector offset) of a saved header."""
        if len(data) < at + _HEADER.size:
            raise ValueError("index.bin is shorter than its header")
        header = _HEADER.unpack(bytes(data[at : at + _HEADER.size]))
        level0, _, count, size, label_at, data_at = header[:6]
        vector_bytes = 4 * self._dim
        if level0 != 0 or data_at + vector_bytes > size or label_at + 8 > size:
            raise ValueError("index.bin's header does not describe this index")
        if data_at < label_at < data_at + vector_bytes:
            raise ValueError("index.bin's header does not describe this index")
        return int(count), int(size), int(label_at), int(data_at)

    def _read_records(
        self, path: Path
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]] | None:
        """Labels and stored vectors of every element of hnswlib's whole file at ``path``.

        None when the header does not describe the loaded index (another hnswlib layout).
        """
        with path.open("rb") as handle:
            head = handle.read(_HEADER.size)
        try:
            count, size, label_at, data_at = self._layout(head, 0)
        except ValueError:
            return None
        if count != int(self._index.get_current_count()):
            return None
        if path.stat().st_size < _HEADER.size + count * size:
            return None
        if count == 0:
            return np.zeros(0, dtype=np.int64), np.zeros((0, self._dim), dtype=np.float32)
        records = np.memmap(
            path, dtype=np.uint8, mode="r", offset=_HEADER.size, shape=(count, size)
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

    def _strip(self, whole: Path, links: Path) -> None:
        """Write to ``links`` the file hnswlib saved at ``whole`` with its live vectors cut."""
        data = whole.read_bytes()
        count, size, label_at, data_at = self._layout(data, 0)
        end = _HEADER.size + count * size
        if len(data) < end:
            raise ValueError("hnswlib wrote a short file")
        records = np.frombuffer(data, dtype=np.uint8, count=count * size, offset=_HEADER.size)
        records = records.reshape(count, size)
        vector_end = data_at + 4 * self._dim
        labels = np.ascontiguousarray(records[:, label_at : label_at + 8]).view("<u8").ravel()
        dead = np.fromiter((int(x) in self._deleted for x in labels), dtype=bool, count=count)
        kept = np.ascontiguousarray(records[dead, data_at:vector_end])
        rest = np.concatenate([records[:, :data_at], records[:, vector_end:]], axis=1)
        with links.open("wb") as handle:  # in pieces, no joined copy of the file
            handle.write(_LINKS)
            handle.write(data[: _HEADER.size])
            handle.write(_COUNT.pack(int(dead.sum())))
            handle.write(np.ascontiguousarray(labels[dead]).data)
            handle.write(kept.data)
            handle.write(rest.data)
            handle.write(memoryview(data)[end:])

    def _rejoin(
        self, whole: Path
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32], list[int]]:
        """Write hnswlib's whole file to ``whole`` from the links-only ``index.bin``.

        Returns every element's label and vector, and the labels the store no longer holds.
        """
        data = self._file.read_bytes()
        at = len(_LINKS)
        count, size, label_at, data_at = self._layout(data, at)
        vector_bytes = 4 * self._dim
        at += _HEADER.size
        (dead,) = _COUNT.unpack_from(data, at)
        at += _COUNT.size
        link_size = size - vector_bytes
        end = at + dead * (8 + vector_bytes) + count * link_size
        if dead > count or len(data) < end:
            raise ValueError("index.bin is shorter than its header says")
        dead_labels = np.frombuffer(data, dtype="<u8", count=dead, offset=at).astype(np.int64)
        at += 8 * dead
        dead_vectors = np.frombuffer(data, dtype="<f4", count=dead * self._dim, offset=at)
        at += dead * vector_bytes
        links = np.frombuffer(data, dtype=np.uint8, count=count * link_size, offset=at)
        links = links.reshape(count, link_size)
        shifted = label_at - vector_bytes if label_at > data_at else label_at
        labels = np.ascontiguousarray(links[:, shifted : shifted + 8]).view("<u8").ravel()
        labels = labels.astype(np.int64)
        vectors = np.zeros((count, self._dim), dtype=np.float32)
        position = {int(label): i for i, label in enumerate(labels)}
        for label, vector in zip(dead_labels, dead_vectors.reshape(dead, self._dim), strict=True):
            vectors[position[int(label)]] = vector
        wanted = [int(x) for x in labels if int(x) not in self._deleted]
        stored = self._source(wanted) if self._source is not None else {}
        found = [label for label in wanted if label in stored]
        if found:
            rows = np.fromiter((position[label] for label in found), dtype=np.int64)
            vectors[rows] = normalised(np.vstack([stored[label] for label in found]))
        forgotten = [label for label in wanted if label not in stored]
        records = np.empty((count, size), dtype=np.uint8)
        records[:, :data_at] = links[:, :data_at]
        records[:, data_at : data_at + vector_bytes] = vectors.view(np.uint8)
        records[:, data_at + vector_bytes :] = links[:, data_at:]
        prefix = len(_LINKS)
        with whole.open("wb") as handle:  # written from the arrays, no joined copy
            handle.write(data[prefix : prefix + _HEADER.size])
            handle.write(records.data)
            handle.write(memoryview(data)[end:])
        return labels, vectors, forgotten

    def _remember(self, labels: npt.NDArray[np.int64], vectors: npt.NDArray[np.float32]) -> None:
        """Keep the vectors of ``labels`` in the exact scans' matrix (later rows: room)."""
        fresh = [i for i, label in enumerate(labels) if int(label) not in self._row_of]
        for i, label in enumerate(labels):
            row = self._row_of.get(int(label))
            if row is not None:
                self._matrix[row] = vectors[i]
        if fresh:
            start = len(self._row_of)
            end = start + len(fresh)
            if end > len(self._matrix):  # grown by a quarter: a write copies no whole matrix
                rows = max(end, len(self._matrix) * 5 // 4 + 1024)
                grown = np.zeros((rows, self._dim), dtype=np.float32)
                grown[:start] = self._matrix[:start]
                self._matrix = grown
            self._matrix[start:end] = vectors[fresh]
            for offset, i in enumerate(fresh):
                self._row_of[int(labels[i])] = start + offset
            self._live = None

    @property
    def applied_seq(self) -> int:
        """Last applied change sequence number (in memory)."""
        return self._applied

    @property
    def saved_seq(self) -> int:
        """The change sequence ``index.bin`` and ``state.json`` reflect."""
        return self._saved

    def unsaved_for(self) -> float | None:
        """Seconds since the oldest change not saved yet (None: everything is saved)."""
        since = self._unsaved_since
        return None if since is None else time.monotonic() - since

    def _changed(self, count: int) -> None:
        if count:
            self._unsaved += count
            if self._unsaved_since is None:
                self._unsaved_since = time.monotonic()

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
        unit = normalised(vectors)  # what hnswlib holds, index.bin or a reopen gives back
        self._index.add_items(unit, labels, num_threads=self._threads)
        self._remember(labels, unit)
        self._changed(len(labels))
        self._deleted.difference_update(int(label) for label in labels)
        self._live = None

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
            self._live = None
            self._changed(1)

    def commit(self, seq: int) -> None:
        """Record ``seq`` as applied; save unless the save can wait for a checkpoint.

        It waits while the index holds ``defer_saves_from`` live vectors or more and fewer
        vectors changed since the last save than ``CHECKPOINT_SHARE`` of them (or than
        ``CHECKPOINT_MIN_CHANGES``, when that is more); a rebuild, a reset or a large
        catch-up saves.
        """
        self._applied = seq
        live = len(self)
        wait = live >= self._defer_from and seq >= self._saved
        if wait and self._unsaved < max(CHECKPOINT_MIN_CHANGES, CHECKPOINT_SHARE * live):
            return
        self._save(seq)

    def flush(self) -> None:
        """Save what was applied and not saved yet (nothing to do when all is saved)."""
        if self._saved != self._applied or self._unsaved:
            self._save(self._applied)

    def _save(self, seq: int) -> None:
        """Save the index file, then the state that vouches for it."""
        # Replaced whole: a crash leaves the old file or the new one, and a state that
        # does not match the file makes the next open rebuild from the store.
        tmp = self._file.with_suffix(".tmp")
        self._index.save_index(str(tmp))
        if self._source is not None:  # the live vectors are the store's: keep the rest
            whole, tmp = tmp, self._file.with_suffix(".links")
            try:
                self._strip(whole, tmp)
            finally:
                whole.unlink(missing_ok=True)
        os.replace(tmp, self._file)
        self._applied = self._saved = seq
        self._unsaved, self._unsaved_since = 0, None
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
        vector = normalised(np.asarray(vector, dtype=np.float32).reshape(1, self._dim))[0]
        if flt is not None:
            if len(flt.allowed) <= max(self._exact_max, limit):
                return self._exact(vector, sorted(flt.allowed), limit)
            k = min(limit, len(flt.allowed))
            allowed = flt.allowed
            return self._knn(vector, k, lambda label: label in allowed) or self._exact(
                vector, sorted(allowed), limit
            )
        if live <= self._exact_max:  # small enough to score every vector: exact, no miss
            return self._exact_all(vector, limit)
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

    def _exact_all(self, vector: npt.NDArray[np.float32], limit: int) -> Hits:
        """:meth:`_exact` over every live vector (label and row arrays kept between questions).

        An unfiltered search of a small index runs on every question: no loop over ids.
        """
        if self._live is None:
            labels = np.fromiter(
                (r for r in self._row_of if r not in self._deleted), dtype=np.int64
            )
            labels.sort()
            rows = np.fromiter((self._row_of[int(r)] for r in labels), dtype=np.int64)
            self._live = labels, rows
        labels, rows = self._live
        return self._top(vector, labels, rows, limit)

    def _exact(self, vector: npt.NDArray[np.float32], row_ids: list[int], limit: int) -> Hits:
        found = [r for r in row_ids if r not in self._deleted and r in self._row_of]
        if not found:
            return []
        rows = np.fromiter((self._row_of[r] for r in found), dtype=np.int64, count=len(found))
        return self._top(vector, np.asarray(found, dtype=np.int64), rows, limit)

    def _top(
        self,
        vector: npt.NDArray[np.float32],
        labels: npt.NDArray[np.int64],
        rows: npt.NDArray[np.int64],
        limit: int,
    ) -> Hits:
        """The ``limit`` best of these labels (their vectors at ``rows``), ties by label."""
        if not len(labels):
            return []
        sims = self._matrix[rows] @ np.asarray(vector, dtype=np.float32)
        top = min(limit, len(labels))
        part = np.argpartition(-sims, top - 1)[:top]
        order = part[np.lexsort((labels[part], -sims[part]))]
        return [(int(labels[i]), float(sims[i])) for i in order]
