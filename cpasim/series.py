"""Time series of one run: the state of connections and queues at regular instants.

As ns-3's trace sources or iperf3's intervals: one row every ``interval`` ns of
simulated time with each TCP connection's congestion state and buffers, the
occupancy of every queue a packet crosses, and the goodput of the interval.
With ``[[flows]]`` also each flow's goodput over the row (``c<i>.goodput_bps``) and
the mean round trip of the pings or calls of a ping or rpc flow that ended in it
(``c<i>.latency_ns``).

The sampler is not a SimPy process: :func:`cpasim.simulate.simulate` gives it
the pauses between events (it processes every event before a sample instant,
then reads the state), so it schedules nothing and a run with a series is
bit-identical to one without, event count included.  Without a series nothing
of this module runs.

Sample instants lie on a grid anchored at the warm-up, ``warmup + k * interval``
(those after 0), plus the run's end when it falls between two of them.  A row
shows the state after every event *before* its instant; its ``goodput_bps`` is
the bytes the receiving applications read since the previous row over that
row's length (``interval_ns``).  So the average of ``goodput_bps`` over the
rows after the warm-up, weighted by ``interval_ns``, is the run's goodput.
"""

from __future__ import annotations

import csv
import errno
import io
import math
from collections.abc import Callable
from pathlib import Path

from cpasim.config import flow_tables as flow_config
from cpasim.errors import CpasimError
from cpasim.files import replace_atomically, write_text_atomically
from cpasim.inputs import InputError, open_input
from cpasim.model.cc.base import INFINITE_SSTHRESH
from cpasim.model.flow_kinds import flow_kind
from cpasim.units import parse_quantity

#: Rows a run gets with the default interval (about; the interval is rounded).
DEFAULT_ROWS = 500
SUFFIXES = (".csv", ".parquet")


def nice_interval(span_ns: float, rows: int = DEFAULT_ROWS) -> float:
    """``span_ns / rows`` rounded down to 1, 2 or 5 times a power of ten (at least 1 ns)."""
    raw = max(span_ns / rows, 1.0)
    power = 10 ** math.floor(math.log10(raw))
    return float(max(m for m in (1, 2, 5) if m * power <= raw) * power)


def default_interval(cfg) -> float:
    """About DEFAULT_ROWS rows over the measured part of the run.  A run with a byte
    target is expected to last ``bytes`` at the link's rate (with ``[[flows]]``, the
    bulk flows' bytes at the narrower of the link's and the bottleneck's)."""
    if cfg.flows:
        if flow_config.sized(cfg.flat(), cfg.flows):
            total = sum(
                g.count * cfg.flow_config(t).workload.bytes
                for t, g in enumerate(cfg.flows)
                if flow_kind(g.kind).bulk
            )
            rate = min(r for r in (cfg.link.rate, cfg.bottleneck.rate) if r)
            return nice_interval(total * 8e9 / rate)
        return nice_interval(cfg.sim.duration - cfg.sim.warmup)
    if cfg.workload.bytes:
        span = cfg.workload.bytes * 8e9 / cfg.link.rate
    else:
        span = cfg.sim.duration - cfg.sim.warmup
    return nice_interval(span)


def parse_interval(value, what: str = "--interval") -> float:
    """A sample interval (ns, or a time such as ``"100us"``); positive."""
    ns = float(parse_quantity(value, "time", what=what))
    if not ns > 0:
        raise CpasimError(f"{what} = {value!r}: expected a positive time such as '100us'")
    return ns


def _none_as_nan(x) -> float:
    return math.nan if x is None else float(x)


