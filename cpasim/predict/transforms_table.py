"""Parameter → transform table: how a configuration change becomes a what-if.

A prediction replays the baseline trace with the change expressed as analyzer
transforms (``annotations.md``, "What-if transforms").  :data:`RULES` is the one
table that says, for every parameter cpasim can predict, which states or queues of
the dependence graph it acts on and by how much: a ``scale`` of states' times
(old/new of a rate, a clock, a bandwidth), a ``capacity`` growth of a credit queue
(in the queue's own units: bytes for the socket queues, frames for the TX FIFO), or
a ``bound`` (the cores' busy time over their number).  :data:`REFUSED` names the
keys no transform models, each with the reason ``predict`` gives; ``validate`` still
re-simulates them.  The user's reading of the table, with each rule's measured
accuracy and its known limits, is ``docs/predictions.md``.

``{sys}`` in a pattern is the host whose key changed (``hosts.tx.tcp.wmem`` → ``tx``;
a key without host prefix changes every host that has it), ``{peer}`` the other end
host.  Only growth is predictable: the analyzer cannot shrink a queue without
reordering causality.

Fixed parts.  A DMA read holds the channel for a bridge round trip that does not
depend on bandwidth plus a transfer that does; the driver's ``xmit`` holds an MMIO
stall that does not depend on the clock.  One factor per state cannot scale only
part of each edge, so the factor applied is the one that gets the state's *total*
right: with the baseline's mean time per entry t̄ (active time from the trace's
profile over the number of ``begin`` records) and fixed part L,
f = (L_new + (t̄ − L_old) · r) / t̄, where r is the factor of the variable part.

Arbitration order.  Replaying a trace keeps the order in which SMs took a shared
resource, an accident of the baseline's timing that would re-impose its schedule on
the changed system, so every prediction breaks the core pools and the PCIe channels
(:data:`REORDERED_POOLS`), as does the analysis of the baseline it is compared with
(:func:`reference`); what the pools limited comes back as the utilization bound of
:mod:`cpasim.predict.bounds`.  Legacy PCI (one bus both directions contend for)
keeps its order.

Pacing.  With BBR (and no ``fq`` qdisc) TCP waits in ``pace`` for the pacing clock,
which follows BBR's estimate of the path's narrowest rate, so ``pace`` scales with
the path's rate in IP bytes (the link's, framing counted, or the bottleneck's,
overhead counted, whichever is lower).  A change that moves the bottleneck elsewhere
(CPU, bus) leaves ``pace`` as it was, where BBR's estimate would follow: a known
limit.

Congestion window.  A send buffer that held the flow left Linux's ``cwnd`` where it
was (it grows only while it limits the flow: ``tcp_is_cwnd_limited``), and the
replay gives each segment the ``Send window`` credits it took in the baseline.  In
slow start Linux grows ``cwnd`` to twice what is out, so a larger send buffer grows
the ``Send window`` of each connection the baseline left in slow start as well (up
to the peer's window: ``_CWND_FOLLOWS``, from the run's end state); in congestion
avoidance the baseline's ``cwnd`` stays, a known limit.

On an ideal host (``host.detail = "ideal"``) the keys of the parts it does not have
act on nothing, and a change of one is refused with the part that is missing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

from cpasim.analysis import Transforms
from cpasim.analysis.transforms import sm_display
from cpasim.config import ALL_HOSTS, FORWARDER, HOSTS, Config, spec_of
from cpasim.config.params import TOPOLOGIES
from cpasim.errors import CpasimError
from cpasim.model.bus_rules import BUS_STATES, COPY_ENGINE_STATES, MMIO_WAIT, READ
from cpasim.model.buses import BusKind, bus_kind
from cpasim.model.detail import absent, is_ideal
from cpasim.model.pcie import pcie_bytes_per_ns
from cpasim.model.sockbuf import SOCK_MIN_SNDBUF, largest_window, setsockopt_buf
from cpasim.model.workloads import workload_kind
from cpasim.protocol import frame_bytes, mss_for, wire_bytes

SCALE, CAPACITY, BOUND = "scale", "capacity", "bound"

#: ``Lookup(key)``: a resolved value seen from one host (``tcp.wmem``) or global (``link.rate``).
Lookup = Callable[[str], Any]

#: States whose time is CPU cycles (``Cpu.spend``/``Cpu.work`` in the model),
#: matched on any software SM of the host.  Blocking in them is waiting
#: (weight 0), so scaling them scales only work.
CPU_STATES = (
    "user",
    "schedule",
    "sys_write",
    "sys_read",
    "sys_sendto",
    "sys_recvfrom",
    "epoll_wait",
    "TcpSendMsg: copy",
    "TcpRecvMsg: copy",
    "TcpRecvMsg: dma issue",
    "tcp_dma_try_early_copy",
    "TcpRecvMsg: free",
    "UdpSendMsg: copy",
    "UdpRecvMsg: copy",
    "tcp_write_xmit",
    "tcp_v4_rcv",
    "tcp_ack",
    "tcp_send_ack",
    "tcp_retransmit_skb",
    "udp_rcv",
    "ping_sendmsg",
    "ping_recvmsg",
    "icmp_rcv",
    "icmp_echo",
    "nf_hook",
    "ip_forward",
    "ip_fragment",
    "ip_defrag",
    # Linux 2.6.13's UDP send path (ip.send_path, cpasim.model.ip_send).
    "udp_sendmsg",
    "alloc_skb",
    "__kmalloc",
    "do_csum_partial_copy_from_user",
    "memcpy",
    "interrupt",
    "refill",
    "clean tx",
)

#: States that hold neither cycles, bus nor link time but real, fixed time
#: (timers, the client's pause), which no table row changes.  Every other state
#: with active time is one a ``scale`` row acts on (checked by the tests).
#: ``armed``: the DelAck and RTO timers (Linux's sender wakes its RTO timer every
#: 2 ms for RACK's reordering timer, so short runs see it).
#: Timed states of the newer model and their rows: ``TcpSend:pace`` (BBR's
#: internal pacing) scales with the path's rate (``link.rate``,
#: ``bottleneck.rate``, ``bottleneck.overhead``: see "Pacing");
#: ``Bottleneck:serialize`` with its direction's rate and the overhead.  The
#: bottleneck's ``Wait`` (an empty queue) is waiting, with no active time.
FIXED_TIME_STATES = ("think", "countdown", "armed", "set-up", "report")

#: Keys no transform models, each with the reason ``predict`` gives (see the
#: module docstring and docs/predictions.md).
_RESIMULATE = "; 'cpasim validate' re-simulates it"
_SCHEDULE = (
    "changes which packets are sent when, not how long a step takes: no graph transform"
    + _RESIMULATE
)
_AUTOTUNING = (
    "a setting of Linux's buffer autotuning, which sizes the buffers during the run from "
    "what the run does: the window it gives is no fixed capacity of the trace" + _RESIMULATE
)
REFUSED: dict[str, str] = {
    "tcp.cc": _SCHEDULE,
    "tcp.sack": _SCHEDULE,
    "tcp.recovery": _SCHEDULE,
    "tcp.pacing": _SCHEDULE,
    "bottleneck.queue": (
        "the bottleneck queue drops packets when full instead of making the sender wait, "
        "so the trace holds no credit to grow, and its size changes which packets are lost"
        + _RESIMULATE
    ),
    "bottleneck.aqm": (
        "an AQM drops packets by their time in the queue: it changes which packets are "
        "lost, not how long a step takes" + _RESIMULATE
    ),
    "copy_engine.rate": (
        "a copy engine's reads and writes last as long as their DMA or their bytes at this "
        "rate, whichever is longer (0 = no limit): no one factor of the trace's states"
        + _RESIMULATE
    ),
    "tcp.moderate_rcvbuf": _AUTOTUNING,
    "tcp.rmem_default": _AUTOTUNING,
    "tcp.rmem_max": _AUTOTUNING,
    "tcp.wmem_default": _AUTOTUNING,
    "tcp.wmem_max": _AUTOTUNING,
    "host.detail": (
        "changes which parts of the host exist (an ideal host has no CPU, bus, rings or "
        "interrupts), not how long a step takes (a sweep with --grid host.detail=full,ideal "
        "shows the two side by side)" + _RESIMULATE
    ),
}


def _bus(v: Lookup) -> BusKind:
    return bus_kind(v("bus.kind"))


def _mmio(v: Lookup) -> float:
    """A posted register write's fixed stall (none on M5's bus: the write's round trip
    there is its own state, ``mmio write``)."""
    return _bus(v).mmio_stall(v)


def _register_round_trip(v: Lookup) -> float:
    """The part of a register write on M5's bus that the bus's bandwidth does not
    change: the bridge, both ways (:meth:`cpasim.model.m5bus.M5Bus.cpu_write`)."""
    return 2 * v("pcie.latency")


def _bridge_round_trip(v: Lookup) -> float:
    return _bus(v).read_fixed(v)


def _write_fixed(v: Lookup) -> float:
    return _bus(v).write_fixed(v)


@dataclass(frozen=True)
class Target:
    """A state (``scale``) or queue (``capacity``) pattern; ``{sys}``/``{peer}`` filled in.

    ``fixed``: the per-visit time of the state that the rule's factor does not
    scale (see "Fixed parts" in the module docstring), from one side's values.
    """

    pattern: str
    fixed: Callable[[Lookup], float] | None = None
    #: The factor for this target when it is not the rule's (``pace``).
    amount: Callable[[Lookup, Lookup], float] | None = None
    #: The per-visit time a call state spends in its callees' register writes on M5's
    #: bus (run on its lent core) and how many writes that is, from the baseline's
    #: state means and ``begin`` counts.  With ``writes_scale`` the rule's factor acts
    #: on those writes only (``fixed`` is then per write) and the rest of the state is
    #: left as it is; without, the writes are left as they are and the rest scales
    #: (``fixed`` per visit, as for any state).
    writes: Callable[[str, Mapping[str, float], Mapping[str, int]], tuple[float, float]] | None = (
        None
    )
    writes_scale: bool = True
    #: A connection's ``Send window`` (capacity): grown only where the baseline's
    #: Linux sender was still in slow start with data out, by at most what the peer's
    #: window leaves above its cwnd (:func:`_cwnd_follows`).
    slow_start: bool = False


@dataclass(frozen=True)
class Rule:
    """One row of the table: the keys it covers and what they do to the graph."""

    keys: tuple[str, ...]
    kind: str
    targets: tuple[Target, ...]
    #: scale: factor of the variable part; capacity: growth in queue units.
    amount: Callable[[Lookup, Lookup], float]
    doc: str
    #: Why an amount cannot be predicted (e.g. a zero baseline), or None.
    refuse: Callable[[Lookup, Lookup], str | None] = field(default=lambda old, new: None)


def _ratio(key: str) -> Callable[[Lookup, Lookup], float]:
    return lambda old, new: old(key) / new(key)


#: A larger send buffer lets a flow it held have more out, and Linux's sender in slow
#: start grows cwnd to twice what it has out (tcp_is_cwnd_limited), so cwnd follows
#: the buffer there; elsewhere cwnd grows only while it limits, which a replay cannot
#: show, and the baseline's stays (docs/predictions.md, "Known limits").
_CWND_FOLLOWS = Target("{sys}:Send window*", slow_start=True)


def _growth(key: str) -> Callable[[Lookup, Lookup], float]:
    return lambda old, new: new(key) - old(key)


def _fixed_buffers_only(key: str) -> Callable[[Lookup, Lookup], str | None]:
    """Under Linux's rules (0) a buffer is doubled, charged per skb and autotuned:
    not a fixed capacity a trace could grow."""

    def refuse(old: Lookup, new: Lookup) -> str | None:
        if old(key) and new(key):
            return None
        return (
            f"{key} = 0 means Linux's socket-buffer rules (autotuning), which change "
            "the window over the run; re-simulate it with 'cpasim validate'"
        )

    return refuse


def _bus_bandwidth_ratio(old: Lookup, new: Lookup) -> float:
    if not _bus(old).pcie_bandwidth:
        return 1.0  # PCIe settings act on PCIe and on M5's bus, which has its bandwidth
    before = pcie_bytes_per_ns(old("pcie.gen"), old("pcie.lanes"))
    after = pcie_bytes_per_ns(new("pcie.gen"), new("pcie.lanes"))
    return before / after


def _on_die_clock_ratio(old: Lookup, new: Lookup) -> float:
    """An on-die transfer takes its cycles at ``bus.on_die_clock``: old/new."""
    return old("bus.on_die_clock") / new("bus.on_die_clock")


def _on_die_nic(old: Lookup, new: Lookup) -> float:
    # The NIC's DMA crosses the on-die interconnect only when it is on die.
    return _on_die_clock_ratio(old, new) if _bus(old).on_die else 1.0


def _fifo_frames(v: Lookup) -> int:
    # The NIC sizes its TX FIFO store in full-size frames (cpasim.model.nic).
    return max(1, v("nic.tx_fifo") // frame_bytes(v("link.mtu")))


def _zero_delay(old: Lookup, new: Lookup) -> str | None:
    if old("link.delay") == 0:
        return "the baseline link.delay is 0, so there is no propagation time to scale"
    return None


def _no_bottleneck(old: Lookup, new: Lookup) -> str | None:
    if old("bottleneck.rate") == 0:
        return "the baseline has no bottleneck (bottleneck.rate = 0): its trace has none to scale"
    if new("bottleneck.rate") == 0:
        return (
            "bottleneck.rate = 0 removes the bottleneck, a change of structure; "
            "re-simulate it with 'cpasim validate'"
        )
    return None


def _no_reverse_bottleneck(old: Lookup, new: Lookup) -> str | None:
    if old("bottleneck.reverse_rate") == 0:
        return "the baseline has no reverse bottleneck (bottleneck.reverse_rate = 0)"
    if new("bottleneck.reverse_rate") == 0:
        return (
            "bottleneck.reverse_rate = 0 removes the reverse bottleneck, a change of "
            "structure; re-simulate it with 'cpasim validate'"
        )
    return None


def _full_size_overhead(old: Lookup, new: Lookup) -> str | None:
    if old("bottleneck.rate") == 0:
        return "the baseline has no bottleneck (bottleneck.rate = 0): nothing counts the overhead"
    if old("bottleneck.reverse_rate") or not workload_kind(old("workload.kind")).full_size:
        return (
            "the factor is exact only for full-size packets (a TCP stream's data through "
            "bottleneck.rate); here packets of other sizes (ACKs through "
            "bottleneck.reverse_rate, requests, datagrams) pass the bottleneck" + _RESIMULATE
        )
    return None


def _full_size_ratio(old: Lookup, new: Lookup) -> float:
    """Serialization of a full-size packet, new over old: (MTU + overhead) bytes each."""
    return (new("link.mtu") + new("bottleneck.overhead")) / (
        old("link.mtu") + old("bottleneck.overhead")
    )


def _path_rate(v: Lookup) -> float:
    """The narrowest rate tx → rx in IP bytes per second of full-size packets:
    the link's (framing and gaps counted) or the bottleneck's (its overhead counted)."""
    mtu = v("link.mtu")
    rate = v("link.rate") * mtu / wire_bytes(mtu)
    if v("bottleneck.rate"):
        rate = min(rate, v("bottleneck.rate") * mtu / (mtu + v("bottleneck.overhead")))
    return rate


def _pacing_ratio(old: Lookup, new: Lookup) -> float:
    return _path_rate(old) / _path_rate(new)


#: TCP's internal pacing (BBR): gaps at the path's estimated rate (see "Pacing").
_PACE = Target("*:TcpSend:pace", amount=_pacing_ratio)


def _sndbuf(v: Lookup) -> int:
    """The send buffer a request locks (``sock_setsockopt(SO_SNDBUF)``), in bytes."""
    return setsockopt_buf(v("tcp.sndbuf"), v("tcp.core_wmem_max"), SOCK_MIN_SNDBUF)


def _rcv_window(v: Lookup) -> int:
    """The largest window a receiver whose request locks its buffer offers."""
    mss = mss_for(v("link.mtu"), v("tcp.timestamps"))
    return largest_window(v("tcp.rcvbuf"), v("tcp.core_rmem_max"), v("tcp.rx_truesize"), mss)


def _locked_only(request: str, fixed: str) -> Callable[[Lookup, Lookup], str | None]:
    """A buffer is a fixed capacity only when a request locks it (no autotuning)."""

    def refuse(old: Lookup, new: Lookup) -> str | None:
        if old(request) and new(request):
            return None
        if old(fixed) and new(fixed):
            return (
                f"cpasim's fixed buffer {fixed} is set, so {request} and its limits "
                "do not act on this socket: the change changes nothing"
            )
        return (
            f"{request} = 0 leaves the buffer to Linux's autotuning, which sizes it during "
            "the run: no fixed capacity of the trace to grow" + _RESIMULATE
        )

    return refuse


#: The states of an on-die copy engine's transfers (:mod:`cpasim.model.copy_engine`).
ON_DIE_ENGINE_STATES = COPY_ENGINE_STATES["on_die"]

#: The NIC states that hold the bus (:data:`~cpasim.model.bus_rules.BUS_STATES`):
#: a DMA read waits one bridge round trip before its data streams back; a DMA
#: write is posted (no fixed part) except on M5's bus, where it waits for its
#: acknowledgements.
_DMA_STATES = tuple(
    Target(f"{{sys}}:{sm}:{state}", _bridge_round_trip if access == READ else _write_fixed)
    for sm, state, access in BUS_STATES
)

#: A register write on M5's bus (:data:`~cpasim.model.bus_rules.MMIO_WAIT`): the bridge
#: both ways, and its wait for the bus behind the DMA traffic queued ahead of it and its
#: own transactions, which scale with the bus.
_MMIO_WAIT = Target("{sys}:*:" + MMIO_WAIT, _register_round_trip)


def _tail_writes_in(
    name: str, means: Mapping[str, float], entries: Mapping[str, int]
) -> tuple[float, float]:
    """What a visit of a Linux 2.6.13 call state spends in M5's register writes, and how
    many: its callees' tail writes, run on its lent core (:data:`_CALLS_WAITING`).  A
    ``qdisc_restart`` transmits one frame, one tail write; an ``ip_push_pending_frames``
    call holds its ``qdisc_restart`` states.  The mean of all the driver's tail writes stands
    for those made in calls."""
    sys = name.split(":", 1)[0]
    write = means.get(f"{sys}:Driver TX:{MMIO_WAIT}", 0.0)
    if not write:
        return 0.0, 0.0
    if name.endswith(":qdisc_restart"):
        return write, 1.0
    calls = entries.get(name, 0)
    n = entries.get(f"{sys}:IP Send:qdisc_restart", 0) / calls if calls else 0.0
    return write * n, n


#: The 2.6.13 call states holding their callees' tail writes (:func:`_tail_writes_in`):
#: the bus's rule scales the writes in them.
_CALLS_WAITING = (
    Target("{sys}:*:ip_push_pending_frames", _register_round_trip, writes=_tail_writes_in),
    Target("{sys}:IP Send:qdisc_restart", _register_round_trip, writes=_tail_writes_in),
)

_CPU_TARGETS = (
    *(Target("{sys}:*:" + s) for s in CPU_STATES),
    Target("{sys}:Driver TX:xmit", _mmio),
    Target("{sys}:IP Forward:xmit", _mmio),  # the forwarding host's direct transmit
    # A poll stalls on the RX doorbell only when it took packets; its mean per
    # entry cannot say how many did, so the stall is scaled with the cycles.
    Target("{sys}:NAPI:poll"),
)

#: Every state that burns a host's CPU cycles (``{sys}`` = the host).  Not a register
#: write's wait for M5's bus: its core stalls, but for the bus, which a faster or a
#: second core would not shorten, so the cores' bound leaves it to the path.
CPU_PATTERNS: tuple[str, ...] = tuple(t.pattern for t in _CPU_TARGETS)

#: States of a caller inside a synchronous call whose work another SM does on the
#: caller's core (Linux 2.6.13's ``ip_push_pending_frames`` while ``IP Send`` runs,
#: ``IP Send``'s ``qdisc_restart`` while ``Driver TX`` transmits a fragment, its
#: ``do_softirq`` and the caller's ``release_sock`` while the interrupt handler and
#: NAPI run): their time is cycles,
#: but the callee's states already count them as the core's work, so they scale
#: with the clock and stay out of :data:`CPU_PATTERNS`; a ``qdisc_restart`` holds one
#: doorbell's stall, which the clock does not change (a ``do_softirq``'s polls are
#: scaled whole, as ``NAPI:poll`` is).
_CALL_TARGETS = (
    Target("{sys}:*:ip_push_pending_frames", writes=_tail_writes_in, writes_scale=False),
    Target("{sys}:IP Send:qdisc_restart", _mmio, writes=_tail_writes_in, writes_scale=False),
    Target("{sys}:IP Send:do_softirq"),
    Target("{sys}:*:release_sock"),
)

RULES: tuple[Rule, ...] = (
    Rule(
        ("link.rate",),
        SCALE,
        (Target("*:MAC:transmit"), _PACE),
        _ratio("link.rate"),
        "serialization time on the link is wire bits / rate; pacing follows the path's rate",
    ),
    Rule(
        ("link.delay",),
        SCALE,
        (Target("*:Link:propagate"),),
        lambda old, new: new("link.delay") / old("link.delay"),
        "propagation time is link.delay",
        refuse=_zero_delay,
    ),
    Rule(
        ("bottleneck.rate",),
        SCALE,
        (Target("path:Bottleneck#tx_to_rx:serialize"), _PACE),
        lambda old, new: old("bottleneck.rate") / new("bottleneck.rate"),
        "serialization at the bottleneck is (IP bytes + overhead) / rate",
        refuse=_no_bottleneck,
    ),
    Rule(
        ("bottleneck.reverse_rate",),
        SCALE,
        (Target("path:Bottleneck#rx_to_tx:serialize"),),
        lambda old, new: old("bottleneck.reverse_rate") / new("bottleneck.reverse_rate"),
        "serialization of the ACK direction at its bottleneck",
        refuse=_no_reverse_bottleneck,
    ),
    Rule(
        ("bottleneck.overhead",),
        SCALE,
        (Target("path:Bottleneck#tx_to_rx:serialize"), _PACE),
        _full_size_ratio,
        "a full-size packet is serialized as MTU + overhead bytes (a TCP stream's data)",
        refuse=_full_size_overhead,
    ),
    Rule(
        ("pcie.gen", "pcie.lanes", "pcie.latency"),
        SCALE,
        (*_DMA_STATES, _MMIO_WAIT, *_CALLS_WAITING),
        _bus_bandwidth_ratio,
        "DMA transfer time is bus bytes / bandwidth; the bridge latency is fixed per access",
    ),
    Rule(
        ("bus.on_die_clock",),
        SCALE,
        (
            *(Target(t.pattern, amount=_on_die_nic) for t in _DMA_STATES),
            *(Target(f"{{sys}}:Copy Engine:{state}") for state in ON_DIE_ENGINE_STATES),
        ),
        _on_die_clock_ratio,
        "an on-die transfer is cycles / clock (the NIC's DMA on die, an on-die copy engine's)",
    ),
    Rule(
        ("cpu.freq",),
        SCALE,
        (*_CPU_TARGETS, *_CALL_TARGETS),
        _ratio("cpu.freq"),
        "cycle costs take cycles / frequency",
    ),
    Rule(
        ("cpu.cores",),
        BOUND,
        (Target("{sys}:CPU cores"),),
        lambda old, new: new("cpu.cores"),
        "the host's CPU work is shared by more cores (cpasim.predict.bounds)",
    ),
    Rule(
        ("tcp.wmem",),
        CAPACITY,
        (Target("{sys}:Send buffer*"), _CWND_FOLLOWS),
        _growth("tcp.wmem"),
        "more send-buffer bytes the writer may fill before ACKs free them (and, in slow "
        "start, as much more congestion window)",
        _fixed_buffers_only("tcp.wmem"),
    ),
    Rule(
        ("tcp.rmem",),
        CAPACITY,
        (Target("{peer}:Send window*"),),
        _growth("tcp.rmem"),
        "a larger advertised window gives the peer's sender more credits",
        _fixed_buffers_only("tcp.rmem"),
    ),
    Rule(
        ("tcp.sndbuf", "tcp.core_wmem_max"),
        CAPACITY,
        (Target("{sys}:Send buffer*"), _CWND_FOLLOWS),
        lambda old, new: _sndbuf(new) - _sndbuf(old),
        "a locked send buffer of twice the request (at most net.core.wmem_max; and, in "
        "slow start, as much more congestion window)",
        _locked_only("tcp.sndbuf", "tcp.wmem"),
    ),
    Rule(
        ("tcp.rcvbuf", "tcp.core_rmem_max", "tcp.rx_truesize"),
        CAPACITY,
        (Target("{peer}:Send window*"),),
        lambda old, new: _rcv_window(new) - _rcv_window(old),
        "the window a locked receive buffer offers, by Linux's arithmetic",
        _locked_only("tcp.rcvbuf", "tcp.rmem"),
    ),
    Rule(
        ("nic.tx_ring",),
        CAPACITY,
        (Target("{sys}:TX free desc"),),
        _growth("nic.tx_ring"),
        "more free TX descriptors",
    ),
    Rule(
        ("nic.rx_ring",),
        CAPACITY,
        (Target("{sys}:RX free desc"),),
        _growth("nic.rx_ring"),
        "more posted RX buffers",
    ),
    Rule(
        ("copy_engine.ring",),
        CAPACITY,
        (Target("{sys}:Copy desc free"),),
        _growth("copy_engine.ring"),
        "more copy descriptors the driver may have outstanding",
    ),
    Rule(
        ("nic.tx_fifo",),
        CAPACITY,
        (Target("{sys}:TX FIFO"),),
        lambda old, new: _fifo_frames(new) - _fifo_frames(old),
        "more full-size frames fit in the NIC's TX FIFO",
    ),
    Rule(
        ("qdisc.len",),
        CAPACITY,
        (Target("{sys}:qdisc"),),
        _growth("qdisc.len"),
        "more packets fit in the device queue",
    ),
)

#: Pools whose arbitration order a prediction does not keep (see "Arbitration order").
REORDERED_POOLS = ("*:CPU cores", "*:IRQ cores", "*:PCIe up", "*:PCIe down")


def reference() -> Transforms:
    """The baseline as predictions see it: only the arbitration order freed."""
    return Transforms(breaks=list(REORDERED_POOLS))


_RULE_OF: dict[str, Rule] = {k: r for r in RULES for k in r.keys}


def predictable_keys() -> list[str]:
    """Every key the table maps, in table order."""
    return [k for r in RULES for k in r.keys]


def _split(full_key: str) -> tuple[str | None, str]:
    """``hosts.tx.tcp.wmem`` → ``("tx", "tcp.wmem")``; ``link.rate`` → ``(None, "link.rate")``."""
    parts = full_key.split(".", 2)
    if parts[0] == "hosts" and len(parts) == 3 and parts[1] in ALL_HOSTS:
        return parts[1], parts[2]
    return None, full_key


class Refused(CpasimError):
    """A change the table cannot turn into transforms; the message says why."""


def _flow_split(full_key: str) -> tuple[int | None, str]:
    """``flows.1.tcp.wmem`` → ``(1, "tcp.wmem")``; any other key → ``(None, key)``."""
    parts = full_key.split(".", 2)
    if parts[0] == "flows" and len(parts) == 3 and parts[1].isdigit():
        return int(parts[1]), parts[2]
    return None, full_key


#: Per-connection queues: what a capacity row may grow for one [[flows]] table's
#: flows alone, instance by instance (``tx:Send buffer#3``).
PER_CONNECTION = ("Send buffer*", "Send window*")


def _flow_refusal(full: str, table: int, key: str) -> str | None:
    """Why a change of one [[flows]] table's ``key`` cannot be predicted, or None."""
    _, bare = _split(key)
    if bare in REFUSED:
        return f"--change {full}: cannot be predicted from a trace: {REFUSED[bare]}"
    rule = _RULE_OF.get(bare)
    if rule is None:
        return (
            f"--change {full}: cannot be predicted from a trace: it changes the flows of "
            f"[[flows]] table {table} themselves (no transform in the parameter table models "
            "it); 'cpasim validate' re-simulates it"
        )
    if rule.kind != CAPACITY or not all(t.pattern.endswith(PER_CONNECTION) for t in rule.targets):
        return (
            f"--change {full}: cannot be predicted from a trace: {bare} acts on what every "
            "flow shares, which one table's flows cannot change alone" + _RESIMULATE
        )
    return None


