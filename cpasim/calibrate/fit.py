"""Fit scenario parameters so that simulated figures reproduce measured ones.

A *target* is one measured figure (today: goodput, the figure every
measurement kind and every run share) under one condition: a measurement file
plus the overrides it was taken under (``capture.pcap@link.rate=20Mbps``).  The
free parameters are searched in log space with ``scipy.optimize.least_squares``
on relative residuals.  The simulator is deterministic but piecewise constant
(integer packets, discrete events), so derivatives are taken with a wide 10 %
step rather than the solver's default; a parameter whose step changes no figure
cannot be identified from the data and is left at its scenario value.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

from cpasim.calibrate.inspection import inspect_capture
from cpasim.calibrate.iperf import read_iperf
from cpasim.calibrate.pcap import head_bytes, is_capture, read_capture
from cpasim.calibrate.search import GRID_POINTS, search_1d
from cpasim.config import Config
from cpasim.config.params import BOOL, ENUM, INT, QUANTITIES, SIZE
from cpasim.config.resolve import spec_of
from cpasim.config.resolve import targets as resolve_key
from cpasim.errors import CpasimError
from cpasim.units import RATE, TIME, human

#: Finite-difference step in log space: 10 %, wide enough to see past the
#: simulator's flat steps.
LOG_STEP = math.log(1.10)


def log_jacobian(residuals: Callable[[np.ndarray], np.ndarray]):
    """The Jacobian of ``residuals`` over log-space offsets by forward steps of
    :data:`LOG_STEP` (one more evaluation per parameter)."""

    def jacobian(x) -> np.ndarray:
        base = residuals(x)
        cols = []
        for i in range(len(x)):
            step = np.array(x, dtype=float)
            step[i] += LOG_STEP
            cols.append((residuals(step) - base) / LOG_STEP)
        return np.array(cols).T

    return jacobian


def log_least_squares(
    residuals: Callable[[np.ndarray], np.ndarray], n: int, bounds, **options
) -> np.ndarray:
    """Log-space offsets x (a value is its start × e^x) minimising the relative
    ``residuals``, from x = 0 within ``bounds``, Jacobian by :func:`log_jacobian`;
    ``options`` go to ``scipy.optimize.least_squares`` (tolerances, scales)."""
    sol = least_squares(
        residuals, np.zeros(n), jac=log_jacobian(residuals), bounds=bounds, **options
    )
    return sol.x


@dataclass(frozen=True)
class Target:
    """One measured figure and the condition it was measured under."""

    figure: str  # key of Result.to_json(), e.g. "goodput_bps"
    measured: float
    source: str  # the measurement as given on the command line
    overrides: dict[str, str] = field(default_factory=dict)
    note: str | None = None  # what the reader said of its file (a capture cut short)

    def __post_init__(self) -> None:
        # Residuals are relative to the measurement: zero or NaN leaves nothing to fit.
        if not (math.isfinite(self.measured) and self.measured > 0):
            raise CpasimError(
                f"{self.source}: measured {self.figure} is {self.measured:g}; "
                "expected a positive figure to fit"
            )


@dataclass(frozen=True)
class Residual:
    target: Target
    simulated: float

    @property
    def relative(self) -> float:
        return (self.simulated - self.target.measured) / self.target.measured


@dataclass(frozen=True)
class FitResult:
    config: Config  # the scenario with the fitted values
    fitted: dict[str, tuple[float, float]]  # key → (start, fitted), internal units
    unidentifiable: dict[str, str]  # key → why the data cannot fix it
    residuals: list[Residual]
    start_residuals: list[Residual]
    simulations: int
    notes: list[str]

    @property
    def rms_error(self) -> float:
        return math.sqrt(sum(r.relative**2 for r in self.residuals) / len(self.residuals))

    def to_dict(self) -> dict:
        """The fit as plain data; values in internal units (ns, bit/s, bytes, Hz)."""
        return {
            "fitted": {
                k: {"start": float(a), "fitted": float(b)} for k, (a, b) in self.fitted.items()
            },
            "unidentifiable": dict(self.unidentifiable),
            "residuals": [_residual_dict(r) for r in self.residuals],
            "start_residuals": [_residual_dict(r) for r in self.start_residuals],
            "rms_error": float(self.rms_error),
            "simulations": self.simulations,
            "notes": list(self.notes),
            "config_digest": self.config.digest,
        }

    def to_frame(self):
        """One row per measured figure: measured, simulated before and after the fit."""
        from cpasim.results import frame

        rows = [
            {**_residual_dict(after), "simulated_before": before.simulated}
            for before, after in zip(self.start_residuals, self.residuals, strict=True)
        ]
        return frame(rows)


def _residual_dict(r: Residual) -> dict:
    t = r.target
    return {
        "source": t.source,
        "figure": t.figure,
        "conditions": dict(t.overrides),
        "measured": float(t.measured),
        "simulated": float(r.simulated),
        "relative_error": float(r.relative),
    }


def read_targets(spec: str) -> list[Target]:
    """Targets from ``FILE[@key=value,key=value]``; the kind is told by the file's content."""
    path_text, _, cond = spec.partition("@")
    overrides = {}
    for item in filter(None, cond.split(",")):
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise CpasimError(f"{spec}: condition {item!r} should be KEY=VALUE")
        overrides[key.strip()] = value.strip()
    path = Path(path_text)
    head = head_bytes(path)
    if is_capture(head):
        cap = read_capture(path)
        report = inspect_capture(cap)
        return [Target("goodput_bps", report.goodput_bps, spec, overrides, cap.cut_short)]
    if head.lstrip()[:1] == b"{":
        run = read_iperf(path)
        totals = run.received or run.sent
        if totals is None:
            raise CpasimError(f"{path}: iperf3 report has no end-of-test totals")
        return [Target("goodput_bps", totals.bps, spec, overrides)]
    raise CpasimError(
        f"{path}: expected a capture or an iperf3 --json report; "
        "microbenchmark tables carry no figure a stream simulation produces"
    )


