"""Protocol facts (cpasim.protocol) and the bus rules the model declares for predict."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import cpasim.protocol as protocol
from cpasim.config import load_scenario
from cpasim.model import bus_rules
from cpasim.model.bus import Bus
from cpasim.model.bus_rules import BUS_STATES, READ, WRITE, read_round_trip_ns
from cpasim.model.pcie import PcieTiming
from cpasim.simulate import simulate
from cpasim.tracing import Tracer


@pytest.mark.parametrize("module", [protocol, bus_rules])
def test_fact_modules_import_nothing_from_cpasim(module):
    # Leaves: config, model, predict, plot and calibrate all read them.
    tree = ast.parse(Path(module.__file__).read_text())
    imported = [
        n.module if isinstance(n, ast.ImportFrom) else a.name
        for n in ast.walk(tree)
        if isinstance(n, (ast.Import, ast.ImportFrom))
        for a in getattr(n, "names", [])
    ]
    assert not [m for m in imported if m and m.startswith("cpasim")]


def test_sizes_are_the_standards():
    # IEEE 802.3: 1500-byte IP packet -> 1518-byte frame -> 1538 byte times;
    # RFC 791 / 9293 / 7323: a 1500-byte MTU leaves an MSS of 1460, 1448 with timestamps.
    assert protocol.frame_bytes(1500) == 1518 and protocol.wire_bytes(1500) == 1538
    assert protocol.ETHERNET_FRAMING == 38 and protocol.MAC_HEADER_FCS == 18
    assert protocol.mss_for(1500, False) == 1460 and protocol.mss_for(1500, True) == 1448
    assert protocol.tcp_header(True) == 52
    # RFC 768 over IPv4: the largest datagram payload.
    assert protocol.MAX_UDP_PAYLOAD == 65507
    # tcp_established_options: 3 SACK blocks beside timestamps, 4 without.
    assert protocol.sack_blocks_max(True) == 3 and protocol.sack_blocks_max(False) == 4


def test_a_pcie_read_waits_the_declared_round_trip():
    t = PcieTiming(
        gen=3, lanes=4, max_payload=256, max_read_request=512, tlp_overhead=24, latency=300.0
    )
    occ = t.dma_read(64)
    assert occ.wait_ns == t.tlp_overhead / t.bytes_per_ns + read_round_trip_ns(300.0)
    assert read_round_trip_ns(300.0) == 600.0


@pytest.mark.parametrize("bus", ["pcie", "pci"])
def test_bus_states_are_the_states_the_nic_holds_the_bus_in(monkeypatch, bus):
    """Predict reads BUS_STATES; the model's devices (NIC, its TX descriptor cache with
    its fetch and write-back engines, a copy engine on the I/O bus) must enter the bus
    in exactly those."""
    seen = set()

    def state_of(sm):
        return next(s for s, code in sm._begin_codes.items() if code is sm._last)

    def watch(method, access):
        def wrapped(self, sm, *args):
            seen.add((sm.name[1], state_of(sm), access))
            return method(self, sm, *args)

        return wrapped

    monkeypatch.setattr(Bus, "dma_read", watch(Bus.dma_read, READ))
    monkeypatch.setattr(Bus, "dma_write", watch(Bus.dma_write, WRITE))
    base = [f"bus.kind={bus}", "sim.duration=2ms", "sim.warmup=0"]
    for extra in (
        [],
        ["hosts.tx.nic.tx_desc_cache=64"],
        ["hosts.tx.nic.tx_desc_cache=64", "hosts.tx.nic.tx_writeback=block"],
        ["hosts.rx.copy_engine.enabled=true", "hosts.rx.copy_engine.location=io_bus"],
    ):
        simulate(load_scenario(None, sets=base + extra), tracer=Tracer.in_memory)
    assert seen == set(BUS_STATES)
