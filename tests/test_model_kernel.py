"""The model's Kernel runs every event as a plain SimPy Environment would."""

from __future__ import annotations

import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st
from simpy.core import StopSimulation

from cpasim.model.environment import Kernel, pending, timer, wake_sooner
from cpasim.tracing import NULL_TRACER, TracedContainer, TracedStore

# A process script: (action, argument) steps; delays are small integers so that
# many events fall on the same time and their order is decided by SimPy's ids.
STEP = st.one_of(
    st.tuples(st.just("sleep"), st.integers(0, 3)),
    st.tuples(st.just("timer"), st.integers(0, 9)),
    st.tuples(st.just("put"), st.integers(0, 2)),
    st.tuples(st.just("get"), st.integers(0, 2)),
    st.tuples(st.just("give"), st.integers(1, 3)),
    st.tuples(st.just("take"), st.integers(1, 3)),
    st.tuples(st.just("spawn"), st.integers(0, 3)),
    st.tuples(st.just("fail"), st.just(0)),
)
SCRIPTS = st.lists(st.lists(STEP, min_size=1, max_size=12), min_size=1, max_size=5)


def run(env, scripts, until: float = 50.0, *, sleep=None, drive=None):
    """Run ``scripts`` on ``env``; return what happened, in order, and the events used.

    ``sleep``: how a process waits (default ``env.timeout``); ``drive(env, until)``:
    how the run is driven (default ``env.run(until=until)``)."""
    sleep = sleep or env.timeout
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
                yield sleep(arg)
            elif action == "timer":
                yield timer(env, arg)
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
    if drive is None:
        env.run(until=until)
    else:
        drive(env, until)
    ends = [(p.triggered, p.value if p.triggered else None) for p in procs]
    return log, ends, next(env._eid), pending(env)


@settings(max_examples=150, deadline=None)
@given(SCRIPTS)
def test_kernel_runs_any_script_exactly_as_simpy(scripts):
    assert run(Kernel(), scripts) == run(simpy.Environment(), scripts)


# Timers (Kernel.timer) wait apart from the event queue: sleepers on timers, some
# moved sooner (wake_sooner, which leaves the old timer to fire to no one), and a
# ticker whose short timeouts pass between them must see every event at the time
# and in the order a plain Environment's timeouts give.
SLEEPS = st.lists(st.lists(st.integers(0, 30), min_size=1, max_size=6), min_size=1, max_size=6)
MOVES = st.lists(st.tuples(st.integers(0, 40), st.integers(0, 5), st.integers(0, 20)), max_size=10)


def run_timers(env, sleeps, moves):
    log = []
    wakes: dict[int, float] = {}  # sleeper -> when it wakes, while it sleeps on a timer

    def sleeper(k, delays):
        for d in delays:
            wakes[k] = env.now + d
            yield timer(env, d)
            del wakes[k]
            log.append((env.now, "woke", k))

    def mover():
        for at, k, delay in sorted(moves):
            yield env.timeout(max(0, at - env.now))
            k %= len(sleeps)
            if env.now + delay < wakes.get(k, -1):
                wake_sooner(env, procs[k], delay)
                wakes[k] = env.now + delay
                log.append((env.now, "moved", k, delay))

    def ticker():
        while True:
            yield env.timeout(1)
            log.append((env.now, "tick", pending(env)))

    procs = [env.process(sleeper(k, d)) for k, d in enumerate(sleeps)]
    env.process(mover())
    env.process(ticker())
    env.run(until=60)
    return log, next(env._eid), pending(env)


@settings(max_examples=100, deadline=None)
@given(SLEEPS, MOVES)
def test_timers_fire_when_and_in_the_order_timeouts_would(sleeps, moves):
    assert run_timers(Kernel(), sleeps, moves) == run_timers(simpy.Environment(), sleeps, moves)


def test_only_the_earliest_timers_are_in_the_event_queue():
    env = Kernel()
    for d in (50, 30, 40, 10, 20):
        timer(env, d)
    env.timeout(5)
    # The timers of 50 and 30 entered in turn as each was the earliest so far, that of 10
    # too; 40 and 20 wait.
    assert len(env._queue) == 4 and pending(env) == 6
    fired = []
    while env._queue:
        fired.append(env.peek())
        env.step()
    assert fired == [5, 10, 20, 30, 40, 50]
    assert pending(env) == 0


