"""Every figure the README and docs/ show, computed from the code as it is.

    scripts/figures            # recompute; write docs/figures.md and every copy
    scripts/figures --check    # recompute and compare: exit 1 naming each stale copy

A figure is a named block.  docs/figures.md holds them all, each with its label
(fitted, derived from fitted values, held out, closed form: what the figure was
or was not fitted to) and the command or set-up that gives it.  A page shows one
between two comments, and this script owns what lies between them::

    <!-- figure: tour-run -->
    ...
    <!-- end figure -->

(inline, for a single value in a sentence, the same two comments on one line, never
at a line's start, where Markdown would take the line for raw HTML).
A marker naming no figure is an error (exit 2).  Wall-clock fields (a run's wall
time and event rate) are left out of quoted output: they are timings, which
docs/timings.md keeps with the machine and load they were measured on.

Figures are computed in two worker processes; the whole takes about a minute and a
half of CPU on the project's 2-core machine.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
FIGURES = DOCS / "figures.md"
MARKER = re.compile(r"<!-- figure: ([a-z0-9-]+) -->(.*?)<!-- end figure -->", re.S)

#: What each label means (the project's charter: every figure says which it is).
LABELS = {
    "fitted": "a parameter was fitted so that the model gives this figure",
    "derived from fitted values": "it follows from parameters fitted to other figures, "
    "so it restates them rather than testing them",
    "held out": "nothing was fitted to it; where the scenario's parameters were fitted "
    "to other figures, it tests them",
    "closed form": "arithmetic on the parameters, no simulation",
}


@dataclass(frozen=True)
class Figure:
    name: str
    label: str  # a key of LABELS, or two of them with what each covers
    what: str  # one sentence: the figure and what it rests on
    body: str  # markdown, as pages show it
    inline: bool = False  # a single value inside a sentence


# -- running the command line in this process --------------------------------------

WALL = re.compile(r", wall [0-9.]+ s \([0-9.]+ [kMG]?events/s\)")


def cli(*argv: str, stderr: bool = False) -> str:
    """``cpasim ARGV...``'s stdout (with ``stderr``, what it said on stderr), as a user
    sees it piped (no spinner, 80 columns), without the wall-clock fields."""
    from cpasim.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()) as err:
        try:
            main(list(argv))
        except SystemExit as end:
            if end.code not in (0, None):
                raise RuntimeError(f"cpasim {' '.join(argv)}: {err.getvalue()}") from None
    return WALL.sub("", (err if stderr else out).getvalue()).rstrip("\n")


def console(argv: tuple[str, ...], output: str) -> str:
    return "```console\n$ cpasim " + " ".join(argv) + "\n" + output + "\n```"


def from_line(output: str, start: str) -> str:
    """The output from its first line starting with ``start``, marked as cut."""
    lines = output.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith(start))
    return "\n".join(["...", *lines[first:]])


@contextlib.contextmanager
def user_directory():
    """A scratch directory with the repository's scenarios, as a user's checkout."""
    here = Path.cwd()
    with tempfile.TemporaryDirectory(prefix="cpasim-figures-") as tmp:
        (Path(tmp) / "scenarios").symlink_to(ROOT / "scenarios")
        os.chdir(tmp)
        try:
            yield Path(tmp)
        finally:
            os.chdir(here)


def mbps(bps: float) -> str:
    return f"{bps / 1e6:,.1f} Mb/s"


def microseconds(ns: float) -> str:
    return f"{ns / 1e3:,.2f} µs latency"


def signed(x: float) -> str:
    return f"{x:+.1%}".replace("-", "−")


# -- the figures ----------------------------------------------------------------------

STREAM = "scenarios/tcp-stream.toml"
ENDS = ("--start", "tx:App", "--end", "rx:App")  # a stream's ends, for analyze
TOUR_HELD_OUT = (
    "held out",
    "seed 004's TCP stream at 1 Gb/s; the scenario's one fitted value, host tx's copy "
    "cost, was fitted to another configuration (the ladder's config 4, "
    "`calibration/fit_seeds.py`)",
)


def tour() -> list[Figure]:
    """The README's tour: run, run --explain, predict, validate; and analyze's view."""
    label, what = TOUR_HELD_OUT
    change = ("--change", "link.rate=10Gbps", "--trace", "base.cpt")
    # (name, argv, the line the shown output starts at: None for all of it)
    runs = [
        ("tour-run", ("run", STREAM), None),
        ("tour-explain", ("run", STREAM, "--explain", "--trace", "base.cpt"), "limited by"),
        ("tour-predict", ("predict", STREAM, *change), None),
        ("tour-validate", ("validate", STREAM, *change), None),
        ("tour-analyze", ("analyze", "base.cpt", *ENDS, "--top", "5"), None),
    ]
    out = []
    with user_directory():
        for name, argv, start in runs:
            text = cli(*argv)
            shown = from_line(text, start) if start else text
            out.append(Figure(name, label, what, console(argv, shown)))
    return out


def verdict_page() -> list[Figure]:
    """docs/verdict.md's example: a window verdict at 10 Gb/s, and its check."""
    label, what = TOUR_HELD_OUT
    what = what.replace("at 1 Gb/s", "with a 10 Gb/s link")
    explain = ("run", STREAM, "--set", "link.rate=10Gbps", "--explain", "--trace", "fast.cpt")
    check = (
        "validate", STREAM, "--set", "link.rate=10Gbps",
        "--change", "hosts.tx.tcp.wmem=4MiB", "--trace", "fast.cpt",
    )  # fmt: skip
    with user_directory():
        a = cli(*explain)
        b = cli(*check)
    return [
        Figure("verdict-window", label, what, console(explain, from_line(a, "limited by"))),
        Figure("verdict-window-check", label, what, console(check, b)),
    ]


def ladder() -> list[Figure]:
    """Seed 004's figure 6.2 in one command: each rung predicted and re-simulated."""
    argv = ("ladder", STREAM, "--steps", "3", "--no-progress")
    shown = ("ladder", STREAM, "--steps", "3")
    with user_directory():
        table = cli(*argv)
    body = f"`cpasim {' '.join(shown)}`:\n\n{table}"
    return [
        Figure(
            "ladder-tcp-stream",
            "held out; config 4's re-simulated figure fitted",
            "host tx's copy cost was fitted to the seed's config 4 (2992 Mb/s re-simulated by "
            "the seed); every prediction, and configs 1–3, are held out",
            body,
        )
    ]


