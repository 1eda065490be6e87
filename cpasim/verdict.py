"""What limits a run, in a user's words: the resource, the evidence, the change that
would help and what it would buy.

A :class:`Verdict` is built from what a run measured (utilisation, drops,
retransmissions, and where each TCP connection stood when the run stopped:
:meth:`cpasim.model.system.System.end_state`) and, when the run was traced, from
its critical path (:func:`cpasim.predict.diagnose.diagnose`).  The critical path
says *which* resource the run waited on; the end state says *which side* of it:
a loop through ``Send window`` is the peer's receive window when that window is
the smaller one, the congestion window when it is not (and a congestion window
kept small by losses is a loss limit); a receive window kept closed by unread
data is the reading host's limit, not its buffer's.  The change names the host and
the key that bind (a receive-window limit changes only the receiver's buffer, a
send-buffer limit only the sender's); with the run's trace at hand it is predicted
(:mod:`cpasim.predict`) and the predicted path names what would limit next.

The kinds (:data:`KINDS`) are the vocabulary every command uses.  A run that
delivered nothing, or stopped delivering, is explained from its end state alone
(:mod:`cpasim.stall`); a run that was not traced gets a verdict only when one
resource is saturated (:func:`saturated`), and otherwise a line saying so.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from cpasim.config import Config, spec_of
from cpasim.config.params import TOPOLOGIES
from cpasim.errors import printable
from cpasim.model.flow_kinds import flow_kind
from cpasim.model.workloads import WORKLOADS
from cpasim.predict.diagnose import Diagnosis, diagnose
from cpasim.stall import DROP_WORDS, Stall, drop_places, drop_text, place_text
from cpasim.units import RATE, SIZE, TIME, human

#: Every kind of limit, and what it means.
KINDS: dict[str, str] = {
    "link": "the link: its bandwidth (or, for request/response, its delay)",
    "bottleneck": "the bottleneck router's rate between the hosts",
    "window": "a TCP window: the sender's send buffer, the receive window its peer "
    "offers, or the congestion window",
    "bus": "the I/O bus between the NIC and memory (PCIe, PCI, on-die or M5's bus)",
    "cpu": "a CPU's speed: the work per byte and per packet on one core",
    "cores": "the number of CPU cores: work waits for a free core",
    "tx_ring": "the NIC's transmit descriptor ring",
    "rx_ring": "the NIC's receive descriptor ring",
    "qdisc": "the queue in front of the driver (qdisc)",
    "tx_fifo": "the NIC's on-chip transmit FIFO",
    "loss": "packet loss: each loss shrinks the congestion window",
    "timeout": "a retransmission timeout: the connection waits for its timer",
    "app": "the application itself: what it asks for, or how fast it reads",
}

#: Utilisation at or above which a link, router or bus is taken as saturated.
SATURATED = 0.9
#: Buffers offered as the window remedy: at least this many bandwidth-delay products.
BDP_FACTOR = 4
#: A receive buffer holding at least this share unread means the reader is behind.
READER_BEHIND = 0.5


@dataclass(frozen=True)
class Verdict:
    """What limits a run (see the module docstring).

    ``change`` maps full keys to their new values as written (``hosts.tx.tcp.wmem``:
    ``"4MiB"``), ``values`` the same in internal units; ``predicted`` is
    ``{"metric", "baseline", "value"}`` when the change was predicted from the
    trace; ``note`` says why it was not, or what to check.
    """

    kind: str
    resource: str
    host: str = ""
    evidence: tuple[str, ...] = ()
    change: dict[str, str] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict, repr=False)
    predicted: dict | None = None
    next: str | None = None
    next_kind: str | None = None
    note: str | None = None
    explained: bool = True  # from the critical path (False: from utilisation alone)
    stalled: bool = False  # nothing to scale: a change is re-simulated, not predicted

    @property
    def summary(self) -> str:
        return f"limited by {self.resource}"

    def change_text(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.change.items())

    def to_json(self) -> dict:
        return {
            "kind": self.kind,
            "resource": self.resource,
            "host": self.host,
            "summary": self.summary,
            "evidence": list(self.evidence),
            "change": dict(self.change),
            "predicted": self.predicted,
            "next": self.next,
            "next_kind": self.next_kind,
            "note": self.note,
            "explained": self.explained,
        }

    def lines(self, scenario: str | None = None, sets: Sequence[str] = ()) -> list[str]:
        """The verdict as a block of ``label  text`` lines for a terminal (with the
        ``cpasim validate`` command that checks the change, given the scenario and the
        ``--set`` options it ran with)."""
        rows = self.rows(scenario, sets)
        lines = [f"{rows[0][0]:12} {rows[0][1]}"] + [f"  {k:10} {v}" for k, v in rows[1:]]
        return [printable(line) for line in lines]  # names from a trace: escaped

    def rows(self, scenario: str | None = None, sets: Sequence[str] = ()) -> list[tuple[str, str]]:
        """``(label, text)`` pairs: what :meth:`lines` and the HTML views show."""
        rows = [("limited by", f"{self.resource}  [{self.kind}]")]
        rows += [("evidence", e) for e in self.evidence]
        if self.change:
            rows.append(("change", self.change_text()))
        if self.predicted is not None:
            p = self.predicted
            ratio = p["value"] / p["baseline"] if p["baseline"] else math.nan
            rows.append(
                (
                    "predicted",
                    f"{metric_text(p['metric'], p['baseline'])} -> "
                    f"{metric_text(p['metric'], p['value'])} (x {ratio:.2f}), from the trace",
                )
            )
        if self.next:
            rows.append(("then", f"limited by {self.next}"))
        if self.note:
            rows.append(("note", self.note))
        if self.change and scenario is not None:
            words = [f"--set {shlex.quote(s)}" for s in sets]
            words += [f"--change {k}={v}" for k, v in self.change.items()]
            rows.append(("check", f"cpasim validate {shlex.quote(scenario)} {' '.join(words)}"))
        return rows

    def _repr_html_(self) -> str:
        from html import escape

        rows = "".join(
            f"<tr><th style='text-align:left'>{escape(k)}</th><td>{escape(v)}</td></tr>"
            for k, v in self.rows()
        )
        return f"<table>{rows}</table>"


def metric_text(metric: str, value: float) -> str:
    if metric == "goodput_bps":
        return human(value, RATE)
    return human(value, TIME)


# -- words ------------------------------------------------------------------------------
def _value(cfg: Config, key: str) -> str:
    return spec_of(key).format(cfg.value(key))


def _host(sys: str) -> str:
    return {"fw": "the forwarding host"}.get(sys, f"host {sys}")


def _peer(sys: str) -> str:
    return {"tx": "rx", "rx": "tx"}.get(sys, "rx")


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def _bytes(n: float) -> str:
    return human(n, SIZE, 3)


#: State names (``sm:state``, patterns) → what the work is, for people.
STATE_WORDS: tuple[tuple[str, str], ...] = (
    ("MAC:transmit", "putting frames on the wire"),
    ("Bottleneck:serialize", "the router sending at its rate"),
    ("App:TcpSendMsg: copy", "copying written data into the kernel"),
    ("App:TcpRecvMsg: copy", "copying received data to the application"),
    ("App:UdpSendMsg: copy", "copying datagrams into the kernel"),
    ("App:UdpRecvMsg: copy", "copying datagrams to the application"),
    ("NIC TX:DMA packet", "the NIC reading packets from memory"),
    ("NIC RX:DMA packet", "the NIC writing packets to memory"),
    ("NIC TX:DMA descriptors", "the NIC fetching transmit descriptors"),
    ("NIC RX:DMA descriptors", "the NIC fetching receive descriptors"),
    ("NIC TX:writeback", "the NIC writing back transmit descriptors"),
    ("IP Recv:tcp_v4_rcv", "TCP receive processing"),
    ("IP Recv:tcp_ack", "processing ACKs"),
    ("TcpSend:tcp_write_xmit", "TCP building segments"),
    ("NAPI:poll", "the driver's receive polling"),
    ("Driver TX:xmit", "the driver posting packets to the NIC"),
    ("IRQ Coalesce Timer:countdown", "holding interrupts back (interrupt moderation)"),
)


def plain_state(name: str) -> str:
    """``tx:App:TcpSendMsg: copy`` → ``host tx copying written data into the kernel
    (tx:App:TcpSendMsg: copy)``."""
    sys, _, rest = name.partition(":")
    if rest == "Link:propagate":
        return f"propagation {sys}->{_peer(sys)} over the link ({name})"
    for pattern, words in STATE_WORDS:
        if rest == pattern:
            return f"{_host(sys)} {words} ({name})"
    return name


# -- which key binds ----------------------------------------------------------------------
def _pow2_at_least(n: float) -> int:
    k = 1
    while k < n:
        k *= 2
    return k


def _path_rate(cfg: Config) -> float:
    rate = cfg.link.rate
    if 0 < cfg.bottleneck.rate < rate:
        rate = cfg.bottleneck.rate
    return rate


def _bdp(cfg: Config) -> float:
    """Bytes in flight that fill the path: its narrowest rate times the round trip's
    propagation (a forwarding host doubles the links)."""
    hops = TOPOLOGIES[cfg.topology.kind].links
    return _path_rate(cfg) / 8 * 2 * hops * cfg.link.delay / 1e9


def _buffer(cfg: Config, sys: str, send: bool) -> tuple[str, dict]:
    """The key that sizes host ``sys``'s send (or receive) buffer, and the change: a
    value at least :data:`BDP_FACTOR` bandwidth-delay products (and twice the present
    one), with the ``net.core`` limit a ``setsockopt`` request is clamped to raised to
    match when it is below."""
    fixed, request, limit, core = (
        ("tcp.wmem", "tcp.sndbuf", "tcp.wmem_max", "tcp.core_wmem_max")
        if send
        else ("tcp.rmem", "tcp.rcvbuf", "tcp.rmem_max", "tcp.core_rmem_max")
    )
    h = f"hosts.{sys}."
    if cfg.value(h + fixed):
        key = h + fixed
    elif cfg.value(h + request):
        key = h + request
    else:
        key = h + limit
    now = cfg.value(key)
    want = _within_range(cfg, key, max(_pow2_at_least(BDP_FACTOR * _bdp(cfg)), 2 * now))
    values = {key: want}
    if key == h + request and cfg.value(h + core) < want:
        values[h + core] = want
    return key, values


def _within_range(cfg: Config, key: str, value):
    """``value`` for ``key``, no more than its range allows, of the key's own type."""
    spec = spec_of(key)
    if spec.hi is not None:
        value = min(value, spec.hi)
    return type(cfg.value(key))(value)


