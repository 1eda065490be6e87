"""The fitted scenarios of seeds 002 (DP), 000 (Mosberger), 003 (Makineni) against their papers.

The published figures come from ``calibration/seeds/*.csv`` through
``calibration/fit_older_seeds.py`` (which also measures the model's figures the
way each paper measured them).  RESIDUALS holds what the fit achieved,
(model - paper) / paper, as reported in ``calibration/OLDER_SEEDS.md``; each
figure must stay within one percentage point of it, so the report stays true.
Fitted figures must moreover be within FITTED_TOLERANCE of the paper.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from cpasim.calibrate.reference import read_reference
from cpasim.config import load_scenario

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "calibration" / "fit_older_seeds.py"
CPASIM = Path(sys.executable).with_name("cpasim")


def _load_script():
    spec = importlib.util.spec_from_file_location("fit_older_seeds", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


fos = _load_script()

# Achieved residuals per system and figure label (calibration/OLDER_SEEDS.md).
RESIDUALS = {
    "GEDP-UP": {
        "interrupt_overhead": -0.002,
        "Ur_copy_extra @1500 B": +0.007,
        "Or @1500 B": +0.002,
        "Ur": 0.000,
        "one_way_latency @1 B": +0.005,
        "Os @1500 B": +0.001,
        "gs @1500 B": -0.002,
        "bandwidth_bound_from_Or @1500 B": -0.019,
        "bidirectional_per_process": +0.065,
        "gr @1024 B": -0.178,
        "gr @1500 B": -0.025,
        "L @1 B": +0.025,
        "bandwidth_raw_max": +0.043,
        "bandwidth_flow_control": -0.034,
    },
    "GEDP-SMP": {
        "Ur": -0.001,
        "one_way_latency @1 B": +0.038,
        "Os_flow_control @1500 B": 0.000,
        "Or @1500 B": -0.049,
        "Ur_copy_extra @1500 B": +0.002,
        "gs @1500 B": +0.003,
        "bandwidth_bound_from_gs @1500 B": -0.019,
        "bidirectional_per_process": -0.140,
        "gr @1024 B": -0.177,
        "gr @1500 B": -0.023,
        "L @1 B": +0.025,
        "Os @1500 B": -0.059,
        "bandwidth_raw_max": -0.011,
        "bandwidth_fraction_of_link": -0.011,
        "bandwidth_flow_control": -0.003,
    },
    "FEDP": {
        "Ur": 0.000,
        "L @1 B": 0.000,
        "one_way_latency @1 B": 0.000,
        "gs @1500 B": +0.002,
        "gr @1500 B": +0.001,
        "bandwidth_raw_max": -0.019,
        "bandwidth_fraction_of_link": -0.013,
        "bandwidth_flow_control": -0.011,
        "bidirectional_per_process": -0.011,
        "bidirectional_per_process_flow_control": -0.010,
    },
    # The four TCP/IP versions labelled "tests the paper's linearity" are held out,
    # but they lie on the straight line in Tp through the two fitted ones.
    "Mosberger": {
        "round trip TCP/IP BAD (tests the paper's linearity)": -0.030,
        "round trip TCP/IP STD": 0.000,
        "round trip TCP/IP OUT (tests the paper's linearity)": +0.017,
        "round trip TCP/IP CLO (tests the paper's linearity)": +0.013,
        "round trip TCP/IP PIN (tests the paper's linearity)": +0.001,
        "round trip TCP/IP ALL": 0.000,
        "64 B frame on the wire": -0.002,
        "LANCE overhead (nic.tx_latency)": -0.338,
    },
    "Mosberger-RPC": {
        "round trip RPC BAD": +0.003,
        "round trip RPC STD": 0.000,
        "round trip RPC OUT": +0.003,
        "round trip RPC CLO": +0.010,
        "round trip RPC PIN": +0.023,
        "round trip RPC ALL": +0.008,
    },
    "Makineni": {
        "cpu_per_bit TX (LSO) @64 B": -0.003,
        "cpu_per_bit RX @64 B": +0.002,
        "cpu_per_bit TX (LSO) @65536 B": +0.050,
        "cpu_per_bit TX (no LSO) @65536 B": -0.004,
        "cpu_per_bit RX @65536 B": -0.010,
        "lso_benefit @65536 B": -0.052,
    },
}
SLACK = 0.01  # residuals are held to ±1 percentage point of the achieved ones
# How close each system's fitted figures are to the paper (the worst one, rounded up):
# GEDP-SMP's Or and one-way latency share its interrupt cost and cannot both hold.
FITTED_TOLERANCE = {
    "GEDP-UP": 0.01,
    "GEDP-SMP": 0.05,
    "FEDP": 0.01,
    "Mosberger": 0.01,
    "Mosberger-RPC": 0.01,
    "Makineni": 0.02,  # RX at 64 KB: -1.01 %
}

# Figures more than 10% from their paper, and why (calibration/OLDER_SEEDS.md): each is
# checked against the paper at 10% as a strict xfail, so a model that closes a gap
# fails here until its entry goes.
_DP_GR = (
    "held out, -18%: 8.71 us (GEDP-UP) / 8.72 us (GEDP-SMP) against 10.6: the wire's 8.5 us "
    "per 1024 B frame sets the model's gr (its PCI bus writes the frame in less); the "
    "paper's gr lies 2.1 us above the wire at 1024 B but 0.3 us at 1500 B"
)
GAPS = {
    ("GEDP-UP", "gr @1024 B"): _DP_GR,
    ("GEDP-SMP", "gr @1024 B"): _DP_GR,
    ("GEDP-SMP", "bidirectional_per_process"): "held out, -14%: 49.9 MB/s against 58: a "
    "host's PCI bus carries a frame's read (18.76 us) and a frame's write (~10.3 us) one "
    "after the other, 1472 B per 29 us each way; the paper's bus does better with both",
    ("Mosberger", "LANCE overhead (nic.tx_latency)"): "Table 6's round trips leave 31 us "
    "per frame for the controller, not the paper's 47.4 us: the line through STD and ALL "
    "puts 198 us of each round trip outside the Tp-proportional part, less than the "
    "paper's own 2 x 105 us estimate",
}


def test_every_gap_above_ten_percent_has_its_reason():
    wide = {(n, label) for n, res in RESIDUALS.items() for label, r in res.items() if abs(r) > 0.10}
    assert wide == set(GAPS)


@pytest.fixture(scope="module")
def measured():
    """Each system's scenario file, simulated into its paper's figures."""
    out = {}
    for name, system in fos.SYSTEMS.items():
        cfg = load_scenario(ROOT / "scenarios" / system.scenario)
        out[name] = system.measure(cfg)
    return out


def test_every_system_has_its_residuals_listed():
    for name, system in fos.SYSTEMS.items():
        assert {t.label for t in system.targets} == set(RESIDUALS[name]), name


@pytest.mark.slow
@pytest.mark.parametrize("name", list(RESIDUALS))
def test_scenario_reproduces_the_reported_residuals(name, measured):
    system = fos.SYSTEMS[name]
    for t in system.targets:
        r = fos.residual(measured[name][t.key], t.value)
        assert r == pytest.approx(RESIDUALS[name][t.label], abs=SLACK), (name, t.label, r)
        if t.fitted:
            assert abs(r) <= FITTED_TOLERANCE[name], (name, t.label, r)


def test_targets_are_the_csv_rows():
    """Every directly compared figure is a CSV row's value, converted to cpasim units."""
    seeds = ROOT / "calibration" / "seeds"
    rows = [
        row
        for name in ("dp_logp.csv", "mosberger_latency.csv", "makineni_hz_per_bit.csv")
        for row in read_reference(seeds / name)
    ]
    by_source = {fos._src(r): r.cpasim_value for r in rows}
    derived = 0
    for system in fos.SYSTEMS.values():
        for t in system.targets:
            if t.source in by_source:
                assert t.value == by_source[t.source]
            else:  # Os for UP and Or for SMP combine two rows
                derived += 1
    assert derived == 2


