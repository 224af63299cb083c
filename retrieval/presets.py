"""Search presets: named, typed settings of a local query, the same at every door.

A request names one with ``"preset"`` (HTTP and ``lore search --request``), ``lore
search --preset NAME``, the MCP ``search`` tool's ``preset``, or the benchmarks'
``--methods``. The preset fills the fields it sets that the request leaves out; a field
the request gives itself wins (``{"preset": "sparse", "hybrid_params":
{"dense_weight": 0.2}}`` is BM25 with a little of the dense list).

==============  ==========================================================================
``hybrid_rrf``  BM25 and dense together, weighted Reciprocal Rank Fusion (the default)
``sparse``      BM25 alone (exact words and identifiers)
``dense``       the dense (embedding) list alone (paraphrases)
``relative_score``  both lists, fused by their min-max scaled scores instead of ranks
``mmr``         hybrid_rrf, then maximal marginal relevance at diversity 0.2
``graph``       hybrid_rrf plus the knowledge-graph list at weight 1
==============  ==========================================================================
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

PresetName = Literal["hybrid_rrf", "sparse", "dense", "relative_score", "mmr", "graph"]
MMR_DIVERSITY = 0.2
"""The diversity of the ``mmr`` preset (compare others: ``bench.beir --mmr-sweep 0.1,0.3``)."""


@dataclass(frozen=True)
class SearchPreset:
    """The request fields a preset sets; None leaves a field to the request or settings."""

    name: PresetName
    summary: str
    dense_weight: float | None = None
    sparse_weight: float | None = None
    feedback_boost: float | None = None
    fusion: Literal["rrf", "relative_score"] | None = None
    diversity: float | None = None
    graph_weight: float | None = None

    def fill(self, request: dict[str, Any]) -> dict[str, Any]:
        """``request`` (raw fields) with this preset's values where it has none (or None)."""
        filled = dict(request)
        for name in ("fusion", "diversity", "graph_weight"):
            value = getattr(self, name)
            if value is not None and filled.get(name) is None:
                filled[name] = value
        hybrid: Any = filled.get("hybrid_params")
        dump = getattr(hybrid, "model_dump", None)
        if dump is not None:  # HybridParams given from Python: the fields it sets
            hybrid = dump(exclude_none=True)
        if hybrid is None or isinstance(hybrid, dict):
            params = dict(hybrid or {})
            for name in ("dense_weight", "sparse_weight", "feedback_boost"):
                value = getattr(self, name)
                if value is not None and params.get(name) is None:
                    params[name] = value
            if params:
                filled["hybrid_params"] = params
        return filled


PRESETS: dict[str, SearchPreset] = {
    p.name: p
    for p in (
        SearchPreset("hybrid_rrf", "BM25 and dense, weighted Reciprocal Rank Fusion"),
        SearchPreset("sparse", "BM25 alone", dense_weight=0.0, sparse_weight=1.0),
        SearchPreset(
            "dense",
            "the dense list alone",
            dense_weight=1.0,
            sparse_weight=0.0,
            feedback_boost=0.0,
        ),
        SearchPreset("relative_score", "both, fused by scaled scores", fusion="relative_score"),
        SearchPreset("mmr", "hybrid, then MMR diversity", diversity=MMR_DIVERSITY),
        SearchPreset("graph", "hybrid plus the knowledge-graph list", graph_weight=1.0),
    )
}
