"""iperf3 ``--json`` reports as plain dataclasses (time in ns, rates in bit/s, sizes in bytes)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from cpasim.errors import CpasimError


@dataclass(frozen=True)
class IperfInterval:
    """One reporting interval summed over the streams (TCP figures from the first stream)."""

    start_ns: int
    end_ns: int
    bytes: int
    bps: float
    retransmits: int | None = None  # sender side, TCP only
    rtt_ns: int | None = None  # smoothed RTT the kernel reports (tcp_info), when present
    rttvar_ns: int | None = None
    snd_cwnd: int | None = None  # bytes
    snd_wnd: int | None = None  # bytes
    omitted: bool = False


@dataclass(frozen=True)
class IperfTotals:
    """``end.sum_sent`` / ``end.sum_received``."""

    seconds: float
    bytes: int
    bps: float
    retransmits: int | None = None


@dataclass(frozen=True)
class IperfRun:
    path: str
    version: str
    protocol: str  # "TCP" or "UDP"
    num_streams: int
    duration_s: float
    blksize: int
    reverse: bool
    local: str  # "addr:port" of the first stream
    remote: str
    mss: int | None  # tcp_mss_default
    sock_bufsize: int | None  # -w as requested (0 = kernel default)
    sndbuf_actual: int | None
    rcvbuf_actual: int | None
    congestion: str | None  # sender_tcp_congestion
    intervals: list[IperfInterval] = field(default_factory=list)
    sent: IperfTotals | None = None
    received: IperfTotals | None = None
    min_rtt_ns: int | None = None
    mean_rtt_ns: int | None = None
    max_rtt_ns: int | None = None
    cpu_host_percent: float | None = None
    cpu_remote_percent: float | None = None

    def to_json(self) -> dict:
        return asdict(self)


def read_iperf(path: str | Path) -> IperfRun:
    """Read one iperf3 ``--json`` report; raises :class:`CpasimError` naming the bad part."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except OSError as exc:
        raise CpasimError(f"{path}: cannot read iperf3 report ({exc.strerror or exc})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CpasimError(f"{path}: not JSON, expected iperf3 --json output ({exc})") from None
    if not isinstance(doc, dict):
        raise CpasimError(f"{path}: expected a JSON object from iperf3 --json")
    if doc.get("error") and not doc.get("intervals"):
        raise CpasimError(f"{path}: iperf3 reported an error: {doc['error']}")
    try:
        return _parse(str(path), doc)
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise CpasimError(f"{path}: not an iperf3 --json report (missing or bad {exc})") from None


def _us_to_ns(v) -> int | None:
    return None if v is None else int(round(v * 1000))


def _parse(path: str, doc: dict) -> IperfRun:
    start = doc["start"]
    test = start["test_start"]
    conn = start["connected"][0]
    intervals = []
    for iv in doc.get("intervals", []):
        s = iv["sum"]
        first = (iv.get("streams") or [{}])[0]
        intervals.append(
            IperfInterval(
                start_ns=int(round(s["start"] * 1e9)),
                end_ns=int(round(s["end"] * 1e9)),
                bytes=int(s["bytes"]),
                bps=float(s["bits_per_second"]),
                retransmits=s.get("retransmits"),
                rtt_ns=_us_to_ns(first.get("rtt")),  # iperf3 reports tcp_info RTT in us
                rttvar_ns=_us_to_ns(first.get("rttvar")),
                snd_cwnd=first.get("snd_cwnd"),
                snd_wnd=first.get("snd_wnd"),
                omitted=bool(s.get("omitted", False)),
            )
        )
    end = doc.get("end", {})

    def totals(key):
        t = end.get(key)
        if t is None:
            return None
        return IperfTotals(
            float(t["seconds"]), int(t["bytes"]), float(t["bits_per_second"]), t.get("retransmits")
        )

    sender = ((end.get("streams") or [{}])[0]).get("sender", {})
    cpu = end.get("cpu_utilization_percent", {})
    return IperfRun(
        path=path,
        version=start.get("version", ""),
        protocol=test["protocol"],
        num_streams=int(test["num_streams"]),
        duration_s=float(test["duration"]),
        blksize=int(test["blksize"]),
        reverse=bool(test.get("reverse", 0)),
        local=f"{conn['local_host']}:{conn['local_port']}",
        remote=f"{conn['remote_host']}:{conn['remote_port']}",
        mss=start.get("tcp_mss_default"),
        sock_bufsize=start.get("sock_bufsize"),
        sndbuf_actual=start.get("sndbuf_actual"),
        rcvbuf_actual=start.get("rcvbuf_actual"),
        congestion=end.get("sender_tcp_congestion"),
        intervals=intervals,
        sent=totals("sum_sent") or totals("sum"),
        received=totals("sum_received"),
        min_rtt_ns=_us_to_ns(sender.get("min_rtt")),
        mean_rtt_ns=_us_to_ns(sender.get("mean_rtt")),
        max_rtt_ns=_us_to_ns(sender.get("max_rtt")),
        cpu_host_percent=cpu.get("host_total"),
        cpu_remote_percent=cpu.get("remote_total"),
    )
