"""Vector (dense) indexes behind one protocol, chosen by name (imported lazily)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
import numpy.typing as npt

from lore.backends import resolve_backend
from retrieval.filters import ResolvedFilter
from retrieval.indexes import DerivedIndex

Hits = list[tuple[int, float]]


class DenseIndex(DerivedIndex, Protocol):
    """A nearest-neighbour index over unit vectors keyed by chunk row id."""

    def search(
        self, vector: npt.NDArray[np.float32], limit: int, flt: ResolvedFilter | None = None
    ) -> Hits:
        """Best ``limit`` (row id, cosine similarity) pairs that pass ``flt``."""
        ...

    def vectors(self, row_ids: Sequence[int]) -> npt.NDArray[np.float32]:
        """The stored unit vectors of ``row_ids`` (zeros for unknown ids), one per row."""
        ...

    def unsaved_for(self) -> float | None:
        """Seconds since the oldest change left unsaved (None: everything is saved)."""
        ...


ENGINES = {"hnswlib": "retrieval.dense.hnsw:HnswIndex"}


def open_dense_index(engine: str, directory: Path, dimension: int, **options: object) -> DenseIndex:
    """Open (or create) the named engine's index in ``directory``."""
    index: DenseIndex = resolve_backend(ENGINES, engine, "dense engine")(
        directory, dimension, **options
    )
    return index
