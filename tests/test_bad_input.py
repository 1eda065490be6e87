"""Bad input of every kind ends in one ``cpasim: error:`` line and exit status 2.

Each case here was found by mutating real scenarios, captures and iperf3 reports
and once ended in a traceback (or a silent wrong answer); the fuzzing itself is
in ``test_fuzz_inputs.py``.
"""

from __future__ import annotations

import dataclasses
import json
import struct
import sys
from pathlib import Path

import pytest

from cpasim.cli import main
from cpasim.config import load_scenario
from cpasim.errors import CpasimError

ROOT = Path(__file__).resolve().parent.parent
TCP = str(ROOT / "scenarios" / "tcp-stream.toml")


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    """Run the command line in-process: (exit status, stdout, stderr).  Anything but
    SystemExit escapes, so a traceback fails the test."""
    try:
        main(list(argv))
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


def refused(capsys, *argv: str) -> str:
    """The one error line of a refused command (asserts exit 2 and nothing else)."""
    code, _, err = cli(capsys, *argv)
    assert code == 2, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("cpasim: error: "), err
    return lines[0]


# --- quantities and --set values ---------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("link.delay", "9e999995s"),  # decimal.Overflow
        ("link.delay", "1e999999999999999999999s"),  # exponent past decimal's own limit
        ("link.rate", "9e999995Gbps"),
        ("tcp.wmem", "9e999995KiB"),
        ("cpu.freq", "1e999999999999999999999GHz"),
        ("link.delay", "9e999995"),  # a TOML float: inf
    ],
)
def test_quantity_beyond_any_float(capsys, key, value):
    line = refused(capsys, "params", "-s", TCP, "--set", f"{key}={value}")
    assert key in line and "expected a finite" in line


@pytest.mark.parametrize("key", ["link.delay", "link.mtu", "tcp.cc", "cpu.cores", "tcp.sack"])
def test_set_integer_beyond_python_digit_limit(capsys, key):
    line = refused(capsys, "params", "-s", TCP, "--set", f"{key}=1{'0' * 5000}")
    assert f"--set {key}" in line and "4300 digits" in line


@pytest.mark.parametrize("nested", ["[" * 1000 + "]" * 1000, "{a=" * 600 + "1" + "}" * 600])
def test_set_value_nested_too_deeply(capsys, nested):
    line = refused(capsys, "params", "-s", TCP, "--set", f"link.delay={nested}")
    assert "--set link.delay" in line and "nested too deeply" in line


def test_grid_value_nested_too_deeply(capsys):
    line = refused(capsys, "sweep", TCP, "--grid", "link.delay=" + "[" * 1000 + "]" * 1000)
    assert "--grid link.delay" in line and "nested too deeply" in line


# --- scenario files ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[" + ".".join(["a"] * 3000) + "]\nx = 1\n", "unknown key"),  # RecursionError
        (".".join(["link"] * 1200) + " = 1\n", "unknown key"),
        ("[link]\ndelay = " + "[" * 1000 + "]" * 1000 + "\n", "nested too deeply"),
        ("[link]\nmtu = 1" + "0" * 5000 + "\n", "4300 digits"),
        ('[link]\ndelay = "9e999995s"\n', "expected a finite time"),
    ],
)
def test_scenario_file_refused(capsys, tmp_path, text, expected):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    line = refused(capsys, "params", "-s", str(path))
    assert str(path) in line and expected in line


# --- the forwarding host -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("sets", "expected"),
    [
        # The forwarding host runs no sockets: TCP's keys are not its.
        (["topology.kind=forward", "hosts.fw.tcp.wmem=1MiB"], "the forwarding host fw has no"),
        (["hosts.fw.copy_engine.enabled=true"], "the forwarding host fw has no"),
        (["hosts.tx.cpu.cost.forward=100"], "a key of the forwarding host only"),
        # A key of the forwarding host without one.
        (["hosts.fw.cpu.freq=1GHz"], 'topology.kind = "direct" has no forwarding host'),
        (["topology.kind=forward", "bottleneck.rate=100Mbps"], "the forwarding host is the"),
        (["topology.kind=forward", "hosts.fw.nic.rx_fifo=1KiB"], "cannot hold one frame"),
        (["hosts.gw.cpu.freq=1GHz"], "expected one of tx, rx, fw"),
    ],
)
def test_forwarding_host_key_refused(capsys, sets, expected):
    argv = ["run", TCP, "--set", "sim.duration=1ms", "--set", "sim.warmup=0ms"]
    for s in sets:
        argv += ["--set", s]
    line = refused(capsys, *argv)
    assert expected in line, line


