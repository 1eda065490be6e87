"""Fuzzing the trace readers with mutated real traces.

Every mutated file either is refused — :class:`CpasimError`, which the command
line prints as one line with exit status 2 — or reads as a trace, and a ``.cpt``
file whose bytes changed without its checksums being redone never reads as a
different trace: no traceback, no silent change.  The quick suite runs a few
deterministic examples of each; the ``slow`` campaign runs many more.
"""

from __future__ import annotations

import contextlib
import json
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cpasim.cli import main
from cpasim.errors import CpasimError
from cpasim.tracing import open_trace, trace_digest
from cpasim.tracing.columnar import FRAME, HEADER, CptWriter, block_frame, read_cpt
from cpasim.tracing.records import RECORD_DTYPE

TRACES = Path(__file__).parent / "traces"
QUICK = settings(
    max_examples=25,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
CAMPAIGN = settings(QUICK, max_examples=400)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Real traces to mutate: a ``.cpt`` of many small blocks, and JSON Lines."""
    root = tmp_path_factory.mktemp("fuzz")
    source = read_cpt(TRACES / "model_webserver.cpt")
    rows = np.concatenate([c.copy() for c in source.chunks()])
    cpt = root / "multi.cpt"
    with CptWriter(cpt) as writer:
        for start in range(0, len(rows), 700):
            writer.write(rows[start : start + 700], source.key)
    return {
        "cpt": cpt.read_bytes(),
        "jsonl": (TRACES / "two_conns.jsonl").read_bytes(),
        "work": root,
    }


def read(path: Path, since: float | None = None):
    """The records (and names) a reader hands out; CpasimError if refused."""
    if since is None:
        source = open_trace(path)
        chunks = [c.copy() for c in source.chunks()]
    else:
        source = read_cpt(path)
        chunks = [c.copy() for c in source.chunks(since=since)]
    rows = np.concatenate(chunks) if chunks else np.zeros(0, RECORD_DTYPE)
    return rows.tobytes(), source.key.sizes(), list(source.key.sms), list(source.key.states)


def outcome(path: Path, since: float | None = None):
    try:
        return read(path, since)
    except CpasimError as exc:
        assert str(exc).startswith(str(path)), exc
        return None


def cli_outcome(path: Path, capsys) -> int:
    with pytest.raises(SystemExit) as stop:
        main(["trace", "info", str(path)])
    err = capsys.readouterr().err
    assert stop.value.code in (0, 2), err
    if stop.value.code == 2:
        assert err.startswith("cpasim: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return stop.value.code


# --- .cpt: bytes changed without the checksums redone ---------------------------------


@st.composite
def damaged(draw, data: bytes):
    """``data`` truncated, bit-flipped, or with a stretch overwritten."""
    kind = draw(st.sampled_from(["truncate", "flip", "overwrite"]))
    out = bytearray(data)
    if kind == "truncate":
        return bytes(out[: draw(st.integers(0, len(out) - 1))])
    if kind == "flip":
        for _ in range(draw(st.integers(1, 3))):
            i = draw(st.integers(0, len(out) - 1))
            out[i] ^= 1 << draw(st.integers(0, 7))
        return bytes(out)
    start = draw(st.integers(0, len(out) - 1))
    junk = draw(st.binary(min_size=1, max_size=16))
    out[start : start + len(junk)] = junk
    return bytes(out)


def check_damaged_cpt(files, capsys, data: bytes, since: float) -> None:
    path = files["work"] / "damaged.cpt"
    original = files["work"] / "multi.cpt"
    path.write_bytes(data)
    whole = outcome(path)
    if data != files["cpt"]:
        # Any changed byte is in a header, a frame or a checksummed payload.
        assert whole is None, "a damaged .cpt read as a trace"
    tail = outcome(path, since)
    assert tail is None or tail == read(original, since)
    cli_outcome(path, capsys)


def _span(files) -> tuple[float, float]:
    rows = read(files["work"] / "multi.cpt")[0]
    t = np.frombuffer(rows, RECORD_DTYPE)["t"]
    return float(t[0]), float(t[-1])


@QUICK
@given(data=st.data())
def test_damaged_cpt_is_refused_never_read_differently(files, capsys, data):
    first, last = _span(files)
    mutated = data.draw(damaged(files["cpt"]))
    since = data.draw(st.floats(first, last))
    check_damaged_cpt(files, capsys, mutated, since)


@pytest.mark.slow
@CAMPAIGN
@given(data=st.data())
def test_damaged_cpt_campaign(files, capsys, data):
    first, last = _span(files)
    mutated = data.draw(damaged(files["cpt"]))
    since = data.draw(st.floats(first, last))
    check_damaged_cpt(files, capsys, mutated, since)


# --- .cpt: blocks rewritten with valid checksums --------------------------------------


def blocks(data: bytes) -> list[tuple[bytes, int, int]]:
    out, pos = [], HEADER.size
    while pos + FRAME.size <= len(data):
        tag, length, _ = FRAME.unpack_from(data, pos)
        out.append((tag, pos, length))
        pos += FRAME.size + length
    return out


def reframed(data: bytes, at: int, payload: bytes) -> bytes:
    """``data`` with the block at byte ``at`` given ``payload`` and a valid checksum."""
    tag, length, _ = FRAME.unpack_from(data, at)
    number = [b[1] for b in blocks(data)].index(at) + 1
    head = block_frame(number, tag, len(payload), payload)
    return data[:at] + head + payload + data[at + FRAME.size + length :]


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=10,
)


@st.composite
def recrc_mutation(draw, data: bytes):
    """A block's payload changed and its checksum redone: names JSON edited (a value
    replaced by any JSON), or record fields overwritten with extreme values."""
    listing = blocks(data)
    tag, at, length = draw(st.sampled_from([b for b in listing if b[0] != b"END\x00"]))
    payload = bytearray(data[at + FRAME.size : at + FRAME.size + length])
    if tag == b"KEYS":
        delta = json.loads(payload)
        field = draw(st.sampled_from(sorted(delta)))
        if isinstance(delta[field], list) and delta[field] and draw(st.booleans()):
            i = draw(st.integers(0, len(delta[field]) - 1))
            delta[field][i] = draw(JSON_VALUES)
        else:
            delta[field] = draw(JSON_VALUES)
        return reframed(data, at, json.dumps(delta).encode())
    count = (length - 8) // RECORD_DTYPE.itemsize
    rows = np.frombuffer(bytes(payload[8:]), RECORD_DTYPE).copy()
    i = draw(st.integers(0, count - 1))
    field = draw(st.sampled_from(RECORD_DTYPE.names))
    kind = RECORD_DTYPE[field]
    if kind.kind == "f":
        value = draw(st.sampled_from([np.inf, -np.inf, np.nan, -1.0, 1e308, 0.0]))
    else:
        info = np.iinfo(kind)
        edges = [v for v in (info.min, info.max, -1, 0, 1) if info.min <= v <= info.max]
        value = draw(st.sampled_from(edges) | st.integers(info.min, info.max))
    rows[i][field] = value
    return reframed(data, at, bytes(payload[:8]) + rows.tobytes())


def check_recrc(files, capsys, data: bytes) -> None:
    path = files["work"] / "recrc.cpt"
    path.write_bytes(data)
    outcome(path)  # refused, or read: never another exception
    cli_outcome(path, capsys)
    with contextlib.suppress(CpasimError):  # refused, or a digest: never another error
        trace_digest(path)


@QUICK
@given(data=st.data())
def test_checksummed_but_wrong_cpt_blocks_are_refused_or_read(files, capsys, data):
    check_recrc(files, capsys, data.draw(recrc_mutation(files["cpt"])))


@pytest.mark.slow
@CAMPAIGN
@given(data=st.data())
def test_checksummed_but_wrong_cpt_blocks_campaign(files, capsys, data):
    check_recrc(files, capsys, data.draw(recrc_mutation(files["cpt"])))


# --- JSON Lines ----------------------------------------------------------------------


@st.composite
def jsonl_mutation(draw, data: bytes):
    """A JSON Lines trace truncated, bit-flipped, or with one field of one record
    given any JSON value (huge numbers, wrong types, nesting)."""
    kind = draw(st.sampled_from(["truncate", "flip", "field"]))
    if kind == "truncate":
        return data[: draw(st.integers(0, len(data)))]
    if kind == "flip":
        out = bytearray(data)
        i = draw(st.integers(0, len(out) - 1))
        out[i] ^= 1 << draw(st.integers(0, 7))
        return bytes(out)
    lines = data.decode().splitlines()
    i = draw(st.integers(0, len(lines) - 1))
    obj = json.loads(lines[i])
    field = draw(st.sampled_from(sorted(obj) + ["n", "capacity", "t"]))
    obj[field] = draw(JSON_VALUES | st.sampled_from([2**63, -(2**63) - 1, 10**400, 1e308]))
    lines[i] = json.dumps(obj)
    return ("\n".join(lines) + "\n").encode()


def check_jsonl(files, capsys, data: bytes) -> None:
    path = files["work"] / "mutated.jsonl"
    path.write_bytes(data)
    outcome(path)
    cli_outcome(path, capsys)


@QUICK
@given(data=st.data())
def test_mutated_json_lines_are_refused_or_read(files, capsys, data):
    check_jsonl(files, capsys, data.draw(jsonl_mutation(files["jsonl"])))


@pytest.mark.slow
@CAMPAIGN
@given(data=st.data())
def test_mutated_json_lines_campaign(files, capsys, data):
    check_jsonl(files, capsys, data.draw(jsonl_mutation(files["jsonl"])))


# --- names with terminal escapes and lone surrogates ------------------------------------

#: Characters a name may hold that a terminal or an encoder must not meet raw.
HOSTILE = [
    "\x1b]0;title\x07",  # OSC: sets the terminal's title
    "\x1b[2J",  # CSI: clears the screen
    "\x9b31m",  # C1 CSI
    "\r",
    "\n",
    "\x00",
    "\u202e",  # right-to-left override
    "\u2028",
    "\ud800",  # lone surrogates: no encoding can write them
    "\udcff",
    "[bold]",  # rich markup, to be shown as written
    "é",
]
FIELDS = ("sys", "sm", "state", "inst", "q")


def hostile_trace(field: str, piece: str) -> bytes:
    """A small JSON Lines trace (a queue from h:A to h:B) with ``piece`` in one name:
    of A (``sys``, ``sm``, ``inst``), of A's state, or of the queue."""
    name = f"x{piece}y"
    a = {"sys": "h", "sm": "A", field: name} if field in ("sys", "sm", "inst") else {}
    a = {"sys": "h", "sm": "A", **a}
    queue = {"q": name if field == "q" else "q", "qsys": "h", "qinst": "0"}
    records = [
        {"t": 0, "op": "declare", **a, **queue, "capacity": 4},
        {"t": 0, "op": "begin", **a, "state": name if field == "state" else "s"},
        {"t": 1, "op": "enq", **a, **queue},
        {"t": 2, "op": "begin", "sys": "h", "sm": "B", "state": "t"},
        {"t": 3, "op": "deq", "sys": "h", "sm": "B", **queue},
    ]
    return "".join(json.dumps(r) + "\n" for r in records).encode()


