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
  TSval the host had received on the connection when its MAC sent the segment);
  SACK blocks ride on the ACKs that
  have them.  The checksum is valid for the zero payload.
- The handshake is not modelled (the connection is established at time 0), so
  each TCP connection opens with a synthetic SYN (from ``tx``, whichever side
  the workload makes the client), SYN-ACK and ACK carrying the MSS (MTU - 40),
  SACK-permitted, timestamps and window-scale options each host would offer:
  readers need them to scale windows and tell the MSS.  They are timed as the
  model's path would carry them, ending as the run starts: tx's ACK leaves at
  time 0, after the SYN-ACK's round trip (:func:`one_way_ns`: the link's delay,
  and the bottleneck's or the second link's serialization; no host time, no
  queue), so a reader tells the side and the round trip from them as from a
  real capture.  The capture's clock therefore starts at tx's SYN: a frame of
  simulated time t is stamped t + the handshake's length (:attr:`PcapTap.origin`),
  and the TCP timestamp clock runs on the capture's clock.
- UDP: the same ports; the length and checksum of the whole datagram.

Frames are written as they happen (buffered), to a temporary file renamed to
FILE when the run ends; the capture never changes the run (no event, no random
draw), and without ``--pcap`` none of this exists: the options themselves are
:mod:`cpasim.pcap_spec`'s, and a run imports this module only to write a capture.
"""

from __future__ import annotations

import contextlib
import struct
from dataclasses import dataclass, field

from cpasim.config.params import TOPOLOGIES
from cpasim.files import OutputFile, write_error
from cpasim.model.link import transmit_ns
from cpasim.model.packet import ACK
from cpasim.model.sockbuf import U16_MAX
from cpasim.pcap_spec import SIDES, PcapSpec
from cpasim.protocol import FCS, IP_HEADER, MAC_HEADER, MIN_FRAME, TCP_HEADER, UDP_HEADER, mss_for

#: Classic pcap with nanosecond timestamps, version 2.4, link type Ethernet.
PCAP_MAGIC_NS = 0xA1B23C4D
LINKTYPE_ETHERNET = 1

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
        # The capture's clock minus the run's: the handshake's length (module docstring).
        self.origin = 0.0
        # Synthetic frames due after time 0, (simulated ns, frame, length), in time order.
        self._later: list[tuple[float, bytes, int]] = []
        # The far host's TSecr in each of its frames on the way, by the frame's id.
        self._echo: dict[int, int] = {}
        self._open()
        try:
            self._handshakes(system)
        except BaseException:
            self.discard()
            raise
        side, peer = self.side, PEER[self.side]
        # TSecr needs what each host last received, so both receivers report;
        # only the tapped host's frames are written.  Through a forwarding host
        # each end host's port is on its own link, and a frame keeps its addresses.
        system.port(side).tap(self._sent, self._arrived)
        system.port(peer).tap(self._peer_sent, self._peer_arrived)

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
        """Write ``frame`` stamped at simulated time ``t_ns`` (after any synthetic frame
        due before it)."""
        while self._later and self._later[0][0] <= t_ns:
            self._stamp(*self._later.pop(0))
        self._stamp(t_ns, frame, orig_len)

    def _stamp(self, t_ns: float, frame: bytes, orig_len: int) -> None:
        ns = round(t_ns + self.origin)
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

    def _peer_sent(self, pkt) -> None:
        # A frame from the far host echoes what that host had received when it sent the
        # frame, not when the frame reaches the tap a one-way delay later.
        if pkt.proto == "tcp":
            self._echo[id(pkt)] = self.conns[pkt.conn].ts_recent[PEER[self.side]]

    def _peer_arrived(self, pkt) -> None:
        self._received(PEER[self.side], pkt)

    def _received(self, host: str, pkt) -> None:
        if pkt.proto == "tcp":
            conn = self.conns[pkt.conn]
            if conn.tcp[host].params.timestamps:
                conn.ts_recent[host] = self._tsval(pkt.sent_ns)

    def _record(self, src: str, pkt) -> None:
        """Write ``pkt``, sent by host ``src``, as it passes the tap now."""
        conn = self.conns[pkt.conn]
        sport, dport = conn.ports[src]
        if pkt.proto == "tcp":
            ip_id = conn.ip_id[src]
            conn.ip_id[src] = (ip_id + 1) & 0xFFFF
            opts = b""
            echo = self._echo.pop(id(pkt), None) if src != self.side else None
            if conn.tcp[src].params.timestamps:
                tsval = self._tsval(pkt.sent_ns)
                tsecr = conn.ts_recent[src] if echo is None else echo
                opts = _TS.pack(OPT_NOP, OPT_NOP, OPT_TS, 10, tsval, tsecr)
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

    def _tsval(self, t_ns: float) -> int:
        """The TCP timestamp of simulated time ``t_ns``: milliseconds of the capture's clock."""
        return _tsval(t_ns + self.origin)

    def _frame(self, src: str, proto: str, ip_id: int, frag: int, l4: bytes, length: int) -> None:
        self._write(self.env._now, *self._bytes(src, proto, ip_id, frag, l4, length))

    def _bytes(self, src: str, proto: str, ip_id: int, frag: int, l4: bytes, length: int):
        """(the captured bytes, the frame's length) of one frame."""
        ip = _ip_header(src, proto, ip_id, frag, length)
        head = MAC[PEER[src]] + MAC[src] + ETHERTYPE_IPV4 + ip + l4
        orig = max(MAC_HEADER + length, ETH_MIN)
        if len(head) < min(orig, self.spec.snaplen):
            head += bytes(min(orig, self.spec.snaplen) - len(head))  # zero payload, padding
        return head, orig

    # -- the synthetic handshake -----------------------------------------------------------
    def _handshakes(self, system) -> None:
        """A SYN, SYN-ACK and ACK for every TCP connection, each with its own ends'
        options (a flow's own ``tcp`` keys); timed as the scenario's."""
        cfg = system.cfg
        if not any(conn.tcp for conn in self.conns.values()):
            return  # ping flows only: nothing to set up
        mss = mss_for(cfg.link.mtu, False)  # the MSS option counts no options

        def both(tps, option: str) -> bool:
            return all(getattr(tp, option) for tp in tps.values())

        def syn_options(tps, src: str, wscale: int, tsval: int, tsecr: int) -> bytes:
            # As tcp_options_write orders them; the SYN-ACK offers only what both do.
            sack, ts = both(tps, "sack"), both(tps, "timestamps")
            offer_sack = tps[src].sack and (src == "tx" or sack)
            offer_ts = tps[src].timestamps and (src == "tx" or ts)
            opts = struct.pack("!BBH", OPT_MSS, 4, mss)
            stamp = _TS.pack(OPT_NOP, OPT_NOP, OPT_TS, 10, tsval, tsecr)
            if offer_sack and offer_ts:
                opts += bytes((OPT_SACK_PERM, 2)) + stamp[2:]
            elif offer_ts:
                opts += stamp
            elif offer_sack:
                opts += bytes((OPT_NOP, OPT_NOP, OPT_SACK_PERM, 2))
            return opts + bytes((OPT_NOP, OPT_WSCALE, 3, wscale))

        def ack_options(tps, tsval: int, tsecr: int) -> bytes:
            ts = both(tps, "timestamps")
            return _TS.pack(OPT_NOP, OPT_NOP, OPT_TS, 10, tsval, tsecr) if ts else b""

        # The segments' lengths do not depend on the timestamps' values: time them first
        # (with the scenario's options).
        tps = {h: cfg.host(h).tcp for h in SIDES}
        length = {
            "syn": IP_HEADER + TCP_HEADER + len(syn_options(tps, "tx", 0, 0, 0)),
            "syn_ack": IP_HEADER + TCP_HEADER + len(syn_options(tps, "rx", 0, 0, 0)),
            "ack": IP_HEADER + TCP_HEADER + len(ack_options(tps, 0, 0)),
        }
        at = handshake_times(cfg, length)
        self.origin = -at["syn", "tx"]
        frames: list[tuple[float, int, bytes, int]] = []  # (time, order, frame, length)
        # Each segment's TSval is its sender's clock as it sends it.
        ts_syn, ts_syn_ack = self._tsval(at["syn", "tx"]), self._tsval(at["syn_ack", "rx"])
        ts_ack = self._tsval(at["ack", "tx"])
        for conn in self.conns.values():
            if not conn.tcp:
                continue  # a ping flow's
            tps = {h: conn.tcp[h].params for h in SIDES}
            syn_window = {h: min(conn.tcp[h].bufs.syn_window, U16_MAX) for h in SIDES}
            scale = conn.wscale
            segments = {
                "syn": (
                    "tx",
                    0,
                    0,
                    SYN,
                    syn_window["tx"],
                    syn_options(tps, "tx", scale.get("tx", 0), ts_syn, 0),
                ),
                "syn_ack": (
                    "rx",
                    0,
                    1,
                    SYN | ACK,
                    syn_window["rx"],
                    syn_options(tps, "rx", scale.get("rx", 0), ts_syn_ack, ts_syn),
                ),
                "ack": (
                    "tx",
                    1,
                    1,
                    ACK,
                    min(syn_window["tx"] >> scale.get("tx", 0), U16_MAX),
                    ack_options(tps, ts_ack, ts_syn_ack),
                ),
            }
            for order, (seg, spec) in enumerate(segments.items()):
                # The tap sees each segment at its own host: leaving it, or arriving.
                frames.append((at[seg, self.side], order, *self._handshake_segment(conn, *spec)))
            if both(tps, "timestamps"):
                conn.ts_recent = {"tx": ts_syn_ack, "rx": ts_ack}
        for t, _, frame, orig in sorted(frames, key=lambda f: (f[0], f[1])):
            if t <= 0:
                self._stamp(t, frame, orig)
            else:
                self._later.append((t, frame, orig))

    def _handshake_segment(self, conn, src, seq, ack, flags, wnd, opts):
        sport, dport = conn.ports[src]
        ip_id = conn.ip_id[src]
        conn.ip_id[src] += 1
        l4 = _tcp_header(src, sport, dport, seq, ack, flags, wnd, opts, 0)
        return self._bytes(src, "tcp", ip_id, IP_DF, l4, IP_HEADER + len(l4))