def check_keys(keys) -> None:
    """Refuse, before any simulation, change keys the table cannot map."""
    for full in keys:
        table, rest = _flow_split(full)
        if table is not None:
            why = _flow_refusal(full, table, rest)
            if why:
                raise Refused(why)
            continue
        if full == "flows":
            raise Refused(
                "--change flows: a different number of [[flows]] tables changes the flows "
                "themselves, not how long a step takes" + _RESIMULATE
            )
        _, key = _split(full)
        if key in REFUSED:
            raise Refused(f"--change {full}: cannot be predicted from a trace: {REFUSED[key]}")
        if key not in _RULE_OF:
            raise Refused(
                f"--change {full}: cannot be predicted from a trace (no transform in the "
                f"parameter table models it); predictable keys: {', '.join(predictable_keys())} "
                "(each also as hosts.tx.<key> / hosts.rx.<key> where per host); "
                "re-simulate other changes with 'cpasim validate'"
            )


def _as_given(full_keys, hosts=ALL_HOSTS) -> list[str]:
    """Changed keys as a user writes them: ``tcp.cc`` when every host's (of ``hosts``,
    the run's) changed."""
    out: list[str] = []
    for full in full_keys:
        host, key = _split(full)
        mine = [h for h in spec_of(full).hosts if h in hosts]
        if host is not None and all(f"hosts.{h}.{key}" in full_keys for h in mine):
            full = key
        if full not in out:
            out.append(full)
    return out


