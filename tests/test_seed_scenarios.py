"""Fitted seed scenarios against their papers' figures (calibration/SEEDS.md).

The reference figures come from calibration/seeds/*.csv; the tolerances are the
ones the fit achieved (short runs here, so a little wider than the full-length
figures in SEEDS.md).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("fit_seeds", ROOT / "calibration" / "fit_seeds.py")
fit_seeds = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fit_seeds)

SHORT = ["sim.duration=50ms", "sim.warmup=20ms"]

# Saidi fig. 6.2, re-simulated Mb/s; relative tolerance achieved by the fitted model
# (model at 120 ms: 1080, 1615, 2986 Mb/s).  Config 2 is window-limited, and the
# model keeps less of its 128 KiB send buffer in flight than the seed's M5 did.
TOLERANCE = {
    "TCP stream config 2 (10 Gb/s link)": 0.18,
    "TCP stream config 3 (larger TCP buffers)": 0.07,
    "TCP stream config 4 (PCIe x4)": 0.03,
}


@pytest.mark.parametrize("index", [1, 2, 3])
def test_tcp_stream_ladder_matches_the_seed(index):
    seed = fit_seeds.seed_ladder()
    name, _ = fit_seeds.LADDER[index]
    got = fit_seeds.goodput_mbps(fit_seeds.configs(SHORT)[index])
    assert got == pytest.approx(seed[name], rel=TOLERANCE[name])


def test_tcp_stream_config1_is_link_bound():
    from cpasim.config import load_scenario
    from cpasim.model.link import link_goodput

    sets = fit_seeds.configs(SHORT)[0]
    cfg = load_scenario(fit_seeds.SCENARIO, sets=sets)
    bound = link_goodput(cfg.link.rate, 1448, 52) / 1e6  # MSS and TCP/IP headers with timestamps
    got = fit_seeds.goodput_mbps(sets)
    assert 0.95 * bound <= got <= bound
