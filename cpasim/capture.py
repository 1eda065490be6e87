"""The simulated traffic as a packet capture (``cpasim run --pcap FILE``).

What a tap beside one host's NIC would record (``side`` ``tx``, the default, or
``rx``): every frame that host's MAC puts on the wire and every frame the link
(or the bottleneck) delivers to it, both directions, in one classic pcap file
with nanosecond timestamps (magic ``0xa1b23c4d``, link type Ethernet).  A frame
is stamped when its last bit passes the tap: an outgoing frame as its
serialization ends (before the link may lose it), an incoming one as it is
offered to the NIC.  TSO super-segments are already cut into MTU frames by the
NIC (:meth:`~cpasim.model.packet.Packet.split_tso`), so one record is one frame.

The headers are built from the model's packets; the payload is zeros, cut at
the snap length like ``tcpdump -s``:

- Ethernet: fixed addresses (``02:00:00:00:00:01`` for ``tx``, ``…:02`` for ``rx``),
  frames padded to Ethernet's 60-byte minimum (no FCS, as a NIC hands them up).
- IPv4: ``10.0.0.1`` (``tx``) and ``10.0.0.2`` (``rx``), header checksum valid.
  TCP segments carry DF and an id that counts up per connection and direction
  (as Linux's per-socket ids, TSO segments included); UDP fragments share the
  datagram's id, with the offsets and MF flag the model's IP layer gave them.
- TCP: ports ``40000 + i`` (``tx``) and 5201 (``rx``) for connection ``c<i>``;
  sequence numbers count from an ISN of 0, so the first payload byte is 1;
  the window field is the advertised window shifted by the scale the
  announcing host's receive buffer chose (:mod:`cpasim.model.sockbuf`, as
  ``tcp_select_initial_window``); with ``tcp.timestamps`` every segment carries
  the option (TSval in milliseconds of the segment's creation, TSecr the last
  TSval the host received on the connection); SACK blocks ride on the ACKs that
  have them.  The checksum is valid for the zero payload.
- The handshake is not modelled, so each TCP connection opens with a synthetic
  SYN (from ``tx``, whichever side the workload makes the client), SYN-ACK and
  ACK at time 0 carrying the MSS (MTU - 40), SACK-permitted, timestamps and
  window-scale options each host would offer: readers need them to scale
  windows and tell the MSS.
- UDP: the same ports; the length and checksum of the whole datagram.

Frames are written as they happen (buffered), to a temporary file renamed to
FILE when the run ends; the capture never changes the run (no event, no random
draw), and without ``--pcap`` none of this exists.
"""

from __future__ import annotations

import contextlib
import struct
from dataclasses import dataclass, field
from pathlib import Path

from cpasim.errors import CpasimError
from cpasim.files import OutputFile, write_error
from cpasim.model.packet import ACK
from cpasim.model.sockbuf import U16_MAX
from cpasim.protocol import FCS, IP_HEADER, MAC_HEADER, MIN_FRAME, TCP_HEADER, UDP_HEADER, mss_for

#: Classic pcap with nanosecond timestamps, version 2.4, link type Ethernet.
PCAP_MAGIC_NS = 0xA1B23C4D
LINKTYPE_ETHERNET = 1
#: Bytes kept per frame: Ethernet, IPv4 and TCP headers with 40 bytes of options fit.
DEFAULT_SNAPLEN = 96
MIN_SNAPLEN, MAX_SNAPLEN = MAC_HEADER, 262144
SIDES = ("tx", "rx")

MAC = {"tx": b"\x02\x00\x00\x00\x00\x01", "rx": b"\x02\x00\x00\x00\x00\x02"}
ADDR = {"tx": bytes((10, 0, 0, 1)), "rx": bytes((10, 0, 0, 2))}
PEER = {"tx": "rx", "rx": "tx"}
SERVER_PORT = 5201
CLIENT_PORT_BASE = 40000
ETH_MIN = MIN_FRAME - FCS  # a captured frame has no FCS
ETHERTYPE_IPV4 = b"\x08\x00"
TTL = 64
PROTO = {"tcp": 6, "udp": 17, "icmp": 1}
IP_DF, IP_MF = 0x4000, 0x2000
SYN = 0x02
# TCP option kinds (RFC 9293, 7323, 2018).
OPT_NOP, OPT_MSS, OPT_WSCALE, OPT_SACK_PERM, OPT_SACK, OPT_TS = 1, 2, 3, 4, 5, 8
SEQ_MASK = 0xFFFFFFFF

