"""Every scenario parameter, declared once: type, unit, default, valid range, doc.

Each section is a frozen dataclass; each parameter is a field made by
:func:`param`, whose metadata carries its :class:`Kind`, range and one-line doc.
Defaults and bounds are written as a user would write them (``"20ms"``) and
stored in cpasim's internal units (ns, bit/s, bytes, Hz, cycles).

Global sections (``sim``, ``workload``, ``topology``, ``link``, ``bottleneck``) exist once.
The sections of :class:`HostParams` exist once per host: a scenario key without a host
prefix (``tcp.wmem``) sets every host that has the key, ``hosts.tx.tcp.wmem`` one of
them.  The forwarding host ``fw`` (``topology.kind = "forward"``) has only the keys of
what it runs (:func:`hosts_of`): its devices, IP forwarding, CPU, bus and memory.

To add a parameter, add one field to its section below; loading, ``--set``,
``cpasim params``, the digest and ``to_toml`` all pick it up from here.

A section's ``rules`` (:mod:`cpasim.config.rules`) refuse combinations of values that
cannot work; a parameter that chooses a kind (``workload.kind``, ``bus.kind`` ...)
takes its choices from the kinds' registry, whose chosen kind adds its own rules.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from cpasim import units
from cpasim.model.buses import BUSES
from cpasim.model.cc import ALGORITHMS
from cpasim.model.detail import LEVELS
from cpasim.model.flow_kinds import FLOW_KINDS
from cpasim.model.workloads import WORKLOADS
from cpasim.protocol import (
    ETHERNET_FRAMING,
    MAC_HEADER,
    MAX_PING_PAYLOAD,
    TCP_TIMESTAMPS,
    frame_bytes,
    mss_for,
)

#: The end hosts: every workload runs between them.
HOSTS = ("tx", "rx")
#: The forwarding host between them with ``topology.kind = "forward"``.
FORWARDER = "fw"
#: Every host a scenario configures (``hosts.<h>.*``).
ALL_HOSTS = (*HOSTS, FORWARDER)

# Kinds of parameter.  Quantities are parsed by cpasim.units; the rest by type.
TIME, RATE, SIZE, FREQ = units.TIME, units.RATE, units.SIZE, units.FREQ
INT, FLOAT, BOOL, ENUM = "int", "float", "bool", "enum"
QUANTITIES = (TIME, RATE, SIZE, FREQ)


@dataclass(frozen=True)
class ParamSpec:
    """One parameter as listed by ``cpasim params`` (values in internal units)."""

    key: str  # dotted key; per-host keys without the ``hosts.<h>.`` prefix
    type: str  # time | rate | size | freq | int | float | bool | enum
    unit: str  # internal unit: ns, bit/s, B, Hz, cycles, segments, ... ('' if none)
    default: Any
    lo: Any  # inclusive bounds, None = unbounded
    hi: Any
    choices: tuple | None
    doc: str
    per_host: bool
    hosts: tuple[str, ...] = ()  # per-host keys: the hosts that have it (:func:`hosts_of`)
    #: At its default the key is left out of the configuration's digest (see :func:`param`).
    digest_neutral: bool = False

    def format(self, value: Any) -> str:
        """Human text for a value of this parameter, as it would be written in TOML."""
        if self.type in QUANTITIES:
            return units.format_quantity(value, self.type)
        if self.type == BOOL:
            return "true" if value else "false"
        if self.type == FLOAT:
            return repr(float(value))
        return str(value)

    def range_text(self) -> str:
        if self.choices is not None:
            return "|".join(self.format(c) for c in self.choices)
        if self.lo is None and self.hi is None:
            return ""
        lo = "" if self.lo is None else self.format(self.lo)
        hi = "" if self.hi is None else self.format(self.hi)
        return f"{lo}..{hi}"


def _internal(value: Any, kind: str) -> Any:
    if value is None:
        return None
    if kind in QUANTITIES:
        return units.parse_quantity(value, kind, what="declared default")
    if kind == FLOAT:
        return float(value)
    return value


def param(
    default: Any,
    kind: str,
    doc: str,
    *,
    lo: Any = None,
    hi: Any = None,
    choices: tuple | None = None,
    unit: str = "",
    digest_neutral: bool = False,
) -> Any:
    """Declare a parameter field.  ``default``/``lo``/``hi``/``choices`` as a user writes them.

    ``digest_neutral``: the default is the model as it was before the key existed, so at
    its default the key is left out of the digest (:class:`~cpasim.config.Config`), and
    the digests of configurations made before it (run folders, trace sidecars) still
    match."""
    if kind in QUANTITIES:
        unit = units.internal_unit(kind)
    meta = {
        "kind": kind,
        "doc": doc,
        "lo": _internal(lo, kind),
        "hi": _internal(hi, kind),
        "choices": None if choices is None else tuple(_internal(c, kind) for c in choices),
        "unit": unit,
        "digest_neutral": digest_neutral,
    }
    return field(default=_internal(default, kind), metadata={"param": meta})


def section(cls: type) -> Any:
    """Declare a nested section field (``cpu.cost`` inside ``cpu``)."""
    return field(default_factory=cls, metadata={"section": True})


#: A rule on a scenario's values (:class:`cpasim.config.rules.Values`): it refuses a
#: combination that cannot work by calling ``v.refuse(message)``.
Rule = Callable[[Any], None]


def kind_rules(key: str, kinds: Mapping[str, Any]) -> Rule:
    """The rule that applies the chosen kind's own rules: ``kinds[v[key]].check``."""

    def rule(v) -> None:
        kinds[v[key]].check(v)

    rule.__name__ = rule.__qualname__ = f"rules of the chosen {key}"
    return rule


def _no_rules(v) -> None:
    pass


# --- global sections -----------------------------------------------------------------


def _warmup_before_the_end(v) -> None:
    # A timed run measures from its warm-up on; a sized one until its bytes arrive.
    if v["workload.bytes"] == 0 and v["sim.warmup"] >= v["sim.duration"]:
        v.refuse(
            f"sim.warmup ({v.show('sim.warmup')}) must be shorter than "
            f"sim.duration ({v.show('sim.duration')})"
        )


@dataclass(frozen=True)
class SimParams:
    rules: ClassVar = (_warmup_before_the_end,)

    duration: float = param(
        "20ms", TIME, "simulated time when workload.bytes is 0", lo="1ns", hi="1000s"
    )
    warmup: float = param("2ms", TIME, "metrics ignore the first part of the run", lo=0, hi="1000s")
    seed: int = param(1, INT, "seed of the run's random generator", lo=0)


