import pytest

from lore.errors import FilterError
from retrieval.filters import parse_filter

KNOWN = {"env", "service", "year", "on_call"}


def test_equality_and_in_are_canonical() -> None:
    clauses = parse_filter(
        {"env": "production", "service": {"$in": ["a", "b", "a"]}, "year": 2024, "on_call": True},
        KNOWN,
    )
    assert clauses == {
        "env": ("production",),
        "service": ("a", "b"),
        "year": ("2024",),
        "on_call": ("true",),
    }
    assert parse_filter({"env": {"$eq": "staging"}}, KNOWN) == {"env": ("staging",)}


def test_no_filter_is_empty() -> None:
    assert parse_filter(None, KNOWN) == {}
    assert parse_filter({}, KNOWN) == {}


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"team": "x"}, "unknown filter key 'team'"),
        ({"env": {"$gt": 3}}, "unknown filter operator '$gt'"),
        ({"env": {"$in": []}}, "non-empty list"),
        ({"env": ["a", "b"]}, "$in"),
        ({"env": None}, "must be a string, number or boolean"),
        ({"env": {"$in": ["a"], "$eq": "b"}}, "exactly one operator"),
        ({"env": {"nested": "x"}}, "unknown filter operator"),
        ({"env": float("nan")}, "finite"),
    ],
)
def test_bad_filters_are_clear_errors(raw: dict[str, object], message: str) -> None:
    with pytest.raises(FilterError, match=message.replace("$", r"\$")):
        parse_filter(raw, KNOWN)


def test_unknown_key_lists_known_keys() -> None:
    with pytest.raises(FilterError, match="known metadata keys: env, on_call, service, year"):
        parse_filter({"nope": 1}, KNOWN)
