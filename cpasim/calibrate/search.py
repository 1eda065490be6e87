"""A one-parameter search that survives flat regions.

Simulated goodput is piecewise constant in most parameters (whole packets,
discrete events) and flat over whole ranges: a window-limited transfer does
not care about the link rate, a rate-limited one not about the delay.  A local
method that differentiates or compares neighbouring points stops on such a
plateau.  This search first evaluates a log-spaced grid over the whole range,
then refines: by bisection between two grid points where the residual changes
sign (the answer lies between them whatever is flat around it), otherwise by
golden-section search of the absolute residual around the best grid point.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

GRID_POINTS = 9
#: Refinement stops when the bracket is narrower than this ratio.
X_TOLERANCE = 1e-3
_GOLDEN = (math.sqrt(5) - 1) / 2


@dataclass(frozen=True)
class SearchResult:
    x: float
    residual: float
    evaluations: int
    method: str  # "bisection" or "golden section"
    at_edge: bool  # the best point is an end of the range: the answer may lie beyond it


def search_1d(
    residual: Callable[[float], float],
    lo: float,
    hi: float,
    *,
    near: float | None = None,
    max_evaluations: int = 24,
    integer: bool = False,
) -> SearchResult:
    """The x in [lo, hi] (0 < lo < hi) whose ``residual`` is closest to zero.

    ``near`` breaks ties between several sign changes (the one closest to it in
    log distance wins); ``integer`` rounds every x tried.
    """
    if not 0 < lo < hi:
        raise ValueError(f"search range [{lo}, {hi}] must be positive and increasing")
    cache: dict[float, float] = {}

    def f(x: float) -> float:
        x = float(round(x)) if integer else x
        if x not in cache:
            cache[x] = residual(x)
        return cache[x]

    budget = max(GRID_POINTS + 1, max_evaluations)
    step = math.log(hi / lo) / (GRID_POINTS - 1)
    xs = [lo * math.exp(i * step) for i in range(GRID_POINTS)]
    rs = [f(x) for x in xs]
    brackets = [
        i
        for i in range(GRID_POINTS - 1)
        if rs[i] == 0 or (rs[i] < 0) != (rs[i + 1] < 0) or rs[i + 1] == 0
    ]
    centre = math.log(near) if near and near > 0 else math.log(lo * hi) / 2
    if brackets:
        i = min(brackets, key=lambda i: abs(math.log(xs[i] * xs[i + 1]) / 2 - centre))
        a, b = xs[i], xs[i + 1]
        ra = rs[i]
        while b / a > 1 + X_TOLERANCE and len(cache) < budget and ra != 0:
            m = math.sqrt(a * b)
            if integer and round(m) in (round(a), round(b)):
                break
            rm = f(m)
            if rm == 0:
                a = b = m
                break
            if (rm < 0) == (ra < 0):
                a, ra = m, rm
            else:
                b = m
        best = min((a, b), key=lambda x: abs(f(x)))
        return SearchResult(_x(best, integer), f(best), len(cache), "bisection", False)

    i = min(range(GRID_POINTS), key=lambda i: (abs(rs[i]), abs(math.log(xs[i]) - centre)))
    a, b = math.log(xs[max(0, i - 1)]), math.log(xs[min(GRID_POINTS - 1, i + 1)])

    def g(u: float) -> float:
        return abs(f(math.exp(u)))

    c, d = b - _GOLDEN * (b - a), a + _GOLDEN * (b - a)
    while b - a > math.log(1 + X_TOLERANCE) and len(cache) + 1 < budget:
        if g(c) <= g(d):
            b, d = d, c
            c = b - _GOLDEN * (b - a)
        else:
            a, c = c, d
            d = a + _GOLDEN * (b - a)
    best = min(cache, key=lambda x: (abs(cache[x]), abs(math.log(x) - centre)))
    at_edge = math.isclose(best, xs[0], rel_tol=1e-9) or math.isclose(best, xs[-1], rel_tol=1e-9)
    return SearchResult(_x(best, integer), cache[best], len(cache), "golden section", at_edge)


def _x(x: float, integer: bool) -> float:
    return float(round(x)) if integer else x