def _times(cfg: Config, key: str, factor: float) -> dict:
    return {key: _within_range(cfg, key, cfg.value(key) * factor)}


def _bus_change(cfg: Config, sys: str) -> dict:
    """The change that makes host ``sys``'s bus faster (its kind says which key), each
    value kept within its key's range."""
    from cpasim.model.buses import bus_kind

    h = f"hosts.{sys}."
    kind = bus_kind(cfg.value(h + "bus.kind"))
    faster = kind.faster(lambda k: cfg.value(h + k))
    return {h + key: _within_range(cfg, h + key, value) for key, value in faster.items()}


def _bus_words(cfg: Config, sys: str) -> str:
    from cpasim.model.buses import bus_kind

    h = f"hosts.{sys}."
    kind = bus_kind(cfg.value(h + "bus.kind"))
    return f"{_host(sys)}'s " + kind.words(lambda key: _value(cfg, h + key))


# -- the verdict of a diagnosed path ----------------------------------------------------------
def _formatted(values: dict) -> dict[str, str]:
    return {k: spec_of(k).format(v) for k, v in values.items()}


def _make(kind, resource, host, evidence, values, **kw) -> Verdict:
    return Verdict(kind, resource, host, tuple(evidence), _formatted(values), dict(values), **kw)


def _ends(result: dict, sys: str) -> list[dict]:
    return ((result.get("end_state") or {}).get("tcp") or {}).get(sys) or []