def _flows_as_given(full_keys) -> list[str]:
    """Changed keys of [[flows]] tables as a user writes them: ``flows.1.tcp.cc`` when
    both hosts' changed."""
    out: list[str] = []
    for full in full_keys:
        table, rest = _flow_split(full)
        host, key = _split(rest)
        both = [f"flows.{table}.hosts.{h}.{key}" for h in HOSTS]
        if host is not None and all(b in full_keys for b in both):
            full = f"flows.{table}.{key}"
        if full not in out:
            out.append(full)
    return out


def _lookup(cfg: Config, host: str | None) -> Lookup:
    flat = cfg.flat()
    if host is None:
        return lambda key: flat[key]
    return lambda key: flat.get(f"hosts.{host}.{key}", flat.get(key))


@dataclass(frozen=True)
class Effect:
    """One applied row, for reports: ``"link.rate 1 Gbit/s → 10 Gbit/s: scale ... × 0.1"``."""

    key: str
    old: str
    new: str
    kind: str
    pattern: str
    amount: float


@dataclass(frozen=True)
class Plan:
    """The transforms that model ``old → new`` and the rows they came from."""

    transforms: Transforms
    effects: tuple[Effect, ...]

    def describe(self) -> list[str]:
        """One line per (change, amount): the patterns it acts on, abbreviated."""
        groups: dict[tuple, list[str]] = {}
        for e in self.effects:
            groups.setdefault((e.key, e.old, e.new, e.kind, round(e.amount, 4)), []).append(
                e.pattern
            )
        lines = []
        for (key, old, new, kind, amount), patterns in groups.items():
            op = {SCALE: f"× {amount:.4g}", CAPACITY: f"+{int(amount)}"}.get(
                kind, f"work / {int(amount)}"
            )
            shown = ", ".join(patterns[:3])
            if len(patterns) > 3:
                shown += f" and {len(patterns) - 3} more"
            lines.append(f"{key} {old} → {new}: {kind} {shown} {op}")
        return lines


