"""Trace files: every block a result reads is checked, both readers apply the same
rules, crafted files are refused with one line, and a run's sidecar is bound to
its trace."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import cpasim.cli
from cpasim.cli import main
from cpasim.errors import CpasimError
from cpasim.tracing import open_trace, trace_digest
from cpasim.tracing.columnar import (
    COUNT,
    FOOTER,
    FRAME,
    HEADER,
    MAGIC,
    TAG_END,
    TAG_KEYS,
    TAG_RECS,
    VERSION,
    CptWriter,
    block_frame,
    read_cpt,
)
from cpasim.tracing.records import BEGIN, DECLARE, ENQ, RECORD_DTYPE, TraceKey

TRACES = Path(__file__).parent / "traces"


def block(tag: bytes, payload: bytes) -> tuple[bytes, bytes]:
    """A block to be framed (with its number) by :func:`cpt_file`."""
    return tag, payload


def cpt_file(*blocks: tuple[bytes, bytes], records: int = 0, rec_blocks: int = 0) -> bytes:
    """A ``.cpt`` file of ``blocks`` with a footer announcing ``records``/``rec_blocks``."""
    out = [HEADER.pack(MAGIC, VERSION, RECORD_DTYPE.itemsize, 0)]
    for number, (tag, payload) in enumerate(
        [*blocks, block(TAG_END, FOOTER.pack(records, rec_blocks))], 1
    ):
        out += [block_frame(number, tag, len(payload), payload), payload]
    return b"".join(out)


def names_block(delta) -> bytes:
    return block(TAG_KEYS, json.dumps(delta).encode())


def records_block(rows: np.ndarray) -> bytes:
    return block(TAG_RECS, COUNT.pack(len(rows)) + rows.tobytes())


GOOD_NAMES = {"base": [0, 0, 0, 0], "sms": [["h", "A", "0"]], "states": ["s"]}
GOOD_NAMES |= {"queues": [["h", "q", "0"]], "conns": []}


def one_begin() -> np.ndarray:
    rows = np.zeros(1, RECORD_DTYPE)
    rows["op"] = BEGIN
    return rows


def read_all(path) -> int:
    return sum(len(c) for c in open_trace(path).chunks())


def cli(args, capsys) -> tuple[int, str]:
    with pytest.raises(SystemExit) as stop:
        main([str(a) for a in args])
    return stop.value.code, capsys.readouterr().err


def assert_one_line_error(code: int, err: str, *parts: str) -> None:
    assert code == 2, err
    assert err.startswith("cpasim: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    for part in parts:
        assert part in err, err


# --- item 2: blocks skipped on the way to a tail are checked too ------------------------


def three_blocks(path: Path) -> None:
    key = TraceKey()
    key.intern_sm("h", "A")
    key.intern_state("s")
    with CptWriter(path) as w:
        for first in (0, 10, 20):
            rows = np.zeros(10, RECORD_DTYPE)
            rows["t"] = np.arange(first, first + 10)
            w.write(rows, key)


def record_offsets(data: bytes) -> list[int]:
    """Byte offsets of the records blocks' payloads."""
    out, pos = [], HEADER.size
    while pos < len(data):
        tag, length, _ = FRAME.unpack_from(data, pos)
        if tag == TAG_RECS:
            out.append(pos + FRAME.size)
        pos += FRAME.size + length
    return out


def test_a_corrupted_time_in_a_block_read_from_its_tail_is_a_checksum_error(tmp_path):
    path = tmp_path / "t.cpt"
    three_blocks(path)
    data = bytearray(path.read_bytes())
    second = record_offsets(bytes(data))[1]
    # The second block's last record (t=19) overwritten with t=12: before the tail's
    # start (15), so a reader deciding by it would skip records 15..19 unseen.
    last = second + COUNT.size + 9 * RECORD_DTYPE.itemsize
    data[last : last + 8] = struct.pack("<d", 12.0)
    path.write_bytes(bytes(data))
    with pytest.raises(CpasimError, match=r"t\.cpt: checksum mismatch in block 3"):
        list(read_cpt(path).chunks(since=15.0))


def test_a_corrupted_block_wholly_before_the_tail_is_a_checksum_error(tmp_path):
    path = tmp_path / "t.cpt"
    three_blocks(path)
    data = bytearray(path.read_bytes())
    first = record_offsets(bytes(data))[0]
    data[first + COUNT.size + 3 * RECORD_DTYPE.itemsize] ^= 0x40  # a time in record 4
    path.write_bytes(bytes(data))
    with pytest.raises(CpasimError, match="checksum mismatch in block 2"):
        list(read_cpt(path).chunks(since=25.0))


