"""How big a run will be, told before it starts.

A valid scenario can still be absurd: a 1000 TB transfer, 100,000 connections,
a 10 Tb/s link with every CPU cost 0.  :func:`estimate` bounds the frames the
run can move from the configuration alone (the link, the bottleneck, the I/O
buses, the CPUs' per-packet work and TCP's largest window cap the frame rate;
the duration or the byte target caps the time) and turns them into events and
trace bytes with ratios measured on the shipped scenarios.  It reads the
configuration once and touches nothing of the simulation, so a run it does not
warn about costs nothing more.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from cpasim.config.params import FORWARDER, TOPOLOGIES
from cpasim.model.workloads import workload_kind
from cpasim.protocol import MAC_HEADER_FCS, mss_for, wire_bytes
from cpasim.units import RATE, TIME, human

#: SimPy events per frame on the wire, both directions counted, the largest ratio
#: measured rounded up: tcp-stream.toml processed 151,624 events for about 14,600
#: frames (10.4), a 2 MB transfer 22,101 for about 2,070 (10.7), webserver.toml
#: 1,030,243 for about 74,000 (13.9); udp-stream.toml (30 ms), whose sender runs Linux
#: 2.6.13's call a state per function and fragment, 106,570 where the bound below
#: puts 7,129 frames (14.95).
EVENTS_PER_FRAME = 15
#: Events to start one connection before it moves data: tcp-stream.toml with
#: 10,000 connections and 30 ms processed 85,186 events and moved no frame.
EVENTS_PER_CONNECTION = 9
#: ACK frames per data frame (delayed ACKs acknowledge every second segment).
ACKS_PER_FRAME = 0.5
#: Trace bytes per event: 164 for .cpt (tcp-stream.toml: 24.9 MB for 151,624
#: events), 455 for .jsonl (40 ms of it: 49,039 events, 22.3 MB).
TRACE_BYTES_PER_EVENT = {".cpt": 164, ".jsonl": 455}
#: Above these a run is announced: at the 93,000 events per wall second
#: tcp-stream.toml runs at, 10^8 events is about 18 minutes.
WARN_EVENTS = 100_000_000
WARN_TRACE_BYTES = 10 * 10**9
#: Each event costs more wall time with many connections: 10,000 connections ran
#: 87,746 events in 8.8 s, 100 times slower per event than one connection.
WARN_CONNECTIONS = 10_000


@dataclass(frozen=True)
class Estimate:
    """An upper bound on the size of one run (rounded figures, for people)."""

    frames: float  # frames on the wire, both directions
    events: float
    sim_ns: float  # simulated time the frames fit in
    rate_bps: float  # the data rate that bounds the frames
    connections: int
    trace_bytes: float | None  # None: no trace asked for

    def warning(self) -> str | None:
        """One line saying how big the run is, or None for a run of ordinary size."""
        big_trace = self.trace_bytes is not None and self.trace_bytes > WARN_TRACE_BYTES
        many = self.connections >= WARN_CONNECTIONS
        if self.events <= WARN_EVENTS and not big_trace and not many:
            return None
        parts = [
            f"about {self.events:.2g} events to simulate ({self.frames:.2g} frames in "
            f"{human(self.sim_ns, TIME)} at up to {human(self.rate_bps, RATE)}"
        ]
        parts[0] += f", {self.connections:,} connections)" if many else ")"
        if self.trace_bytes is not None:
            parts.append(f"a trace of about {self.trace_bytes / 1e9:.3g} GB")
        tail = "; wall time grows faster than the events with this many connections" * many
        return ", ".join(parts) + tail + "; this may run for hours (Ctrl-C stops it)"


def estimate(cfg, trace_suffix: str | None = None) -> Estimate:
    """The size of the run ``cfg`` describes, without simulating it."""
    from cpasim.simulate import MAX_SIM_NS

    wl = cfg.workload
    mtu = cfg.link.mtu
    wire = wire_bytes(mtu)
    mss = mss_for(mtu, cfg.tx.tcp.timestamps)
    rate = cfg.link.rate
    if cfg.bottleneck.rate:
        rate = min(rate, cfg.bottleneck.rate * wire / (mtu + cfg.bottleneck.overhead))
    hosts = TOPOLOGIES[cfg.topology.kind].hosts
    kind = workload_kind(wl.kind)
    rate = min(rate, *(_cpu_bound(cfg, h, mss, wire) for h in hosts), _bus_bound(cfg, mtu, wire))
    if kind.bulk:
        rate = min(rate, _window_bound(cfg, mss, wire))
    per_s = rate / (8 * wire)  # data frames per second
    horizon = MAX_SIM_NS if wl.bytes else cfg.sim.duration
    data = per_s * horizon / 1e9
    if wl.bytes:
        data = min(data, math.ceil(wl.bytes / mss))
    if kind.lockstep and cfg.link.delay > 0:
        # One exchange per round trip and connection at most; a round trip takes the
        # link's delay and each message's bytes on the wire, both ways.
        rtt = 2 * (cfg.link.delay + wl.message_size * 8e9 / cfg.link.rate)
        data = min(data, wl.connections * horizon / rtt)
    sim_ns = min(horizon, data / per_s * 1e9) if per_s > 0 else horizon
    frames = data * (1 + ACKS_PER_FRAME)
    events = frames * EVENTS_PER_FRAME + wl.connections * EVENTS_PER_CONNECTION
    per_event = TRACE_BYTES_PER_EVENT.get(trace_suffix or "")
    trace = events * per_event if per_event is not None else None
    return Estimate(frames, events, sim_ns, rate, wl.connections, trace)


def _window_bound(cfg, mss: int, wire: int) -> float:
    """The data rate (bit/s) the largest send and receive buffers allow over the
    shortest round trip (the link's delay both ways), all connections together."""
    rtt = 2 * cfg.link.delay
    if rtt <= 0:
        return math.inf
    tx, rx = cfg.tx.tcp, cfg.rx.tcp
    # A fixed buffer, else the most autotuning or a doubled SO_*BUF request can reach.
    snd = tx.wmem or max(tx.wmem_max, 2 * tx.core_wmem_max)
    rcv = rx.rmem or max(rx.rmem_max, 2 * rx.core_rmem_max)
    frames = min(snd, rcv) / mss
    return cfg.workload.connections * frames * wire * 8e9 / rtt


def _bus_bound(cfg, mtu: int, wire: int) -> float:
    """The data rate (bit/s) the sender's and receiver's I/O buses carry frames at, their
    data's own bus time alone (a read's round trip, shared by a TSO burst, left out)."""
    from cpasim.model.buses import bus_timing

    rates = []
    crossings = [("tx", ("dma_read",)), ("rx", ("dma_write",))]
    if TOPOLOGIES[cfg.topology.kind].forwards:  # in and out again over its bus
        crossings.append((FORWARDER, ("dma_write", "dma_read")))
    for host, accesses in crossings:
        hc = cfg.host(host)
        timing = bus_timing(hc.bus, hc.pcie)
        occs = [getattr(timing, a)(mtu + MAC_HEADER_FCS) for a in accesses]
        up, down = sum(o.up_ns for o in occs), sum(o.down_ns for o in occs)
        busy = up + down if timing.shared else max(up, down)
        rates.append(wire * 8e9 / busy if busy > 0 else math.inf)
    return min(rates)


def _cpu_bound(cfg, host: str, mss: int, wire: int) -> float:
    """The data rate (bit/s) ``host``'s cores sustain on the per-byte and per-packet
    work alone; infinite when that work costs nothing."""
    cpu = cfg.host(host).cpu
    cost = cpu.cost
    if host == FORWARDER:  # a descriptor and a buffer each way, the forwarding path
        cycles = cost.forward + 2 * cost.descriptor + cost.skb_alloc + cost.skb_free
    else:
        per_packet = cost.tx_packet if host == "tx" else cost.rx_packet
        cycles = (cost.copy_per_byte + cost.csum_per_byte) * mss + per_packet
    if cycles <= 0:
        return math.inf
    return cpu.cores * cpu.freq / cycles * wire * 8