def _tcp_columns(host: str, c) -> list[tuple[str, Callable[[], float]]]:
    """One connection's columns; RenoSender and LinuxSender keep ssthresh differently."""
    s, prefix = c.sender, f"{host}.{c.conn}."
    if hasattr(s, "tp"):  # LinuxSender: tcp_sock in packets, "infinite" before a loss

        def ssthresh():
            t = s.tp.snd_ssthresh
            return math.nan if t >= INFINITE_SSTHRESH else float(t * s.mss)
    else:

        def ssthresh():
            return math.nan if s.ssthresh >= 1 << 40 else float(s.ssthresh)

    return [
        (prefix + "cwnd_bytes", lambda: float(s.cwnd)),
        (prefix + "ssthresh_bytes", ssthresh),
        (prefix + "snd_wnd_bytes", lambda: float(s.snd_wnd)),  # the peer's advertised window
        (prefix + "inflight_bytes", lambda: float(s.flight)),
        (prefix + "srtt_ns", lambda: _none_as_nan(s.srtt)),
        (prefix + "sndbuf_bytes", lambda: float(c.sndbuf_size - c.sndbuf.level)),
        (prefix + "rcvbuf_bytes", lambda: float(c.rcvbuf.level + c.rcv_in_copy)),
    ]


def _flow_columns(flows) -> list[tuple[str, Callable[[float], float]]]:
    """With [[flows]]: each flow's goodput over the row (``c<i>.goodput_bps``) and, for
    ping and rpc flows, the mean round trip of those that ended in it
    (``c<i>.latency_ns``, empty when none did); each is called with the row's length."""
    cols = []
    for f in flows:
        stats, last = f.stats, {"read": 0, "trips": 0, "trips_ns": 0.0}

        def goodput(span, stats=stats, last=last) -> float:
            read = stats.read
            bits = (read - last["read"]) * 8e9
            last["read"] = read
            return bits / span

        kind = flow_kind(f.kind)
        if kind.tcp:  # a ping delivers nothing
            cols.append((f"{f.conn}.goodput_bps", goodput))
        if kind.bulk:
            continue

        def latency(span, stats=stats, last=last) -> float:
            n = stats.trips - last["trips"]
            total = stats.trips_ns - last["trips_ns"]
            last["trips"], last["trips_ns"] = stats.trips, stats.trips_ns
            return total / n if n else math.nan

        cols.append((f"{f.conn}.latency_ns", latency))
    return cols


def _device_columns(h: str, dev, nic_params, caps: dict[str, float]) -> list:
    """The queues of one network device, named after ``h``; their capacities into ``caps``."""
    rings, nic = dev.rings, dev.nic
    q, tx_fifo = dev.qdisc, nic.tx_fifo
    caps[f"{h}.qdisc_pkts"] = q.capacity
    caps[f"{h}.tx_ring_desc"] = nic_params.tx_ring
    caps[f"{h}.rx_ring_pkts"] = nic_params.rx_ring
    caps[f"{h}.tx_fifo_frames"] = tx_fifo.capacity
    caps[f"{h}.rx_fifo_bytes"] = nic.rx_fifo_size
    return [
        (f"{h}.qdisc_pkts", lambda q=q: float(len(q.items))),
        (f"{h}.tx_ring_desc", lambda r=rings: float(r.tx_ring.level)),
        (f"{h}.rx_ring_pkts", lambda r=rings: float(len(r.rx_ring.items))),
        (f"{h}.tx_fifo_frames", lambda f=tx_fifo: float(len(f.items))),
        (f"{h}.rx_fifo_bytes", lambda n=nic: float(n.rx_fifo_bytes)),
        # Received packets NAPI handed up, waiting for the stack (no bound modelled).
        (f"{h}.rx_backlog_pkts", lambda b=dev.rx_out: float(len(b.items))),
    ]


def _queue_columns(system) -> tuple[list, dict[str, float]]:
    """Every queue's occupancy, and the capacity of those that have one."""
    cols: list[tuple[str, Callable[[], float]]] = []
    caps: dict[str, float] = {}
    for h, host in system.hosts.items():
        # A forwarding host's interfaces are named as the analyzer names their
        # instances: fw (the one facing tx) and fw#1.
        for i, dev in enumerate(host.devices):
            cols += _device_columns(f"{h}#{i}" if i else h, dev, host.hc.nic, caps)
        if not host.devices:  # an ideal host (host.detail): a qdisc and no device
            q = host.dev.qdisc
            caps[f"{h}.qdisc_pkts"] = q.capacity
            cols.append((f"{h}.qdisc_pkts", lambda q=q: float(len(q.items))))
    for box in system.bottlenecks:
        name = f"bottleneck.{box.name}_bytes"
        if box.fq is not None:
            cols.append((name, lambda fq=box.fq: float(fq.backlog)))
        else:
            cols.append((name, lambda b=box: float(b.backlog)))
        caps[name] = box.limit
    return cols, caps