def _file_sizes_in_order(v) -> None:
    lo, hi = "workload.file_size_min", "workload.file_size_max"
    if v[lo] > v[hi]:
        v.refuse(f"{lo} ({v.show(lo)}) is larger than {hi} ({v.show(hi)})")


@dataclass(frozen=True)
class WorkloadParams:
    rules: ClassVar = (_file_sizes_in_order, kind_rules("workload.kind", WORKLOADS))

    kind: str = param(
        "tcp_stream",
        ENUM,
        "traffic pattern",
        choices=tuple(WORKLOADS),
    )
    bytes: int = param(0, SIZE, "bytes to transfer; 0 = run for sim.duration", lo=0)
    write_size: int = param("64KiB", SIZE, "bytes per application write()", lo=1, hi="1GiB")
    read_size: int = param("64KiB", SIZE, "bytes per application read()", lo=1, hi="1GiB")
    message_size: int = param(
        "16KiB", SIZE, "ping-pong message and UDP datagram size", lo=1, hi="1GiB"
    )
    connections: int = param(1, INT, "concurrent connections", lo=1, hi=100_000)
    processes: int = param(1, INT, "webserver event-loop processes", lo=1, hi=1024)
    file_size_min: int = param("500kB", SIZE, "smallest file the webserver serves", lo=1)
    file_size_max: int = param("4MB", SIZE, "largest file the webserver serves", lo=1)
    request_size: int = param(
        "256B", SIZE, "webserver and rpc request size (an rpc flow's too)", lo=1, hi="1MiB"
    )
    response_size: int = param(
        "256B",
        SIZE,
        "rpc response size (one UDP datagram; an rpc flow's, over TCP, any size)",
        lo=1,
        hi="1MiB",
    )
    think_time: float = param(
        0,
        TIME,
        "webserver client (and rpc flow client) pause between requests",
        lo=0,
        hi="1000s",
    )
    file_copy: bool = param(
        False,
        BOOL,
        "the webserver and udp_stream senders read() each response chunk (write_size) or "
        "datagram from a cached file into their buffer before sending it: a system call and "
        "a kernel->user copy (cpu.cost.copy_recv_per_byte); false = the data is in place",
    )
    # Directed Point: a receiver that polls user-mapped token buffers.
    receive: str = param(
        "syscall",
        ENUM,
        "how UDP datagrams reach the application (udp_stream, rpc): syscall = "
        "recvfrom(); poll = the kernel's receive path copies each datagram into a "
        "user-mapped buffer pool (cpu.cost.copy_recv_per_byte, in udp_rcv) and the "
        "application picks it up without a system call (cpu.cost.poll); udp_gbn always polls",
        choices=("syscall", "poll"),
    )
    copy_out: bool = param(
        False,
        BOOL,
        "polled receive (workload.receive = poll, udp_gbn): the receiver copies each "
        "datagram out of the pool into "
        "its own buffer (cpu.cost.poll_per_byte) instead of consuming it in place",
    )
    duplex: bool = param(
        False,
        BOOL,
        "udp_stream and udp_gbn: each host also streams to the other (connection r<i> "
        "from rx to tx), a sending and a receiving process per host; other kinds ignore it",
    )
    window: int = param(
        32, INT, "udp_gbn: datagrams the sender may have unacknowledged", lo=1, hi=1_000_000
    )
    ack_every: int = param(
        8, INT, "udp_gbn: the receiver acknowledges every this many datagrams", lo=1, hi=1_000_000
    )
    # Long enough for ack_every datagrams to cross a 100 Mb/s link and be acknowledged.
    retransmit_timeout: float = param(
        "10ms",
        TIME,
        "udp_gbn: the sender goes back to its oldest unacknowledged datagram "
        "after this long without an acknowledgement",
        lo="1us",
        hi="1000s",
    )


def _no_bottleneck_beside_the_forwarder(v) -> None:
    for key in ("bottleneck.rate", "bottleneck.reverse_rate"):
        if v[key]:
            v.refuse(
                f'{key} ({v.show(key)}) cannot be used with topology.kind = "forward": '
                "the forwarding host is the router between the hosts; set one of them"
            )


def _no_forwarder_keys(v) -> None:
    """Without a forwarding host its keys change nothing: one named with its prefix
    and set apart from its default and from the end hosts is a mistake.  A value it
    inherited from a key without prefix is not (the end hosts may have been set one
    by one since), nor are its own keys (cpu.cost.forward): "every cost 0" sets them."""
    fw = f"hosts.{FORWARDER}."
    for full in sorted(k for k, written in v.named.items() if k.startswith(fw) and written == k):
        key = full[len(fw) :]
        ends = [v[f"hosts.{h}.{key}"] for h in HOSTS if h in SPECS[key].hosts]
        if ends and v[full] != SPECS[key].default and v[full] not in ends:
            v.refuse(
                f'{full} is set, but topology.kind = "direct" has no forwarding host '
                '(set topology.kind = "forward")'
            )


@dataclass(frozen=True)
class Topology:
    """One value of ``topology.kind``: how the hosts are joined."""

    name: str
    #: The hosts in the run: the end hosts, and the forwarding host between them or not.
    hosts: tuple[str, ...]
    #: The rules a scenario with this topology must keep (:mod:`cpasim.config.rules`).
    check: Rule = _no_rules

    @property
    def forwards(self) -> bool:
        """A forwarding host stands between tx and rx, a link on each side."""
        return FORWARDER in self.hosts

    @property
    def links(self) -> int:
        """Links a packet crosses from tx to rx."""
        return 2 if self.forwards else 1


#: The topologies (:mod:`cpasim.model.system` builds them); nothing else compares
#: ``topology.kind`` to a name.
TOPOLOGIES: dict[str, Topology] = {
    t.name: t
    for t in (
        Topology("direct", HOSTS, check=_no_forwarder_keys),
        Topology("forward", ALL_HOSTS, check=_no_bottleneck_beside_the_forwarder),
    )
}


@dataclass(frozen=True)
class TopologyParams:
    """How the hosts are joined (:data:`TOPOLOGIES`, :mod:`cpasim.model.system`)."""

    rules: ClassVar = (kind_rules("topology.kind", TOPOLOGIES),)

    kind: str = param(
        "direct",
        ENUM,
        "direct = tx and rx back to back on one link; forward = a forwarding host fw "
        "between them (two NICs on its one I/O bus, IP forwarding), a link on each side",
        choices=tuple(TOPOLOGIES),
    )


@dataclass(frozen=True)
class LinkParams:
    rate: float = param("1Gbps", RATE, "link bit rate per direction", lo="1kbps", hi="10Tbps")
    delay: float = param("10us", TIME, "one-way propagation delay", lo=0, hi="10s")
    mtu: int = param("1500B", SIZE, "largest IP packet on the link", lo="68B", hi="64KiB")
    loss: float = param(0.0, FLOAT, "probability that a frame is lost", lo=0.0, hi=1.0)