def test_end_hosts_set_one_by_one_leave_the_absent_forwarder_alone(tmp_path):
    """A key without prefix sets the forwarding host too; setting the end hosts one by
    one afterwards is not a forwarding-host key, on the command line, in an override or
    in the resolved scenario written back (rx-copy-engine: [pcie] lanes = 4, tx 16)."""
    scenario = ROOT / "scenarios" / "rx-copy-engine.toml"
    cfg = load_scenario(scenario, sets=["hosts.rx.pcie.lanes=8"])
    assert (cfg.tx.pcie.lanes, cfg.rx.pcie.lanes) == (16, 8)
    assert load_scenario(scenario).with_overrides({"hosts.rx.pcie.lanes": "8"}) == cfg
    path = tmp_path / "resolved.toml"
    path.write_text(cfg.to_toml())
    assert load_scenario(path).digest == cfg.digest
    # Named with its prefix it is still refused.
    with pytest.raises(CpasimError, match="has no forwarding host"):
        cfg.with_overrides({"hosts.fw.pcie.lanes": "2"})


# --- captures ----------------------------------------------------------------------------

sys.path.insert(0, str(ROOT / "tests" / "captures"))
import synth  # noqa: E402


def _block(btype: int, body: bytes) -> bytes:
    """One little-endian pcapng block."""
    n = 12 + len(body)
    return struct.pack("<II", btype, n) + body + struct.pack("<I", n)


def _idb(option_code: int, data: bytes) -> bytes:
    """An Ethernet interface description block with one option (and the end marker)."""
    pad = b"\0" * (-len(data) % 4)
    opts = struct.pack("<HH", option_code, len(data)) + data + pad + b"\0\0\0\0"
    return _block(1, struct.pack("<HHI", 1, 0, 128) + opts)


def _capture(tmp_path, fmt="pcap") -> Path:
    path = tmp_path / f"flow.{fmt}"
    write = synth.write_pcap if fmt == "pcap" else synth.write_pcapng
    write(path, synth.bulk_flow(side="sender", segments=60), side="sender")
    assert path.read_bytes()[8:12] == b"\x4d\x3c\x2b\x1a" or fmt == "pcap"  # little-endian
    return path


@pytest.mark.parametrize(
    ("option", "data", "expected"),
    [
        (9, b"", "interface 1: empty if_tsresol option"),  # IndexError
        (14, b"\1\2", "interface 1: if_tsoffset option of 2 bytes"),  # struct.error
    ],
)
def test_pcapng_interface_option_malformed(capsys, tmp_path, option, data, expected):
    path = _capture(tmp_path, "pcapng")
    path.write_bytes(path.read_bytes() + _idb(option, data))
    line = refused(capsys, "calibrate", "inspect", str(path))
    assert str(path) in line and expected in line


def test_tcp_option_running_past_the_header_is_ignored(capsys, tmp_path):
    path = _capture(tmp_path)
    code, out, _ = cli(capsys, "calibrate", "inspect", "--json", str(path))
    before = json.loads(out)["flows"]
    data = bytearray(path.read_bytes())
    # A segment's timestamp option (NOP NOP kind 8 length 10 ...) becomes eleven NOPs
    # and a kind byte with no length after it: dpkt then lists None as an option.
    at = data.index(b"\x01\x01\x08\x0a", 200)
    data[at : at + 12] = b"\x01" * 11 + b"\x08"
    path.write_bytes(bytes(data))
    code, out, err = cli(capsys, "calibrate", "inspect", "--json", str(path))
    assert code == 0, err
    assert json.loads(out)["flows"] == before  # the segment still counts


