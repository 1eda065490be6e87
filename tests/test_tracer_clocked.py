"""A Kernel notes the time for its tracer: the records are those of a plain environment.

On the model's :class:`~cpasim.model.environment.Kernel` the tracer's records do not read
the clock; the Kernel notes each new time in the buffer before the event runs and
flushes between events (see ``cpasim.tracing.tracer``).  Every record must still come
out with the time, fields and order it has on a plain SimPy environment, whichever
way the Kernel is driven and however the trace is chunked.
"""

from __future__ import annotations

import numpy as np
import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from cpasim.model.environment import Kernel
from cpasim.tracing import TracedContainer, TracedPool, TracedStore, Tracer
from cpasim.tracing.tracer import SM, ClockedSM


def records(tracer) -> np.ndarray:
    chunks = list(tracer.source().chunks())
    return np.concatenate(chunks) if chunks else np.empty(0)


def pipeline(env, tracer, delays: list[int], *, sleeps: bool = False) -> None:
    """Stores, credits and a core pool worked by three SMs; ``delays`` vary the timing.
    ``sleeps``: the SMs wait with Kernel.sleep (the model's way), not timeouts."""
    wait = env.sleep if sleeps else env.timeout
    fifo = TracedStore(env, tracer, "h", "FIFO", capacity=2)
    credits = TracedContainer(env, tracer, "h", "credits", init=3, conn_flow=False)
    cores = TracedPool(env, tracer, "h", "CPU cores", size=1)
    prod, cons, side = (tracer.sm("h", name) for name in ("P", "C", "S"))

    def producer():
        for i, d in enumerate(delays):
            prod.begin("make")
            yield wait(d)
            yield credits.get(1, prod)
            prod.begin("put")
            if len(fifo.items) < fifo.capacity:
                fifo.put_now(i, prod)
            else:
                yield fifo.put(i, prod)
            prod.link(side)

    def consumer():
        while True:
            cons.begin("idle")
            yield fifo.get(cons)
            if not cores.acquire_now(cons):
                yield cores.acquire(cons)
            cons.begin("work")
            yield wait(2)
            cores.release(cons)
            credits.give(1, cons)

    def sidekick():
        for d in delays[::2]:
            side.begin("poll")
            yield cores.acquire(side)
            yield wait(d + 0.5)
            cores.release(side)
            side.deq(tracer.queue("h", "FIFO"), 0)

    env.process(producer())
    env.process(consumer())
    env.process(sidekick())


def traced_run(env, delays, chunk_records, drive) -> np.ndarray:
    tracer = Tracer.in_memory(env, chunk_records=chunk_records)
    pipeline(env, tracer, delays)
    drive(env)
    tracer.close()
    return records(tracer)


def run_all(env) -> None:
    env.run()


def run_in_slices(env) -> None:
    t = 0.0
    while env._queue:
        t += 3.7
        env.run_until(t)
        if env._queue:
            env.advance(t)


DELAYS = st.lists(st.integers(0, 4), min_size=1, max_size=30)


@settings(max_examples=60, deadline=None)
@given(delays=DELAYS, chunk_records=st.sampled_from([1, 2, 5, 64]))
def test_kernel_records_equal_a_plain_environments(delays, chunk_records):
    plain = traced_run(simpy.Environment(), delays, 1 << 16, run_all)
    assert len(plain) > 0
    for drive in (run_all, run_in_slices):
        clocked = traced_run(Kernel(), delays, chunk_records, drive)
        assert clocked.tobytes() == plain.tobytes()