_FILE_HEADER = struct.Struct("<IHHiIII")
_RECORD = struct.Struct("<IIII")
_IP = struct.Struct("!BBHHHBBH4s4s")
_TCP = struct.Struct("!HHIIBBHHH")
_UDP = struct.Struct("!HHHH")
_ICMP = struct.Struct("!BBHHH")
_TS = struct.Struct("!BBBBII")  # NOP NOP kind len TSval TSecr


@dataclass(frozen=True)
class PcapSpec:
    """What ``--pcap``, ``--pcap-side`` and ``--snaplen`` ask for."""

    path: Path
    side: str = "tx"
    snaplen: int = DEFAULT_SNAPLEN

    def __post_init__(self) -> None:
        if self.side not in SIDES:
            raise CpasimError(f"--pcap-side {self.side}: expected one of {', '.join(SIDES)}")
        if not MIN_SNAPLEN <= self.snaplen <= MAX_SNAPLEN:
            raise CpasimError(
                f"--snaplen {self.snaplen}: expected {MIN_SNAPLEN} to {MAX_SNAPLEN} bytes"
            )


def _fold(total: int) -> int:
    """The ones'-complement checksum of a sum of 16-bit words."""
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def _word_sum(data: bytes) -> int:
    if len(data) & 1:
        data += b"\0"
    return sum(struct.unpack(f"!{len(data) // 2}H", data))


@dataclass
class _Conn:
    """One connection as the capture numbers it."""

    ports: dict[str, tuple[int, int]]  # host -> (its port, the peer's port)
    wscale: dict[str, int]  # host -> the shift of the windows it announces
    ip_id: dict[str, int]  # host -> next IP id of its TCP segments
    ts_recent: dict[str, int]  # host -> last TSval it received
    tcp: dict = field(default_factory=dict)  # host -> its TcpConnection (none: not TCP)


