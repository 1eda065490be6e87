"""iperf3 ``--json`` reports as plain dataclasses (time in ns, rates in bit/s, sizes in bytes)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from cpasim.errors import CpasimError, shown
from cpasim.inputs import read_text


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
    text = read_text(path, "iperf3 report")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CpasimError(f"{path}: not JSON, expected iperf3 --json output ({exc})") from None
    except RecursionError:
        raise CpasimError(f"{path}: JSON nested too deeply for an iperf3 report") from None
    except ValueError:  # an integer of more than 4300 digits
        raise CpasimError(f"{path}: a number too long for an iperf3 report") from None
    if not isinstance(doc, dict):
        raise CpasimError(f"{path}: expected a JSON object from iperf3 --json")
    if doc.get("error") and not doc.get("intervals"):
        raise CpasimError(f"{path}: iperf3 reported an error: {shown(doc['error'])}")
    return _parse(str(path), _Node(doc, "", str(path)))


class _Node:
    """A JSON object of the report, reading each field with the type iperf3 writes;
    a missing or mistyped field is an error naming its path (``end.sum_sent.bytes``)."""

    def __init__(self, value: dict, where: str, path: str) -> None:
        self.value, self.where, self.path = value, where, path

    def _name(self, key: str | int) -> str:
        if isinstance(key, int):
            return f"{self.where}[{key}]"
        return f"{self.where}.{key}" if self.where else key

    def _fail(self, key: str | int, expected: str, got: object = None) -> CpasimError:
        found = "missing" if got is _MISSING else f"{json.dumps(got)[:40]}"
        return CpasimError(
            f"{self.path}: {self._name(key)} is {found}; expected {expected} "
            "(not an iperf3 --json report?)"
        )

    def _get(self, key: str, optional: bool, expected: str = "a value"):
        v = self.value.get(key, _MISSING)
        if v is _MISSING or v is None:
            if optional:
                return None
            raise self._fail(key, expected, v)
        return v

    def node(self, key: str, optional: bool = False) -> _Node | None:
        v = self._get(key, optional, "an object")
        if v is None:
            return None
        if not isinstance(v, dict):
            raise self._fail(key, "an object", v)
        return _Node(v, self._name(key), self.path)

    def nodes(self, key: str, optional: bool = False) -> list[_Node]:
        v = self._get(key, optional)
        if v is None:
            return []
        if not isinstance(v, list):
            raise self._fail(key, "a list", v)
        out = []
        for i, item in enumerate(v):
            if not isinstance(item, dict):
                raise _Node({}, self._name(key), self.path)._fail(i, "an object", item)
            out.append(_Node(item, f"{self._name(key)}[{i}]", self.path))
        return out

    def number(self, key: str, optional: bool = False) -> float | None:
        """A finite, non-negative number (iperf3 writes no negative figure)."""
        v = self._get(key, optional)
        if v is None:
            return None
        ok = isinstance(v, (int, float)) and not isinstance(v, bool)
        if not ok or not (0 <= v <= _LARGEST):  # NaN fails both comparisons
            raise self._fail(key, "a finite number >= 0", v)
        return v

    def integer(self, key: str, optional: bool = False) -> int | None:
        v = self.number(key, optional)
        if v is None:
            return None
        if v != int(v):
            raise self._fail(key, "a whole number", v)
        return int(v)

    def text(self, key: str, optional: bool = False) -> str | None:
        v = self._get(key, optional)
        if v is None:
            return None
        if not isinstance(v, (str, int)) or isinstance(v, bool):
            raise self._fail(key, "a string", v)
        return str(v)[:200]

    def flag(self, key: str) -> bool:
        v = self._get(key, True)
        if v is None:
            return False
        if not isinstance(v, (bool, int)):
            raise self._fail(key, "0, 1, true or false", v)
        return bool(v)


_MISSING = object()
#: Larger than any figure a test could report (bytes, bit/s, seconds), small enough
#: that nanoseconds and bits stay exact integers and finite floats.
_LARGEST = 1e18


def _us_to_ns(v: float | None) -> int | None:
    return None if v is None else int(round(v * 1000))


def _parse(path: str, doc: _Node) -> IperfRun:
    start = doc.node("start")
    test = start.node("test_start")
    connected = start.nodes("connected")
    if not connected:
        raise CpasimError(f"{path}: start.connected is empty; expected the test's connections")
    conn = connected[0]
    intervals = []
    for iv in doc.nodes("intervals", optional=True):
        s = iv.node("sum")
        streams = iv.nodes("streams", optional=True)
        first = streams[0] if streams else _Node({}, iv.where + ".streams[0]", path)
        intervals.append(
            IperfInterval(
                start_ns=int(round(s.number("start") * 1e9)),
                end_ns=int(round(s.number("end") * 1e9)),
                bytes=s.integer("bytes"),
                bps=float(s.number("bits_per_second")),
                retransmits=s.integer("retransmits", optional=True),
                rtt_ns=_us_to_ns(first.number("rtt", optional=True)),  # tcp_info RTT, in us
                rttvar_ns=_us_to_ns(first.number("rttvar", optional=True)),
                snd_cwnd=first.integer("snd_cwnd", optional=True),
                snd_wnd=first.integer("snd_wnd", optional=True),
                omitted=s.flag("omitted"),
            )
        )
    # A test that died before its end has "end": {} (or, edited, null): no totals.
    end = doc.node("end", optional=True) or _Node({}, "end", path)

    def totals(key):
        t = end.node(key, optional=True)
        if t is None:
            return None
        return IperfTotals(
            float(t.number("seconds")),
            t.integer("bytes"),
            float(t.number("bits_per_second")),
            t.integer("retransmits", optional=True),
        )

    streams = end.nodes("streams", optional=True)
    sender = (streams[0].node("sender", optional=True) if streams else None) or _Node(
        {}, "end.streams[0].sender", path
    )
    cpu = end.node("cpu_utilization_percent", optional=True) or _Node({}, "end.cpu", path)
    protocol = test.text("protocol")
    if protocol not in ("TCP", "UDP", "SCTP"):
        raise test._fail("protocol", '"TCP" or "UDP"', protocol)
    return IperfRun(
        path=path,
        version=start.text("version", optional=True) or "",
        protocol=protocol,
        num_streams=test.integer("num_streams"),
        duration_s=float(test.number("duration")),
        blksize=test.integer("blksize"),
        reverse=test.flag("reverse"),
        local=f"{conn.text('local_host')}:{conn.integer('local_port')}",
        remote=f"{conn.text('remote_host')}:{conn.integer('remote_port')}",
        mss=start.integer("tcp_mss_default", optional=True),
        sock_bufsize=start.integer("sock_bufsize", optional=True),
        sndbuf_actual=start.integer("sndbuf_actual", optional=True),
        rcvbuf_actual=start.integer("rcvbuf_actual", optional=True),
        congestion=end.text("sender_tcp_congestion", optional=True),
        intervals=intervals,
        sent=totals("sum_sent") or totals("sum"),
        received=totals("sum_received"),
        min_rtt_ns=_us_to_ns(sender.number("min_rtt", optional=True)),
        mean_rtt_ns=_us_to_ns(sender.number("mean_rtt", optional=True)),
        max_rtt_ns=_us_to_ns(sender.number("max_rtt", optional=True)),
        cpu_host_percent=cpu.number("host_total", optional=True),
        cpu_remote_percent=cpu.number("remote_total", optional=True),
    )