@pytest.mark.parametrize("fmt", ["pcap", "pcapng"])
@pytest.mark.parametrize("cut", [5, 20, 40])
def test_capture_cut_short_reads_complete_records_and_says_so(capsys, tmp_path, fmt, cut):
    path = _capture(tmp_path, fmt)
    whole = path.read_bytes()
    code, out, err = cli(capsys, "calibrate", "show", str(path))
    assert code == 0 and json.loads(out)["cut_short"] is None and not err
    complete = json.loads(out)["packets"]
    path.write_bytes(whole[:-cut])  # the last record loses its end (or its header's)
    code, out, err = cli(capsys, "calibrate", "show", str(path))
    assert code == 0, err
    shown = json.loads(out)
    assert shown["packets"] == complete - 1
    assert "cut short in the middle of" in shown["cut_short"]
    assert err.startswith(f"cpasim: warning: {path}: capture cut short") and err.count("\n") == 1
    code, out, err = cli(capsys, "calibrate", "inspect", "--json", str(path))
    assert code == 0 and "cut short" in json.loads(out)["notes"][0] and "cut short" in err


def test_pcap_record_longer_than_any_snaplen(capsys, tmp_path):
    path = _capture(tmp_path)
    data = bytearray(path.read_bytes())
    data[24 + 8 : 24 + 12] = struct.pack("<I", 0x7FFFFFFF)  # first record's captured length
    path.write_bytes(bytes(data))
    line = refused(capsys, "calibrate", "inspect", str(path))
    assert "corrupt pcap record 1" in line and "262144" in line


# --- iperf3 reports ----------------------------------------------------------------------

IPERF = ROOT / "calibration" / "grid" / "cubic_r20m_d5ms_q15k_wauto_r1.iperf3.json"


def _edited(tmp_path, edit) -> Path:
    doc = json.loads(IPERF.read_text())
    edit(doc)
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda d: d.update(end=None), None),  # AttributeError; a test that died: no totals
        (lambda d: d["end"].update(sum_sent="x"), 'end.sum_sent is "x"; expected an object'),
        (
            lambda d: d["end"]["sum_received"].update(bytes="1000"),
            'end.sum_received.bytes is "1000"; expected a finite number',
        ),
        (
            lambda d: d["intervals"][0]["sum"].update(bits_per_second=1e400),
            "intervals[0].sum.bits_per_second is Infinity",
        ),
        (
            lambda d: d["intervals"][1]["streams"][0].update(snd_cwnd="big"),
            "intervals[1].streams[0].snd_cwnd",
        ),
        (
            lambda d: d["start"]["test_start"].update(num_streams=10**30),
            "start.test_start.num_streams",
        ),
        (lambda d: d["start"].update(connected=[]), "start.connected is empty"),
        (lambda d: d["start"].update(connected=[None]), "start.connected[0] is null"),
        (lambda d: d["end"]["streams"][0].update(sender=7), "end.streams[0].sender is 7"),
        (lambda d: d["end"].update(cpu_utilization_percent=[]), "cpu_utilization_percent"),
        (lambda d: d["intervals"][0]["sum"].update(end=-1), "intervals[0].sum.end is -1"),
        (lambda d: d["intervals"][0]["sum"].update(retransmits=True), "retransmits is true"),
    ],
)
def test_iperf3_report_edited(capsys, tmp_path, edit, expected):
    path = _edited(tmp_path, edit)
    if expected is None:
        code, out, err = cli(capsys, "calibrate", "show", str(path))
        assert code == 0, err
        assert json.loads(out)["sent"] is None
        return
    line = refused(capsys, "calibrate", "show", str(path))
    assert str(path) in line and expected in line


# --- calibrate fit -----------------------------------------------------------------------


def _write_flow(path: Path, *, data: bool = True, one_instant: bool = False) -> Path:
    segs = synth.bulk_flow(side="sender", segments=60)
    if not data:  # the handshake and pure ACKs: a transfer that moved nothing
        segs = [s for s in segs if s.payload == 0]
    if one_instant:  # a clock that never ticked
        segs = [dataclasses.replace(s, t_ns=synth.T0) for s in segs]
    synth.write_pcap(path, segs, side="sender")
    return path


@pytest.mark.parametrize(
    ("data", "one_instant", "params", "expected"),
    [
        (False, False, True, "measured goodput_bps is 0; expected a positive figure"),
        (True, True, True, "measured goodput_bps is 0; expected a positive figure"),
        (True, True, False, "share one timestamp"),  # ZeroDivisionError
    ],
)
def test_fit_without_goodput(capsys, tmp_path, data, one_instant, params, expected):
    cap = _write_flow(tmp_path / "c.pcap", data=data, one_instant=one_instant)
    argv = ["calibrate", "fit", TCP, str(cap), "--out", str(tmp_path / "o.toml")]
    line = refused(capsys, *argv, *(["--params", "link.delay"] if params else []))
    assert str(cap) in line and expected in line
    assert not (tmp_path / "o.toml").exists()