def _slowest(path, ends: list[dict]) -> dict | None:
    """The end state of the connection whose critical path is longest."""
    if not ends:
        return None
    if path is not None and len(path.critical_path_ns) > 1:
        conn = max(path.critical_path_ns, key=lambda c: (path.critical_path_ns[c], c))
        for e in ends:
            if e["conn"] == conn:
                return e
    return ends[0]


def _utilisation(cfg: Config, result: dict) -> list[str]:
    """Utilisation evidence: the link, the router, and the busiest bus and CPU."""
    out = []
    link = result.get("link_utilization") or {}
    if link:
        d, u = max(link.items(), key=lambda kv: kv[1])
        out.append(f"link {d.replace('_to_', '->')} {_pct(u)} busy")
    box = result.get("bottleneck_utilization") or {}
    if box:
        d, u = max(box.items(), key=lambda kv: kv[1])
        out.append(f"bottleneck {d.replace('_to_', '->')} {_pct(u)} busy")
    return out


def _cpu_busy(result: dict, sys: str) -> float | None:
    cpu = (result.get("cpu_utilization") or {}).get(sys)
    return None if cpu is None else 1.0 - cpu.get("idle", 0.0)


def _loss(cfg: Config, result: dict, host: str, evidence: list[str]) -> Verdict:
    """A sender whose congestion window losses keep small: where they were lost, and
    the change that loses fewer."""
    places = drop_places(result)
    ev = [f"{result.get('retransmits', 0)} retransmissions"]
    ev += [drop_text(*d) for d in places]
    values: dict = {}
    where = ""
    if places:
        place, reason, _ = places[0]
        values = _drop_change(cfg, place, reason)
        where = f" {place_text(place)} ({DROP_WORDS.get(reason, reason)})"
        if reason == "link_loss":
            where = f" on the link (random, link.loss = {cfg.link.loss:g})"
    note = None
    if values.get("link.loss") == 0.0:
        note = (
            "the link's loss is the path's, not a sender's setting: a congestion control "
            "that does not take loss for congestion (tcp.cc=bbr) is what a sender can change"
        )
    return _make("loss", f"packet loss{where}", host, ev + evidence, values, note=note)


def _drop_change(cfg: Config, place: str, reason: str) -> dict:
    """The change that stops drops of ``reason`` at ``place``, or {} for random loss."""
    h = f"hosts.{place}."
    if reason == "rx_fifo":
        return _times(cfg, h + "nic.rx_fifo", 4)
    if reason == "rx_ring_full":
        return _times(cfg, h + "nic.rx_ring", 2)
    if reason == "qdisc_full":
        return _times(cfg, h + "qdisc.len", 2)
    if reason == "bottleneck_queue_full":
        return _times(cfg, "bottleneck.queue", 2)
    if reason == "link_loss":
        return {"link.loss": 0.0}
    return {}


def _window(cfg: Config, result: dict, path, d: Diagnosis, evidence: list[str]) -> Verdict:
    """A loop through ``Send buffer`` or ``Send window``: say which window binds."""
    sys = d.sys
    queue = d.queue or ""
    loop = f"{d.loop_count} times (a resource loop through {queue})" if d.loop_count else ""
    share = f"{d.share:.0%} of the critical path" if d.share else ""
    waited = f"{plain_state(d.waited_on)}: {share}" if d.waited_on else ""
    if queue.endswith("Send buffer"):
        key, values = _buffer(cfg, sys, send=True)
        ev = [f"the writer on {_host(sys)} waited for ACKs to free send-buffer space {loop}"]
        ev += [f"{waited}: the buffer's bytes wait a round trip" if waited else ""]
        return _make(
            "window",
            f"{_host(sys)}'s send buffer ({key.split('.', 2)[2]} = {_value(cfg, key)})",
            sys,
            [e for e in ev + evidence if e],
            values,
        )
    # Send window: min(cwnd, the peer's window) - in flight.  Which one?
    sender = _slowest(path, _ends(result, sys))
    peer = _peer(sys)
    ev = [f"the sender on {_host(sys)} waited for window {loop}" if loop else ""]
    ev += [f"{waited}: each window's bytes wait a round trip" if waited else ""]
    if sender is None:
        return _make(
            "window",
            f"{_host(sys)}'s sending window (the smaller of the congestion window and the "
            "receive window its peer offers)",
            sys,
            [e for e in ev + evidence if e],
            {},
            note="the run's end state is not at hand, so which window binds is not known",
        )
    ev.append(
        f"when the run stopped: congestion window {_bytes(sender['cwnd'])}, "
        f"the peer's window {_bytes(sender['peer_window'])}, {_bytes(sender['flight'])} in flight"
    )
    if sender["peer_window"] <= sender["cwnd"]:
        return _receive_window(cfg, result, path, sys, peer, [e for e in ev + evidence if e])
    if sender["retransmits"] or result.get("retransmits"):
        return _loss(cfg, result, sys, [e for e in ev + evidence if e])
    return _make(
        "window",
        f"{_host(sys)}'s congestion window ({cfg.value(f'hosts.{sys}.tcp.cc')}), still opening",
        sys,
        [e for e in ev + evidence if e],
        {},
        note="no loss has capped it: it grows with the run (slow start); a longer "
        "sim.duration measures the steady state",
    )