def test_the_tail_of_an_intact_file_is_its_records_from_then_on(tmp_path):
    path = tmp_path / "t.cpt"
    three_blocks(path)
    tail = np.concatenate(list(read_cpt(path).chunks(since=15.0)))
    assert tail["t"].tolist() == [float(t) for t in range(15, 30)]


# --- item 7: names blocks with a valid checksum but the wrong shape ---------------------

NAMES_VARIANTS = {
    "not JSON": b"\xff\xfe",
    "cut JSON": b'{"base": [0, 0',
    "deep nesting": b"[" * 100_000,
    "a list": b"[]",
    "a number": b"7",
    "null": b"null",
    "no base": {k: v for k, v in GOOD_NAMES.items() if k != "base"},
    "no sms": {k: v for k, v in GOOD_NAMES.items() if k != "sms"},
    "extra field": {**GOOD_NAMES, "more": []},
    "base a number": {**GOOD_NAMES, "base": 0},
    "base too short": {**GOOD_NAMES, "base": [0, 0, 0]},
    "base of strings": {**GOOD_NAMES, "base": ["0", 0, 0, 0]},
    "base negative": {**GOOD_NAMES, "base": [-1, 0, 0, 0]},
    "base a float": {**GOOD_NAMES, "base": [0.5, 0, 0, 0]},
    "base a bool": {**GOOD_NAMES, "base": [False, 0, 0, 0]},
    "base ahead": {**GOOD_NAMES, "base": [3, 0, 0, 0]},
    "sms a string": {**GOOD_NAMES, "sms": "h"},
    "sm a string": {**GOOD_NAMES, "sms": ["h"]},
    "sm of two": {**GOOD_NAMES, "sms": [["h", "A"]]},
    "sm with a number": {**GOOD_NAMES, "sms": [["h", 1, "0"]]},
    "sm with a list": {**GOOD_NAMES, "sms": [["h", ["A"], "0"]]},
    "sm null": {**GOOD_NAMES, "sms": [None]},
    "state a number": {**GOOD_NAMES, "states": [1]},
    "state a list": {**GOOD_NAMES, "states": [["s"]]},
    "state an object": {**GOOD_NAMES, "states": [{}]},
    "queue with null": {**GOOD_NAMES, "queues": [[None, "q", "0"]]},
    "conn a number": {**GOOD_NAMES, "conns": [5]},
    "sm twice": {**GOOD_NAMES, "sms": [["h", "A", "0"], ["h", "A", "0"]]},
    "state twice": {**GOOD_NAMES, "states": ["s", "s"]},
}


@pytest.mark.parametrize("variant", NAMES_VARIANTS)
def test_a_names_block_of_the_wrong_shape_is_one_line(tmp_path, variant, capsys):
    delta = NAMES_VARIANTS[variant]
    payload = delta if isinstance(delta, bytes) else json.dumps(delta).encode()
    path = tmp_path / "names.cpt"
    path.write_bytes(
        cpt_file(block(TAG_KEYS, payload), records_block(one_begin()), records=1, rec_blocks=1)
    )
    code, err = cli(["trace", "info", path], capsys)
    assert_one_line_error(code, err, f"{path}: ", "names")


def test_the_good_names_block_of_those_variants_reads(tmp_path):
    path = tmp_path / "names.cpt"
    path.write_bytes(
        cpt_file(names_block(GOOD_NAMES), records_block(one_begin()), records=1, rec_blocks=1)
    )
    assert read_all(path) == 1


# --- items 7-8: both readers, the same rules ------------------------------------------


def declare_cpt(path: Path, capacity: int) -> None:
    rows = np.zeros(1, RECORD_DTYPE)
    rows["op"] = DECLARE
    rows["n"] = capacity
    path.write_bytes(
        cpt_file(names_block(GOOD_NAMES), records_block(rows), records=1, rec_blocks=1)
    )


def declare_jsonl(path: Path, capacity: int) -> None:
    path.write_text(
        json.dumps({"t": 0, "op": "declare", "sys": "h", "sm": "A", "q": "q", "capacity": capacity})
        + "\n"
    )


