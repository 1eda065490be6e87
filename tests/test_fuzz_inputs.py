"""Fuzzing the inputs a person hands cpasim: scenario files, ``--set`` values,
pcap/pcapng captures and iperf3 reports, each mutated from a real one (cut short,
bits flipped, values of the wrong type, huge numbers, deep nesting, captures whose
time goes backwards).

Every outcome must be a clean refusal (one ``cpasim: error:`` line, exit 2) or a
correct result (exit 0, what an intact input of that content gives), never a
traceback.  The quick suite runs a few derandomized examples of each; the slow
campaigns (``-m slow``, run in CI) run many more.
"""

from __future__ import annotations

import gzip
import json
import struct
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from inprocess import cli

from cpasim.config import load_scenario
from cpasim.config.params import SPECS

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = sorted((ROOT / "scenarios").glob("*.toml"))
sys.path.insert(0, str(ROOT / "tests" / "captures"))
import synth  # noqa: E402

QUICK = settings(
    max_examples=15,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
CAMPAIGN = settings(QUICK, max_examples=400)


def clean(code: int, err: str) -> None:
    """Exit 0, or exit 2 with one error line; warnings (one line each) may precede it."""
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert all(line.startswith(("cpasim: warning: ", "cpasim: error: ")) for line in lines), err
    if code == 0:
        assert not any(line.startswith("cpasim: error: ") for line in lines), err
    else:
        assert code == 2, err
        assert lines and lines[-1].startswith("cpasim: error: ")


# --- values ------------------------------------------------------------------------------

_HUGE = ["9e999995", "1e999999999999999999999", "1" + "0" * 5000, "-1" + "0" * 400, "1e-999999"]
_UNITS = ["", "s", "us", "ns", "Gbps", "B", "KiB", "GHz", "kB", "Tbps"]
#: TOML text for a value: plain, huge, of another type, or nested arrays/inline tables.
toml_values = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(
        lambda f: {"nan": "nan", "inf": "inf", "-inf": "-inf"}.get(repr(f), repr(f))
    ),
    st.tuples(st.sampled_from(_HUGE + ["1", "0.5", "-3", "64"]), st.sampled_from(_UNITS)).map(
        lambda t: f'"{t[0]}{t[1]}"'
    ),
    st.sampled_from(_HUGE),
    st.sampled_from(["true", '"x"', "[1, 2]", "{a = 1}", '""', "1979-05-27"]),
    st.integers(min_value=1, max_value=1200).map(lambda n: "[" * n + "]" * n),
    st.integers(min_value=1, max_value=700).map(lambda n: "{a=" * n + "1" + "}" * n),
)


def _mutate_scenario(text: str, how: int, at: float, value: str) -> str:
    lines = text.splitlines()
    assignments = [i for i, line in enumerate(lines) if "=" in line and not line.startswith("#")]
    if how == 0:  # cut short
        return text[: int(at * len(text))]
    if how == 1:  # one bit flipped
        data = bytearray(text.encode())
        i = int(at * (len(data) - 1))
        data[i] ^= 1 << (i % 8)
        return data.decode("utf-8", "replace")
    if how == 2 and assignments:  # a value replaced
        i = assignments[int(at * (len(assignments) - 1))]
        lines[i] = lines[i].split("=")[0] + "= " + value
        return "\n".join(lines)
    depth = 1 + int(at * 3000)  # a table or dotted key nested deep
    return text + "\n[" + ".".join(["link"] * depth) + "]\nrate = 1\n"


def _check_scenario(tmp_path, source: Path, how: int, at: float, value: str) -> None:
    path = tmp_path / "mutated.toml"
    path.write_text(_mutate_scenario(source.read_text(), how, at, value))
    code, out, err = cli("params", "-s", str(path), "--json")
    clean(code, err)
    if code == 0:  # a correct result: what the library reads from the same file
        assert json.loads(out)["digest"] == load_scenario(path).digest


@QUICK
@given(
    st.sampled_from(SCENARIOS),
    st.integers(0, 3),
    st.floats(0, 1),
    toml_values,
)
def test_mutated_scenarios(tmp_path_factory, source, how, at, value):
    _check_scenario(tmp_path_factory.mktemp("s"), source, how, at, value)