def test_fit_iperf_report_with_zero_goodput(capsys, tmp_path):
    def zero(d):
        for key in ("sum_sent", "sum_received"):
            d["end"][key].update(bytes=0, bits_per_second=0)

    path = _edited(tmp_path, zero)
    argv = ["calibrate", "fit", TCP, str(path), "--params", "link.delay"]
    line = refused(capsys, *argv, "--out", str(tmp_path / "o.toml"))
    assert "measured goodput_bps is 0" in line


def test_inspect_says_when_goodput_cannot_be_measured(capsys, tmp_path):
    cap = _write_flow(tmp_path / "c.pcap", one_instant=True)
    code, out, err = cli(capsys, "calibrate", "inspect", str(cap))
    assert code == 0, err
    assert "goodput  - (" in out and "all at one instant" in out
    assert "goodput cannot be measured" in out


# --- runs that measure nothing, never finish, or are huge ---------------------------------


def test_transfer_ending_before_the_warmup_says_the_window_is_empty(capsys):
    sets = ["--set", "workload.bytes=1MB", "--set", "sim.warmup=20ms"]
    code, out, err = cli(capsys, "run", TCP, "--no-progress", *sets)
    assert code == 0, err
    assert "goodput      - (nothing measured: the run ended at" in out
    assert "read in -" not in out  # no negative measured time
    assert "warning      measurement window empty" in out
    code, out, err = cli(capsys, "run", TCP, "--no-progress", "--json", *sets)
    result = json.loads(out)
    assert result["window"] == "empty" and "window empty" in result["warnings"][0]


@pytest.mark.slow
def test_transfer_that_never_completes_says_so(capsys):
    sets = ["--set", "workload.bytes=100kB", "--set", "link.loss=1.0", "--set", "sim.warmup=0s"]
    code, out, err = cli(capsys, "run", TCP, "--no-progress", "--json", *sets)
    assert code == 0, err
    result = json.loads(out)
    assert result["transfer"] == "incomplete" and result["bytes_delivered"] == 0
    assert result["warnings"][0] == (
        "transfer incomplete: 0 of 100000 B read when the run stopped at 1000 s "
        "(the 1000 s bound on a sized run)"
    )
    # ... and why: every frame lost, the sender backed off waiting for its timer.
    assert len(result["warnings"]) == 2 and result["stall"]["kind"] == "timeout"
    assert "frames dropped on the link: lost on the wire (link.loss)" in result["warnings"][1]
    code, out, err = cli(capsys, "run", TCP, "--no-progress", *sets)
    assert "warning      transfer incomplete: 0 of 100000 B" in out
    assert "limited by   host tx's retransmission timer  [timeout]" in out


@pytest.mark.slow
def test_an_ordinary_run_has_no_warning_fields(capsys):
    code, out, err = cli(
        capsys, "run", TCP, "--no-progress", "--json", "--set", "sim.duration=30ms"
    )
    assert code == 0 and not err  # and no size warning either
    assert not {"window", "transfer", "warnings"} & set(json.loads(out))


@pytest.mark.parametrize(
    ("flow", "expected"),
    [
        ("1" + "0" * 5000, "--flow 1000000000"),  # int() refuses 5000 digits
        ("\u00b2", "expected exactly one flow"),  # a digit to isdigit(), not to int()
    ],
)
def test_inspect_flow_that_is_no_index(capsys, flow, expected):
    cap = str(ROOT / "tests" / "captures" / "cubic_head.pcap.gz")
    line = refused(capsys, "calibrate", "inspect", cap, "--flow", flow)
    assert expected in line and len(line) < 300


# --- plot --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("bin.csv", bytes(range(128, 256)), "not a readable CSV file"),  # UnicodeDecodeError
        ("text.parquet", b"a,b\n1,2\n", "not a readable parquet file"),  # ArrowInvalid
    ],
)
def test_plot_file_that_is_not_what_it_says(capsys, tmp_path, name, content, expected):
    path = tmp_path / name
    path.write_bytes(content)
    line = refused(capsys, "plot", str(path), "--x", "a", "--y", "b")
    assert str(path) in line and expected in line