def fit(
    cfg: Config,
    targets: list[Target],
    keys: list[str],
    simulate: Callable[[Config], dict],
    *,
    max_simulations: int = 60,
) -> FitResult:
    """Least-squares fit of ``keys``; ``simulate(cfg)`` returns ``Result.to_json()``."""
    if not targets:
        raise CpasimError("calibrate fit: no measured figures to fit")
    specs = {}
    for key in keys:
        _, spec = resolve_key(key, "--params")
        if spec.type in (BOOL, ENUM):
            raise CpasimError(f"--params: {key} is a {spec.type}; only numeric parameters fit")
        specs[key] = spec
    for t in targets:
        for key in t.overrides:
            resolve_key(key, t.source)
            if key in specs:
                raise CpasimError(
                    f"{t.source}: {key} is being fitted; it cannot also be a condition"
                )
    start = {k: float(cfg.value(k)) for k in keys}
    for k, v in start.items():
        if v <= 0:
            raise CpasimError(f"--params: {k} starts at {v}; a log-space fit needs it positive")

    # The starting point and one step per parameter must fit in the budget.
    needed = (1 + len(keys)) * len(targets)
    if max_simulations < needed:
        raise CpasimError(
            f"--max-simulations {max_simulations} is too few: {len(keys)} parameter(s) and "
            f"{len(targets)} figure(s) need {needed} simulations for the first step alone"
        )
    conditions = [cfg.with_overrides(t.overrides, where=t.source) for t in targets]
    cache: dict[tuple, np.ndarray] = {}

    def values_at(free: list[str], x) -> dict[str, float]:
        out = dict(start)
        for k, xi in zip(free, x, strict=True):
            v = start[k] * math.exp(xi)
            out[k] = round(v) if specs[k].type in (INT, SIZE) else v
        return out

    def residuals(free: list[str], x) -> np.ndarray:
        values = values_at(free, x)
        key = tuple(sorted(values.items()))
        if key not in cache:
            if (len(cache) + 1) * len(targets) > max_simulations:
                raise _Budget
            res = []
            for t, base in zip(targets, conditions, strict=True):
                result = simulate(base.with_values(values, where="calibrate fit"))
                if not math.isfinite(result[t.figure]):
                    shown = ", ".join(f"{k}={v:.6g}" for k, v in values.items())
                    raise CpasimError(
                        f"{t.source}: simulated {t.figure} is not a number at {shown}"
                    )
                res.append((result[t.figure] - t.measured) / t.measured)
            cache[key] = np.array(res)
        return cache[key]

    free = list(keys)
    x0 = np.zeros(len(free))
    r0 = residuals(free, x0)
    start_res = _residual_list(targets, r0)
    unidentifiable = {}
    sensitivity = log_jacobian(lambda x: residuals(free, x))(x0)
    for key, col in zip(free, sensitivity.T, strict=True):
        if not np.any(col):
            unidentifiable[key] = "zero sensitivity: a 10 % change moves no fitted figure"
    free = [k for k in free if k not in unidentifiable]
    notes = []
    if len(free) > len(targets):
        notes.append(
            f"{len(free)} free parameters from {len(targets)} figure(s): the fit is one of "
            "many that match equally well"
        )
    x = np.zeros(len(free))
    if free:
        lo, hi = [], []
        for k in free:
            spec = specs[k]
            lo.append(math.log(spec.lo / start[k]) if spec.lo else -np.inf)
            hi.append(math.log(spec.hi / start[k]) if spec.hi else np.inf)
        try:
            x = log_least_squares(
                lambda x: residuals(free, x),
                len(free),
                (lo, hi),
                x_scale=1.0,
                xtol=1e-3,
                ftol=1e-6,
            )
        except _Budget:
            notes.append(
                f"stopped at the budget of {max_simulations} simulations "
                f"({len(cache) * len(targets)} run); best point so far kept"
            )
            x = _best(cache, free, start)
    try:
        final = residuals(free, x)
    except _Budget:
        x = _best(cache, free, start)
        final = residuals(free, x)
    values = values_at(free, x)
    fitted = {k: (start[k], values[k]) for k in free}
    return FitResult(
        config=cfg.with_values(values, where="calibrate fit"),
        fitted=fitted,
        unidentifiable=unidentifiable,
        residuals=_residual_list(targets, final),
        start_residuals=start_res,
        simulations=len(cache) * len(targets),
        notes=notes,
    )


