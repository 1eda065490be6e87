"""Lengths and busy times over the measured interval (cpasim.predict.window)."""

from __future__ import annotations

import numpy as np
import pytest

from cpasim.config import load_scenario
from cpasim.predict.bounds import busy
from cpasim.predict.runs import measured_active, traced_run
from cpasim.predict.transforms_table import reference
from cpasim.predict.window import Prefix, analyses
from cpasim.trace import open_trace

# A 1 Gb/s link-bound stream whose send buffer (1 MiB) fills at CPU speed at the
# start: the start-up work the measured interval must leave out.
SCENARIO = """
[sim]
duration = "5ms"
warmup = "2ms"

[nic]
itr = "off"

[tcp]
wmem = "1MiB"
rmem = "1MiB"
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    path = tmp_path_factory.mktemp("w") / "s.toml"
    path.write_text(SCENARIO)
    return traced_run(load_scenario(path), path.with_name("s.cpt"))


def test_prefix_holds_exactly_the_records_before_the_cut(run):
    whole = np.concatenate(list(open_trace(run.trace).chunks()))
    cut = 1.5e6
    before = np.concatenate(list(Prefix(open_trace(run.trace), cut).chunks()))
    assert before.size == int((whole["t"] < cut).sum()) > 0
    assert np.array_equal(before, whole[: before.size])


def test_baseline_path_spans_the_measured_interval(run):
    # Reference path over the measured interval: from the receiver's last record
    # of the warm-up to its last record, i.e. close to duration - warmup (3 ms).
    measured = run.cfg.sim.duration - run.cfg.sim.warmup
    assert run.path.critical_path_ns[""] == pytest.approx(measured, rel=0.02)


def test_busy_time_leaves_the_start_up_out(run):
    [(whole, before)] = analyses(
        lambda: open_trace(run.trace), run.start, run.end, [reference()], run.cfg.sim.warmup
    )
    measured = measured_active(whole, before)
    assert measured == run.state_active

    def cpu_tx(active):
        return busy(run.cfg, reference(), active)["tx:CPU cores"]

    measured_ns = run.cfg.sim.duration - run.cfg.sim.warmup
    # One core cannot be busy longer than the interval; the start-up (filling 1 MiB
    # at CPU speed) makes the whole trace's CPU work per ns of run clearly larger.
    assert 0 < cpu_tx(measured) <= measured_ns * 1.001
    per_ns_measured = cpu_tx(measured) / measured_ns
    per_ns_whole = cpu_tx(measured_active(whole, None)) / run.cfg.sim.duration
    assert per_ns_whole > 1.2 * per_ns_measured


def test_no_warmup_means_the_whole_trace(run):
    [(whole, before)] = analyses(
        lambda: open_trace(run.trace), run.start, run.end, [reference()], 0
    )
    assert before is None
    assert measured_active(whole, None)["tx:MAC:transmit"] > run.state_active["tx:MAC:transmit"]