_SAFE = re.compile("^[^\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u202e\ud800-\udfff]*$")


def check_hostile_names(folder: Path, capsys, field: str, piece: str) -> None:
    path = folder / "names.jsonl"
    path.write_bytes(hostile_trace(field, piece))
    start = {"sys": "x*y:A", "sm": "h:x*y"}.get(field, "h:A")
    commands = [
        ["trace", "names", str(path)],
        ["trace", "info", str(path)],
        ["trace", "convert", str(path), str(folder / "o.cpt")],
        ["trace", "convert", str(path), str(folder / "o.jsonl")],
    ]
    # --detail: the per-SM profile and the queues name every state machine and queue.
    commands.append(["analyze", str(path), "--start", start, "--end", "h:B", "--detail"])
    for command in commands:
        with pytest.raises(SystemExit) as stop:
            main(command)
        out, err = capsys.readouterr()
        assert stop.value.code in (0, 2), err
        assert "Traceback" not in err
        if stop.value.code == 2:
            assert err.startswith("cpasim: error: ") and err.count("\n") == 1, err
        # Nothing a terminal would act on reaches it: escaped, every line.
        for line in (out + err).splitlines():
            assert _SAFE.match(line), repr(line)
        if piece in ("\ud800", "\udcff"):
            assert stop.value.code == 2 and "lone surrogate" in err
    for converted in ("o.cpt", "o.jsonl"):  # what was written reads back the same
        if (folder / converted).exists():
            assert read(folder / converted)[2:] == read(path)[2:]
            (folder / converted).unlink()