def _receive_window(cfg, result, path, sys, peer, evidence) -> Verdict:
    """The peer's receive window binds: its buffer is too small, or its reader is behind."""
    reader = _slowest(path, _ends(result, peer))
    if (
        reader is not None
        and reader["rcvbuf"]
        and (reader["rcv_unread"] >= READER_BEHIND * reader["rcvbuf"])
    ):
        evidence = [
            *evidence,
            f"{_host(peer)}'s receive buffer held {_bytes(reader['rcv_unread'])} unread of "
            f"{_bytes(reader['rcvbuf'])}: the window stays closed because the reader is behind",
        ]
        found = _reader_limit(cfg, result, path, peer)
        if found is not None:
            kind, resource, values = found
            return _make(kind, resource, peer, evidence, values)
        return _make("app", f"{_host(peer)}'s reading application", peer, evidence, {})
    key, values = _buffer(cfg, peer, send=False)
    if reader is not None:
        evidence = [
            *evidence,
            f"{_host(peer)}'s receive buffer held {_bytes(reader['rcv_unread'])} unread of "
            f"{_bytes(reader['rcvbuf'])}: the reader keeps up; the window is too small for "
            f"the path ({_bytes(_bdp(cfg))} bandwidth-delay product)",
        ]
    return _make(
        "window",
        f"the receive window {_host(peer)} offers ({key.split('.', 2)[2]} = {_value(cfg, key)})",
        peer,
        evidence,
        values,
    )


def _reader_limit(cfg, result, path, peer) -> tuple[str, str, dict] | None:
    """What keeps ``peer``'s reader behind: its most critical state on the path."""
    if path is None:
        return None
    for entry in path.most_critical:
        name = entry["name"]
        if not name.startswith(f"{peer}:") or "->" in name:
            continue
        sub = diagnose(replace(path, most_critical=[entry], loops=[], busy_ns={}))
        if sub is None:
            continue
        if sub.kind == "bus":
            return "bus", _bus_words(cfg, peer), _bus_change(cfg, peer)
        if sub.kind == "cpu":
            return (
                "cpu",
                f"{_host(peer)}'s reader on its CPU ({_value(cfg, f'hosts.{peer}.cpu.freq')}): "
                f"{plain_state(name)}",
                _times(cfg, f"hosts.{peer}.cpu.freq", 2),
            )
    return None


def _from_diagnosis(cfg: Config, result: dict, path, d: Diagnosis) -> Verdict:
    evidence = _utilisation(cfg, result)
    sys = d.sys
    if d.name in path.busy_ns:  # a utilization bound, not a share of the path
        share = f"{d.name} busy for the whole measured run: the run can be no shorter"
    elif d.name:
        share = f"{plain_state(d.name)}: {d.share:.0%} of the critical path"
    else:
        share = d.reason
    if d.kind == "window":
        return _window(cfg, result, path, d, evidence)
    if d.kind == "link":
        return _make(
            "link",
            f"the link ({human(cfg.link.rate, RATE)})",
            "",
            [share, *evidence],
            _times(cfg, "link.rate", 10),
        )
    if d.kind == "bottleneck":
        return _make(
            "bottleneck",
            f"the bottleneck router ({human(cfg.bottleneck.rate, RATE)}, "
            f"queue {_bytes(cfg.bottleneck.queue)})",
            "",
            [share, *evidence],
            _times(cfg, "bottleneck.rate", 10),
        )
    if d.kind == "bus":
        return _make("bus", _bus_words(cfg, sys), sys, [share, *evidence], _bus_change(cfg, sys))
    if d.kind in ("cpu", "cores"):
        busy = _cpu_busy(result, sys)
        cores = cfg.value(f"hosts.{sys}.cpu.cores")
        load = [f"{_host(sys)}'s CPU {_pct(busy)} busy"] if busy is not None else []
        if d.kind == "cores":
            loop = [f"work waited for a core {d.loop_count} times"] if d.loop_count else []
            return _make(
                "cores",
                f"{_host(sys)}'s {cores} CPU core{'s' if cores > 1 else ''}",
                sys,
                [share, *loop, *load, *evidence],
                {f"hosts.{sys}.cpu.cores": cores + 1},
            )
        return _make(
            "cpu",
            f"{_host(sys)}'s CPU ({_value(cfg, f'hosts.{sys}.cpu.freq')}): {plain_state(d.name)}",
            sys,
            [share, *load, *evidence],
            _times(cfg, f"hosts.{sys}.cpu.freq", 2),
        )
    words = {
        "tx_ring": ("transmit descriptor ring", "nic.tx_ring"),
        "rx_ring": ("receive descriptor ring", "nic.rx_ring"),
        "qdisc": ("qdisc", "qdisc.len"),
        "tx_fifo": ("NIC transmit FIFO", "nic.tx_fifo"),
    }
    what, key = words[d.kind]
    full = f"hosts.{sys}.{key}"
    loop = f"the path waited for it {d.loop_count} times" if d.loop_count else d.reason
    return _make(
        d.kind,
        f"{_host(sys)}'s {what} ({key} = {_value(cfg, full)})",
        sys,
        [loop, *evidence],
        _times(cfg, full, 2),
    )


