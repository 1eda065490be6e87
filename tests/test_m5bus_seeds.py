"""The seed scenarios on M5's I/O bus (``bus.kind = "m5"``), an option the TCP and copy
engine scenarios do not ship with: what it does to seed 004's paths
(calibration/SEEDS.md, "M5's I/O bus").  The bandwidths are tests/test_seed_rows.py's
rows ("m5"); scenarios/udp-stream.toml ships with the bus for its sender
(tests/test_seed_scenarios.py).

Nothing is fitted here: the bus's constants are gem5's, its bandwidth the PCIe link's,
and the scenarios' fitted costs are kept."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from test_seed_scenarios import _share

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "calibration"))

import seed_rows  # noqa: E402


@pytest.mark.slow
def test_the_engine_on_m5s_bus_leads_the_path_with_the_nics_writes():
    # The seed: "dominated by the copy engine reading and writing data".  On M5's bus
    # the engine's read and write hold 33% of the path (30 ms), the NIC's receive DMA
    # that its writes and reads queue behind 22%; on PCIe x4 the engine held 11%.
    run = seed_rows.traced(
        "rx-copy-engine.toml", seed_rows.engine("copy engine on I/O bus", "hosts.rx.bus.kind=m5")
    )
    engine = _share(run, "rx:Copy Engine:read") + _share(run, "rx:Copy Engine:write")
    assert engine > 0.25, run.path.most_critical[:6]
    assert run.path.most_critical[0]["name"] in (
        "rx:NIC RX:DMA packet",
        "rx:Copy Engine:read",
        "rx:Copy Engine:write",
    )
