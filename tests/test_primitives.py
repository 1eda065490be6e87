"""Traced SimPy queues: the records they emit and SimPy behaviour left untouched."""

from __future__ import annotations

from collections import Counter

import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from cpasim.tracing import NULL_TRACER, TracedContainer, TracedPool, TracedStore, Tracer
from cpasim.tracing.records import FLAG_CONN_FLOW, OPS


def records(tracer):
    """The trace as (t, op, sm name, queue-or-other name, n) tuples."""
    source = tracer.source()
    key = source.key
    out = []
    for chunk in source.chunks():
        for r in chunk.tolist():
            t, op, flags, sm, a, n = r
            op = OPS[op]
            what = key.queues[a] if op not in ("begin", "link", "identify") else a
            out.append((t, op, key.sms[sm][1], what[1] if isinstance(what, tuple) else what, n))
    return out


def test_store_put_wakes_getter_enq_before_deq():
    env = simpy.Environment()
    tr = Tracer.in_memory(env)
    q = TracedStore(env, tr, "tx", "Q", capacity=4)
    prod, cons = tr.sm("tx", "P"), tr.sm("tx", "C")
    got = []

    def consumer():
        item = yield q.get(cons)
        got.append((item, env.now))

    def producer():
        yield env.timeout(5)
        yield q.put("pkt", prod)

    env.process(consumer())
    env.process(producer())
    env.run()
    assert got == [("pkt", 5)]
    assert records(tr) == [
        (0.0, "declare", "Q", "Q", 4),
        (0.0, "wait_empty", "C", "Q", 1),
        (5.0, "enq", "P", "Q", 1),
        (5.0, "deq", "C", "Q", 1),
    ]


def test_store_full_blocks_putter_deq_before_enq_and_capacity_holds():
    env = simpy.Environment()
    tr = Tracer.in_memory(env)
    q = TracedStore(env, tr, "tx", "Ring", capacity=2)
    prod, cons = tr.sm("tx", "P"), tr.sm("tx", "C")
    sizes = []

    def producer():
        for i in range(3):
            yield q.put(i, prod)
            sizes.append(len(q))

    def consumer():
        yield env.timeout(10)
        yield q.get(cons)

    env.process(producer())
    env.process(consumer())
    env.run()
    assert max(sizes) == 2
    assert records(tr)[1:] == [
        (0.0, "enq", "P", "Ring", 1),
        (0.0, "enq", "P", "Ring", 1),
        (0.0, "wait_full", "P", "Ring", 1),
        (10.0, "deq", "C", "Ring", 1),
        (10.0, "enq", "P", "Ring", 1),
    ]


def test_no_wait_record_when_the_request_is_served_at_once():
    env = simpy.Environment()
    tr = Tracer.in_memory(env)
    q = TracedStore(env, tr, "tx", "Q")
    sm = tr.sm("tx", "A")

    def proc():
        yield q.put(1, sm)
        yield q.get(sm)

    env.process(proc())
    env.run()
    assert [r[1] for r in records(tr)] == ["declare", "enq", "deq"]


def test_declare_flags_and_capacity():
    env = simpy.Environment()
    tr = Tracer.in_memory(env)
    TracedStore(env, tr, "tx", "Data", capacity=8)
    TracedStore(env, tr, "tx", "Free desc", conn_flow=False)
    tr.flush()
    chunk = next(iter(tr.source().chunks()))
    assert chunk["n"].tolist() == [8, -1]
    assert chunk["flags"].tolist() == [FLAG_CONN_FLOW, 0]


def test_declare_emitted_by_owner_when_given():
    env = simpy.Environment()
    tr = Tracer.in_memory(env)
    drv = tr.sm("tx", "Driver TX")
    TracedStore(env, tr, "tx", "TX ring", capacity=4, owner=drv)
    assert records(tr) == [(0.0, "declare", "Driver TX", "TX ring", 4)]
    assert tr.key.sms == [("tx", "Driver TX", "0")]


def test_container_initial_resize_put_get_and_resize_wakes_getter():
    env = simpy.Environment()
    tr = Tracer.in_memory(env)
    win = TracedContainer(env, tr, "tx", "Window", "c0", init=3)
    tcp, ack = tr.sm("tx", "TCP"), tr.sm("tx", "ACK")
    log = []

    def sender():
        yield win.get(2, tcp)
        log.append(("sent", env.now, win.level))
        yield win.get(4, tcp)
        log.append(("sent", env.now, win.level))

    def acker():
        yield env.timeout(3)
        yield win.put(1, ack)
        yield env.timeout(3)
        win.resize(5, ack)

    env.process(sender())
    env.process(acker())
    env.run()
    assert log == [("sent", 0, 1), ("sent", 6, 1)]
    assert records(tr) == [
        (0.0, "declare", "Window", "Window", -1),
        (0.0, "resize", "Window", "Window", 3),
        (0.0, "deq", "TCP", "Window", 2),
        (0.0, "wait_empty", "TCP", "Window", 4),
        (3.0, "enq", "ACK", "Window", 1),
        (6.0, "resize", "ACK", "Window", 5),
        (6.0, "deq", "TCP", "Window", 4),
    ]


