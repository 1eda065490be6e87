"""The ``.cpt`` file: round trips, chunking, and clear errors for damaged files."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import simpy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from cpasim.errors import CpasimError
from cpasim.tracing import TracedStore, Tracer, open_trace, write_trace
from cpasim.tracing.columnar import FRAME, HEADER, CptWriter, read_cpt, write_cpt
from cpasim.tracing.records import (
    BEGIN,
    DECLARE,
    DEQ,
    IDENTIFY,
    LINK,
    OPS,
    QUEUE_OPS,
    RECORD_DTYPE,
    TraceKey,
)

name_st = st.text(min_size=1, max_size=12)


def valid_records(draw, key: TraceKey, count: int, t0: float) -> np.ndarray:
    """``count`` records that only use ids ``key`` defines, times from ``t0`` on."""
    n_sms, n_states, n_queues, n_conns = key.sizes()
    ops = [BEGIN, LINK] + ([IDENTIFY] if n_conns else []) + (sorted(QUEUE_OPS) if n_queues else [])
    limit = {BEGIN: n_states, LINK: n_sms, IDENTIFY: n_conns}
    out = np.zeros(count, RECORD_DTYPE)
    steps = draw(st.lists(st.floats(0, 1e6), min_size=count, max_size=count))
    out["t"] = t0 + np.cumsum(steps)
    for i in range(count):
        op = draw(st.sampled_from(ops))
        out[i]["op"] = op
        out[i]["sm"] = draw(st.integers(0, n_sms - 1))
        out[i]["a"] = draw(st.integers(0, limit.get(op, n_queues) - 1))
        # The counts and flags each op may carry (cpasim.tracing.validate).
        if op == DECLARE:
            out[i]["flags"] = draw(st.integers(0, 1))
            out[i]["n"] = draw(st.integers(-1, 2**40).filter(lambda n: n != 0))
        elif op in QUEUE_OPS:
            out[i]["n"] = draw(st.integers(-1 if op == DEQ else 0, 2**40))
    return out


@st.composite
def traces(draw):
    """A key that grows between chunks, and chunks that refer to it."""
    key = TraceKey()
    chunks = []
    t = draw(st.floats(0, 1e9))
    for _ in range(draw(st.integers(1, 5))):
        for _ in range(draw(st.integers(0, 3))):
            key.intern_sm(draw(name_st), draw(name_st), draw(name_st))
        for _ in range(draw(st.integers(0, 2))):
            key.intern_state(draw(name_st))
        for _ in range(draw(st.integers(0, 2))):
            key.intern_queue(draw(name_st), draw(name_st), draw(name_st))
        for _ in range(draw(st.integers(0, 2))):
            key.intern_conn(draw(name_st))
        key.intern_sm("tx", "App")
        key.intern_state("idle")
        chunk = valid_records(draw, key, draw(st.integers(0, 20)), t)
        if len(chunk):
            t = float(chunk["t"][-1])
        # Hand each chunk out with a snapshot of the key as it was then.
        snapshot = TraceKey()
        for sm in key.sms:
            snapshot.intern_sm(*sm)
        for s in key.states:
            snapshot.intern_state(s)
        for q in key.queues:
            snapshot.intern_queue(*q)
        for c in key.conns:
            snapshot.intern_conn(c)
        chunks.append((chunk, snapshot))
    return key, chunks


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=traces())
def test_round_trip(tmp_path_factory, trace):
    key, chunks = trace
    path = tmp_path_factory.mktemp("rt") / "t.cpt"
    with CptWriter(path) as writer:
        for chunk, snapshot in chunks:
            writer.write(chunk, snapshot)
    source = read_cpt(path)
    got = list(source.chunks())
    want = [c for c, _ in chunks if len(c)]
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == RECORD_DTYPE
        assert g.tobytes() == w.tobytes()
    assert source.key.sms == key.sms
    assert source.key.states == key.states
    assert source.key.queues == key.queues
    assert source.key.conns == key.conns
    # Reading again gives the same, and leaves the key as it was.
    again = list(source.chunks())
    assert [c.tobytes() for c in again] == [c.tobytes() for c in got]
    assert source.key.sms == key.sms


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=traces(), where=st.floats(-0.1, 1.1), on_record=st.booleans())
def test_reading_from_a_time_skips_exactly_the_earlier_records(
    tmp_path_factory, trace, where, on_record
):
    key, chunks = trace
    times = np.concatenate([c["t"] for c, _ in chunks] + [np.zeros(1)])
    # A cut anywhere in (or around) the trace, or exactly at a record's time.
    if on_record:
        cut = float(times[int(min(max(where, 0.0), 1.0) * (len(times) - 1))])
    else:
        cut = where * float(times.max())
    path = tmp_path_factory.mktemp("since") / "t.cpt"
    with CptWriter(path) as writer:
        for chunk, snapshot in chunks:
            writer.write(chunk, snapshot)
    whole = [c for c, _ in chunks if len(c)]
    want = np.concatenate(whole)[np.concatenate(whole)["t"] >= cut] if whole else None
    source = read_cpt(path)
    got = [c for c in source.chunks(since=cut) if len(c)]
    if want is None or not len(want):
        assert not got
    else:
        assert np.concatenate(got).tobytes() == want.tobytes()
    # Every name is taken, skipped blocks or not.
    assert source.key.sms == key.sms
    assert source.key.conns == key.conns


def pipeline_trace(path, chunk_records, n_items=300):
    """A producer/consumer run traced to ``path`` (in memory if ``path`` is None)."""
    env = simpy.Environment()
    if path is None:
        tracer = Tracer.in_memory(env, chunk_records=chunk_records)
    else:
        tracer = Tracer.to_file(env, path, chunk_records=chunk_records)
    q = TracedStore(env, tracer, "tx", "Q", capacity=4)

    def producer():
        sm = tracer.sm("tx", "P")
        for i in range(n_items):
            sm.begin("make")
            yield env.timeout(1)
            yield q.put(i, sm)

    def consumer():
        sm = tracer.sm("tx", "C")
        while True:
            sm.begin("idle")
            yield q.get(sm)
            sm.begin(f"work{env.now % 3:.0f}")
            yield env.timeout(1.5)

    env.process(producer())
    env.process(consumer())
    env.run()
    return tracer


def test_tracer_file_many_blocks(tmp_path):
    path = tmp_path / "run.cpt"
    tracer = pipeline_trace(path, chunk_records=37)
    tracer.close()
    source = open_trace(path)
    chunks = list(source.chunks())
    assert len(chunks) > 20
    assert all(len(c) == 37 for c in chunks[:-1])
    total = sum(len(c) for c in chunks)
    assert total == tracer.records_written
    recs = np.concatenate(chunks)
    assert np.all(np.diff(recs["t"]) >= 0)
    ops = [OPS[o] for o in recs["op"]]
    assert ops.count("enq") == ops.count("deq") == 300
    assert source.key.states[:2] == ["make", "idle"]


def test_same_trace_in_memory_and_on_file(tmp_path):
    on_file = pipeline_trace(tmp_path / "a.cpt", chunk_records=50)
    on_file.close()
    in_memory = pipeline_trace(None, chunk_records=1000)
    in_memory.close()
    a, b = open_trace(tmp_path / "a.cpt"), in_memory.source()
    assert np.concatenate(list(a.chunks())).tobytes() == np.concatenate(list(b.chunks())).tobytes()
    assert (a.key.sms, a.key.states, a.key.queues) == (b.key.sms, b.key.states, b.key.queues)
    # Re-chunked through write_cpt, the records are the same.
    write_cpt(b, tmp_path / "b.cpt")
    again = np.concatenate(list(read_cpt(tmp_path / "b.cpt").chunks()))
    assert again.tobytes() == np.concatenate(list(a.chunks())).tobytes()


def block_offsets(data: bytes) -> list[int]:
    """Start offsets of every block, and the end of the file."""
    offsets = []
    pos = HEADER.size
    while pos < len(data):
        offsets.append(pos)
        _tag, length, _crc = FRAME.unpack_from(data, pos)
        pos += FRAME.size + length
    return [*offsets, len(data)]


@pytest.fixture
def small_trace(tmp_path):
    path = tmp_path / "small.cpt"
    pipeline_trace(path, chunk_records=25, n_items=20).close()
    return path, path.read_bytes()


def read_all(path):
    return sum(len(c) for c in read_cpt(path).chunks())


def test_truncated_at_every_block_boundary_and_mid_block(small_trace, tmp_path):
    path, data = small_trace
    offsets = block_offsets(data)
    assert len(offsets) > 6
    cuts = set(offsets[:-1])  # every block boundary (the footer is the last block)
    cuts |= {(a + b) // 2 for a, b in zip(offsets, offsets[1:], strict=False)}  # mid-block
    cuts |= {a + FRAME.size // 2 for a in offsets[:-1]}  # inside a block's frame
    cuts.add(len(data) - 1)  # inside the footer
    for cut in sorted(cuts):
        bad = tmp_path / f"cut{cut}.cpt"
        bad.write_bytes(data[:cut])
        with pytest.raises(CpasimError, match=r"truncated") as info:
            read_all(bad)
        msg = str(info.value)
        assert str(bad) in msg
        assert "block" in msg and "record" in msg


def test_truncated_header(small_trace, tmp_path):
    _, data = small_trace
    bad = tmp_path / "h.cpt"
    bad.write_bytes(data[:12])
    with pytest.raises(CpasimError, match="truncated in the file header"):
        read_cpt(bad)


def test_unclosed_writer_reads_as_truncated_and_appears_only_when_closed(tmp_path):
    path = tmp_path / "open.cpt"
    path.write_bytes(b"what the path held")
    tracer = pipeline_trace(path, chunk_records=10, n_items=10)
    tracer.flush()
    tracer.sink._fh.flush()  # what a crashed run leaves on disk: the temporary file
    assert path.read_bytes() == b"what the path held"
    (unfinished,) = [p for p in tmp_path.iterdir() if p != path]
    assert unfinished.name.startswith(".open.cpt.") and unfinished.name.endswith(".part")
    with pytest.raises(CpasimError, match=r"\.part: truncated at block \d+ .*after record"):
        read_all(unfinished)
    tracer.close()
    assert read_all(path) == tracer.records_written
    assert sorted(tmp_path.iterdir()) == [path]


def test_bit_flip_in_records_is_a_checksum_error(small_trace, tmp_path):
    path, data = small_trace
    offsets = block_offsets(data)
    flipped = 0
    for start in offsets[:-1]:
        if data[start : start + 4] != b"RECS":
            continue
        pos = start + FRAME.size + 8 + 3  # inside the first record
        bad = tmp_path / "flip.cpt"
        bad.write_bytes(data[:pos] + bytes([data[pos] ^ 0x10]) + data[pos + 1 :])
        with pytest.raises(CpasimError, match=r"checksum mismatch in block \d+"):
            read_all(bad)
        flipped += 1
    assert flipped > 1


def test_any_bit_flip_is_detected(small_trace, tmp_path):
    path, data = small_trace
    assert read_all(path) > 0
    bad = tmp_path / "flip.cpt"
    for pos in range(0, len(data), max(1, len(data) // 400)):
        bad.write_bytes(data[:pos] + bytes([data[pos] ^ 0x01]) + data[pos + 1 :])
        with pytest.raises(CpasimError, match=str(bad)):
            read_all(bad)


def test_not_a_trace_file(tmp_path):
    for content in (b"", b"hello", b'{"t": 0, "op": "begin"}\n' * 3):
        bad = tmp_path / "x.cpt"
        bad.write_bytes(content)
        with pytest.raises(CpasimError, match=r"x\.cpt: not a cpasim trace file"):
            read_cpt(bad)


def test_missing_file(tmp_path):
    with pytest.raises(CpasimError, match=r"nope\.cpt: cannot read trace"):
        read_cpt(tmp_path / "nope.cpt")
    with pytest.raises(CpasimError, match=r"nope\.cpt: cannot read trace"):
        open_trace(tmp_path / "nope.cpt")


def test_unsupported_version(small_trace, tmp_path):
    _, data = small_trace
    bad = tmp_path / "v.cpt"
    bad.write_bytes(data[:8] + (99).to_bytes(2, "little") + data[10:])
    with pytest.raises(CpasimError, match="version 99 is not supported"):
        read_cpt(bad)


def test_record_naming_an_undefined_id_is_reported_with_its_number(tmp_path):
    key = TraceKey()
    key.intern_sm("tx", "A")
    key.intern_state("s")
    recs = np.zeros(5, RECORD_DTYPE)
    recs["op"] = BEGIN
    recs[3]["sm"] = 7
    path = tmp_path / "ids.cpt"
    with CptWriter(path) as w:
        w.write(recs[:2], key)
        w.write(recs[2:], key)
    with pytest.raises(CpasimError, match=r"ids\.cpt: record 4 \(begin at t=0\.0\) is invalid"):
        read_all(path)


def test_time_going_backwards_across_blocks(tmp_path):
    key = TraceKey()
    key.intern_sm("tx", "A")
    key.intern_state("s")
    recs = np.zeros(4, RECORD_DTYPE)
    recs["t"] = [1, 2, 0.5, 3]
    path = tmp_path / "t.cpt"
    with CptWriter(path) as w:
        w.write(recs[:2], key)
        w.write(recs[2:], key)
    with pytest.raises(CpasimError, match="record 3"):
        read_all(path)


def test_write_trace_by_extension(tmp_path, small_trace):
    path, _ = small_trace
    src = read_cpt(path)
    write_trace(src, tmp_path / "copy.cpt")
    assert (tmp_path / "copy.cpt").read_bytes() == path.read_bytes()
    with pytest.raises(CpasimError, match=r"copy\.txt: unknown trace format '\.txt'"):
        write_trace(src, tmp_path / "copy.txt")


def test_memory_stays_flat_while_writing_and_reading(tmp_path):
    """Writer and reader hold one chunk at a time: peak memory is a few chunks,
    not the ~13 MB the file grows to."""
    key = TraceKey()
    key.intern_sm("tx", "A")
    key.intern_state("s")
    n_chunks, per_chunk = 100, 5000
    chunk_bytes = per_chunk * RECORD_DTYPE.itemsize
    path = tmp_path / "big.cpt"

    tracemalloc.start()
    try:
        with CptWriter(path) as writer:
            for i in range(n_chunks):
                chunk = np.zeros(per_chunk, RECORD_DTYPE)
                chunk["t"] = i
                writer.write(chunk, key)
                del chunk
        _, write_peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        total = 0
        for chunk in read_cpt(path).chunks():
            total += len(chunk)
        _, read_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert total == n_chunks * per_chunk
    assert path.stat().st_size > n_chunks * chunk_bytes
    assert write_peak < 4 * chunk_bytes, write_peak
    assert read_peak < 4 * chunk_bytes, read_peak


# --- cpasim trace convert / info -------------------------------------------------

CPASIM = Path(sys.executable).parent / "cpasim"


@pytest.fixture
def cli():
    import cpasim.cli

    cpasim.cli._register()
    runner = CliRunner()
    return lambda *args: runner.invoke(cpasim.cli.app, ["trace", *map(str, args)])


def test_cli_convert_round_trip(cli, small_trace, tmp_path):
    path, data = small_trace
    result = cli("convert", path, tmp_path / "t.jsonl")
    assert result.exit_code == 0, result.output
    records = read_all(path)
    assert f"{records} records" in result.output
    lines = (tmp_path / "t.jsonl").read_text().splitlines()
    assert len(lines) == records
    assert json.loads(lines[0])["op"] == "declare"
    assert cli("convert", tmp_path / "t.jsonl", tmp_path / "back.cpt").exit_code == 0
    # Same records and names (the blocks differ: the JSON Lines reader re-chunks).
    a, b = read_cpt(path), read_cpt(tmp_path / "back.cpt")
    assert np.concatenate(list(a.chunks())).tobytes() == np.concatenate(list(b.chunks())).tobytes()
    assert (a.key.sms, a.key.states, a.key.queues) == (b.key.sms, b.key.states, b.key.queues)
    assert not list(tmp_path.glob("*.tmp")) and not list(tmp_path.glob("*.part"))


def test_cli_convert_error_keeps_existing_output(cli, small_trace, tmp_path):
    _, data = small_trace
    broken = tmp_path / "broken.cpt"
    broken.write_bytes(data[: len(data) - 5])
    out = tmp_path / "out.cpt"
    out.write_bytes(b"precious")
    result = cli("convert", broken, out)
    assert result.exit_code != 0
    assert isinstance(result.exception, CpasimError)
    assert "truncated" in str(result.exception)
    assert out.read_bytes() == b"precious"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken.cpt", "out.cpt", "small.cpt"]


def test_cli_convert_refuses_unknown_format(cli, small_trace, tmp_path):
    path, _ = small_trace
    result = cli("convert", path, tmp_path / "t.csv")
    assert isinstance(result.exception, CpasimError)
    assert "t.csv: unknown trace format '.csv'" in str(result.exception)


def test_cli_info(cli, small_trace):
    path, data = small_trace
    text = cli("info", path)
    assert text.exit_code == 0, text.output
    records = read_all(path)
    assert f"records       {records}" in text.output
    assert "bytes/record" in text.output
    # Times in a unit people read (not 1.19999e+08 ns).
    assert re.search(r"^time +\d[\d.]* (ns|us|ms|s) \.\. [\d.]+ (ns|us|ms|s) \(", text.output, re.M)
    summary = json.loads(cli("info", path, "--json").output)
    assert summary["records"] == records
    assert summary["bytes"] == len(data)
    assert summary["state_machines"] == 3  # P, C and the queue's declaring SM
    assert summary["queues"] == 1
    assert summary["ops"]["enq"] == summary["ops"]["deq"] == 20
    assert summary["span_ns"] == summary["t_last_ns"] - summary["t_first_ns"] > 0


@pytest.mark.slow
def test_installed_command_reports_errors_in_one_line(small_trace, tmp_path):
    path, data = small_trace
    ok = subprocess.run(
        [CPASIM, "trace", "info", path, "--json"], capture_output=True, text=True, check=False
    )
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["records"] == read_all(path)
    bad = tmp_path / "bad.cpt"
    bad.write_bytes(data[:100])
    proc = subprocess.run([CPASIM, "trace", "info", bad], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"cpasim: error: {bad}: truncated")
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


def _two_state_file(path: Path, state: str) -> None:
    key = TraceKey()
    key.intern_sm("h", "A", "0")
    key.intern_state(state)
    rows = np.zeros(2, RECORD_DTYPE)
    rows["t"] = [1.0, 2.0]
    w = CptWriter(path)
    w.write(rows, key)
    w.close(key)


def test_a_second_read_of_the_same_source_takes_its_names_once_and_sees_a_rewrite(tmp_path):
    path = tmp_path / "t.cpt"
    _two_state_file(path, "run")
    src = read_cpt(path)
    first = [c.copy() for c in src.chunks()]
    again = [c.copy() for c in src.chunks()]  # names blocks skipped, records the same
    assert [c.tobytes() for c in again] == [c.tobytes() for c in first]
    assert src.key.states == ["run"]
    _two_state_file(path, "ran")  # same length, other name: the block's checksum differs
    with pytest.raises(CpasimError, match="states id 0 changed name"):
        list(src.chunks())
