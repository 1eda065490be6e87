"""Packet captures (pcap and pcapng) as plain per-packet records.

Only headers are needed, so short snap lengths (``tcpdump -s 128``) are fine:
sizes come from the IP header, never from the captured bytes.  A capture may be
gzip-compressed (``.pcap.gz``, ``.pcapng.gz``): it is told by its content and
decompressed while it is read; a compressed capture cut short is read up to the
cut, as an uncompressed one is.  Timestamps are
kept as integer nanoseconds because inter-arrival gaps at 10 Gb/s are around
a microsecond, below the resolution of a float holding seconds since 1970.

Time must go forward.  A real capture steps back by a few microseconds now and
then (packets of different CPUs' queues reach the capture slightly out of order;
the largest step in the captures under ``calibration/`` is 28 us, in 11 of 13,368
records), but a record whose time is far earlier than the records before it, a
capture where many records step back, or a record repeated whole, is an edited,
merged or reversed capture, whose rates and spans would be nonsense: it is
refused, naming the first such record.
"""

from __future__ import annotations

import io
import socket
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import dpkt

from cpasim.errors import CpasimError
from cpasim.inputs import open_input
from cpasim.protocol import IPV6_HEADER

# Link types (https://www.tcpdump.org/linktypes.html).  Raw IP has two numbers
# for historical reasons (DLT_RAW differs between BSDs and Linux).
LINKTYPE_NULL = 0
LINKTYPE_ETHERNET = 1
LINKTYPE_RAW = 101
LINKTYPE_LOOP = 108
LINKTYPE_LINUX_SLL = 113
LINKTYPE_IPV4 = 228
LINKTYPE_IPV6 = 229
LINKTYPE_LINUX_SLL2 = 276
SUPPORTED_LINKTYPES = {
    LINKTYPE_NULL: "BSD loopback",
    LINKTYPE_ETHERNET: "Ethernet",
    LINKTYPE_RAW: "raw IP",
    12: "raw IP",
    14: "raw IP",
    LINKTYPE_LOOP: "OpenBSD loopback",
    LINKTYPE_LINUX_SLL: "Linux cooked (SLL)",
    LINKTYPE_IPV4: "raw IPv4",
    LINKTYPE_IPV6: "raw IPv6",
    LINKTYPE_LINUX_SLL2: "Linux cooked v2 (SLL2)",
}

PROTO_TCP = 6
PROTO_UDP = 17

# TCP flag bits.
FIN, SYN, RST, PSH, ACK = 0x01, 0x02, 0x04, 0x08, 0x10

_PCAPNG_MAGIC = b"\x0a\x0d\x0d\x0a"
_PCAP_MAGICS = {
    b"\xd4\xc3\xb2\xa1",
    b"\xa1\xb2\xc3\xd4",
    b"\x4d\x3c\xb2\xa1",
    b"\xa1\xb2\x3c\x4d",
}
_PCAPNG_IDB, _PCAPNG_EPB, _PCAPNG_SPB = 1, 6, 3
_GZIP_MAGIC = b"\x1f\x8b"
TCP_OPT_SACK_PERMITTED = 4


class _Gunzip(io.RawIOBase):
    """A gzip-compressed file's content, decompressed as it is read.

    Unlike :mod:`gzip`, a stream cut short ends where its data ends (with
    :attr:`cut` set) instead of failing: the records before the cut are read, as
    they are from a cut uncompressed capture.  Concatenated members are read on.
    Seeking goes back to the start and reads forward."""

    def __init__(self, raw):
        self.raw = raw
        self.cut = False
        self._restart()

    def _restart(self) -> None:
        self.raw.seek(0)
        self._unzip = zlib.decompressobj(16 + zlib.MAX_WBITS)
        self._left = b""  # decompressed, not yet read
        self._pos = 0
        self._ended = False

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_CUR:
            offset += self._pos
        elif whence != io.SEEK_SET:
            raise io.UnsupportedOperation("a compressed capture seeks from its start only")
        if offset < self._pos:
            self._restart()
        while self._pos < offset and self.read(min(offset - self._pos, 1 << 20)):
            pass
        return self._pos

    def readinto(self, buf) -> int:
        while not self._left and not self._ended:
            self._left = self._more()
        n = min(len(buf), len(self._left))
        buf[:n] = self._left[:n]
        self._left = self._left[n:]
        self._pos += n
        return n

    def _more(self) -> bytes:
        unzip = self._unzip
        if unzip.eof:  # a member ended: another may follow
            rest = unzip.unused_data
            if not rest:
                rest = self.raw.read(1 << 16)
            if not rest.strip(b"\0"):  # trailing zeros (tape padding) or the end
                self._ended = True
                return b""
            self._unzip = unzip = zlib.decompressobj(16 + zlib.MAX_WBITS)
            return unzip.decompress(rest, 1 << 20)
        if unzip.unconsumed_tail:
            return unzip.decompress(unzip.unconsumed_tail, 1 << 20)
        data = self.raw.read(1 << 16)
        if not data:
            self._ended = True
            self.cut = True  # the compressed stream stops before its end
            return unzip.flush()
        return unzip.decompress(data, 1 << 20)

    def close(self) -> None:
        self.raw.close()
        super().close()


