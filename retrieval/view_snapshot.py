"""The global view kept on disk, so a new process does not rebuild it from every report.

A global question ranks every report of a level (:mod:`retrieval.global_search`): a
process reads all reports and communities, checks the stored report vectors and terms
against them, and builds the report BM25, the statement matrix and the chunk-to-report
index. That is Python work per report: ~1.3 s at 10k reports, paid by the first global
question of every new process (each ``lore ask``, each server or worker start).

A snapshot keeps what that work built, in one file of the data directory
(``views/global.pickle``; a delete that changes report text removes it, so deleted text
stays in no file — on other hosts too: each file records the graph store's count of such
deletes, and a process that finds the count moved past its host's file rewrites that
file at its next global question), keyed by the graph's view generation — its write
count and the random token each write of communities or reports draws (``generation()``
of the graph store), so a restored store whose count comes back to an old number does
not match — and by what the derived data depends on: the embedding model, the analyzer's
configuration, and the source of the modules whose objects it holds (an upgrade of
Lorekeeper never reads an older layout). A new process loads it when it is current, or
when it is a few writes behind and the store's view log still names what those writes
touched (the view is then patched with those communities alone, as a long-running
process patches its own). Otherwise the view is read whole, as without a snapshot, and
the snapshot written again.

The file is a pickle read by an unpickler that builds only the plain data classes of
the view and numpy arrays (:data:`ALLOWED`): a damaged or foreign file is ignored, never
executed. Writes go to a temporary file renamed into place, so a reader never sees half
a snapshot, and a failed write (read-only or full disk) only loses the speed-up.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import logging
import os
import pickle
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

FORMAT = 2
FOLDER = "views"  # in the data directory
FILE_NAME = "global.pickle"
EPOCH_NAME = "forgotten"  # how many times a delete removed the snapshot
LOCK_NAME = ".lock"
_PARTIAL = ".global-"  # a snapshot being written (renamed into place when complete)

ALLOWED = frozenset(
    {
        ("graph.communities", "Community"),
        ("graph.models", "CommunityReport"),
        ("graph.models", "Finding"),
        ("retrieval.keypoints", "ReportTerms"),
        ("retrieval.global_search", "StatementMatrix"),
        ("retrieval.global_search", "_Positions"),
        ("retrieval.global_search", "_View"),
        ("numpy", "dtype"),
        ("numpy", "ndarray"),
        ("numpy._core.numeric", "_frombuffer"),
        ("numpy.core.numeric", "_frombuffer"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy.core.multiarray", "_reconstruct"),
    }
)
"""The only globals a snapshot may name: the view's data classes and numpy arrays."""

_SOURCES = (
    "graph.communities",
    "graph.models",
    "retrieval.keypoints",
    "retrieval.global_search",
    "retrieval.report_ranking",
    "retrieval.report_vectors",
    "retrieval.view_snapshot",
)


class _DataOnly(pickle.Unpickler):
    """Builds the classes of :data:`ALLOWED` and nothing else."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in ALLOWED:
            raise pickle.UnpicklingError(f"{module}.{name} is not part of a view snapshot")
        return super().find_class(module, name)


@functools.cache
def code_key() -> str:
    """Hash of the source of every module whose objects a snapshot holds (once a process)."""
    digest = hashlib.sha256(str(FORMAT).encode())
    for name in _SOURCES:
        module = sys.modules.get(name)
        path = getattr(module, "__file__", None)
        digest.update(name.encode())
        if path:
            digest.update(Path(path).read_bytes())
    return digest.hexdigest()[:24]


@dataclass(frozen=True)
class SnapshotKey:
    """What a snapshot was built from: the graph's view generation and the derivation."""

    generation: tuple[int, int]
    embedder: str
    dimension: int
    analyzer: str
    code: str
    forgotten: int = field(default=0, compare=False)
    """The graph store's count of deletes that changed report text, before the view was
    read (``forgot_view``): a file of a lower count may quote what a delete on another
    host removed. Not part of the key's identity."""

    def derived_like(self, other: SnapshotKey) -> bool:
        """Whether ``other`` was derived the same way (it may be of another generation)."""
        return (self.embedder, self.dimension, self.analyzer, self.code) == (
            other.embedder,
            other.dimension,
            other.analyzer,
            other.code,
        )