#: Another entry on a round trip's path named beside its propagation, from this share.
ROUND_TRIP_ALSO = 0.1


def _round_trip(cfg: Config, result: dict, path, *, replayed: bool = False) -> Verdict | None:
    """The path waits for the round trip over the link: request/response, whose answer
    does, or (``replayed``) a prediction's replayed path that no resource made wait."""
    if path is None or not path.most_critical:
        return None
    prop = sum(m["share"] for m in path.most_critical if m["name"].endswith(":Link:propagate"))
    if prop < 0.5:
        return None
    delay = human(cfg.link.delay, TIME)
    if replayed:
        why = (
            f"propagation is {prop:.0%} of the replayed critical path, and no window, queue "
            "or core on it made it wait"
        )
    else:
        why = (
            f"one request at a time waits for its answer: propagation is {prop:.0%} of the "
            "critical path"
        )
    also = [
        f"{plain_state(m['name'])}: {m['share']:.0%} of the critical path"
        for m in path.most_critical
        if not m["name"].endswith(":Link:propagate") and m["share"] >= ROUND_TRIP_ALSO
    ]
    return _make(
        "link",
        f"the round trip over the link ({delay} each way)",
        "",
        [why, *also, *_utilisation(cfg, result)],
        {"link.delay": cfg.link.delay / 2},
    )


def explain(
    cfg: Config, result: dict, path=None, *, fallback: bool = True, replayed: bool = False
) -> Verdict | None:
    """The verdict of one run: ``result`` is its ``to_json()`` with ``end_state``, ``path``
    the :class:`~cpasim.predict.runs.PathSummary` of its trace (None: untraced).  None
    when nothing is saturated and no path says more; with ``fallback``, a path that
    names no resource a parameter sizes is the application's.  ``replayed``: ``path`` is
    a prediction's, whose replay the round trip holds when propagation is most of it
    and no resource made it wait.  The path is the whole measured run's
    (:attr:`TracedRun.path`): its resource loops are counted over all of it, where a
    window's tail may hold too few to tell."""
    stall = Stall.of(cfg, result)
    if stall is not None:
        return _stalled(cfg, result, stall)
    found = saturated(cfg, result, cpu=path is None)
    if found is not None or path is None:
        return found
    kind = WORKLOADS.get(result.get("workload"))  # none: a ping flow's view
    if kind is not None and not kind.stream:
        rt = _round_trip(cfg, result, path)
        if rt is not None:
            return rt
    d = diagnose(path)
    if d is not None and d.kind == "window" and _unsent_heavy(result, d):
        # The send buffer is full of data not yet sent: what holds it is downstream.
        d = diagnose(path, exclude=("window",))
    if d is None:
        if replayed:
            return _round_trip(cfg, result, path, replayed=True)
        if not fallback:
            return None
        if result.get("retransmits"):
            return _loss(cfg, result, "", _utilisation(cfg, result))
        return _make(
            "app",
            f"the application ({cfg.workload.kind})",
            "",
            [
                "no resource on the critical path is one a parameter sizes: "
                f"{path.bottleneck or 'nothing'} leads it",
                *_utilisation(cfg, result),
            ],
            {},
        )
    return _from_diagnosis(cfg, result, path, d)


# -- each flow of a run with [[flows]] -----------------------------------------------------
#: A bulk flow with less than this share of an equal split of a saturated bottleneck
#: (or link) is held back by its own sender: the shared resource is not what it waits on.
BELOW_EQUAL_SHARE = 0.8
#: A kind of limit as the one-line sentence over the flows words it.
FLOW_WORDS = {"bottleneck": "the bottleneck", "link": "the link", "window": "its window"}


def _flow_view(result: dict, flow: dict) -> dict:
    """``result`` as one flow sees it: its own goodput and retransmissions, its own
    connection's end state, and the places where the run dropped what it resent."""
    conn = f"c{flow['index']}"
    end = result.get("end_state") or {}
    tcp = {h: [e for e in ends if e["conn"] == conn] for h, ends in (end.get("tcp") or {}).items()}
    causes = flow.get("retransmit_causes") or {}
    drops = {
        place: {r: n for r, n in reasons.items() if r in causes}
        for place, reasons in (end.get("drops") or {}).items()
    }
    return {
        **result,
        # A ping is no workload: it delivers no bytes, and is not a stalled stream.
        "workload": result.get("workload") if flow_kind(flow["kind"]).tcp else None,
        "goodput_bps": flow["goodput_bps"],
        "bytes_measured": flow.get("bytes_measured", 0),
        "retransmits": flow.get("retransmits", 0),
        "end_state": {**end, "tcp": tcp, "drops": {p: d for p, d in drops.items() if d}}
        if end
        else {},
    }


