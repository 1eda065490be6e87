"""The kinds of I/O bus (``bus.kind``), each declared once with all it decides.

A host's NIC reaches memory over one of four buses: PCIe (two channels, one per
direction, behind a bridge), legacy PCI (one bus both directions share), an on-die
interconnect (the NIC on the processor die, Saidi 2009's figure 6.6b) or M5's I/O bus
(Saidi 2009's simulator, :mod:`cpasim.model.m5bus`).  A :class:`BusKind` holds what
differs between them: the timing built from the host's ``bus`` and ``pcie`` sections,
the bus object the host gets, and what a what-if, the utilisation bound and a verdict
need to know of it, its own ``bus.*`` keys and the rules a scenario must keep with it.
Nothing else in the package compares ``bus.kind`` to a name: it asks
:func:`bus_kind` for the kind and reads its fields.

``Lookup`` functions (``v("pcie.latency")``) give one host's resolved values, as
:mod:`cpasim.predict.transforms_table` passes them.

The configuration reads this module to list the kinds and check a scenario before
anything is simulated, so it loads none of the simulator: a bus's SimPy parts are
imported when it is built.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cpasim.model.bus_rules import read_round_trip_ns
from cpasim.model.pcie import BusTiming, PcieTiming, PciTiming

if TYPE_CHECKING:
    from cpasim.model.bus import Bus

Lookup = Callable[[str], Any]

#: The on-die interconnect moves one 64-byte block per transaction, as M5's bus does,
#: and pays one header cycle.
ON_DIE_BLOCK = 64
ON_DIE_HEADER_CYCLES = 1.0
#: The on-die interconnect's keys: the NIC's bus with ``bus.kind = "on_die"``, and an
#: on-die copy engine's whatever the NIC's bus.
ON_DIE_KEYS = ("bus.on_die_width", "bus.on_die_clock")


def on_die_timing(bus) -> PciTiming:
    """Timing of the on-die interconnect from a host's ``bus`` section (``bus.on_die_*``):
    a shared channel moving a 64-byte block per transaction, each paying one header
    cycle; a read waits for nothing beyond its transfer.  Also the copy engine's
    interconnect when the engine is on die and the NIC is not."""
    return PciTiming(
        width=bus.on_die_width,
        clock=bus.on_die_clock,
        burst=ON_DIE_BLOCK,
        overhead=ON_DIE_HEADER_CYCLES,
        read_wait=0.0,
        kind="on_die",
        pool="On-die bus",
    )


def _pcie_timing(bus, pcie) -> BusTiming:
    return PcieTiming(
        gen=pcie.gen,
        lanes=pcie.lanes,
        max_payload=pcie.max_payload,
        max_read_request=pcie.max_read_request,
        tlp_overhead=pcie.tlp_overhead,
        latency=pcie.latency,
    )


def _pci_timing(bus, pcie) -> BusTiming:
    return PciTiming(
        width=bus.pci_width // 8,
        clock=bus.pci_clock,
        burst=bus.pci_burst,
        overhead=bus.pci_burst_overhead,
        read_wait=bus.pci_read_wait,
    )


def _m5_timing(bus, pcie) -> BusTiming:
    from cpasim.model.m5bus import m5_timing

    return m5_timing(bus, pcie)


def plain_bus(env, sys: str, timing: BusTiming, tracer, memory) -> Bus:
    """A bus whose DMA also takes its share of the host's memory when one is modelled."""
    from cpasim.model.bus import Bus, MemoryBus

    if memory is None:
        return Bus(env, sys, timing, tracer)
    return MemoryBus(env, sys, timing, tracer, memory)


def _m5_bus(env, sys: str, timing: BusTiming, tracer, memory) -> Bus:
    from cpasim.model import m5bus

    # M5's bridge times a DMA's memory access itself (bus.m5_memory_latency): the
    # configuration refuses memory.bandwidth with this bus, so memory is None here.
    return m5bus.M5Bus(env, sys, timing, tracer)


def _no_rules(v) -> None:
    pass


def _m5_rules(v) -> None:
    p = v.prefix
    if v["memory.bandwidth"]:
        # M5's bridge times a DMA's memory access itself (bus.m5_memory_latency).
        v.refuse(
            f"{p}bus.kind = m5 times memory by bus.m5_memory_latency: "
            f"expected {p}memory.bandwidth = 0"
        )
    if v["bus.m5_backoff_max"] < v["bus.m5_backoff_min"]:
        # The back-off doubles from its minimum up to its maximum.
        v.refuse(
            f"{p}bus.m5_backoff_max ({v.show('bus.m5_backoff_max')}) must be "
            f"at least {p}bus.m5_backoff_min ({v.show('bus.m5_backoff_min')})"
        )


def _no_time(v: Lookup) -> float:
    return 0.0


def _posted_write(v: Lookup) -> float:
    """The CPU's fixed stall for a register write posted on the bus."""
    return v("pcie.mmio_latency")


def _pcie_read_round_trip(v: Lookup) -> float:
    """A DMA read's bridge round trip, which the link's bandwidth does not change."""
    return read_round_trip_ns(v("pcie.latency"))


def _m5_round_trip(v: Lookup) -> float:
    """On M5's bus a DMA, read or write, waits for its responses: the bridge both ways
    and the memory (:mod:`cpasim.model.m5bus`)."""
    return read_round_trip_ns(v("pcie.latency")) + v("bus.m5_memory_latency")


def _lanes_then_gen(v: Lookup) -> dict[str, Any]:
    """A faster PCIe link: four times the lanes (up to x32), else the next generation."""
    lanes = v("pcie.lanes")
    if lanes < 32:
        return {"pcie.lanes": min(32, lanes * 4)}
    gen = v("pcie.gen")
    return {"pcie.gen": gen + 1} if gen < 5 else {}


