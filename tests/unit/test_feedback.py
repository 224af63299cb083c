"""The dense feedback query (Rocchio's method on unit vectors): pure arithmetic."""

import numpy as np

from retrieval.feedback import feedback_query


def _unit(v: list[float]) -> np.ndarray:
    a = np.asarray(v, dtype=np.float32)
    return a / np.linalg.norm(a)


def test_the_query_moves_toward_the_mean_of_its_passages_and_stays_a_unit_vector() -> None:
    query = _unit([1, 0, 0])
    passages = np.stack([_unit([0, 1, 0]), _unit([0, 3, 4])])  # lengths differ: made unit
    moved = feedback_query(query, passages)
    expected = _unit([1.0, 0.8, 0.4])  # query + mean((0,1,0), (0,.6,.8))
    assert moved.dtype == np.float32
    assert np.isclose(np.linalg.norm(moved), 1.0)
    assert np.allclose(moved, expected, atol=1e-6)
    mean = passages.mean(axis=0)
    assert float(moved @ mean) > float(query @ mean)  # closer to what the passages say


def test_rows_of_zeros_are_left_out_and_no_passage_leaves_the_query_as_it_was() -> None:
    query = np.asarray([2.0, 0.0], dtype=np.float32)  # not unit: the result is
    zero = np.zeros((1, 2), dtype=np.float32)
    assert np.allclose(feedback_query(query, zero), [1.0, 0.0])
    assert np.allclose(feedback_query(query, np.zeros((0, 2), dtype=np.float32)), [1.0, 0.0])
    one = np.asarray([[0.0, 0.0], [0.0, 5.0]], dtype=np.float32)
    assert np.allclose(feedback_query(query, one), _unit([1, 1]))