def _below_equal_share(result: dict, flow: dict) -> str | None:
    """Why a bulk flow is held back by its own sender: its goodput is below
    :data:`BELOW_EQUAL_SHARE` of an equal split of a saturated bottleneck or link
    among the run's bulk flows; None when it is not."""
    agg = result.get("flows_aggregate") or {}
    n, total = agg.get("bulk_flows", 0), agg.get("bulk_goodput_bps", 0.0)
    if not flow_kind(flow["kind"]).bulk or n < 2 or not total:
        return None
    box = (result.get("bottleneck_utilization") or {}).get("tx_to_rx", 0.0)
    link = (result.get("link_utilization") or {}).get("tx_to_rx", 0.0)
    if max(box, link) < SATURATED:
        return None
    equal = total / n
    if flow["goodput_bps"] >= BELOW_EQUAL_SHARE * equal:
        return None
    where = "bottleneck" if box >= SATURATED else "link"
    return (
        f"{human(flow['goodput_bps'], RATE)}: {flow['goodput_bps'] / equal:.0%} of an equal "
        f"share ({human(equal, RATE)}) of the {where} its {n} bulk flows fill"
    )


def _flow_keys(v: Verdict, cfg: Config, flow: dict) -> Verdict:
    """``v`` with a change of the flow's own TCP keys (``hosts.tx.tcp.wmem``) made a
    change of its table's (``flows.0.hosts.tx.tcp.wmem``); the rest act on every flow."""
    table = flow["table"]

    def key(k: str) -> str:
        own = k.startswith("tcp.") or (k.startswith("hosts.") and ".tcp." in k)
        return f"flows.{table}.{k}" if own and cfg.flows else k

    return replace(
        v,
        change={key(k): x for k, x in v.change.items()},
        values={key(k): x for k, x in v.values.items()},
    )


def explain_flow(cfg: Config, result: dict, flow: dict, path=None) -> Verdict | None:
    """What limits one flow of a run with ``[[flows]]``: ``result`` the run's
    ``to_json()`` with its end state, ``flow`` its entry in ``result["flows"]``,
    ``path`` the flow's own critical path (:func:`cpasim.predict.flow_paths.flow_path`).

    The flows share the path, so a saturated bottleneck leads every flow's critical
    path; what tells them apart is their share.  A bulk flow with much less than an
    equal share of it (:func:`_below_equal_share`) waits on its own sender: its path
    without the shared resource names what (its window, and behind the window the
    losses that keep it small); the others are the shared resource's, as the run is."""
    own = cfg.flow_config(flow["table"]) if cfg.flows else cfg
    view = _flow_view(result, flow)
    below = _below_equal_share(result, flow)
    if below is None or path is None:
        v = explain(own, view, path, fallback=False)
        if v is not None and v.kind == "bottleneck" and not flow_kind(flow["kind"]).tcp:
            v = _queued_echoes(cfg, flow, v)
        return None if v is None else _flow_keys(v, cfg, flow)
    evidence = [below, *_utilisation(cfg, view)]
    d = diagnose(path, exclude=("bottleneck", "link"))
    if d is not None and d.kind == "window":
        v = _window(own, view, path, d, evidence)
    elif view["retransmits"]:
        v = _loss(own, view, "tx", evidence)
    else:
        v = explain(own, view, path, fallback=False)
    if v is not None:  # why this flow, and not the others, is held back: first
        v = replace(v, evidence=(below, *(e for e in v.evidence if e != below)))
    return None if v is None else _flow_keys(v, cfg, flow)


def _queued_echoes(cfg: Config, flow: dict, v: Verdict) -> Verdict:
    """A ping behind a saturated bottleneck: its round trip is the propagation and the
    router's queue ahead of each echo (bufferbloat); a shorter queue shortens it."""
    lat = flow.get("latency_ns") or {}
    if not lat:
        return v
    propagation = 2 * cfg.link.delay
    queued = max(0.0, lat["p50"] - propagation)
    said = (
        f"its round trip p50 {human(lat['p50'], TIME)}, {human(propagation, TIME)} of it "
        f"propagation: {human(queued, TIME)} waiting behind the other flows' packets"
    )
    values = _times(cfg, "bottleneck.queue", 0.5)
    return _make(
        "bottleneck",
        f"the bottleneck router's queue ({_bytes(cfg.bottleneck.queue)} at "
        f"{human(cfg.bottleneck.rate, RATE)})",
        "",
        [said, *v.evidence],
        values,
        note="a shorter queue shortens the wait, and the bulk flows lose more",
        explained=v.explained,
    )


def explain_flows(run) -> list[tuple[dict, Verdict | None]]:
    """Each flow of a traced run with ``[[flows]]``
    (:class:`~cpasim.predict.runs.TracedRun`) and its verdict, from its own critical
    path (:func:`explain_flow`); [] for a run without flows."""
    from cpasim.predict.flow_paths import flow_paths
    from cpasim.tracing import open_trace

    entries = run.result.get("flows") or []
    if not entries:
        return []
    paths = flow_paths(lambda: open_trace(run.trace), entries)
    return [(f, explain_flow(run.cfg, run.result, f, paths[f["index"]])) for f in entries]


def flow_name(flow: dict) -> str:
    """``flow 0 (cubic)``, ``flow 2 (ping)``."""
    return f"flow {flow['index']} ({flow['cc'] or flow['kind']})"


def flows_sentence(verdicts: Sequence[tuple[dict, Verdict | None]]) -> str:
    """``flow 0 (cubic) limited by loss; flow 1 (bbr) by the bottleneck``."""
    parts = []
    for f, v in verdicts:
        what = "nothing the analysis recognises" if v is None else FLOW_WORDS.get(v.kind, v.kind)
        parts.append(f"{flow_name(f)} {'limited by ' if not parts else 'by '}{what}")
    return "; ".join(parts)


