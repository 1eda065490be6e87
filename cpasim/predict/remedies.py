"""Bottleneck → the configuration change that removes it (the ladder's step).

Saidi's figure 6.2 walks a sequence of bottlenecks, each removed by an
ordinary parameter change.  :func:`diagnose` names the kind of bottleneck of a
critical path; :data:`REMEDIES` says what to change for each kind:

============== ============================================ =================================
kind           recognised by                                remedy
============== ============================================ =================================
``link``       ``*:MAC:transmit`` (serialization)           ``link.rate`` × 10
``bottleneck`` ``*:Bottleneck:serialize``                   ``bottleneck.rate`` × 10
``window``     a resource loop through ``Send window`` or   the socket buffers ≥ 4 × bandwidth-
               ``Send buffer``                              delay product: ``tcp.wmem`` and
                                                            ``tcp.rmem`` (fixed buffers), else
                                                            ``tcp.sndbuf``/``tcp.rcvbuf`` where
                                                            set, else the autotuning limits
                                                            ``tcp.wmem_max``/``tcp.rmem_max``
``bus``        NIC DMA states, a register write waiting     ``pcie.lanes`` × 4 on that host
               for M5's bus, a busy PCIe channel bound,
               loops through ``PCI bus``                    (then the next generation)
``cores``      a busy ``CPU cores`` bound, or CPU states    ``cpu.cores`` + 1 on that host
               with a loop through ``CPU cores``
``cpu``        CPU states, no core contention               ``cpu.freq`` × 2 on that host
``tx_ring``    a loop through ``TX free desc``              ``nic.tx_ring`` × 2
``rx_ring``    a loop through ``RX free desc``              ``nic.rx_ring`` × 2
``qdisc``      a loop through ``qdisc``                     ``qdisc.len`` × 2
``tx_fifo``    a loop through ``TX FIFO``                   ``nic.tx_fifo`` × 2
============== ============================================ =================================

Propagation (``*:Link:propagate``) and the communication latency through the
wire are out of a designer's hands: when one of them is the most critical
entry, the resource loops of the path say which resource makes the path wait
for the round trip (Saidi 6.2.2: the TCP window), and that resource is the
bottleneck.  Entries nothing here recognises are skipped in favour of the next.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fnmatch import fnmatchcase

from cpasim.config import Config, spec_of
from cpasim.predict.runs import PathSummary
from cpasim.predict.transforms_table import CPU_STATES

LATENCY = "latency"

#: State (``sys:sm:state``) patterns → kind.
STATE_KINDS: tuple[tuple[str, str], ...] = (
    ("*:MAC:transmit", "link"),
    ("*:Bottleneck:serialize", "bottleneck"),
    ("*:Link:propagate", LATENCY),
    ("*:NIC TX:DMA *", "bus"),
    ("*:NIC RX:DMA *", "bus"),
    ("*:NIC TX:writeback", "bus"),
    ("*:TX Desc Fetch:DMA *", "bus"),
    ("*:TX Desc Writeback:writeback", "bus"),
    ("*:*:mmio write", "bus"),  # a register write waiting for M5's bus
    # Linux 2.6.13's send call: its time is IP Send's work on the caller's core.
    ("*:*:ip_push_pending_frames", "cpu"),
    ("*:IP Send:qdisc_restart", "cpu"),
    ("*:Driver TX:xmit", "cpu"),
    ("*:NAPI:poll", "cpu"),
    *((f"*:*:{s}", "cpu") for s in CPU_STATES),
)

#: Queue (``qsys:q``) patterns → kind, for communication edges and resource loops.
QUEUE_KINDS: tuple[tuple[str, str], ...] = (
    ("*:wire*", LATENCY),
    ("*:Send window*", "window"),
    ("*:Send buffer*", "window"),
    # PCIe channel loops are arbitration-order artifacts that predictions free
    # (transforms_table.REORDERED_POOLS); the DMA states themselves name the bus.
    ("*:PCI bus", "bus"),
    ("*:CPU cores", "cores"),
    ("*:TX free desc", "tx_ring"),
    ("*:RX free desc", "rx_ring"),
    ("*:qdisc", "qdisc"),
    ("*:TX FIFO", "tx_fifo"),
)

#: Window remedy: buffers at least this many bandwidth-delay products.
BDP_FACTOR = 4


@dataclass(frozen=True)
class Diagnosis:
    kind: str
    sys: str  # host of the resource ("tx"/"rx"), or "" for the link
    reason: str


def _kind(name: str, table) -> str | None:
    for pattern, kind in table:
        if fnmatchcase(name, pattern):
            return kind
    return None


def _edge_queue(edge: str) -> str | None:
    """``"a:X->b:Y[qsys:q]"`` → ``"qsys:q"``."""
    if "[" in edge and edge.endswith("]"):
        return edge[edge.index("[") + 1 : -1]
    return None


def _loop_kind(path: PathSummary, exclude: tuple[str, ...] = ()) -> tuple[str, str, str] | None:
    for loop in path.loops:
        q = _edge_queue(loop["edge"])
        kind = _kind(q, QUEUE_KINDS) if q else None
        if kind and kind != LATENCY and kind not in exclude:
            return kind, q.split(":", 1)[0], f"resource loop {loop['edge']} ({loop['count']}×)"
    return None


#: Resources whose busy-time bound (cpasim.predict.bounds) can set a path's length.
RESOURCE_KINDS: tuple[tuple[str, str], ...] = (("*:CPU cores", "cores"), ("*:PCIe *", "bus"))


def diagnose(path: PathSummary) -> Diagnosis | None:
    """The kind of bottleneck of ``path`` (see the module docstring), or None."""
    kind = _kind(path.bottleneck or "", RESOURCE_KINDS) if path.bottleneck in path.busy_ns else None
    if kind is not None:
        sys = path.bottleneck.split(":", 1)[0]
        return Diagnosis(kind, sys, f"{path.bottleneck} busy the whole run (utilization bound)")
    for entry in path.most_critical:
        name = entry["name"]
        share = f"{name} ({entry['share']:.0%} of the critical path)"
        if "->" in name:
            q = _edge_queue(name)
            kind = _kind(q, QUEUE_KINDS) if q else None
        else:
            kind = _kind(name, STATE_KINDS)
        if kind is None:
            continue
        sys = name.split(":", 1)[0]
        if kind == LATENCY:
            found = _loop_kind(path)
            if found:
                k, s, why = found
                return Diagnosis(k, s, f"{share} waits on the round trip; {why}")
            continue
        if kind == "cpu":
            found = _loop_kind(path)
            if found and found[0] == "cores":
                return Diagnosis("cores", sys, f"{share}; {found[2]}")
        if kind in ("link", "bottleneck"):
            sys = ""
        return Diagnosis(kind, sys, share)
    return None


def _pow2_at_least(n: float) -> int:
    k = 1
    while k < n:
        k *= 2
    return k


def _window(cfg: Config, sys: str) -> dict:
    rate = cfg.link.rate
    if 0 < cfg.bottleneck.rate < rate:
        rate = cfg.bottleneck.rate
    bdp = rate / 8 * 2 * cfg.link.delay / 1e9
    want = _pow2_at_least(BDP_FACTOR * bdp)
    keys = [f"hosts.{h}.{key}" for h in ("tx", "rx") for key in _buffer_keys(cfg, h)]
    out = {k: want for k in keys if cfg.value(k) < want}
    if not out:  # already above 4 × BDP and still the bottleneck: grow anyway
        out = {k: 4 * cfg.value(k) for k in keys}
    return out


def _buffer_keys(cfg: Config, h: str) -> tuple[str, ...]:
    """The keys that size host ``h``'s socket buffers (see cpasim.model.sockbuf)."""
    if cfg.value(f"hosts.{h}.tcp.wmem"):
        return ("tcp.wmem", "tcp.rmem")
    return tuple(
        req if cfg.value(f"hosts.{h}.{req}") else limit
        for req, limit in (("tcp.sndbuf", "tcp.wmem_max"), ("tcp.rcvbuf", "tcp.rmem_max"))
    )


