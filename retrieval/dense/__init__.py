"""Vector (dense) indexes behind one protocol, chosen by name (imported lazily)."""

from __future__ import annotations

from collections.abc import Sequence
from importlib import import_module
from pathlib import Path
from typing import Protocol

import numpy as np
import numpy.typing as npt

from lore.errors import ConfigurationError
from lore.store import IndexRow
from retrieval.filters import ResolvedFilter

Hits = list[tuple[int, float]]


class DenseIndex(Protocol):
    """A nearest-neighbour index over unit vectors keyed by chunk row id."""

    @property
    def applied_seq(self) -> int:
        """The last change sequence number this index reflects."""
        ...

    def upsert(self, rows: Sequence[IndexRow]) -> None:
        """Add or replace vectors."""
        ...

    def delete(self, row_ids: Sequence[int]) -> None:
        """Remove vectors; unknown ids are ignored."""
        ...

    def commit(self, seq: int) -> None:
        """Persist and record ``seq`` as applied."""
        ...

    def reset(self) -> None:
        """Drop everything (before a rebuild)."""
        ...

    def search(
        self, vector: npt.NDArray[np.float32], limit: int, flt: ResolvedFilter | None = None
    ) -> Hits:
        """Best ``limit`` (row id, cosine similarity) pairs that pass ``flt``."""
        ...

    def vectors(self, row_ids: Sequence[int]) -> npt.NDArray[np.float32]:
        """The stored unit vectors of ``row_ids`` (zeros for unknown ids), one per row."""
        ...

    def __len__(self) -> int:
        """Number of live vectors."""
        ...


ENGINES = {"hnswlib": "retrieval.dense.hnsw:HnswIndex"}


def open_dense_index(engine: str, directory: Path, dimension: int, **options: object) -> DenseIndex:
    """Open (or create) the named engine's index in ``directory``."""
    try:
        target = ENGINES[engine]
    except KeyError:
        raise ConfigurationError(
            f"unknown dense engine {engine!r}; choose one of {', '.join(ENGINES)}"
        ) from None
    module_name, _, class_name = target.partition(":")
    cls = getattr(import_module(module_name), class_name)
    index: DenseIndex = cls(directory, dimension, **options)
    return index