def _bottleneck_holds_a_packet(v) -> None:
    if not (v["bottleneck.rate"] or v["bottleneck.reverse_rate"]):
        return
    mtu, overhead = v["link.mtu"], v["bottleneck.overhead"]
    packet = mtu + overhead
    if v["bottleneck.queue"] < packet:
        v.refuse(
            f"bottleneck.queue ({v.show('bottleneck.queue')}) cannot hold one full-size "
            f"packet ({packet} B from link.mtu = {mtu} B and bottleneck.overhead = {overhead} B)"
        )
    if 0 < v["bottleneck.burst"] < packet:
        # tbf refuses a bucket that cannot pass its largest packet.
        v.refuse(
            f"bottleneck.burst ({v.show('bottleneck.burst')}) must be 0 or hold one "
            f"full-size packet ({packet} B)"
        )


@dataclass(frozen=True)
class BottleneckParams:
    """A router between the hosts that queues and shapes (:mod:`cpasim.model.bottleneck`)."""

    rules: ClassVar = (_bottleneck_holds_a_packet,)

    rate: float = param(
        0, RATE, "shaped rate tx->rx; 0 = no bottleneck (hosts back to back)", lo=0, hi="10Tbps"
    )
    reverse_rate: float = param(
        0, RATE, "shaped rate rx->tx (the ACK direction); 0 = none", lo=0, hi="10Tbps"
    )
    # ns-3's point-to-point default queue is 100 packets; 100 full-size
    # packets with Ethernet framing are about 150 kB.
    queue: int = param(
        "150kB",
        SIZE,
        "drop-tail queue, in the bytes the shaper counts (IP packet + overhead)",
        lo=1,
        hi="1GiB",
    )
    overhead: int = param(
        f"{ETHERNET_FRAMING}B",
        SIZE,
        f"bytes counted per packet beyond the IP packet: {ETHERNET_FRAMING} Ethernet on the "
        f"wire, {MAC_HEADER} a Linux qdisc (tbf on veth), 0 IP bytes",
        lo=0,
        hi="1KiB",
    )
    # Linux's tbf needs a bucket of at least one packet; 0 keeps the strict rate
    # server of a point-to-point link, where every packet waits its serialization.
    burst: int = param(
        0,
        SIZE,
        "token bucket (tbf burst): bytes that may pass at once after an idle spell; "
        "0 = a strict rate server",
        lo=0,
        hi="1GiB",
    )
    aqm: str = param(
        "none",
        ENUM,
        "active queue management: none, CoDel (RFC 8289) or FQ-CoDel (RFC 8290)",
        choices=("none", "codel", "fq_codel"),
    )


# --- per-host sections -----------------------------------------------------------------


def _one_buffer_rule(v) -> None:
    p = v.prefix
    for new, old in (("tcp.sndbuf", "tcp.wmem"), ("tcp.rcvbuf", "tcp.rmem")):
        if v[old] and v[new]:
            v.refuse(
                f"{p}{new} (Linux's socket-buffer request) cannot be used with {p}{old} "
                "(cpasim's fixed buffer); set one of them"
            )


def _fixed_buffers_hold_a_segment(v) -> None:
    p, mtu = v.prefix, v["link.mtu"]
    mss = mss_for(mtu, v["tcp.timestamps"])
    for buf in ("tcp.wmem", "tcp.rmem"):
        if v[buf] and v[buf] < mss:
            v.refuse(
                f"{p}{buf} ({v[buf]} B) is smaller than one MSS ({mss} B from link.mtu = "
                f"{mtu} B and {p}tcp.timestamps)"
            )


@dataclass(frozen=True)
class TcpParams:
    rules: ClassVar = (_one_buffer_rule, _fixed_buffers_hold_a_segment)

    # Socket buffers: Linux's rules (cpasim.model.sockbuf) unless tcp.wmem/tcp.rmem
    # ask for cpasim's fixed buffers.
    sndbuf: int = param(
        0, SIZE, "SO_SNDBUF request (as iperf3 -w); 0 = not set: autotuned", lo=0, hi="1GiB"
    )
    rcvbuf: int = param(
        0, SIZE, "SO_RCVBUF request (as iperf3 -w); 0 = not set: autotuned", lo=0, hi="1GiB"
    )
    core_wmem_max: int = param("4MiB", SIZE, "net.core.wmem_max: largest SO_SNDBUF", lo="1B")
    core_rmem_max: int = param("4MiB", SIZE, "net.core.rmem_max: largest SO_RCVBUF", lo="1B")
    core_rmem_default: int = param(
        "208KiB", SIZE, "net.core.rmem_default: a UDP socket's receive buffer", lo="1B"
    )
    wmem_default: int = param(
        "16KiB",
        SIZE,
        "tcp_wmem[1]: send buffer before autotuning; matters only above what "
        "tcp_init_buffer_space grows it to (2 x tcp.init_cwnd full segments' memory)",
        lo="1B",
        hi="1GiB",
    )
    wmem_max: int = param(
        "4MiB", SIZE, "tcp_wmem[2]: largest autotuned send buffer", lo="1B", hi="1GiB"
    )
    rmem_default: int = param(
        "128KiB", SIZE, "tcp_rmem[1]: receive buffer before autotuning", lo="1B", hi="1GiB"
    )
    rmem_max: int = param(
        "32MiB", SIZE, "tcp_rmem[2]: largest autotuned receive buffer", lo="1B", hi="1GiB"
    )
    moderate_rcvbuf: bool = param(True, BOOL, "tcp_moderate_rcvbuf: receive-buffer autotuning")
    rx_truesize: int = param(
        "2304B",
        SIZE,
        "buffer memory charged per received full segment (skb truesize; sets scaling_ratio)",
        lo="64B",
        hi="64KiB",
    )
    wmem: int = param(
        0,
        SIZE,
        "fixed send buffer of exactly this many bytes (no doubling, no autotuning); "
        "0 = Linux's rules (tcp.sndbuf)",
        lo=0,
        hi="1GiB",
    )
    rmem: int = param(
        0,
        SIZE,
        "fixed receive buffer: the window is its free bytes (no overhead, no autotuning); "
        "0 = Linux's rules (tcp.rcvbuf)",
        lo=0,
        hi="1GiB",
    )
    init_cwnd: int = param(10, INT, "initial congestion window", lo=1, hi=1000, unit="segments")
    delayed_ack: bool = param(True, BOOL, "ACK every second segment or on the delack timer")
    delack_timeout: float = param("40ms", TIME, "delayed-ACK timer", lo="1us", hi="10s")
    nagle: bool = param(True, BOOL, "hold small segments while data is unacknowledged")
    csum_copy: bool = param(
        True,
        BOOL,
        "a send's software checksum (nic.csum_offload = false) is computed while copying "
        "(csum_and_copy_from_user; TCP and UDP); false = a pass of its own that reads the "
        "bytes from memory again, with memory.bandwidth set (Waheed 2003's HTTP proxy)",
    )
    cc: str = param(
        "cubic",
        ENUM,
        "congestion control (Linux's tcp_congestion_control); reno|newreno with sack=false"
        " is the classic RFC 5681/6582 sender, every other combination Linux's sender",
        choices=tuple(ALGORITHMS),
    )
    sack: bool = param(
        True, BOOL, "selective acknowledgements (RFC 2018, Linux's tcp_sack), if both hosts allow"
    )
    recovery: str = param(
        "rack",
        ENUM,
        "loss detection with SACK (Linux's tcp_recovery): RACK time-based or the dupack count",
        choices=("rack", "dupack"),
    )
    # Linux paces inside TCP only when asked (sk_pacing_status): BBR asks; so do
    # SO_MAX_PACING_RATE, and a socket created while BBR was the default, since the
    # status is never reset when TCP_CONGESTION switches to another algorithm.
    pacing: str = param(
        "auto",
        ENUM,
        "TCP's internal pacing: auto = when the algorithm asks (BBR), as Linux without "
        "the fq qdisc; on = every algorithm at its pacing rate",
        choices=("auto", "on"),
    )
    timestamps: bool = param(True, BOOL, f"TCP timestamp option ({TCP_TIMESTAMPS} B per segment)")
    rto_min: float = param("200ms", TIME, "lower bound of the retransmission timeout", lo="1ms")
    dupack_threshold: int = param(
        3, INT, "duplicate ACKs that trigger fast retransmit (Linux: tcp_reordering)", lo=1
    )