def test_each_paper_has_fitted_and_held_out_figures():
    for name, system in fos.SYSTEMS.items():
        kinds = {t.fitted for t in system.targets}
        assert kinds == {True, False}, name
        assert sum(t.fitted for t in system.targets) <= len(system.params) + 1, name


def test_mosberger_versions_differ_only_by_processing_time():
    """The round trips are ordered as the versions' Tp, as in Table 6."""
    system = fos.SYSTEMS["Mosberger"]
    cfg = load_scenario(ROOT / "scenarios" / system.scenario)
    figs = system.measure(cfg)
    tp = fos.mosberger_tp()
    order = sorted(tp, key=tp.get)
    rtts = [figs[("round_trip TCP/IP", v)] for v in order]
    assert rtts == sorted(rtts)


def test_scenario_headers_say_what_they_reproduce():
    for system in fos.SYSTEMS.values():
        text = (ROOT / "scenarios" / system.scenario).read_text()
        assert text.startswith("# "), system.scenario
        assert "seed 00" in text and "Fitted" in text, system.scenario


@pytest.mark.slow
def test_installed_command_runs_a_fitted_scenario():
    path = ROOT / "scenarios" / fos.SYSTEMS["GEDP-SMP"].scenario
    proc = subprocess.run(
        [str(CPASIM), "run", str(path), "--json", "--no-progress"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    goodput = json.loads(proc.stdout)["goodput_bps"]
    paper = fos._row(
        read_reference(ROOT / "calibration" / "seeds" / "dp_logp.csv"),
        "bandwidth_raw_max",
        "GEDP-SMP",
    )
    expected = RESIDUALS["GEDP-SMP"]["bandwidth_raw_max"]
    assert fos.residual(goodput, paper.cpasim_value) == pytest.approx(expected, abs=SLACK)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "label"),
    [
        pytest.param(n, label, marks=pytest.mark.xfail(strict=True, reason=GAPS[(n, label)]))
        if (n, label) in GAPS
        else pytest.param(n, label)
        for n, res in RESIDUALS.items()
        for label in res
    ],
)
def test_figure_within_ten_percent_of_its_paper(name, label, measured):
    t = next(t for t in fos.SYSTEMS[name].targets if t.label == label)
    assert abs(fos.residual(measured[name][t.key], t.value)) <= 0.10