def test_a_huge_quantity_is_quoted_cut_short():
    """A 2 MB scenario value is named, not echoed whole, in its error line."""
    from cpasim.errors import CpasimError
    from cpasim.units import RATE, parse_quantity

    with pytest.raises(CpasimError) as err:
        parse_quantity("1" * 2_000_000 + "x", RATE, what="link.rate")
    assert len(str(err.value)) < 300 and "2,000,003 characters" in str(err.value)


def test_fit_params_says_a_capture_was_cut_short(tmp_path):
    """calibrate fit --params reads its targets through read_targets: the cut is noted."""
    from cpasim.calibrate.fit import read_targets

    path = _capture(tmp_path)
    assert read_targets(str(path))[0].note is None
    path.write_bytes(path.read_bytes()[:-20])
    assert "cut short in the middle of" in read_targets(str(path))[0].note


@pytest.mark.parametrize(
    ("script", "args"),
    [
        ("bench/bench_sim.py", ["--duration", "abc"]),
        # A Python process each (half a second): the quick suite runs one.
        *[
            pytest.param(script, args, marks=pytest.mark.slow)
            for script, args in [
                ("bench/bench_sweep.py", ["--duration", "abc"]),
                ("calibration/fit_seeds.py", ["--duration", "abc"]),
                ("calibration/fit_copy_engine.py", ["--warmup", "abc"]),
                ("calibration/fit_udp_tables.py", ["--duration", "1x"]),
                ("calibration/m5bus_transactions.py", ["--duration", "abc"]),
            ]
        ],
    ],
)
def test_scripts_outside_the_cli_refuse_bad_input_in_one_line(script, args):
    """The benchmarks and calibration scripts take scenario values too: a bad one ends
    in one ``<script>: error:`` line and status 2, as on the command line."""
    import os
    import subprocess

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(ROOT / script), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    name = Path(script).stem
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [done.stderr.strip()]
    assert done.stderr.startswith(f"{name}: error: --set: sim.")


def test_script_main_passes_a_scripts_own_status_through(capsys):
    from cpasim.errors import script_main

    assert script_main("s", lambda: None) == 0
    assert script_main("s", lambda n: n, 3) == 3

    def interrupted():
        raise KeyboardInterrupt

    assert script_main("s", interrupted) == 130
    assert capsys.readouterr().err == "s: interrupted\n"


# --- paths that cannot be read, and files that are not regular files ---------------------


def _path_errors(tmp_path) -> dict[str, tuple[str, str]]:
    """What a person may hand cpasim for an input, and the reason each must name."""
    plain = tmp_path / "plain.toml"
    plain.write_text("")
    loop = tmp_path / "loop.toml"
    loop.symlink_to(loop)
    return {
        "under a file": (str(plain / "x.toml"), "Not a directory"),
        "a symbolic-link loop": (str(loop), "Too many levels of symbolic links"),
        "a name too long": (str(tmp_path / ("a" * 300 + ".toml")), "File name too long"),
        "memory that reads as EIO": ("/proc/self/mem", "Input/output error"),
        "endless zeros": ("/dev/zero", "it is a character device, not a regular file"),
        "endless random bytes": ("/dev/urandom", "it is a character device, not a regular file"),
        "a directory": (str(tmp_path), "it is a directory, not a regular file"),
    }


@pytest.mark.parametrize(
    "case",
    [
        "under a file",
        "a symbolic-link loop",
        "a name too long",
        "memory that reads as EIO",
        "endless zeros",
        "endless random bytes",
        "a directory",
    ],
)
def test_a_scenario_path_that_cannot_be_read_is_one_line(capsys, tmp_path, case):
    path, reason = _path_errors(tmp_path)[case]
    line = refused(capsys, "params", "-s", path)
    assert line == f"cpasim: error: {path}: cannot read scenario file: {reason}"


