"""Grid and zip expansion, repeats and per-point seeds."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cpasim.errors import CpasimError
from cpasim.sweeps.points import combinations, make_points, parse_axes, parse_axis, point_seed

keys = st.text(alphabet="abcdefgh.", min_size=1, max_size=6)
values = st.lists(
    st.text(alphabet="0123456789GMbps", min_size=1, max_size=5), min_size=1, max_size=4, unique=True
)
axes_strategy = st.dictionaries(keys, values, min_size=0, max_size=4)


@given(axes_strategy)
def test_product_has_every_combination_once(axes):
    combos = combinations(axes)
    assert len(combos) == math.prod(len(v) for v in axes.values())
    assert len(set(combos)) == len(combos)
    expected = set(itertools.product(*axes.values()))
    assert {tuple(v for _, v in c) for c in combos} == expected
    assert all([k for k, _ in c] == list(axes) for c in combos)


@given(st.integers(1, 5), st.integers(1, 4))
def test_zip_pairs_the_ith_values(length, width):
    axes = {f"k{j}": [f"{j}v{i}" for i in range(length)] for j in range(width)}
    combos = combinations(axes, zip_axes=True)
    assert len(combos) == length
    for i, combo in enumerate(combos):
        assert combo == tuple((f"k{j}", f"{j}v{i}") for j in range(width))


def test_zip_refuses_unequal_lengths_naming_them():
    with pytest.raises(CpasimError, match=r"--zip .*a has 2, b has 3"):
        combinations({"a": ["1", "2"], "b": ["1", "2", "3"]}, zip_axes=True)


def test_first_axis_varies_slowest_and_repeats_stay_together():
    points = make_points({"a": ["1", "2"], "b": ["x", "y"]}, repeat=2, base_seed=7)
    assert [(p.index, p.repeat, p.overrides) for p in points[:3]] == [
        (0, 0, {"a": "1", "b": "x"}),
        (0, 1, {"a": "1", "b": "x"}),
        (1, 0, {"a": "1", "b": "y"}),
    ]
    assert len(points) == 8


@given(axes_strategy, st.integers(1, 3), st.integers(0, 2**63 - 1))
def test_seeds_are_deterministic_distinct_and_independent_of_the_grid(axes, repeat, base):
    points = make_points(axes, repeat=repeat, base_seed=base)
    again = make_points(axes, repeat=repeat, base_seed=base)
    assert [p.seed for p in points] == [p.seed for p in again]
    assert all(0 <= p.seed < 2**31 for p in points)
    # A point keeps its seed whatever else the grid holds or its position in it.
    for p in points:
        assert p.seed == point_seed(base, p.values, p.repeat)


def test_seeds_differ_between_points_repeats_and_base_seeds():
    points = make_points({"a": [str(i) for i in range(50)]}, repeat=4, base_seed=1)
    assert len({p.seed for p in points}) == len(points)
    other = make_points({"a": [str(i) for i in range(50)]}, repeat=4, base_seed=2)
    assert {p.seed for p in points}.isdisjoint({p.seed for p in other})


def test_reordering_the_grid_keeps_each_points_seed():
    forward = make_points({"a": ["1", "2", "3"]}, repeat=2, base_seed=5)
    backward = make_points({"a": ["3", "2", "1"]}, repeat=2, base_seed=5)
    assert {p.ident: p.seed for p in forward} == {p.ident: p.seed for p in backward}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("link.rate", "expected KEY=V1,V2"),
        ("=1,2", "expected KEY=V1,V2"),
        ("link.rate=1Gbps,,2Gbps", "empty value"),
    ],
)
def test_bad_axes_are_clear_errors(text, message):
    with pytest.raises(CpasimError, match=message):
        parse_axis(text)


def test_axis_parsing_and_duplicate_keys():
    assert parse_axes(["link.rate=1Gbps, 10Gbps", "tcp.wmem=64KiB"]) == {
        "link.rate": ["1Gbps", "10Gbps"],
        "tcp.wmem": ["64KiB"],
    }
    with pytest.raises(CpasimError, match="given twice"):
        parse_axes(["a=1", "a=2"])


def test_a_point_listed_twice_is_refused_but_zip_may_repeat_values():
    with pytest.raises(CpasimError, match="the point a=1, b=x is listed twice"):
        combinations({"a": ["1", "1"], "b": ["x"]})
    with pytest.raises(CpasimError, match="listed twice"):
        combinations({"a": ["1", "1"], "b": ["x", "x"]}, zip_axes=True)
    assert len(combinations({"a": ["1", "1"], "b": ["x", "y"]}, zip_axes=True)) == 2


def test_repeat_must_be_positive():
    with pytest.raises(CpasimError, match="--repeat"):
        make_points({}, repeat=0)
