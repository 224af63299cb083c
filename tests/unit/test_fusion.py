import math

import pytest

from retrieval.fusion import relative_score_fusion, weighted_rrf


def test_rrf_ranks_one_and_three_with_k60() -> None:
    fused = dict(weighted_rrf({"a": ["x", "y", "z"], "b": ["p", "q", "x"]}, {}, k=60))
    assert math.isclose(fused["x"], 1 / 61 + 1 / 63, rel_tol=1e-12)
    assert round(fused["x"], 5) == 0.03227


def test_rrf_weights_are_honoured() -> None:
    plain = weighted_rrf({"dense": ["a", "b"], "sparse": ["b", "a"]}, {}, k=60)
    assert plain[0][1] == plain[1][1]  # symmetric lists tie without weights
    weighted = weighted_rrf(
        {"dense": ["a", "b"], "sparse": ["b", "a"]}, {"dense": 0.6, "sparse": 0.4}, k=60
    )
    assert [key for key, _ in weighted] == ["a", "b"]
    assert math.isclose(weighted[0][1], 0.6 / 61 + 0.4 / 62)


def test_rrf_zero_weight_drops_a_list_and_k_changes_scores() -> None:
    fused = weighted_rrf({"dense": ["a"], "sparse": ["b"]}, {"sparse": 0.0}, k=1)
    assert fused == [("a", 0.5)]
    with pytest.raises(ValueError):
        weighted_rrf({"a": ["x"]}, {}, k=0)


def test_rrf_ignores_duplicates_within_a_list() -> None:
    fused = dict(weighted_rrf({"a": ["x", "x", "y"]}, {}, k=60))
    assert math.isclose(fused["y"], 1 / 62)


def test_relative_score_fusion_min_max_and_alpha() -> None:
    fused = dict(
        relative_score_fusion(
            {"dense": [("a", 0.9), ("b", 0.5), ("c", 0.1)], "sparse": [("b", 12.0), ("c", 2.0)]},
            {"dense": 0.75, "sparse": 0.25},
        )
    )
    assert math.isclose(fused["a"], 0.75 * 1.0)
    assert math.isclose(fused["b"], 0.75 * 0.5 + 0.25 * 1.0)
    assert math.isclose(fused["c"], 0.0)


def test_relative_score_fusion_equal_scores_normalise_to_one() -> None:
    fused = relative_score_fusion({"sparse": [("a", 3.0), ("b", 3.0)]}, {})
    assert [score for _, score in fused] == [1.0, 1.0]