@dataclass(frozen=True)
class IpParams:
    netfilter: bool = param(False, BOOL, "pass every packet through netfilter (extra CPU cost)")
    send_path: str = param(
        "modern",
        ENUM,
        "UDP send path: modern = IP output in the sender's state machine; 2.6.13 = Linux "
        "2.6.13's ip_push_pending_frames into an IP Send state machine, which with "
        "ip.netfilter fragments, reassembles and fragments again, and which transmits each "
        "fragment inside the call, one tail write per frame",
        choices=("modern", "2.6.13"),
    )


@dataclass(frozen=True)
class QdiscParams:
    len: int = param(1000, INT, "device queue length", lo=1, hi=1_000_000, unit="packets")


@dataclass(frozen=True)
class DriverParams:
    napi_budget: int = param(64, INT, "packets per NAPI poll before yielding", lo=1, hi=65536)
    tx_clean_batch: int = param(
        32, INT, "completed TX descriptors freed per clean-up", lo=1, hi=65536
    )
    tx_batch: int = param(
        16,
        INT,
        "queued packets posted per doorbell at most (ip.send_path=2.6.13: per turn of "
        "the driver, each with its own doorbell)",
        lo=1,
        hi=65536,
    )


def _fifos_hold_a_frame(v) -> None:
    p, mtu = v.prefix, v["link.mtu"]
    frame = frame_bytes(mtu)
    for fifo in ("nic.tx_fifo", "nic.rx_fifo"):
        if v[fifo] < frame:
            v.refuse(
                f"{p}{fifo} ({v.show(fifo)}) cannot hold one frame "
                f"({frame} B from link.mtu = {mtu} B)"
            )


def _throttle_needs_a_fixed_itr(v) -> None:
    if v["nic.throttle_usecs"] and v["nic.itr"] != "fixed":
        v.refuse(
            f"{v.prefix}nic.throttle_usecs applies only with nic.itr=fixed "
            f"(nic.itr is {v['nic.itr']!r})"
        )


@dataclass(frozen=True)
class NicParams:
    rules: ClassVar = (_fifos_hold_a_frame, _throttle_needs_a_fixed_itr)

    tx_ring: int = param(256, INT, "TX descriptor ring entries", lo=2, hi=65536)
    rx_ring: int = param(256, INT, "RX descriptor ring entries", lo=2, hi=65536)
    desc_size: int = param("16B", SIZE, "DMA descriptor size", lo="4B", hi="256B")
    desc_fetch_batch: int = param(
        8, INT, "descriptors fetched (TX: also written back) per DMA at most", lo=1, hi=65536
    )
    tx_desc_cache: int = param(
        0,
        INT,
        "on-NIC TX descriptor cache, filled by its own fetch engine (TX Desc Fetch) in "
        "DMAs of at most desc_fetch_batch; 0 = the transmit engine fetches a batch itself "
        "when it runs out",
        lo=0,
        hi=65536,
        unit="descriptors",
    )
    tx_fetch_threshold: int = param(
        0,
        INT,
        "with tx_desc_cache: the transmit engine asks for a fetch when the cache holds "
        "this many unused descriptors or fewer (0 = only when it runs dry)",
        lo=0,
        hi=65536,
        unit="descriptors",
    )
    tx_fetch_request: str = param(
        "queue",
        ENUM,
        "with tx_desc_cache: how the transmit engine asks the fetch engine; queue = "
        "through a request queue (the engine's idle time is waiting); call = by plain "
        "calls from the transmit engine and the driver's doorbell, as M5's IGbE did, so "
        "the engine's Wait is active time on the path",
        choices=("queue", "call"),
    )
    tx_writeback: str = param(
        "batch",
        ENUM,
        "with tx_desc_cache: who writes processed TX descriptors back, and when; batch = "
        "the transmit engine, desc_fetch_batch at a time or what is done when it runs dry; "
        "each / block = a write-back engine of the cache's own (TX Desc Writeback), one DMA "
        "at a time while the transmit engine goes on, asking the fetch engine after each, "
        "as M5's IGbE: each = every descriptor (TXDCTL.WTHRESH 0), block = whole 64-byte "
        "cache blocks of them (WTHRESH 1 with GRAN, as Linux 2.6.13's e1000 sets)",
        choices=("batch", "each", "block"),
    )
    tx_fifo: int = param("48KiB", SIZE, "on-NIC transmit FIFO", lo="64B", hi="64MiB")
    rx_fifo: int = param(
        "48KiB", SIZE, "on-NIC receive FIFO (frames dropped when full)", lo="64B", hi="64MiB"
    )
    coalesce_usecs: float = param(
        0,
        TIME,
        "interrupt delay after the first completion (rx-usecs); matters only with "
        "nic.coalesce_frames above 1",
        lo=0,
        hi="1s",
    )
    coalesce_frames: int = param(
        1,
        INT,
        "pending completions that interrupt without waiting nic.coalesce_usecs",
        lo=1,
        hi=65536,
    )
    itr: str = param(
        "adaptive",
        ENUM,
        "interrupt throttling: e1000 dynamic ITR, fixed throttle_usecs, or none",
        choices=("adaptive", "fixed", "off"),
    )
    throttle_usecs: float = param(
        0, TIME, "smallest time between two interrupts with nic.itr=fixed", lo=0, hi="1s"
    )
    # A controller of its own time per frame (the LANCE takes ~47 us in Mosberger's Scout paper):
    # spent by the NIC's engine, one frame after the other; 0 = none, no event.
    tx_latency: float = param(
        0,
        TIME,
        "controller time per packet between reading it from memory and queueing it for the wire",
        lo=0,
        hi="1s",
    )
    rx_latency: float = param(
        0,
        TIME,
        "controller time per frame between its arrival and writing it to memory",
        lo=0,
        hi="1s",
    )
    tso: bool = param(False, BOOL, "TCP segmentation offload")
    csum_offload: bool = param(True, BOOL, "checksums computed by the NIC")


