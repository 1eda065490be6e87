"""What a capture (and its iperf3 report) fixes directly, before anything is fitted.

A sender-side capture of a bulk transfer shows the path and both TCP stacks:
the bottleneck rate (dispersion of back-to-back packets), the base round trip
(the smallest data→ACK time), the MSS offered in the SYNs, whether timestamps
and SACK were negotiated, the receiver's ACK policy and the windows it
advertised.  iperf3's report adds what only the sending host knows: the
socket-buffer request (``-w``) and the congestion control.  Each figure
becomes a *proposal* ``(key, value, evidence)`` that :func:`apply` sets.

Some settings of the real path leave no trace in a capture; :data:`NOT_IN_A_CAPTURE`
names them so that the user sets them where they matter.  Only what remains
after this is fitted (:mod:`cpasim.calibrate.search`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from cpasim.calibrate.inspection import DEFAULT_L2_OVERHEAD, MODE_BAND, FlowReport, inspect_capture
from cpasim.calibrate.iperf import IperfRun, read_iperf
from cpasim.calibrate.limits import LOSSY
from cpasim.calibrate.pcap import SYN, Capture, head_bytes, is_capture, read_capture
from cpasim.config import Config
from cpasim.config.params import TcpParams
from cpasim.errors import CpasimError
from cpasim.model.sockbuf import largest_window
from cpasim.protocol import IPV6_HEADER, TCP_HEADER, tcp_header

#: IPv4 + TCP headers without options: the MSS option is the MTU minus these.
IPV4_TCP_HEADERS = tcp_header(False)
IPV6_TCP_HEADERS = IPV6_HEADER + TCP_HEADER
#: Fewer ACKs than this many segments each on average mean the receiver ACKs every segment.
DELAYED_ACK_SEGMENTS = 1.5
#: A transfer that resent more than this fraction of its bytes lost packets beyond the
#: slow-start overshoot: losses shape its goodput.
LOSSY_FRACTION = LOSSY
#: How far a fit may move a measured delay or rate from the capture's figure, at least:
#: the model's own host times differ from the real hosts' by that much.
FIT_ALLOWANCE = 0.02
#: Receive autotuning grows the advertised window many-fold; with a fixed SO_RCVBUF it
#: grows only while rcv_ssthresh climbs to the buffer's clamp (about 1.25x in the captures).
AUTOTUNE_GROWTH = 2
#: A data packet that leaves this long after the receiver's last ACK was held back by
#: the sender: unpaced Linux sends on the ACK, within tens of µs on the sending host.
PACED_LAG_NS = 150_000
#: Share of held-back data packets (the first PACING_WINDOW_NS of the transfer) above
#: which the sender paced: unpaced captures show at most 0.5 %, paced ones 3 % and more.
PACED_SHARE = 0.02
PACING_WINDOW_NS = 400_000_000
#: Settings of the real path that a capture cannot show: (key, why), printed for the user.
NOT_IN_A_CAPTURE: tuple[tuple[str, str], ...] = (
    (
        "bottleneck.burst",
        "a shaper's token bucket (tc tbf burst) only shows after idle spells, which a bulk "
        "transfer does not have; set it if the shaper's burst matters (tbf burst 4kb: 4096B)",
    ),
    (
        "bottleneck.queue",
        "the shaper's queue limit shows only through its drops; set it to the limit you "
        "configured (tbf limit) when the transfer loses packets",
    ),
)


@dataclass(frozen=True)
class Proposal:
    """A parameter value a measurement fixes, and why."""

    key: str
    value: str  # as written in a scenario: "50.1Mbps", "true", "cubic"
    evidence: str
    # A measured quantity's uncertainty: the relative change a fit may make to it
    # before it no longer describes what was measured (None: not a measured quantity).
    allowed: float | None = None


def regime(report: FlowReport) -> str:
    """ "lossy", "window-limited" or "rate-limited": what held the transfer's goodput
    (the capture's verdict; one that shows no limit is fitted as rate-limited)."""
    if report.retransmitted_bytes > LOSSY_FRACTION * max(1, report.data_bytes):
        return "lossy"
    if report.verdict is not None and report.verdict.kind == "window":
        return "window-limited"
    return "rate-limited"


def remaining_key(regime_name: str, cfg: Config) -> str:
    """The parameter left to fit once the evidence is applied to ``cfg``.

    A window-limited transfer's goodput is window / round trip: what the evidence
    cannot pin is the model's own share of the round trip, so the one-way delay is
    fitted.  Otherwise goodput follows the bottleneck, whose rate the evidence
    measured to a few per cent with an assumed per-packet overhead: its rate is
    fitted (the link's when the capture showed no bottleneck and the scenario has
    none).  A lossy transfer also depends on the congestion control and the
    shaper's queue; the rate then absorbs whatever the model misses, and the fit
    says so when it runs out of range.
    """
    if regime_name == "window-limited":
        return "link.delay"
    return "bottleneck.rate" if cfg.value("bottleneck.rate") > 0 else "link.rate"


def propose(
    capture: Capture, report: FlowReport, iperf: IperfRun | None, tcp: TcpParams | None = None
) -> list[Proposal]:
    """Every parameter value ``report`` (and ``iperf``) determine, with its evidence.

    ``tcp``, the receiver's TCP settings, lets a capture without iperf3's report tell
    the buffer request from the window it advertised (Linux's rules depend on them)."""
    if report.flow.proto != "tcp":
        raise CpasimError(f"{capture.path}: the chosen flow is not TCP; expected a TCP transfer")
    if report.data_packets == 0:
        raise CpasimError(f"{capture.path}: the TCP flow carries no data; expected a transfer")
    if report.segments_per_ack is None:
        raise CpasimError(
            f"{capture.path}: no ACKs from the receiver in the capture; "
            "expected both directions of the TCP transfer"
        )
    if iperf is not None:
        ends = (iperf.remote, iperf.local) if iperf.reverse else (iperf.local, iperf.remote)
        if ends != (report.sender, report.receiver):
            raise CpasimError(
                f"{iperf.path}: iperf3 report is of the transfer {ends[0]} -> {ends[1]}; "
                f"expected the capture's, {report.sender} -> {report.receiver}"
            )
    out: list[Proposal] = []
    syn, syn_ack = _handshake(capture, report)
    mtu = _mtu(syn, syn_ack, report, out)
    rate = _bottleneck(report, out)
    _base_rtt(report, iperf, rate, mtu, out)
    _options(syn, syn_ack, out)
    _buffers(report, iperf, tcp, out)
    if (paced := pacing(capture, report)) is not None:
        out.append(paced)
    if iperf is not None:
        out.append(
            Proposal(
                "tcp.cc",
                iperf.congestion,
                f"iperf3 report: sender_tcp_congestion = {iperf.congestion}",
            )
        )
    spa = report.segments_per_ack
    out.append(
        Proposal(
            "tcp.delayed_ack",
            "true" if spa >= DELAYED_ACK_SEGMENTS else "false",
            f"{spa:.2f} segments per ACK",
        )
    )
    return out


def not_shown(iperf: IperfRun | None) -> list[tuple[str, str]]:
    """The settings neither the capture nor ``iperf`` show: (key, why) for the user."""
    out = list(NOT_IN_A_CAPTURE)
    if iperf is None:
        out.append(
            (
                "tcp.cc",
                "only the sending host knows its congestion control: give its iperf3 --json "
                "report, or set it",
            )
        )
    return out


def read_iperf_evidence(run: IperfRun) -> IperfRun:
    """``run`` if it holds what :func:`propose` reads; else one line naming what is missing."""
    missing = []
    if run.congestion is None:
        missing.append("end.sender_tcp_congestion")
    if run.sock_bufsize is None:
        missing.append("start.sock_bufsize")
    if run.received is None:
        missing.append("end.sum_received")
    if run.protocol != "TCP":
        missing.append("a TCP test (test_start.protocol)")
    if missing:
        raise CpasimError(
            f"{run.path}: iperf3 report lacks {', '.join(missing)}; expected the --json "
            "report of the sending client (iperf3 -c ... --json)"
        )
    return run


def apply(cfg: Config, proposals: list[Proposal], *, where: str) -> Config:
    """``cfg`` with every proposal set.  A value the registry refuses (a measured rate
    out of range, say) is an error naming the key and its evidence: a calibration that
    silently kept the scenario's value would fit the wrong thing."""
    # All at once: the checks across keys (a fixed tcp.wmem beside a tcp.sndbuf
    # request) see the scenario as the capture leaves it, not half-way there.
    try:
        return cfg.with_overrides({p.key: p.value for p in proposals}, where=where)
    except CpasimError as exc:
        named = [p for p in proposals if p.key in str(exc)]
        if not named:
            raise
        measured = "; ".join(p.evidence for p in named)
        raise CpasimError(f"{exc} (measured: {measured})") from None


def pacing(capture: Capture, report: FlowReport) -> Proposal | None:
    """Paced or ACK-clocked: how many data packets the sender held back after an ACK.

    Only a capture on the sending host shows it (elsewhere the path's queues move the
    packets); the ACKs must be in it too."""
    sender, receiver = _endpoints(report)
    start = None
    last_ack = None
    late = sent = 0
    for p in capture.packets:
        if start is None:
            start = p.t_ns
        if p.t_ns - start > PACING_WINDOW_NS:
            break
        if (p.src, p.sport) == receiver:
            last_ack = p.t_ns
        elif (p.src, p.sport) == sender and p.payload and last_ack is not None:
            sent += 1
            late += p.t_ns - last_ack > PACED_LAG_NS
    if not sent:
        return None
    share = late / sent
    paced = share > PACED_SHARE
    return Proposal(
        "tcp.pacing",
        "on" if paced else "auto",
        f"{share:.1%} of the first {sent} data packets left more than "
        f"{PACED_LAG_NS / 1e3:.0f} us after the last ACK"
        + (" (paced)" if paced else " (sent on the ACKs)"),
    )


def _endpoints(report: FlowReport) -> tuple[tuple[str, int], tuple[str, int]]:
    """(address, port) of the flow's sender and receiver."""

    def split(endpoint: str) -> tuple[str, int]:
        addr, _, port = endpoint.rpartition(":")
        return addr.strip("[]"), int(port)

    return split(report.sender), split(report.receiver)


def _handshake(capture: Capture, report: FlowReport):
    """The sender's SYN and the receiver's SYN-ACK of the chosen flow (None if not captured)."""
    a, b = _endpoints(report)

    def first_syn(src, dst):
        return next(
            (
                p
                for p in capture.packets
                if p.flags & SYN and (p.src, p.sport) == src and (p.dst, p.dport) == dst
            ),
            None,
        )

    return first_syn(a, b), first_syn(b, a)


def _mtu(syn, syn_ack, report: FlowReport, out: list[Proposal]) -> int | None:
    offered = [s.mss_option for s in (syn, syn_ack) if s is not None and s.mss_option]
    if not offered:
        return None
    headers = IPV6_TCP_HEADERS if ":" in report.sender.rpartition(":")[0] else IPV4_TCP_HEADERS
    mtu = min(offered) + headers
    out.append(
        Proposal(
            "link.mtu",
            f"{mtu}B",
            f"MSS option {min(offered)} in the SYNs + {headers} B of IP and TCP headers; "
            f"data segments carry {report.mss} B",
        )
    )
    return mtu


def _bottleneck(report: FlowReport, out: list[Proposal]) -> float | None:
    b = report.bottleneck
    if b is None:
        return None
    counted = f"IP bytes + {DEFAULT_L2_OVERHEAD} B per packet"
    out.append(
        Proposal(
            "bottleneck.rate",
            f"{b.bps:.6g}bps",
            f"{b.method}: {b.in_mode} of {b.samples} packet pairs within 5 % ({counted})",
            allowed=MODE_BAND,
        )
    )
    out.append(
        Proposal(
            "bottleneck.overhead",
            f"{DEFAULT_L2_OVERHEAD}B",
            "assumed: what a Linux qdisc (tbf) counts beyond the IP packet; one capture of "
            "equal-sized packets cannot tell it (inspect --l2-overhead)",
        )
    )
    return b.bps


def _base_rtt(report, iperf, rate, mtu, out: list[Proposal]) -> None:
    spread = 0.0  # how far the fastest round trips spread above the base
    if report.rtt_ns is not None:
        rtt = report.rtt_ns.min
        spread = report.rtt_ns.p10 - rtt
        source = (
            "smallest timestamp echo time in the capture"
            if report.rtt_method.startswith("timestamp")
            else "smallest data→ACK time in the capture"
        )
    elif iperf is not None and iperf.min_rtt_ns:
        rtt, source = iperf.min_rtt_ns, "iperf3 report: min_rtt (tcp_info, 1 us resolution)"
    else:
        return
    serial = 0.0
    detail = ""
    if rate and mtu:
        # The smallest round trip still serialises one full frame at the bottleneck
        # (the ACKs return unshaped): the model's bottleneck does that already, so it
        # is not propagation delay.
        serial = (mtu + DEFAULT_L2_OVERHEAD) * 8e9 / rate
        detail = f" minus {serial / 1e3:.1f} us serialising a frame at the bottleneck"
    one_way = max(0.0, (rtt - serial) / 2)
    allowed = max(FIT_ALLOWANCE, spread / 2 / one_way) if one_way else None
    out.append(
        Proposal(
            "link.delay",
            f"{one_way:.6g}ns",
            f"base round trip {rtt / 1e6:.3f} ms ({source}){detail}, halved per direction",
            allowed=allowed,
        )
    )


def _options(syn, syn_ack, out: list[Proposal]) -> None:
    if syn is None or syn_ack is None:
        return
    both_ts = syn.tsval is not None and syn_ack.tsval is not None
    out.append(
        Proposal(
            "tcp.timestamps",
            "true" if both_ts else "false",
            f"timestamp option in the SYN: {syn.tsval is not None}, "
            f"in the SYN-ACK: {syn_ack.tsval is not None}",
        )
    )
    both_sack = syn.sack_permitted and syn_ack.sack_permitted
    out.append(
        Proposal(
            "tcp.sack",
            "true" if both_sack else "false",
            f"SACK-permitted in the SYN: {syn.sack_permitted}, "
            f"in the SYN-ACK: {syn_ack.sack_permitted}",
        )
    )


def _buffers(
    report: FlowReport, iperf: IperfRun | None, tcp: TcpParams | None, out: list[Proposal]
) -> None:
    growth = report.adv_window_growth
    autotuned = bool(growth) and growth[-1][1] > AUTOTUNE_GROWTH * growth[0][1]
    if iperf is not None and iperf.sock_bufsize:
        w = iperf.sock_bufsize
        why = f"iperf3 -w {w} (report: sock_bufsize {w}, sndbuf_actual {iperf.sndbuf_actual})"
        if report.adv_window is not None:
            why += f"; the receiver advertised up to {int(report.adv_window.max):,} B"
    elif iperf is not None:
        w, why = 0, "iperf3 report: sock_bufsize 0 (no -w): the kernel autotunes both buffers"
    elif autotuned:
        first, last = growth[0][1], growth[-1][1]
        w, why = 0, f"advertised window grew from {first:,} B to {last:,} B: receive autotuning"
    elif report.adv_window is not None and tcp is not None:
        adv = int(report.adv_window.max)
        w = request_for_window(adv, tcp, report.mss)
        if w is None:
            return
        why = (
            f"the advertised window grew only to {adv:,} B: a fixed SO_RCVBUF, and "
            f"a request of {w} B gives this window under Linux's rules (tcp.rx_truesize "
            f"{tcp.rx_truesize} B); the same request assumed for SO_SNDBUF (iperf3 -w sets both)"
        )
    else:
        return
    out.append(Proposal("tcp.sndbuf", f"{w}B", why))
    out.append(Proposal("tcp.rcvbuf", f"{w}B", why))
    # The request means what it means to Linux only with cpasim's fixed buffers off.
    linux = "Linux's socket-buffer rules for the request, not a fixed buffer"
    out.append(Proposal("tcp.wmem", "0B", linux))
    out.append(Proposal("tcp.rmem", "0B", linux))


def request_for_window(adv: int, tcp: TcpParams, mss: int) -> int | None:
    """The SO_RCVBUF request whose largest window (:func:`largest_window`) is closest to
    ``adv``, in whole KiB as users ask (``-w 32K``); of two equally close, the smaller.
    None if no request up to ``net.core.rmem_max`` reaches ``adv``."""

    def window(request: int) -> int:
        return largest_window(request, tcp.core_rmem_max, tcp.rx_truesize, mss)

    if window(tcp.core_rmem_max) < adv:
        return None
    lo, hi = 1, tcp.core_rmem_max  # the smallest request whose window reaches adv
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (mid + 1, hi) if window(mid) < adv else (lo, mid)
    kib = [max(1, lo // 1024) * 1024, -(-lo // 1024) * 1024]
    return min(kib, key=lambda r: (abs(window(r) - adv), r))


def run_length(report: FlowReport, cfg: Config) -> list[Proposal]:
    """The run that measures what the capture measured: its steady goodput counts the
    ACKs over a span of the transfer (from :data:`~cpasim.calibrate.inspection.SKIP_FRACTION`
    of it to its end), so the run warms up until that span starts and ends with it,
    time counted from the first data packet as the model counts it from the
    established connection.  A scenario's own length would compare another part of
    the transfer (mostly slow start, when it is short) with the capture's."""
    if report.steady_goodput_bps is None:
        lead = "no steady goodput: "
        why = [n.removeprefix(lead) for n in report.notes if n.startswith(lead)]
        raise CpasimError(why[0] if why else f"{report.capture}: no steady goodput to fit")
    start, end = report.steady_from_ns, report.steady_until_ns
    why = (
        f"the capture's steady goodput counts the ACKs from {start / 1e9:.3f} s to "
        f"{end / 1e9:.3f} s after its first data packet: the run simulates that span"
    )
    out = [
        Proposal("sim.warmup", f"{start:.6g}ns", why),
        Proposal("sim.duration", f"{end:.6g}ns", why),
    ]
    if cfg.value("workload.bytes"):
        out.append(Proposal("workload.bytes", "0B", why + " (a time, not a size)"))
    return out


def beyond_evidence(result, proposals: list[Proposal]) -> list[str]:
    """A line for each fitted value that a measurement set and the fit moved further
    than the measurement allows (:attr:`Proposal.allowed`)."""
    from cpasim.calibrate.fit import show_parameter

    by_key = {p.key: p for p in proposals}
    out = []
    for key, (start, value) in result.fitted.items():
        p = by_key.get(key)
        if p is None or p.allowed is None or not start:
            continue
        moved = value / start - 1
        if abs(moved) > p.allowed:
            out.append(
                f"fitted {key} = {show_parameter(key, value)} is {moved:+.1%} from the "
                f"{show_parameter(key, start)} the capture shows, beyond the {p.allowed:.1%} "
                f"its evidence allows ({p.evidence}): the model misses something the "
                "capture measured, and the fit hides it"
            )
    return out


def fit_from_evidence(
    cfg: Config,
    measurements: list[str | Path],
    *,
    max_simulations: int = 24,
    say: Callable[[str], None] | None = None,
    side: str | None = None,
):
    """``calibrate fit`` without ``--params``: set what one capture (and its iperf3
    report, if given) determines, keep what it cannot show, run as long as the capture
    measured (:func:`run_length`), then fit the one parameter that remains to the
    capture's steady goodput.  Returns the :class:`~cpasim.calibrate.fit.FitResult`
    (whose notes say when the fit moved a measured value beyond its evidence) and the
    lines saying what was set and why (each also passed to ``say`` as it is decided).
    ``side`` ("tx" or "rx") says where the capture was taken, if it cannot tell."""
    from cpasim.calibrate.fit import Target, fit_one, show_parameter
    from cpasim.simulate import simulate

    say = say or (lambda line: None)
    captures, reports = [], []
    for m in measurements:
        path = Path(m)
        if "@" in str(m) and not path.exists():
            raise CpasimError(f"{m}: conditions (FILE@KEY=VALUE) need --params")
        head = head_bytes(path)
        if not is_capture(head) and head.lstrip()[:1] != b"{":
            raise CpasimError(
                f"{path}: expected a capture or an iperf3 --json report; "
                "microbenchmark tables carry no figure a stream simulation produces"
            )
        (captures if is_capture(head) else reports).append(path)
    if len(captures) != 1 or len(reports) > 1:
        raise CpasimError(
            "calibrate fit: without --params expected one capture and at most one iperf3 "
            f"report, got {len(captures)} capture(s) and {len(reports)} other file(s)"
        )
    cap = read_capture(captures[0])
    report = inspect_capture(cap, side=side)
    iperf = read_iperf_evidence(read_iperf(reports[0])) if reports else None
    proposals = propose(cap, report, iperf, cfg.rx.tcp) + run_length(report, cfg)
    fixed = apply(cfg, proposals, where=str(captures[0]))
    header = []
    if cap.cut_short is not None:
        line = f"note: {cap.path}: {cap.cut_short}"
        say(line)
        header.append(line)
    for p in proposals:
        line = f"set {p.key} = {p.value}  ({p.evidence})"
        say(line)
        header.append(line)
    for key, why in not_shown(iperf):
        value = fixed.value(key)
        shown = value if isinstance(value, str) else show_parameter(key, value)
        line = f"not in the capture: {key} = {shown} kept ({why})"
        say(line)
        header.append(line)
    kind = regime(report)
    key = remaining_key(kind, fixed)
    say(
        f"regime: {kind} (limited by {report.limited_by}, {report.retransmitted_segments} "
        f"retransmitted segments); fitting {key} to the goodput after the first quarter "
        "of the capture"
    )
    header.append(f"regime: {kind}; fitted what remains: {key}")
    target = Target("goodput_bps", report.steady_goodput_bps, str(captures[0]))
    result = fit_one(
        fixed, target, key, lambda c: simulate(c).to_json(), max_simulations=max_simulations
    )
    if beyond := beyond_evidence(result, proposals):
        result = replace(result, notes=[*result.notes, *beyond])
    return result, header