def flow_lines(verdicts: Sequence[tuple[dict, Verdict | None]]) -> list[str]:
    """The flows' verdicts for a terminal: the sentence, then each flow's resource and
    evidence (its change, where it has one); none without flows."""
    if not verdicts:
        return []
    lines = [f"{'flows':12} {flows_sentence(verdicts)}"]
    for f, v in verdicts:
        if v is None:
            continue
        rows = v.rows()
        lines.append(f"  {flow_name(f):16} {rows[0][1]}")
        lines += [f"    {k:10} {t}" for k, t in rows[1:]]
    return lines


def _unsent_heavy(result: dict, d: Diagnosis) -> bool:
    """A send-buffer loop whose buffer held more unsent data than data in flight when
    the run stopped: the buffer fills because the transmit path is slow, not because
    ACKs come back slowly."""
    if not (d.queue or "").endswith("Send buffer"):
        return False
    end = _slowest(None, _ends(result, d.sys))
    return end is not None and end["unsent"] > end["flight"]


def saturated(cfg: Config, result: dict, *, cpu: bool = True) -> Verdict | None:
    """A verdict from utilisation alone: the router, the link, a host's I/O bus or (with
    ``cpu``) its CPU, the first of them busy at least :data:`SATURATED` of the measured
    time; None when none is.  A traced run leaves the CPU to its critical path, which
    tells a core's speed from the number of cores."""
    evidence = _utilisation(cfg, result)
    box = result.get("bottleneck_utilization") or {}
    if box.get("tx_to_rx", 0.0) >= SATURATED:
        return _make(
            "bottleneck",
            f"the bottleneck router ({human(cfg.bottleneck.rate, RATE)}, "
            f"queue {_bytes(cfg.bottleneck.queue)})",
            "",
            evidence,
            _times(cfg, "bottleneck.rate", 10),
            explained=False,
        )
    if (result.get("link_utilization") or {}).get("tx_to_rx", 0.0) >= SATURATED:
        return _make(
            "link",
            f"the link ({human(cfg.link.rate, RATE)})",
            "",
            evidence,
            _times(cfg, "link.rate", 10),
            explained=False,
        )
    for sys, bus in (result.get("io_bus_utilization") or {}).items():
        way, busy = max(bus.items(), key=lambda kv: (kv[1], kv[0]))
        if busy >= SATURATED:
            return _make(
                "bus",
                _bus_words(cfg, sys),
                sys,
                [f"{_host(sys)}'s I/O bus {way} {_pct(busy)} busy", *evidence],
                _bus_change(cfg, sys),
                explained=False,
            )
    for sys in (result.get("cpu_utilization") or {}) if cpu else ():
        busy = _cpu_busy(result, sys)
        if busy is None or busy < SATURATED:
            continue
        cores = cfg.value(f"hosts.{sys}.cpu.cores")
        ev = [f"{_host(sys)}'s CPU {_pct(busy)} busy", *evidence]
        if cores > 1:
            return _make(
                "cores",
                f"{_host(sys)}'s {cores} CPU cores",
                sys,
                ev,
                {f"hosts.{sys}.cpu.cores": cores + 1},
                explained=False,
            )
        return _make(
            "cpu",
            f"{_host(sys)}'s CPU ({_value(cfg, f'hosts.{sys}.cpu.freq')})",
            sys,
            ev,
            _times(cfg, f"hosts.{sys}.cpu.freq", 2),
            explained=False,
        )
    return None


def _stalled(cfg: Config, result: dict, stall: Stall) -> Verdict:
    values = {}
    if stall.place is not None:
        values = _drop_change(cfg, stall.place, stall.reason)
    return _make(
        stall.kind,
        stall.resource,
        stall.host,
        stall.evidence,
        values,
        note="a stalled run has no rate to scale, so the change is not predicted from its "
        "trace: re-simulate it to check",
        stalled=True,
    )


def idle_line(result: dict) -> str:
    """One line for a run where nothing is saturated."""
    parts = []
    link = result.get("link_utilization") or {}
    if link:
        d, u = max(link.items(), key=lambda kv: kv[1])
        parts.append(f"link {_pct(u)}")
    for host, bus in (result.get("io_bus_utilization") or {}).items():
        parts.append(f"I/O bus {host} {_pct(max(bus.values()))}")
    for host, cpu in (result.get("cpu_utilization") or {}).items():
        parts.append(f"CPU {host} {_pct(1 - cpu.get('idle', 0.0))}")
    busiest = ", ".join(parts)
    return (
        f"no resource is saturated ({busiest}): the run waits on something else; "
        "'--explain' traces it and says what"
    )


# -- with the trace: the change predicted, and what would limit next ----------------------
def predicted(v: Verdict, run, prediction=None) -> Verdict:
    """``v`` with its change predicted from ``run``'s trace
    (:class:`~cpasim.predict.runs.TracedRun`; ``prediction``: already made) and the
    predicted path's verdict as ``next``."""
    from cpasim.predict.whatif import predict, refusal

    if not v.values or v.predicted is not None or v.stalled:
        return v
    new = run.cfg.with_values(v.values, where="the verdict's change")
    if refusal(run.cfg, new) is not None:
        keys = ", ".join(v.change)
        why = f"the trace cannot predict a change of {keys}: re-simulate it to check"
        return replace(v, note=f"{why}; {v.note}" if v.note else why)
    p = prediction if prediction is not None else predict(run, new)
    after = of_prediction(run, new, p)
    return replace(
        v,
        predicted={"metric": p.metric, "baseline": p.baseline, "value": p.predicted},
        next=after.resource if after is not None else None,
        next_kind=after.kind if after is not None else None,
    )


