"""The tracer's packed record buffer decodes to exactly the records that were emitted.

While a run goes the tracer keeps one packed int per record and a time only when the
clock moves (see ``cpasim.tracing.tracer``); a flush decodes that with numpy.  Here every
flush of a real model run is also decoded the plain way, one entry at a time, and the
shipped scenarios are checked to give the same records however the trace is chunked
or stored, and the same results with tracing on or off.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import simpy

from cpasim.config import load_scenario
from cpasim.simulate import simulate
from cpasim.tracing import Tracer, open_trace
from cpasim.tracing.records import RECORD_DTYPE
from cpasim.tracing.tracer import COUNT_SHIFT, COUNTED, MemorySink, counted, packed

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"
SHORT = ["sim.duration=6ms", "sim.warmup=1ms"]
CASES = ["pingpong", "tcp-stream", "udp-stream", "webserver"]
#: Options whose model code is its own, on the scenario they are for.
OPTIONS = {"udp-stream": ["hosts.tx.pcie.lanes=4", "hosts.tx.cpu.irq_preempt=true"]}


def decode_plainly(buf, counts, fields) -> np.ndarray:
    """The records of a tracer buffer, decoded entry by entry (the reference)."""
    rows, t, spare = [], None, iter(counts)
    for entry in buf:
        if entry >= 0:  # the clock moved
            t = float(entry)
            continue
        code = int(-entry)
        index, slot = (code & ((1 << COUNT_SHIFT) - 1)) - 1, code >> COUNT_SHIFT
        n = next(spare) if slot == COUNTED else slot
        op, flags, sm, a = fields[index]
        rows.append((t, op, flags, sm, a, n))
    assert next(spare, None) is None, "counts left over"
    return np.array(rows, dtype=RECORD_DTYPE)


class CheckedTracer(Tracer):
    """A tracer that checks each chunk it makes against the plain decoding."""

    chunks_checked = 0

    def flush(self) -> None:
        expected = decode_plainly(list(self._buf), list(self._counts), list(self._code_fields))
        before = len(self.sink.chunks)
        super().flush()
        if len(expected):
            got = self.sink.chunks[before]
            assert got.tobytes() == expected.tobytes()
            self.chunks_checked += 1


def records(source) -> np.ndarray:
    return np.concatenate(list(source.chunks()))


def result_of(r) -> dict:
    out = r.to_json()
    del out["wall_s"]
    return out


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "sets"),
    [*((n, []) for n in CASES), *((n, sets) for n, sets in OPTIONS.items())],
)
def test_shipped_scenario_traces_decode_exactly_and_tracing_changes_nothing(name, sets, tmp_path):
    cfg = load_scenario(SCENARIOS / f"{name}.toml", sets=[*SHORT, *sets])
    untraced = result_of(simulate(cfg))

    checked = CheckedTracer(None, MemorySink(), chunk_records=997)
    with_small_chunks = result_of(simulate(cfg, tracer=checked))
    checked.close()
    small = records(checked.source())

    path = tmp_path / "run.cpt"
    on_file = result_of(simulate(cfg, trace_path=path))
    from_file = open_trace(path)
    big = records(from_file)

    assert untraced == with_small_chunks == on_file
    assert checked.chunks_checked >= len(small) // 997
    assert len(small) > 1000
    assert small.tobytes() == big.tobytes()
    assert from_file.key.sms == checked.key.sms
    assert from_file.key.states == checked.key.states
    assert from_file.key.queues == checked.key.queues
    assert from_file.key.conns == checked.key.conns


def test_every_count_and_time_survives_the_packing():
    env = simpy.Environment()
    tr = CheckedTracer(env, MemorySink(), chunk_records=5)
    sm = tr.sm("tx", "A")
    q = tr.queue("tx", "Q")
    counts = [1, 0, -1, 2, 2**40, -(2**40), 2**62, 7, 1]
    times = [0, 0, 0.5, 0.5, 3, 1e12, 1e12, 1e12 + 0.25, 2e15]
    for t, n in zip(times, counts, strict=True):
        env._now = t
        sm.deq(q, n)
        tr.emit(tr.code(5, sm.id, q), n)  # resize, through the generic path
    tr.close()
    recs = records(tr.source())
    assert recs["n"].tolist() == [n for n in counts for _ in range(2)]
    assert recs["t"].tolist() == [float(t) for t in times for _ in range(2)]
    assert tr.chunks_checked == 4


def test_packed_codes_are_negative_and_refuse_other_counts():
    assert packed(0) == -1 and packed(0, 1) < packed(0) and counted(0) < packed(0, 1)
    with pytest.raises(ValueError, match="0 or 1"):
        packed(3, 2)


def test_a_clock_before_zero_is_refused():
    with pytest.raises(ValueError, match="starts at 0"):
        Tracer.in_memory(simpy.Environment(initial_time=-5))