class _Budget(Exception):
    """The simulation budget is spent."""


def _best(cache, free, start) -> np.ndarray:
    best = min(cache.items(), key=lambda kv: float(np.sum(kv[1] ** 2)))[0]
    values = dict(best)
    return np.array([math.log(values[k] / start[k]) for k in free])


def _residual_list(targets: list[Target], rel: np.ndarray) -> list[Residual]:
    return [Residual(t, t.measured * (1 + r)) for t, r in zip(targets, rel, strict=True)]


def show_parameter(key: str, value: float) -> str:
    """A fitted parameter's value with its unit (``link.rate`` 2.04e7 -> ``20.4 Mb/s``)."""
    spec = spec_of(key)
    if spec.type in QUANTITIES:
        return human(value, spec.type, 6)
    return f"{value:.6g} {spec.unit}".rstrip()


def show_figure(figure: str, value: float) -> str:
    """A measured or simulated figure with its unit (the suffix of its result key)."""
    if figure.endswith("_bps"):
        return human(value, RATE, 6)
    if figure.endswith("_ns") or figure.startswith("latency_ns"):
        return human(value, TIME, 6)
    return f"{value:.6g}"


def calibrated_toml(result: FitResult, scenario: str | None, evidence: list[str] = ()) -> str:
    """The fitted scenario, headed by where its numbers came from (``evidence``: lines
    saying what the measurement set before the fit)."""
    lines = ["# Calibrated by `cpasim calibrate fit`"]
    lines.append(f"# base scenario: {scenario or '(built-in defaults)'}")
    lines += [f"# {line}" for line in evidence]
    for r in result.residuals:
        t = r.target
        lines.append(
            f"# measured {t.figure} = {show_figure(t.figure, t.measured)} from {t.source}; "
            f"simulated {show_figure(t.figure, r.simulated)} ({r.relative:+.2%})"
        )
    for k, (a, b) in result.fitted.items():
        lines.append(f"# fitted {k}: {show_parameter(k, a)} -> {show_parameter(k, b)}")
    for k, why in result.unidentifiable.items():
        lines.append(f"# not identifiable, left as in the base scenario: {k} ({why})")
    lines.append(f"# rms relative error {result.rms_error:.3%}")
    return "\n".join(lines) + "\n" + result.config.to_toml()


def fit_one(
    cfg: Config,
    target: Target,
    key: str,
    simulate: Callable[[Config], dict],
    *,
    span: float = 4.0,
    max_simulations: int = 24,
) -> FitResult:
    """Fit one numeric ``key`` within [value / span, value × span] by :func:`search_1d`.

    Unlike :func:`fit`, this copes with flat regions (see :mod:`cpasim.calibrate.search`):
    it is what is left to fit once the evidence has set everything a capture determines.
    """
    _, spec = resolve_key(key, "calibrate fit")
    if spec.type in (BOOL, ENUM):
        raise CpasimError(f"calibrate fit: {key} is a {spec.type}; only numeric parameters fit")
    start = float(cfg.value(key))
    if start <= 0:
        raise CpasimError(f"calibrate fit: {key} starts at {start}; the search needs it positive")
    if max_simulations < GRID_POINTS + 2:
        raise CpasimError(
            f"--max-simulations {max_simulations} is too few: the search needs "
            f"{GRID_POINTS + 2} (the start, a {GRID_POINTS}-point grid and one refinement)"
        )
    lo, hi = start / span, start * span
    if spec.lo:
        lo = max(lo, float(spec.lo))
    if spec.hi:
        hi = min(hi, float(spec.hi))
    base = cfg.with_overrides(target.overrides, where=target.source)
    figures: dict[float, float] = {}

    def simulated(x: float) -> float:
        if x not in figures:
            result = simulate(base.with_values({key: x}, where="calibrate fit"))
            value = result[target.figure]
            if not math.isfinite(value):
                raise CpasimError(f"{target.source}: simulated {target.figure} is not a number")
            figures[x] = value
        return figures[x]

    start_value = round(start) if spec.type in (INT, SIZE) else start
    before = simulated(start_value)
    found = search_1d(
        lambda x: (simulated(x) - target.measured) / target.measured,
        lo,
        hi,
        near=start,
        max_evaluations=max_simulations - 1,
        integer=spec.type in (INT, SIZE),
    )
    value = round(found.x) if spec.type in (INT, SIZE) else found.x
    notes = [f"{found.method} after a {GRID_POINTS}-point grid over [{lo:.6g}, {hi:.6g}]"]
    if found.at_edge:
        notes.append(
            f"the best {key} lies at the end of the range the evidence allows: the model "
            "misses what limits the real transfer"
        )
    return FitResult(
        config=cfg.with_values({key: value}, where="calibrate fit"),
        fitted={key: (start, value)},
        unidentifiable={},
        residuals=[Residual(target, simulated(value))],
        start_residuals=[Residual(target, before)],
        simulations=len(figures),
        notes=notes,
    )