def test_container_resize_out_of_range():
    env = simpy.Environment()
    c = TracedContainer(env, Tracer.in_memory(env), "tx", "Buf", capacity=10)
    with pytest.raises(ValueError, match="Buf"):
        c.resize(11, NULL_TRACER.sm("tx", "x"))


def test_pool_acquire_release():
    env = simpy.Environment()
    tr = Tracer.in_memory(env)
    cores = TracedPool(env, tr, "tx", "CPU cores", size=1)
    a, b = tr.sm("tx", "A"), tr.sm("tx", "B")
    log = []

    def user(sm, work):
        yield cores.acquire(sm)
        log.append((sm.name[1], env.now))
        yield env.timeout(work)
        cores.release(sm)

    env.process(user(a, 4))
    env.process(user(b, 1))
    env.run()
    assert log == [("A", 0), ("B", 4)]
    assert cores.free == 1 and cores.size == 1
    assert records(tr) == [
        (0.0, "declare", "CPU cores", "CPU cores", -1),
        (0.0, "resize", "CPU cores", "CPU cores", 1),
        (0.0, "deq", "A", "CPU cores", 1),
        (0.0, "wait_empty", "B", "CPU cores", 1),
        (4.0, "enq", "A", "CPU cores", 1),
        (4.0, "deq", "B", "CPU cores", 1),
        (5.0, "enq", "B", "CPU cores", 1),
    ]
    with pytest.raises(RuntimeError, match="release without"):
        cores.release(a)


@pytest.mark.parametrize("traced", [True, False])
def test_an_untraced_holder_queues_in_turn_and_records_nothing(traced):
    # What holds a unit without annotations (M5's bridge forwarding a register write):
    # it waits behind the traced holder and ahead of a later traced request, and only
    # the traced acquires and releases are recorded, at the times they happened; the
    # later request, blocked only by the unannotated holder, records no wait (to the
    # trace the unit is free), so its wait is its own state's time.
    env = simpy.Environment()
    tr = Tracer.in_memory(env) if traced else NULL_TRACER
    bus = TracedPool(env, tr, "tx", "Bus", size=1)
    a, b = tr.sm("tx", "A"), tr.sm("tx", "B")
    log = []

    def holder():
        yield bus.acquire(a)
        yield env.timeout(4)
        bus.release(a)

    def untraced():
        yield env.timeout(1)
        if not bus.take_untraced():
            yield bus.wait_untraced()
        log.append(("untraced", env.now))
        yield env.timeout(2)
        bus.release_untraced()

    def later():
        yield env.timeout(2)
        yield bus.acquire(b)
        log.append(("B", env.now))
        bus.release(b)

    for proc in (holder(), untraced(), later()):
        env.process(proc)
    env.run()
    assert log == [("untraced", 4), ("B", 6)]
    assert bus.free == 1
    assert bus.take_untraced() and not bus.take_untraced()
    bus.release_untraced()
    with pytest.raises(RuntimeError, match="release without"):
        bus.release_untraced()
    if traced:
        assert records(tr)[2:] == [
            (0.0, "deq", "A", "Bus", 1),
            (4.0, "enq", "A", "Bus", 1),
            (6.0, "deq", "B", "Bus", 1),
            (6.0, "enq", "B", "Bus", 1),
        ]


def test_pool_declared_without_connection_flow():
    env = simpy.Environment()
    tr = Tracer.in_memory(env)
    TracedPool(env, tr, "tx", "CPU cores", size=2)
    tr.flush()
    chunk = next(iter(tr.source().chunks()))
    assert chunk["flags"][0] == 0


def test_null_tracer_gives_plain_simpy_queues():
    env = simpy.Environment()
    for queue in (
        TracedStore(env, NULL_TRACER, "tx", "Q", capacity=2),
        TracedContainer(env, NULL_TRACER, "tx", "C", init=1),
        TracedPool(env, NULL_TRACER, "tx", "P", size=2),
    ):
        assert isinstance(queue, TracedStore | TracedContainer)
        assert type(queue).put is not TracedStore.put
        assert type(queue).put is not TracedContainer.put
    assert NULL_TRACER.records_written == 0


# --- SimPy behaviour is untouched: same script, bare vs null vs traced -------------

