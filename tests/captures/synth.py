"""Synthetic TCP transfers with known rate, RTT and ACK policy, written as real capture files.

The path is one bottleneck of ``rate_bps`` between two propagation delays of
``rtt_ns / 2``; the sender keeps ``window`` segments in flight, the receiver
acknowledges every second segment ``ack_turnaround_ns`` after it arrives.
``side`` chooses where the capture is taken; the handshake is timed as that tap
sees it (each host answers at once).  With ``timestamps``, every segment carries
the TSval of its sender's millisecond clock and echoes the last TSval its sender
received (the first segment of each ACKed pair, as RFC 7323 asks).  Times are
exact integers (ns).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, replace

import dpkt

A, B = ("10.0.0.1", 40000), ("10.0.0.2", 5201)
MSS_OPTION = 1460
WSCALE = 7
PAYLOAD = 1448  # MSS_OPTION minus the 12-byte timestamp option
HEADER = 20 + 32  # IPv4 + TCP with timestamps
L2 = 14
T0 = 1_000 * 10**9  # capture starts 1000 s after the epoch: exact in a float too


@dataclass(frozen=True)
class Seg:
    t_ns: int
    forward: bool  # sender → receiver
    seq: int
    ack: int
    flags: int
    payload: int
    window: int  # raw field
    syn_options: bool = False
    tsval: int = 2  # the timestamp option's values (constant unless asked for)
    tsecr: int = 1


def wire_ns(rate_bps: float, payload: int = PAYLOAD) -> int:
    return round((payload + HEADER + L2) * 8e9 / rate_bps)


def bulk_flow(
    *,
    side: str,
    rate_bps: float = 10e6,
    rtt_ns: int = 2_000_000,
    segments: int = 200,
    window: int = 10,
    ack_turnaround_ns: int = 5_000,
    resend: int | None = None,
    adv_field: int = 114,
    timestamps: bool = False,
) -> list[Seg]:
    """One bulk transfer seen at ``side`` ("sender" or "receiver"), in time order."""
    isn_a, isn_b = 1_000, 50_000
    half = rtt_ns // 2
    ser = wire_ns(rate_bps)
    send = [0] * segments
    arrive = [0] * segments
    ack_at_receiver: dict[int, int] = {}  # segment index acked → time the ACK leaves
    link_free = 0
    for i in range(segments):
        if i >= window:
            # Window opens when the ACK covering segment i - window reaches the sender.
            covering = min(k for k in ack_at_receiver if k >= i - window)
            send[i] = max(send[i - 1], ack_at_receiver[covering] + half + 2_000)
        else:
            send[i] = 0
        link_free = max(send[i], link_free) + ser
        arrive[i] = link_free + half
        if i % 2 == 1 or i == segments - 1:
            ack_at_receiver[i] = arrive[i] + ack_turnaround_ns
    out: list[Seg] = []
    start = T0

    def clock(t: int) -> int:  # both hosts' millisecond timestamp clock, from the SYN
        return (t + 3 * rtt_ns) // 1_000_000 + 1 if timestamps else 2

    def seen(t_sender: int, t_receiver: int) -> int:
        """When the tap sees a segment that passes the sender at one time, the receiver
        at the other."""
        return start + (t_sender if side == "sender" else t_receiver)

    # The handshake: the sender's SYN, the receiver's answer at once, the sender's ACK.
    t_syn = -3 * rtt_ns
    t_syn_ack = t_syn + half  # leaves the receiver
    t_ack = t_syn_ack + half + 1_000  # leaves the sender
    syn_ts, syn_ack_ts = clock(t_syn), clock(t_syn_ack)
    out.append(
        Seg(seen(t_syn, t_syn + half), True, isn_a, 0, dpkt.tcp.TH_SYN, 0, 64240, True, syn_ts, 0)
    )
    out.append(
        Seg(
            seen(t_syn_ack + half, t_syn_ack),
            False,
            isn_b,
            isn_a + 1,
            dpkt.tcp.TH_SYN | dpkt.tcp.TH_ACK,
            0,
            65160,
            True,
            syn_ack_ts,
            syn_ts,
        )
    )
    out.append(
        Seg(
            seen(t_ack, t_ack + half),
            True,
            isn_a + 1,
            isn_b + 1,
            dpkt.tcp.TH_ACK,
            0,
            502,
            False,
            clock(t_ack),
            syn_ack_ts,
        )
    )
    # Each ACK echoes the first segment of the pair it acknowledges; each data segment
    # echoes the last ACK to reach the sender before it left.
    acks = sorted((t_leave + half, i) for i, t_leave in ack_at_receiver.items())
    echo_of_ack = {i: clock(send[i - 1 if i % 2 else i]) for i in ack_at_receiver}
    k, echo = 0, syn_ack_ts
    for i in range(segments):
        while k < len(acks) and acks[k][0] <= send[i]:
            echo = clock(ack_at_receiver[acks[k][1]])
            k += 1
        t = seen(send[i], arrive[i])
        seq = isn_a + 1 + i * PAYLOAD
        data = Seg(
            t, True, seq, isn_b + 1, dpkt.tcp.TH_ACK, PAYLOAD, 502, False, clock(send[i]), echo
        )
        out.append(data)
        if resend == i:
            out.append(replace(data, t_ns=t + ser // 2 if side == "receiver" else t + 1))
    for i, t_leave in ack_at_receiver.items():
        ack = isn_a + 1 + (i + 1) * PAYLOAD
        out.append(
            Seg(
                seen(t_leave + half, t_leave),
                False,
                isn_b + 1,
                ack,
                dpkt.tcp.TH_ACK,
                0,
                adv_field,
                False,
                clock(t_leave),
                echo_of_ack[i],
            )
        )
    return sorted(out, key=lambda s: s.t_ns)


def ip_packet(seg: Seg) -> dpkt.ip.IP:
    src, dst = (A, B) if seg.forward else (B, A)
    if seg.syn_options:
        opts = (
            struct.pack(">BBH", 2, 4, MSS_OPTION)
            + b"\x01\x03\x03"
            + bytes([WSCALE])
            + b"\x01\x01\x08\x0a"
            + struct.pack(">II", seg.tsval, seg.tsecr)
        )
    else:
        opts = b"\x01\x01\x08\x0a" + struct.pack(">II", seg.tsval, seg.tsecr)
    tcp = dpkt.tcp.TCP(
        sport=src[1],
        dport=dst[1],
        seq=seg.seq,
        ack=seg.ack,
        flags=seg.flags,
        win=seg.window,
        opts=opts,
        data=b"\x00" * seg.payload,
    )
    tcp.off = (20 + len(opts)) // 4
    ip = dpkt.ip.IP(src=_aton(src[0]), dst=_aton(dst[0]), p=dpkt.ip.IP_PROTO_TCP, data=tcp, ttl=64)
    ip.len = len(bytes(ip))
    return ip


def _aton(addr: str) -> bytes:
    return bytes(int(x) for x in addr.split("."))


def frame(seg: Seg, linktype: int, side: str) -> bytes:
    ip = ip_packet(seg)
    if linktype == 1:
        return bytes(dpkt.ethernet.Ethernet(src=b"\x02" * 6, dst=b"\x04" * 6, type=0x0800, data=ip))
    outgoing = seg.forward == (side == "sender")
    if linktype == 113:
        return bytes(dpkt.sll.SLL(type=4 if outgoing else 0, ethtype=0x0800, data=ip))
    if linktype == 276:
        return bytes(dpkt.sll2.SLL2(type=4 if outgoing else 0, ethtype=0x0800, data=ip))
    if linktype == 101:
        return bytes(ip)
    raise ValueError(linktype)


def write_pcap(path, segs, *, side, linktype: int = 1, nano: bool = True, snaplen=128):
    with open(path, "wb") as f:
        w = dpkt.pcap.Writer(f, snaplen=snaplen, linktype=linktype, nano=nano)
        for s in segs:
            w.writepkt(frame(s, linktype, side)[:snaplen], ts=s.t_ns / 1e9)


def write_pcapng(path, segs, *, side, linktype: int = 1, snaplen=128):
    with open(path, "wb") as f:
        w = dpkt.pcapng.Writer(f, snaplen=snaplen, linktype=linktype)
        for s in segs:
            w.writepkt(frame(s, linktype, side)[:snaplen], ts=s.t_ns / 1e9)


def write_udp_only(path) -> None:
    """A capture holding one UDP datagram and no TCP at all."""
    with open(path, "wb") as f:
        w = dpkt.pcap.Writer(f, linktype=1)
        udp = dpkt.udp.UDP(sport=1, dport=2, data=b"x" * 10)
        udp.ulen = len(bytes(udp))
        ip = dpkt.ip.IP(src=b"\x01\x02\x03\x04", dst=b"\x05\x06\x07\x08", p=17, data=udp)
        ip.len = len(bytes(ip))
        w.writepkt(bytes(dpkt.ethernet.Ethernet(data=ip)), ts=1.0)