@pytest.mark.parametrize("capacity", [0, -5])
@pytest.mark.parametrize("write", [declare_cpt, declare_jsonl], ids=["cpt", "jsonl"])
def test_both_readers_refuse_a_declared_capacity_below_one(tmp_path, capsys, capacity, write):
    path = tmp_path / ("d.cpt" if write is declare_cpt else "d.jsonl")
    write(path, capacity)
    code, err = cli(["trace", "info", path], capsys)
    assert_one_line_error(code, err, f"field 'capacity' must be at least 1, got {capacity}")


@pytest.mark.parametrize("write", [declare_cpt, declare_jsonl], ids=["cpt", "jsonl"])
def test_both_readers_accept_a_declared_capacity(tmp_path, write):
    path = tmp_path / ("d.cpt" if write is declare_cpt else "d.jsonl")
    write(path, 4)
    assert read_all(path) == 1


def counted_cpt(path: Path, op: int, n: int, flags: int = 0) -> None:
    rows = np.zeros(1, RECORD_DTYPE)
    rows["op"], rows["n"], rows["flags"] = op, n, flags
    path.write_bytes(
        cpt_file(names_block(GOOD_NAMES), records_block(rows), records=1, rec_blocks=1)
    )


@pytest.mark.parametrize(
    ("op", "n", "flags", "says"),
    [
        (ENQ, -3, 0, "field 'n' must be >= 0"),
        (BEGIN, 7, 0, "op 'begin' carries no count"),
        (BEGIN, 0, 1, "flags 1, expected 0"),
        (DECLARE, 5, 6, "flags 6"),
    ],
)
def test_the_cpt_reader_checks_counts_and_flags_as_json_lines_does(
    tmp_path, capsys, op, n, flags, says
):
    path = tmp_path / "c.cpt"
    counted_cpt(path, op, n, flags)
    code, err = cli(["trace", "info", path], capsys)
    assert_one_line_error(code, err, "record 1", says)


BIG = 2**63
Q = {"sys": "h", "sm": "A", "q": "q"}
JSONL_VARIANTS = {
    "t beyond float range": {"t": 10**400, "op": "begin", "sys": "h", "sm": "A", "state": "s"},
    "n of 2**63": {"t": 0, "op": "enq", "sys": "h", "sm": "A", "q": "q", "n": BIG},
    "n below -2**63": {"t": 0, "op": "deq", "sys": "h", "sm": "A", "q": "q", "n": -BIG - 1},
    "capacity of 2**63": {
        "t": 0,
        "op": "declare",
        "sys": "h",
        "sm": "A",
        "q": "q",
        "capacity": BIG,
    },
    "n a huge float": {"t": 0, "op": "enq", "sys": "h", "sm": "A", "q": "q", "n": 1e300},
}


@pytest.mark.parametrize("variant", JSONL_VARIANTS)
def test_json_lines_numbers_out_of_range_are_one_line(tmp_path, capsys, variant):
    path = tmp_path / "big.jsonl"
    path.write_text(json.dumps(JSONL_VARIANTS[variant]) + "\n")
    code, err = cli(["trace", "info", path], capsys)
    assert_one_line_error(code, err, f"{path}:1: field ")


def test_an_empty_cpt_file_is_not_an_empty_trace(tmp_path, capsys):
    path = tmp_path / "empty.cpt"
    path.write_bytes(b"")
    code, err = cli(["trace", "info", path], capsys)
    assert_one_line_error(code, err, f"{path}: not a", "empty")


def test_a_cpt_name_on_json_lines_content_is_refused(tmp_path, capsys):
    path = tmp_path / "lines.cpt"
    shutil.copy(TRACES / "stack_driver.jsonl", path)
    code, err = cli(["trace", "info", path], capsys)
    assert_one_line_error(code, err, "not a cpasim trace file")


def test_a_trace_name_reaches_an_error_line_escaped_and_cut(tmp_path, capsys):
    evil = "A\n\x1b[2Jcleared" + "x" * 5000
    names = {**GOOD_NAMES, "sms": [["h", evil, "0"], ["h", evil, "0"]]}
    path = tmp_path / "evil.cpt"
    path.write_bytes(cpt_file(names_block(names)))
    code, err = cli(["trace", "info", path], capsys)
    assert_one_line_error(code, err, "repeats the name", "A\\n\\x1b[2Jcleared")
    assert "\x1b" not in err and len(err) < 400