@dataclass(frozen=True)
class PcieParams:
    gen: int = param(1, INT, "PCIe generation (1-2: 8b/10b, 3+: 128b/130b)", lo=1, hi=5)
    lanes: int = param(1, INT, "lanes per direction", choices=(1, 2, 4, 8, 16, 32))
    max_payload: int = param(
        "256B", SIZE, "largest TLP payload", choices=(128, 256, 512, 1024, 2048, 4096)
    )
    max_read_request: int = param(
        "512B", SIZE, "largest DMA read request", choices=(128, 256, 512, 1024, 2048, 4096)
    )
    tlp_overhead: int = param("24B", SIZE, "header, framing and CRC per TLP", lo=0, hi="256B")
    latency: float = param(
        "100ns",
        TIME,
        "I/O bridge one-way latency (also M5's bridge delay, bus.kind = m5, which a "
        "register write crosses both ways)",
        lo=0,
        hi="1ms",
    )
    mmio_latency: float = param(
        "100ns",
        TIME,
        "CPU stall per MMIO write (doorbell), posted; not used with bus.kind = m5, "
        "where the stall is the write's round trip through M5's bridge",
        lo=0,
        hi="1ms",
    )


@dataclass(frozen=True)
class BusParams:
    rules: ClassVar = (kind_rules("bus.kind", BUSES),)

    kind: str = param(
        "pcie",
        ENUM,
        "I/O bus between NIC and memory; on_die: the NIC on the processor die, on the "
        "interconnect between L1 and L2 (Saidi 2009's figure 6.6b); m5: the I/O bus of "
        "Saidi 2009's simulator, one shared split-transaction bus with pcie's bandwidth "
        "behind a bridge of pcie.latency, where the CPU's register writes queue behind "
        "the DMA traffic (cpasim.model.m5bus)",
        choices=tuple(BUSES),
    )
    pci_width: int = param(
        64, INT, "legacy PCI (bus.kind = pci) data width", choices=(32, 64), unit="bit"
    )
    pci_clock: float = param(
        "33MHz", FREQ, "legacy PCI (bus.kind = pci) clock", lo="1MHz", hi="1GHz"
    )
    pci_burst: int = param(
        "256B", SIZE, "legacy PCI (bus.kind = pci) burst length", lo="4B", hi="64KiB"
    )
    # Defaults fitted to the Directed Point paper (GEDP on 64-bit 33 MHz PCI): gs = 18.76 us at
    # 1500 B and reads ~47% slower than writes.
    pci_burst_overhead: float = param(
        21.5,
        FLOAT,
        "legacy PCI (bus.kind = pci) cycles per burst (arbitration, address)",
        lo=0,
        unit="cycles",
    )
    pci_read_wait: float = param(
        47.4,
        FLOAT,
        "legacy PCI (bus.kind = pci) extra cycles per read burst (target latency)",
        lo=0,
        unit="cycles",
    )
    # M5's bus model (Saidi 2009's simulator), whose defaults Saidi 2009 kept: a shared,
    # half-duplex channel of 64 bytes at 1 GHz, one header cycle per 64-byte block.
    on_die_width: int = param(
        "64B", SIZE, "on-die interconnect (bus.kind = on_die) bytes per cycle", lo="1B", hi="1KiB"
    )
    on_die_clock: float = param(
        "1GHz", FREQ, "on-die interconnect (bus.kind = on_die) clock", lo="1MHz", hi="10GHz"
    )
    # M5's I/O bus, bridge and DMA ports as gem5 had them in February 2009 (commit
    # bebbc9dc89); its bandwidth is the PCIe link's (pcie.gen, pcie.lanes), its
    # bridge's delay pcie.latency (the thesis: 100 ns).
    m5_header_cycles: int = param(
        1,
        INT,
        "M5 I/O bus (bus.kind = m5) cycles of overhead per transaction (gem5 Bus.py header_cycles)",
        lo=0,
        hi=64,
        unit="cycles",
    )
    m5_memory_latency: float = param(
        "30ns",
        TIME,
        "M5 I/O bus (bus.kind = m5): memory's answer to a DMA block behind the bridge "
        "(gem5 PhysicalMemory.py latency)",
        lo=0,
        hi="1ms",
    )
    m5_bridge_buffer: int = param(
        16,
        INT,
        "M5 I/O bus (bus.kind = m5): DMA blocks the bridge holds awaiting their "
        "responses; one more is NACKed (gem5 Bridge.py req_size/resp_size)",
        lo=1,
        hi=4096,
    )
    m5_nack_delay: float = param(
        "4ns",
        TIME,
        "M5 I/O bus (bus.kind = m5): the bridge's delay before a NACK (gem5 FSConfig.py "
        "nack_delay)",
        lo=0,
        hi="1ms",
    )
    m5_backoff_min: float = param(
        "4ns",
        TIME,
        "M5 I/O bus (bus.kind = m5): a DMA port's back-off after its first NACK, doubled "
        "at each further one (gem5 Device.py min_backoff_delay)",
        lo="1ns",
        hi="1ms",
    )
    m5_backoff_max: float = param(
        "10us",
        TIME,
        "M5 I/O bus (bus.kind = m5): the most a DMA port's back-off doubles to (gem5 "
        "Device.py max_backoff_delay)",
        lo="1ns",
        hi="1s",
    )


