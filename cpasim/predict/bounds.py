"""Busy-time bounds for the shared resources whose arbitration order predictions free.

Predictions break the CPU core pools and the PCIe channels
(:data:`~cpasim.predict.transforms_table.REORDERED_POOLS`): the order in which
SMs took them in the baseline is an accident of its timing, and kept it
re-imposes the baseline's schedule on the changed system.  Freed, a core or a
channel could serve two SMs at once, so the utilization law puts the limit
back: a run cannot be shorter than the work its busiest resource must do,
divided by that resource's units.  The work is the baseline's active time in
the states that hold the resource, with the prediction's scale factors
applied; the units come from the changed configuration (so ``cpu.cores``
acts here).

============================ ====================================================== =====
resource                     states that hold it                                     units
============================ ====================================================== =====
``{sys}:CPU cores``          every CPU state (:data:`CPU_PATTERNS`)                  cores
``{sys}:PCIe down``          NIC TX ``DMA packet``/``DMA descriptors``, NIC RX        1
                             ``DMA descriptors``, TX Desc Fetch ``DMA
                             descriptors`` (DMA reads: data comes down); an I/O-bus
                             copy engine's ``DMA next address``, ``DMA
                             descriptor``, ``read``
``{sys}:PCIe up``            NIC RX ``DMA packet``, NIC TX ``writeback``, TX Desc     1
                             Writeback ``writeback``; an I/O-bus copy engine's
                             ``write``, ``DMA status``
============================ ====================================================== =====

The NIC states and their direction are the model's
(:data:`cpasim.model.bus_rules.BUS_STATES`).  With ``cpu.irq_cores`` the cores form
two pools (``CPU cores``, ``IRQ cores``); the bound still divides all CPU work by all
of ``cpu.cores``, so it is looser there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from cpasim.analysis import Transforms
from cpasim.analysis.transforms import NameSet
from cpasim.config import ALL_HOSTS, Config
from cpasim.model.bus_rules import BUS_STATES, READ, WRITE
from cpasim.model.buses import bus_kind
from cpasim.predict.transforms_table import CPU_PATTERNS, Lookup


@dataclass(frozen=True)
class Resource:
    name: str  # "{sys}:..." like the queue it stands for
    patterns: tuple[str, ...]  # states holding it, "{sys}" filled in
    units: Callable[[Lookup], int]
    present: Callable[[Lookup], bool] = lambda v: True


def _pcie(v: Lookup) -> bool:
    """A bus of two channels, each a resource of its own (PCIe's up and down)."""
    return bus_kind(v("bus.kind")).channels


def _bus_states(access: str) -> tuple[str, ...]:
    """The NIC states holding the channel of one kind of access (reads' data comes
    down, writes go up), as :data:`~cpasim.model.bus_rules.BUS_STATES` declares them."""
    return tuple(f"{{sys}}:{sm}:{state}" for sm, state, a in BUS_STATES if a == access)


RESOURCES: tuple[Resource, ...] = (
    Resource("{sys}:CPU cores", CPU_PATTERNS, lambda v: v("cpu.cores")),
    Resource("{sys}:PCIe down", _bus_states(READ), lambda v: 1, _pcie),
    Resource("{sys}:PCIe up", _bus_states(WRITE), lambda v: 1, _pcie),
)


def _parts(name: str) -> tuple[str, str, str, str]:
    """Display name ``sys:sm[#inst]:state`` → ``(sys, sm, inst, state)``."""
    sys, sm, state = name.split(":", 2)
    sm, _, inst = sm.partition("#")
    return sys, sm, inst or "0", state


def holding(active: Mapping[str, float]) -> dict[str, float]:
    """The entries of ``active`` (``sys:sm:state`` → ns) whose state holds one of the
    :data:`RESOURCES`, whatever the configuration: all :func:`busy` reads of them."""
    out = {}
    for host in ALL_HOSTS:
        hosted = [name for name in active if name.startswith(f"{host}:")]
        names = NameSet.of_states(_parts(name) for name in hosted)
        patterns = [p.format(sys=host) for res in RESOURCES for p in res.patterns]
        for name, held in zip(hosted, names.first(patterns), strict=True):
            if held is not None:
                out[name] = active[name]
    return out


def busy(cfg: Config, tf: Transforms, active: Mapping[str, float]) -> dict[str, float]:
    """Resource name → its work per unit (ns) in ``cfg`` with ``tf`` applied.

    ``active``: baseline active ns per ``sys:sm:state`` over the measured interval
    (after ``sim.warmup``, :func:`cpasim.predict.runs.measured_active`), the
    interval the path lengths it bounds are taken over.
    """
    flat = cfg.flat()
    out = {}
    for host in ALL_HOSTS:

        def v(key, host=host):
            return flat.get(f"hosts.{host}.{key}", flat.get(key))

        # Every resource pattern names its host: the other host's states never match.
        hosted = [(_parts(name), ns) for name, ns in active.items() if name.startswith(f"{host}:")]
        if not hosted:  # a host the run does not have (the forwarding host, direct)
            continue
        names = NameSet.of_states(parts for parts, _ in hosted)
        factors = tf.state_factors(names)
        for res in RESOURCES:
            if not res.present(v):
                continue
            holds = names.first([p.format(sys=host) for p in res.patterns])
            work = sum(
                ns * f
                for (_, ns), f, held in zip(hosted, factors, holds, strict=True)
                if held is not None
            )
            out[res.name.format(sys=host)] = work / res.units(v)
    return out