def one_way_ns(cfg, length: int, direction: str) -> float:
    """The time a frame of ``length`` IP bytes takes from the sending host's tap (the
    end of its serialization) to the receiving host's (offered to its NIC) with no
    queue: the link's delay, a bottleneck's serialization in ``direction``
    (``"tx_to_rx"`` or ``"rx_to_tx"``; none with a token bucket, which passes a lone
    frame at once), or the second link's through a forwarding host (whose own
    processing is not counted)."""
    t = cfg.link.delay
    if TOPOLOGIES[cfg.topology.kind].forwards:
        t += transmit_ns(length, cfg.link.rate) + cfg.link.delay
    b = cfg.bottleneck
    rate = b.rate if direction == "tx_to_rx" else b.reverse_rate
    if rate and not b.burst:
        t += (length + b.overhead) * 8e9 / rate
    return t


def handshake_times(cfg, length: dict[str, int]) -> dict[tuple[str, str], float]:
    """When each handshake segment passes each host's tap, in simulated ns: tx's ACK
    leaves at 0, each host answers at once (``length``: IP bytes per segment)."""
    x = {seg: transmit_ns(n, cfg.link.rate) for seg, n in length.items()}
    at = {("ack", "tx"): 0.0}
    at["syn_ack", "tx"] = at["ack", "tx"] - x["ack"]
    at["syn_ack", "rx"] = at["syn_ack", "tx"] - one_way_ns(cfg, length["syn_ack"], "rx_to_tx")
    at["syn", "rx"] = at["syn_ack", "rx"] - x["syn_ack"]
    at["syn", "tx"] = at["syn", "rx"] - one_way_ns(cfg, length["syn"], "tx_to_rx")
    at["ack", "rx"] = at["ack", "tx"] + one_way_ns(cfg, length["ack"], "tx_to_rx")
    return at


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


def _udp_header(src: str, sport: int, dport: int, payload: int) -> bytes:
    length = UDP_HEADER + payload
    total = _pseudo_sum(src, "udp", length) + sport + dport + length
    return _UDP.pack(sport, dport, length, _fold(total) or 0xFFFF)


def _icmp_header(icmp_type: int, ident: int, seq: int) -> bytes:
    """An echo request or reply header; the checksum covers the zero data (adding nothing)."""
    words = (icmp_type << 8) + ident + (seq & 0xFFFF)
    return _ICMP.pack(icmp_type, 0, _fold(words), ident, seq & 0xFFFF)


def _udp_header(src: str, sport: int, dport: int, payload: int) -> bytes:
    length = UDP_HEADER + payload
    total = _pseudo_sum(src, "udp", length) + sport + dport + length
    return _UDP.pack(sport, dport, length, _fold(total) or 0xFFFF)