@dataclass(frozen=True)
class CpuCostParams:
    syscall: float = param(1000.0, FLOAT, "entering and leaving a system call", lo=0, unit="cycles")
    # In Makineni & Iyer (HPCA-10), small buffers cost more per call to send than to receive.
    send_call: float = param(
        0.0,
        FLOAT,
        "extra per send call (write, sendto) beyond syscall; 0 = sending and receiving "
        "calls cost the same",
        lo=0,
        unit="cycles",
    )
    copy: float = param(300.0, FLOAT, "fixed cost of one user/kernel copy", lo=0, unit="cycles")
    copy_per_byte: float = param(0.5, FLOAT, "per byte copied user/kernel", lo=0, unit="cycles/B")
    # One copy cost per byte served both directions before the directions could be
    # told apart; it stays the default of both, so a scenario that sets only it
    # keeps its meaning.  Negative = not set (a cost is never negative).
    copy_send_per_byte: float = param(
        -1.0,
        FLOAT,
        "per byte copied user->kernel (write, sendto); -1 = cpu.cost.copy_per_byte",
        lo=-1.0,
        unit="cycles/B",
    )
    copy_recv_per_byte: float = param(
        -1.0,
        FLOAT,
        "per byte copied kernel->user (read, recvfrom); -1 = cpu.cost.copy_per_byte",
        lo=-1.0,
        unit="cycles/B",
    )
    csum_per_byte: float = param(
        0.5,
        FLOAT,
        "per byte checksummed in software (nic.csum_offload = false)",
        lo=0,
        unit="cycles/B",
    )
    tx_packet: float = param(2000.0, FLOAT, "TCP/IP send path per packet", lo=0, unit="cycles")
    rx_packet: float = param(2500.0, FLOAT, "TCP/IP receive path per packet", lo=0, unit="cycles")
    udp_send: float = param(
        0.0,
        FLOAT,
        "UDP/IP send path per datagram (udp_sendmsg); 0 = lumped into syscall and copy",
        lo=0,
        unit="cycles",
    )
    ack: float = param(1500.0, FLOAT, "processing one received ACK", lo=0, unit="cycles")
    interrupt: float = param(2000.0, FLOAT, "interrupt entry and exit", lo=0, unit="cycles")
    descriptor: float = param(150.0, FLOAT, "driver work per descriptor", lo=0, unit="cycles")
    xmit_frame: float = param(
        0.0,
        FLOAT,
        "Linux 2.6.13's e1000_xmit_frame per frame beyond its descriptor and tail write "
        "(ip.send_path = 2.6.13); on M5's bus the tail write's wait for the bus comes "
        "on top (cpasim.model.m5bus)",
        lo=0,
        unit="cycles",
    )
    context_switch: float = param(4000.0, FLOAT, "switching threads", lo=0, unit="cycles")
    skb_alloc: float = param(400.0, FLOAT, "allocating a packet buffer", lo=0, unit="cycles")
    skb_free: float = param(200.0, FLOAT, "freeing a sent packet buffer", lo=0, unit="cycles")
    netfilter: float = param(
        1500.0, FLOAT, "netfilter per packet (ip.netfilter)", lo=0, unit="cycles"
    )
    fragment: float = param(600.0, FLOAT, "IP fragmentation per fragment", lo=0, unit="cycles")
    reassemble: float = param(800.0, FLOAT, "IP reassembly per fragment", lo=0, unit="cycles")
    memcpy_per_byte: float = param(
        1.0,
        FLOAT,
        "kernel copy of data in cache, per byte (netfilter's reassembly with ip.send_path=2.6.13)",
        lo=0,
        unit="cycles/B",
    )
    user: float = param(200.0, FLOAT, "application work per call", lo=0, unit="cycles")
    # The Directed Point paper's Ur: a message picked up from the token buffer pool, in user space.
    poll: float = param(
        30.0,
        FLOAT,
        "picking one datagram up from the user-mapped buffer pool (workload.receive = poll)",
        lo=0,
        unit="cycles",
    )
    poll_per_byte: float = param(
        0.0,
        FLOAT,
        "per byte copied out of the buffer pool on pick-up (workload.receive = poll, "
        "workload.copy_out)",
        lo=0,
        unit="cycles/B",
    )
    reliable: float = param(
        2500.0,
        FLOAT,
        "user-level reliable layer per datagram sent and per datagram received "
        "(workload.kind = udp_gbn)",
        lo=0,
        unit="cycles",
    )

    # Not fitted: of the order of the IP part of cpasim's receive and send paths.
    forward: float = param(
        1000.0,
        FLOAT,
        "forwarding host: IP forwarding per packet (ip_rcv, route lookup, TTL and header "
        "checksum update, ip_output to the other device's queue)",
        lo=0,
        unit="cycles",
    )


@dataclass(frozen=True)
class CpuCacheParams:
    """The CPU's data cache as Waheed 2003 models it (:mod:`cpasim.model.cache`): misses
    stretch the cycle costs; off unless ``size`` is set."""

    size: int = param(
        0,
        SIZE,
        "data cache size: per-byte costs x (1 + MR*MP) and per-packet work pays its header "
        "lines' misses; 0 = costs as given (no cache model)",
        lo=0,
        hi="1GiB",
    )
    # Waheed 2003's example: a 32-byte line of 16 words, MR = 1/16, and MP = 10.
    line: int = param(
        "32B", SIZE, "cache line length L (with cpu.cache.size set)", lo="4B", hi="4KiB"
    )
    word: int = param(
        "2B",
        SIZE,
        "width W of one access in a pass over data: a sequential pass misses W/L of them "
        "(with cpu.cache.size set)",
        lo="1B",
        hi="64B",
    )
    miss_penalty: float = param(
        10.0,
        FLOAT,
        "stall per miss MP beyond the access's own cycle (with cpu.cache.size set)",
        lo=0,
        hi=10_000,
        unit="cycles",
    )
    working_set: int = param(
        0,
        SIZE,
        "bytes of data the copies and checksums pass over again and again (files served, "
        "application buffers): the share beyond the cache misses; 0 = every byte is new "
        "(a stream of PDUs: MR = W/L), with cpu.cache.size set",
        lo=0,
        hi="1TiB",
    )
    # Saidi 2009's ladder (section 6.2.2): ACKs flushed from the cache as the data rate grows.
    ack_footprint: bool = param(
        False,
        BOOL,
        "processing an ACK misses in the share of the data in flight past the device "
        "queue beyond the cache (the buffers it frees were last touched when sent, and "
        "all data sent since has streamed through the cache): cpu.cost.ack x (1 + MR*MP), "
        "MR = max(0, 1 - size / those bytes); with cpu.cache.size set",
    )