def open_binary(path: Path, what: str = "capture"):
    """``path`` opened for reading, transparently decompressed if it is gzip (then its
    ``raw.cut`` says whether the compressed stream was cut short)."""
    f = open_input(path, what)
    if f.read(2) == _GZIP_MAGIC:
        return io.BufferedReader(_Gunzip(f))
    f.seek(0)
    return f


def head_bytes(path: str | Path, n: int = 64) -> bytes:
    """The first ``n`` bytes of a measurement file's content (decompressed if gzip)."""
    path = Path(path)
    try:
        with open_binary(path, "measurement file") as f:
            return f.read(n)
    except (OSError, zlib.error) as exc:
        why = getattr(exc, "strerror", None) or exc
        raise CpasimError(f"{path}: cannot read ({why})") from None


def is_capture(head: bytes) -> bool:
    """Whether a file starting with ``head`` is a pcap or pcapng capture."""
    return head[:4] == _PCAPNG_MAGIC or head[:4] in _PCAP_MAGICS


@dataclass(frozen=True, slots=True)
class PacketRecord:
    """One TCP or UDP packet of a capture (transport headers only)."""

    t_ns: int  # capture timestamp, ns since the epoch
    src: str
    sport: int
    dst: str
    dport: int
    proto: int  # PROTO_TCP or PROTO_UDP
    ip_bytes: int  # IP datagram length from the IP header (may exceed the MTU with TSO/GRO)
    payload: int  # transport payload bytes, from the headers
    header_bytes: int  # IP + transport header bytes
    seq: int = 0
    ack: int = 0
    flags: int = 0
    window: int = 0  # raw 16-bit window field; scale it with the SYN's shift
    mss_option: int | None = None
    wscale_option: int | None = None
    tsval: int | None = None
    tsecr: int | None = None
    outgoing: bool | None = None  # Linux cooked captures record the direction; others cannot
    sack_permitted: bool = False  # SACK-permitted option (SYN and SYN-ACK only)


@dataclass(frozen=True)
class Capture:
    """Every TCP/UDP packet of a capture file, in file order."""

    path: str
    format: str  # "pcap" or "pcapng"
    linktype: str
    snaplen: int
    packets: list[PacketRecord] = field(repr=False)
    skipped: int = 0  # frames that were not TCP/UDP over IPv4/IPv6 (ARP, ICMP, ...)
    cut_short: str | None = None  # why the last record was dropped, if the file ends inside it


def read_capture(path: str | Path) -> Capture:
    """Read a pcap or pcapng file (or either gzip-compressed); raises :class:`CpasimError`
    if it is not one."""
    path = Path(path)
    cut: list[str] = []
    try:
        with open_binary(path) as f:
            magic = f.read(4)
            f.seek(0)
            if magic == _PCAPNG_MAGIC:
                fmt, frames, linktypes, snaplen = "pcapng", *_pcapng_frames(f, path, cut)
            elif magic in _PCAP_MAGICS:
                fmt, frames, linktypes, snaplen = "pcap", *_pcap_frames(f, path, cut)
            else:
                raise CpasimError(
                    f"{path}: not a pcap or pcapng capture (first bytes {magic.hex() or 'empty'})"
                )
            packets: list[PacketRecord] = []
            skipped = 0
            for t_ns, linktype, buf in _in_time_order(frames, path, fmt):
                rec = _decode(linktype, t_ns, buf)
                if rec is None:
                    skipped += 1
                else:
                    packets.append(rec)
            if not cut and getattr(getattr(f, "raw", None), "cut", False):
                cut.append(
                    "compressed capture cut short (its gzip stream stops before its end); "
                    f"figures use the {len(packets) + skipped} complete records before the cut"
                )
    except OSError as exc:
        raise CpasimError(f"{path}: cannot read capture ({exc.strerror or exc})") from None
    except (EOFError, zlib.error) as exc:
        raise CpasimError(f"{path}: corrupt gzip-compressed capture ({exc})") from None
    names = sorted({SUPPORTED_LINKTYPES[lt] for lt in linktypes})
    return Capture(
        str(path), fmt, ", ".join(names), snaplen, packets, skipped, cut[0] if cut else None
    )


