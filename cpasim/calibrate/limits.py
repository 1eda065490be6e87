"""What limited a captured transfer, said from the capture's own figures.

The verdict of a capture uses the words of a simulated run's verdict (the kinds
below, the three windows by name) so that a user compares like with like.  Each
reason is a :class:`Check`: a comparison of figures the report holds (named by
their field, so that a test can look every one up), with the sentence rendered
from those very numbers.  A verdict is only given when all of its checks hold;
nothing is printed that its figures do not support.

The order in which the limits are tried (:func:`judge`):

1. **timeout** — the sender fell silent before retransmitting, longer than
   :data:`STALL_RTTS` round trips, for :data:`STALLED` of the transfer or more.
2. **app** — the receiver's window stayed closed (unread data), or the sender
   had nothing in flight, for :data:`IDLE` of the steady part or more.
3. **window** (the peer's receive window) — the flight sat within one MSS of the
   advertised window for :data:`WINDOW_FULL` of the steady part (beside the
   sender), or goodput × round trip filled it (beside the receiver), *and* the
   round trips stayed near their base: no standing queue, so a larger window
   would carry more.  With a standing queue the window only feeds the queue,
   and the path's narrowest link is the limit (**bottleneck**).
4. **bottleneck** (or **link**) — goodput within 15 % of a bottleneck rate that
   the dispersion measured clearly (:data:`MIN_MODE_SHARE` of the packet pairs
   in its mode).  Beside the sender, when :data:`LINE_BUSY` of the data segments
   (no super-segments) already leave one after another at that rate, the tap's own
   link is the narrowest: **link**.
5. **loss** — more than :data:`LOSSY` of the bytes were resent: the congestion
   window, cut by each loss, held the rate below the path's.
6. **window** (the send buffer, or the congestion window) — beside the sender,
   the flight stayed below the peer's window with no loss to hold a congestion
   window there: the send buffer; unless the flight still grew to the end (the
   congestion window, still opening).

Otherwise the verdict is ``unknown``, with what was missing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cpasim.calibrate.inspection import FlowReport

#: The kinds a capture can show (the vocabulary of a simulated run's verdict).
KINDS: dict[str, str] = {
    "link": "the link beside the tapped host: its bandwidth",
    "bottleneck": "the narrowest link on the path (a router's or shaper's rate)",
    "window": "a TCP window: the send buffer, the peer's receive window, or the congestion window",
    "loss": "packet loss: each loss shrinks the congestion window",
    "timeout": "a retransmission timeout: the connection waits for its timer",
    "app": "an application: the sender's writes, or the receiver's reads",
    "unknown": "the capture does not show what limited the transfer",
}
#: The three windows, named as a simulated run's verdict names them.
PEER_WINDOW = "the peer's receive window"
CONGESTION_WINDOW = "the congestion window"
SEND_BUFFER = "the send buffer"

#: Goodput at least this share of the bottleneck rate: the bottleneck is full.
BOTTLENECK_SHARE = 0.85
#: A dispersion rate counts as measured when this share of its pairs are in its mode.
MIN_MODE_SHARE = 0.10
#: Share of the steady part with the flight at the peer's window: window-limited.
WINDOW_FULL = 0.5
#: Goodput × median round trip at least this share of the window: it is full.
WINDOW_LAW = 0.9
#: Median round trip above this many base round trips: a standing queue.
STANDING_QUEUE = 1.25
#: Share of the bytes resent above which losses shape the transfer.
LOSSY = 0.002
#: A retransmission after a silence this many round trips long was a timeout.
STALL_RTTS = 2
#: ... or this long when the round trip is unknown (Linux's smallest RTO).
STALL_FLOOR_NS = 200_000_000
#: Share of the transfer spent in such silences: timeout-limited.
STALLED = 0.2
#: Share of the steady part with nothing in flight, or with the window closed.
IDLE = 0.2
#: Flight's largest value in the last half of the steady part over the first half:
#: above this, the congestion window was still opening.
GROWTH = 1.1
#: Flight below this share of the peer's window never reached it.
BELOW_WINDOW = 0.9
#: Share of the data segments spaced at the bottleneck rate when the tap's own link is
#: the narrowest: it sends them back to back (an ACK-clocked sender behind a slower
#: link sends a pair at once on each ACK: about half).
LINE_BUSY = 0.9


@dataclass(frozen=True)
class Figure:
    """One figure of the report a check cites: its field (``rtt_ns.p50``) and value."""

    field: str
    value: float
    unit: str  # "bps", "ns", "B", "n" (a count) or "share"

    def shown(self) -> str:
        return show(self.value, self.unit)


#: How a check's value is computed from its figures (a, b, c in order).
FORMULAS = {
    "a": lambda f: f[0],
    "a/b": lambda f: f[0] / f[1],
    "a*b/8e9/c": lambda f: f[0] * f[1] / 8e9 / f[2],
}


@dataclass(frozen=True)
class Check:
    """One comparison a verdict rests on: ``value`` = ``formula`` over ``figures``,
    compared with ``bound``; ``text`` is rendered from the same numbers."""

    name: str
    figures: tuple[Figure, ...]
    formula: str
    op: str  # ">=", "<=", ">" or "<"
    bound: float
    text: str

    @property
    def value(self) -> float:
        return FORMULAS[self.formula]([f.value for f in self.figures])

    @property
    def holds(self) -> bool:
        v, b = self.value, self.bound
        return {">=": v >= b, "<=": v <= b, ">": v > b, "<": v < b}[self.op]

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "text": self.text,
            "figures": {f.field: f.value for f in self.figures},
            "value": self.value,
            "op": self.op,
            "bound": self.bound,
            "holds": self.holds,
        }


@dataclass(frozen=True)
class CaptureVerdict:
    """What limited a captured transfer (see the module docstring).

    The fields are those of a simulated run's verdict: ``change`` maps scenario keys
    to values (the host named as in a scenario: the data's sender is tx);
    ``predicted`` is ``{"metric", "baseline", "value"}`` from the capture's figures."""

    kind: str
    resource: str
    host: str = ""  # "tx" (the data's sender), "rx" or "" (the path)
    checks: tuple[Check, ...] = ()
    change: dict[str, str] = field(default_factory=dict)
    predicted: dict | None = None
    next: str | None = None
    note: str | None = None
    tried: tuple[Check, ...] = ()  # for "unknown": the checks that came closest, failing

    @property
    def summary(self) -> str:
        return f"{self.resource} [{self.kind}]"

    @property
    def evidence(self) -> tuple[str, ...]:
        return tuple(c.text for c in self.checks)

    def to_json(self) -> dict:
        return {
            "kind": self.kind,
            "resource": self.resource,
            "host": self.host,
            "summary": self.summary,
            "evidence": list(self.evidence),
            "checks": [c.to_json() for c in self.checks],
            "tried": [c.to_json() for c in self.tried],
            "change": dict(self.change),
            "predicted": self.predicted,
            "next": self.next,
            "note": self.note,
        }

    def lines(self) -> list[str]:
        """The verdict as ``label  text`` lines for a terminal."""
        out = [f"limited by   {self.resource}  [{self.kind}]"]
        out += [f"  evidence   {e}" for e in self.evidence]
        if self.change:
            out.append("  change     " + " ".join(f"{k}={v}" for k, v in self.change.items()))
        if self.predicted is not None:
            p = self.predicted
            out.append(
                f"  predicted  goodput {show(p['baseline'], 'bps')} -> "
                f"{show(p['value'], 'bps')} (x {p['value'] / p['baseline']:.2f}), "
                "from the capture's figures"
            )
        if self.next:
            out.append(f"  then       limited by {self.next}")
        if self.note:
            out.append(f"  note       {self.note}")
        out += [f"  not held   {c.text}" for c in self.tried]
        return out


def show(value: float, unit: str) -> str:
    """A figure as a check's sentence cites it."""
    if unit == "bps":
        return f"{value / 1e6:,.3f} Mb/s"
    if unit == "ns":
        return f"{value / 1e3:.1f} us" if abs(value) < 1e6 else f"{value / 1e6:.2f} ms"
    if unit == "B":
        return f"{value:,.0f} B"
    if unit == "n":
        return f"{value:,.0f}"
    return percent(value)


def percent(share: float) -> str:
    """A share as a percentage, with two significant digits below 10 %."""
    if share == 0 or abs(share) >= 0.1:
        return f"{share:.0%}"
    return f"{100 * share:.2g}%"


def _figure(report: FlowReport, path: str, unit: str) -> Figure | None:
    """The figure at ``path`` in ``report`` (``None`` when absent)."""
    value = lookup(report, path)
    return None if value is None else Figure(path, float(value), unit)


def lookup(report, path: str):
    """``report``'s value at a dotted ``path`` (``rtt_ns.p50``), or None."""
    value = report
    for part in path.split("."):
        if part.isdigit():
            value = value[int(part)] if int(part) < len(value) else None
        else:
            value = getattr(value, part, None)
        if value is None:
            return None
    return value


def _check(name, figures, formula, op, bound, template, times=False) -> Check | None:
    """A check over ``figures`` (None if one is missing or a ratio would divide by 0).

    ``template`` is formatted with each figure shown (``a``, ``b``, ``c``), the value
    ``v`` and the bound ``bound``: as shares, or as multiples with ``times``."""
    if any(f is None for f in figures) or any(f.value == 0 for f in figures[1:]):
        return None
    value = FORMULAS[formula]([f.value for f in figures])
    if not math.isfinite(value):
        return None
    names = dict(zip("abc", (f.shown() for f in figures), strict=False))

    text = template.format(**names, v=_beside(value, bound, times), bound=_show(bound, times))
    return Check(name, tuple(figures), formula, op, bound, text)


def _show(x: float, times: bool, digits: int = 0) -> str:
    if times:
        return f"{x:.{2 + digits}f} x"
    return percent(x) if not digits else f"{100 * x:.{digits}f}%"


def _beside(value: float, bound: float, times: bool) -> str:
    """``value`` shown with the digits that keep it apart from ``bound`` when it differs:
    84.5 % is not "85 %" beside a bound of 85 %."""
    for digits in range(4):
        shown = _show(value, times, digits)
        if value == bound or shown != _show(bound, times, digits):
            return shown
    return shown


# -- the checks ---------------------------------------------------------------------------
def _bottleneck_full(r, op=">=") -> Check | None:
    words = "at least" if op == ">=" else "below"
    return _check(
        "goodput / bottleneck rate",
        (_figure(r, "steady_goodput_bps", "bps"), _figure(r, "bottleneck.bps", "bps")),
        "a/b",
        op,
        BOTTLENECK_SHARE,
        "steady goodput {a} is {v} of the bottleneck rate {b} (" + words + " {bound})",
    )


def _bottleneck_measured(r) -> Check | None:
    return _check(
        "bottleneck pairs in mode",
        (_figure(r, "bottleneck.in_mode", "n"), _figure(r, "bottleneck.samples", "n")),
        "a/b",
        ">=",
        MIN_MODE_SHARE,
        "the bottleneck rate is measured: {a} of {b} packet pairs within 5 % of it, "
        "{v} (at least {bound})",
    )


def _window_full(r) -> Check | None:
    return _check(
        "time at the peer's window",
        (_figure(r, "window_full_share", "share"), _figure(r, "adv_window.p50", "B")),
        "a",
        ">=",
        WINDOW_FULL,
        "the flight sat within one MSS of the peer's advertised window (median {b}) "
        "for {v} of the steady part (at least {bound})",
    )


def _window_law(r) -> Check | None:
    return _check(
        "goodput x round trip / peer's window",
        (
            _figure(r, "steady_goodput_bps", "bps"),
            _figure(r, "rtt_ns.p50", "ns"),
            _figure(r, "adv_window.p50", "B"),
        ),
        "a*b/8e9/c",
        ">=",
        WINDOW_LAW,
        "steady goodput {a} × median round trip {b} fills {v} of the peer's "
        "advertised window {c} (at least {bound})",
    )


def _queue(r, op: str) -> Check | None:
    words = "no standing queue: at most" if op == "<=" else "a standing queue: above"
    return _check(
        "median / base round trip",
        (_figure(r, "rtt_ns.p50", "ns"), _figure(r, "rtt_ns.min", "ns")),
        "a/b",
        op,
        STANDING_QUEUE,
        "median round trip {a} is {v} the base {b} (" + words + " {bound})",
        times=True,
    )


def _resent(r, op: str) -> Check | None:
    words = "above" if op == ">" else "at most"
    return _check(
        "resent share",
        (_figure(r, "retransmitted_bytes", "B"), _figure(r, "data_bytes", "B")),
        "a/b",
        op,
        LOSSY,
        "{a} of {b} resent: {v} (" + words + " {bound})",
    )


def _stalled(r) -> Check | None:
    return _check(
        "stalled share",
        (_figure(r, "stalled_ns", "ns"), _figure(r, "duration_ns", "ns")),
        "a/b",
        ">=",
        STALLED,
        "the sender waited {a} of the transfer's {b} in silences before "
        "retransmissions: {v} (at least {bound})",
    )


def _share(r, name: str, path: str, text: str) -> Check | None:
    return _check(name, (_figure(r, path, "share"),), "a", ">=", IDLE, text)


def _below_window(r) -> Check | None:
    return _check(
        "flight / peer's window",
        (_figure(r, "in_flight.p90", "B"), _figure(r, "adv_window.p50", "B")),
        "a/b",
        "<",
        BELOW_WINDOW,
        "the flight (p90 {a}) stayed below the peer's advertised window (median {b}): "
        "{v} of it (below {bound})",
    )


def _growth(r, op: str) -> Check | None:
    words = "still opening: at least" if op == ">=" else "held: below"
    return _check(
        "flight growth",
        (_figure(r, "in_flight_late_max", "B"), _figure(r, "in_flight_early_max", "B")),
        "a/b",
        op,
        GROWTH,
        "the largest flight of the steady part's second half, {a}, is {v} the first "
        "half's {b} (" + words + " {bound})",
        times=True,
    )


def _line_busy(r) -> Check | None:
    return _check(
        "data spaced at the bottleneck rate",
        (_figure(r, "data_at_bottleneck_share", "share"), _figure(r, "bottleneck.bps", "bps")),
        "a",
        ">=",
        LINE_BUSY,
        "{v} of the data segments left the tap one after another at the bottleneck rate "
        "{b} (at least {bound}): the tap's own link sends at that rate",
    )


# -- the verdict ----------------------------------------------------------------------------
def judge(r: FlowReport) -> CaptureVerdict:
    """The verdict of the report ``r`` (all its figures set; see the module docstring)."""
    if r.flow.proto != "tcp":
        return CaptureVerdict("unknown", "not a TCP transfer", note="UDP carries no windows")
    if not r.data_packets or not r.duration_ns:
        return CaptureVerdict("unknown", "no transfer to judge", note="no data over time")
    sender_side = r.side == "sender"

    stalled = _stalled(r)
    if stalled is not None and stalled.holds:
        return CaptureVerdict(
            "timeout",
            "the retransmission timer",
            "tx",
            (stalled,),
            note="losses that fast retransmit cannot repair (a whole window, or the "
            "retransmission itself) wait for the timer",
        )
    closed = _share(
        r,
        "time with the window closed",
        "window_closed_share",
        "the peer advertised less than one MSS for {v} of the steady part (at least {bound})",
    )
    if closed is not None and closed.holds:
        return CaptureVerdict(
            "app",
            "the receiving application: its unread data closed the window",
            "rx",
            (closed,),
            note="the receiver reads more slowly than the data arrives",
        )
    idle = _share(
        r,
        "time with nothing in flight",
        "idle_share",
        "nothing was in flight for {v} of the steady part (at least {bound})",
    )
    if idle is not None and idle.holds:
        return CaptureVerdict(
            "app",
            "the sending application: it wrote less than the path carries",
            "tx",
            (idle,),
        )

    full = None
    if sender_side:
        full = _window_full(r)
        if full is None or not full.holds:
            full = _window_law(r) or full
    elif r.side == "receiver":
        full = _window_law(r)
    if full is not None and full.holds:
        calm, queued = _queue(r, "<="), _queue(r, ">")
        if calm is not None and calm.holds:
            return _window_verdict(r, PEER_WINDOW, (full, calm))
        if queued is not None and queued.holds:
            checks = (full, queued)
            rate = _bottleneck_full(r)
            named = rate is not None and rate.holds  # the rate is named only if reached
            return CaptureVerdict(
                "bottleneck",
                "the narrowest link on the path" + (_rate_words(r) if named else ""),
                "",
                (*checks, rate) if named else checks,
                note="a larger window would only lengthen the queue",
            )

    measured = _bottleneck_measured(r)
    rate = _bottleneck_full(r)
    if measured is not None and measured.holds and rate is not None and rate.holds:
        busy = _line_busy(r)
        if sender_side and busy is not None and busy.holds and not r.super_segments:
            return CaptureVerdict(
                "link",
                "the link at the tap" + _rate_words(r),
                "tx",
                (measured, rate, busy),
                next=_window_next(r),
            )
        return CaptureVerdict(
            "bottleneck",
            "the narrowest link on the path" + _rate_words(r),
            "",
            (measured, rate),
            next=_window_next(r),
        )

    lossy = _resent(r, ">")
    if lossy is not None and lossy.holds:
        checks = (lossy,)
        below = _bottleneck_full(r, "<")
        if below is not None and below.holds:
            checks += (below,)
        return CaptureVerdict(
            "loss",
            "packet loss: the congestion window, cut by each loss",
            "tx",
            checks,
            note="a loss-based congestion control halves its window per loss; "
            "fewer losses (a deeper queue at the bottleneck) or a congestion control "
            "that does not back off per loss (tcp.cc=bbr) would carry more",
        )

    below = _below_window(r) if sender_side else None
    clean = _resent(r, "<=")
    if below is not None and below.holds and clean is not None and clean.holds:
        growing = _growth(r, ">=")
        if growing is not None and growing.holds:
            return CaptureVerdict(
                "window",
                CONGESTION_WINDOW + ", still opening when the capture ended",
                "tx",
                (below, clean, growing),
                note="a longer transfer would show the limit it opens to",
            )
        held = _growth(r, "<")
        if held is not None and held.holds:
            return _window_verdict(r, SEND_BUFFER, (below, clean, held))
    tried = [c for c in (full, rate, lossy, below) if c is not None and not c.holds]
    why = "no limit's figures hold"
    if r.side == "unknown":
        why += "; the side of the capture is unknown (give --side)"
    return CaptureVerdict("unknown", "not shown by the capture", note=why, tried=tuple(tried))


def _rate_words(r) -> str:
    b = r.bottleneck
    return f" ({show(b.bps, 'bps')})" if b is not None else ""


def _window_verdict(r, which: str, checks: tuple[Check, ...]) -> CaptureVerdict:
    """A window limit, with the window the path needs and what it would buy."""
    host = "rx" if which == PEER_WINDOW else "tx"
    key = "hosts.rx.tcp.rmem" if which == PEER_WINDOW else "hosts.tx.tcp.wmem"
    b, rtt = r.bottleneck, r.rtt_ns
    if b is None or rtt is None or not r.mss:
        return CaptureVerdict(
            "window",
            which,
            host,
            checks,
            note="the capture shows no bottleneck rate or round trip to size a larger window by",
        )
    needed = b.bps * rtt.min / 8e9  # the bandwidth-delay product
    payload = b.bps * r.mss / (r.mss + r.header_bytes + r.l2_overhead)
    predicted = None
    if r.steady_goodput_bps:
        predicted = {
            "metric": "goodput_bps",
            "baseline": r.steady_goodput_bps,
            "value": max(payload, r.steady_goodput_bps),
        }
    buffer = 1 << math.ceil(math.log2(max(2 * needed, 1)))
    return CaptureVerdict(
        "window",
        which,
        host,
        checks,
        change={key: f"{buffer}B"},
        predicted=predicted,
        next="the narrowest link on the path" + _rate_words(r),
        note=f"a window of at least the bandwidth-delay product, {needed:,.0f} B "
        f"({show(b.bps, 'bps')} × base round trip {show(rtt.min, 'ns')}), fills the path; "
        f"the change gives twice that as cpasim's fixed buffer (on Linux: SO_RCVBUF / "
        f"SO_SNDBUF, iperf3 -w)",
    )


def _window_next(r) -> str | None:
    """What would limit once the bottleneck is faster, at the latest: the window the
    receiver offers (the sender's own limits do not show in a capture)."""
    adv, rtt = r.adv_window, r.rtt_ns
    if adv is None or rtt is None or not rtt.min:
        return None
    rate = show(adv.max * 8e9 / rtt.min, "bps")
    return (
        f"{PEER_WINDOW} at {rate} at the most ({show(adv.max, 'B')} per base round trip; "
        "a limit of the sender's own, which a capture does not show, may come first)"
    )
