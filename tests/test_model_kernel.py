"""The model's Kernel runs every event as a plain SimPy Environment would."""

from __future__ import annotations

import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st
from simpy.core import StopSimulation

from cpasim.model.kernel import Kernel
from cpasim.trace import NULL_TRACER, TracedContainer, TracedStore

# A process script: (action, argument) steps; delays are small integers so that
# many events fall on the same time and their order is decided by SimPy's ids.
STEP = st.one_of(
    st.tuples(st.just("sleep"), st.integers(0, 3)),
    st.tuples(st.just("put"), st.integers(0, 2)),
    st.tuples(st.just("get"), st.integers(0, 2)),
    st.tuples(st.just("give"), st.integers(1, 3)),
    st.tuples(st.just("take"), st.integers(1, 3)),
    st.tuples(st.just("spawn"), st.integers(0, 3)),
    st.tuples(st.just("fail"), st.just(0)),
)
SCRIPTS = st.lists(st.lists(STEP, min_size=1, max_size=12), min_size=1, max_size=5)


def run(env, scripts, until: float = 50.0):
    """Run ``scripts`` on ``env``; return what happened, in order, and the events used."""
    log = []
    unbounded = TracedStore(env, NULL_TRACER, "h", "S", "0")
    bounded = TracedStore(env, NULL_TRACER, "h", "S", "1", capacity=1)
    stores = [unbounded, bounded, simpy.Store(env, capacity=2)]
    credits = TracedContainer(env, NULL_TRACER, "h", "C", init=2)

    def child(k, delay):
        yield env.timeout(delay)
        log.append((env.now, "child", k))
        return k * 10

    def failing(k):
        yield env.timeout(1)
        raise ValueError(f"boom {k}")

    def proc(k, script):
        for i, (action, arg) in enumerate(script):
            if action == "sleep":
                yield env.timeout(arg)
            elif action == "put":
                yield stores[arg].put((k, i))
            elif action == "get":
                store = stores[arg]
                # A get may wait forever: bound it by a timeout, as a model would not.
                got = yield store.get() | env.timeout(5)
                log.append((env.now, k, "got", sorted(map(repr, got.values()))))
                continue
            elif action == "give":
                credits.put(arg)
            elif action == "take":
                got = yield credits.get(arg) | env.timeout(4)
                log.append((env.now, k, "took", len(got.events)))
                continue
            elif action == "spawn":
                value = yield env.process(child(k * 100 + i, arg))
                log.append((env.now, k, "joined", value))
                continue
            else:
                try:
                    yield env.process(failing(k))
                except ValueError as exc:
                    log.append((env.now, k, "caught", str(exc)))
                continue
            log.append((env.now, k, action, arg))
        return k

    procs = [env.process(proc(k, s)) for k, s in enumerate(scripts)]
    env.run(until=until)
    ends = [(p.triggered, p.value if p.triggered else None) for p in procs]
    return log, ends, next(env._eid), len(env._queue)


@settings(max_examples=150, deadline=None)
@given(SCRIPTS)
def test_kernel_runs_any_script_exactly_as_simpy(scripts):
    assert run(Kernel(), scripts) == run(simpy.Environment(), scripts)


def test_run_until_processes_events_before_t_only():
    env = Kernel()
    seen = []

    def ticker():
        while True:
            yield env.timeout(1.5)
            seen.append(env.now)

    env.process(ticker())
    assert env.run_until(6.0)
    assert seen == [1.5, 3.0, 4.5]
    assert env.now == 4.5  # the clock stands at the last event, as after step()
    assert env.run_until(6.0001)
    assert seen[-1] == 6.0


def test_run_until_stops_like_step_and_keeps_the_remaining_callbacks():
    ref, env = simpy.Environment(), Kernel()
    outcomes = []
    for e in (ref, env):
        done = e.event()
        calls = []
        done.callbacks.append(StopSimulation.callback)
        done.callbacks.append(lambda ev, calls=calls: calls.append("after"))
        e.timeout(2).callbacks.append(lambda ev, done=done: done.succeed("x"))
        if e is ref:
            with pytest.raises(StopSimulation):
                while True:
                    e.step()
        else:
            assert e.run_until(10) is False
        outcomes.append((e.now, calls[:], len(e._queue), next(e._eid)))
        # The event was rescheduled with what was left of its callbacks.
        e.step()
        outcomes.append(calls[:])
    assert outcomes[:2] == outcomes[2:]
    assert outcomes[1] == ["after"]


def test_kernel_checks_what_simpy_checks():
    env = Kernel()
    with pytest.raises(ValueError, match="Negative delay"):
        env.timeout(-1)

    def bad():
        yield 42

    env.process(bad())
    with pytest.raises(RuntimeError, match="not an event"):
        env.run_until(1)


def test_an_unhandled_failure_crashes_the_run_as_in_simpy():
    env = Kernel()

    def failing():
        yield env.timeout(1)
        raise KeyError("lost")

    env.process(failing())
    with pytest.raises(KeyError, match="lost"):
        env.run_until(5)