# --- item 6 and convert's output --------------------------------------------------------


@pytest.mark.parametrize("out", ["out.jsonl", "out.cpt"])
def test_converting_a_bad_trace_leaves_nothing_behind(tmp_path, capsys, out):
    bad = tmp_path / "bad.cpt"
    bad.write_bytes((TRACES / "model_tcp_stream.cpt").read_bytes()[:-40])
    (tmp_path / out).write_text("what was there")
    code, err = cli(["trace", "convert", bad, tmp_path / out], capsys)
    assert_one_line_error(code, err, "truncated")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["bad.cpt", out])
    assert (tmp_path / out).read_text() == "what was there"


def test_converting_into_a_directory_is_one_line(tmp_path, capsys):
    target = tmp_path / "dir.jsonl"
    target.mkdir()
    code, err = cli(["trace", "convert", TRACES / "stack_driver.jsonl", target], capsys)
    assert_one_line_error(code, err, f"{target}: cannot write trace file: it is a directory")


@pytest.mark.parametrize("planted", ["out.cpt.tmp", "out.cpt.part", ".out.cpt.tmp"])
def test_a_planted_link_at_a_temporary_name_is_not_followed(tmp_path, capsys, planted):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (tmp_path / planted).symlink_to(victim)
    main_out = tmp_path / "out.cpt"
    with pytest.raises(SystemExit) as stop:
        main(["trace", "convert", str(TRACES / "stack_driver.jsonl"), str(main_out)])
    assert stop.value.code == 0
    assert victim.read_text() == "precious"
    assert (tmp_path / planted).is_symlink()
    assert read_all(main_out) == read_all(TRACES / "stack_driver.jsonl")


# --- item 3: a run's sidecar is bound to its trace ------------------------------------

FAST = """
[sim]
duration = "4ms"
warmup = "1ms"

[nic]
itr = "off"
"""


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """Traced runs of the scenario and of a longer one, with their sidecars."""
    root = tmp_path_factory.mktemp("sidecar")
    scenario = root / "fast.toml"
    scenario.write_text(FAST)
    runner = CliRunner()
    cpasim.cli._register()
    for name, duration in (("a", "4ms"), ("b", "5ms")):
        trace = root / f"{name}.cpt"
        args = ["run", str(scenario), "--set", f"sim.duration={duration}", "--trace", str(trace)]
        res = runner.invoke(cpasim.cli.app, args)
        assert res.exit_code == 0, res.output
    return scenario, root / "a.cpt", root / "b.cpt"


def predict_args(scenario, trace) -> list[str]:
    change = ["--change", "link.rate=2Gbps"]
    return ["predict", str(scenario), "--set", "sim.duration=4ms", *change, "--trace", str(trace)]


def test_a_sidecar_left_beside_another_trace_is_refused(recorded, tmp_path, capsys):
    scenario, a, b = recorded
    trace = tmp_path / "t.cpt"
    shutil.copy(a, trace)
    shutil.copy(a.with_name(a.name + ".run.json"), tmp_path / "t.cpt.run.json")
    code, _ = cli(predict_args(scenario, trace), capsys)
    assert code == 0  # the pair as recorded predicts
    shutil.copy(b, trace)  # the trace replaced, its old sidecar left beside it
    code, err = cli(predict_args(scenario, trace), capsys)
    assert_one_line_error(code, err, "t.cpt.run.json: describes another trace than t.cpt")


def test_rerecording_binds_the_new_sidecar_and_a_failure_in_between_is_caught(
    recorded, tmp_path, capsys, monkeypatch
):
    import cpasim.cli.run

    scenario, a, _ = recorded
    trace = tmp_path / "t.cpt"
    shutil.copy(a, trace)
    shutil.copy(a.with_name(a.name + ".run.json"), tmp_path / "t.cpt.run.json")

    def dies(*args, **kwargs):
        raise CpasimError("the machine stopped here")

    # The new trace is in place but its sidecar was never written: the old one stays.
    monkeypatch.setattr(cpasim.cli.run, "write_run_record", dies)
    code, _ = cli(["run", scenario, "--set", "sim.duration=5ms", "--trace", trace], capsys)
    assert code == 2
    assert trace.read_bytes() != a.read_bytes()
    monkeypatch.undo()
    code, err = cli(predict_args(scenario, trace), capsys)
    assert_one_line_error(code, err, "describes another trace")


