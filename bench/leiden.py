"""Hierarchical Leiden on a synthetic graph of N edges.

    python -m bench.leiden --edges 1000000 [--max-cluster-size 10] [--seed 42]

The graph has planted groups of ~40 nodes (80% of edges inside a group, the rest
random), about 5 edges per node. Prints ``{"edges", "nodes", "seconds", "peak_rss_mb",
"levels", "communities"}``; seconds covers ``graph.communities.hierarchical_communities``
(edge merging included), not graph generation.
"""

from __future__ import annotations

import argparse
import json
import resource
import time

import numpy as np

from bench.common import machine
from graph.communities import hierarchical_communities


def synthetic_edges(count: int, seed: int) -> list[tuple[str, str, float]]:
    """``count`` weighted edges with planted groups."""
    rng = np.random.default_rng(seed)
    nodes = max(10, count // 5)
    group = 40
    src = rng.integers(0, nodes, size=count)
    inside = rng.random(count) < 0.8
    dst = (
        np.where(
            inside,
            (src // group) * group + rng.integers(0, group, size=count),
            rng.integers(0, nodes, size=count),
        )
        % nodes
    )
    weight = rng.integers(1, 5, size=count)
    return [(f"n{a}", f"n{b}", float(w)) for a, b, w in zip(src, dst, weight, strict=True)]


def main(argv: list[str] | None = None) -> None:
    """Print the benchmark JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edges", type=int, default=1_000_000)
    parser.add_argument("--max-cluster-size", type=int, default=10)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args(argv)
    edges = synthetic_edges(args.edges, args.seed)
    start = time.perf_counter()
    communities = hierarchical_communities(
        edges, max_cluster_size=args.max_cluster_size, seed=args.seed
    )
    seconds = time.perf_counter() - start
    nodes = {n for a, b, _ in edges for n in (a, b)}
    print(
        json.dumps(
            {
                "edges": args.edges,
                "nodes": len(nodes),
                "seconds": round(seconds, 2),
                "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                "levels": 1 + max((c.level for c in communities), default=-1),
                "communities": len(communities),
                "max_cluster_size": args.max_cluster_size,
                "machine": machine(),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