@pytest.mark.parametrize("command", ["trace info", "calibrate show", "plot --x a --y b"])
@pytest.mark.parametrize("case", ["a symbolic-link loop", "endless zeros", "under a file"])
def test_other_inputs_that_cannot_be_read_are_one_line(capsys, tmp_path, command, case):
    path, reason = _path_errors(tmp_path)[case]
    name, *options = command.split()
    if name in ("trace", "calibrate"):
        name, options = f"{name} {options.pop(0)}", options
    line = refused(capsys, *name.split(), path, *options)
    assert path in line and reason in line


# --- what once ended in a traceback ---------------------------------------------------

TRACES = ROOT / "tests" / "traces"


def test_the_timeline_of_a_json_lines_trace_names_its_rows():
    """--timeline took the key of a JSON Lines trace before reading the trace, which
    makes a fresh key per read: IndexError on every JSON Lines trace."""
    import matplotlib.pyplot as plt

    from cpasim.analysis import analyze
    from cpasim.analysis.timeline import draw_timeline
    from cpasim.tracing import open_trace

    trace = TRACES / "stack_driver.jsonl"
    result = analyze(open_trace(trace), "h:Stack", "h:Driver", listing_limit=1000)
    figure = draw_timeline(open_trace(trace), result, (0.0, 20.0))
    try:
        labels = [t.get_text() for t in figure.axes[0].get_yticklabels()]
    finally:
        plt.close(figure)
    assert labels == ["h:Stack", "h:Driver"]


@pytest.mark.slow
@pytest.mark.parametrize("trace", ["stack_driver.jsonl", "model_webserver.cpt converted"])
def test_analyze_timeline_of_a_json_lines_trace(capsys, tmp_path, trace):
    """The same through the command line, on a real run's trace converted too."""
    if trace.endswith("converted"):
        source = tmp_path / "webserver.jsonl"
        assert (
            cli(capsys, "trace", "convert", str(TRACES / "model_webserver.cpt"), str(source))[0]
            == 0
        )
        ends = ("rx:App", "rx:App")
    else:
        source, ends = TRACES / trace, ("h:Stack", "h:Driver")
    png = tmp_path / "t.png"
    args = ["analyze", str(source), "--start", ends[0], "--end", ends[1], "--timeline", str(png)]
    code, _, err = cli(capsys, *args)
    assert code == 0, err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("growth", ["+99999999999999999999", "+2147483648"])
def test_capacity_growth_beyond_the_counters_is_one_line(capsys, growth):
    trace = str(TRACES / "stack_driver.jsonl")
    args = ["analyze", trace, "--start", "h:Stack", "--end", "h:Driver"]
    line = refused(capsys, *args, "--capacity", f"h:*={growth}")
    assert "K must be at most 2147483647" in line
    _, _, err = cli(capsys, *args, "--capacity", "h:*=+2147483647")  # the largest: analysed
    assert "at most" not in err and "Traceback" not in err


@pytest.mark.parametrize(
    "command",
    [
        ["trace", "names"],
        ["trace", "convert", "OUT.cpt"],
        ["trace", "convert", "OUT.jsonl"],
        ["analyze", "--start", "h:A", "--end", "h:A"],
        ["trace", "info"],
    ],
)
def test_a_name_holding_a_lone_surrogate_is_one_line(capsys, tmp_path, command):
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"t":0,"op":"begin","sys":"h","sm":"A","state":"x\\ud800y"}\n')
    argv = [a.replace("OUT", str(tmp_path / "out")) for a in command]
    argv.insert(2 if command[0] == "trace" else 1, str(trace))
    line = refused(capsys, *argv)
    assert "field 'state' is not Unicode text (a lone surrogate): x\\ud800y" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.jsonl"]


def test_a_microbenchmark_table_with_a_line_over_128_kib_is_one_line(capsys, tmp_path):
    table = tmp_path / "bench.csv"
    table.write_text("size_bytes,Os_us,note\n64,1.5," + "x" * 200_000 + "\n")
    line = refused(capsys, "calibrate", "show", str(table))
    assert f"{table}: not a readable CSV table" in line and "field larger than field limit" in line


