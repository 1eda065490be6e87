"""Quantities with units: parsing scenario values and writing them back.

Inside cpasim every quantity has one unit per dimension:

========= ============ =====================================================
dimension internal     accepted in scenarios
========= ============ =====================================================
time      ns (float)   ``s`` with ``m``, ``u``/``µ``, ``n``: ``"350us"``
rate      bit/s (float) ``bps`` = ``b/s`` = ``bit/s``; ``Bps`` = ``B/s`` (x8)
size      bytes (int)  ``B`` with ``k M G T`` (x1000) or ``Ki Mi Gi Ti`` (x1024)
freq      Hz (float)   ``Hz`` with ``k M G T``
========= ============ =====================================================

A plain number (TOML number or a string holding only a number) is in SI base
units: seconds, bit/s, bytes, Hz.  A prefix is accepted only together with a
unit, and metric and binary prefixes are kept apart (gem5's rules), so
``"64KiB"`` is 65536 bytes, ``"64kB"`` is 64000 bytes and ``"10Gibps"`` is an
error.  Arithmetic is decimal so that ``"0.00035"`` seconds is exactly 350000 ns.
"""

from __future__ import annotations

import re
from decimal import (
    Context,
    Decimal,
    DecimalException,
    DivisionByZero,
    InvalidOperation,
    Overflow,
    localcontext,
)

from cpasim.errors import CpasimError, shown

TIME, RATE, SIZE, FREQ = "time", "rate", "size", "freq"
DIMENSIONS = (TIME, RATE, SIZE, FREQ)

_METRIC = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
_SUBUNIT = {"m": Decimal("1e-3"), "u": Decimal("1e-6"), "µ": Decimal("1e-6"), "n": Decimal("1e-9")}
_ALL_PREFIXES = {**_METRIC, **_BINARY, **_SUBUNIT}

#: Base units per dimension, each with its factor to the SI base unit.
_BASES: dict[str, dict[str, int]] = {
    TIME: {"s": 1},
    RATE: {"bps": 1, "b/s": 1, "bit/s": 1, "Bps": 8, "B/s": 8},
    SIZE: {"B": 1},
    FREQ: {"Hz": 1},
}
#: Prefixes each dimension accepts (sizes take both metric and binary).
_PREFIXES: dict[str, dict[str, int | Decimal]] = {
    TIME: {"": 1, **_SUBUNIT},
    RATE: dict(_METRIC),
    SIZE: {**_METRIC, **_BINARY},
    FREQ: dict(_METRIC),
}
#: SI base unit -> internal unit.
_TO_INTERNAL = {TIME: Decimal(10**9), RATE: Decimal(1), SIZE: Decimal(1), FREQ: Decimal(1)}
_EXAMPLE = {TIME: "350us", RATE: "10Gbps", SIZE: "64KiB", FREQ: "4GHz"}
_MAX_SIZE = Decimal(2**63)
_SI_NAME = {TIME: "s", RATE: "bps", SIZE: "B", FREQ: "Hz"}
_INTERNAL_NAME = {TIME: "ns", RATE: "bit/s", SIZE: "B", FREQ: "Hz"}

_NUMBER = re.compile(r"\s*([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*(.*?)\s*$")


def internal_unit(dimension: str) -> str:
    """Name of the unit cpasim uses internally for ``dimension``."""
    return _INTERNAL_NAME[dimension]


def _split_unit(unit: str) -> tuple[str, str, str] | None:
    """``(dimension, prefix, base)`` for a unit string, or None if it is no known unit.

    The prefix may be one the dimension refuses; the caller says so.  The longest
    matching base wins, so ``"Bps"`` is a rate and not a time with prefix ``"Bp"``.
    """
    best: tuple[str, str, str] | None = None
    for dim, bases in _BASES.items():
        for base in bases:
            prefix = unit[: len(unit) - len(base)]
            longer = best is None or len(base) > len(best[2])
            if unit.endswith(base) and prefix in _ALL_PREFIXES and longer:
                best = (dim, prefix, base)
    return best


