"""What a one-document write costs the dense index: a save at every commit, or checkpoints.

    python -m bench.dense_checkpoints [--sizes 20000,80000] [--writes 30] [--dim 384]

For each size N, builds an hnswlib index (``retrieval.dense.hnsw.HnswIndex``, the store's
vectors behind it as in a data directory) of N random unit vectors, saved, then times
``--writes`` writes of one document (one vector deleted, one added, then the commit the
catch-up makes) twice: with every commit saving the whole index (``defer_saves_from``
above N: what every write cost before checkpoints) and with the default checkpoints (a
save once 1 % of the index changed). Prints JSON: the machine, the mean seconds per write
of each variant at each size, the checkpoint's share of the save-every-time cost, and
how each variant grew from the smallest size to the largest (the corpus grew by
``sizes[-1] / sizes[0]``; a write's change did not). Synthetic vectors: the figure is
about hnswlib's file, which only the count and the dimension size.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from bench.common import machine
from lore.store import IndexRow
from retrieval.dense.hnsw import HnswIndex


def _vectors(n: int, dim: int, seed: int) -> npt.NDArray[np.float32]:
    rows = np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)
    return np.asarray(rows / np.linalg.norm(rows, axis=1, keepdims=True), dtype=np.float32)


def per_write(directory: Path, size: int, dim: int, writes: int, defer_from: int) -> float:
    """Mean seconds of one write (a delete, an add, the commit) on an index of ``size``."""
    vectors = {i + 1: v for i, v in enumerate(_vectors(size + writes, dim, size))}

    def source(labels: Sequence[int]) -> dict[int, npt.NDArray[np.float32]]:
        return {label: vectors[label] for label in labels if label in vectors}

    index = HnswIndex(
        directory,
        dim,
        vector_source=source,
        threads=os.cpu_count() or 1,
        defer_saves_from=defer_from,
    )
    index.upsert([IndexRow(i, "", vectors[i], []) for i in range(1, size + 1)])
    index.commit(1)
    index.flush()
    start = time.perf_counter()
    for w in range(writes):
        index.delete([w + 1])
        index.upsert([IndexRow(size + 1 + w, "", vectors[size + 1 + w], [])])
        index.commit(2 + w)
    return (time.perf_counter() - start) / writes


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="20000,80000")
    parser.add_argument("--writes", type=int, default=30)
    parser.add_argument("--dim", type=int, default=384)
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="lore-dense-ckpt-") as tmp:
        for size in sizes:
            every = per_write(Path(tmp) / f"e{size}", size, args.dim, args.writes, size + 1)
            checkpoints = per_write(Path(tmp) / f"c{size}", size, args.dim, args.writes, 1)
            rows.append(
                {
                    "vectors": size,
                    "save_every_commit_s": round(every, 4),
                    "checkpoints_s": round(checkpoints, 4),
                    "checkpoints_over_every": round(checkpoints / every, 3),
                }
            )
    first, last = rows[0], rows[-1]
    print(
        json.dumps(
            {
                "machine": machine(),
                "load_average": [round(x, 2) for x in os.getloadavg()],
                "dataset": f"random unit vectors, {args.dim} dimensions",
                "writes_per_size": args.writes,
                "sizes": rows,
                "largest_over_smallest": {
                    "vectors": round(last["vectors"] / first["vectors"], 2),
                    "save_every_commit": round(
                        last["save_every_commit_s"] / first["save_every_commit_s"], 2
                    ),
                    "checkpoints": round(last["checkpoints_s"] / first["checkpoints_s"], 2),
                },
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
