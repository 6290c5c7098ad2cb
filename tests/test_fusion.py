"""Reciprocal-rank fusion and min-max normalisation on hand-computed cases."""

from __future__ import annotations

import pytest

from tiervault.brain.fusion import min_max_normalize, rrf
from tiervault.errors import ValidationError


def test_rrf_two_rankings_by_hand() -> None:
    fts = ["a", "b", "c"]
    vec = ["c", "a", "d"]
    got = rrf([fts, vec])
    expected = {
        "a": 1 / 61 + 1 / 62,
        "c": 1 / 63 + 1 / 61,
        "b": 1 / 62 + 1 / 1060,  # absent from the vector ranking: rank 1000
        "d": 1 / 1060 + 1 / 63,
    }
    assert got == pytest.approx(expected)
    assert list(got) == ["a", "c", "b", "d"]  # a: 0.032518 > c: 0.032266 > b > d


def test_rrf_absence_is_a_penalty_not_zero() -> None:
    # Present in one list at rank 1 vs present in both at rank 30.
    got = rrf([["x"] + [f"f{i}" for i in range(28)] + ["y"], [f"g{i}" for i in range(29)] + ["y"]])
    assert got["x"] == pytest.approx(1 / 61 + 1 / 1060)
    assert got["y"] == pytest.approx(2 / 90)
    assert got["y"] > got["x"]


def test_rrf_parameters_and_edge_cases() -> None:
    assert rrf([]) == {}
    assert rrf([[], []]) == {}
    assert rrf([["a", "b"]], k=0, absent_rank=10) == pytest.approx({"a": 1.0, "b": 0.5})
    assert rrf([["a"], []], k=1, absent_rank=3) == pytest.approx({"a": 1 / 2 + 1 / 4})
    assert rrf([["a", "b", "a"]]) == pytest.approx({"a": 1 / 61, "b": 1 / 62})  # best rank kept
    assert list(rrf([["a", "b"], ["b", "a"]])) == ["a", "b"]  # exact tie: first appearance
    with pytest.raises(ValidationError, match="k"):
        rrf([["a"]], k=-1)
    with pytest.raises(ValidationError, match="absent_rank"):
        rrf([["a"]], absent_rank=0)


def test_min_max_normalize() -> None:
    assert min_max_normalize({"a": 2.0, "b": 4.0, "c": 3.0}) == {"a": 0.0, "b": 1.0, "c": 0.5}
    assert min_max_normalize({"a": -1.0, "b": 1.0}) == {"a": 0.0, "b": 1.0}
    assert min_max_normalize({}) == {}
    assert min_max_normalize({"a": 5.0, "b": 5.0}) == {"a": 1.0, "b": 1.0}
    assert min_max_normalize({"a": 5.0}, constant=0.0) == {"a": 0.0}
    with pytest.raises(ValidationError, match="NaN") as info:
        min_max_normalize({"a": float("nan"), "b": 1.0})
    # the message names the candidate and what to do about it
    assert "'a'" in str(info.value) and "drop" in str(info.value)
