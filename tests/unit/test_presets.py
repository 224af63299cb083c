"""Search presets (``retrieval.presets``): typed, filled into a request, the request wins."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from bench.beir import METHODS
from retrieval.contract import HybridParams, QueryRequest
from retrieval.presets import MMR_DIVERSITY, PRESETS


def _request(**fields: object) -> QueryRequest:
    return QueryRequest.model_validate({"search_text": "HTTP 504", **fields})


@pytest.mark.parametrize(
    ("preset", "dense", "sparse", "fusion", "diversity", "graph"),
    [
        ("hybrid_rrf", None, None, "rrf", None, None),
        ("sparse", 0.0, 1.0, "rrf", None, None),
        ("dense", 1.0, 0.0, "rrf", None, None),
        ("relative_score", None, None, "relative_score", None, None),
        ("mmr", None, None, "rrf", MMR_DIVERSITY, None),
        ("graph", None, None, "rrf", None, 1.0),
    ],
)
def test_each_preset_sets_its_fields(
    preset: str,
    dense: float | None,
    sparse: float | None,
    fusion: str,
    diversity: float | None,
    graph: float | None,
) -> None:
    request = _request(preset=preset)
    assert request.preset == preset
    assert (request.hybrid_params.dense_weight, request.hybrid_params.sparse_weight) == (
        dense,
        sparse,
    )
    assert (request.fusion, request.diversity, request.graph_weight) == (fusion, diversity, graph)


def test_fields_the_request_gives_win_over_the_preset() -> None:
    mixed = _request(preset="sparse", hybrid_params={"dense_weight": 0.2}, fusion="relative_score")
    assert mixed.hybrid_params.dense_weight == 0.2 and mixed.hybrid_params.sparse_weight == 1.0
    assert mixed.fusion == "relative_score"
    assert _request(preset="mmr", diversity=0.5).diversity == 0.5
    from_python = QueryRequest(
        search_text="x", preset="dense", hybrid_params=HybridParams(sparse_weight=0.3)
    )
    assert from_python.hybrid_params.dense_weight == 1.0
    assert from_python.hybrid_params.sparse_weight == 0.3


def test_an_unknown_preset_names_the_known_ones() -> None:
    with pytest.raises(ValidationError) as caught:
        _request(preset="bm25")
    message = str(caught.value)
    assert all(name in message for name in PRESETS)


def test_the_benchmarks_search_through_the_presets() -> None:
    used = {fields.get("preset") for _, fields in METHODS.values()}
    assert {"sparse", "dense", "hybrid_rrf", "relative_score", "mmr"} <= used