def _irq_preemption(v) -> None:
    p = v.prefix
    if not v["cpu.irq_preempt"]:
        return
    if v["ip.send_path"] != "2.6.13":
        # Only that path's system call is modelled as interruptible work.
        v.refuse(f'{p}cpu.irq_preempt needs {p}ip.send_path = "2.6.13", got {v["ip.send_path"]!r}')
    if v["cpu.irq_cores"]:
        # Interrupts then run on cores of their own and preempt nobody.
        v.refuse(
            f"{p}cpu.irq_preempt needs {p}cpu.irq_cores = 0 (interrupts on cores of their "
            f"own preempt nobody), got {v['cpu.irq_cores']}"
        )


@dataclass(frozen=True)
class CpuParams:
    rules: ClassVar = (_irq_preemption,)

    cores: int = param(1, INT, "CPU cores", lo=1, hi=1024)
    irq_cores: int = param(
        0,
        INT,
        "cores of cpu.cores reserved for interrupts, NAPI, receive processing and TCP's "
        "timers (the application runs on the others); 0 = all share every core",
        lo=0,
        hi=1023,
    )
    irq_preempt: bool = param(
        False,
        BOOL,
        "interrupts preempt the sender's system call (Linux 2.6.13's send path, "
        "ip.send_path = 2.6.13): the handler and NAPI's poll run at once on its core "
        "while it allocates, copies, fragments or filters, and it resumes when they "
        "return; inside dev_queue_xmit they wait for its do_softirq as without",
    )
    freq: float = param("4GHz", FREQ, "clock; scales every cycle cost", lo="1MHz", hi="100GHz")
    cost: CpuCostParams = section(CpuCostParams)
    cache: CpuCacheParams = section(CpuCacheParams)


@dataclass(frozen=True)
class MemoryParams:
    """Main memory as a bandwidth shared by DMA, CPU copies and the copy engine
    (:mod:`cpasim.model.main_memory`); off unless ``bandwidth`` is set."""

    bandwidth: float = param(
        0,
        RATE,
        "memory bandwidth shared by device DMA, CPU copies/checksums and the copy engine; "
        "0 = not modelled (no contention)",
        lo=0,
        hi="100Tbps",
    )
    latency: float = param(
        "0ns",
        TIME,
        "added to each device read and copy-engine copy (DRAM access after the bridge), "
        "with memory.bandwidth set; CPU copies have theirs in cpu.cost",
        lo=0,
        hi="1ms",
    )
    # A memory controller's latency grows with its load (the loaded-latency curve);
    # the copy's traffic then slows every device read burst, not only one it meets.
    load_window: float = param(
        "0ns",
        TIME,
        "with memory.bandwidth set: time over which the memory's occupancy by CPU copies and "
        "checksums is averaged; a device read's memory latency "
        "(memory.latency and, on legacy PCI, each burst's bus.pci_read_wait) grows to "
        "latency / (1 - occupancy); 0 = latency independent of load",
        lo=0,
        hi="1s",
    )
    dma_holds: bool = param(
        False,
        BOOL,
        "with memory.bandwidth set: a device DMA occupies the memory for its whole I/O-bus "
        "transfer, not only its bytes at memory.bandwidth (a bridge that streams at the bus's "
        "pace; transfers in series, as Waheed 2003's latency model T = ... + S/Be assumes)",
    )


@dataclass(frozen=True)
class CopyEngineParams:
    """An IOAT-style DMA copy engine doing TCP's kernel->user copies
    (:mod:`cpasim.model.copy_engine`)."""

    enabled: bool = param(
        False, BOOL, "TCP receive copies (kernel->user) done by a DMA copy engine, not the CPU"
    )
    location: str = param(
        "on_die",
        ENUM,
        "where the engine sits: on the I/O bus (its reads and writes cross it) or on die",
        choices=("io_bus", "on_die"),
    )
    # The engine's timing is the simulator of Saidi 2009's: M5's CopyEngine (gem5
    # src/dev/pci/CopyEngine.py and copy_engine.cc), whose defaults Saidi 2009 kept.
    latency: float = param(
        "20ns",
        TIME,
        "after a descriptor is read, before its copy begins (gem5 CopyEngine latBeforeBegin, "
        "20 ns; with copy_engine.enabled, as every key here)",
        lo=0,
        hi="1ms",
    )
    completion_latency: float = param(
        "20ns",
        TIME,
        "after a copy's completion status is written, before the engine goes on (gem5 "
        "CopyEngine latAfterCompletion, 20 ns)",
        lo=0,
        hi="1ms",
    )
    rate: float = param(
        0,
        RATE,
        "a rate limit on each of a copy's reads and writes; 0 = none: as gem5's CopyEngine, "
        "the copy moves as fast as its DMA crosses the engine's interconnect",
        lo=0,
        hi="10Tbps",
    )
    # Linux 2.6.18's ioatdma allocates 128 descriptors per channel
    # (INITIAL_IOAT_DESC_COUNT) and appends to the engine every 20 pending ones.
    ring: int = param(128, INT, "copy descriptors the driver may have outstanding", lo=1, hi=65536)
    batch: int = param(
        20, INT, "descriptors queued before the driver rings the engine (append)", lo=1, hi=65536
    )
    copy_size: int = param(
        "4KiB",
        SIZE,
        "most bytes one descriptor copies (gem5 CopyEngine XferCap, 4 KiB): the driver "
        "cuts a segment's copy into descriptors of at most this",
        lo="64B",
        hi="1GiB",
    )
    # Saidi 2009's simulator ran Alpha Linux (gem5's critical-path annotations are
    # Alpha m5 ops), whose pages are 8 KiB.
    page_size: int = param(
        "8KiB",
        SIZE,
        "pages of the reader's buffer: Linux's dma_memcpy_to_iovec cuts a segment's copy "
        "where it crosses one (Alpha Linux, Saidi 2009's platform: 8 KiB); 0 = no cut",
        lo=0,
        hi="1GiB",
    )
    desc_size: int = param(
        "64B",
        SIZE,
        "copy descriptor size (IOAT, gem5's DmaDesc: 64 B), read by the engine over its "
        "interconnect",
        lo="8B",
        hi="4KiB",
    )
    mmio_latency: float = param(
        "20ns",
        TIME,
        "CPU stall per uncached engine register access on die (cpasim's estimate: gem5's "
        "engine answers 1 ns after the access crosses the on-die bus); on the I/O bus: "
        "pcie.mmio_latency",
        lo=0,
        hi="1ms",
    )
    wait: str = param(
        "spin",
        ENUM,
        "how read() waits for its copies: spin on the core (Linux 2.6.18) or sleep",
        choices=("spin", "sleep"),
    )