@settings(max_examples=60, deadline=None)
@given(delays=DELAYS, chunk_records=st.sampled_from([1, 2, 5, 64]))
def test_a_sleep_without_an_event_leaves_the_records_and_their_chunks(delays, chunk_records):
    """Kernel.sleep going on at once flushes and notes the time as between two events:
    the same chunks, record for record, as with timeouts (a .cpt file is its chunks)."""

    def chunks(sleeps: bool):
        env = Kernel()
        tracer = Tracer.in_memory(env, chunk_records=chunk_records)
        pipeline(env, tracer, delays, sleeps=sleeps)
        run_in_slices(env)
        tracer.close()
        return [c.tobytes() for c in tracer.sink.chunks], next(env._eid)

    (timed, timeouts), (slept, sleeps) = chunks(False), chunks(True)
    assert slept == timed
    assert sleeps <= timeouts


def test_kernel_handles_are_clocked_and_a_plain_environment_keeps_the_checks():
    assert type(Tracer.in_memory(Kernel()).sm("h", "A")) is ClockedSM
    assert type(Tracer.in_memory(simpy.Environment()).sm("h", "A")) is SM
    late = Tracer.in_memory(None)
    early = late.sm("h", "A")
    late.env = Kernel()
    assert type(early) is ClockedSM and late.sm("h", "A") is early


def test_a_full_chunk_is_written_between_events():
    env = Kernel()
    tracer = Tracer.in_memory(env, chunk_records=4)
    sms = [tracer.sm("h", name) for name in "AB"]

    def proc(sm):
        for i in range(10):
            for k in range(3):  # three records per event, two events per time
                sm.begin(f"s{i}.{k}")
            yield env.timeout(1)

    for sm in sms:
        env.process(proc(sm))
    env.run()
    tracer.close()
    sizes = [len(c) for c in tracer.sink.chunks]
    assert sizes == [6] * 10  # a chunk ends with the event that filled it
    assert records(tracer)["t"].tolist() == [float(t) for t in range(10) for _ in range(6)]


def test_a_record_after_advance_takes_the_new_time():
    env = Kernel()
    tracer = Tracer.in_memory(env)
    sm = tracer.sm("h", "A")
    sm.begin("start")
    env.timeout(2)
    env.run_until(1.0)
    env.advance(1.0)
    sm.begin("between")  # emitted outside any event
    env.advance(0.5)  # never backwards
    sm.begin("still")
    env.run_until(5.0)
    sm.begin("after")
    tracer.close()
    assert records(tracer)["t"].tolist() == [0.0, 1.0, 1.0, 2.0]


def test_a_clocked_tracer_leaves_its_old_kernel_and_refuses_a_plain_one():
    first, second = Kernel(), Kernel()
    tracer = Tracer.in_memory(first)
    tracer.env = second
    assert first._notes is None and second._notes is not None
    TracedStore(second, tracer, "h", "Q")  # codes now belong to the clocked kernel
    with pytest.raises(RuntimeError, match="clocked"):
        tracer.env = simpy.Environment()


def test_an_idle_flush_writes_no_empty_chunk():
    env = Kernel()
    tracer = Tracer.in_memory(env, chunk_records=1)
    sm = tracer.sm("h", "A")
    sm.begin("x")
    tracer.flush()
    tracer.flush()  # only the time is noted: nothing to write
    env.timeout(3)
    env.run()
    sm.begin("y")
    tracer.close()
    assert [len(c) for c in tracer.sink.chunks] == [1, 1]
    assert records(tracer)["t"].tolist() == [0.0, 3.0]


def test_a_closed_tracer_leaves_its_kernel_running_untraced():
    env = Kernel()
    tracer = Tracer.in_memory(env, chunk_records=1)
    sm = tracer.sm("h", "A")

    def proc():
        for i in range(2):
            sm.begin(f"s{i}")
            yield env.timeout(1)
        for _ in range(100):  # goes on without records
            yield env.timeout(1)

    env.process(proc())
    env.run_until(1.5)
    tracer.close()
    assert env._notes is None
    env.run()  # the Kernel neither notes times for nor flushes the closed tracer
    assert env.now == 102 and not tracer._buf
    assert records(tracer)["t"].tolist() == [0.0, 1.0]
