"""The tracer: state-machine handles, raw records, chunking, the null tracer."""

from __future__ import annotations

import numpy as np
import pytest
import simpy

from cpasim.tracing import NULL_SM, NULL_TRACER, MemorySink, TracedStore, Tracer
from cpasim.tracing.records import DEQ, OP_CODE, OPS, PEEK, RECORD_DTYPE


def all_records(source):
    return np.concatenate(list(source.chunks()))


def test_sm_handle_records_begin_link_identify():
    env = simpy.Environment()
    tr = Tracer.in_memory(env)
    app = tr.sm("tx", "App", "0")
    tcp = tr.sm("tx", "TCP send", "c0")

    def proc():
        app.begin("write")
        yield env.timeout(3.5)
        app.identify("c0")
        app.link(tcp)
        tcp.begin("segment")

    env.process(proc())
    env.run()
    tr.close()
    src = tr.source()
    recs = all_records(src)
    assert [OPS[o] for o in recs["op"]] == ["begin", "identify", "link", "begin"]
    assert recs["t"].tolist() == [0.0, 3.5, 3.5, 3.5]
    assert [src.key.sms[s] for s in recs["sm"]] == [
        ("tx", "App", "0"),
        ("tx", "App", "0"),
        ("tx", "App", "0"),
        ("tx", "TCP send", "c0"),
    ]
    assert src.key.states[recs["a"][0]] == "write"
    assert src.key.states[recs["a"][3]] == "segment"
    assert src.key.conns[recs["a"][1]] == "c0"
    assert recs["a"][2] == tcp.id


def test_same_names_share_ids():
    env = simpy.Environment()
    tr = Tracer.in_memory(env)
    assert tr.sm("tx", "A") is tr.sm("tx", "A", "0")
    assert tr.sm("tx", "A").id != tr.sm("tx", "A", "1").id
    assert tr.queue("tx", "Q") == tr.queue("tx", "Q", "0") != tr.queue("rx", "Q")
    assert tr.state("idle") == tr.state("idle")


def test_raw_records_and_queue_handles():
    env = simpy.Environment()
    tr = Tracer.in_memory(env)
    sm = tr.sm("tx", "Driver")
    ring = tr.queue("tx", "TX ring")
    tr.record(PEEK, sm.id, ring, 2)
    sm.deq(ring, -1)
    sm.reserve(ring, 3)
    recs = all_records(tr.source())
    assert recs["op"].tolist() == [PEEK, DEQ, OP_CODE["reserve"]]
    assert recs["n"].tolist() == [2, -1, 3]
    assert recs.dtype == RECORD_DTYPE


def test_chunks_are_flushed_every_chunk_records():
    env = simpy.Environment()
    sink = MemorySink()
    tr = Tracer(env, sink, chunk_records=100)
    sm = tr.sm("tx", "A")
    for i in range(250):
        sm.begin("st"[i % 2])
    assert [len(c) for c in sink.chunks] == [100, 100]
    tr.close()
    assert [len(c) for c in sink.chunks] == [100, 100, 50]
    assert tr.records_written == 250
    tr.close()  # closing twice is harmless
    with pytest.raises(RuntimeError, match="closed"):
        tr.flush()


def test_records_are_time_ordered_ties_in_emission_order():
    env = simpy.Environment()
    tr = Tracer.in_memory(env, chunk_records=7)
    sms = [tr.sm("tx", f"S{i}") for i in range(3)]

    def proc(i):
        for k in range(10):
            sms[i].begin(f"s{k}")
            yield env.timeout((i + k) % 3)

    for i in range(3):
        env.process(proc(i))
    env.run()
    recs = all_records(tr.source())
    assert len(recs) == 30
    assert np.all(np.diff(recs["t"]) >= 0)