@dataclass(frozen=True)
class HostDetailParams:
    """How much of the host is simulated (:mod:`cpasim.model.ideal`, docs/detail-levels.md)."""

    rules: ClassVar = (kind_rules("host.detail", LEVELS),)

    detail: str = param(
        "full",
        ENUM,
        "full = every host state machine (CPU, bus, DMA, rings, interrupts); ideal = what "
        "ns-3 keeps: application, socket buffers, TCP with its timers, IP and the qdisc, "
        "with no CPU cost and a packet on the link as the qdisc releases it (the cpu, "
        "memory, bus, pcie, nic, driver and copy_engine keys then do not apply)",
        choices=tuple(LEVELS),
        digest_neutral=True,
    )


@dataclass(frozen=True)
class HostParams:
    """Everything one host is made of; ``cfg.tx`` and ``cfg.rx`` are these."""

    host: HostDetailParams = section(HostDetailParams)
    tcp: TcpParams = section(TcpParams)
    ip: IpParams = section(IpParams)
    qdisc: QdiscParams = section(QdiscParams)
    driver: DriverParams = section(DriverParams)
    nic: NicParams = section(NicParams)
    pcie: PcieParams = section(PcieParams)
    bus: BusParams = section(BusParams)
    cpu: CpuParams = section(CpuParams)
    memory: MemoryParams = section(MemoryParams)
    copy_engine: CopyEngineParams = section(CopyEngineParams)


@dataclass(frozen=True)
class FlowWorkloadParams:
    """Workload keys only a ``[[flows]]`` table has (its ``workload.*``)."""

    # Linux's ping sends one echo request a second (-i 1); runs last seconds at most,
    # so the default probes a hundred times as often, as ping -i 0.01 does.
    interval: float = param(
        "10ms",
        TIME,
        "ping flows (kind = ping): time between echo requests (ping -i)",
        lo="1us",
        hi="1000s",
    )
    ping_size: int = param(
        "56B",
        SIZE,
        "ping flows: data bytes per echo request (ping -s)",
        lo=0,
        hi=f"{MAX_PING_PAYLOAD}B",
    )


@dataclass(frozen=True)
class FlowParams:
    """The keys of one ``[[flows]]`` table of its own (:mod:`cpasim.config.flow_tables`); the
    table may also override the scenario's ``tcp`` keys and the workload keys of
    :data:`FLOW_WORKLOAD_KEYS` for its flows.  Declared apart from the scenario's
    sections: a scenario without ``[[flows]]`` has none of them (nor their digest)."""

    count: int = param(1, INT, "flows this table describes, alike", lo=1, hi=100_000)
    start: float = param(0, TIME, "delay before the flows' applications begin", lo=0, hi="1000s")
    kind: str = param(
        "bulk",
        ENUM,
        "bulk = a TCP stream as workload.kind = tcp_stream; ping = an ICMP echo request "
        "every workload.interval, answered by the peer's kernel; rpc = request/response "
        "over TCP (workload.request_size, workload.response_size, workload.think_time)",
        choices=tuple(FLOW_KINDS),
    )
    workload: FlowWorkloadParams = section(FlowWorkloadParams)


#: The scenario's workload keys a ``[[flows]]`` table may set for its own flows.
FLOW_WORKLOAD_KEYS = (
    "workload.bytes",
    "workload.write_size",
    "workload.read_size",
    "workload.request_size",
    "workload.response_size",
    "workload.think_time",
)


#: Global sections, in listing order.
GLOBAL_SECTIONS: dict[str, type] = {
    "sim": SimParams,
    "workload": WorkloadParams,
    "topology": TopologyParams,
    "link": LinkParams,
    "bottleneck": BottleneckParams,
}


#: Per-host keys (and key prefixes, ending in ``.``) of the forwarding host: it runs
#: no sockets, TCP or copy engine, and it neither segments nor checksums what it
#: forwards, so only its devices, IP's netfilter, its CPU's clock, cores and the
#: costs of the forwarding path, its bus and its memory.
_FORWARDER_KEYS = (
    "ip.netfilter",
    "qdisc.",
    "driver.",
    "nic.",
    "pcie.",
    "bus.",
    "memory.",
    "cpu.cores",
    "cpu.freq",
    "cpu.cost.interrupt",
    "cpu.cost.descriptor",
    "cpu.cost.skb_alloc",
    "cpu.cost.skb_free",
    "cpu.cost.netfilter",
    "cpu.cost.forward",
)
_NOT_FORWARDER = ("nic.tso", "nic.csum_offload")
#: Per-host keys only the forwarding host has.
_FORWARDER_ONLY = ("cpu.cost.forward",)


def hosts_of(key: str) -> tuple[str, ...]:
    """The hosts that have per-host key ``key`` (without its ``hosts.<h>.`` prefix)."""
    if key in _FORWARDER_ONLY:
        return (FORWARDER,)
    forwarder = key not in _NOT_FORWARDER and any(
        key == k or (k.endswith(".") and key.startswith(k)) for k in _FORWARDER_KEYS
    )
    return ALL_HOSTS if forwarder else HOSTS


def _walk(cls: type, prefix: str, per_host: bool) -> list[ParamSpec]:
    specs: list[ParamSpec] = []
    for f in dataclasses.fields(cls):
        key = f"{prefix}{f.name}"
        if f.metadata.get("section"):
            specs.extend(_walk(f.default_factory, key + ".", per_host))
            continue
        meta = f.metadata["param"]
        specs.append(
            ParamSpec(
                key=key,
                type=meta["kind"],
                unit=meta["unit"],
                default=f.default,
                lo=meta["lo"],
                hi=meta["hi"],
                choices=meta["choices"],
                doc=meta["doc"],
                per_host=per_host,
                hosts=hosts_of(key) if per_host else (),
                digest_neutral=meta["digest_neutral"],
            )
        )
    return specs


def _all_specs() -> tuple[ParamSpec, ...]:
    specs: list[ParamSpec] = []
    for name, cls in GLOBAL_SECTIONS.items():
        specs.extend(_walk(cls, name + ".", per_host=False))
    specs.extend(_walk(HostParams, "", per_host=True))
    return tuple(specs)


_SPECS = _all_specs()
#: key -> spec; per-host keys are listed without the ``hosts.<h>.`` prefix.
SPECS: dict[str, ParamSpec] = {s.key: s for s in _SPECS}


def parameters() -> list[ParamSpec]:
    """Every parameter, global ones first, in declaration order."""
    return list(_SPECS)


#: The own keys of a ``[[flows]]`` table: ``count``, ``start``, ``kind``, ``workload.interval``
#: and ``workload.ping_size``.
FLOW_SPECS: dict[str, ParamSpec] = {s.key: s for s in _walk(FlowParams, "", per_host=False)}