def parse_quantity(value: object, dimension: str, *, what: str = "value") -> float | int:
    """Parse ``value`` (number or string with unit) into cpasim's internal unit.

    ``what`` names the value in error messages (usually ``"<file>: <key>"``).
    Sizes come back as ``int`` and must be whole bytes; everything else is ``float``.
    """
    if dimension not in _BASES:
        raise ValueError(f"unknown dimension {dimension!r}")
    example = _EXAMPLE[dimension]
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise CpasimError(
            f"{what} = {show(value)}: expected a {dimension} such as {example!r} "
            f"or a number in SI base units"
        )
    try:
        # A bounded context: an exponent such as "9e999995" overflows it (or is
        # refused outright) instead of building a number no float can hold.
        with localcontext(_CONTEXT):
            internal = _internal(value, dimension, what)
    except DecimalException:
        raise CpasimError(
            f"{what} = {show(value)}: expected a finite {dimension} such as {example!r}"
        ) from None
    if dimension == SIZE:
        if abs(internal) >= _MAX_SIZE:
            raise CpasimError(f"{what} = {show(value)}: a size must be below 2**63 bytes")
        if internal != internal.to_integral_value():
            raise CpasimError(f"{what} = {show(value)}: a size must be a whole number of bytes")
        return int(internal)
    result = float(internal)
    if result in (float("inf"), float("-inf")):
        raise CpasimError(f"{what} = {show(value)}: expected a finite {dimension}")
    return result


#: Decimal arithmetic for quantities: exponents beyond a double's range trap.
_CONTEXT = Context(prec=28, Emax=400, Emin=-400, traps=[InvalidOperation, Overflow, DivisionByZero])


def _internal(value: object, dimension: str, what: str) -> Decimal:
    """``value`` in ``dimension``'s internal unit, exactly (decimal)."""
    if isinstance(value, str):
        match = _NUMBER.fullmatch(value)
        if match is None:
            raise CpasimError(
                f"{what} = {show(value)}: expected a {dimension} such as {_EXAMPLE[dimension]!r}"
            )
        number, unit = Decimal(match.group(1)), match.group(2)
        si = number * _unit_factor(unit, dimension, value, what)
    else:
        if value != value or value in (float("inf"), float("-inf")):
            raise CpasimError(f"{what} = {show(value)}: expected a finite {dimension}")
        # repr() is the shortest string that reads back as the same float, so
        # 0.00035 s becomes exactly 350000 ns rather than 349999.99999999994.
        si = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    return si * _TO_INTERNAL[dimension]


def _unit_factor(unit: str, dimension: str, text: str, what: str) -> Decimal:
    if unit == "":
        return Decimal(1)
    split = _split_unit(unit)
    if split is None:
        if unit in _ALL_PREFIXES or unit == "K":
            hint = "a prefix needs a unit"
        elif unit.startswith("K") and _split_unit("k" + unit[1:]) is not None:
            hint = "'K' is no prefix: write 'k' (x1000) or 'Ki' (x1024)"
        else:
            hint = f"unknown unit {unit!r}"
        raise CpasimError(
            f"{what} = {show(text)}: {hint}; expected a {dimension} such as {_EXAMPLE[dimension]!r}"
        )
    dim, prefix, base = split
    if dim != dimension:
        raise CpasimError(
            f"{what} = {show(text)}: that is a {dim}, "
            f"expected a {dimension} such as {_EXAMPLE[dimension]!r}"
        )
    allowed = _PREFIXES[dimension]
    if prefix not in allowed:
        kind = "binary " if prefix in _BINARY else ""
        raise CpasimError(
            f"{what} = {show(text)}: {kind}prefix {prefix!r} is not allowed on a {dimension}; "
            f"use one of {', '.join(repr(p) for p in allowed if p)}"
        )
    return Decimal(allowed[prefix]) * _BASES[dimension][base]