def _bus(cfg: Config, sys: str) -> dict:
    lanes = cfg.value(f"hosts.{sys}.pcie.lanes")
    if lanes < 32:
        return {f"hosts.{sys}.pcie.lanes": min(32, lanes * 4)}
    gen = cfg.value(f"hosts.{sys}.pcie.gen")
    return {f"hosts.{sys}.pcie.gen": gen + 1} if gen < 5 else {}


def _times(key: str, factor: float) -> Callable[[Config, str], dict]:
    def remedy(cfg: Config, sys: str) -> dict:
        full = key if not sys else f"hosts.{sys}.{key}"
        value = cfg.value(full) * factor
        return {full: type(cfg.value(full))(value)}

    return remedy


def _plus(key: str, k: int) -> Callable[[Config, str], dict]:
    return lambda cfg, sys: {f"hosts.{sys}.{key}": cfg.value(f"hosts.{sys}.{key}") + k}


#: Kind → remedy(cfg, sys) → {full key: new value in internal units}.
REMEDIES: dict[str, Callable[[Config, str], dict]] = {
    "link": _times("link.rate", 10),
    "bottleneck": _times("bottleneck.rate", 10),
    "window": _window,
    "bus": _bus,
    "cores": _plus("cpu.cores", 1),
    "cpu": _times("cpu.freq", 2),
    "tx_ring": _times("nic.tx_ring", 2),
    "rx_ring": _times("nic.rx_ring", 2),
    "qdisc": _times("qdisc.len", 2),
    "tx_fifo": _times("nic.tx_fifo", 2),
}


@dataclass(frozen=True)
class Remedy:
    diagnosis: Diagnosis
    values: dict  # full key → new value, internal units

    def describe(self) -> str:
        return ", ".join(f"{k}={spec_of(k).format(v)}" for k, v in self.values.items())

    def apply(self, cfg: Config) -> Config:
        return cfg.with_values(self.values, where=f"remedy for {self.diagnosis.kind}")


def remedy_for(cfg: Config, path: PathSummary) -> Remedy | None:
    """The change that removes ``path``'s bottleneck in ``cfg``, or None if none is known."""
    d = diagnose(path)
    if d is None:
        return None
    values = REMEDIES[d.kind](cfg, d.sys)
    return Remedy(d, values) if values else None