op_st = st.tuples(st.sampled_from(["put", "get"]), st.integers(0, 3), st.integers(1, 3))
script_st = st.lists(st.lists(op_st, min_size=1, max_size=8), min_size=1, max_size=4)


def run_store(script, capacity, mode):
    env = simpy.Environment()
    log = []
    if mode == "bare":
        q = simpy.Store(env, capacity)
        tracer = None
    else:
        tracer = Tracer.in_memory(env) if mode == "traced" else NULL_TRACER
        q = TracedStore(env, tracer, "s", "Q", capacity=capacity)

    def proc(pid, ops):
        sm = tracer.sm("s", f"P{pid}") if tracer else None
        for k, (kind, delay, _amount) in enumerate(ops):
            yield env.timeout(delay)
            asked = env.now
            if kind == "put":
                item = (pid, k)
                yield (q.put(item, sm) if sm else q.put(item))
            else:
                item = yield (q.get(sm) if sm else q.get())
            log.append((pid, k, kind, asked, env.now, item))

    for pid, ops in enumerate(script):
        env.process(proc(pid, ops))
    env.run(until=100)
    return log, tracer


def run_container(script, capacity, init, mode):
    env = simpy.Environment()
    log = []
    if mode == "bare":
        c = simpy.Container(env, capacity, init)
        tracer = None
    else:
        tracer = Tracer.in_memory(env) if mode == "traced" else NULL_TRACER
        c = TracedContainer(env, tracer, "s", "C", capacity=capacity, init=init)

    def proc(pid, ops):
        sm = tracer.sm("s", f"P{pid}") if tracer else None
        for k, (kind, delay, amount) in enumerate(ops):
            yield env.timeout(delay)
            asked = env.now
            op = c.put if kind == "put" else c.get
            yield (op(amount, sm) if sm else op(amount))
            log.append((pid, k, kind, asked, env.now, c.level))

    for pid, ops in enumerate(script):
        env.process(proc(pid, ops))
    env.run(until=100)
    return log, tracer


def check_waits_explain_blocking(log, tracer, capacity, count0=0):
    """Each request served later than asked was preceded by a wait record of its SM
    at the request time, emitted while the queue really was empty (get) or full (put);
    the replayed occupancy stays within 0..capacity."""
    source = tracer.source()
    sm_of = {name[1]: i for i, name in enumerate(source.key.sms)}
    recs = [r for ch in source.chunks() for r in ch.tolist()]
    count = count0
    waits = set()
    for t, op, _f, sm, _a, n in recs:
        op = OPS[op]
        if op == "enq":
            count += n
        elif op == "deq":
            count -= n
        elif op == "resize":
            count = n
        elif op == "wait_empty":
            assert count < n
            waits.add((sm, t, "get"))
        elif op == "wait_full":
            assert count + n > capacity
            waits.add((sm, t, "put"))
        assert 0 <= count <= capacity
    for pid, _k, kind, asked, done, *_ in log:
        if done > asked:
            assert (sm_of[f"P{pid}"], asked, kind) in waits
    # Every request served is one enq/deq record of its own SM at the time it was served.
    moved = Counter((sm, t, OPS[op]) for t, op, _f, sm, _a, _n in recs if OPS[op] in ("enq", "deq"))
    served = Counter(
        (sm_of[f"P{pid}"], done, "enq" if kind == "put" else "deq")
        for pid, _k, kind, _asked, done, *_ in log
    )
    assert moved == served


@settings(max_examples=60, deadline=None)
@given(script=script_st, capacity=st.integers(1, 3))
def test_store_same_behaviour_bare_null_traced(script, capacity):
    bare, _ = run_store(script, capacity, "bare")
    null, _ = run_store(script, capacity, "null")
    traced, tracer = run_store(script, capacity, "traced")
    assert null == bare
    assert traced == bare
    check_waits_explain_blocking(traced, tracer, capacity)


@settings(max_examples=60, deadline=None)
@given(script=script_st, capacity=st.integers(3, 6), init=st.integers(0, 3))
def test_container_same_behaviour_bare_null_traced(script, capacity, init):
    bare, _ = run_container(script, capacity, init, "bare")
    null, _ = run_container(script, capacity, init, "null")
    traced, tracer = run_container(script, capacity, init, "traced")
    assert null == bare
    assert traced == bare
    check_waits_explain_blocking(traced, tracer, capacity, init)


def test_items_pass_through_unchanged():
    env = simpy.Environment()
    tr = Tracer.in_memory(env)
    q = TracedStore(env, tr, "tx", "Q")
    sm = tr.sm("tx", "A")
    sent = [("c0", 1), ("c1", 2)]
    got = []

    def proc():
        for item in sent:
            yield q.put(item, sm)
        for _ in sent:
            got.append((yield q.get(sm)))

    env.process(proc())
    env.run()
    assert all(a is b for a, b in zip(got, sent, strict=True))