def _predicted_result(run, p, new: Config) -> dict:
    """What the changed run would measure, as far as the prediction says: the link and
    router busy in proportion to the predicted goodput (bytes on the wire per byte
    delivered as in the baseline), and no end state (the changed run's windows are not
    known)."""
    base = run.result
    out = {"workload": base["workload"], "retransmits": 0, "sim_time_ns": base["sim_time_ns"]}
    if p.metric != "goodput_bps" or not p.baseline:
        return out
    ratio = p.predicted / p.baseline
    link = base.get("link_utilization") or {}
    scale = run.cfg.link.rate / new.link.rate
    out["link_utilization"] = {d: u * ratio * scale for d, u in link.items()}
    box = base.get("bottleneck_utilization")
    if box and new.bottleneck.rate:
        scale = run.cfg.bottleneck.rate / new.bottleneck.rate
        out["bottleneck_utilization"] = {d: u * ratio * scale for d, u in box.items()}
    return out


def explain_run(run, *, predict_change: bool = True) -> Verdict | None:
    """The verdict of a traced run (:class:`~cpasim.predict.runs.TracedRun`), its
    change predicted from the trace, and whether an ideal host would answer the same
    (:func:`detail_note`)."""
    v = explain(run.cfg, run.result, run.path)
    if v is None:
        return v
    v = detail_note(v, run)
    return predicted(v, run) if predict_change else v


#: Kinds that are a part of a full host, which an ideal one (``host.detail``) lacks.
HOST_PARTS = {
    "bus": "bus",
    "cpu": "cpu",
    "cores": "cpu",
    "tx_ring": "nic",
    "rx_ring": "nic",
    "tx_fifo": "nic",
}


def detail_note(v: Verdict, run) -> Verdict:
    """``v`` with a sentence on whether simulating its full hosts ideal
    (``host.detail = "ideal"``, :mod:`cpasim.model.detail`) would give another answer:
    always when the limit is a part an ideal host lacks; for a window, when the
    hosts' time is a noticeable part of its round trip (a what-if on the trace)."""
    from cpasim.model.detail import absent, ideal_would_differ, is_ideal

    if v.host in ("tx", "rx") and is_ideal(run.cfg, v.host):
        return v
    if v.kind in HOST_PARTS and v.host in ("tx", "rx"):
        lacks = absent(f"{HOST_PARTS[v.kind]}.x")
        why = f'an ideal host (host.detail = "ideal") would be wrong here: it has {lacks}'
        return replace(v, evidence=(*v.evidence, why))
    if v.kind == "window" and str(run.trace).endswith((".cpt", ".jsonl")):
        why = ideal_would_differ(run.cfg, run.result, run.trace)
        if why is not None:
            return replace(v, evidence=(*v.evidence, why))
    return v


def of_prediction(run, new: Config, p) -> Verdict | None:
    """What the changed configuration ``new`` would be limited by, as the prediction
    ``p`` from ``run`` says (its path, and the link busy in proportion)."""
    return explain(
        new, _predicted_result(run, p, new), p.predicted_path, fallback=False, replayed=True
    )


def baseline_and_change(run, new: Config):
    """The baseline's verdict (its own change predicted) and the prediction of ``new``,
    in one pass over the trace: ``(verdict, prediction)``."""
    from cpasim.predict.whatif import predict_many, refusal

    v = explain(run.cfg, run.result, run.path)
    ours = None
    if v is not None and v.values and not v.stalled:
        ours = run.cfg.with_values(v.values, where="the verdict's change")
        if refusal(run.cfg, ours) is not None:
            ours = None
    same = ours is not None and ours.digest == new.digest
    preds = predict_many(run, [new] if ours is None or same else [new, ours])
    if v is not None:
        mine = preds[0] if same else (preds[1] if len(preds) > 1 else None)
        v = predicted(v, run, mine)
    return v, preds[0]


def of_trace(trace) -> tuple[Verdict | None, str | None]:
    """The verdict of the run that recorded ``trace``, read with its sidecar
    (``<trace>.run.json``, which holds the run's configuration): ``(verdict, None)``,
    or ``(None, why there is none)``."""
    verdict, _, why = of_trace_with_flows(trace, flows=False)
    return verdict, why


def of_trace_with_flows(
    trace, *, flows: bool = True
) -> tuple[Verdict | None, list[tuple[dict, Verdict | None]], str | None]:
    """:func:`of_trace`, and each flow's verdict when the run had ``[[flows]]``
    (:func:`explain_flows`): ``(verdict, flow verdicts, why there is no verdict)``."""
    import tomllib
    from pathlib import Path

    from cpasim.config import scenario_config
    from cpasim.errors import CpasimError
    from cpasim.predict.runs import load_run, read_sidecar, sidecar_path

    side = sidecar_path(Path(trace))
    try:
        data = read_sidecar(Path(trace))
    except CpasimError:
        data = None
    text = data.get("config") if isinstance(data, dict) else None
    if not isinstance(text, str):
        return (
            None,
            [],
            f"no run configuration beside {Path(trace).name} ({side.name} absent or older); "
            "'cpasim run --trace' records one",
        )
    try:
        cfg = scenario_config(tomllib.loads(text))
        run = load_run(cfg, Path(trace))
        return explain_run(run), explain_flows(run) if flows else [], None
    except (CpasimError, tomllib.TOMLDecodeError) as exc:
        return None, [], str(exc)