def test_an_edited_sidecar_digest_is_refused(recorded, tmp_path, capsys):
    scenario, a, _ = recorded
    trace = tmp_path / "t.cpt"
    shutil.copy(a, trace)
    side = json.loads(a.with_name(a.name + ".run.json").read_text())
    side["trace_digest"] = "cpt:0"
    (tmp_path / "t.cpt.run.json").write_text(json.dumps(side))
    code, err = cli(predict_args(scenario, trace), capsys)
    assert_one_line_error(code, err, "describes another trace")


@pytest.fixture(scope="module")
def analysed(recorded, tmp_path_factory):
    """The trace ``a.cpt`` with the sidecar its first prediction completed."""
    scenario, a, _ = recorded
    root = tmp_path_factory.mktemp("analysed")
    trace = root / "t.cpt"
    shutil.copy(a, trace)
    shutil.copy(a.with_name(a.name + ".run.json"), root / "t.cpt.run.json")
    res = CliRunner().invoke(cpasim.cli.app, predict_args(scenario, trace))
    assert res.exit_code == 0, res.output
    side = json.loads((root / "t.cpt.run.json").read_text())
    assert side["analysed"] is True
    return scenario, trace, side


def _edit(side: dict, dotted: str, value) -> dict:
    side = json.loads(json.dumps(side))
    *parents, last = dotted.split(".")
    node = side
    for name in parents:
        node = node[name]
    node[last] = value
    return side


SIDECAR_EDITS = {
    "result null": ("result", None),
    "goodput a string": ("result.goodput_bps", "fast"),
    "goodput infinite": ("result.goodput_bps", float("inf")),
    "unknown workload": ("result.workload", "bulk"),
    "analysis start a string": ("result.analysis_start", "tx:App"),
    "latency a string": ("result.latency_ns", "x"),
    "analysed a string": ("analysed", "yes"),
    "path a list": ("path", []),
    "critical path a string": ("path.critical_path_ns", {"": "x"}),
    "most critical without numbers": ("path.most_critical", [{"name": 5}]),
    "loops of numbers": ("path.loops", [1]),
    "state means of null": ("state_means", {"a": None}),
    "state entries of a fraction": ("state_entries", {"a": 1.5}),
    "window half there": ("window", {"t0": 0}),
    # Of the right type but the wrong sense:
    "goodput negative": ("result.goodput_bps", -1e9),
    "latency of zero": ("result.latency_ns", {"mean": 0}),
    "critical path negative": ("path.critical_path_ns", {"": -5.0}),
    "share above one": ("path.share", 1.5),
    "a most critical share negative": (
        "path.most_critical",
        [{"name": "tx:A:s", "share": -0.2, "time_ns": 1.0, "waiting_share": 0.0}],
    ),
    "waiting share above one": (
        "path.most_critical",
        [{"name": "tx:A:s", "share": 0.2, "time_ns": 1.0, "waiting_share": 3.0}],
    ),
    "state means negative": ("state_means", {"tx:App:send": -1.0}),
    "state entries negative": ("state_entries", {"tx:App:send": -3}),
    "busy time negative": ("path.busy_ns", {"tx:PCIe down": -1.0}),
}


@pytest.mark.parametrize("edit", SIDECAR_EDITS)
def test_an_edited_sidecar_is_one_line(analysed, tmp_path, capsys, edit):
    scenario, trace, side = analysed
    shutil.copy(trace, tmp_path / "t.cpt")
    (tmp_path / "t.cpt.run.json").write_text(json.dumps(_edit(side, *SIDECAR_EDITS[edit])))
    code, err = cli(predict_args(scenario, tmp_path / "t.cpt"), capsys)
    assert_one_line_error(code, err, "t.cpt.run.json: malformed run sidecar")


@pytest.mark.parametrize(
    "rows, where",
    [
        ([[1, 2], [3, -4]], None),
        ([], None),
        ([[1, 2], [3, 4.5]], ".preamble[1][1]"),
        ([[1, True]], ".preamble[0][1]"),
        ([[1], 7], ".preamble[1]"),
        ({"a": 1}, ".preamble"),
    ],
)
def test_a_table_in_a_sidecar_is_checked_cell_by_cell(rows, where):
    """A window's preamble, thousands of rows, is checked in one loop; a bad cell is
    still named."""
    from cpasim.predict import runs

    assert runs._fits({"preamble": rows}, {"preamble": [[runs._INT]]}) == where


