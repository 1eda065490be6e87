"""Copy a pcap file keeping only each packet's Ethernet, IP and TCP headers, gzip-compressed.

tcpdump's snap length is a fixed byte count; beyond the headers it keeps the first
bytes of iperf3's payload, which are random and do not compress.  Cutting every
record at the end of its TCP header (original length kept, so readers still see
the packet's size) makes the compressed capture about a third smaller and
loses nothing the calibration reads.  Records that are not IPv4/IPv6 TCP are
copied unchanged.  Standard library only.

Usage: python3 headers_only.py IN.pcap OUT.pcap.gz
"""

from __future__ import annotations

import gzip
import os
import struct
import sys

# Microsecond and nanosecond pcap, either byte order.
MAGICS = {
    b"\xd4\xc3\xb2\xa1": "<",
    b"\x4d\x3c\xb2\xa1": "<",
    b"\xa1\xb2\xc3\xd4": ">",
    b"\xa1\xb2\x3c\x4d": ">",
}
ETHERTYPE_IPV4 = 0x0800
ETHERTYPE_IPV6 = 0x86DD
PROTO_TCP = 6


def header_length(pkt: bytes) -> int:
    """Bytes up to the end of the TCP header, or len(pkt) when not TCP over IP on Ethernet."""
    if len(pkt) < 14:
        return len(pkt)
    ethertype = struct.unpack_from(">H", pkt, 12)[0]
    if ethertype == ETHERTYPE_IPV4 and len(pkt) >= 34:
        ip_len, proto = (pkt[14] & 0x0F) * 4, pkt[23]
    elif ethertype == ETHERTYPE_IPV6 and len(pkt) >= 54:
        ip_len, proto = 40, pkt[20]
    else:
        return len(pkt)
    tcp = 14 + ip_len
    if proto != PROTO_TCP or len(pkt) < tcp + 13:
        return len(pkt)
    return min(len(pkt), tcp + (pkt[tcp + 12] >> 4) * 4)


def main(argv: list[str]) -> int:
    src, dst = argv
    with open(src, "rb") as f:
        data = f.read()
    order = MAGICS.get(data[:4])
    if order is None:
        print(f"headers_only: {src}: not a pcap file", file=sys.stderr)
        return 2
    record = struct.Struct(order + "IIII")
    out = [data[:24]]
    off = 24
    while off + 16 <= len(data):
        sec, frac, caplen, origlen = record.unpack_from(data, off)
        pkt = data[off + 16 : off + 16 + caplen]
        off += 16 + caplen
        pkt = pkt[: header_length(pkt)]
        out.append(record.pack(sec, frac, len(pkt), origlen) + pkt)
    with gzip.open(dst + ".tmp", "wb", compresslevel=9) as f:
        f.write(b"".join(out))
    os.replace(dst + ".tmp", dst)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
