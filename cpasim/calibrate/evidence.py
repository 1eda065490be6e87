"""What a capture (and its iperf3 report) fixes directly, before anything is fitted.

A sender-side capture of a bulk transfer shows the path and both TCP stacks:
the bottleneck rate (dispersion of back-to-back packets), the base round trip
(the smallest data→ACK time), the MSS offered in the SYNs, whether timestamps
and SACK were negotiated, the receiver's ACK policy and the windows it
advertised.  iperf3's report adds what only the sending host knows: the
socket-buffer request (``-w``) and the congestion control.  Each figure
becomes a *proposal* ``(key, value, evidence)``; :func:`apply` sets the ones
the parameter registry knows and returns the others as "not modelled in this
version", so the same proposals work whether or not a feature (the bottleneck
section, Linux socket buffers, CUBIC/BBR) exists yet.  Where an older
parameter stands in for a missing one (``link.rate`` for
``bottleneck.rate``), the stand-in is proposed as a fallback that applies only
when the key it replaces is unknown.

Only what remains after this is fitted (:mod:`cpasim.calibrate.search`).
"""

from __future__ import annotations

from dataclasses import dataclass

from cpasim.calibrate.inspect import FlowReport
from cpasim.calibrate.iperf import IperfRun
from cpasim.calibrate.pcap import SYN, Capture
from cpasim.config import Config
from cpasim.config.resolve import targets as resolve_key
from cpasim.errors import CpasimError

#: Bytes per frame beyond the IP packet that a Linux qdisc (tbf) counts: the Ethernet header.
QDISC_L2_BYTES = 14
#: What cpasim's link carries beyond the IP packet (header, FCS, preamble, inter-frame gap).
LINK_L2_BYTES = 38
#: IPv4 + TCP headers without options: the MSS option is the MTU minus these.
IPV4_TCP_HEADERS = 40
IPV6_TCP_HEADERS = 60
#: Linux's default upper bound of send-buffer autotuning (net.ipv4.tcp_wmem[2]).
LINUX_WMEM_MAX = 4 * 1024 * 1024
#: Fewer ACKs than this many segments each on average mean the receiver ACKs every segment.
DELAYED_ACK_SEGMENTS = 1.5
#: A transfer that resent more than this fraction of its bytes lost packets beyond the
#: slow-start overshoot: losses shape its goodput.
LOSSY_FRACTION = 0.002


@dataclass(frozen=True)
class Proposal:
    """A parameter value a measurement fixes, and why."""

    key: str
    value: str  # as written in a scenario: "50.1Mbps", "true", "cubic"
    evidence: str
    fallback_for: str | None = None  # apply only if this (newer) key is not modelled


@dataclass(frozen=True)
class Applied:
    config: Config
    applied: list[Proposal]
    not_modelled: list[tuple[Proposal, str]]  # (proposal, why it was not applied)


def regime(report: FlowReport) -> str:
    """ "lossy", "window-limited" or "rate-limited": what held the transfer's goodput."""
    if report.retransmitted_bytes > LOSSY_FRACTION * max(1, report.data_bytes):
        return "lossy"
    if report.limited_by.startswith("bottleneck"):
        return "rate-limited"
    return "window-limited"


def remaining_key(regime_name: str, applied: Applied) -> str:
    """The parameter left to fit once the evidence is applied.

    A window-limited transfer's goodput is window / round trip: what the evidence
    cannot pin is the model's own share of the round trip, so the one-way delay is
    fitted.  Otherwise goodput follows the bottleneck, whose rate the evidence
    measured to a few per cent with an assumed per-packet overhead: its rate is
    fitted (``bottleneck.rate`` where it exists, else ``link.rate``).  A lossy
    transfer also depends on the congestion control; the rate then absorbs
    whatever the model misses, and the fit says so when it runs out of range.
    """
    if regime_name == "window-limited":
        return "link.delay"
    keys = {p.key for p in applied.applied}
    return "bottleneck.rate" if "bottleneck.rate" in keys else "link.rate"


def propose(capture: Capture, report: FlowReport, iperf: IperfRun | None) -> list[Proposal]:
    """Every parameter value ``report`` (and ``iperf``) determine, with its evidence."""
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
    rate = _bottleneck(report, mtu, out)
    _base_rtt(report, iperf, rate, mtu, out)
    _options(syn, syn_ack, out)
    _buffers(report, iperf, out)
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


def apply(cfg: Config, proposals: list[Proposal], *, where: str) -> Applied:
    """Set every proposal the registry knows (and accepts the value of); return the rest."""
    applied: list[Proposal] = []
    skipped: list[tuple[Proposal, str]] = []
    unknown: set[str] = set()
    for p in proposals:
        if p.fallback_for is not None and p.fallback_for not in unknown:
            continue  # the newer key was set: the stand-in is not needed
        try:
            resolve_key(p.key, where)
        except CpasimError:
            unknown.add(p.key)
            skipped.append((p, "no such parameter"))
            continue
        try:
            cfg = cfg.with_overrides({p.key: p.value}, where=f"{where}: {p.key}")
        except CpasimError as exc:
            unknown.add(p.key)
            skipped.append((p, str(exc).rsplit(": ", 1)[-1]))
            continue
        applied.append(p)
    return Applied(cfg, applied, skipped)