def test_the_unedited_analysed_sidecar_predicts(analysed, tmp_path, capsys):
    scenario, trace, side = analysed
    shutil.copy(trace, tmp_path / "t.cpt")
    (tmp_path / "t.cpt.run.json").write_text(json.dumps(side))
    code, err = cli(predict_args(scenario, tmp_path / "t.cpt"), capsys)
    assert code == 0, err


def test_a_window_preamble_naming_undefined_ids_is_refused():
    from cpasim.predict.window import Window, WindowSource

    trace = TRACES / "model_tcp_stream.cpt"
    sms = len(read_cpt(trace).read_names().sms)
    rows = np.zeros(2, RECORD_DTYPE)
    rows["op"] = BEGIN
    rows["sm"][1] = sms + 5  # beyond the trace's SMs and the window's origins
    window = Window(0.0, 1.0, sms, (), rows)
    with pytest.raises(CpasimError, match=r"preamble in its sidecar\): record 2 .*never defined"):
        WindowSource(trace, window)
    rows["sm"][1] = 0
    assert WindowSource(trace, Window(0.0, 1.0, sms, (), rows)).key.sizes()[0] == sms


# --- the second campaign: the sidecar race, sidecars of the wrong sense, block numbers ---

#: Long enough after its warm-up for predictions to analyse the window of its tail.
WINDOWED = ["--set", "sim.duration=30ms"]


@pytest.fixture(scope="module")
def windowed(recorded, tmp_path_factory):
    """A trace predicted from its window, with the analysed sidecar that says so."""
    scenario = recorded[0]
    trace = tmp_path_factory.mktemp("windowed") / "t.cpt"
    with pytest.raises(SystemExit) as stop:
        args = ["predict", scenario, *WINDOWED, "--change", "link.rate=2Gbps", "--trace", trace]
        main([str(a) for a in args])
    assert stop.value.code == 0
    side = json.loads(trace.with_name("t.cpt.run.json").read_text())
    assert side["window"] is not None
    return scenario, trace, side


@pytest.mark.slow
@pytest.mark.parametrize("where", [("t0", -5e6), ("t0", 1e12), ("t_measure", 2e6)])
def test_a_sidecar_window_outside_the_trace_is_refused(windowed, tmp_path, capsys, where):
    """The window a sidecar records is the config's (runs.window_span): one moved
    elsewhere — before the trace, past its end — is no analysis of this run."""
    scenario, trace, side = windowed
    shutil.copy(trace, tmp_path / "t.cpt")
    field, shift = where
    edited = _edit(side, f"window.{field}", side["window"][field] + shift)
    (tmp_path / "t.cpt.run.json").write_text(json.dumps(edited))
    args = ["predict", scenario, *WINDOWED, "--change", "link.rate=2Gbps"]
    args += ["--trace", tmp_path / "t.cpt"]
    code, err = cli(args, capsys)
    assert_one_line_error(code, err, "t.cpt.run.json: malformed run sidecar (field window.t0)")
    (tmp_path / "t.cpt.run.json").write_text(json.dumps(side))
    assert cli(args, capsys)[0] == 0


def _record(scenario, trace, duration: str) -> list:
    return ["run", scenario, "--set", f"sim.duration={duration}", "--trace", trace]


def _record_by_api(scenario, trace, duration: str) -> None:
    cpasim.run(scenario, trace=trace, **{"sim.duration": duration})


#: Each way a traced run publishes its trace and sidecar, with the function it calls
#: between the two: (module to patch, its name).
PUBLISHERS = {
    "run --trace": ("cpasim.cli.run", "write_run_record"),
    "run --explain --trace": ("cpasim.cli.run", "analysed_run"),
    "cpasim.run(trace=...)": ("cpasim.predict.runs", "write_run_record"),
}


