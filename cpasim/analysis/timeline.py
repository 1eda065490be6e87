"""A critical-path timeline: what every state machine did over a window of time.

One row per state machine (numbered instances such as ``tx:Link#17`` share
their SM's row, drawn translucent where they overlap), its states as coloured
spans read from the trace's ``begin`` records; the critical path is a black
line through the rows: along a row while the path spends time in that SM's
state, across rows where it hands over through a queue or a link.

The path is placed at its start plus its length so far, which is the time of
its nodes because on a measured trace every nanosecond from start to end lies
on it (ratio 1); a what-if (``--scale`` ...) changes the length, not the
trace, so a timeline is drawn only for the measured trace.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import numpy as np

from cpasim.analysis.report import INITIAL_STATE, AnalysisResult
from cpasim.errors import CpasimError
from cpasim.files import replace_atomically
from cpasim.tracing.records import BEGIN, TraceSource
from cpasim.units import parse_quantity

#: Default window: the last this much of the path (steady state), in ns.
DEFAULT_WINDOW_NS = 200e3

#: States that mean "nothing to do": drawn pale so the work stands out.
_IDLE = re.compile(r"^(idle|wait.*|armed|\(initial\)|sk_wait.*|sk_stream_wait.*)$", re.I)

_INST = re.compile(r"#[^:>\[]*")


def parse_window(text: str) -> tuple[float, float]:
    """``START:END`` as times with units (``2ms:2.3ms``); ns."""
    parts = text.split(":")
    if len(parts) != 2:
        raise CpasimError(f"--window {text!r}: expected START:END such as 2ms:2.3ms")
    start, end = (parse_quantity(p.strip(), "time", what="--window") for p in parts)
    start, end = float(start), float(end)
    if not end > start:
        raise CpasimError(f"--window {text!r}: END must be later than START")
    return start, end


def _base(name: str) -> str:
    """``tx:Link#17`` -> ``tx:Link``."""
    return _INST.sub("", name)


def state_spans(source: TraceSource, start: float, end: float):
    """``(sm id, state id, t0, t1)`` of every state that overlaps [start, end]."""
    last_t: dict[int, float] = {}
    last_s: dict[int, int] = {}
    spans = []
    past = False  # the trace goes on past the window
    for chunk in source.chunks():
        rec = chunk[chunk["op"] == BEGIN]
        if not len(rec):
            continue
        ts, sms, states = rec["t"], rec["sm"], rec["a"]
        if ts[-1] < start:
            # Entirely before the window: only each SM's latest state matters.
            order = np.unique(sms[::-1], return_index=True)
            for sm, i in zip(order[0].tolist(), order[1].tolist(), strict=True):
                j = len(sms) - 1 - i
                last_t[sm], last_s[sm] = float(ts[j]), int(states[j]) + 1
            continue
        for t, sm, s in zip(ts.tolist(), sms.tolist(), states.tolist(), strict=True):
            if t > end:
                past = True
                break
            if sm in last_t and t > start and t > last_t[sm]:  # zero-length: nothing to draw
                spans.append((sm, last_s[sm], max(last_t[sm], start), t))
            last_t[sm], last_s[sm] = t, s + 1  # state index: 0 is (initial)
        if ts[-1] > end:
            break
    # The last states last until the trace ends (or the window does).
    stop = end if past else min(end, max(last_t.values(), default=start))
    for sm, t in last_t.items():
        if t < stop and start < stop:
            spans.append((sm, last_s[sm], max(t, start), stop))
    return spans


def path_segments(result: AnalysisResult):
    """Per path: ``[(kind, from row, to row, t0, t1, name)]``; kind ``state`` or ``hand``."""
    paths = [result.path] if result.path is not None else list(result.connections.values())
    out = []
    for pr in paths:
        if not pr.reachable:
            continue
        segs = []
        for e in pr.edges:
            name, inc = e["name"], e["increment_ns"]
            t1 = pr.start_ns + e["cumulative_ns"]
            if "->" in name and name.endswith("]"):
                a, rest = name.split("->", 1)
                b = rest[: rest.index("[")]
                segs.append(("hand", _base(a), _base(b), t1 - inc, t1, name))
            elif inc > 0:
                sys, sm, _state = name.split(":", 2)
                row = _base(f"{sys}:{sm}")
                segs.append(("state", row, row, t1 - inc, t1, name))
        out.append((pr, segs))
    return out


def default_window(result: AnalysisResult) -> tuple[float, float]:
    paths = [result.path] if result.path is not None else list(result.connections.values())
    ends = [p.end_ns for p in paths if p.reachable and p.end_ns is not None]
    starts = [p.start_ns for p in paths if p.reachable and p.start_ns is not None]
    if not ends:
        raise CpasimError("--timeline: no critical path to draw (end not reachable)")
    end = max(ends)
    return max(min(starts), end - DEFAULT_WINDOW_NS), end


def _unit(span_ns: float) -> tuple[str, float]:
    if span_ns >= 5e6:
        return "ms", 1e6
    if span_ns >= 5e3:
        return "µs", 1e3
    return "ns", 1.0


