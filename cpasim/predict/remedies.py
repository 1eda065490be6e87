"""Bottleneck kind → the ladder's step: the configuration change that removes it.

Saidi's figure 6.2 walks a sequence of bottlenecks, each removed by an
ordinary parameter change.  :func:`~cpasim.predict.diagnose.diagnose` names the
kind of bottleneck of a critical path; :data:`REMEDIES` says what the ladder
changes for each kind, as Saidi 2009's steps did:

============== =====================================================================
kind           remedy
============== =====================================================================
``link``       ``link.rate`` × 10
``bottleneck`` ``bottleneck.rate`` × 10
``window``     the socket buffers of both hosts ≥ 4 × bandwidth-delay product (the
               Saidi 2009's configuration 3 grew both): ``tcp.wmem`` and ``tcp.rmem``
               (fixed buffers), else ``tcp.sndbuf``/``tcp.rcvbuf`` where set, else
               the autotuning limits ``tcp.wmem_max``/``tcp.rmem_max``
``bus``        ``pcie.lanes`` × 4 on that host (then the next generation)
``cores``      ``cpu.cores`` + 1 on that host
``cpu``        ``cpu.freq`` × 2 on that host
``tx_ring``    ``nic.tx_ring`` × 2
``rx_ring``    ``nic.rx_ring`` × 2
``qdisc``      ``qdisc.len`` × 2
``tx_fifo``    ``nic.tx_fifo`` × 2
============== =====================================================================

:mod:`cpasim.verdict` says the same to a user, changing only the side that binds
(a send-buffer limit only the sender's buffer).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cpasim.config import Config, spec_of
from cpasim.predict.diagnose import Diagnosis, diagnose
from cpasim.predict.runs import PathSummary

__all__ = ["REMEDIES", "Diagnosis", "Remedy", "diagnose", "remedy_for"]

#: Window remedy: buffers at least this many bandwidth-delay products.
BDP_FACTOR = 4


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