@pytest.mark.parametrize("how", PUBLISHERS)
def test_a_run_whose_trace_another_run_replaced_leaves_that_runs_pair_alone(
    recorded, tmp_path, capsys, monkeypatch, how
):
    """Run A pauses after writing its trace, before its sidecar; run B records the same
    path meanwhile.  A used to read its digest back from the path (B's trace) and
    write its own sidecar with it: predict then took B's 5 ms trace for A's 4 ms run."""
    import importlib

    scenario, _, _ = recorded
    trace = tmp_path / "t.cpt"
    module, name = PUBLISHERS[how]
    module = importlib.import_module(module)
    real = getattr(module, name)
    paused = []

    def pause_then_write(*args, **kwargs):
        if not paused:  # run A's pause: run B starts and finishes on the same path
            paused.append(True)
            assert cli(_record(scenario, trace, "5ms"), capsys)[0] == 0
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, pause_then_write)
    replaced = f"{trace}: replaced or changed while this command used it"
    if how.startswith("cpasim.run"):
        with pytest.raises(CpasimError, match="replaced or changed while this command"):
            _record_by_api(scenario, trace, "4ms")
    else:
        extra = ["--explain"] if "--explain" in how else []
        code, err = cli([*_record(scenario, trace, "4ms"), *extra], capsys)
        assert_one_line_error(code, err, replaced)
    assert paused
    monkeypatch.undo()
    side = json.loads((tmp_path / "t.cpt.run.json").read_text())
    assert side["result"]["sim_time_ns"] == 5e6  # B's pair stands, whole
    assert side["trace_digest"] == trace_digest(trace)
    # Predicting from A's configuration is refused: the pair on disk is B's.
    code, err = cli(predict_args(scenario, trace), capsys)
    assert_one_line_error(code, err, "recorded with config digest")


def test_predict_refuses_a_mismatched_pair_whatever_the_timing(
    recorded, tmp_path, capsys, monkeypatch
):
    """Run B replaces the trace in the last instant, between run A's check that its
    trace is still there and the rename of A's sidecar: the pair on disk is then
    mismatched, and predict says so instead of taking B's trace for A's."""
    from cpasim.predict import runs

    scenario, _, _ = recorded
    trace = tmp_path / "t.cpt"
    real = runs.write_text_atomically
    paused = []

    def pause_then_publish(path, text):
        if not paused:
            paused.append(True)
            assert cli(_record(scenario, trace, "5ms"), capsys)[0] == 0
        return real(path, text)

    monkeypatch.setattr(runs, "write_text_atomically", pause_then_publish)
    assert cli(_record(scenario, trace, "4ms"), capsys)[0] == 0
    monkeypatch.undo()
    code, err = cli(predict_args(scenario, trace), capsys)
    assert_one_line_error(code, err, "t.cpt.run.json: describes another trace than t.cpt")


def test_an_analysis_of_a_trace_replaced_while_it_was_read_is_not_recorded(
    recorded, tmp_path, capsys, monkeypatch
):
    """The first prediction from a trace analyses it and completes its sidecar: if
    another run replaces the trace meanwhile, the analysis (of which file?) is not
    recorded, and nothing is predicted from it."""
    from cpasim.predict import runs

    scenario, a, b = recorded
    trace = tmp_path / "t.cpt"
    shutil.copy(a, trace)
    shutil.copy(a.with_name(a.name + ".run.json"), tmp_path / "t.cpt.run.json")
    before = (tmp_path / "t.cpt.run.json").read_text()
    real = runs.state_entries

    def replaced_meanwhile(source):
        shutil.copy(b, trace)
        return real(source)

    monkeypatch.setattr(runs, "state_entries", replaced_meanwhile)
    code, err = cli(predict_args(scenario, trace), capsys)
    assert_one_line_error(code, err, "replaced or changed while this command used it")
    assert (tmp_path / "t.cpt.run.json").read_text() == before


def test_a_sidecar_path_taken_by_a_directory_fails_before_the_run(
    recorded, tmp_path, capsys, monkeypatch
):
    import cpasim.simulate

    scenario, _, _ = recorded
    ran = []
    monkeypatch.setattr(cpasim.simulate.Kernel, "run_until", lambda *a: ran.append(a))
    (tmp_path / "t.cpt.run.json").mkdir()
    for command in (
        _record(scenario, tmp_path / "t.cpt", "4ms"),
        predict_args(scenario, tmp_path / "t.cpt"),
    ):
        code, err = cli(command, capsys)
        assert_one_line_error(
            code, err, "t.cpt.run.json: cannot write run record: it is a directory"
        )
    assert ran == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.cpt.run.json"]