def plan_change(
    old: Config,
    new: Config,
    state_means: Mapping[str, float] | None = None,
    state_entries: Mapping[str, int] | None = None,
    senders: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
) -> Plan:
    """Transforms that turn the dependence graph of a run of ``old`` into one of ``new``.

    ``state_means``: mean active time per visit of each ``sys:sm:state`` in the
    baseline (:func:`state_means`), and ``state_entries`` its ``begin`` records per
    state; needed to keep fixed parts fixed, without them a rule's factor applies to
    the whole state.  ``senders``: each host's TCP connection ends as the baseline
    left them (its result's ``end_state["tcp"]``), which a slow-start target needs
    (without them it grows nothing).
    """
    diffs = old.changes(new)
    hosts = TOPOLOGIES[old.topology.kind].hosts
    if FORWARDER not in hosts:  # its keys change nothing
        diffs = {k: v for k, v in diffs.items() if _split(k)[0] != FORWARDER}
    per_flow = {k: v for k, v in diffs.items() if _flow_split(k)[0] is not None}
    diffs = {k: v for k, v in diffs.items() if k not in per_flow}
    check_keys(_as_given(diffs, hosts))
    check_keys(_flows_as_given(per_flow))
    _check_ideal_hosts(old, new, diffs)
    # Group per (rule, host): several keys of one rule (gen + lanes) act together.
    touched: dict[tuple[int, str | None], list[str]] = {}
    for full in diffs:
        host, key = _split(full)
        rule = _RULE_OF[key]
        touched.setdefault((RULES.index(rule), host), []).append(full)
    scale: list[tuple[str, float]] = []
    capacity: list[tuple[str, int]] = []
    effects: list[Effect] = []
    for full, (before, after) in per_flow.items():
        table, rest = _flow_split(full)
        host, key = _split(rest)
        rule = _RULE_OF[key]
        lo = _lookup(old.flow_config(table), host)
        ln = _lookup(new.flow_config(table), host)
        old_text, new_text = _fmt(rest, before), _fmt(rest, after)
        why_not = rule.refuse(lo, ln)
        if why_not:
            raise Refused(f"cannot predict {full} {old_text} → {new_text}: {why_not}")
        amount = rule.amount(lo, ln)
        peer = next(h for h in HOSTS if h != host)
        first = sum(g.count for g in old.flows[:table])
        for target in rule.targets:
            pattern = target.pattern.format(sys=host, peer=peer)
            if target.slow_start:
                mine = range(first, first + old.flows[table].count)
                for one, grow in _cwnd_follows(senders, host, pattern, amount, mine):
                    capacity.append((one, grow))
                    effects.append(Effect(full, old_text, new_text, CAPACITY, one, grow))
                continue
            if amount < 0:
                raise Refused(
                    f"cannot predict {full} {old_text} → {new_text}: it shrinks {pattern} by "
                    f"{int(-amount)} units, and a trace can only predict growth; re-simulate "
                    "it with 'cpasim validate'"
                )
            if amount < 1:
                continue
            sys_, queue = pattern[:-1].split(":", 1)
            for i in range(first, first + old.flows[table].count):
                one = sm_display(sys_, queue, str(i))  # the queue of flow i's connection
                capacity.append((one, int(amount)))
                effects.append(Effect(full, old_text, new_text, CAPACITY, one, amount))
    for (index, host), fulls in sorted(touched.items(), key=lambda kv: (kv[0][0], kv[0][1] or "")):
        rule = RULES[index]
        lo, ln = _lookup(old, host), _lookup(new, host)
        label = ", ".join(fulls)
        old_text = ", ".join(_fmt(f, diffs[f][0]) for f in fulls)
        new_text = ", ".join(_fmt(f, diffs[f][1]) for f in fulls)
        why_not = rule.refuse(lo, ln)
        if why_not:
            raise Refused(f"cannot predict {label} {old_text} → {new_text}: {why_not}")
        amount = rule.amount(lo, ln)
        # The forwarding host has no keys of a {peer} row (TCP's): no peer.
        peer = None if host not in HOSTS else next(h for h in HOSTS if h != host)
        for target in rule.targets:
            pattern = target.pattern.format(sys=host or "*", peer=peer or "*")
            if rule.kind == BOUND:
                effects.append(Effect(label, old_text, new_text, BOUND, pattern, amount))
                continue
            if rule.kind == CAPACITY and target.slow_start:
                for one, grow in _cwnd_follows(senders, host, pattern, amount):
                    capacity.append((one, grow))
                    effects.append(Effect(label, old_text, new_text, CAPACITY, one, grow))
                continue
            if rule.kind == CAPACITY:
                if amount < 0:
                    raise Refused(
                        f"cannot predict {label} {old_text} → {new_text}: it shrinks "
                        f"{pattern} by {int(-amount)} units, and a trace can only predict "
                        "growth (a smaller queue would reorder causality); re-simulate it "
                        "with 'cpasim validate'"
                    )
                if amount >= 1:
                    capacity.append((pattern, int(amount)))
                    effects.append(Effect(label, old_text, new_text, CAPACITY, pattern, amount))
                continue
            r = target.amount(lo, ln) if target.amount is not None else amount
            entries = _scale_entries(pattern, target, r, lo, ln, state_means, state_entries)
            for name, factor in entries:
                if factor != 1.0:
                    scale.append((name, factor))
                    effects.append(Effect(label, old_text, new_text, SCALE, name, factor))
    transforms = Transforms(scale=scale, capacity=capacity, breaks=list(REORDERED_POOLS))
    return Plan(transforms, tuple(effects))