#: Changes whose prediction the re-simulation checks: (set-up, scenario, overrides,
#: change).  Linux's stack is the defaults (CUBIC, SACK, Linux's buffer rules) with
#: interrupt throttling off, as tests/test_predict_linux.py.
PINGPONG = "scenarios/pingpong.toml"
LINUX = {"nic.itr": "off", "link.delay": "200us", "sim.duration": "6ms", "sim.warmup": "1ms"}
PREDICTIONS = [
    ("Linux's stack, 200 µs each way, `tcp.rcvbuf=16KiB`", None,
     {**LINUX, "tcp.rcvbuf": "16KiB"}, {"tcp.rcvbuf": "32KiB"}),
    ("the same", None,
     {**LINUX, "tcp.rcvbuf": "16KiB"}, {"hosts.rx.tcp.rcvbuf": "24KiB"}),
    ("Linux's stack, 200 µs each way, `tcp.sndbuf=8KiB`", None,
     {**LINUX, "tcp.sndbuf": "8KiB"}, {"tcp.sndbuf": "16KiB"}),
    ("Linux's stack, a 200 Mb/s bottleneck (20 ms)", None,
     {"nic.itr": "off", "bottleneck.rate": "200Mbps", "sim.duration": "20ms", "sim.warmup": "5ms"},
     {"bottleneck.overhead": "14B"}),
    ("Linux's stack with BBR (10 ms)", None,
     {"nic.itr": "off", "tcp.cc": "bbr", "sim.duration": "10ms", "sim.warmup": "2ms"},
     {"link.rate": "1200Mbps"}),
    ("the same", None,
     {"nic.itr": "off", "tcp.cc": "bbr", "sim.duration": "10ms", "sim.warmup": "2ms"},
     {"link.rate": "2Gbps"}),
    ("`tcp-stream`, 40 ms, `tcp.wmem=32KiB`", STREAM,
     {"sim.duration": "40ms", "tcp.wmem": "32KiB"}, {"tcp.wmem": "64KiB"}),
    ("`tcp-stream`, a 50 Mb/s bottleneck", STREAM,
     {"bottleneck.rate": "50Mbps"}, {"bottleneck.rate": "100Mbps"}),
    ("the same", STREAM,
     {"bottleneck.rate": "50Mbps"}, {"bottleneck.rate": "500Mbps"}),
    ("`tcp-stream` with BBR and SACK, 4 MiB buffers, a 50 Mb/s bottleneck", STREAM,
     {"tcp.cc": "bbr", "tcp.sack": "true", "tcp.wmem": "4MiB", "tcp.rmem": "4MiB",
      "bottleneck.rate": "50Mbps"},
     {"bottleneck.rate": "100Mbps"}),
    ("`pingpong` through a forwarding host (1 GHz, 20,000 cycles a packet)", PINGPONG,
     {"topology.kind": "forward", "sim.duration": "10ms", "sim.warmup": "2ms",
      "hosts.fw.cpu.freq": "1GHz", "hosts.fw.cpu.cost.forward": 20000},
     {"hosts.fw.cpu.freq": "2GHz"}),
]  # fmt: skip


def predictions() -> list[Figure]:
    import cpasim

    rows = [
        "| set-up | change | baseline | predicted | re-simulated | error |",
        "|---|---|---|---|---|---|",
    ]
    baselines: dict[str, Path] = {}  # a set-up's trace, reused by the rows that share it
    with tempfile.TemporaryDirectory(prefix="cpasim-figures-") as tmp:
        for setup, scenario, overrides, change in PREDICTIONS:
            setting = repr((scenario, sorted(overrides.items())))
            trace = baselines.setdefault(setting, Path(tmp) / f"base{len(baselines)}.cpt")
            path = scenario and str(ROOT / scenario)
            v = cpasim.validate(path, change, overrides=overrides, trace=trace)
            p = v.prediction.predicted
            ((changed, value),) = change.items()
            show = mbps if v.metric == "goodput_bps" else microseconds
            rows.append(
                f"| {setup} | `{changed}={value}` | {show(v.baseline)} | {show(p)} | "
                f"{show(v.actual)} | {signed((p - v.actual) / v.actual)} |"
            )
    return [
        Figure(
            "prediction-errors",
            "held out",
            "each prediction comes from the baseline's trace alone and is set against the "
            "re-simulated change; nothing is fitted to either",
            "\n".join(rows),
        )
    ]


def windows() -> list[Figure]:
    """The largest window Linux's rules offer for an SO_RCVBUF request."""
    from cpasim.config import load_scenario
    from cpasim.model.sockbuf import largest_window
    from cpasim.protocol import mss_for

    cfg = load_scenario(None)
    core_max, truesize = cfg.value("tcp.core_rmem_max"), cfg.value("tcp.rx_truesize")
    mss = mss_for(1500, True)
    rows = ["| `tcp.rcvbuf` (`iperf3 -w`) | largest window offered |", "|---|---|"]
    for kib in (16, 32, 64, 256):
        rows.append(f"| {kib} KiB | {largest_window(kib * 1024, core_max, truesize, mss):,} B |")
    return [
        Figure(
            "rcvbuf-windows",
            "derived from fitted values",
            f"Linux's rules with `tcp.rx_truesize` = {truesize} B, the value fitted to the "
            f"windows Linux 6.18 advertised on `calibration/captures` (MSS {mss} B, "
            f"`tcp.core_rmem_max` = {core_max:,} B)",
            "\n".join(rows),
        )
    ]