def in_slices(env, until: float, step: float = 3.5) -> None:
    """Drive ``env`` to ``until`` in slices, as a simulation is: ``run_until`` on a
    Kernel (pausing between slices), ``step()`` on a plain environment."""
    t = 0.0
    while t < until:
        t = min(t + step, until)
        if isinstance(env, Kernel):
            env.run_until(t)
            if env._queue:
                env.advance(t)
        else:
            while env.peek() < t:
                env.step()


@settings(max_examples=150, deadline=None)
@given(SCRIPTS)
def test_a_sleep_that_goes_on_at_once_changes_nothing_but_the_events(scripts):
    """Kernel.sleep against plain timeouts: the same things at the same times, in
    the same order, with no more events (fewer when a wait had nothing before it)."""
    kernel = Kernel()
    log, ends, events, _ = run(kernel, scripts, sleep=kernel.sleep, drive=in_slices)
    ref_log, ref_ends, ref_events, _ = run(simpy.Environment(), scripts, drive=in_slices)
    assert (log, ends) == (ref_log, ref_ends)
    assert events <= ref_events


def test_a_sleep_goes_on_at_once_only_when_nothing_comes_first():
    env = Kernel()
    log = []

    def alone():
        for _ in range(3):
            # A timeout first (tied's start is due at 0), then nothing else is due
            # before it ends: the clock moves on.
            yield env.sleep(2.0)
            log.append(("alone", env.now))
        yield env.sleep(10.0)  # past the slice's end: a timeout, after the pause
        log.append(("alone", env.now))

    def tied():
        yield env.timeout(0.5)
        first = env.timeout(7.0)  # due at 7.5, scheduled before the sleep below
        first.callbacks.append(lambda _: log.append(("first", env.now)))
        yield env.sleep(1.0)  # 1.5: nothing else before it
        log.append(("tied", env.now))
        yield env.sleep(6.0)  # 7.5 too: "first" goes first, so a timeout
        log.append(("tied", env.now))

    env.process(alone())
    env.process(tied())
    assert env.run_until(10.0)
    assert log == [
        ("tied", 1.5),
        ("alone", 2.0),
        ("alone", 4.0),
        ("alone", 6.0),
        ("first", 7.5),
        ("tied", 7.5),
    ]
    # Two starts, alone's first sleep, tied's timeout, first, tied's tie, alone's last
    # sleep and tied's end: four sleeps went on without one.
    assert next(env._eid) == 8
    env.advance(10.0)
    assert env.run_until(20.0)
    assert log[-1] == ("alone", 16.0)
    # Outside run_until (step(), run()) a sleep is always a timeout.
    assert isinstance(env.sleep(1.0), simpy.events.Timeout)


def test_a_sleep_waits_for_the_others_the_same_event_resumes():
    """Two processes wait on one event: the first resumed must not go on before the
    second has run (it would run at the wrong time)."""
    env = Kernel()
    gate = env.timeout(1.0)
    log = []

    def waiter(name):
        yield gate
        log.append((name, env.now))
        yield env.sleep(2.0)
        log.append((name, env.now))

    env.process(waiter("a"))
    env.process(waiter("b"))
    assert env.run_until(10.0)
    assert log == [("a", 1.0), ("b", 1.0), ("a", 3.0), ("b", 3.0)]


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


# --- interrupts and throws --------------------------------------------------------------
# A victim waits on one thing at a time; an interrupter interrupts victims and a
# failer fails (or fires) the shared events they wait on.  What each catches,
# whether it waits again on what it waited for, and when it dies, must come out
# the same on a Kernel as on a plain Environment.
WAIT = st.one_of(
    st.tuples(st.just("sleep"), st.integers(0, 4)),
    st.tuples(st.just("get"), st.just(0)),
    st.tuples(st.just("event"), st.integers(0, 2)),
    st.tuples(st.just("join"), st.integers(0, 3)),
)
VICTIMS = st.lists(
    st.lists(st.tuples(WAIT, st.booleans()), min_size=1, max_size=6), min_size=1, max_size=4
)
# (delay, target, cause or exception kind)
INTERRUPTS = st.lists(
    st.tuples(st.integers(0, 6), st.integers(0, 4), st.sampled_from(["a", None, 7])), max_size=8
)
FAILURES = st.lists(
    st.tuples(st.integers(0, 6), st.integers(0, 2), st.sampled_from(["ok", "value", "key"])),
    max_size=6,
)