def _handshake(capture: Capture, report: FlowReport):
    """The sender's SYN and the receiver's SYN-ACK of the chosen flow (None if not captured)."""

    def split(endpoint: str) -> tuple[str, int]:
        addr, _, port = endpoint.rpartition(":")
        return addr.strip("[]"), int(port)

    a, b = split(report.sender), split(report.receiver)

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


def _bottleneck(report: FlowReport, mtu: int | None, out: list[Proposal]) -> float | None:
    b = report.bottleneck
    if b is None:
        return None
    counted = f"IP bytes + {QDISC_L2_BYTES} B per packet"
    out.append(
        Proposal(
            "bottleneck.rate",
            f"{b.bps:.6g}bps",
            f"{b.method}: {b.in_mode} of {b.samples} packet pairs within 5 % ({counted})",
        )
    )
    out.append(
        Proposal(
            "bottleneck.overhead",
            f"{QDISC_L2_BYTES}B",
            "assumed: what a Linux qdisc (tbf) counts beyond the IP packet; one capture of "
            "equal-sized packets cannot tell it (inspect --l2-overhead)",
        )
    )
    if mtu:
        link = b.bps * (mtu + LINK_L2_BYTES) / (mtu + QDISC_L2_BYTES)
        out.append(
            Proposal(
                "link.rate",
                f"{link:.6g}bps",
                f"stands in for the bottleneck: {b.bps / 1e6:.3f} Mb/s of {counted} is "
                f"{link / 1e6:.3f} Mb/s on a link carrying {LINK_L2_BYTES} B per frame",
                fallback_for="bottleneck.rate",
            )
        )
    return b.bps


def _base_rtt(report, iperf, rate, mtu, out: list[Proposal]) -> None:
    if report.rtt_ns is not None and report.side != "receiver":
        rtt, source = report.rtt_ns.min, "smallest data→ACK time in the capture"
    elif iperf is not None and iperf.min_rtt_ns:
        rtt, source = iperf.min_rtt_ns, "iperf3 report: min_rtt (tcp_info, 1 us resolution)"
    else:
        return
    serial = 0.0
    detail = ""
    if rate and mtu:
        # The smallest round trip still serialises one full frame at the bottleneck, and
        # the model's link (the bottleneck in this version) an ACK as well: both are in
        # the model already, so they are not propagation delay.
        data_frame = mtu + QDISC_L2_BYTES
        ack_frame = IPV4_TCP_HEADERS + 12 + QDISC_L2_BYTES  # with timestamps
        serial = (data_frame + ack_frame) * 8e9 / rate
        detail = f" minus {serial / 1e3:.1f} us serialising a frame and an ACK"
    one_way = max(0.0, (rtt - serial) / 2)
    out.append(
        Proposal(
            "link.delay",
            f"{one_way:.6g}ns",
            f"base round trip {rtt / 1e6:.3f} ms ({source}){detail}, halved per direction",
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


def _buffers(report: FlowReport, iperf: IperfRun | None, out: list[Proposal]) -> None:
    adv = int(report.adv_window.max) if report.adv_window is not None else None
    if iperf is not None and iperf.sock_bufsize:
        w = iperf.sock_bufsize
        why = f"iperf3 -w {w} (report: sock_bufsize {w}, sndbuf_actual {iperf.sndbuf_actual})"
        out.append(Proposal("tcp.sndbuf", f"{w}B", why))
        out.append(Proposal("tcp.rcvbuf", f"{w}B", why))
        out.append(
            Proposal(
                "tcp.wmem",
                f"{2 * w}B",
                f"stands in for tcp.sndbuf: Linux doubles the SO_SNDBUF request of {why}",
                fallback_for="tcp.sndbuf",
            )
        )
        if adv:
            out.append(
                Proposal(
                    "tcp.rmem",
                    f"{adv}B",
                    f"stands in for tcp.rcvbuf: the largest window the receiver advertised "
                    f"({adv / (2 * w):.1%} of the doubled request)",
                    fallback_for="tcp.rcvbuf",
                )
            )
        return
    if iperf is not None:
        why = "iperf3 report: sock_bufsize 0 (no -w): the kernel autotunes both buffers"
    elif report.adv_window_growth and len(report.adv_window_growth) > 2:
        first, last = report.adv_window_growth[0][1], report.adv_window_growth[-1][1]
        why = f"advertised window grew from {first:,} B to {last:,} B: receive autotuning"
    else:
        return
    out.append(Proposal("tcp.sndbuf", "0B", why))
    out.append(Proposal("tcp.rcvbuf", "0B", why))
    out.append(
        Proposal(
            "tcp.wmem",
            f"{LINUX_WMEM_MAX}B",
            f"stands in for tcp.sndbuf: {why}; Linux lets the send buffer grow to "
            f"tcp_wmem[2] = {LINUX_WMEM_MAX} B by default",
            fallback_for="tcp.sndbuf",
        )
    )
    if adv:
        out.append(
            Proposal(
                "tcp.rmem",
                f"{adv}B",
                "stands in for tcp.rcvbuf: the largest window the receiver advertised",
                fallback_for="tcp.rcvbuf",
            )
        )