#: How far a record's time may lie before the latest time already read: captures
#: from several CPUs' queues step back by microseconds (28 us at most in
#: calibration/); a step of a millisecond is no capture jitter.
MAX_STEP_BACK_NS = 1_000_000
#: Share of records that may step back at all (0.08 % at most in calibration/), and
#: the count allowed whatever the share (a short capture with one late packet).
MAX_BACK_SHARE = 0.01
MAX_BACK_ANY = 3


def _in_time_order(frames, path: Path, fmt: str):
    """``frames`` passed through, refused at the first record that sends time far
    back or repeats the record before it whole, or at the end if too many step back."""
    latest = None
    previous = None
    back = 0
    number = 0
    for number, frame in enumerate(frames, 1):  # noqa: B007 - the count is used after
        t_ns = frame[0]
        if latest is not None and t_ns < latest:
            if latest - t_ns > MAX_STEP_BACK_NS:
                raise CpasimError(
                    f"{path}: time goes backwards at {fmt} record {number}: "
                    f"{_seconds(t_ns)} after {_seconds(latest)}, {_seconds(latest - t_ns)} "
                    "earlier (records edited, reordered or merged from several captures; "
                    "cpasim reads captures in time order)"
                )
            back += 1
        if frame == previous:
            raise CpasimError(
                f"{path}: {fmt} record {number} repeats record {number - 1} whole (same time "
                "and bytes): a duplicated record (editcap -d removes them)"
            )
        latest = t_ns if latest is None else max(latest, t_ns)
        previous = frame
        yield frame
    if back > MAX_BACK_ANY and back > MAX_BACK_SHARE * number:
        raise CpasimError(
            f"{path}: time goes backwards at {back} of its {number} records (more than "
            f"{MAX_BACK_SHARE:.0%}): records reversed or shuffled, not captured in order"
        )


def _seconds(t_ns: int) -> str:
    return f"{t_ns / 1e9:.6f} s"


def _check_linktype(path: Path, linktype: int) -> None:
    if linktype not in SUPPORTED_LINKTYPES:
        known = ", ".join(f"{n} ({k})" for k, n in sorted(SUPPORTED_LINKTYPES.items()))
        raise CpasimError(f"{path}: link type {linktype} is not supported; expected one of {known}")