def run_interrupts(env, victims, interrupts, failures, until):
    log = []
    store = simpy.Store(env)
    events = [env.event() for _ in range(3)]

    def child(delay):
        yield env.timeout(delay)
        return delay

    def victim(k, script):
        for i, ((what, arg), again) in enumerate(script):
            if what == "sleep":
                target = env.timeout(arg, value=arg)
            elif what == "get":
                target = store.get()
            elif what == "event":
                target = events[arg]
            else:
                target = env.process(child(arg))
            while True:
                try:
                    value = yield target
                    log.append((env.now, k, i, "value", repr(value)))
                    break
                except simpy.Interrupt as irq:
                    log.append((env.now, k, i, "interrupt", irq.cause))
                    # Wait again on the same event, or give it up and move on.
                    if not again or target.processed:
                        break
                except ValueError as exc:  # a thrown failure, caught; KeyError kills
                    log.append((env.now, k, i, "caught", str(exc)))
                    break
        store.put(k)
        return k

    procs = [env.process(victim(k, s)) for k, s in enumerate(victims)]

    def interrupter():
        for delay, target, cause in interrupts:
            yield env.timeout(delay)
            proc = procs[target % len(procs)]
            try:
                proc.interrupt(cause)
                log.append((env.now, "interrupted", target % len(procs)))
            except RuntimeError:  # a process that has ended (its repr names the class)
                log.append((env.now, "refused", target % len(procs)))

    def failer():
        for delay, idx, kind in failures:
            yield env.timeout(delay)
            event = events[idx]
            if event.triggered:
                events[idx] = event = env.event()
            if kind == "ok":
                event.succeed(idx)
            else:
                event.fail((ValueError if kind == "value" else KeyError)(f"{kind} {idx}"))
                event.defused = True  # nobody waiting must not crash the run

    def watcher(k, proc):
        try:
            value = yield proc
            log.append((env.now, "ended", k, value))
        except Exception as exc:  # not GeneratorExit: a waiting watcher closed unrun
            log.append((env.now, "died", k, repr(exc)))

    env.process(interrupter())
    env.process(failer())
    for k, proc in enumerate(procs):
        env.process(watcher(k, proc))
    if until is None:
        env.run(until=40)
    elif isinstance(env, Kernel):
        env.run_until(until)
    else:
        while env.peek() < until:
            env.step()
    ends = [(p.triggered, p.ok if p.triggered else None) for p in procs]
    return log, ends, env.now, next(env._eid), len(env._queue)


@settings(max_examples=200, deadline=None)
@given(VICTIMS, INTERRUPTS, FAILURES, st.sampled_from([None, 40.0]))
def test_interrupts_and_throws_run_on_a_kernel_as_in_simpy(victims, interrupts, failures, until):
    assert run_interrupts(Kernel(), victims, interrupts, failures, until) == run_interrupts(
        simpy.Environment(), victims, interrupts, failures, until
    )


@pytest.mark.parametrize("make", [simpy.Environment, Kernel], ids=["simpy", "kernel"])
def test_an_interrupt_and_a_throw_in_one_process(make):
    """The same outcomes at the same times on both: written out, so the random
    comparison above cannot agree on a run that does nothing."""
    env = make()
    log = []
    gate = env.event()

    def victim():
        try:
            yield env.timeout(10)
        except simpy.Interrupt as irq:
            log.append((env.now, "interrupt", irq.cause))
        try:
            yield gate
        except ValueError as exc:
            log.append((env.now, "thrown", str(exc)))
        yield env.timeout(1)
        raise KeyError("dies")

    proc = env.process(victim())

    def driver():
        yield env.timeout(2)
        proc.interrupt("wake")
        yield env.timeout(3)
        gate.fail(ValueError("bad gate"))
        try:
            yield proc
        except KeyError as exc:
            log.append((env.now, "died", str(exc)))
        try:
            proc.interrupt("late")
        except RuntimeError:
            log.append((env.now, "refused"))

    env.process(driver())
    env.run()
    assert log == [
        (2, "interrupt", "wake"),
        (5, "thrown", "bad gate"),
        (6, "died", "'dies'"),
        (6, "refused"),
    ]