def capture() -> list[Figure]:
    """``run --pcap`` read back by ``calibrate inspect``: the rate, the round trip, the MSS."""
    from cpasim.calibrate import read_capture
    from cpasim.calibrate.inspection import inspect_capture
    from cpasim.config import load_scenario
    from cpasim.model.link import serialization_ns
    from cpasim.pcap_spec import PcapSpec
    from cpasim.protocol import mss_for
    from cpasim.simulate import simulate

    sets = ["bottleneck.rate=50Mbps", "link.delay=10ms", "sim.duration=120ms"]
    l2 = 38  # the bottleneck's default overhead, what inspect must be told
    cfg = load_scenario(ROOT / STREAM, sets=sets)
    rate, delay, mtu = cfg.bottleneck.rate, cfg.link.delay, cfg.link.mtu
    rtt = 2 * delay + (mtu + l2) * 8e9 / rate + serialization_ns(52, cfg.link.rate)
    got = {}
    with tempfile.TemporaryDirectory(prefix="cpasim-figures-") as tmp:
        for side in ("tx", "rx"):
            path = Path(tmp) / f"{side}.pcap"
            simulate(cfg, pcap=PcapSpec(path, side, 96))
            got[side] = inspect_capture(read_capture(path), l2_overhead=l2)
    tx, rx = got["tx"], got["rx"]
    rows = [
        "| | the scenario | read back beside tx's NIC | beside rx's |",
        "|---|---|---|---|",
        f"| bottleneck rate | {rate / 1e6:.3f} Mb/s | {tx.bottleneck.bps / 1e6:.3f} Mb/s "
        f"| {rx.bottleneck.bps / 1e6:.3f} Mb/s |",
        f"| minimum RTT | {rtt / 1e6:.2f} ms (closed form) | {tx.rtt_ns.min / 1e6:.2f} ms | — |",
        f"| MSS | {mss_for(mtu, cfg.tx.tcp.timestamps)} B | {tx.mss} B | {rx.mss} B |",
    ]
    cmd = (
        f"`cpasim run {STREAM} {' '.join('--set ' + s for s in sets)} --pcap run.pcap` "
        f"(and `--pcap-side rx`), then `cpasim calibrate inspect run.pcap --l2-overhead {l2}`:"
    )
    return [
        Figure(
            "capture-read-back",
            "held out",
            "what `calibrate inspect` reads from the simulated capture against what the "
            "scenario set (the round trip: twice the delay, a data frame's serialisation at "
            "the bottleneck and an ACK's on the link; the rest is the hosts' own time)",
            cmd + "\n\n" + "\n".join(rows),
        )
    ]


#: docs/flows.md's scenario: CUBIC beside BBR and a ping through a 50 Mb/s router.
FLOWS_MIX = "scenarios/flows-mix.toml"
#: Two window-limited flows (64 KiB send buffers) and a ping, for buffer what-ifs.
FLOWS_BUFFERS = "scenarios/flows-buffers.toml"
FLOWS_WHAT = (
    "held out",
    "the model's defaults (Linux 6.18's CUBIC and BBR, SACK, autotuned buffers) with the "
    "scenario's path; nothing is fitted to flows side by side",
)


def flows_page() -> list[Figure]:
    """docs/flows.md: a mix of flows run and explained, a ping's path, 1,000
    connections' retransmissions and what-ifs with several flows."""
    import cpasim

    label, what = FLOWS_WHAT
    explain = ("run", FLOWS_MIX, "--explain", "--trace", "mix.cpt")
    path = ("flows", "mix.cpt", "--flow", "2")
    many = (
        "run", STREAM, "--set", "workload.connections=1000", "--set", "sim.duration=600ms",
    )  # fmt: skip
    with user_directory() as here:
        run = cli(*explain)
        ping = cli(*path)
        thousand = cli(*many)
        rows = ["| set-up | change | predicted | re-simulated | error |", "|---|---|---|---|---|"]
        for setup, scenario, change in (
            (f"`{FLOWS_MIX}`", FLOWS_MIX, {"bottleneck.rate": "100Mbps"}),
            ("two flows of 64 KiB send buffers, 1 Gb/s, 2 ms", FLOWS_BUFFERS,
             {"tcp.wmem": "128KiB"}),
            ("the same, one flow's", FLOWS_BUFFERS, {"flows.0.tcp.wmem": "128KiB"}),
        ):  # fmt: skip
            trace = here / ("mix.cpt" if scenario == FLOWS_MIX else "buffers.cpt")
            v = cpasim.validate(scenario, change, trace=trace)
            p = v.prediction.predicted
            ((key, value),) = change.items()
            rows.append(
                f"| {setup} | `{key}={value}` | {mbps(p)} | {mbps(v.actual)} | "
                f"{signed((p - v.actual) / v.actual)} |"
            )
    mix = console(explain, from_line(run, "workload"))
    return [
        Figure("flows-mix", label, what, mix),
        Figure("flows-ping-path", label, what, console(path, ping)),
        Figure(
            "flows-1000-connections",
            TOUR_HELD_OUT[0],
            TOUR_HELD_OUT[1].replace("at 1 Gb/s", "with 1,000 connections for 600 ms"),
            console(many, from_line(thousand, "goodput")),
        ),
        Figure("flows-what-ifs", label, what, "\n".join(rows)),
    ]


def flows_real() -> list[Figure]:
    """Real Linux flows side by side (calibration/flows) against cpasim, held out."""
    from cpasim.calibrate.flow_grid import read_flow_grid, score, table_lines
    from cpasim.simulate import simulate

    runs = read_flow_grid(ROOT / "calibration" / "flows")
    order = ("cubic1", "cubic2", "cubic4", "bbr2", "cubic+bbr")  # as grid.sh plans them
    runs.sort(key=lambda r: order.index(r.name.split("_")[0]))
    scores = [score(r, lambda cfg: simulate(cfg).to_json()) for r in runs]
    return [
        Figure(
            "flows-real-linux",
            "held out",
            "each configuration of `calibration/flows` simulated from its nominal settings "
            "alone (`cpasim.calibrate.flow_grid.scenario`: the tbf's rate, queue, bucket and "
            "per-packet overhead, 10 ms each way, each flow's congestion control, ping every "
            "10 ms); nothing fitted to these captures or to the single-flow grid",
            "\n".join(table_lines(scores)),
        )
    ]


