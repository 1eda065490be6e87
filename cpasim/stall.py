"""Why a run delivered nothing, or stopped delivering: no silent zero.

A stream that reads nothing after its warm-up, or stops reading well before the
run ends, is stalled.  What holds it is read from where the run stood when it
stopped (:meth:`cpasim.model.system.System.end_state`): data sent and not
acknowledged with the retransmission timer pending (the frames were dropped, and
the timer fires when it fires: a ``timeout``), a window closed by the receiver
(``window``), or nothing to send (``app``).  The drops are named with where they
happened.
"""

from __future__ import annotations

from dataclasses import dataclass

from cpasim.model.workloads import WORKLOADS
from cpasim.units import SIZE, TIME, human

#: A stream that read nothing for this share of its measured interval has stalled.
QUIET_SHARE = 0.25

#: Drop reason → what happened, for people.
DROP_WORDS = {
    "rx_fifo": "its NIC's receive FIFO was full",
    "rx_ring_full": "its NIC had no free receive descriptor",
    "reassembly": "IP reassembly gave up",
    "udp_rcvbuf": "the UDP receive buffer was full",
    "qdisc_full": "its qdisc was full",
    "link_loss": "lost on the wire (link.loss)",
    "bottleneck_queue_full": "the router's queue was full",
    "aqm": "the router's AQM dropped them",
}
#: Place (a host, ``link``, the bottleneck's ``path``) → its name for people.
PLACE_WORDS = {
    "link": "on the link",
    "path": "at the bottleneck router",
    "fw": "at the forwarding host",
}


def place_text(place: str) -> str:
    return PLACE_WORDS.get(place, f"at host {place}")


def drop_text(place: str, reason: str, count: int) -> str:
    frames = "frame" if count == 1 else "frames"
    return f"{count} {frames} dropped {place_text(place)}: {DROP_WORDS.get(reason, reason)}"


def drop_places(result: dict) -> list[tuple[str, str, int]]:
    """``(place, reason, count)`` of every drop in ``result``'s end state, most first."""
    drops = (result.get("end_state") or {}).get("drops") or {}
    out = [(p, r, n) for p, reasons in drops.items() for r, n in reasons.items() if n]
    out.sort(key=lambda t: (-t[2], t[0], t[1]))
    return out


@dataclass(frozen=True)
class Stall:
    """A stalled stream: what it did (``what``), the kind of limit that holds it, the
    resource in words, the evidence, and the first drop's place and reason."""

    kind: str  # timeout | window | app | loss
    resource: str
    host: str
    what: str
    evidence: tuple[str, ...]
    place: str | None = None
    reason: str | None = None

    def to_json(self) -> dict:
        return {
            "kind": self.kind,
            "what": self.what,
            "resource": self.resource,
            "host": self.host,
            "evidence": list(self.evidence),
        }

    @property
    def sentence(self) -> str:
        return f"{self.what}: held by {self.resource}; " + "; ".join(self.evidence)

    @classmethod
    def of(cls, cfg, result: dict) -> Stall | None:
        """The stall of ``result`` (a run's ``to_json()`` with its ``end_state``), or None."""
        kind = WORKLOADS.get(result.get("workload"))  # none: a ping flow's view
        if kind is None or not kind.stream or result.get("window") == "empty":
            return None
        end = result.get("end_state") or {}
        if not end:
            return None
        t_end = float(result["sim_time_ns"])
        warm = cfg.sim.warmup
        measured = t_end - warm
        if measured <= 0:
            return None
        last = end.get("last_read_ns")
        if result.get("bytes_measured", 0) == 0:
            what = (
                "delivered nothing"
                if not result.get("bytes_delivered")
                else f"delivered nothing after the {human(warm, TIME)} warm-up"
            )
        elif last is not None and t_end - last >= QUIET_SHARE * measured:
            what = (
                f"stopped delivering at {human(last, TIME)} "
                f"(the run went on to {human(t_end, TIME)})"
            )
        else:
            return None
        drops = [drop_text(*d) for d in drop_places(result)]
        first = drop_places(result)[:1]
        place, reason = (first[0][0], first[0][1]) if first else (None, None)
        tcp = end.get("tcp") or {}
        waiting = [(h, e) for h, ends in tcp.items() for e in ends if e["flight"] > 0]
        if waiting:
            host, e = min(waiting, key=lambda he: he[1]["timer_ns"] or float("inf"))
            timer = e["timer_ns"]
            ev = [f"{_bytes(e['flight'])} sent by host {host} ({e['conn']}) never acknowledged"]
            ev += drops or ["no drop was counted: the data or its ACKs are still queued"]
            if timer is not None:
                when = (
                    "after the run ended"
                    if timer > t_end
                    else "within the run, and again after each backoff"
                )
                ev.append(
                    f"its retransmission timer fires at {human(timer, TIME)}, {when} "
                    f"(RTO {human(e['rto_ns'], TIME)}, backed off {e['backoff']} times)"
                )
            return cls(
                "timeout",
                f"host {host}'s retransmission timer",
                host,
                what,
                tuple(ev),
                place,
                reason,
            )
        closed = [(h, e) for h, ends in tcp.items() for e in ends if e["unsent"] > 0]
        if closed:
            host, e = closed[0]
            peer = "rx" if host == "tx" else "tx"
            ev = [
                f"host {host} has {_bytes(e['unsent'])} to send and nothing in flight",
                f"the window host {peer} offers is {_bytes(e['peer_window'])}",
                *drops,
            ]
            return cls("window", f"the receive window host {peer} offers", peer, what, tuple(ev))
        if drops:
            return cls("loss", "packet loss", "", what, tuple(drops), place, reason)
        return cls(
            "app",
            "the application: it has nothing more to send",
            "tx",
            what,
            ("no data is queued or in flight", *drops),
        )


def _bytes(n: float) -> str:
    return human(n, SIZE, 3)