def _cwnd_follows(senders, host, queue: str, amount: float, conns=None) -> list[tuple[str, int]]:
    """``(queue of one connection, growth)`` for each connection of ``host`` (of
    ``conns``, connection indices, when given) whose Linux sender the baseline left in
    slow start with data out: its ``queue`` (``tx:Send window``) grows by ``amount``,
    at most by what the peer's window leaves above its cwnd."""
    out = []
    if amount < 1:
        return out
    sys_, name = queue[:-1].split(":", 1)  # "tx:Send window*": one connection's, below
    for end in (senders or {}).get(host, ()):
        index = int(end["conn"][1:])
        mine = conns is None or index in conns
        if not (mine and end.get("slow_start") and end["flight"]):
            continue
        grow = int(min(amount, end["peer_window"] - end["cwnd"]))
        if grow >= 1:
            out.append((sm_display(sys_, name, str(index)), grow))
    return out


def _check_ideal_hosts(old: Config, new: Config, diffs) -> None:
    """Refuse a change of a key an ideal host (``host.detail``) has no part for: its
    trace holds no state the key acts on, and a re-simulation would not change."""
    for full in diffs:
        host, key = _split(full)
        if host not in HOSTS or not (is_ideal(old, host) or is_ideal(new, host)):
            continue
        lacks = absent(key)
        if lacks is not None:
            raise Refused(
                f'cannot predict {full}: host {host} is ideal (host.detail = "ideal"): it has '
                f"{lacks}, so {key} acts on nothing there; set hosts.{host}.host.detail = "
                '"full" to ask about it'
            )