WINDOWED = "calibration/captures/d5ms_tbf50m_w32k_tx.pcap"
#: Real captures whose verdicts docs/calibration.md shows (calibration/README.md).
VERDICT_CAPTURES = [
    "calibration/captures/d5ms_tbf50m_w32k_tx.pcap",
    "calibration/captures/d5ms_tbf100m_w32k_tx.pcap",
    "calibration/captures/d1ms_tbf20m_w32k_tx.pcap",
    "calibration/captures/tbf50m_w32k_rx.pcap",
    "calibration/grid/cubic_r50m_d10ms_q15k_wauto_r1.pcap.gz",
    "calibration/captures/d1ms_tbf100m_w32k_tx.pcap",
]


def capture_verdict() -> list[Figure]:
    """docs/calibration.md: what limited real captures, and cpasim's own capture read
    back with its verdict checked against the model."""
    from cpasim.calibrate import inspect_capture, read_capture
    from cpasim.config import load_scenario
    from cpasim.pcap_spec import PcapSpec
    from cpasim.protocol import mss_for
    from cpasim.simulate import simulate

    shown = ("calibrate", "inspect", WINDOWED)
    window = Figure(
        "capture-window",
        "held out",
        "a real Linux capture (tbf 50 Mb/s, 5 ms each way, iperf3 -w 32K) as `calibrate "
        "inspect` reads it; nothing is fitted",
        console(shown, from_line(cli("calibrate", "inspect", str(ROOT / WINDOWED)), "side")),
    )
    rows = [
        "| capture | side (told by) | limited by | evidence |",
        "|---|---|---|---|",
    ]
    for name in VERDICT_CAPTURES:
        r = inspect_capture(read_capture(ROOT / name))
        v = r.verdict
        why = "; ".join(v.evidence) or "; ".join(f"not held: {c.text}" for c in v.tried)
        rows.append(
            f"| `{Path(name).name}` | {r.side} ({r.side_method}) | {v.resource} "
            f"[{v.kind}] | {why} |"
        )
    verdicts = Figure(
        "capture-verdicts",
        "held out",
        "the verdicts of real Linux captures (`calibration/README.md` says how each was "
        "made); nothing is fitted",
        "\n".join(rows),
    )
    sets = ["link.delay=500us"]
    cfg = load_scenario(ROOT / STREAM, sets=sets)
    got, run = {}, None
    with tempfile.TemporaryDirectory(prefix="cpasim-figures-") as tmp:
        for side in ("tx", "rx"):
            path = Path(tmp) / f"{side}.pcap"
            run = simulate(cfg, pcap=PcapSpec(path, side, 96))
            got[side] = inspect_capture(read_capture(path))
    tx, rx = got["tx"], got["rx"]
    v = tx.verdict
    changed = simulate(load_scenario(ROOT / STREAM, sets=[*sets, *_pairs(v.change)]))

    def rtt(r) -> str:
        return f"{r.rtt_ns.p50 / 1e6:.2f} ms median ({r.rtt_method.split(',')[0].split(':')[0]})"

    table = [
        "| | the run | read back beside tx's NIC | beside rx's |",
        "|---|---|---|---|",
        f"| side | | {tx.side} ({tx.side_method}) | {rx.side} ({rx.side_method}) |",
        f"| goodput | {run.goodput_bps / 1e6:.3f} Mb/s (after the warm-up) "
        f"| {tx.steady_goodput_bps / 1e6:.3f} Mb/s (steady) "
        f"| {rx.steady_goodput_bps / 1e6:.3f} Mb/s (steady) |",
        f"| round trip | {2 * cfg.link.delay / 1e6:.2f} ms of delay | {rtt(tx)} | {rtt(rx)} |",
        f"| handshake | | {tx.handshake_rtt_ns / 1e6:.2f} ms "
        f"| {rx.handshake_rtt_ns / 1e6:.2f} ms |",
        f"| MSS | {mss_for(cfg.link.mtu, cfg.tx.tcp.timestamps)} B | {tx.mss} B | {rx.mss} B |",
        f"| limited by | | {v.resource} [{v.kind}] | {rx.verdict.resource} [{rx.verdict.kind}] |",
    ]
    change = " ".join(f"{k}={x}" for k, x in v.change.items())
    body = (
        f"`cpasim run {STREAM} --set {sets[0]} --pcap run.pcap` (and `--pcap-side rx`), "
        "then `cpasim calibrate inspect run.pcap`:\n\n" + "\n".join(table) + "\n\n"
        f"The verdict beside tx changes `{change}` and predicts "
        f"{mbps(v.predicted['value'])}; the run with that change gives "
        f"{mbps(changed.goodput_bps)}."
    )
    own = Figure(
        "capture-own",
        "held out",
        "cpasim's own capture read back, and its verdict's change re-simulated; the "
        "scenario's one fitted value, host tx's copy cost, was fitted to another "
        "configuration (`calibration/fit_seeds.py`)",
        body,
    )
    return [window, verdicts, own]


def _pairs(change: dict[str, str]) -> list[str]:
    return [f"{k}={x}" for k, x in change.items()]


ISSUE_CAPTURE = "calibration/grid/cubic_r50m_d10ms_q2bdp_w64k_r1"