def show(value: object) -> str:
    """A raw scenario value as an error message quotes it (TOML spelling for booleans;
    a long value cut, control characters escaped: :func:`cpasim.errors.shown`)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "a table" if isinstance(value, dict) else shown(repr(value))


# Writing quantities back: the largest prefix whose text reads back exactly.
_FORMAT_UNITS: dict[str, list[tuple[str, Decimal]]] = {
    TIME: [
        ("s", Decimal(10**9)),
        ("ms", Decimal(10**6)),
        ("us", Decimal(10**3)),
        ("ns", Decimal(1)),
    ],
    RATE: [
        ("Tbps", Decimal(10**12)),
        ("Gbps", Decimal(10**9)),
        ("Mbps", Decimal(10**6)),
        ("kbps", Decimal(10**3)),
        ("bps", Decimal(1)),
    ],
    FREQ: [
        ("THz", Decimal(10**12)),
        ("GHz", Decimal(10**9)),
        ("MHz", Decimal(10**6)),
        ("kHz", Decimal(10**3)),
        ("Hz", Decimal(1)),
    ],
    SIZE: [
        ("TiB", Decimal(2**40)),
        ("GiB", Decimal(2**30)),
        ("MiB", Decimal(2**20)),
        ("KiB", Decimal(2**10)),
        ("TB", Decimal(10**12)),
        ("GB", Decimal(10**9)),
        ("MB", Decimal(10**6)),
        ("kB", Decimal(10**3)),
        ("B", Decimal(1)),
    ],
}


_METRIC_SIZE_UNITS = ("TB", "GB", "MB", "kB")


def format_quantity(value: float | int, dimension: str) -> str:
    """Text for an internal ``value`` that :func:`parse_quantity` reads back exactly.

    Uses the largest unit giving a short number (``"64KiB"``, ``"350us"``,
    ``"10Gbps"``); falls back to the internal unit with the float's repr.
    """
    try:
        exact = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    except InvalidOperation:  # pragma: no cover - non-numbers are rejected earlier
        return repr(value)
    units = _FORMAT_UNITS[dimension]
    if exact == 0:
        return "0" + _SI_NAME[dimension]
    for unit, factor in units:
        mantissa = exact / factor
        if dimension == SIZE and mantissa != mantissa.to_integral_value():
            continue
        if dimension == SIZE and unit in _METRIC_SIZE_UNITS and exact < 10**4:
            continue  # an MTU reads better as 9000B than as 9kB
        if abs(mantissa) < 1 and factor != 1:
            continue
        text = _plain(mantissa) + unit
        if len(text) > 16 and factor != 1:
            continue
        if parse_quantity(text, dimension) == value:
            return text
    last = units[-1][0]
    return f"{value!r}{last}" if isinstance(value, float) else f"{value}{last}"


def _plain(number: Decimal) -> str:
    """A decimal without exponent or trailing zeros: 1.50E+3 -> '1500', 0.50 -> '0.5'."""
    text = format(number.normalize(), "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


#: Units for reading, not for reading back (:func:`human`).
_HUMAN_UNITS: dict[str, list[tuple[str, float]]] = {
    TIME: [("s", 1e9), ("ms", 1e6), ("us", 1e3), ("ns", 1.0)],
    RATE: [("Tb/s", 1e12), ("Gb/s", 1e9), ("Mb/s", 1e6), ("kb/s", 1e3), ("b/s", 1.0)],
    FREQ: [("THz", 1e12), ("GHz", 1e9), ("MHz", 1e6), ("kHz", 1e3), ("Hz", 1.0)],
    SIZE: [("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3), ("B", 1.0)],
}


def human(value: float | int, dimension: str, digits: int = 4) -> str:
    """An internal ``value`` for people: ``digits`` significant digits in the largest unit
    that keeps the number at least 1 (``1.19999e8`` ns -> ``"120 ms"``)."""
    for unit, factor in _HUMAN_UNITS[dimension]:
        if abs(value) >= factor or factor == 1.0:
            return f"{value / factor:.{digits}g} {unit}"
    raise AssertionError("unreachable: the last unit has factor 1")


#: What a plain number means, per dimension (for error hints).
_PLAIN_MEANS = {TIME: "seconds", RATE: "bit/s", SIZE: "bytes", FREQ: "Hz"}


def plain_number_hint(raw: object, dimension: str) -> str:
    """For a quantity written without a unit, the words saying which unit it was read
    in (``350`` -> ``"350 s; plain numbers are seconds (e.g. write '350us')"``); else ``""``.
    """
    if isinstance(raw, bool):
        return ""
    if isinstance(raw, (int, float)):
        text = f"{raw:g}"
    elif isinstance(raw, str) and (m := _NUMBER.match(raw)) and not m.group(2):
        text = m.group(1)
    else:
        return ""
    return (
        f"{text} {_SI_NAME[dimension]}; plain numbers are {_PLAIN_MEANS[dimension]} "
        f"(write the unit, e.g. '{_EXAMPLE[dimension]}')"
    )