class Sampler:
    """Reads the state of a :class:`~cpasim.model.system.System` at given instants."""

    def __init__(self, system, interval_ns: float) -> None:
        if not interval_ns > 0:
            raise CpasimError(f"--interval: expected a positive time, got {interval_ns:g} ns")
        self.interval = float(interval_ns)
        self.stats = system.stats
        # Instants warm-up + j * interval, the first after 0; computed from the warm-up
        # so that it is an instant exactly and rows split the run there.
        self._origin = warm = system.cfg.sim.warmup
        self._j = -math.floor(warm / self.interval)
        if warm + self._j * self.interval <= 0:
            self._j += 1
        self.next_ns = warm + self._j * self.interval
        cols: list[tuple[str, Callable[[], float]]] = []
        for h, host in system.hosts.items():
            for c in host.tcp:
                cols += _tcp_columns(h, c)
        queues, self.capacities = _queue_columns(system)
        cols += queues
        per_flow = _flow_columns(system.flows)
        self.names = [
            "time_ns",
            "interval_ns",
            *(n for n, _ in cols),
            *(n for n, _ in per_flow),
            "goodput_bps",
        ]
        self._getters = [g for _, g in cols]
        self._per_flow = [g for _, g in per_flow]
        self.rows: list[list[float]] = []
        self._last_ns = 0.0
        self._last_read = 0

    def sample(self, now: float) -> None:
        """A row for ``now``: the state after every event before it."""
        span = now - self._last_ns
        read = self.stats.read
        goodput = (read - self._last_read) * 8e9 / span
        self.rows.append(
            [now, span, *(g() for g in self._getters), *(g(span) for g in self._per_flow), goodput]
        )
        self._last_ns, self._last_read = now, read
        self._j += 1
        self.next_ns = self._origin + self._j * self.interval

    def finish(self, end_ns: float) -> None:
        """The last, possibly shorter, row at the run's end."""
        if end_ns > self._last_ns:
            self.sample(end_ns)

    # -- output ------------------------------------------------------------------------
    def to_frame(self):
        try:
            import pandas as pd
        except ImportError:
            raise CpasimError(
                "the series as a DataFrame needs pandas (pip install 'cpasim[table]')"
            ) from None

        frame = pd.DataFrame(self.rows, columns=self.names)
        frame.attrs["capacities"] = dict(self.capacities)
        return frame

    def write(self, path: str | Path) -> None:
        write_series(path, self.names, self.rows)


def check_path(path: str | Path) -> Path:
    """Refuse an unknown extension, or Parquet without pyarrow, before simulating."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise CpasimError(
            f"{path}: unknown series format {suffix or '(no extension)'!r}; "
            f"expected one of {', '.join(SUFFIXES)}"
        )
    if suffix == ".parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise CpasimError(
                f"{path}: writing Parquet needs pyarrow (pip install pyarrow), or use .csv"
            ) from None
    return path


def write_series(path: str | Path, names: list[str], rows: list[list[float]]) -> None:
    path = check_path(path)
    if path.suffix.lower() == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.table({n: [r[i] for r in rows] for i, n in enumerate(names)})
        replace_atomically(path, lambda tmp: pq.write_table(table, tmp))
        return
    buf = io.StringIO()
    out = csv.writer(buf, lineterminator="\n")
    out.writerow(names)
    for row in rows:
        out.writerow(["" if math.isnan(x) else repr(x) for x in row])
    write_text_atomically(path, buf.getvalue())


def read_series(path: str | Path):
    """A series file as a pandas DataFrame."""
    import pandas as pd

    path = Path(path)
    try:
        fh = open_input(path, "series")
    except InputError as exc:
        if exc.errno == errno.ENOENT:
            raise CpasimError(f"{path}: no such series file") from None
        raise
    try:
        with fh:
            if path.suffix.lower() == ".parquet":
                return pd.read_parquet(fh)
            return pd.read_csv(fh)
    except (ValueError, OSError) as exc:
        raise CpasimError(f"{path}: cannot read series: {exc}") from None
