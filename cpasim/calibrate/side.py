"""Where on the path a capture was taken: beside the data's sender, its receiver, or
in between.

A tap sees a host's answers at once and the far host's a round trip late, so
whatever a host sends *in answer* to the other tells the side:

- **The handshake.**  Beside the client, the SYN-ACK comes a round trip after
  the SYN and the client's ACK follows it at once; beside the server, the SYN-ACK
  follows the SYN at once and the ACK comes a round trip later.  Either way the
  two gaps add up to the round trip.
- **Timestamp echoes** (RFC 7323).  A host echoes (TSecr) the last TSval it
  received.  For each value, the time from the tap's first sight of it to the
  first packet echoing it is the echoing host's answer time: near zero beside
  that host, at least the base round trip beside the other, whatever the
  timestamp clock's tick.  Many values make this the strongest evidence, and the
  far host's echo times are round trips measured from any tap.
- **Direction flags** of Linux cooked captures (outgoing or incoming).
- **Data and ACK spacing**, the weakest: data follows ACKs beside an ACK-clocked
  sender, ACKs follow data beside the receiver; a paced sender blurs it.

:func:`capture_side` weighs them in that order (the strongest decisive one
wins) and says which told it; ``--side`` overrides them all.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cpasim.calibrate.pcap import ACK, SYN, PacketRecord
from cpasim.errors import CpasimError

#: What ``--side`` accepts: beside the data's sender (tx) or its receiver (rx).
SIDE_NAMES = {"tx": "sender", "rx": "receiver"}
#: One host's answer time must be this many times shorter than the other's to say
#: the tap was beside it.
DECISIVE_RATIO = 4
#: Echoed timestamp values needed from each host before their echo times count.
MIN_ECHOES = 10
#: Data/ACK spacing must differ this many times to say the side (the weakest sign).
SPACING_RATIO = 3
MIN_SPACINGS = 10


@dataclass(frozen=True)
class Handshake:
    """The three segments that opened the connection, as the tap saw them (ns)."""

    client: str  # "addr:port" of the host that sent the SYN
    syn_ns: int
    syn_ack_ns: int
    ack_ns: int  # the client's first segment after the SYN-ACK

    @property
    def client_gap_ns(self) -> int:
        """SYN → SYN-ACK: the round trip beside the client, near zero beside the server."""
        return self.syn_ack_ns - self.syn_ns

    @property
    def server_gap_ns(self) -> int:
        """SYN-ACK → ACK: near zero beside the client, the round trip beside the server."""
        return self.ack_ns - self.syn_ack_ns

    @property
    def rtt_ns(self) -> int:
        """The round trip of the handshake, the same from any tap."""
        return self.ack_ns - self.syn_ns


@dataclass(frozen=True)
class Echoes:
    """Per host, the times from the tap's first sight of a TSval to the host's first
    packet echoing it (ns)."""

    sender_ns: list[int]  # the data's sender echoing the receiver's values
    receiver_ns: list[int]


@dataclass(frozen=True)
class Side:
    """Where the capture was taken and what told it."""

    side: str  # "sender", "receiver" or "unknown"
    evidence: str
    method: str  # "--side", "direction flags", "timestamp echoes", "handshake", "spacing", ""
    handshake: Handshake | None = None
    echoes: Echoes | None = None


def endpoint(addr: str, port: int) -> str:
    return f"[{addr}]:{port}" if ":" in addr else f"{addr}:{port}"


def find_handshake(packets: list[PacketRecord]) -> Handshake | None:
    """The SYN, SYN-ACK and the client's next segment of one flow (time order), or None.

    A resent SYN counts from its last copy before the SYN-ACK: that is the one answered."""
    syn = syn_ack = None
    for p in packets:
        if p.flags & SYN and not p.flags & ACK and syn_ack is None:
            syn = p
        elif p.flags & SYN and p.flags & ACK and syn is not None and syn_ack is None:
            syn_ack = p
        elif syn_ack is not None and (p.src, p.sport) == (syn.src, syn.sport):
            if p.flags & SYN:
                continue
            return Handshake(endpoint(syn.src, syn.sport), syn.t_ns, syn_ack.t_ns, p.t_ns)
    return None


def timestamp_echoes(packets: list[PacketRecord], sender: str) -> Echoes | None:
    """Echo times of each host (see the module docstring); None without timestamps."""
    first_seen: dict[tuple[bool, int], int] = {}  # (from the sender, TSval) -> first time
    answered: set[tuple[bool, int]] = set()
    out: dict[bool, list[int]] = {True: [], False: []}
    for p in packets:
        if p.tsval is None:
            continue
        from_sender = endpoint(p.src, p.sport) == sender
        first_seen.setdefault((from_sender, p.tsval), p.t_ns)
        if not p.tsecr or p.flags & SYN and not p.flags & ACK:
            continue  # 0 echoes nothing (RFC 7323), nor does a SYN
        echoed = (not from_sender, p.tsecr)
        if echoed in answered or echoed not in first_seen:
            continue
        answered.add(echoed)
        out[from_sender].append(p.t_ns - first_seen[echoed])
    if not out[True] and not out[False]:
        return None
    return Echoes(out[True], out[False])


def capture_side(
    packets: list[PacketRecord],
    sender: str,
    *,
    given: str | None = None,
    spacing: tuple[list[int], list[int]] = ((), ()),
) -> Side:
    """Which side of the path ``packets`` (one flow, time order) were captured on.

    ``sender`` is the data sender's "addr:port"; ``given`` a ``--side`` value;
    ``spacing`` the data→next-ACK and ACK→next-data gaps of the flow (the weakest
    sign, used when nothing else tells)."""
    handshake = find_handshake(packets)
    echoes = timestamp_echoes(packets, sender)
    if given is not None:
        if given not in SIDE_NAMES:
            raise CpasimError(f"--side {given}: expected one of {', '.join(SIDE_NAMES)}")
        side = SIDE_NAMES[given]
        return Side(side, f"given by --side {given}", "--side", handshake, echoes)

    found = [
        _by_direction(packets, sender),
        _by_echoes(echoes),
        _by_handshake(handshake, sender),
    ]
    decisive = [f for f in found if f is not None and f[0] != "unknown"]
    for_side = {f[0] for f in decisive}
    if len(for_side) == 1:
        side, evidence, method = decisive[0]
        agree = [f"{m}: {e}" for _, e, m in decisive[1:]]
        if agree:
            evidence += "; " + "; ".join(agree)
        return Side(side, evidence, method, handshake, echoes)
    if len(for_side) > 1:
        said = "; ".join(f"{m} says {s} ({e})" for s, e, m in decisive)
        return Side("unknown", f"the signs disagree: {said}", "", handshake, echoes)
    undecided = [f"{f[2]}: {f[1]}" for f in found if f is not None]
    side, evidence = _by_spacing(*spacing)
    if side != "unknown":
        undecided.insert(0, evidence)
        return Side(side, "; ".join(undecided), "spacing", handshake, echoes)
    return Side("unknown", "; ".join([*undecided, evidence]), "", handshake, echoes)


def _by_direction(packets, sender):
    flags = [
        p.outgoing for p in packets if p.outgoing is not None and endpoint(p.src, p.sport) == sender
    ]
    if not flags:
        return None
    share = sum(flags) / len(flags)
    if share > 0.9:
        return "sender", "the capture marks the data packets as outgoing", "direction flags"
    if share < 0.1:
        return "receiver", "the capture marks the data packets as incoming", "direction flags"
    return "unknown", f"{share:.0%} of the data packets are marked outgoing", "direction flags"


def _by_echoes(echoes: Echoes | None):
    if echoes is None:
        return None
    n_s, n_r = len(echoes.sender_ns), len(echoes.receiver_ns)
    if min(n_s, n_r) < MIN_ECHOES:
        return "unknown", f"too few echoed values ({n_s} and {n_r})", "timestamp echoes"
    s, r = min(echoes.sender_ns), min(echoes.receiver_ns)
    detail = (
        f"the sender echoes the receiver's timestamps within {_time(s)}, "
        f"the receiver the sender's within {_time(r)} (fastest of {n_s} and {n_r})"
    )
    if s * DECISIVE_RATIO < r:
        return "sender", detail, "timestamp echoes"
    if r * DECISIVE_RATIO < s:
        return "receiver", detail, "timestamp echoes"
    return "unknown", detail + ": taken between the hosts", "timestamp echoes"


def _by_handshake(h: Handshake | None, sender: str):
    if h is None:
        return None
    client = h.client == sender
    detail = (
        f"SYN→SYN-ACK {_time(h.client_gap_ns)}, SYN-ACK→ACK {_time(h.server_gap_ns)} "
        f"(the {'sender' if client else 'receiver'} opened the connection)"
    )
    if h.server_gap_ns * DECISIVE_RATIO < h.client_gap_ns:
        return ("sender" if client else "receiver"), detail, "handshake"
    if h.client_gap_ns * DECISIVE_RATIO < h.server_gap_ns:
        return ("receiver" if client else "sender"), detail, "handshake"
    return "unknown", detail + ": taken between the hosts", "handshake"


def _by_spacing(d2a, a2d) -> tuple[str, str]:
    if len(d2a) < MIN_SPACINGS or len(a2d) < MIN_SPACINGS:
        return "unknown", "too few data/ACK exchanges to tell"
    m_d2a, m_a2d = float(np.median(d2a)), float(np.median(a2d))
    detail = f"median data→ACK {m_d2a / 1e3:.1f} us, ACK→data {m_a2d / 1e3:.1f} us"
    if m_d2a * SPACING_RATIO < m_a2d:
        return "receiver", f"ACKs follow data closely ({detail})"
    if m_a2d * SPACING_RATIO < m_d2a:
        return "sender", f"data follows ACKs closely ({detail})"
    return "unknown", f"neither direction clearly triggers the other ({detail})"


def _time(ns: float) -> str:
    return f"{ns / 1e3:.1f} us" if abs(ns) < 1e6 else f"{ns / 1e6:.2f} ms"