#: libpcap's largest snapshot length: a record claiming more is corruption, not data.
MAX_SNAPLEN = 262_144
#: The largest pcapng block read: a packet of the largest snapshot length with its
#: block's fields and generous options.  A longer one is corruption (reading it
#: would allocate whatever the length field says).
MAX_PCAPNG_BLOCK = 16 << 20
_PCAP_LITTLE = {b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"}
_PCAP_NANO = {b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d"}


def _pcap_frames(f, path: Path, cut: list[str]):
    magic = f.read(4)
    f.seek(0)
    try:
        reader = dpkt.pcap.Reader(f)  # validates the file header
    except (ValueError, dpkt.NeedData, dpkt.UnpackError) as exc:
        raise CpasimError(f"{path}: unreadable pcap header ({exc})") from None
    linktype = reader.datalink()
    _check_linktype(path, linktype)
    record = struct.Struct(("<" if magic in _PCAP_LITTLE else ">") + "IIII")
    frac_ns = 1 if magic in _PCAP_NANO else 1000

    def frames():
        # Records are walked here rather than by dpkt, which hands out a cut-off last
        # record as if it were whole.
        number = 0
        while head := f.read(record.size):
            number += 1
            if len(head) < record.size:
                cut.append(_cut_short(number, f"{len(head)} of its {record.size} header bytes"))
                return
            sec, frac, caplen, _ = record.unpack(head)
            if caplen > MAX_SNAPLEN:
                raise CpasimError(
                    f"{path}: corrupt pcap record {number}: it announces {caplen} captured "
                    f"bytes, more than any capture keeps ({MAX_SNAPLEN})"
                )
            buf = f.read(caplen)
            if len(buf) < caplen:
                cut.append(_cut_short(number, f"{caplen} bytes announced, {len(buf)} present"))
                return
            yield sec * 1_000_000_000 + frac * frac_ns, linktype, buf

    return frames(), {linktype}, reader.snaplen


def _cut_short(number: int, what: str, unit: str = "record") -> str:
    """The note for a capture whose last record is incomplete: as Wireshark and tcpdump,
    the complete records are read and the cut is reported."""
    return (
        f"capture cut short in the middle of {unit} {number} ({what}); "
        f"figures use the {number - 1} complete {unit}s before it"
    )


def _pcapng_frames(f, path: Path, cut: list[str]):
    """Walk the blocks ourselves so that timestamps stay exact integers and every
    interface (each with its own link type and resolution) is honoured."""
    head = f.read(12)
    f.seek(0)
    if len(head) < 12:
        raise CpasimError(f"{path}: unreadable pcapng header (file too short)")
    little = head[8:12] == b"\x4d\x3c\x2b\x1a"
    try:
        dpkt.pcapng.Reader(f)  # validates the section header and the first interface
    except (ValueError, struct.error, dpkt.NeedData, dpkt.UnpackError) as exc:
        raise CpasimError(f"{path}: unreadable pcapng header ({exc})") from None
    f.seek(0)
    endian = "<" if little else ">"
    idb_cls = (
        dpkt.pcapng.InterfaceDescriptionBlockLE if little else dpkt.pcapng.InterfaceDescriptionBlock
    )
    epb_cls = dpkt.pcapng.EnhancedPacketBlockLE if little else dpkt.pcapng.EnhancedPacketBlock
    interfaces: list[tuple[int, int, int]] = []  # (linktype, ticks per second, offset s)
    blocks = [0]  # blocks read so far, for error lines

    def read_block():
        blocks[0] += 1
        hdr = f.read(8)
        if not hdr:
            return None
        if len(hdr) < 8:
            raise _CutShort(f"{len(hdr)} of its 8 header bytes")
        btype, blen = struct.unpack(endian + "II", hdr)
        if blen < 12 or blen > MAX_PCAPNG_BLOCK:
            raise CpasimError(
                f"{path}: corrupt pcapng block {blocks[0]} (length {blen}; a block holds 12 "
                f"to {MAX_PCAPNG_BLOCK:,} bytes)"
            )
        body = f.read(blen - 8)
        if len(body) < blen - 8:
            raise _CutShort(f"{blen} bytes announced, {len(body) + 8} present")
        return btype, hdr + body

    def add_interface(buf):
        idb = idb_cls(buf)
        ticks, offset = 1_000_000, 0
        number = len(interfaces)
        for opt in idb.opts:
            if opt.code == dpkt.pcapng.PCAPNG_OPT_IF_TSRESOL:
                if len(opt.data) < 1:
                    raise CpasimError(
                        f"{path}: interface {number}: empty if_tsresol option "
                        "(expected one byte: the timestamp resolution)"
                    )
                v = opt.data[0]
                ticks = 2 ** (v & 0x7F) if v & 0x80 else 10 ** (v & 0x7F)
            elif opt.code == dpkt.pcapng.PCAPNG_OPT_IF_TSOFFSET:
                if len(opt.data) != 8:
                    raise CpasimError(
                        f"{path}: interface {number}: if_tsoffset option of "
                        f"{len(opt.data)} bytes (expected 8: seconds as a 64-bit integer)"
                    )
                offset = struct.unpack(endian + "q", opt.data)[0]
        _check_linktype(path, idb.linktype)
        interfaces.append((idb.linktype, ticks, offset))
        return idb.snaplen

    # Blocks up to and including the first interface description.
    snaplen = 0
    try:
        while True:
            block = read_block()
            if block is None:
                raise CpasimError(f"{path}: pcapng file has no interface description block")
            if block[0] == _PCAPNG_IDB:
                snaplen = add_interface(block[1])
                break
    except _CutShort:
        raise CpasimError(f"{path}: pcapng file cut short before its first packet") from None
    except (ValueError, struct.error, dpkt.NeedData, dpkt.UnpackError) as exc:
        raise CpasimError(f"{path}: corrupt pcapng interface description ({exc})") from None

    def frames():
        try:
            while (block := read_block()) is not None:
                btype, buf = block
                if btype == _PCAPNG_IDB:
                    add_interface(buf)
                elif btype == _PCAPNG_EPB:
                    epb = epb_cls(buf)
                    if epb.iface_id >= len(interfaces):
                        raise CpasimError(
                            f"{path}: packet names interface {epb.iface_id}, "
                            f"but only {len(interfaces)} are described"
                        )
                    linktype, ticks, offset = interfaces[epb.iface_id]
                    raw = (epb.ts_high << 32) | epb.ts_low
                    t_ns = offset * 1_000_000_000 + raw * 1_000_000_000 // ticks
                    yield t_ns, linktype, epb.pkt_data
                # Simple packet blocks carry no timestamp; other blocks carry no packets.
        except _CutShort as exc:
            cut.append(_cut_short(blocks[0], str(exc), "block"))
        except (ValueError, struct.error, dpkt.NeedData, dpkt.UnpackError) as exc:
            raise CpasimError(f"{path}: corrupt pcapng block ({exc})") from None

    return frames(), {lt for lt, _, _ in interfaces}, snaplen


class _CutShort(Exception):
    """The file ends inside a pcapng block (what a killed tcpdump leaves)."""


_PACKET_OUTGOING = 4  # Linux packet type "sent by this host"


def _network_layer(linktype: int, buf: bytes):
    """(IP packet inside a link-layer frame or None, outgoing flag or None)."""
    try:
        if linktype == LINKTYPE_ETHERNET:
            return dpkt.ethernet.Ethernet(buf).data, None  # strips 802.1Q tags too
        if linktype in (LINKTYPE_LINUX_SLL, LINKTYPE_LINUX_SLL2):
            cooked = (dpkt.sll.SLL if linktype == LINKTYPE_LINUX_SLL else dpkt.sll2.SLL2)(buf)
            return cooked.data, cooked.type == _PACKET_OUTGOING
        if linktype in (LINKTYPE_NULL, LINKTYPE_LOOP):
            return dpkt.loopback.Loopback(buf).data, None
        version = buf[0] >> 4 if buf else 0
        if version == 4:
            return dpkt.ip.IP(buf), None
        if version == 6:
            return dpkt.ip6.IP6(buf), None
    except (dpkt.NeedData, dpkt.UnpackError, struct.error, IndexError):
        pass
    return None, None


def _decode(linktype: int, t_ns: int, buf: bytes) -> PacketRecord | None:
    ip, outgoing = _network_layer(linktype, buf)
    if isinstance(ip, dpkt.ip.IP):
        src, dst = _ntoa(ip.src), _ntoa(ip.dst)
        ip_hdr = ip.hl * 4
        ip_bytes = ip.len or (ip_hdr + len(ip.data))  # 0 under TSO on some drivers
        proto = ip.p
        if ip.offset != 0:
            return None  # a later IP fragment carries no transport header
    elif isinstance(ip, dpkt.ip6.IP6):
        src, dst = _ntoa(ip.src), _ntoa(ip.dst)
        # dpkt has already walked the extension headers; what remains is transport.
        ip_hdr = IPV6_HEADER + sum(len(h) for h in getattr(ip, "extension_hdrs", {}).values() if h)
        ip_bytes = IPV6_HEADER + ip.plen
        proto = ip.nxt
    else:
        return None
    seg = ip.data
    if proto == PROTO_TCP and isinstance(seg, dpkt.tcp.TCP):
        tcp_hdr = seg.off * 4
        mss = wscale = tsval = tsecr = None
        sack_permitted = False
        try:
            # dpkt ends the list with None where an option's length runs past the header.
            opts = [o for o in dpkt.tcp.parse_opts(seg.opts) if o is not None]
        except (dpkt.NeedData, struct.error):
            opts = []
        for kind, data in opts:
            if kind == dpkt.tcp.TCP_OPT_MSS and len(data) == 2:
                mss = struct.unpack(">H", data)[0]
            elif kind == dpkt.tcp.TCP_OPT_WSCALE and len(data) == 1:
                wscale = data[0]
            elif kind == dpkt.tcp.TCP_OPT_TIMESTAMP and len(data) == 8:
                tsval, tsecr = struct.unpack(">II", data)
            elif kind == TCP_OPT_SACK_PERMITTED:
                sack_permitted = True
        return PacketRecord(
            t_ns,
            src,
            seg.sport,
            dst,
            seg.dport,
            PROTO_TCP,
            ip_bytes,
            max(0, ip_bytes - ip_hdr - tcp_hdr),
            ip_hdr + tcp_hdr,
            seg.seq,
            seg.ack,
            seg.flags,
            seg.win,
            mss,
            wscale,
            tsval,
            tsecr,
            outgoing,
            sack_permitted,
        )
    if proto == PROTO_UDP and isinstance(seg, dpkt.udp.UDP):
        udp_payload = max(0, ip_bytes - ip_hdr - 8)
        return PacketRecord(
            t_ns,
            src,
            seg.sport,
            dst,
            seg.dport,
            PROTO_UDP,
            ip_bytes,
            udp_payload,
            ip_hdr + 8,
            outgoing=outgoing,
        )
    return None


def _ntoa(addr: bytes) -> str:
    return socket.inet_ntop(socket.AF_INET if len(addr) == 4 else socket.AF_INET6, addr)