@pytest.mark.slow
@CAMPAIGN
@given(st.sampled_from(SCENARIOS), st.integers(0, 3), st.floats(0, 1), toml_values)
def test_mutated_scenarios_campaign(tmp_path_factory, source, how, at, value):
    _check_scenario(tmp_path_factory.mktemp("s"), source, how, at, value)


def _check_set(key: str, value: str) -> None:
    scenario = str(ROOT / "scenarios" / "tcp-stream.toml")
    code, out, err = cli("params", "-s", scenario, "--set", f"{key}={value}", "--json")
    clean(code, err)
    if code == 0:
        assert json.loads(out)["digest"] == load_scenario(scenario, [f"{key}={value}"]).digest


@QUICK
@given(st.sampled_from(sorted(SPECS)), toml_values)
def test_set_values(key, value):
    _check_set(key, value)


@pytest.mark.slow
@CAMPAIGN
@given(st.sampled_from(sorted(SPECS)), toml_values)
def test_set_values_campaign(key, value):
    _check_set(key, value)


# --- captures ----------------------------------------------------------------------------


def _captures() -> dict[str, bytes]:
    """A synthetic transfer as pcap and pcapng, and the head of a real capture."""
    segs = synth.bulk_flow(side="sender", segments=40)
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for fmt, write in (("pcap", synth.write_pcap), ("pcapng", synth.write_pcapng)):
            path = Path(tmp) / fmt
            write(path, segs, side="sender")
            out[fmt] = path.read_bytes()
    with gzip.open(ROOT / "tests" / "captures" / "cubic_head.pcap.gz") as f:
        real = f.read()
    out["real"] = real[: 24 + 40 * (16 + 96)]  # its header and about 40 records
    return out


CAPTURES = _captures()


def _mutate_capture(data: bytes, how: int, at: float, word: int) -> bytes:
    data = bytearray(data)
    i = int(at * (len(data) - 1))
    if how == 0:  # cut short
        return bytes(data[:i])
    if how == 1:  # one bit flipped
        data[i] ^= 1 << (word % 8)
        return bytes(data)
    if how == 2:  # a 32-bit field overwritten (lengths, timestamps, options)
        data[i : i + 4] = struct.pack("<I", word)
        return bytes(data)
    return bytes(data[:24]) + bytes(data[i:])  # records lost from the middle


def _check_capture(tmp_path, kind: str, how: int, at: float, word: int) -> None:
    path = tmp_path / "mutated.cap"
    path.write_bytes(_mutate_capture(CAPTURES[kind], how, at, word))
    code, out, err = cli("calibrate", "show", str(path))
    clean(code, err)
    if code == 0:
        shown = json.loads(out)
        assert ("cut short" in err) == (shown["cut_short"] is not None)
    code, out, err = cli("calibrate", "inspect", "--json", str(path))
    clean(code, err)


words = st.one_of(
    st.sampled_from([0, 1, 0xFFFFFFFF, 0x7FFFFFFF, 0x80000000, 262145]), st.integers(0, 2**32 - 1)
)


@QUICK
@given(st.sampled_from(sorted(CAPTURES)), st.integers(0, 3), st.floats(0, 1), words)
def test_mutated_captures(tmp_path_factory, kind, how, at, word):
    _check_capture(tmp_path_factory.mktemp("c"), kind, how, at, word)


@pytest.mark.slow
@CAMPAIGN
@given(st.sampled_from(sorted(CAPTURES)), st.integers(0, 3), st.floats(0, 1), words)
def test_mutated_captures_campaign(tmp_path_factory, kind, how, at, word):
    _check_capture(tmp_path_factory.mktemp("c"), kind, how, at, word)


# --- captures whose time goes backwards ----------------------------------------------------


def _records(data: bytes) -> list[int]:
    """Byte offsets of a (little-endian) pcap file's records."""
    out, pos = [], 24
    while pos + 16 <= len(data):
        out.append(pos)
        pos += 16 + struct.unpack_from("<I", data, pos + 8)[0]
    return out