@pytest.mark.parametrize("mode", ["bare", "null", "traced"])
def test_one_put_serves_every_waiting_get_it_covers_in_fifo_order(mode):
    """A container serves waiting gets from the head while they fit (SimPy's rule),
    a store one get per put; both at the moments SimPy would."""
    env = simpy.Environment()
    tracer = Tracer.in_memory(env) if mode == "traced" else NULL_TRACER
    if mode == "bare":
        c, q = simpy.Container(env, 100, 0), simpy.Store(env)
    else:
        c = TracedContainer(env, tracer, "s", "C", capacity=100)
        q = TracedStore(env, tracer, "s", "Q")
    log = []

    def getter(k, amount):
        sm = tracer.sm("s", f"G{k}")
        yield (c.get(amount) if mode == "bare" else c.get(amount, sm))
        log.append((env.now, "c", k))
        yield (q.get() if mode == "bare" else q.get(sm))
        log.append((env.now, "q", k))

    def putter():
        sm = tracer.sm("s", "P")
        yield env.timeout(1)
        yield (c.put(5) if mode == "bare" else c.put(5, sm))  # covers 2 + 3, not the 4 after
        for item in range(3):
            yield (q.put(item) if mode == "bare" else q.put(item, sm))
        yield env.timeout(1)
        yield (c.put(4) if mode == "bare" else c.put(4, sm))

    for k, amount in enumerate((2, 3, 4)):
        env.process(getter(k, amount))
    env.process(putter())
    env.run()
    assert log == [(1, "c", 0), (1, "c", 1), (1, "q", 0), (1, "q", 1), (2, "c", 2), (2, "q", 2)]


@pytest.mark.parametrize("traced", [True, False])
def test_moving_units_now_wakes_the_other_side_as_a_put_or_get_would(traced):
    env = simpy.Environment()
    tr = Tracer.in_memory(env) if traced else NULL_TRACER
    q = TracedStore(env, tr, "tx", "Q", capacity=2)
    c = TracedContainer(env, tr, "tx", "C", capacity=10, init=0)
    pool = TracedPool(env, tr, "tx", "P", size=1)
    a, b = tr.sm("tx", "A"), tr.sm("tx", "B")
    log = []

    def blocked():
        log.append(("got", (yield q.get(b)), env.now))
        yield c.get(3, b)
        log.append(("credits", c.level, env.now))
        yield q.put("x", b)  # the store is full now: waits for take_now
        log.append(("put", env.now))
        yield pool.acquire(b)
        log.append(("core", env.now))

    def mover():
        yield env.timeout(1)
        q.put_now("p", a)
        c.give(4, a)
        q.put_now("y", a)
        q.put_now("z", a)
        yield env.timeout(1)
        assert q.take_now(5, a) == ["y", "z"]
        assert pool.acquire_now(a)
        yield env.timeout(1)
        assert not pool.acquire_now(b)  # none free
        pool.release(a)
        assert c.grab(5, a) == 1  # only what is left after the 3 taken
        with pytest.raises(RuntimeError, match="do not fit"):
            c.give(11, a)

    env.process(blocked())
    env.process(mover())
    env.run()
    assert log == [("got", "p", 1), ("credits", 1, 1), ("put", 2), ("core", 3)]
    assert q.items == ["x"] and c.level == 0
    if traced:
        ops = [(op, sm, q_, n) for _t, op, sm, q_, n in records(tr) if op in ("enq", "deq")]
        assert ops == [
            ("enq", "A", "Q", 1),  # put_now wakes B's get: enq, then B's deq
            ("deq", "B", "Q", 1),
            ("enq", "A", "C", 4),
            ("enq", "A", "Q", 1),
            ("enq", "A", "Q", 1),
            ("deq", "B", "C", 3),  # B runs on at its get event
            ("deq", "A", "Q", 2),  # take_now frees room for B's blocked put
            ("enq", "B", "Q", 1),
            ("deq", "A", "P", 1),
            ("enq", "A", "P", 1),  # the release hands the unit to B's acquire
            ("deq", "B", "P", 1),
            ("deq", "A", "C", 1),
        ]


def test_put_now_without_room_is_refused():
    env = simpy.Environment()
    q = TracedStore(env, NULL_TRACER, "tx", "Q", capacity=1)
    q.put_now(1, NULL_TRACER.sm("tx", "A"))
    with pytest.raises(RuntimeError, match="tx:Q:0: put without room"):
        q.put_now(2, NULL_TRACER.sm("tx", "A"))