def test_null_tracer_records_nothing():
    env = simpy.Environment()
    sm = NULL_TRACER.sm("tx", "A")
    assert sm is NULL_SM
    sm.begin("x")
    sm.link(sm)
    sm.identify("c0")
    sm.enq(0)
    sm.deq(0, -1)
    sm.resize(0, 5)
    NULL_TRACER.record(DEQ, 0, 0, 1)
    q = TracedStore(env, NULL_TRACER, "tx", "Q")
    q.put(1, sm)
    env.run()
    NULL_TRACER.close()
    assert NULL_TRACER.records_written == 0
    assert NULL_TRACER.key.sizes() == (0, 0, 0, 0)


def test_tracing_does_not_change_the_simulation():
    """A small pipeline with random service times: identical event log either way."""

    def run(tracer_factory):
        env = simpy.Environment()
        tracer = tracer_factory(env)
        rng = np.random.default_rng(7)
        q1 = TracedStore(env, tracer, "tx", "Q1", capacity=3)
        q2 = TracedStore(env, tracer, "tx", "Q2", capacity=2)
        log = []

        def stage(name, src, dst):
            sm = tracer.sm("tx", name)
            while True:
                sm.begin("idle")
                item = yield src.get(sm)
                sm.begin("work")
                yield env.timeout(float(rng.exponential(3.0)))
                log.append((name, item, env.now))
                if dst is not None:
                    yield dst.put(item, sm)

        def source():
            sm = tracer.sm("tx", "Src")
            for i in range(200):
                yield q1.put(i, sm)
                yield env.timeout(float(rng.exponential(2.0)))

        env.process(source())
        env.process(stage("A", q1, q2))
        env.process(stage("B", q2, None))
        env.run(until=500)
        tracer.close()
        return log, tracer

    off, _ = run(lambda env: NULL_TRACER)
    on, tracer = run(lambda env: Tracer.in_memory(env, chunk_records=64))
    assert on == off
    assert len(off) > 100
    assert tracer.records_written > 500


def test_bind_an_environment_made_later():
    tr = Tracer.in_memory(None)
    env = simpy.Environment(initial_time=42.0)
    sm = tr.bind(env).sm("tx", "A")
    sm.begin("x")
    assert all_records(tr.source())["t"].tolist() == [42.0]
    with pytest.raises(RuntimeError, match="another environment"):
        tr.bind(simpy.Environment())
    assert NULL_TRACER.bind(env) is NULL_TRACER


def test_ids_of_another_tracer_are_refused_at_once():
    env = simpy.Environment()
    tr = Tracer.in_memory(env)
    other = Tracer.in_memory(env)
    other.sm("tx", "A")
    foreign = other.sm("tx", "B")
    with pytest.raises(ValueError, match="never gave out"):
        tr.record(DEQ, foreign.id, 0, 1)
    with pytest.raises(ValueError, match="never gave out"):
        TracedStore(env, tr, "tx", "Q").put(1, NULL_SM)


def test_begin_of_the_current_state_is_not_recorded_but_after_a_link_it_is():
    env = simpy.Environment()
    tr = Tracer.in_memory(env)
    a, b = tr.sm("tx", "A"), tr.sm("tx", "B")
    a.begin("s")
    a.begin("s")  # the same state goes on: nothing to record
    b.begin("t")
    a.link(b)
    b.begin("t")  # the link's target: its next begin carries the dependency
    a.begin("u")
    a.begin("s")
    tr.close()
    recs = all_records(tr.source())
    key = tr.key
    got = [(key.sms[s][1], OPS[o]) for s, o in zip(recs["sm"], recs["op"], strict=True)]
    assert got == [
        ("A", "begin"),
        ("B", "begin"),
        ("A", "link"),
        ("B", "begin"),
        ("A", "begin"),
        ("A", "begin"),
    ]


def test_counts_of_any_size_and_sign_are_kept():
    env = simpy.Environment()
    tr = Tracer.in_memory(env, chunk_records=3)
    sm = tr.sm("tx", "A")
    q = tr.queue("tx", "Q")
    counts = [1, -1, 0, 2**40, 7, -(2**40)]
    for n in counts:
        sm.deq(q, n)
    tr.close()
    recs = all_records(tr.source())
    assert recs["n"].tolist() == counts
    assert set(recs["a"].tolist()) == {q} and set(OPS[o] for o in recs["op"]) == {"deq"}