class ViewSnapshots:
    """The one global view snapshot of a data directory."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.path = directory / FILE_NAME

    @classmethod
    def of(cls, data_dir: Path) -> ViewSnapshots:
        """The snapshot of a data directory (its ``views`` folder)."""
        return cls(data_dir / FOLDER)

    def remove(self) -> None:
        """Drop the snapshot (a delete changed report text it holds: forget it).

        The forget count goes up with it, under the folder's lock: a snapshot being
        written from a view read before (:meth:`save` with that view's :meth:`epoch`) is
        then discarded, not renamed into place with the deleted text.
        """
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            with self._locked():
                (self.directory / EPOCH_NAME).write_text(str(self.epoch() + 1))
                self.path.unlink(missing_ok=True)
                # a writer killed before its rename leaves its file; a live one is
                # discarded anyway (the count moved): neither may keep the text
                for partial in self.directory.glob(f"{_PARTIAL}*"):
                    partial.unlink(missing_ok=True)
        except OSError as exc:
            logger.warning("view snapshot %s not removed: %s", self.path, exc)

    def remove_if_older(self, forgotten: int) -> bool:
        """Remove the snapshot when it was read before the ``forgotten``-th delete.

        ``forgotten``: the graph store's count of deletes that changed report text, on
        any host; a snapshot recording less may quote what one of them removed. Whether
        it was removed (no file, or a current one: False).
        """
        if not self.path.exists():
            return False
        key = self.key()
        if key is None or key.forgotten >= forgotten:
            return False
        self.remove()
        return True

    def epoch(self) -> int:
        """How many times a delete removed the snapshot (read before a view is read)."""
        try:
            return int((self.directory / EPOCH_NAME).read_text() or 0)
        except (OSError, ValueError):
            return 0

    @contextmanager
    def _locked(self) -> Iterator[None]:
        with (self.directory / LOCK_NAME).open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def key(self) -> SnapshotKey | None:
        """The key of the stored snapshot (its first record only); None: none readable."""
        try:
            with self.path.open("rb") as f:
                found = _DataOnly(f).load()
            return _key_of(found)
        except FileNotFoundError:
            return None
        except Exception as exc:  # damaged, foreign or half-written by an older version
            logger.info("view snapshot %s ignored: %s", self.path, exc)
            return None

    def load(self, key: SnapshotKey) -> dict[str, Any] | None:
        """The state stored under ``key`` (None: the file holds another, or is unreadable)."""
        try:
            with self.path.open("rb") as f:
                if _key_of(_DataOnly(f).load()) != key:
                    return None
                state = _DataOnly(f).load()  # a record of its own (its own memo)
        except FileNotFoundError:
            return None
        except Exception as exc:
            logger.info("view snapshot %s ignored: %s", self.path, exc)
            return None
        return state if isinstance(state, dict) else None

    def save(
        self,
        key: SnapshotKey,
        state: dict[str, Any],
        epoch: int | None = None,
        forgotten: Callable[[], int | None] | None = None,
    ) -> bool:
        """Replace the snapshot (atomically); whether it was written.

        ``epoch``: :meth:`epoch` before the view was read; a delete since then removed
        the snapshot, and this one (read before it) is discarded. ``forgotten``: the
        graph store's count of such deletes now, on every host; when it is no longer the
        key's, a delete came after the view was read, and the snapshot is discarded too.
        """
        tmp: str | None = None
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=_PARTIAL, dir=self.directory)
            with os.fdopen(fd, "wb") as f:
                pickle.dump(_key_record(key), f, protocol=5)
                pickle.dump(state, f, protocol=5)
            with self._locked():
                if (epoch is not None and self.epoch() != epoch) or (
                    forgotten is not None and forgotten() != key.forgotten
                ):
                    Path(tmp).unlink(missing_ok=True)
                    return False  # read before a delete: it may quote what went
                os.replace(tmp, self.path)
            return True
        except Exception as exc:  # a snapshot is a speed-up: never fail a question for it
            logger.warning("view snapshot not written to %s: %s", self.path, exc)
            if tmp is not None:
                Path(tmp).unlink(missing_ok=True)
            return False


def _key_record(key: SnapshotKey) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "generation": list(key.generation),
        "embedder": key.embedder,
        "dimension": key.dimension,
        "analyzer": key.analyzer,
        "code": key.code,
        "forgotten": key.forgotten,
    }


def _key_of(found: Any) -> SnapshotKey | None:
    if not isinstance(found, dict) or found.get("format") != FORMAT:
        return None
    generation = found["generation"]
    return SnapshotKey(
        (int(generation[0]), int(generation[1])),
        str(found["embedder"]),
        int(found["dimension"]),
        str(found["analyzer"]),
        str(found["code"]),
        int(found.get("forgotten") or 0),
    )