def _scale_entries(pattern, target, r, lo, ln, state_means, state_entries=None):
    """``(pattern, factor)`` pairs: one per concrete state when a fixed part needs its mean."""
    if target.writes is not None and state_means and state_entries:
        return _writes_entries(pattern, target, r, lo, ln, state_means, state_entries)
    if target.writes is not None and target.writes_scale:
        return []  # nothing known of the writes in the state: it is left as it is
    if target.fixed is None or state_means is None:
        return [(pattern, r)]
    fixed_old, fixed_new = target.fixed(lo), target.fixed(ln)
    if fixed_old == fixed_new == 0:
        return [(pattern, r)]
    out = []
    for name, mean in sorted(state_means.items()):
        if not fnmatchcase(name, pattern) or mean <= 0:
            continue
        if mean < fixed_old:
            out.append((name, r))  # the fixed part is not on every entry: scale all
            continue
        out.append((name, (fixed_new + (mean - fixed_old) * r) / mean))
    return out or [(pattern, r)]


def _writes_entries(pattern, target, r, lo, ln, state_means, state_entries):
    """``(state, factor)`` pairs for a call state holding M5 register writes (see
    :attr:`Target.writes`)."""
    fixed_old = target.fixed(lo) if target.fixed else 0.0
    fixed_new = target.fixed(ln) if target.fixed else 0.0
    out = []
    for name, mean in sorted(state_means.items()):
        if not fnmatchcase(name, pattern) or mean <= 0:
            continue
        held, n = target.writes(name, state_means, state_entries)
        held = min(mean, held)
        if target.writes_scale:
            if not held:
                continue
            fo, fn = min(held, fixed_old * n), fixed_new * n
            new = mean - held + fn + (held - fo) * r
        else:  # as any state with a fixed part, the writes left out
            rest = mean - held
            # A fixed part longer than the rest is not on every entry: scale all.
            fixed = (fixed_old, fixed_new) if rest >= fixed_old else (0.0, 0.0)
            new = held + fixed[1] + (rest - fixed[0]) * r
        out.append((name, new / mean))
    return out if out or target.writes_scale else [(pattern, r)]


def state_means(profile: list[dict], entries: Mapping[str, int]) -> dict[str, float]:
    """``sys:sm:state`` → mean active ns per entry into the state.

    ``profile`` is an analysis' per-SM profile (active time per state, summed
    over every edge); ``entries`` counts the ``begin`` records of each state
    (:func:`cpasim.predict.runs.state_entries`): one entry is one access, one
    syscall, one poll, whatever the records inside it.
    """
    out = {}
    for entry in profile:
        for st in entry["states"]:
            name = f"{entry['sm']}:{st['state']}"
            n = entries.get(name, 0)
            if n and st["active_ns"] > 0:
                out[name] = st["active_ns"] / n
    return out


def state_active(profile: list[dict]) -> dict[str, float]:
    """``sys:sm:state`` → active ns over the whole trace, from an analysis' profile."""
    return {
        f"{entry['sm']}:{st['state']}": st["active_ns"]
        for entry in profile
        for st in entry["states"]
        if st["active_ns"] > 0
    }


def _fmt(full_key: str, value: Any) -> str:
    return spec_of(full_key).format(value)
