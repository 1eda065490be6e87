"""The packet handed between the layers of the model.

A :class:`Packet` is an IP packet as the stack hands it to the device (and the
device back to the stack): ``length`` counts the IP header, the L4 header with
its options and the payload.  A TSO super-segment (``segs > 1``) stands for
``segs`` wire segments that the NIC cuts with :meth:`Packet.split_tso`; each
carries ``hdr`` header bytes and at most ``mss`` payload bytes.  Ethernet
framing is the link's business (``cpasim.protocol.wire_bytes``).

Fields are written by the layer that owns them (TCP: ``seq/ack/wnd/flags``,
IP: the fragment fields) and only read below it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

#: TCP flag bits carried in :attr:`Packet.flags`.
ACK = 0x10
PSH = 0x08


@dataclass(slots=True)
class Packet:
    conn: str  # connection id, e.g. "c0"
    proto: str  # "tcp" or "udp"
    length: int  # IP packet bytes (sum over the segments of a TSO super-segment)
    payload: int  # application bytes
    hdr: int  # IP + L4 header bytes per segment (options included)
    mss: int  # most payload bytes one wire segment carries
    segs: int = 1  # wire segments (TSO); each is ``hdr + <= mss`` bytes
    seq: int = 0  # TCP: first payload byte's sequence number; UDP: datagram number
    ack: int = 0  # TCP: cumulative ACK (next byte expected)
    wnd: int = 0  # TCP: advertised receive window, bytes
    flags: int = 0  # TCP flag bits (ACK, PSH)
    # TCP's segments are built with their fields in this order, positionally (each
    # segment is one: keywords cost more than the rest of the construction).
    sent_ns: float = 0.0  # time the sending layer created it
    retrans: bool = False  # TCP: this is a retransmission
    frag_id: int = 0  # IP: datagram id shared by its fragments
    frag_off: int = 0  # IP: payload offset of this fragment in the datagram, bytes
    more_frags: bool = False  # IP: more fragments follow
    dgram_len: int = 0  # UDP: whole datagram payload (fragments carry a share)
    sack: tuple[tuple[int, int], ...] | None = None  # TCP: SACK blocks (start, end), or None

    def split_tso(self) -> list[Packet]:
        """The wire segments of a TSO super-segment, in sequence order.

        Every segment but the last carries ``mss`` payload bytes; each repeats
        the header.  A packet with ``segs == 1`` returns ``[self]``.
        """
        if self.segs <= 1:
            return [self]
        out = []
        left = self.payload
        seq = self.seq
        for i in range(self.segs):
            part = min(self.mss, left)
            last = i == self.segs - 1
            out.append(
                replace(
                    self,
                    length=self.hdr + part,
                    payload=part,
                    segs=1,
                    seq=seq,
                    flags=self.flags if last else self.flags & ~PSH,
                )
            )
            seq += part
            left -= part
        return out
