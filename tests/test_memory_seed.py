"""Seed 002's zero-copy send experiment against cpasim's memory model (OLDER_SEEDS.md).

Directed Point on GEDP (scenarios/dp-gedp-up.toml) sends 1500-byte frames with a
gap gs of 18.76 µs; with the send copy removed the paper measured 16.4 µs and
blamed the copy's traffic on the system bus.  Here the sender's memory is the
450NX's 800 MB/s (100 MHz, 64-bit front-side bus; not fitted) and the send copy is
removed with ``copy_send_per_byte = 0``.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from cpasim.config import load_scenario
from cpasim.simulate import simulate

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "scenarios" / "dp-gedp-up.toml"
MEMORY = "hosts.tx.memory.bandwidth=6.4Gbps"  # 800 MB/s
ZERO_COPY = ("hosts.tx.cpu.cost.copy_send_per_byte=0", "hosts.tx.cpu.cost.copy=0")


def paper(quantity: str) -> float:
    with (ROOT / "calibration" / "seeds" / "dp_logp.csv").open() as f:
        for row in csv.DictReader(line for line in f if not line.startswith("#")):
            if row["quantity"] == quantity and row["system"] == "GEDP":
                return float(row["value"])
    raise KeyError(quantity)


def gs_us(*sets: str) -> float:
    cfg = load_scenario(SCENARIO, sets=list(sets))
    r = simulate(cfg)
    return (r.sim_time_ns - cfg.sim.warmup) / r.frames["tx_to_rx"] / 1e3


def test_an_idle_memory_leaves_dp_send_gap_alone():
    # The memory at 800 MB/s carries the copy and the DMA (about 30% of it) and hardly
    # delays either: gs stays the bus-bound 18.73 µs of the scenario within 0.2% (18.76:
    # with the send copy fitted at 1.75 cycles/B a DMA read now and then waits behind it).
    assert gs_us(MEMORY) == pytest.approx(gs_us(), rel=5e-3)


@pytest.mark.xfail(
    strict=True,
    reason="the model's memory is a bandwidth shared first-come first-served: at 30% "
    "load the copy delays no DMA read, so a zero-copy send leaves gs at the PCI "
    "bus's 18.76 us (+14% against 16.4); the paper's effect is each PCI read burst "
    "waiting longer for memory while the CPU copies, which the model does not have",
)
def test_zero_copy_send_gap_matches_the_paper():
    assert gs_us(MEMORY, *ZERO_COPY) == pytest.approx(paper("gs_zero_copy"), rel=0.10)
