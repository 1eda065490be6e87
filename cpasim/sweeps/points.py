"""The points of a sweep: axes, their product (or zip), repeats and seeds.

A sweep varies a few dotted configuration keys.  Each *axis* is one key with
the list of values to try, written exactly as on the command line
(``link.rate=1Gbps,10Gbps``).  The points are either the Cartesian product of
the axes (the first axis varies slowest) or, with ``zip``, the i-th value of
every axis together.  Every point runs ``repeat`` times.

Seeds.  Each (point, repeat) gets its own seed, drawn with numpy's
``SeedSequence(base_seed, spawn_key=(point_word, repeat))`` where
``point_word`` is a stable 32-bit digest of the point's ``key=value`` pairs.
The seed therefore depends only on the base seed, the values and the repeat
number: not on the point's position in the grid, on the order in which points
finish, or on which other points the grid holds.  Growing a grid and resuming
gives every old point the seed it had.  A level of detail (``host.detail``) is no
part of it: the full and the ideal run of a point share their seed.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from cpasim.errors import CpasimError

#: Seeds stay below 2**31 so that every consumer (numpy, ``sim.seed``) takes them.
SEED_BITS = 31


@dataclass(frozen=True)
class Point:
    """One run of a sweep: its place in the grid, its values and its seed."""

    index: int
    """Position of the point in grid order (repeats share it)."""
    repeat: int
    """Repeat number, 0-based."""
    values: tuple[tuple[str, str], ...]
    """The varied keys and their values as written, in axis order."""
    seed: int

    @property
    def overrides(self) -> dict[str, str]:
        return dict(self.values)

    @property
    def ident(self) -> tuple[tuple[str, ...], int]:
        """What identifies a finished row when resuming: the values and the repeat."""
        return tuple(v for _, v in self.values), self.repeat


def parse_axis(text: str) -> tuple[str, list[str]]:
    """Split ``KEY=V1,V2,...`` into the key and its list of values."""
    key, sep, rest = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise CpasimError(
            f"--grid {text!r}: expected KEY=V1,V2,... (for example link.rate=1Gbps,10Gbps)"
        )
    values = [v.strip() for v in rest.split(",")]
    if any(not v for v in values):
        raise CpasimError(
            f"--grid {key}: empty value in {rest!r}; expected V1,V2,... with no empty entries"
        )
    return key, values


def parse_axes(texts: Sequence[str]) -> dict[str, list[str]]:
    """Parse several ``--grid`` options; a key may appear only once."""
    axes: dict[str, list[str]] = {}
    for text in texts:
        key, values = parse_axis(text)
        if key in axes:
            raise CpasimError(
                f"--grid {key}: the key is given twice; list all its values in one option"
            )
        axes[key] = values
    return axes


def normalize_axes(grid: Mapping[str, object]) -> dict[str, list[str]]:
    """Accept ``{key: [values]}`` with values as strings or numbers (Python API)."""
    axes: dict[str, list[str]] = {}
    for key, values in grid.items():
        if isinstance(values, str) or not isinstance(values, Sequence):
            raise CpasimError(f"grid key {key!r}: expected a list of values, got {values!r}")
        if not values:
            raise CpasimError(f"grid key {key!r}: the list of values is empty")
        axes[str(key)] = [str(v) for v in values]
    return axes


def combinations(
    axes: Mapping[str, Sequence[str]], *, zip_axes: bool = False
) -> list[tuple[tuple[str, str], ...]]:
    """The value combinations in grid order: the product, or the zipped lists."""
    keys = list(axes)
    if not keys:
        return [()]
    lists = [list(axes[k]) for k in keys]
    if zip_axes:
        lengths = {k: len(v) for k, v in zip(keys, lists, strict=True)}
        if len(set(lengths.values())) > 1:
            detail = ", ".join(f"{k} has {n}" for k, n in lengths.items())
            raise CpasimError(f"--zip needs the same number of values on every axis: {detail}")
        rows = zip(*lists, strict=True)
    else:
        rows = itertools.product(*lists)
    combos = [tuple(zip(keys, row, strict=True)) for row in rows]
    seen: set = set()
    for combo in combos:
        if combo in seen:
            point = ", ".join(f"{k}={v}" for k, v in combo)
            raise CpasimError(f"--grid: the point {point} is listed twice; list each value once")
        seen.add(combo)
    return combos


def point_seed(base_seed: int, values: Sequence[tuple[str, str]], repeat: int) -> int:
    """The seed of one (point, repeat); see the module docstring.  A host's level of
    detail (``host.detail``) is left out: both levels of a point run with one seed, so
    that what differs between them is the model's (:mod:`cpasim.sweeps.agreement`)."""
    from cpasim.sweeps.agreement import is_detail_key

    values = [(k, v) for k, v in values if not is_detail_key(k)]
    canonical = "\n".join(f"{k}={v}" for k, v in values).encode()
    word = int.from_bytes(hashlib.sha256(canonical).digest()[:4], "little")
    seq = np.random.SeedSequence(int(base_seed), spawn_key=(word, int(repeat)))
    return int(seq.generate_state(1, np.uint32)[0]) >> (32 - SEED_BITS)


def make_points(
    axes: Mapping[str, Sequence[str]],
    *,
    zip_axes: bool = False,
    repeat: int = 1,
    base_seed: int = 0,
) -> list[Point]:
    """Every (point, repeat) of a sweep in grid order (repeats of a point together)."""
    if repeat < 1:
        raise CpasimError(f"--repeat: expected a whole number >= 1, got {repeat}")
    return [
        Point(index, r, values, point_seed(base_seed, values, r))
        for index, values in enumerate(combinations(axes, zip_axes=zip_axes))
        for r in range(repeat)
    ]