def _twice(key: str) -> Callable[[Lookup], dict[str, Any]]:
    return lambda v: {key: 2 * v(key)}


@dataclass(frozen=True)
class BusKind:
    """One value of ``bus.kind`` and everything that depends on it."""

    name: str
    #: The timing of a transfer, from the host's ``bus`` and ``pcie`` sections.
    timing: Callable[[Any, Any], BusTiming]
    #: The host's bus: ``build(env, sys, timing, tracer, memory)``.
    build: Callable[..., Bus]
    #: The NIC is on the processor die: an on-die copy engine shares its interconnect.
    on_die: bool
    #: ``pcie.gen`` and ``pcie.lanes`` set its bandwidth (PCIe, and M5's bus, which the
    #: thesis gave a PCIe link's).
    pcie_bandwidth: bool
    #: Two channels, ``PCIe up`` and ``PCIe down``, each a resource of its own.
    channels: bool
    #: The parts of an access that the bandwidth does not change (per visit, ns): the
    #: CPU's stall for a posted register write, a DMA read's and a DMA write's.
    mmio_stall: Callable[[Lookup], float]
    read_fixed: Callable[[Lookup], float]
    write_fixed: Callable[[Lookup], float]
    #: The verdict's words for it (``"PCI bus ({clock})"``, the keys shown with their
    #: values by ``show(key)``), and the change that makes it faster.
    words: Callable[[Callable[[str], str]], str]
    faster: Callable[[Lookup], dict[str, Any]]
    #: The ``bus.*`` keys that are its own (``bus.pci_clock``): no other kind reads them.
    keys: tuple[str, ...] = ()
    #: The rules a host with this bus must keep (:mod:`cpasim.config.rules`).
    check: Callable[[Any], None] = _no_rules


BUSES: dict[str, BusKind] = {
    kind.name: kind
    for kind in (
        BusKind(
            "pcie",
            _pcie_timing,
            plain_bus,
            on_die=False,
            pcie_bandwidth=True,
            channels=True,
            mmio_stall=_posted_write,
            read_fixed=_pcie_read_round_trip,
            write_fixed=_no_time,
            words=lambda show: f"I/O bus (PCIe gen {show('pcie.gen')} x{show('pcie.lanes')})",
            faster=_lanes_then_gen,
        ),
        BusKind(
            "pci",
            _pci_timing,
            plain_bus,
            on_die=False,
            pcie_bandwidth=False,
            channels=False,
            mmio_stall=_posted_write,
            read_fixed=_no_time,
            write_fixed=_no_time,
            words=lambda show: f"PCI bus ({show('bus.pci_clock')})",
            faster=_twice("bus.pci_clock"),
            keys=(
                "bus.pci_width",
                "bus.pci_clock",
                "bus.pci_burst",
                "bus.pci_burst_overhead",
                "bus.pci_read_wait",
            ),
        ),
        BusKind(
            "on_die",
            lambda bus, pcie: on_die_timing(bus),
            plain_bus,
            on_die=True,
            pcie_bandwidth=False,
            channels=False,
            mmio_stall=_posted_write,
            read_fixed=_no_time,
            write_fixed=_no_time,
            words=lambda show: f"on-die bus ({show('bus.on_die_clock')})",
            faster=_twice("bus.on_die_clock"),
            keys=ON_DIE_KEYS,
        ),
        BusKind(
            "m5",
            _m5_timing,
            _m5_bus,
            on_die=False,
            pcie_bandwidth=True,
            channels=False,
            # The register write's round trip is a state of its own there (mmio write).
            mmio_stall=_no_time,
            read_fixed=_m5_round_trip,
            write_fixed=_m5_round_trip,
            words=lambda show: (
                f"I/O bus (M5's I/O bus at gen {show('pcie.gen')} x{show('pcie.lanes')})"
            ),
            faster=_lanes_then_gen,
            keys=(
                "bus.m5_header_cycles",
                "bus.m5_memory_latency",
                "bus.m5_bridge_buffer",
                "bus.m5_nack_delay",
                "bus.m5_backoff_min",
                "bus.m5_backoff_max",
            ),
            check=_m5_rules,
        ),
    )
}


def bus_kind(name: str) -> BusKind:
    """The registered kind ``name`` (the configuration allows no other)."""
    return BUSES[name]


def unread_keys(v: Lookup) -> list[str]:
    """The kinds' own ``bus.*`` keys that a host's bus does not read (an on-die copy
    engine reads the on-die interconnect's, whatever the NIC's bus)."""
    read = set(bus_kind(v("bus.kind")).keys)
    if v("copy_engine.enabled") and v("copy_engine.location") == "on_die":
        read.update(ON_DIE_KEYS)
    return [key for kind in BUSES.values() for key in kind.keys if key not in read]


def owner(key: str) -> BusKind:
    """The kind whose own key ``key`` is."""
    return next(kind for kind in BUSES.values() if key in kind.keys)


def bus_timing(bus, pcie) -> BusTiming:
    """Timing of the I/O bus from a host's ``bus`` and ``pcie`` config sections."""
    return bus_kind(bus.kind).timing(bus, pcie)


def make_bus(env, sys: str, tracer, *, bus, pcie, memory=None) -> Bus:
    """Host ``sys``'s I/O bus from its ``bus`` and ``pcie`` sections; with ``memory`` (the
    host's :class:`~cpasim.model.main_memory.Memory`) each DMA also takes its share of it."""
    return bus_kind(bus.kind).build(env, sys, bus_timing(bus, pcie), tracer, memory)