def test_a_trace_converted_there_and_back_keeps_its_run_record(recorded, tmp_path, capsys):
    """.cpt -> .jsonl -> .cpt changes the bytes (ids and blocks are the writer's), so
    the trace's own sidecar was refused: each conversion now carries the run record,
    bound to the file it wrote."""
    scenario, _, _ = recorded
    trace = tmp_path / "t.cpt"
    assert cli(_record(scenario, trace, "1.3ms"), capsys)[0] == 0
    original = json.loads((tmp_path / "t.cpt.run.json").read_text())
    for src, dst in (("t.cpt", "t.jsonl"), ("t.jsonl", "back.cpt")):
        code, err = cli(["trace", "convert", tmp_path / src, tmp_path / dst], capsys)
        assert code == 0, err
    assert (tmp_path / "back.cpt").read_bytes() != trace.read_bytes()
    for converted in ("t.jsonl", "back.cpt"):
        side = json.loads((tmp_path / f"{converted}.run.json").read_text())
        assert side["trace_digest"] == trace_digest(tmp_path / converted)
        assert (side["config_digest"], side["result"]) == (
            original["config_digest"],
            original["result"],
        )
        assert side["analysed"] is False  # analysed again from the file it describes


@pytest.mark.slow
def test_a_trace_converted_there_and_back_predicts_as_the_original(recorded, tmp_path, capsys):
    scenario, a, _ = recorded
    trace = tmp_path / "t.cpt"
    shutil.copy(a, trace)
    shutil.copy(a.with_name(a.name + ".run.json"), tmp_path / "t.cpt.run.json")
    for src, dst in (("t.cpt", "t.jsonl"), ("t.jsonl", "back.cpt")):
        assert cli(["trace", "convert", tmp_path / src, tmp_path / dst], capsys)[0] == 0
    outputs = []
    for path in (trace, tmp_path / "t.jsonl", tmp_path / "back.cpt"):
        with pytest.raises(SystemExit) as stop:
            main([str(x) for x in predict_args(scenario, path)])
        assert stop.value.code == 0
        outputs.append(capsys.readouterr().out.splitlines()[:2])  # the baseline's lines
    assert outputs[1] == outputs[0] and outputs[2] == outputs[0]


def test_a_run_record_is_not_carried_to_a_conversion_of_another_trace(recorded, tmp_path, capsys):
    scenario, a, b = recorded
    trace = tmp_path / "t.cpt"
    shutil.copy(b, trace)  # a's sidecar beside b's trace: it vouches for nothing
    shutil.copy(a.with_name(a.name + ".run.json"), tmp_path / "t.cpt.run.json")
    code, err = cli(["trace", "convert", trace, tmp_path / "u.cpt"], capsys)
    assert code == 0, err
    assert not (tmp_path / "u.cpt.run.json").exists()


def _blocks(data: bytes) -> list[tuple[int, int]]:
    out, pos = [], HEADER.size
    while pos < len(data):
        _, length, _ = FRAME.unpack_from(data, pos)
        out.append((pos, FRAME.size + length))
        pos += FRAME.size + length
    return out


@pytest.mark.parametrize("how", ["removed", "repeated", "swapped"])
def test_a_records_block_removed_with_a_footer_to_match_is_refused(tmp_path, how):
    """Blocks carry their number in their checksum: a file spliced from whole blocks
    (each with a valid checksum) and a footer redone to match reads as corrupted."""
    path = tmp_path / "t.cpt"
    three_blocks(path)
    data = path.read_bytes()
    (k0, n0), (r1, n1), (r2, n2), (r3, n3), _ = _blocks(data)
    recs = [data[r1 : r1 + n1], data[r2 : r2 + n2], data[r3 : r3 + n3]]
    kept = {"removed": [recs[0], recs[2]], "repeated": [recs[0], recs[1], recs[1], recs[2]]}
    kept["swapped"] = [recs[1], recs[0], recs[2]]
    blocks = kept[how]
    count = sum(struct.unpack_from("<Q", b, FRAME.size)[0] for b in blocks)
    footer = FOOTER.pack(count, len(blocks))
    spliced = data[: k0 + n0] + b"".join(blocks)
    spliced += block_frame(len(blocks) + 2, TAG_END, len(footer), footer) + footer
    path.write_bytes(spliced)
    with pytest.raises(CpasimError, match=r"checksum mismatch in block [2-4].*removed, repeated"):
        list(read_cpt(path).chunks())


def test_a_version_1_trace_is_still_read():
    """Traces written before blocks carried their number (the committed ones)."""
    data = (TRACES / "model_webserver.cpt").read_bytes()
    assert HEADER.unpack_from(data)[1] == 1
    assert read_all(TRACES / "model_webserver.cpt") > 1000