def test_plot_leaves_an_infinite_value_out_and_says_so(capsys, tmp_path):
    results = tmp_path / "s.csv"
    results.write_text(
        "link.rate,repeat,seed,error,goodput_bps\n1Gbps,0,1,,inf\n2Gbps,0,1,,5e8\n3Gbps,0,1,,-inf\n"
    )
    args = ["plot", str(results), "--x", "link.rate", "--y", "goodput_bps"]
    code, _, err = cli(capsys, *args, "--out", str(tmp_path / "p.png"))
    assert code == 0, err
    assert "cpasim: goodput_bps: 2 row(s) of s.csv infinite, left out of the figure" in err
    assert (tmp_path / "p.png").stat().st_size > 0
    results.write_text("link.rate,repeat,seed,error,goodput_bps\n1Gbps,0,1,,inf\n")
    line = refused(capsys, *args, "--out", str(tmp_path / "q.png"))
    assert "--y goodput_bps: the column holds no finite numbers" in line


def test_a_pcapng_block_announcing_4_gib_is_refused_without_reading_it(capsys, tmp_path):
    import tracemalloc

    from cpasim.calibrate.pcap import read_capture

    path = _capture(tmp_path, "pcapng")
    data = path.read_bytes()
    # The first block after the section header and the interface: a packet block.
    at = struct.unpack_from("<I", data, 4)[0]
    at += struct.unpack_from("<I", data, at + 4)[0]
    path.write_bytes(data[: at + 4] + struct.pack("<I", 0xFFFFFFF0) + data[at + 8 : at + 404])
    tracemalloc.start()
    try:
        with pytest.raises(CpasimError, match=r"corrupt pcapng block 3 \(length 4294967280"):
            read_capture(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20
    assert "corrupt pcapng block" in refused(capsys, "calibrate", "show", str(path))


# --- captures whose time goes backwards -------------------------------------------------


def _timed_capture(tmp_path, retime) -> Path:
    """The synthetic transfer with its records' times (and order) changed by ``retime``."""
    segs = synth.bulk_flow(side="sender", segments=60)
    path = tmp_path / "timed.pcap"
    synth.write_pcap(path, retime(segs), side="sender")
    return path


def _at(segs, i: int, t_ns: int):
    return [*segs[:i], dataclasses.replace(segs[i], t_ns=t_ns), *segs[i + 1 :]]


@pytest.mark.parametrize(
    ("retime", "expected"),
    [
        (lambda s: _at(s, 30, 1_000_000_000), "time goes backwards at pcap record 31: 1.000000 s"),
        (lambda s: s[::-1], "time goes backwards at pcap record 2"),  # each step > 1 ms
        (lambda s: [*s[:20], s[5], *s[20:]], "time goes backwards at pcap record 21"),
        (lambda s: [*s[:20], s[19], *s[20:]], "pcap record 21 repeats record 20 whole"),
    ],
    ids=["one record at t=1s", "reversed", "a record copied later", "a record repeated"],
)
def test_a_capture_whose_time_goes_backwards_is_refused(capsys, tmp_path, retime, expected):
    path = _timed_capture(tmp_path, retime)
    for command in (["calibrate", "inspect"], ["calibrate", "show"]):
        line = refused(capsys, *command, str(path))
        assert expected in line, line
    # fit took such a capture for a slower path, and fitted another regime to it
    line = refused(capsys, "calibrate", "fit", TCP, str(path), "--out", str(tmp_path / "f.toml"))
    assert expected in line, line
    assert not (tmp_path / "f.toml").exists()


def test_reversed_records_closer_than_a_millisecond_are_refused_as_a_whole(capsys, tmp_path):
    """Reversed at 10 Gb/s every step back is a microsecond: it is their number that
    gives them away."""
    path = _timed_capture(
        tmp_path, lambda s: [dataclasses.replace(g, t_ns=10**12 - i) for i, g in enumerate(s)]
    )
    line = refused(capsys, "calibrate", "show", str(path))
    assert "time goes backwards at 92 of its 93 records (more than 1%)" in line


def test_the_small_steps_back_of_a_real_capture_are_read(capsys, tmp_path):
    """A record a few microseconds late (a real capture's CPU queues) reads as ever."""

    def late(segs):
        segs = list(segs)
        segs[10], segs[11] = segs[11], dataclasses.replace(segs[10], t_ns=segs[11].t_ns + 28_000)
        return segs

    code, out, err = cli(
        capsys, "calibrate", "inspect", "--json", str(_timed_capture(tmp_path, late))
    )
    assert code == 0 and not err, err
    assert json.loads(out)["flows"]