def fit_run_length() -> list[Figure]:
    """A fit of the scenario's own run length against one of the capture's."""
    from cpasim.calibrate import evidence
    from cpasim.calibrate.fit import Target, fit_one
    from cpasim.calibrate.inspection import inspect_capture
    from cpasim.calibrate.iperf import read_iperf
    from cpasim.calibrate.pcap import read_capture
    from cpasim.config import load_scenario
    from cpasim.simulate import simulate

    cap_path = ROOT / f"{ISSUE_CAPTURE}.pcap.gz"
    iperf = ROOT / f"{ISSUE_CAPTURE}.iperf3.json"
    cfg = load_scenario(ROOT / STREAM)

    def sim(c):
        return simulate(c).to_json()

    cap = read_capture(cap_path)
    report = inspect_capture(cap)
    proposals = evidence.propose(cap, report, read_iperf(iperf), cfg.rx.tcp)
    target = Target("goodput_bps", report.steady_goodput_bps, "capture")
    before = fit_one(evidence.apply(cfg, proposals, where="figures"), target, "link.delay", sim)
    after, _ = evidence.fit_from_evidence(cfg, [cap_path, iperf])
    rows = [
        "| run simulated | `link.delay`: set → fitted | goodput error | what the fit says |",
        "|---|---|---|---|",
    ]
    for what, res, props in (
        (f"the scenario's own: {cfg.sim.duration / 1e6:.0f} ms, {cfg.sim.warmup / 1e6:.0f} ms "
         "warm-up", before, proposals),
        (f"the capture's span: {after.config.sim.warmup / 1e9:.3f} s warm-up to "
         f"{after.config.sim.duration / 1e9:.3f} s", after, proposals),
    ):  # fmt: skip
        start, fitted = res.fitted["link.delay"]
        beyond = evidence.beyond_evidence(res, props)
        says = (
            "beyond its evidence: " + beyond[0].split(" (")[0] if beyond else "within its evidence"
        )
        rows.append(
            f"| {what} | {start / 1e6:.2f} → {fitted / 1e6:.2f} ms "
            f"({signed(fitted / start - 1)}) | {signed(res.residuals[0].relative)} | {says} |"
        )
    body = (
        f"`cpasim calibrate fit {STREAM} {ISSUE_CAPTURE}.pcap.gz {ISSUE_CAPTURE}.iperf3.json` "
        "(50 Mb/s, 10 ms each way, iperf3 -w 64K, CUBIC, 4 s), against the same fit over "
        "the scenario's own run:\n\n" + "\n".join(rows)
    )
    return [
        Figure(
            "fit-run-length",
            "fitted",
            "`link.delay` is fitted to the capture's steady goodput; the table shows how far "
            "the fit moved it from the base round trip the capture shows",
            body,
        )
    ]


# -- docs/detail-levels.md: the ideal host against the full one --------------------------


def percent(x: float, digits: int = 1) -> str:
    return f"{x:+.{digits}%}".replace("%", " %").replace("-", "−")