def draw_timeline(
    source: TraceSource, result: AnalysisResult, window: tuple[float, float] | None = None
):
    """The timeline as a matplotlib figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if result.transforms:
        raise CpasimError(
            "--timeline draws the measured trace; run it without --scale/--scale-comm/"
            "--break/--capacity"
        )
    start, end = window if window is not None else default_window(result)
    spans = state_spans(source, start, end)
    key = source.key  # after the read: a JSON Lines source makes a fresh key per read
    if not spans:
        raise CpasimError(
            f"--window: the trace has no state between {start / 1e3:.6g} us and {end / 1e3:.6g} us"
        )
    paths = path_segments(result)
    in_window = [[s for s in segs if s[4] >= start and s[3] <= end] for _pr, segs in paths]
    names = {}
    for sm in {s[0] for s in spans}:
        sys, name, _inst = key.sms[sm]
        names[sm] = f"{sys}:{name}"
    rows = _rows(in_window, spans, names, key)
    if not rows:
        raise CpasimError(
            f"--window: nothing happens between {start / 1e3:.6g} us and {end / 1e3:.6g} us"
        )
    y = {r: i for i, r in enumerate(rows)}
    unit, scale = _unit(end - start)
    work, colour = _colours(plt, spans, names, y, key)
    instances: dict[str, set] = defaultdict(set)
    for sm, *_ in spans:
        instances[names[sm]].add(sm)

    height = max(3.0, 0.32 * len(rows) + 1.6)
    fig, ax = plt.subplots(figsize=(14, height))
    for sm, s, t0, t1 in spans:
        if names[sm] in y:
            _bar(ax, y, names[sm], _state(key, s), t0, t1, colour, instances, start, scale)
    for segs in in_window:
        for kind, a, b, t0, t1, _name in segs:
            t0, t1 = max(t0, start), min(t1, end)
            xs = [(t0 - start) / scale, (t1 - start) / scale]
            if kind == "state":
                ax.plot(xs, [y[a], y[a]], color="black", linewidth=2.2, solid_capstyle="butt")
            else:
                ax.plot(xs, [y[a], y[b]], color="black", linewidth=0.9)
    labels = [r + (f"  ×{len(instances[r])}" if len(instances[r]) > 1 else "") for r in rows]
    ax.set_yticks(range(len(rows)), labels, fontsize=8)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlim(0, (end - start) / scale)
    ax.set_xlabel(f"time since {start / scale:.6g} {unit} ({unit})")
    ax.grid(True, axis="x", alpha=0.3)
    _legend(plt, ax, work, colour)
    title = (
        f"Critical path through the state machines, {start / scale:.6g}–{end / scale:.6g} {unit}"
    )
    shown = sum(len(s) for s in in_window)
    if not shown:
        title += "\n(the path has no edge in this window"
        title += ": its listing ends earlier)" if _listing_short(paths) else ")"
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig


def _bar(ax, y: dict, row: str, state: str, t0, t1, colour, instances, start, scale) -> None:
    """SM ``row`` in ``state`` from ``t0`` to ``t1`` (idle: a thin grey bar)."""
    idle = _IDLE.match(state) is not None
    face = (0.9, 0.9, 0.9) if idle else colour.get(state, (0.6, 0.6, 0.6))
    alpha = 0.55 if len(instances[row]) > 1 else 1.0
    ax.barh(
        y[row],
        (t1 - t0) / scale,
        left=(t0 - start) / scale,
        height=0.7 if not idle else 0.35,
        color=face,
        alpha=alpha,
        linewidth=0,
    )


def _rows(in_window, spans, names: dict, key) -> list[str]:
    """The rows: in the order the path meets them in the window, then the other
    busy SMs by name."""
    rows: list[str] = []
    for segs in in_window:
        for _k, a, b, *_ in segs:
            for r in (a, b):
                if r not in rows:
                    rows.append(r)
    busy = {names[sm] for sm, s, *_ in spans if not _IDLE.match(_state(key, s))}
    return rows + sorted(busy - set(rows))


def _colours(plt, spans, names: dict, y: dict, key) -> tuple[list[str], dict]:
    """The working states by time in the window, and the colours of the first 20
    (the states with the most time get their own)."""
    total: dict[str, float] = defaultdict(float)
    for sm, s, t0, t1 in spans:
        if names[sm] in y:
            total[_state(key, s)] += t1 - t0
    work = [s for s, _t in sorted(total.items(), key=lambda kv: -kv[1]) if not _IDLE.match(s)]
    # Ten strong colours first, then their light variants: neighbours stay apart.
    palette = list(plt.get_cmap("tab10").colors) + list(plt.get_cmap("tab20").colors[1::2])
    return work, {s: palette[i % len(palette)] for i, s in enumerate(work[:20])}


def _legend(plt, ax, work: list[str], colour: dict) -> None:
    from matplotlib.patches import Patch

    handles = [Patch(color=colour[s], label=s) for s in work[:20]]
    handles.append(Patch(color=(0.9, 0.9, 0.9), label="idle / waiting"))
    handles.append(plt.Line2D([], [], color="black", linewidth=2.2, label="critical path"))
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))


def _listing_short(paths) -> bool:
    return any(len(pr.edges) < pr.edge_count for pr, _segs in paths)


def _state(key, index: int) -> str:
    return INITIAL_STATE if index == 0 else key.states[index - 1]


def write_timeline(
    out: Path, source: TraceSource, result: AnalysisResult, window: tuple[float, float] | None
) -> None:
    import matplotlib.pyplot as plt

    fmt = out.suffix.lower()[1:]
    if fmt not in ("png", "svg", "pdf"):
        raise CpasimError(f"--timeline {out}: expected a file ending in .png, .svg or .pdf")
    fig = draw_timeline(source, result, window)
    try:
        replace_atomically(out, lambda tmp: fig.savefig(tmp, dpi=110, format=fmt))
    except OSError as exc:
        raise CpasimError(f"--timeline {out}: cannot write the figure ({exc.strerror})") from None
    finally:
        plt.close(fig)
