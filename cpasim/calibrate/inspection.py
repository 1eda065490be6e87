"""What one capture of a transfer says about the path and the two TCP stacks.

The figures are the ones a cpasim scenario needs: the bottleneck rate (from
the dispersion of back-to-back packets), the round-trip time (data→ACK pairs,
Karn's rule: never a segment that was sent twice), MSS and TSO/GSO
super-segments, the receiver's ACK policy, the advertised window, the
sender's window limit (bytes-in-flight plateau), retransmissions and goodput.

A capture only sees one point of the path, so some figures depend on where it
was taken; :func:`inspect_capture` infers the side (:mod:`.side`) and says how.
From the figures it then says what limited the transfer, each reason computed
from the figures it cites (:mod:`.limits`).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from cpasim.calibrate.limits import STALL_FLOOR_NS, STALL_RTTS, CaptureVerdict, judge
from cpasim.calibrate.pcap import ACK, PROTO_TCP, SYN, Capture, PacketRecord
from cpasim.calibrate.side import MIN_ECHOES, SIDE_NAMES, capture_side, endpoint
from cpasim.errors import CpasimError, shown
from cpasim.protocol import DEFAULT_L2_OVERHEAD, TCP_TIMESTAMPS, tcp_header

#: Dispersion samples that fall in the densest ±5 % band of rates are taken as
#: back-to-back packets spaced by the bottleneck.
MODE_BAND = 0.05
_MODE_HALF_WIDTH = math.log(1 + MODE_BAND)
_MIN_DISPERSION_SAMPLES = 20
_SEQ_SPACE = 1 << 32
#: Steady figures leave out the start of a transfer (slow start, BBR start-up).
SKIP_FRACTION = 0.25


@dataclass(frozen=True)
class Distribution:
    """Order statistics of a sample (same unit as the figure it belongs to)."""

    n: int
    min: float
    p10: float
    p50: float
    p90: float
    max: float

    @classmethod
    def of(cls, values) -> Distribution | None:
        if len(values) == 0:
            return None
        a = np.asarray(values, dtype=float)
        p10, p50, p90 = np.percentile(a, [10, 50, 90])
        return cls(len(a), float(a.min()), float(p10), float(p50), float(p90), float(a.max()))


@dataclass(frozen=True)
class FlowSummary:
    """One conversation (both directions) of a capture."""

    index: int  # 1-based, in order of first packet; what ``--flow`` accepts
    proto: str  # "tcp" or "udp"
    a: str  # "addr:port" of the endpoint that sent more payload
    b: str
    packets: int
    payload_bytes: int  # both directions


@dataclass(frozen=True)
class RateEstimate:
    """A bottleneck rate from packet dispersion."""

    bps: float
    method: str  # what was measured
    samples: int  # packet pairs considered
    in_mode: int  # pairs within ±5 % of the estimate (back-to-back at the bottleneck)


@dataclass(frozen=True)
class FlowReport:
    """Everything :func:`inspect_capture` found; time in ns, sizes in bytes, rates in bit/s."""

    capture: str
    flows: list[FlowSummary]
    flow: FlowSummary
    sender: str
    receiver: str
    side: str  # "sender", "receiver" or "unknown"
    side_evidence: str
    duration_ns: int  # first to last data packet
    data_bytes: int  # distinct payload bytes carried sender → receiver
    goodput_bps: float  # data_bytes over duration_ns
    bottleneck: RateEstimate | None
    bottleneck_alternatives: list[RateEstimate]
    data_packets: int
    side_method: str = ""  # what told the side (see cpasim.calibrate.side)
    retransmitted_segments: int = 0
    retransmitted_bytes: int = 0
    rtt_ns: Distribution | None = None
    rtt_method: str = ""
    handshake_rtt_ns: int | None = None  # SYN to the client's next segment: the same anywhere
    mss: int | None = None
    mss_source: str = ""
    header_bytes: int = 0  # IP + TCP header bytes of a data segment
    l2_overhead: int = DEFAULT_L2_OVERHEAD  # counted per frame in the dispersion rates
    super_segments: int = 0  # segments carrying more than one MSS (TSO/GSO, or GRO at a receiver)
    largest_segment: int = 0
    segments_per_ack: float | None = None
    ack_delay_ns: Distribution | None = None
    single_segment_ack_delay_ns: Distribution | None = None
    window_scale: int | None = None
    adv_window: Distribution | None = None
    adv_window_growth: list[tuple[int, int]] = field(default_factory=list)  # (ns from start, B)
    in_flight: Distribution | None = None
    in_flight_plateau: int | None = None
    # The steady part: from SKIP_FRACTION of the transfer to its end (ns from the
    # first data packet); goodput from the ACKs' progress over it.
    steady_goodput_bps: float | None = None
    steady_from_ns: int | None = None
    steady_until_ns: int | None = None
    # Beside the sender only: the share of data spaced at the bottleneck rate, the
    # largest flight in each half of the steady part, and the shares of that part with
    # the flight at the peer's window, or with nothing in flight.
    data_at_bottleneck_share: float | None = None
    in_flight_early_max: int | None = None
    in_flight_late_max: int | None = None
    window_full_share: float | None = None
    idle_share: float | None = None
    window_closed_share: float | None = None  # peer's window below one MSS
    stalls: int = 0  # retransmissions after a silence of STALL_RTTS round trips or more
    stalled_ns: int = 0  # the silences' total
    verdict: CaptureVerdict | None = None
    limited_by: str = ""  # the verdict in one line
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        """The report as plain data (what ``cpasim calibrate inspect --json`` prints)."""
        return self.to_json()

    def to_json(self) -> dict:
        out = asdict(self)
        out["verdict"] = self.verdict.to_json() if self.verdict is not None else None
        return out


def inspect_capture(
    capture: Capture,
    *,
    flow: str | None = None,
    l2_overhead: int = DEFAULT_L2_OVERHEAD,
    side: str | None = None,
) -> FlowReport:
    """Analyse the dominant TCP flow of ``capture`` (or the one ``flow`` names).

    ``side`` ("tx": beside the data's sender, "rx": beside its receiver) overrides
    what the capture itself tells."""
    if side is not None and side not in SIDE_NAMES:
        raise CpasimError(f"--side {shown(side, 20)}: expected one of {', '.join(SIDE_NAMES)}")
    flows, members = _group_flows(capture.packets)
    if not flows:
        raise CpasimError(f"{capture.path}: no TCP or UDP packets found")
    chosen = _choose_flow(capture.path, flows, flow)
    packets = members[chosen.index]
    if chosen.proto == "udp":
        report = _inspect_udp(capture, flows, chosen, packets, l2_overhead, side)
    else:
        report = _TcpAnalysis(capture, flows, chosen, packets, l2_overhead, side).report()
    if capture.cut_short is not None:
        report.notes.insert(0, capture.cut_short)
    if report.data_bytes and not report.duration_ns:
        report.notes.append(
            "every data packet carries the same timestamp: goodput cannot be measured "
            "(reported as 0)"
        )
    return report


def _judged(report: FlowReport) -> FlowReport:
    """``report`` with the verdict its figures give."""
    verdict = judge(report)
    return replace(report, verdict=verdict, limited_by=verdict.summary)


def _group_flows(packets: list[PacketRecord]):
    by_key: dict[tuple, list[PacketRecord]] = {}
    for p in packets:
        ends = sorted([(p.src, p.sport), (p.dst, p.dport)])
        by_key.setdefault((p.proto, *ends), []).append(p)
    flows: list[FlowSummary] = []
    members: dict[int, list[PacketRecord]] = {}
    for i, (key, pkts) in enumerate(by_key.items(), start=1):
        sent: dict[str, int] = {}
        for p in pkts:
            src = endpoint(p.src, p.sport)
            sent[src] = sent.get(src, 0) + p.payload
        e1, e2 = (endpoint(*key[1]), endpoint(*key[2]))
        a, b = (e1, e2) if sent.get(e1, 0) >= sent.get(e2, 0) else (e2, e1)
        proto = "tcp" if key[0] == PROTO_TCP else "udp"
        flows.append(FlowSummary(i, proto, a, b, len(pkts), sum(sent.values())))
        members[i] = sorted(pkts, key=lambda p: p.t_ns)
    return flows, members


def _choose_flow(path: str, flows: list[FlowSummary], wanted: str | None) -> FlowSummary:
    if wanted is None:
        tcp = [f for f in flows if f.proto == "tcp"]
        if not tcp:
            raise CpasimError(
                f"{path}: no TCP flow in the capture ({len(flows)} UDP flow(s); "
                "choose one with --flow INDEX or --flow ADDR:PORT)"
            )
        return max(tcp, key=lambda f: (f.payload_bytes, -f.index))
    if wanted.isascii() and wanted.isdigit():
        # Compared as text: a 5000-digit index is no flow, not an integer to convert.
        for f in flows:
            if str(f.index) == wanted.lstrip("0"):
                return f
        raise CpasimError(
            f"--flow {shown(wanted, 40)}: no such flow; the capture has flows 1..{len(flows)}"
        )
    matches = [
        f for f in flows if wanted in (f.a, f.b) or f.a.endswith(wanted) or f.b.endswith(wanted)
    ]
    if len(matches) != 1:
        found = "none" if not matches else ", ".join(f"{f.index} ({f.a}-{f.b})" for f in matches)
        raise CpasimError(
            f"--flow {shown(wanted, 80)}: expected exactly one flow with that endpoint, "
            f"found {found}"
        )
    return matches[0]


def _wire_bytes(payload: int, header_bytes: int, mss: int | None, l2_overhead: int) -> int:
    """Bytes a super-segment occupies once cut into MSS-sized frames."""
    segments = max(1, math.ceil(payload / mss)) if mss else 1
    return payload + segments * (header_bytes + l2_overhead)


def _mode_rate(rates: list[float], method: str) -> RateEstimate | None:
    """The densest ±5 % band of the rates: packets that left the bottleneck back to back."""
    if len(rates) < _MIN_DISPERSION_SAMPLES:
        return None
    logs = np.sort(np.log(np.asarray(rates, dtype=float)))
    # For every sample, how many samples lie within +2·half-width above it.
    hi = np.searchsorted(logs, logs + 2 * _MODE_HALF_WIDTH, side="right")
    counts = hi - np.arange(len(logs))
    start = int(np.argmax(counts))
    band = logs[start : hi[start]]
    return RateEstimate(float(np.exp(np.median(band))), method, len(rates), len(band))


def _dispersion(times: list[int], sizes: list[int]) -> list[float]:
    """Rate of each packet pair: the later packet's bits over the gap before it."""
    out = []
    for i in range(1, len(times)):
        gap = times[i] - times[i - 1]
        if gap > 0:
            out.append(sizes[i] * 8e9 / gap)
    return out


def _inspect_udp(capture, flows, chosen, packets, l2_overhead, given=None) -> FlowReport:
    data = [p for p in packets if endpoint(p.src, p.sport) == chosen.a and p.payload > 0]
    duration = data[-1].t_ns - data[0].t_ns if len(data) > 1 else 0
    total = sum(p.payload for p in data)
    rates = _dispersion([p.t_ns for p in data], [p.ip_bytes + l2_overhead for p in data])
    estimate = _mode_rate(rates, "dispersion of consecutive datagrams")
    report = FlowReport(
        capture=capture.path,
        flows=flows,
        flow=chosen,
        sender=chosen.a,
        receiver=chosen.b,
        side=SIDE_NAMES[given] if given else "unknown",
        side_evidence=f"given by --side {given}"
        if given
        else "UDP carries no acknowledgements to tell the side by",
        side_method="--side" if given else "",
        duration_ns=duration,
        data_bytes=total,
        goodput_bps=total * 8e9 / duration if duration else 0.0,
        bottleneck=estimate,
        bottleneck_alternatives=[],
        data_packets=len(data),
        largest_segment=max((p.payload for p in data), default=0),
        l2_overhead=l2_overhead,
        notes=["UDP: no RTT, window or retransmission figures"],
    )
    return _judged(report)


def _unwrap(base: int, value: int, near: int) -> int:
    """Sequence number as a 64-bit offset from ``base``, on the lap closest to ``near``."""
    rel = (value - base) % _SEQ_SPACE
    lap = (near - rel + _SEQ_SPACE // 2) // _SEQ_SPACE
    return rel + lap * _SEQ_SPACE


class _TcpAnalysis:
    """One pass over a TCP flow in time order, keeping the sender's view of the sequence space."""

    def __init__(self, capture, flows, chosen, packets, l2_overhead, given_side=None):
        self.capture, self.flows, self.chosen = capture, flows, chosen
        self.l2 = l2_overhead
        self.given_side = given_side
        self.packets = packets
        self.notes: list[str] = []
        self.fwd = [p for p in packets if endpoint(p.src, p.sport) == chosen.a]
        self.rev = [p for p in packets if endpoint(p.src, p.sport) != chosen.a]
        self._handshake()

    # -- connection set-up -------------------------------------------------------------
    def _handshake(self):
        syn_a = next((p for p in self.fwd if p.flags & SYN), None)
        syn_b = next((p for p in self.rev if p.flags & SYN), None)
        self.isn = (syn_a.seq + 1) if syn_a else None
        if self.isn is None:
            first = next((p for p in self.fwd if p.payload > 0), self.fwd[0] if self.fwd else None)
            self.isn = first.seq if first else 0
            self.notes.append(
                "no SYN from the sender in the capture: sequence space starts mid-flow"
            )
        # The receiver's shift scales the windows it advertises, if both sides offered scaling.
        if syn_a and syn_b and syn_a.wscale_option is not None and syn_b.wscale_option is not None:
            self.wscale = syn_b.wscale_option
        elif syn_a and syn_b:
            self.wscale = 0
        else:
            self.wscale = None
            self.notes.append("handshake not captured: window scale unknown, windows left unscaled")
        timestamps = syn_a is not None and syn_a.tsval is not None
        offered = [s.mss_option for s in (syn_a, syn_b) if s is not None and s.mss_option]
        self.mss, self.mss_source = None, ""
        if offered:
            self.mss = min(offered) - (TCP_TIMESTAMPS if timestamps else 0)
            self.mss_source = "SYN option" + (
                f" minus {TCP_TIMESTAMPS} B of timestamps" if timestamps else ""
            )
        else:
            sizes = [p.payload for p in self.fwd if p.payload > 0]
            if sizes:
                values, counts = np.unique(sizes, return_counts=True)
                self.mss = int(values[int(np.argmax(counts))])
                self.mss_source = "most common segment size (no SYN in the capture)"

    # -- the pass ----------------------------------------------------------------------
    def report(self) -> FlowReport:
        snd_max = 0  # highest sequence offset sent (exclusive)
        snd_una = 0  # highest cumulative ACK seen
        outstanding: deque[list] = deque()  # [start, end, t_first, retransmitted]
        rtts, ack_delays, single_delays = [], [], []
        retrans_segs = retrans_bytes = 0
        silences: list[int] = []  # the sender's silence before each retransmission
        data_t, data_size = [], []  # first transmissions, for dispersion
        ack_t, ack_size = [], []  # advancing ACKs, for ACK-clock dispersion
        flight: list[int] = []
        flight_t: list[int] = []
        adv_windows: list[tuple[int, int]] = []
        adv = None
        d2a, a2d = [], []  # data→next-ACK and ACK→next-data spacings (side inference)
        last_data_t = last_ack_t = None
        last_sent_t = None  # the sender's last data packet, first or resent
        new_acks = acked_total = 0
        super_segments = largest = 0
        data_packets = 0
        t0 = self.packets[0].t_ns
        data = [p.t_ns for p in self.fwd if p.payload > 0]
        first_data_t, last_data_seen = (data[0], data[-1]) if data else (None, None)
        # Time shares are taken over the steady part: after the start-up, to the last data.
        steady = _Steady(first_data_t, last_data_seen, self.mss)

        for p in self.packets:
            steady.advance(p.t_ns, snd_max - snd_una, adv)
            if endpoint(p.src, p.sport) == self.chosen.a:
                if p.payload == 0:
                    continue
                data_packets += 1
                start = _unwrap(self.isn, p.seq, snd_max)
                end = start + p.payload
                largest = max(largest, p.payload)
                if self.mss and p.payload > self.mss:
                    super_segments += 1
                silence = p.t_ns - last_sent_t if last_sent_t is not None else 0
                last_sent_t = p.t_ns
                if start < snd_max:  # resent (partly) known data: Karn rules it out for RTT
                    retrans_segs += 1
                    retrans_bytes += min(end, snd_max) - start
                    silences.append(silence)
                    for seg in outstanding:
                        if seg[1] > start and seg[0] < end:
                            seg[3] = True
                    if end > snd_max:
                        outstanding.append([snd_max, end, p.t_ns, True])
                        snd_max = end
                    continue
                if last_ack_t is not None:
                    a2d.append(p.t_ns - last_ack_t)
                last_data_t = p.t_ns
                outstanding.append([start, end, p.t_ns, False])
                snd_max = end
                data_t.append(p.t_ns)
                data_size.append(_wire_bytes(p.payload, p.header_bytes, self.mss, self.l2))
                flight.append(snd_max - snd_una)
                flight_t.append(p.t_ns)
            else:
                if p.flags & SYN or not p.flags & ACK:
                    continue
                if self.wscale is not None:
                    adv = p.window << self.wscale
                    adv_windows.append((p.t_ns - t0, adv))
                else:
                    adv = None
                # A FIN takes one sequence number; clamp so that its ACK counts no phantom byte.
                ack = min(_unwrap(self.isn, p.ack, snd_una), snd_max)
                if ack <= snd_una:
                    continue
                acked = ack - snd_una
                snd_una = ack
                new_acks += 1
                acked_total += acked
                if last_data_t is not None:
                    d2a.append(p.t_ns - last_data_t)
                last_ack_t = p.t_ns
                ack_t.append(p.t_ns)
                ack_size.append(_wire_bytes(acked, self._header_bytes(), self.mss, self.l2))
                covered = []
                while outstanding and outstanding[0][1] <= snd_una:
                    covered.append(outstanding.popleft())
                if covered and not any(seg[3] for seg in covered):
                    delay = p.t_ns - covered[-1][2]
                    rtts.append(delay)
                    ack_delays.append(delay)
                    if len(covered) == 1:
                        single_delays.append(delay)

        duration = (last_data_seen - first_data_t) if data_packets > 1 else 0
        found = capture_side(self.packets, self.chosen.a, given=self.given_side, spacing=(d2a, a2d))
        side = found.side
        data_rate = _mode_rate(
            _dispersion(data_t, data_size), "dispersion of back-to-back data segments"
        )
        ack_rate = _mode_rate(_dispersion(ack_t, ack_size), "spacing of returning ACKs")
        primary, alternatives = (ack_rate, data_rate) if side == "sender" else (data_rate, ack_rate)
        if primary is None:
            primary, alternatives = alternatives, None
        spaced = None
        if side == "sender" and primary is not None and len(data_t) > 1:
            spaced = _share_at_rate(data_t, data_size, primary.bps)
        goodput = snd_max * 8e9 / duration if duration else 0.0

        ack_dist = single_dist = None
        if side == "receiver":
            ack_dist = Distribution.of(ack_delays)
            single_dist = Distribution.of(single_delays)
            if found.echoes is not None and len(found.echoes.sender_ns) >= MIN_ECHOES:
                rtt_dist = Distribution.of(found.echoes.sender_ns)
                rtt_method = (
                    "timestamp echoes: from the receiver's ACK to the first data echoing "
                    "its TSval (the sender's answer time included)"
                )
            else:
                rtt_dist = None
                rtt_method = (
                    "not measurable at the receiver without timestamps (data→ACK pairs "
                    "are ACK delays here)"
                )
        else:
            rtt_method = "data→ACK pairs, retransmitted segments excluded (Karn)"
            if side == "unknown":
                rtt_method += "; capture side unknown, so these may be receiver ACK delays"
            rtt_dist = Distribution.of(rtts)

        stall_after = STALL_RTTS * rtt_dist.p90 if rtt_dist is not None else STALL_FLOOR_NS
        stalls = [s for s in silences if s >= stall_after]
        early, late = _halves(flight_t, flight, steady.start, last_data_seen)
        plateau = int(np.percentile(flight, 95)) if flight else None
        if side == "receiver" and flight:
            self.notes.append(
                "bytes in flight seen at the receiver miss the bytes still on the way"
            )
        at_sender = side == "sender"
        steady_goodput = None
        if first_data_t is not None:
            try:
                steady_goodput = flow_steady_goodput(
                    self.packets, self.chosen.a, path=self.capture.path
                )
            except CpasimError as exc:
                self.notes.append(f"no steady goodput: {exc}")
        report = FlowReport(
            capture=self.capture.path,
            flows=self.flows,
            flow=self.chosen,
            sender=self.chosen.a,
            receiver=self.chosen.b,
            side=side,
            side_evidence=found.evidence,
            side_method=found.method,
            duration_ns=duration,
            data_bytes=snd_max,
            goodput_bps=goodput,
            bottleneck=primary,
            bottleneck_alternatives=[alternatives] if alternatives else [],
            data_at_bottleneck_share=spaced,
            data_packets=data_packets,
            retransmitted_segments=retrans_segs,
            retransmitted_bytes=retrans_bytes,
            rtt_ns=rtt_dist,
            rtt_method=rtt_method,
            handshake_rtt_ns=found.handshake.rtt_ns if found.handshake else None,
            mss=self.mss,
            mss_source=self.mss_source,
            header_bytes=self._header_bytes(),
            l2_overhead=self.l2,
            super_segments=super_segments,
            largest_segment=largest,
            segments_per_ack=(acked_total / self.mss / new_acks) if self.mss and new_acks else None,
            ack_delay_ns=ack_dist,
            single_segment_ack_delay_ns=single_dist,
            window_scale=self.wscale,
            adv_window=Distribution.of([w for _, w in adv_windows]),
            adv_window_growth=_downsample(adv_windows, 20),
            in_flight=Distribution.of(flight),
            in_flight_plateau=plateau,
            in_flight_early_max=early if at_sender else None,
            in_flight_late_max=late if at_sender else None,
            steady_goodput_bps=steady_goodput[0] if steady_goodput else None,
            steady_from_ns=steady_goodput[1] - first_data_t if steady_goodput else None,
            steady_until_ns=steady_goodput[2] - first_data_t if steady_goodput else None,
            window_full_share=steady.share(steady.full_ns) if at_sender else None,
            window_closed_share=steady.share(steady.closed_ns),
            idle_share=steady.share(steady.idle_ns) if at_sender else None,
            stalls=len(stalls),
            stalled_ns=sum(stalls),
            notes=self.notes,
        )
        return _judged(report)

    def _header_bytes(self) -> int:
        sizes = [p.header_bytes for p in self.fwd if p.payload > 0]
        return sizes[0] if sizes else tcp_header(True)


class _Steady:
    """Time shares of the sender's states over the steady part of a transfer: from
    :data:`SKIP_FRACTION` of it to its last data packet (the start-up left out)."""

    def __init__(self, first_ns: int | None, last_ns: int | None, mss: int | None):
        self.mss = mss
        if first_ns is None or last_ns is None or last_ns <= first_ns:
            self.start = self.end = 0
        else:
            self.start = first_ns + round(SKIP_FRACTION * (last_ns - first_ns))
            self.end = last_ns
        self.t = self.start
        self.full_ns = self.closed_ns = self.idle_ns = 0

    def advance(self, t: int, flight: int, adv: int | None) -> None:
        """The state (``flight``, ``adv``) held from the last call until ``t``."""
        lo, hi = max(self.t, self.start), min(t, self.end)
        self.t = max(self.t, t)
        if hi <= lo:
            return
        span = hi - lo
        if flight == 0:
            self.idle_ns += span
        if adv is not None and self.mss:
            if flight >= adv - self.mss:
                self.full_ns += span
            if adv < self.mss:
                self.closed_ns += span

    def share(self, ns: int) -> float | None:
        return ns / (self.end - self.start) if self.end > self.start else None


def _share_at_rate(times: list[int], sizes: list[int], bps: float) -> float:
    """The share of consecutive packets (simultaneous ones included) spaced within
    :data:`MODE_BAND` of ``bps``: near 1 when the tap's own link sends at that rate
    back to back, about one half when pairs leave at once on each ACK."""
    hits = 0
    for i in range(1, len(times)):
        gap = times[i] - times[i - 1]
        if gap > 0 and abs(sizes[i] * 8e9 / gap / bps - 1) <= MODE_BAND:
            hits += 1
    return hits / (len(times) - 1)


def _halves(times: list[int], values: list[int], start: int, end: int | None):
    """The largest value in each half of [start, end] (None where a half is empty)."""
    if end is None or end <= start:
        return None, None
    mid = (start + end) / 2
    early = [v for t, v in zip(times, values, strict=True) if start <= t < mid]
    late = [v for t, v in zip(times, values, strict=True) if mid <= t <= end]
    return (max(early) if early else None), (max(late) if late else None)


def flow_steady_goodput(
    packets: list[PacketRecord], sender: str, skip: float = SKIP_FRACTION, path: str = ""
) -> tuple[float, int, int]:
    """Bytes acknowledged per second between ``skip`` of the transfer and its last ACK:
    (bit/s, the ACK it counts from, the last ACK), times in ns as in the capture."""
    addr, _, port = sender.rpartition(":")
    addr = addr.strip("[]")
    acks = [
        (p.t_ns, p.ack)
        for p in packets
        if p.dst == addr and p.dport == int(port) and p.flags & ACK and not p.flags & 0x05
    ]
    if len(acks) < 10:
        raise CpasimError(f"{path}: too few ACKs to measure a steady goodput")
    t0, t1 = acks[0][0], acks[-1][0]
    start = t0 + skip * (t1 - t0)
    first = next(a for a in acks if a[0] >= start)
    # Sequence numbers wrap at 2**32; count the advance modulo that.
    advanced = 0
    prev = first[1]
    for _, ack in acks[acks.index(first) + 1 :]:
        step = (ack - prev) % _SEQ_SPACE
        if step < _SEQ_SPACE // 2:
            advanced += step
            prev = ack
    if t1 == first[0]:
        raise CpasimError(
            f"{path}: the ACKs after the first {skip:.0%} of the transfer share one "
            "timestamp; expected a transfer that lasts (to measure a steady goodput)"
        )
    return advanced * 8e9 / (t1 - first[0]), first[0], t1


def _downsample(points: list[tuple[int, int]], n: int) -> list[tuple[int, int]]:
    """At most ``n`` points: the first, the last and every change in between, evenly picked."""
    changes = [pt for i, pt in enumerate(points) if i == 0 or pt[1] != points[i - 1][1]]
    if points and changes[-1] != points[-1]:
        changes.append(points[-1])
    if len(changes) <= n:
        return changes
    idx = np.linspace(0, len(changes) - 1, n).round().astype(int)
    return [changes[i] for i in idx]