def _bench(name: str):
    """bench/NAME.py as a module (its measuring code, not a copy of it)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


#: What each process (or callback) an event wakes is, in bench_detail.py --events' names.
WOKEN = {
    "Driver._interrupts": "interrupt handler and NAPI: woken by the IRQ, their work",
    "Nic._receive": "NIC receive: a frame's arrival from the wire, descriptor and packet DMA",
    "Nic._transmit": "NIC transmit: descriptor and packet DMA, write-back, ring waits",
    "IpLayer._recv_loop": "IP Recv: woken by NAPI, its work, its core",
    "Driver._xmit": "driver transmit: woken by the qdisc, its core, its work",
    "Port._mac": "the link's MAC: a frame's serialization, a packet in its queue",
    "QdiscMac.sent": "an ideal host's MAC: a frame's serialization ends (a timer's callback)",
    "_Carrier.arrive": "a frame's arrival at the end of the wire (a carrier's callback)",
    "tcp_sink": "the reader: woken for data, its copy",
    "tcp_source": "the writer: woken for send-buffer space, its copy",
    "TcpConnection._send_loop": "TCP's transmit engine",
}
EVENTS_DURATION = "200ms"  # bench_detail.py's default


def detail_events() -> list[Figure]:
    """Events per segment at each level, where they go, and why each wait of a process
    needed one or needed none (bench_detail.py --events)."""
    from collections import Counter

    bench_sim, bench_detail = _bench("bench_sim"), _bench("bench_detail")
    per: dict[str, float] = {}  # level -> events per segment
    woken: dict[str, Counter] = {}  # level -> process woken -> events per segment
    counts = {}  # level -> bench_detail.EventCounts
    for level in ("full", "ideal"):
        sets = ["nic.itr=off", *bench_detail.LEVELS[level]]
        cfg = bench_sim.case_config("1Gbps", sets, EVENTS_DURATION)
        counts[level] = c = bench_detail.count_events(cfg)
        per[level] = c.result.events / c.result.frames["tx_to_rx"]
        woken[level] = Counter()
        for what, n in c.by_waiter:
            woken[level][what.split(" -> ", 1)[1]] += n
    full, ideal = woken["full"], woken["ideal"]
    spared = Counter(counts["full"].no_event)
    order = sorted(set(full) | set(ideal), key=lambda w: (-full[w], -ideal[w]))
    rows = [
        f"| process woken | what it is | full ({per['full']:.1f}) | full: waits that "
        f"needed none | ideal ({per['ideal']:.1f}) |",
        "|---|---|---|---|---|",
    ]
    for w in order:
        if max(full[w], ideal[w], spared[w]) < 0.05:
            continue
        cells = [f"{n[w]:.1f}" if n[w] >= 0.05 else "—" for n in (full, spared, ideal)]
        rows.append(f"| `{w}` | {WOKEN.get(w, '')} | {' | '.join(cells)} |")
    waits = [
        "| a process's wait: the event it needed | full | ideal |",
        "|---|---|---|",
    ]
    for cause, what in bench_detail.WAIT_CAUSES.items():
        cells = [counts[level].waits.get(cause, 0.0) for level in ("full", "ideal")]
        if max(cells) >= 0.05:
            waits.append(f"| {what} | {cells[0]:.2f} | {cells[1]:.2f} |")
    waits.append(
        "| *events processed while another was due at the same instant* | "
        f"{counts['full'].ties:.2f} | {counts['ideal'].ties:.2f} |"
    )
    label = "held out"
    run = (
        f"tcp-stream at 1 Gb/s with `nic.itr=off`, {EVENTS_DURATION.replace('ms', ' ms')} "
        "simulated from time 0, as `bench/bench_detail.py` runs it"
    )

    def count(level: str) -> str:
        return (
            f"{run}, with {level} hosts: the run's SimPy events over the data segments it "
            "sent; a count of the model's work, nothing fitted to it"
        )

    cmd = (
        f"`bench/bench_detail.py --events --duration {EVENTS_DURATION}`, events per data "
        "segment (its ACKs included), each kind of event summed by the process it wakes, "
        "and the waits of the full level's processes that went on without one "
        "(rows under 0.05 left out):"
    )
    return [
        Figure("detail-events-full", label, count("full"), f"{per['full']:.1f}", inline=True),
        Figure("detail-events-ideal", label, count("ideal"), f"{per['ideal']:.1f}", inline=True),
        Figure(
            "detail-events-spared",
            label,
            f"{run}, with full hosts: the waits of its processes that went on without an "
            "event (Kernel.sleep), over the data segments it sent; nothing fitted",
            f"{sum(spared.values()):.1f}",
            inline=True,
        ),
        Figure(
            "detail-events",
            label,
            f"{run}: where each level's events go, counted event by event; nothing fitted",
            cmd + "\n\n" + "\n".join(rows),
        ),
        Figure(
            "detail-waits",
            label,
            f"{run}: each wait of a process, by what its event waited for, counted at "
            "the wait; nothing fitted",
            f"`bench/bench_detail.py --events --duration {EVENTS_DURATION}`, waits per "
            "data segment (rows under 0.05 left out):\n\n" + "\n".join(waits),
        ),
    ]


#: Runs where the levels agree: (shown as, scenario, --set overrides, what limits it).
#: The set-ups of tests/test_detail_agreement.py, which checks the figures.
WARM = "sim.warmup=100ms"
DETAIL_AGREE = [
    ("tcp-stream at 100 Mb/s (link-limited)", STREAM,
     ["link.rate=100Mbps", "sim.duration=300ms", WARM], "the link"),
    ("tcp-stream, 100 Mb/s bottleneck, 150 kB queue", STREAM,
     ["bottleneck.rate=100Mbps", "bottleneck.queue=150kB", "sim.duration=300ms", WARM],
     "the bottleneck"),
    ("tcp-stream, 128 KiB receive window, 10 ms one way", STREAM,
     ["link.delay=10ms", "tcp.wmem=4MiB", "tcp.rmem=128KiB", "sim.duration=400ms", WARM],
     "window over propagation"),
    ("tcp-stream, iperf3 `-w 64K` (Linux's buffer rules), 10 ms one way", STREAM,
     ["link.delay=10ms", "tcp.wmem=0", "tcp.rmem=0", "tcp.sndbuf=64KiB", "tcp.rcvbuf=64KiB",
      "sim.duration=400ms", WARM], "window over propagation"),
    ("tcp-stream at 100 Mb/s, 0.2 % loss", STREAM,
     ["link.rate=100Mbps", "link.loss=0.002", "sim.duration=1s", WARM], "the link"),
    ("`dp-fedp`", "scenarios/dp-fedp.toml", [], "100 Mb/s Fast Ethernet"),
    ("`makineni-pentium-m`", "scenarios/makineni-pentium-m.toml", [],
     "16 connections saturate the 4 Gb/s link"),
]  # fmt: skip
SNDBUF_10MS = ["link.delay=10ms", "sim.duration=400ms", WARM]
#: Where they differ: (shown as, [(scenario, overrides)], why).
DETAIL_DIFFER = [
    ("`tcp-stream` (1 Gb/s, 350 µs one way)", [(STREAM, [])],
     "send-buffer-limited, see below"),
    ("tcp-stream at 10 ms one way", [(STREAM, SNDBUF_10MS)],
     "the send buffer bounds the window, see below"),
    ("`pingpong`", [(PINGPONG, [])], "interrupt moderation and DMA are most of the round trip"),
    ("`mosberger-10mb`, `mosberger-10mb-rpc`",
     [("scenarios/mosberger-10mb.toml", []), ("scenarios/mosberger-10mb-rpc.toml", [])],
     "protocol processing at 10 Mb/s"),
    ("`dp-gedp-up`, `dp-gedp-smp`",
     [("scenarios/dp-gedp-up.toml", []), ("scenarios/dp-gedp-smp.toml", [])],
     "the receiver's CPU"),
    ("`rx-copy-engine`", [("scenarios/rx-copy-engine.toml", [])], "the receiver's copies"),
    ("`webserver`, `waheed-http`",
     [("scenarios/webserver.toml", []), ("scenarios/waheed-http.toml", [])],
     "the server's CPU"),
    ("`waheed-router`", [("scenarios/waheed-router.toml", [])],
     "the forwarding host limits both; the full receiver drains a backlog built during "
     "the warm-up"),
]  # fmt: skip
#: Full runs whose trace ideal_would_differ predicts the ideal level from.
WOULD_DIFFER = [
    ("`tcp-stream`", STREAM, []),
    ("tcp-stream at 10 ms one way", STREAM, SNDBUF_10MS),
    ("`pingpong`", PINGPONG, []),
    ("`mosberger-10mb`", "scenarios/mosberger-10mb.toml", []),
    ("`dp-gedp-up`", "scenarios/dp-gedp-up.toml", []),
]


def detail_agreement() -> list[Figure]:
    """Ideal over full, minus one, as tests/test_detail_agreement.py measures it; what
    ideal_would_differ predicts from a full run's trace; the send buffer's fill."""
    from cpasim.config import load_scenario
    from cpasim.model.detail import ideal_would_differ
    from cpasim.simulate import simulate

    def figure(result) -> float:  # a latency workload's mean latency, else goodput
        return result.latency_ns["mean"] if result.latency_ns is not None else result.goodput_bps

    def levels(scenario, sets, trace=None):
        """(full's result, ideal over full minus one, whether the figure is a latency)."""
        cfg = load_scenario(ROOT / scenario, sets=sets)
        full = simulate(cfg.with_overrides({"host.detail": "full"}), trace_path=trace)
        ideal = simulate(cfg.with_overrides({"host.detail": "ideal"}))
        return full, figure(ideal) / figure(full) - 1, full.latency_ns is not None

    agree = ["| run | ideal vs full | what limits it |", "|---|---|---|"]
    for shown, scenario, sets, why in DETAIL_AGREE:
        _, change, _ = levels(scenario, sets)
        agree.append(f"| {shown} | {percent(change, 2)} | {why} |")
    differ = ["| run | ideal vs full | why |", "|---|---|---|"]
    for shown, runs, why in DETAIL_DIFFER:
        got = [levels(scenario, sets) for scenario, sets in runs]
        cell = ", ".join(percent(change) for _, change, _ in got)
        differ.append(f"| {shown} | {cell}{' latency' if got[0][2] else ''} | {why} |")
    would = [
        "| full run | predicted from its trace | ideal re-simulated | send buffer flagged |",
        "|---|---|---|---|",
    ]
    with tempfile.TemporaryDirectory(prefix="cpasim-figures-") as tmp:
        trace = Path(tmp) / "full.cpt"
        for shown, scenario, sets in WOULD_DIFFER:
            full, change, latency = levels(scenario, sets, trace)
            cfg = load_scenario(ROOT / scenario, sets=sets)
            # tolerance 0: the prediction even where it is within the 1 % agreement
            why = ideal_would_differ(cfg, full, trace, tolerance=0.0)
            said = why.split(" would be ")[1].split("%")[0]
            flagged = "yes" if "the send buffer bounds the window" in why else "no"
            what = " latency" if latency else ""
            would.append(
                f"| {shown} | {percent(float(said) / 100)}{what} | {percent(change)}{what} "
                f"| {flagged} |"
            )
    # The send buffer's fill: bytes in flight, time-weighted over the measured rows of a
    # time series (cpasim run --series), at each level.
    cfg = load_scenario(ROOT / STREAM, sets=SNDBUF_10MS)
    flight = {}
    for level in ("full", "ideal"):
        series = simulate(cfg.with_overrides({"host.detail": level}), series=1e6).series
        col = series.names.index("tx.c0.inflight_bytes")
        rows = [r for r in series.rows if r[0] > cfg.sim.warmup]
        flight[level] = sum(r[col] * r[1] for r in rows) / sum(r[1] for r in rows)
    buffer = cfg.tx.tcp.wmem
    fill = (
        f"keeps {flight['full']:,.0f} B of its {buffer:,} B in flight on average, the "
        f"ideal one {flight['ideal']:,.0f} B"
    )
    held_out = "held out"
    both = (
        "ideal over full, minus one (goodput, or a latency workload's mean latency), both "
        "simulated with the same seed; nothing is fitted to the difference (the seed "
        "scenarios' fitted costs are the full level's); tests/test_detail_agreement.py "
        "checks these"
    )
    return [
        Figure("detail-agree", held_out, both, "\n".join(agree)),
        Figure("detail-differ", held_out, both, "\n".join(differ)),
        Figure(
            "detail-would-differ",
            held_out,
            "`ideal_would_differ(cfg, result, trace, tolerance=0)` on each full run's trace "
            "(its prediction, with the hosts' states an ideal host does in no time at 0), "
            "against the ideal re-simulation",
            "\n".join(would),
        ),
        Figure(
            "detail-send-buffer",
            held_out,
            "tcp-stream at 10 ms one way, bytes in flight (`tx.c0.inflight_bytes` of "
            "`cpasim run --series`, every 1 ms) averaged over the 300 ms measured",
            fill,
            inline=True,
        ),
    ]


# -- docs/reading-results.md: one traced run at 10 Gb/s, read back ----------------------

READING = ("run", STREAM, "--set", "link.rate=10Gbps", "--trace", "t.cpt")


def reading_results() -> list[Figure]:
    """The page's example run: its resource loop, its carriers, its timeline's window
    and a prediction's one-line repr."""
    import cpasim

    label, what = TOUR_HELD_OUT
    what = what.replace("at 1 Gb/s", "with a 10 Gb/s link")
    timeline = ("analyze", "t.cpt", "--timeline", "t.png")
    with user_directory() as here:
        cli(*READING)
        said = cli(*timeline, stderr=True)
        result = cpasim.analyze(here / "t.cpt")
        prediction = cpasim.predict(
            STREAM, {"hosts.tx.tcp.wmem": "4MiB"}, {"link.rate": "10Gbps"}, trace=here / "t.cpt"
        )
    loop = next(lp for lp in result.loops if "[tx:Send buffer]" in lp["edge"])
    carriers = sum(1 for p in result.profile if p["sm"].partition("#")[0] == "rx:Link")
    wrote = next(line for line in said.splitlines() if line.startswith("cpasim: wrote"))
    pictures = "\n".join(["```console", "$ cpasim " + " ".join(timeline), wrote, "```"])
    call = (
        '>>> cpasim.predict("scenarios/tcp-stream.toml", {"hosts.tx.tcp.wmem": "4MiB"},\n'
        '...                {"link.rate": "10Gbps"}, trace="t.cpt")'
    )
    return [
        Figure("reading-loop", label, what, f"`{loop['edge']}` {loop['count']} times", True),
        Figure("reading-carriers", label, what, f"`rx:Link ×{carriers}`", inline=True),
        Figure("reading-timeline", label, what, pictures),
        Figure("reading-prediction", label, what, f"```python\n{call}\n{prediction!r}\n```"),
    ]


#: Groups of figures in the order docs/figures.md shows them, with the names each
#: gives; each is computed in one worker (a group shares its traces).
GROUPS: dict[Callable[[], list[Figure]], tuple[str, ...]] = {
    tour: ("tour-run", "tour-explain", "tour-predict", "tour-validate", "tour-analyze"),
    verdict_page: ("verdict-window", "verdict-window-check"),
    ladder: ("ladder-tcp-stream",),
    predictions: ("prediction-errors",),
    capture: ("capture-read-back",),
    windows: ("rcvbuf-windows",),
    flows_page: ("flows-mix", "flows-ping-path", "flows-1000-connections", "flows-what-ifs"),
    flows_real: ("flows-real-linux",),
    capture_verdict: ("capture-window", "capture-verdicts", "capture-own"),
    fit_run_length: ("fit-run-length",),
    detail_events: (
        "detail-events-full",
        "detail-events-ideal",
        "detail-events-spared",
        "detail-events",
        "detail-waits",
    ),
    detail_agreement: (
        "detail-agree",
        "detail-differ",
        "detail-would-differ",
        "detail-send-buffer",
    ),
    reading_results: ("reading-loop", "reading-carriers", "reading-timeline", "reading-prediction"),
}
#: The longest first, so that two workers finish together.
LONGEST_FIRST = [
    flows_real, fit_run_length, ladder, flows_page, detail_agreement, capture_verdict,
    verdict_page, reading_results, tour, predictions, detail_events, capture, windows,
]  # fmt: skip


# -- writing and checking -----------------------------------------------------------------


def compute(workers: int = 2) -> dict[str, Figure]:
    assert set(GROUPS) == set(LONGEST_FIRST)
    ctx = get_context("spawn")  # workers import cpasim afresh, none of this process's state
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        futures = {g: pool.submit(_call, g) for g in LONGEST_FIRST}
        done = {g: futures[g].result() for g in GROUPS}
    for group, figures in done.items():
        assert tuple(f.name for f in figures) == GROUPS[group], group.__name__
    return {f.name: f for figures in done.values() for f in figures}


#: An inline figure that opens a line: Markdown takes such a line for raw HTML.
OPENS_LINE = re.compile(r"^<!-- figure: ([a-z0-9-]+) -->(?!$)", re.M)


def bad_markers() -> list[str]:
    """Markers on the pages that name no figure, and inline ones that open a line, as
    ``PAGE: what is wrong``."""
    known = {name for names in GROUPS.values() for name in names}
    bad = []
    for page in pages():
        text, where = page.read_text(), page.relative_to(ROOT)
        for m in MARKER.finditer(text):
            if m.group(1) not in known:
                bad.append(f"{where}: no figure named {m.group(1)!r}")
        for m in OPENS_LINE.finditer(text):
            bad.append(
                f"{where}: figure {m.group(1)!r} opens a line, which Markdown would show "
                "as raw HTML: put a word before it"
            )
    return bad


def _call(group: Callable[[], list[Figure]]) -> list[Figure]:
    os.environ["COLUMNS"] = "80"  # rich's tables: the width a piped command gets
    return group()


def figures_page(figures: dict[str, Figure]) -> str:
    head = [
        "# Figures",
        "",
        "Every figure the README and these pages show, as the code gives it now.",
        "`scripts/figures` computes them, writes this page and copies each block into",
        "the pages that show it (between `<!-- figure: NAME -->` and",
        "`<!-- end figure -->`); `scripts/figures --check`, run by CI before the tests,",
        "fails naming any copy that differs. Do not edit the blocks by hand.",
        "",
        "Each figure says what it is:",
        "",
        *(f"- **{k}**: {v}." for k, v in LABELS.items()),
        "",
        "Figures measured against the seed papers and real Linux live in",
        "[`calibration/SEEDS.md`](../calibration/SEEDS.md),",
        "[`calibration/OLDER_SEEDS.md`](../calibration/OLDER_SEEDS.md) and",
        "[`calibration/REPORT.md`](../calibration/REPORT.md), each labelled the same way;",
        "timings, which cannot repeat exactly, in [timings.md](timings.md).",
    ]
    parts = ["\n".join(head)]
    for f in figures.values():
        # An inline figure opens no line: a line that starts with a comment is raw HTML.
        shown = f"In the text: {_wrap(f)}" if f.inline else _wrap(f)
        parts.append(
            f"## {f.name}\n\n**{f.label}**: {f.what}.\n\n{shown}\n\n"
            f"Shown in: {_shown_in(f.name) or 'this page only'}."
        )
    return "\n\n".join(parts) + "\n"


def _wrap(f: Figure, page: Path | None = None) -> str:
    """The figure between its markers; on a page other than docs/figures.md, with a
    line giving its label and a link to how it is made."""
    if f.inline:
        return f"<!-- figure: {f.name} -->{f.body}<!-- end figure -->"
    body = f.body
    if page is not None and page != FIGURES:
        where = os.path.relpath(FIGURES, page.parent)
        body += f"\n\n*{f.label.capitalize()}: [{f.name}]({where}#{f.name}).*"
    return f"<!-- figure: {f.name} -->\n{body}\n<!-- end figure -->"


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted(p for p in DOCS.rglob("*.md") if p != FIGURES)]