@pytest.mark.slow
def test_makineni_cpu_saturates_without_lso_and_on_receive():
    """Seed 003, slide 8: "Rx and Tx (no LSO) CPU utilization is 100%"; with LSO the
    sender has CPU to spare at 64 KB (held out: no fit looks at utilization)."""
    cfg = load_scenario(ROOT / "scenarios" / fos.SYSTEMS["Makineni"].scenario)
    idle = {}
    for case, sut, lso in (("TX LSO", "tx", True), ("TX no LSO", "tx", False), ("RX", "rx", True)):
        client = "rx" if sut == "tx" else "tx"
        r = fos._run(
            cfg,
            {
                "nic.tso": str(lso).lower(),
                f"hosts.{sut}.cpu.cores": "1",
                f"hosts.{client}.cpu.cores": str(fos.CLIENT_CORES),
            },
        )
        idle[case] = r["cpu_utilization"][sut]["idle"]
    assert idle["TX no LSO"] < 0.01 and idle["RX"] < 0.01, idle
    assert idle["TX LSO"] > 0.2, idle


# The labels a re-read of the papers and params.py gave (issue: the seed's tables row by
# row): figure -> label, for the rows whose label is not this fit's own target.
LABELS = {
    ("GEDP-UP", "gs @1500 B"): "fitted",  # cpasim's PCI defaults were fitted to it
    ("GEDP-SMP", "gs @1500 B"): "fitted",
    ("GEDP-SMP", "Ur_copy_extra @1500 B"): "fitted",  # poll_per_byte is set from this row
    ("GEDP-UP", "bandwidth_raw_max"): "derived from fitted values",  # 1472 B per fitted gs
    ("GEDP-SMP", "bandwidth_raw_max"): "derived from fitted values",
    ("GEDP-SMP", "bandwidth_fraction_of_link"): "derived from fitted values",
    ("GEDP-SMP", "bandwidth_flow_control"): "derived from fitted values",
    ("GEDP-SMP", "bandwidth_bound_from_gs @1500 B"): "derived from fitted values",
    ("Mosberger", "64 B frame on the wire"): "closed form",  # wire arithmetic
    ("GEDP-UP", "bandwidth_flow_control"): "held out",
    ("GEDP-SMP", "Os @1500 B"): "held out",
}


@pytest.mark.parametrize(("name", "label"), list(LABELS))
def test_each_figure_carries_its_label(name, label):
    t = next(t for t in fos.SYSTEMS[name].targets if t.label == label)
    assert t.kind == LABELS[(name, label)]
    # A label other than a target's own or held out says why.
    assert bool(t.why) == (t.kind != "held out" and not t.fitted)


@pytest.mark.slow
def test_older_seeds_report_is_what_the_scenarios_give(capsys):
    """calibration/OLDER_SEEDS.md and the scenarios' headers are generated: ``--check``
    re-measures the scenarios and fails (printing a diff) on any stale figure or label."""
    assert fos.main(["--check"]) == 0, capsys.readouterr().out[-4000:]