class PcapTap:
    """Records the frames at one host's NIC into a pcap file (module docstring)."""

    def __init__(self, system, spec: PcapSpec) -> None:
        self.env = system.env
        self.spec = spec
        self.side = spec.side
        cfg = system.cfg
        self.mtu = cfg.link.mtu
        self.conns: dict[str, _Conn] = {}
        for i in range(cfg.flow_count or cfg.workload.connections):
            self.conns[f"c{i}"] = _Conn(
                ports={
                    "tx": (CLIENT_PORT_BASE + i, SERVER_PORT),
                    "rx": (SERVER_PORT, CLIENT_PORT_BASE + i),
                },
                wscale={},
                ip_id={"tx": 0, "rx": 0},
                ts_recent={"tx": 0, "rx": 0},
            )
        for host in SIDES:
            for conn in system.hosts[host].tcp:
                self.conns[conn.conn].wscale[host] = _announced_wscale(conn.bufs)
                self.conns[conn.conn].tcp[host] = conn
        self._open()
        try:
            self._handshakes()
        except BaseException:
            self.discard()
            raise
        side, peer = self.side, PEER[self.side]
        # TSecr needs what each host last received, so both receivers report;
        # only the tapped host's frames are written.  Through a forwarding host
        # each end host's port is on its own link, and a frame keeps its addresses.
        system.port(side).tap(self._sent, self._arrived)
        system.port(peer).tap(None, self._peer_arrived)

    # -- the file --------------------------------------------------------------------------
    def _open(self) -> None:
        # Written beside the target under a fresh name, renamed into place by close().
        self.out = OutputFile(self.spec.path, "capture file")
        self.file = self.out.open("wb", buffering=1 << 20)
        self.file.write(
            _FILE_HEADER.pack(PCAP_MAGIC_NS, 2, 4, 0, 0, self.spec.snaplen, LINKTYPE_ETHERNET)
        )

    def close(self) -> None:
        """Finish the file and rename it into place."""
        try:
            self.file.close()
        except OSError as exc:
            self.out.discard()
            raise write_error(self.spec.path, exc, "capture file") from None
        self.out.commit()

    def discard(self) -> None:
        """Drop the partial file (the run failed)."""
        with contextlib.suppress(OSError):  # thrown away: a failed flush does not matter
            self.file.close()
        self.out.discard()

    def _write(self, t_ns: float, frame: bytes, orig_len: int) -> None:
        ns = round(t_ns)
        data = frame[: self.spec.snaplen]
        try:
            self.file.write(
                _RECORD.pack(ns // 1_000_000_000, ns % 1_000_000_000, len(data), orig_len)
            )
            self.file.write(data)
        except OSError as exc:  # a full disk, met when the buffer goes out
            raise write_error(self.spec.path, exc, "capture file") from None

    # -- what the link reports -------------------------------------------------------------
    def _sent(self, pkt) -> None:
        self._record(self.side, pkt)

    def _arrived(self, pkt) -> None:
        self._received(self.side, pkt)
        self._record(PEER[self.side], pkt)

    def _peer_arrived(self, pkt) -> None:
        self._received(PEER[self.side], pkt)

    def _received(self, host: str, pkt) -> None:
        if pkt.proto == "tcp":
            conn = self.conns[pkt.conn]
            if conn.tcp[host].params.timestamps:
                conn.ts_recent[host] = _tsval(pkt.sent_ns)

    def _record(self, src: str, pkt) -> None:
        """Write ``pkt``, sent by host ``src``, as it passes the tap now."""
        conn = self.conns[pkt.conn]
        sport, dport = conn.ports[src]
        if pkt.proto == "tcp":
            ip_id = conn.ip_id[src]
            conn.ip_id[src] = (ip_id + 1) & 0xFFFF
            opts = b""
            if conn.tcp[src].params.timestamps:
                tsval = _tsval(pkt.sent_ns)
                opts = _TS.pack(OPT_NOP, OPT_NOP, OPT_TS, 10, tsval, conn.ts_recent[src])
            if pkt.sack:
                opts += _sack_option(pkt.sack)
            wnd = min(pkt.wnd >> conn.wscale.get(src, 0), U16_MAX)
            seq, ack = pkt.seq + 1, pkt.ack + 1  # the SYN took sequence number 0
            l4 = _tcp_header(src, sport, dport, seq, ack, pkt.flags | ACK, wnd, opts, pkt.payload)
            frag = IP_DF
        elif pkt.proto == "icmp":  # an echo request or reply of a ping flow
            ip_id = pkt.seq & 0xFFFF
            frag = 0
            ident = CLIENT_PORT_BASE + int(pkt.conn[1:])
            l4 = _icmp_header(pkt.flags, ident, pkt.seq)
        else:
            ip_id = pkt.frag_id & 0xFFFF
            frag = (pkt.frag_off >> 3) | (IP_MF if pkt.more_frags else 0)
            l4 = _udp_header(src, sport, dport, pkt.dgram_len) if pkt.frag_off == 0 else b""
        self._frame(src, pkt.proto, ip_id, frag, l4, pkt.length)

    def _frame(self, src: str, proto: str, ip_id: int, frag: int, l4: bytes, length: int) -> None:
        ip = _ip_header(src, proto, ip_id, frag, length)
        head = MAC[PEER[src]] + MAC[src] + ETHERTYPE_IPV4 + ip + l4
        orig = max(MAC_HEADER + length, ETH_MIN)
        if len(head) < min(orig, self.spec.snaplen):
            head += bytes(min(orig, self.spec.snaplen) - len(head))  # zero payload, padding
        self._write(self.env._now, head, orig)

    # -- the synthetic handshake -----------------------------------------------------------
    def _handshakes(self) -> None:
        """A SYN, SYN-ACK and ACK for every TCP connection, with each end's own options."""
        for conn in self.conns.values():
            if conn.tcp:
                self._handshake(conn)

    def _handshake(self, conn: _Conn) -> None:
        ends = conn.tcp
        mss = mss_for(self.mtu, False)  # the MSS option counts no options
        tps = {h: ends[h].params for h in SIDES}
        sack = all(tp.sack for tp in tps.values())
        ts = all(tp.timestamps for tp in tps.values())
        syn_window = {h: min(ends[h].bufs.syn_window, U16_MAX) for h in SIDES}
        for src, ack, flags in (("tx", 0, SYN), ("rx", 1, SYN | ACK)):
            # As tcp_options_write orders them; the SYN-ACK offers only what both do.
            offer_sack = tps[src].sack and (src == "tx" or sack)
            offer_ts = tps[src].timestamps and (src == "tx" or ts)
            opts = struct.pack("!BBH", OPT_MSS, 4, mss)
            stamp = _TS.pack(OPT_NOP, OPT_NOP, OPT_TS, 10, _tsval(0), _tsval(0) if ack else 0)
            if offer_sack and offer_ts:
                opts += bytes((OPT_SACK_PERM, 2)) + stamp[2:]
            elif offer_ts:
                opts += stamp
            elif offer_sack:
                opts += bytes((OPT_NOP, OPT_NOP, OPT_SACK_PERM, 2))
            opts += bytes((OPT_NOP, OPT_WSCALE, 3, conn.wscale.get(src, 0)))
            self._handshake_segment(src, conn, 0, ack, flags, syn_window[src], opts)
        conn.ts_recent = {"tx": _tsval(0), "rx": _tsval(0)}
        opts = _TS.pack(OPT_NOP, OPT_NOP, OPT_TS, 10, _tsval(0), _tsval(0)) if ts else b""
        wnd = min(syn_window["tx"] >> conn.wscale.get("tx", 0), U16_MAX)
        self._handshake_segment("tx", conn, 1, 1, ACK, wnd, opts)

    def _handshake_segment(self, src, conn, seq, ack, flags, wnd, opts) -> None:
        sport, dport = conn.ports[src]
        ip_id = conn.ip_id[src]
        conn.ip_id[src] += 1
        l4 = _tcp_header(src, sport, dport, seq, ack, flags, wnd, opts, 0)
        self._frame(src, "tcp", ip_id, IP_DF, l4, IP_HEADER + len(l4))


def _announced_wscale(bufs) -> int:
    """The shift a host's receive buffer announces (a fixed ``tcp.rmem``: the least that
    lets the 16-bit field hold it)."""
    if not bufs.fixed_rcv:
        return bufs.wscale
    shift = 0
    while bufs.rmem >> shift > U16_MAX:
        shift += 1
    return shift


def _tsval(t_ns: float) -> int:
    """A millisecond TCP timestamp clock (never 0: 0 reads as "no echo")."""
    return (int(t_ns // 1_000_000) + 1) & SEQ_MASK


def _sack_option(blocks) -> bytes:
    out = bytes((OPT_NOP, OPT_NOP, OPT_SACK, 2 + 8 * len(blocks)))
    for start, end in blocks:
        out += struct.pack("!II", (start + 1) & SEQ_MASK, (end + 1) & SEQ_MASK)
    return out


def _const_sums():
    """Per sending host and protocol, the header words that never change: the IPv4
    header's (version, TTL, protocol, addresses) and the pseudo-header's."""
    ip, pseudo = {}, {}
    for src in SIDES:
        addrs = _word_sum(ADDR[src] + ADDR[PEER[src]])
        for proto, number in PROTO.items():
            ip[src, proto] = 0x4500 + (TTL << 8 | number) + addrs
            pseudo[src, proto] = addrs + number
    return ip, pseudo


_IP_SUM, _PSEUDO_SUM = _const_sums()


def _pseudo_sum(src: str, proto: str, length: int) -> int:
    return _PSEUDO_SUM[src, proto] + length


def _ip_header(src: str, proto: str, ip_id: int, frag: int, length: int) -> bytes:
    csum = _fold(_IP_SUM[src, proto] + length + ip_id + frag)
    return _IP.pack(
        0x45, 0, length, ip_id, frag, TTL, PROTO[proto], csum, ADDR[src], ADDR[PEER[src]]
    )


def _tcp_header(src, sport, dport, seq, ack, flags, wnd, opts: bytes, payload: int) -> bytes:
    """A TCP header with ``opts``; the checksum covers ``payload`` zero bytes (adding nothing)."""
    offset = (TCP_HEADER + len(opts)) // 4 << 4
    seq, ack = seq & SEQ_MASK, ack & SEQ_MASK
    header = _TCP.pack(sport, dport, seq, ack, offset, flags, wnd, 0, 0) + opts
    total = _pseudo_sum(src, "tcp", len(header) + payload) + _word_sum(header)
    return header[:16] + struct.pack("!H", _fold(total)) + header[18:]


def _icmp_header(icmp_type: int, ident: int, seq: int) -> bytes:
    """An echo request or reply header; the checksum covers the zero data (adding nothing)."""
    words = (icmp_type << 8) + ident + (seq & 0xFFFF)
    return _ICMP.pack(icmp_type, 0, _fold(words), ident, seq & 0xFFFF)


def _udp_header(src: str, sport: int, dport: int, payload: int) -> bytes:
    length = UDP_HEADER + payload
    total = _pseudo_sum(src, "udp", length) + sport + dport + length
    return _UDP.pack(sport, dport, length, _fold(total) or 0xFFFF)
