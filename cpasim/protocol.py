"""Protocol facts: header, option and framing sizes, and PCIe packet arithmetic.

The one place the sizes the standards fix are written down.  The model, the
configuration checks, the predictions, the plots and the calibration read them
from here, so a byte counted in one of them is counted the same in all.  Plain
numbers and closed forms only: this module imports nothing from cpasim.

Ethernet (IEEE 802.3), per frame on the wire: preamble + SFD 8 B, MAC header
14 B, FCS 4 B, inter-frame gap 12 B; a frame (header to FCS) is at least 64 B.
IPv4 (RFC 791) without options 20 B, IPv6 (RFC 8200) 40 B; TCP (RFC 9293)
20 B plus at most 40 B of options; UDP (RFC 768) 8 B.

PCI Express: a DMA write is cut into posted TLPs of at most ``max_payload``
bytes; a DMA read into requests of at most ``max_read_request`` bytes, each
answered by completions of at most ``max_payload`` bytes.
"""

from __future__ import annotations

# --- Ethernet ------------------------------------------------------------------------

PREAMBLE_SFD = 8
MAC_HEADER = 14
FCS = 4
IFG = 12
MIN_FRAME = 64  # header to FCS
#: What a NIC FIFO stores with each IP packet: the MAC header and the FCS.
MAC_HEADER_FCS = MAC_HEADER + FCS
#: Byte times on the wire beyond the IP packet of a frame above the minimum size:
#: MAC header, FCS, preamble and inter-frame gap (38 B).
ETHERNET_FRAMING = PREAMBLE_SFD + MAC_HEADER_FCS + IFG
#: Bytes a Linux qdisc (tbf, htb) charges per frame beyond the IP packet: the Ethernet
#: header (what ``cpasim calibrate`` assumes a capture's shaper counted; a real
#: Ethernet wire carries ETHERNET_FRAMING).
DEFAULT_L2_OVERHEAD = MAC_HEADER


def frame_bytes(length: int) -> int:
    """Ethernet frame (header to FCS) carrying an IP packet of ``length`` bytes."""
    return max(length + MAC_HEADER_FCS, MIN_FRAME)


def wire_bytes(length: int) -> int:
    """Byte times an IP packet of ``length`` bytes occupies on the wire."""
    return frame_bytes(length) + PREAMBLE_SFD + IFG


# --- IP, TCP, UDP ----------------------------------------------------------------------

IP_HEADER = 20  # IPv4 without options
IPV6_HEADER = 40
#: The largest IP packet (the 16-bit total length field).
MAX_IP_PACKET = 65535
TCP_HEADER = 20
#: Option bytes a TCP header can carry (the 4-bit data offset: 60 B - 20 B).
TCP_OPTION_SPACE = 40
TCP_TIMESTAMPS = 12  # option bytes per segment with RFC 1323 timestamps
#: SACK option bytes: two NOPs, kind and length (TCPOLEN_SACK_BASE_ALIGNED), then 8 per block.
TCP_SACK_BASE = 4
TCP_SACK_PERBLOCK = 8
#: Blocks a receiver remembers (TCP_NUM_SACKS); 40 option bytes hold 3 of them
#: next to the timestamp option, 4 without it.
TCP_NUM_SACKS = 4
UDP_HEADER = 8
#: ICMP echo (RFC 792): type, code, checksum, identifier, sequence number.
ICMP_ECHO_HEADER = 8
#: The largest UDP payload over IPv4: 65535 - 20 (IPv4 header) - 8 (UDP header).
MAX_UDP_PAYLOAD = MAX_IP_PACKET - IP_HEADER - UDP_HEADER
#: An echo request's headers, IP's and ICMP's (28 B).
PING_HEADERS = IP_HEADER + ICMP_ECHO_HEADER
#: The most data one echo request carries (``ping -s``: 65507 B).
MAX_PING_PAYLOAD = MAX_IP_PACKET - IP_HEADER - ICMP_ECHO_HEADER
#: Payload of a Go-Back-N acknowledgement (workload.kind = udp_gbn): the Directed Point paper's
#: benchmarks acknowledge with a 4-byte message.
GBN_ACK = 4


def tcp_header(timestamps: bool) -> int:
    """IP + TCP header bytes per segment."""
    return IP_HEADER + TCP_HEADER + (TCP_TIMESTAMPS if timestamps else 0)


def sack_blocks_max(timestamps: bool) -> int:
    """SACK blocks that fit the option bytes (``tcp_established_options``)."""
    room = TCP_OPTION_SPACE - (TCP_TIMESTAMPS if timestamps else 0) - TCP_SACK_BASE
    return min(TCP_NUM_SACKS, room // TCP_SACK_PERBLOCK)


def mss_for(mtu: int, timestamps: bool) -> int:
    """Payload bytes per segment: MTU minus the IP and TCP headers and options."""
    return mtu - tcp_header(timestamps)


# --- PCI Express -----------------------------------------------------------------------

#: Lane signalling rate per PCIe generation, transfers per second.
LANE_RATE: dict[int, float] = {1: 2.5e9, 2: 5.0e9, 3: 8.0e9, 4: 16.0e9, 5: 32.0e9}

#: Bytes of a doorbell / register write.
MMIO_BYTES = 4


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def write_tlps(nbytes: int, max_payload: int) -> int:
    """Posted write TLPs for a DMA write of ``nbytes``."""
    return ceil_div(nbytes, max_payload)


def read_requests(nbytes: int, max_read_request: int) -> int:
    """Read request TLPs for a DMA read of ``nbytes``."""
    return ceil_div(nbytes, max_read_request)


def completion_tlps(nbytes: int, max_read_request: int, max_payload: int) -> int:
    """Completion TLPs answering a DMA read of ``nbytes``.

    Each request is answered separately, so a request shorter than a multiple
    of ``max_payload`` leaves a short completion of its own.
    """
    full, rest = divmod(nbytes, max_read_request)
    return full * ceil_div(max_read_request, max_payload) + ceil_div(rest, max_payload)


# --- Intel I/OAT DMA copy engine (ioatdma_hw.h; gem5's copy_engine_defs.hh) --------------

#: Bytes of a descriptor's next-pointer field, which the engine re-reads on an
#: append when it had reached the end of the chain.
IOAT_NEXT_POINTER_BYTES = 8
#: Bytes of the completion status the engine writes back to memory after a
#: descriptor that asks for it (IOAT_DMA_DESCRIPTOR_CTL_CP_STS).
IOAT_COMPLETION_BYTES = 8