names_drawn = st.tuples(
    st.sampled_from(FIELDS),
    st.lists(st.sampled_from(HOSTILE), min_size=1, max_size=3).map("".join),
)


def test_a_name_that_would_set_the_terminals_title_is_printed_escaped(files, capsys):
    check_hostile_names(files["work"], capsys, "q", "\x1b]0;title\x07")  # (--detail's queues)
    check_hostile_names(files["work"], capsys, "state", "\x1b]0;title\x07")
    path = str(files["work"] / "names.jsonl")
    outs = []
    for command in (["trace", "names", path], ["analyze", path, "--start", "h:A", "--end", "h:B"]):
        with pytest.raises(SystemExit):
            main(command)
        outs.append(capsys.readouterr().out)
    assert all("h:A:x\\x1b]0;title\\x07y" in out for out in outs), outs


def test_a_verdict_naming_a_hostile_state_is_printed_escaped():
    """The verdict (analyze and predict print it from a trace and its sidecar) names
    states and resources of the trace."""
    from cpasim.cli.predict_cmd import _limited
    from cpasim.predict.runs import PathSummary
    from cpasim.verdict import Verdict

    title = "tx:A:x\x1b]0;title\x07y"
    v = Verdict(kind="cpu", resource=title, evidence=(f"most critical ({title})",), note=title)
    lines = v.lines("s\u202e.toml") + [_limited(v, PathSummary({"": 1.0}, title, 0.5, [], []))]
    assert all(_SAFE.match(line) for line in lines), lines
    assert "tx:A:x\\x1b]0;title\\x07y" in lines[0]


@settings(QUICK, max_examples=3)
@given(names_drawn)
def test_names_with_escapes_and_surrogates(files, capsys, drawn):
    check_hostile_names(files["work"], capsys, *drawn)


@pytest.mark.slow
@CAMPAIGN
@given(names_drawn)
def test_names_with_escapes_and_surrogates_campaign(files, capsys, drawn):
    check_hostile_names(files["work"], capsys, *drawn)
