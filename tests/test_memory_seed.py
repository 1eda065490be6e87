"""Seed 002's zero-copy send experiment against cpasim's memory model (OLDER_SEEDS.md).

Directed Point on GEDP (scenarios/dp-gedp-up.toml) sends 1500-byte frames with a
gap gs of 18.76 µs; with the send copy removed the paper measured 16.4 µs
(91.5 MB/s) and blamed the copy's traffic on the system bus.  Here the sender's
memory is the 450NX's 800 MB/s (100 MHz, 64-bit front-side bus; from the seed's
hardware description, not fitted) and the send copy is removed with
``copy_send_per_byte = 0``.

A memory shared first-come first-served (``memory.load_window`` = 0) carries the
copy and the DMA (about 30% of it) without delaying either.  With the latency
under load (``memory.load_window``), each PCI read burst's wait for memory
(``bus.pci_read_wait``) grows with the copy's share of the memory.  The default
read wait was fitted to gs with the copy running, that is at the copy's load; with
the load modelled the read wait is the unloaded one, so it is fitted again to the
same gs (18.76 µs, with the copy) by :func:`fitted_read_wait`.  The zero-copy gs
and its bandwidth are held out.  The window (100 µs, many frames) makes the
occupancy the copy's mean share; it is not fitted (50-200 µs give the same gs
within 1%, :func:`test_the_window_only_averages`).
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from cpasim.config import load_scenario
from cpasim.model.main_memory import LoadedMemory, Memory, make_memory
from cpasim.simulate import simulate

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "scenarios" / "dp-gedp-up.toml"
MEMORY = "hosts.tx.memory.bandwidth=6.4Gbps"  # 800 MB/s
LOADED = (MEMORY, "hosts.tx.memory.load_window=100us")
ZERO_COPY = ("hosts.tx.cpu.cost.copy_send_per_byte=0", "hosts.tx.cpu.cost.copy=0")
FRAME = 1500  # the paper's message size, bytes


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


@pytest.fixture(scope="module")
def fitted_read_wait() -> float:
    """bus.pci_read_wait (cycles, unloaded) that gives the paper's gs with the copy
    running and the memory's latency under load modelled: bisection, gs grows
    with the wait."""
    target = paper("gs")
    lo, hi = 0.0, 47.4  # 47.4 = the default, fitted at the copy's load
    for _ in range(9):
        mid = (lo + hi) / 2
        if gs_us(*LOADED, f"hosts.tx.bus.pci_read_wait={mid}") > target:
            hi = mid
        else:
            lo = mid
    return (lo + hi) / 2


def test_an_idle_memory_leaves_dp_send_gap_alone():
    # The memory at 800 MB/s carries the copy and the DMA (about 30% of it) and hardly
    # delays either: gs stays the bus-bound 18.73 µs of the scenario within 0.2% (18.76:
    # with the send copy fitted at 1.75 cycles/B a DMA read now and then waits behind it).
    assert gs_us(MEMORY) == pytest.approx(gs_us(), rel=5e-3)


def test_first_come_first_served_memory_leaves_zero_copy_gap_alone():
    # Without the latency under load a zero-copy send gains nothing: no DMA read
    # meets the copy in the memory's queue.
    assert gs_us(MEMORY, *ZERO_COPY) == pytest.approx(gs_us(MEMORY), rel=0.01)


def test_the_copy_load_slows_the_send_gap():
    # Same bus constants: the copy's load stretches each read burst's memory wait.
    assert gs_us(*LOADED) > 1.05 * gs_us(MEMORY)


@pytest.mark.slow
def test_refitted_read_wait_gives_the_papers_send_gap(fitted_read_wait):
    # Fitted: gs with the copy (the target the default read wait was fitted to).
    got = gs_us(*LOADED, f"hosts.tx.bus.pci_read_wait={fitted_read_wait}")
    assert got == pytest.approx(paper("gs"), rel=0.005)
    # The unloaded wait is below the default, which was measured under the copy's load.
    assert 30 < fitted_read_wait < 47.4


@pytest.mark.slow
def test_zero_copy_send_gap_matches_the_paper(fitted_read_wait):
    # Held out.  Achieved: 17.0 µs against 16.4 (+3.7%), 88.2 MB/s against 91.5
    # (-3.6%).
    got = gs_us(*LOADED, *ZERO_COPY, f"hosts.tx.bus.pci_read_wait={fitted_read_wait}")
    assert got == pytest.approx(paper("gs_zero_copy"), rel=0.05)
    mb_s = FRAME / got  # bytes per µs = MB/s, as the paper turns its gs into bandwidth
    assert mb_s == pytest.approx(paper("bandwidth_zero_copy_bound"), rel=0.05)


@pytest.mark.parametrize("window", ["50us", "200us"])
def test_the_window_only_averages(window):
    sets = (MEMORY, "hosts.tx.bus.pci_read_wait=38")
    ref = gs_us(*sets, "hosts.tx.memory.load_window=100us")
    assert gs_us(*sets, f"hosts.tx.memory.load_window={window}") == pytest.approx(ref, rel=0.01)


class _Env:
    _now = 0.0


class _Params:
    bandwidth = 8e9  # 1 byte/ns
    latency = 100.0
    dma_holds = False
    load_window = 1000.0


def test_read_latency_grows_as_one_over_one_minus_the_copy_share():
    env = _Env()
    mem = make_memory(env, _Params)
    assert isinstance(mem, LoadedMemory)
    assert mem.read_stretch() == 1.0
    # The CPU copies half of every nanosecond for many windows: occupancy 1/2.
    for t in range(0, 20_000, 100):
        env._now = float(t)
        mem.copy_access(50, 50.0)
    env._now = 19_950.0  # halfway between the last access and the next
    assert mem.read_stretch() == pytest.approx(2.0, rel=0.03)
    # Device traffic is not load a device waits behind; the load decays once idle.
    env._now = 30_000.0
    assert mem.read_stretch() == pytest.approx(1.0, abs=1e-3)


def test_memory_without_a_window_is_first_come_first_served():
    class P(_Params):
        load_window = 0.0

    mem = make_memory(_Env(), P)
    assert type(mem) is Memory and not mem.loaded
    assert Memory.copy_access is Memory.access