def _shown_in(name: str) -> str:
    found = [p for p in pages() if f"<!-- figure: {name} -->" in p.read_text()]
    return ", ".join(f"[`{p.relative_to(ROOT)}`](../{p.relative_to(ROOT)})" for p in found)


def synced(text: str, figures: dict[str, Figure], page: Path) -> tuple[str, list[str]]:
    """``text`` with every marked block replaced by its figure; the names that differed."""
    stale: list[str] = []

    def put(m: re.Match) -> str:
        name = m.group(1)
        if name not in figures:
            raise LookupError(f"{page.relative_to(ROOT)}: no figure named {name!r}")
        new = _wrap(figures[name], page)
        if m.group(0) != new:
            stale.append(name)
        return new

    return MARKER.sub(put, text), stale


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="scripts/figures", description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="compare only; exit 1 if any is stale")
    ap.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    args = ap.parse_args(argv)
    from cpasim.files import write_text_atomically

    started = time.perf_counter()
    bad = bad_markers()  # before a minute of computing
    for line in bad:
        print(f"figures: error: {line}", file=sys.stderr)
    if bad:
        return 2
    figures = compute(args.workers)
    stale: list[str] = []  # what differs from the code, one line each
    for page in pages():
        try:
            new, names = synced(page.read_text(), figures, page)
        except LookupError as bad:
            print(f"figures: error: {bad}", file=sys.stderr)
            return 2
        if names:
            stale.append(f"{page.relative_to(ROOT)}: {', '.join(dict.fromkeys(names))}")
            if not args.check:
                write_text_atomically(page, new)
    page = figures_page(figures)
    if not FIGURES.exists() or FIGURES.read_text() != page:
        stale.append(f"{FIGURES.relative_to(ROOT)}")
        if not args.check:
            write_text_atomically(FIGURES, page)
    took = time.perf_counter() - started
    if args.check:
        for line in stale:
            print(f"figures: stale: {line}", file=sys.stderr)
        if stale:
            print("figures: run scripts/figures to rewrite them", file=sys.stderr)
        print(f"figures: {len(figures)} figures checked in {took:.0f} s", file=sys.stderr)
        return 1 if stale else 0
    for line in stale:
        print(f"figures: rewrote {line}", file=sys.stderr)
    print(f"figures: {len(figures)} figures computed in {took:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