def _retimed(data: bytes, how: int, at: float, back_ns: int) -> bytes:
    """A pcap capture with time sent back: one record's time moved earlier, a stretch
    of records reversed, or a record copied to a later place."""
    data = bytearray(data)
    offsets = _records(bytes(data))
    i = 1 + int(at * (len(offsets) - 2))
    pos = offsets[i]
    if how == 0:  # one record earlier by back_ns (microseconds to the whole capture)
        sec, ns = struct.unpack_from("<II", data, pos)
        t = max(0, sec * 1_000_000_000 + ns - back_ns)
        struct.pack_into("<II", data, pos, t // 1_000_000_000, t % 1_000_000_000)
        return bytes(data)
    records = [bytes(data[a:b]) for a, b in zip(offsets, [*offsets[1:], len(data)], strict=True)]
    if how == 1:  # a stretch reversed
        j = min(len(records), i + 2 + back_ns % 40)
        records[i:j] = records[i:j][::-1]
    else:  # a record copied later on
        records.insert(min(len(records), i + 1 + back_ns % 30), records[i])
    return bytes(data[:24]) + b"".join(records)


def _check_retimed(tmp_path, how: int, at: float, back_ns: int) -> None:
    path = tmp_path / "retimed.pcap"
    path.write_bytes(_retimed(CAPTURES["pcap"], how, at, back_ns))
    for command in (["calibrate", "show"], ["calibrate", "inspect", "--json"]):
        code, out, err = cli(*command, str(path))
        clean(code, err)
        if code == 2:
            assert any(what in err for what in ("time goes backwards", "repeats record")), err
    if code == 0:  # read: only what a real capture does, a step back under a millisecond
        from cpasim.calibrate.pcap import MAX_STEP_BACK_NS, read_capture

        times = [p.t_ns for p in read_capture(path).packets]
        latest = [max(times[: k + 1]) for k in range(len(times))]
        assert all(latest[k] - times[k] <= MAX_STEP_BACK_NS for k in range(len(times)))


backwards = st.one_of(
    st.integers(1, 2_000_000), st.sampled_from([999_000, 1_000_001, 10**9, 999 * 10**9])
)


@settings(QUICK, max_examples=5)
@given(st.integers(0, 2), st.floats(0, 1), backwards)
def test_captures_whose_time_goes_backwards(tmp_path_factory, how, at, back_ns):
    _check_retimed(tmp_path_factory.mktemp("t"), how, at, back_ns)


@pytest.mark.slow
@CAMPAIGN
@given(st.integers(0, 2), st.floats(0, 1), backwards)
def test_captures_whose_time_goes_backwards_campaign(tmp_path_factory, how, at, back_ns):
    _check_retimed(tmp_path_factory.mktemp("t"), how, at, back_ns)


# --- iperf3 reports ----------------------------------------------------------------------

IPERF = json.loads(
    (ROOT / "calibration" / "grid" / "cubic_r20m_d5ms_q15k_wauto_r1.iperf3.json").read_text()
)
json_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.just([]),
    st.just({}),
    st.integers(1, 3000).map(lambda n: json.loads("[" * n + "]" * n) if n < 900 else "deep"),
)


def _paths(doc, prefix=()):
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:2]):
            yield from _paths(v, (*prefix, i))


PATHS = [p for p in _paths(IPERF) if p]


def _check_iperf(tmp_path, edits, cut: float | None) -> None:
    doc = json.loads(json.dumps(IPERF))
    for where, value in edits:
        node = doc
        try:
            for k in where[:-1]:
                node = node[k]
            node[where[-1]] = value
        except (KeyError, IndexError, TypeError):
            pass  # an earlier edit replaced the parent
    text = json.dumps(doc)
    if cut is not None:
        text = text[: int(cut * len(text))]
    path = tmp_path / "report.json"
    path.write_text(text)
    code, out, err = cli("calibrate", "show", str(path))
    clean(code, err)


iperf_edits = st.lists(st.tuples(st.sampled_from(PATHS), json_values), min_size=1, max_size=3)


@QUICK
@given(iperf_edits, st.one_of(st.none(), st.floats(0, 1)))
def test_mutated_iperf_reports(tmp_path_factory, edits, cut):
    _check_iperf(tmp_path_factory.mktemp("i"), edits, cut)


@pytest.mark.slow
@CAMPAIGN
@given(iperf_edits, st.one_of(st.none(), st.floats(0, 1)))
def test_mutated_iperf_reports_campaign(tmp_path_factory, edits, cut):
    _check_iperf(tmp_path_factory.mktemp("i"), edits, cut)
