"""Quantity parsing and formatting (cpasim.units)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cpasim.errors import CpasimError
from cpasim.units import FREQ, RATE, SIZE, TIME, format_quantity, parse_quantity


@pytest.mark.parametrize(
    ("text", "dimension", "expected"),
    [
        # time -> ns
        ("1s", TIME, 1e9),
        ("2ms", TIME, 2e6),
        ("350us", TIME, 350e3),
        ("350µs", TIME, 350e3),
        ("100ns", TIME, 100.0),
        ("1.5ns", TIME, 1.5),
        (0.00035, TIME, 350e3),  # plain numbers are seconds
        (2, TIME, 2e9),
        ("0.00035", TIME, 350e3),
        # rate -> bit/s
        ("1Gbps", RATE, 1e9),
        ("10Gbps", RATE, 1e10),
        ("1kbps", RATE, 1e3),
        ("100Mbps", RATE, 1e8),
        ("1Tbps", RATE, 1e12),
        ("5bps", RATE, 5.0),
        ("1Gb/s", RATE, 1e9),
        ("1Gbit/s", RATE, 1e9),
        ("1GBps", RATE, 8e9),
        ("1GB/s", RATE, 8e9),
        ("2 MB/s", RATE, 16e6),
        (1e9, RATE, 1e9),
        # size -> bytes
        ("64KiB", SIZE, 65536),
        ("64kB", SIZE, 64000),
        ("1.5kB", SIZE, 1500),
        ("1MiB", SIZE, 2**20),
        ("1MB", SIZE, 10**6),
        ("2GiB", SIZE, 2 * 2**30),
        ("1GB", SIZE, 10**9),
        ("1TiB", SIZE, 2**40),
        ("1TB", SIZE, 10**12),
        ("1500B", SIZE, 1500),
        (1500, SIZE, 1500),
        (1500.0, SIZE, 1500),
        ("1500", SIZE, 1500),
        # frequency -> Hz
        ("4GHz", FREQ, 4e9),
        ("33MHz", FREQ, 33e6),
        ("100kHz", FREQ, 1e5),
        ("1THz", FREQ, 1e12),
        (2.5e9, FREQ, 2.5e9),
    ],
)
def test_parse(text, dimension, expected):
    value = parse_quantity(text, dimension)
    assert value == expected
    assert type(value) is (int if dimension == SIZE else float)


@pytest.mark.parametrize(
    ("text", "dimension", "message"),
    [
        ("10Gibps", RATE, "binary prefix 'Gi' is not allowed on a rate"),
        ("1MiBps", RATE, "binary prefix 'Mi' is not allowed on a rate"),
        ("1Kis", TIME, "binary prefix 'Ki' is not allowed on a time"),
        ("5ks", TIME, "prefix 'k' is not allowed on a time"),
        ("5mB", SIZE, "prefix 'm' is not allowed on a size"),
        ("1nbps", RATE, "prefix 'n' is not allowed on a rate"),
        ("64KB", SIZE, "'K' is no prefix"),
        ("10G", RATE, "a prefix needs a unit"),
        ("64Ki", SIZE, "a prefix needs a unit"),
        ("10Gbps", TIME, "that is a rate, expected a time"),
        ("350us", SIZE, "that is a time, expected a size"),
        ("64KiB", RATE, "that is a size, expected a rate"),
        ("4GHz", TIME, "that is a freq, expected a time"),
        ("10 parsecs", TIME, "unknown unit 'parsecs'"),
        ("fast", RATE, "expected a rate such as '10Gbps'"),
        ("", TIME, "expected a time"),
        ("1.5B", SIZE, "whole number of bytes"),
        (0.5, SIZE, "whole number of bytes"),
        (True, TIME, "expected a time"),
        ([1], SIZE, "expected a size"),
        (float("nan"), TIME, "finite"),
        (float("inf"), RATE, "finite"),
        ("1e999999999s", TIME, "finite"),
        ("1e30B", SIZE, "below 2**63"),
    ],
)
def test_parse_errors(text, dimension, message):
    with pytest.raises(CpasimError, match="^link.x = ") as info:
        parse_quantity(text, dimension, what="link.x")
    assert message in str(info.value)
    assert "\n" not in str(info.value)


_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
_METRIC = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}


@given(st.integers(min_value=0, max_value=10**6), st.sampled_from(sorted(_BINARY)))
def test_binary_size_prefixes(n, prefix):
    assert parse_quantity(f"{n}{prefix}B", SIZE) == n * _BINARY[prefix]


@given(st.integers(min_value=0, max_value=10**6), st.sampled_from(sorted(_METRIC)))
def test_metric_prefixes(n, prefix):
    assert parse_quantity(f"{n}{prefix}B", SIZE) == n * _METRIC[prefix]
    assert parse_quantity(f"{n}{prefix}bps", RATE) == n * _METRIC[prefix]
    assert parse_quantity(f"{n}{prefix}Bps", RATE) == 8 * n * _METRIC[prefix]
    assert parse_quantity(f"{n}{prefix}Hz", FREQ) == n * _METRIC[prefix]


@given(st.integers(min_value=0, max_value=10**9))
def test_time_prefixes_are_exact(n):
    assert parse_quantity(f"{n}ns", TIME) == n
    assert parse_quantity(f"{n}us", TIME) == n * 10**3
    assert parse_quantity(f"{n}ms", TIME) == n * 10**6
    assert parse_quantity(f"{n}s", TIME) == n * 10**9


@given(st.integers(min_value=1, max_value=10**6))
def test_metric_and_binary_kept_apart(n):
    assert parse_quantity(f"{n}KiB", SIZE) - parse_quantity(f"{n}kB", SIZE) == 24 * n


_finite = st.floats(min_value=0, max_value=1e15, allow_nan=False, allow_infinity=False)


@given(_finite, st.sampled_from([TIME, RATE, FREQ]))
def test_format_round_trips_floats(value, dimension):
    text = format_quantity(value, dimension)
    assert parse_quantity(text, dimension) == value


@given(st.integers(min_value=0, max_value=2**62))
def test_format_round_trips_sizes(value):
    assert parse_quantity(format_quantity(value, SIZE), SIZE) == value


@pytest.mark.parametrize(
    ("value", "dimension", "text"),
    [
        (65536, SIZE, "64KiB"),
        (64000, SIZE, "64kB"),
        (1500, SIZE, "1500B"),
        (4_000_000, SIZE, "4MB"),
        (9000, SIZE, "9000B"),
        (2048, SIZE, "2KiB"),
        (350e3, TIME, "350us"),
        (1.5, TIME, "1.5ns"),
        (2e7, TIME, "20ms"),
        (0.0, TIME, "0s"),
        (1e10, RATE, "10Gbps"),
        (2.5e9, RATE, "2.5Gbps"),
        (33e6, FREQ, "33MHz"),
    ],
)
def test_format_picks_the_natural_unit(value, dimension, text):
    assert format_quantity(value, dimension) == text


def test_human_readable_quantities():
    from cpasim.units import RATE, SIZE, TIME, human

    assert human(1.19999e8, TIME) == "120 ms"
    assert human(350, TIME) == "350 ns"
    assert human(0.5, TIME) == "0.5 ns"
    assert human(9.391e8, RATE) == "939.1 Mb/s"
    assert human(65536, SIZE) == "65.54 kB"
