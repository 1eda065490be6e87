"""The NIC's TX descriptor fetch engine (``nic.tx_desc_cache``) and Linux 2.6.13's UDP
send path (``ip.send_path``): their state machines, their costs, and that off means
absent."""

from __future__ import annotations

from pathlib import Path

import pytest

from cpasim.analysis import Transforms, analyze
from cpasim.config import load_scenario
from cpasim.simulate import simulate
from cpasim.tracing import Tracer
from cpasim.tracing.records import OPS

ROOT = Path(__file__).resolve().parent.parent
UDP = ["workload.kind=udp_stream", "sim.duration=3ms", "sim.warmup=0", "nic.itr=off"]
CACHE = ["nic.tx_desc_cache=64", "nic.tx_fetch_threshold=56"]
OLD = ["hosts.tx.ip.send_path=2.6.13", "hosts.tx.ip.netfilter=true"]


def _traced(*sets):
    cfg = load_scenario(None, sets=[*UDP, *sets])
    tracer = Tracer.in_memory
    holder = {}

    def make(env):
        holder["t"] = tracer(env)
        return holder["t"]

    res = simulate(cfg, tracer=make)
    return cfg, res, holder["t"]


def _records(tracer):
    """(t, op, (sys, sm), state-or-queue name, n) per record."""
    source = tracer.source()
    key = source.key
    for chunk in source.chunks():
        for t, op, _flags, sm, a, n in chunk.tolist():
            op = OPS[op]
            if op == "begin":
                what = key.states[a]
            elif op in ("link", "identify", "run"):
                what = a
            else:
                what = key.queues[a][1]
            yield t, op, key.sms[sm][:2], what, n


def _sms(tracer):
    return {sm for _t, _op, sm, _w, _n in _records(tracer)}


def test_both_off_by_default_leave_no_trace_of_themselves():
    _, res, tracer = _traced()
    sms = _sms(tracer)
    assert ("tx", "TX Desc Fetch") not in sms and ("tx", "IP Send") not in sms
    # The explicit defaults are the same run, event for event.
    _, same, _ = _traced("nic.tx_desc_cache=0", "ip.send_path=modern")
    a, b = res.to_json(), same.to_json()
    for d in (a, b):
        d.pop("wall_s")
        d.pop("config_digest")
    assert a == b


def test_the_transmit_engine_takes_descriptors_from_the_fetch_engines_cache():
    cfg, _, tracer = _traced(*CACHE)
    recs = list(_records(tracer))
    nic_tx, fetch = ("tx", "NIC TX"), ("tx", "TX Desc Fetch")
    # The transmit engine reads no descriptor itself; the fetch engine does.
    assert not any(sm == nic_tx and w == "DMA descriptors" for _t, op, sm, w, _n in recs)
    fetches = [t for t, op, sm, w, _n in recs if sm == fetch and w == "DMA descriptors"]
    assert fetches
    # Every descriptor the driver posted goes through the cache, which never holds
    # more than its size, in batches of at most desc_fetch_batch.
    level = top = 0
    into = []
    for _t, op, _sm, w, n in recs:
        if w == "TX desc cache" and op == "enq":
            level += n
            into.append(n)
        elif w == "TX desc cache" and op == "deq":
            level -= n
        top = max(top, level)
    assert top <= cfg.tx.nic.tx_desc_cache
    assert max(into) <= cfg.tx.nic.desc_fetch_batch
    posted = sum(n for _t, op, sm, w, n in recs if sm[0] == "tx" and w == "TX ring" and op == "enq")
    taken = sum(n for _t, op, sm, w, n in recs if w == "TX desc cache" and op == "deq")
    packets = sum(1 for _t, op, sm, w, _n in recs if sm == nic_tx and w == "DMA packet")
    assert taken == packets and taken <= sum(into) <= posted


def _dry_waits(threshold, *sets):
    """How often the transmit engine waited for its descriptor cache."""
    _, _, tracer = _traced("nic.tx_desc_cache=64", f"nic.tx_fetch_threshold={threshold}", *sets)
    return sum(
        1
        for _t, op, sm, w, _n in _records(tracer)
        if op == "wait_empty" and sm == ("tx", "NIC TX") and w == "TX desc cache"
    )


@pytest.mark.slow
def test_the_fetch_threshold_decides_how_often_the_transmit_engine_runs_dry():
    # Fetching only when the cache is empty, the engine waits for every fetch; topped
    # up early, the fetch overlaps the packets' DMA.
    assert _dry_waits(0) > 2 * _dry_waits(56)


def test_asked_by_call_the_doorbell_tops_the_cache_up_as_m5s_tail_write_did():
    # Asked only when dry, through the queue, the engine waits for every fetch (37
    # times in 3 ms); with M5's calls the driver's doorbell asks too, so the cache is
    # refilled while the transmit engine works (once, at the start).
    assert _dry_waits(0, "nic.tx_fetch_request=call") * 10 < _dry_waits(0)


def test_the_2613_send_call_runs_through_ip_send_and_fragments_twice_with_netfilter():
    _, _, tracer = _traced(*OLD)
    recs = list(_records(tracer))
    app = [w for _t, op, sm, w, _n in recs if op == "begin" and sm == ("tx", "App")]
    assert {"alloc_skb", "do_csum_partial_copy_from_user", "ip_push_pending_frames"} <= set(app)
    assert "UdpSendMsg: copy" not in app
    ip_send = [w for _t, op, sm, w, _n in recs if op == "begin" and sm == ("tx", "IP Send")]
    # One datagram: fragment, gather again for netfilter, walk the tables, fragment again.
    first = ip_send[ip_send.index("ip_fragment") :][:6]
    assert first == [
        "ip_fragment",
        "ip_defrag",
        "memcpy",
        "nf_hook",
        "ip_fragment",
        "dev_queue_xmit",
    ]
    _, _, plain = _traced("hosts.tx.ip.send_path=2.6.13")
    states = {w for _t, op, sm, w, _n in _records(plain) if sm == ("tx", "IP Send")}
    assert "ip_defrag" not in states and "memcpy" not in states and "ip_fragment" in states


@pytest.mark.parametrize(("netfilter", "preempt"), [(False, False), (True, False), (True, True)])
def test_the_2613_send_path_costs_what_its_states_say(netfilter, preempt):
    """CPU time per datagram on the sender: the copy and checksum (a fragmented datagram
    cannot leave its checksum to the NIC), one buffer per fragment, and IP Send's
    fragmentation (twice, with netfilter's reassembly and copy in between); the same
    when interrupts preempt the work (``cpu.irq_preempt``: it resumes for what was left)."""
    sets = ["workload.bytes=163840", "hosts.tx.ip.send_path=2.6.13"]
    sets += [f"hosts.tx.ip.netfilter={str(netfilter).lower()}", "sim.duration=1s"]
    sets += [f"hosts.tx.cpu.irq_preempt={str(preempt).lower()}"]
    cfg = load_scenario(None, sets=[*UDP, *sets])
    res = simulate(cfg)
    c = cfg.tx.cpu.cost
    n, size, frags = 10, 16384, 12
    copy = n * (c.copy + (c.copy_per_byte + c.csum_per_byte) * size)
    if netfilter:
        copy += n * c.memcpy_per_byte * (size + 28)
    buffer = n * frags * c.skb_alloc
    ns = 1e9 / cfg.tx.cpu.freq
    u = res.cpu_utilization["tx"]
    elapsed = res.sim_time_ns
    assert u["copy"] * elapsed == pytest.approx(copy * ns, rel=1e-9)
    # The buffer category also holds NAPI's clean-up of the sent buffers.
    assert u["buffer"] * elapsed >= buffer * ns


#: The scenario's sender on PCIe: its tail write a fixed stall, not M5's wait for the bus.
PCIE = ("hosts.tx.bus.kind=pcie",)
#: A transmit at x4 on the scenario's M5 bus, its tail write's wait for the bus with it
#: (about 1 us measured).
TRANSMIT_NS = 1000.0


def _shipped_path(*sets, scale=(), engine=None):
    """The shipped scenario (PCIe x1 unless ``sets`` say otherwise), briefly: its
    trace's records and its critical path (with the states ``scale`` names scaled)."""
    cfg = load_scenario(
        ROOT / "scenarios" / "udp-stream.toml", sets=["sim.duration=5ms", "sim.warmup=1ms", *sets]
    )
    holder = {}

    def make(env):
        holder["t"] = Tracer.in_memory(env)
        return holder["t"]

    res = simulate(cfg, tracer=make)
    transforms = Transforms(scale=list(scale)) if scale else None
    a = analyze(
        holder["t"].source(),
        res.analysis_start,
        res.analysis_end,
        transforms=transforms,
        engine=engine,
    )
    return list(_records(holder["t"])), a.path


@pytest.mark.slow
def test_both_analyzer_engines_agree_on_the_2613_calls_and_softirqs():
    """run records and the cores handed over for a softirq, in both engines alike."""
    call = [("tx:App:ip_push_pending_frames", 0.0)]
    _, compiled = _shipped_path("hosts.tx.pcie.lanes=4", scale=call, engine="compiled")
    _, python = _shipped_path("hosts.tx.pcie.lanes=4", scale=call, engine="python")
    assert compiled.most_critical == python.most_critical
    assert any(m["core_lent_share"] for m in compiled.most_critical)


@pytest.mark.slow
def test_a_2613_run_keeps_the_identity_invariant_and_the_call_on_the_path():
    """The shipped scenario (the seed's sender) on PCIe x4, briefly."""
    _, path = _shipped_path("hosts.tx.pcie.lanes=4")
    assert path.critical_path_ns == pytest.approx(path.elapsed_ns, rel=1e-9)
    names = [m["name"] for m in path.most_critical]
    assert "tx:App:ip_push_pending_frames" in names
    assert not any(name.startswith("tx:NIC") for name in names)
    # Without the call the path runs through IP Send, whose qdisc_restart carries the
    # driver's transmit of each fragment; without that too, through Driver TX's xmit.
    call = ("tx:App:ip_push_pending_frames", 0.0)
    _, inside = _shipped_path("hosts.tx.pcie.lanes=4", scale=[call])
    _, deeper = _shipped_path(
        "hosts.tx.pcie.lanes=4", scale=[call, ("tx:IP Send:qdisc_restart", 0.0)]
    )
    share = {m["name"]: m["share"] for m in inside.most_critical}
    deeper_share = {m["name"]: m["share"] for m in deeper.most_critical}
    assert "tx:Driver TX:xmit" not in share
    # The transmit and its tail write's wait for M5's bus, which qdisc_restart held.
    driver = deeper_share["tx:Driver TX:xmit"] + deeper_share["tx:Driver TX:mmio write"]
    # (A transmit under way where the path starts may count for one and not the other.)
    assert driver == pytest.approx(
        share["tx:IP Send:qdisc_restart"], abs=1.5 * TRANSMIT_NS / path.critical_path_ns
    )
    for p in (inside, deeper):
        assert p.critical_path_ns == pytest.approx(path.critical_path_ns, rel=1e-9)


def _count(recs, sm, op, what):
    return sum(1 for _t, o, s, w, _n in recs if s == ("tx", sm) and o == op and w == what)


@pytest.mark.slow
def test_a_2613_sender_transmits_each_fragment_itself_while_the_driver_is_idle():
    """dev_queue_xmit -> qdisc_restart -> e1000_xmit_frame in the sender's context: with
    Driver TX idle and a descriptor free, IP Send hands it the fragment through the qdisc
    and waits in qdisc_restart while the driver posts it on the sender's core (no core
    taken), one descriptor and tail write; once the ring is full (PCIe x1) fragments wait
    in the qdisc and Driver TX posts them later from a core of its own, one tail write
    per frame still.  (On PCIe, where the tail write's stall is fixed; on the scenario's
    M5 bus it also waits for the bus: tests/test_m5bus.py.)"""
    recs, _ = _shipped_path(*PCIE)
    cfg = load_scenario(ROOT / "scenarios" / "udp-stream.toml", sets=list(PCIE))
    calls = [
        t
        for t, op, sm, w, _n in recs
        if sm == ("tx", "IP Send") and op == "begin" and w == "qdisc_restart"
    ]
    done = [
        t
        for t, op, sm, w, _n in recs
        if sm == ("tx", "Driver TX") and op == "enq" and w == "Driver TX return"
    ]
    back = [
        t
        for t, op, sm, w, _n in recs
        if sm == ("tx", "IP Send") and op == "deq" and w == "Driver TX return"
    ]
    assert calls and done == back and len(calls) == len(done)
    # Each call lasts one descriptor and one doorbell stall.
    one = cfg.tx.cpu.cost.descriptor * 1e9 / cfg.tx.cpu.freq + cfg.tx.pcie.mmio_latency
    assert [b - a for a, b in zip(calls, done, strict=True)] == pytest.approx([one] * len(calls))
    # The ring filled: some fragments waited in the qdisc for Driver TX.
    assert _count(recs, "IP Send", "enq", "qdisc") > len(calls)
    assert _count(recs, "Driver TX", "begin", "ring full") > 0
    # Driver TX takes a core only for what it posts after the call.
    takes = _count(recs, "Driver TX", "deq", "CPU cores")
    assert takes > 0
    # (The last may be waiting for its core when the run ends.)
    last = [(op, w) for _t, op, sm, w, _n in recs if sm == ("tx", "Driver TX")][-1]
    waiting = last == ("wait_empty", "CPU cores")
    assert _count(recs, "Driver TX", "begin", "xmit") == len(calls) + takes + waiting
    # One tail write per frame, whoever posts it (2.6.13 had no batching of them).
    posted = [n for _t, op, sm, w, n in recs if sm == ("tx", "Driver TX") and w == "TX ring"]
    assert set(posted) == {1}


@pytest.mark.slow
def test_a_2613_sender_runs_the_pending_softirq_on_leaving_dev_queue_xmit():
    """local_bh_enable -> do_softirq at the end of dev_queue_xmit: an interrupt that
    came while the sender held the core waits for it; after the fragment's transmit
    IP Send hands the core to the handler (enq, the handler's deq), handler and NAPI run
    on IP Send's core, and NAPI hands the core back (enq, IP Send's deq) without giving
    it up between its rounds; do_softirq carries their work, its core lent."""
    recs, path = _shipped_path("hosts.tx.pcie.lanes=4", scale=[("tx:App:ip_push*", 0.0)])
    sms = {sm for _t, _op, sm, _w, _n in recs}
    assert ("tx", "ISR") in sms
    begins = [i for i, r in enumerate(recs) if r[1:4] == ("begin", ("tx", "IP Send"), "do_softirq")]
    assert len(begins) > 10
    polled = 0
    for i in begins:
        t = recs[i][0]
        until = next(j for j in range(i + 2, len(recs)) if recs[j][2] == ("tx", "IP Send"))
        assert recs[i + 1][1:4] == ("enq", ("tx", "IP Send"), "CPU cores")
        assert recs[i + 2][0] == t and recs[i + 2][1:4] == ("deq", ("tx", "ISR"), "CPU cores")
        # Back from NAPI: its enq, then IP Send's deq, no wait in between.
        assert recs[until][1:4] == ("deq", ("tx", "IP Send"), "CPU cores")
        assert recs[until - 1][1:4] == ("enq", ("tx", "NAPI"), "CPU cores")
        inside = [(r[1], r[2][1], r[3]) for r in recs[i + 3 : until - 1] if r[2][0] == "tx"]
        assert ("deq", "NAPI", "CPU cores") not in inside
        assert ("enq", "NAPI", "CPU cores") not in inside
        polled += ("begin", "NAPI", "poll") in inside
    # (An interrupt whose completions an earlier poll took finds nothing to do.)
    assert polled > len(begins) / 2
    softirq = next(m for m in path.most_critical if m["name"] == "tx:IP Send:do_softirq")
    assert softirq["core_lent_share"] == pytest.approx(1.0)
    assert softirq["waiting_share"] == 0.0
    assert path.critical_path_ns == pytest.approx(path.elapsed_ns, rel=1e-9)
    # The modern path has no such state: its interrupts wait for a core of their own.
    modern, _ = _shipped_path(
        "hosts.tx.pcie.lanes=4", "hosts.tx.ip.send_path=modern", "hosts.tx.cpu.irq_preempt=false"
    )
    assert not any(w == "do_softirq" for _t, _op, _sm, w, _n in modern)
    assert not any(op == "run" for _t, op, _sm, _w, _n in modern)


@pytest.mark.parametrize("path", ["2.6.13", "modern"])
@pytest.mark.parametrize("xmit_frame", [0, 3000])
def test_each_2613_fragment_costs_the_driver_a_descriptor_and_a_tail_write(path, xmit_frame):
    """The driver's CPU time for ten 16 KiB datagrams (12 fragments each): with Linux
    2.6.13's path every frame has its own doorbell and ``cpu.cost.xmit_frame`` of
    e1000_xmit_frame's own work; the modern driver batches them and has no such cost."""
    sets = ["workload.bytes=163840", f"hosts.tx.ip.send_path={path}", "sim.duration=1s"]
    cfg = load_scenario(None, sets=[*UDP, *sets, f"cpu.cost.xmit_frame={xmit_frame}"])
    res = simulate(cfg)
    own = cfg.tx.cpu.cost.xmit_frame if path == "2.6.13" else 0.0
    per_frame = (cfg.tx.cpu.cost.descriptor + own) * 1e9 / cfg.tx.cpu.freq
    per_frame += cfg.tx.pcie.mmio_latency
    # The sender receives nothing: its driver time is its transmits'.
    driver = res.cpu_utilization["tx"]["driver"] * res.sim_time_ns
    if path == "2.6.13":
        assert driver == pytest.approx(10 * 12 * per_frame, rel=1e-9)
    else:
        assert driver < 10 * 12 * per_frame * 0.9


def test_a_2613_datagram_that_fits_a_frame_leaves_its_checksum_to_the_nic():
    sets = ["workload.bytes=10000", "workload.message_size=1000B", "sim.duration=1s"]
    cfg = load_scenario(None, sets=[*UDP, *sets, "hosts.tx.ip.send_path=2.6.13"])
    res = simulate(cfg)
    c = cfg.tx.cpu.cost
    copy = 10 * (c.copy + c.copy_per_byte * 1000)
    busy = res.cpu_utilization["tx"]["copy"] * res.sim_time_ns
    assert busy == pytest.approx(copy * 1e9 / cfg.tx.cpu.freq, rel=1e-9)


M5_FETCH = ["hosts.tx.nic.tx_fetch_threshold=0", "hosts.tx.nic.desc_fetch_batch=64"]


@pytest.mark.slow
def test_a_fetch_asked_by_a_plain_call_leaves_its_wait_active_and_on_the_path():
    """nic.tx_fetch_request = call (M5's signalling): no request records, the engine's
    Wait is never a wait record, and a path that reaches a fetch runs back through
    the Wait before it; asked through the queue, the same engine's Wait is waiting
    and off the path."""
    fetch = ("tx", "TX Desc Fetch")
    recs, path = _shipped_path(*M5_FETCH, "hosts.tx.nic.tx_fetch_request=call")
    # (The receiver's NIC, asked through the queue, keeps its own.)
    assert not any(w == "TX fetch request" for _t, _op, sm, w, _n in recs if sm[0] == "tx")
    assert any(sm == fetch and op == "begin" and w == "Wait" for _t, op, sm, w, _n in recs)
    assert path.critical_path_ns == pytest.approx(path.elapsed_ns, rel=1e-9)
    assert path.most_critical[0]["name"] == "tx:TX Desc Fetch:Wait"
    asked_by_queue, queued = _shipped_path(*M5_FETCH)
    assert any(w == "TX fetch request" for _t, _op, sm, w, _n in asked_by_queue if sm[0] == "tx")
    assert queued.critical_path_ns == pytest.approx(queued.elapsed_ns, rel=1e-9)
    assert "tx:TX Desc Fetch:Wait" not in [m["name"] for m in queued.most_critical]


def _writebacks(*sets):
    """The write-back engine's write-backs (descriptors each), the transmit engine's
    packets, and who asked the fetch engine, in a UDP run with the TX descriptor cache."""
    _, _, tracer = _traced(*CACHE, "nic.tx_fetch_threshold=0", "nic.desc_fetch_batch=64", *sets)
    recs = list(_records(tracer))
    wb, nic_tx = ("tx", "TX Desc Writeback"), ("tx", "NIC TX")
    sizes = [n for _t, op, sm, w, n in recs if sm == wb and w == "TX done" and op == "enq"]
    packets = sum(1 for _t, op, sm, w, _n in recs if sm == nic_tx and w == "DMA packet")
    asks = [sm for _t, op, sm, w, _n in recs if w == "TX fetch request" and op == "enq"]
    askers = {sm for sm in asks if sm[0] == "tx"}
    own = any(sm == nic_tx and op == "begin" and w == "writeback" for _t, op, sm, w, _n in recs)
    # With the write-back engine, the cache's entries are the unused ones and the taken
    # ones until their write-back completes: never more than the cache holds.
    level = taken = top = 0
    for _t, op, sm, w, n in recs:
        if sm[0] == "tx" and w == "TX desc cache":
            level += n if op == "enq" else -n if op == "deq" else 0
            taken += n if op == "deq" else 0
        elif sm == wb and w == "TX done" and op == "enq":
            taken -= n
        top = max(top, level + taken)
    assert top <= 64 or not sizes
    return sizes, packets, askers, own


@pytest.mark.parametrize(
    "mode, block", [pytest.param("each", 1, marks=pytest.mark.slow), ("block", 4)]
)
def test_the_write_back_engine_writes_back_while_the_transmit_engine_goes_on(mode, block):
    """nic.tx_writeback = each / block (M5's IGbE with WTHRESH 0 / 1 and GRAN): the
    transmit engine hands each processed descriptor over and writes nothing back
    itself; the write-back engine writes back every one (each) or whole 64-byte blocks
    of 4 (block), and asks the fetch engine after each write-back."""
    sizes, packets, askers, own = _writebacks(f"nic.tx_writeback={mode}")
    assert not own
    assert sizes and all(n % block == 0 for n in sizes)
    # Every processed descriptor is written back but the last block's remainder and
    # the one whose write-back is under way at the end.
    assert packets - block - max(sizes) < sum(sizes) <= packets
    assert ("tx", "TX Desc Writeback") in askers
    # The transmit engine writes a batch back itself by default, and asks alone.
    sizes, _, askers, own = _writebacks()
    assert own and not sizes and askers == {("tx", "NIC TX")}


def test_with_nothing_left_to_send_the_block_write_back_takes_the_remainder():
    # 10 datagrams, one frame each: 10 % 4 descriptors would wait for a block forever;
    # with the ring empty and the cache dry they are due (M5's writeback(0)), so the
    # driver cleans every descriptor.
    sets = ["workload.bytes=10000", "workload.message_size=1000B", "sim.duration=1s"]
    sizes, packets, _, _ = _writebacks("nic.tx_writeback=block", *sets)
    assert packets == 10 and sum(sizes) == 10
    assert any(n % 4 for n in sizes)


@pytest.mark.slow  # a traced run analysed; the engine's own checks below are quick
def test_a_shipped_run_with_the_write_back_engine_keeps_the_identity_invariant():
    _, path = _shipped_path("hosts.tx.nic.tx_writeback=block", *M5_FETCH)
    assert path.critical_path_ns == pytest.approx(path.elapsed_ns, rel=1e-9)
    assert path.most_critical[0]["name"] == "tx:NIC TX:DMA packet"


@pytest.mark.slow
def test_a_preempting_interrupt_takes_the_core_in_the_middle_of_the_senders_work():
    """cpu.irq_preempt: the handler takes the core from the middle of a state of the
    sender's or IP Send's (the state's SM hands it over, as for do_softirq), handler and
    NAPI run on it, NAPI hands it back, and the state goes on: its core lent, the path
    still the whole run, both analyzer engines alike."""
    pre = ("hosts.tx.pcie.lanes=4", "hosts.tx.cpu.irq_preempt=true")
    recs, path = _shipped_path(*pre)
    current = {}  # SM -> (state, since)
    preempted = []
    waiting = False  # the handler waits for a core
    for i, (t, op, sm, what, _n) in enumerate(recs):
        if op == "begin":
            current[sm] = (what, t)
        elif sm == ("tx", "ISR") and op == "wait_empty" and what == "CPU cores":
            waiting = True
        elif sm == ("tx", "ISR") and op == "deq" and what == "CPU cores":
            victim = recs[i - 1]
            if victim[1] == "enq" and victim[2][1] in ("App", "IP Send") and victim[0] == t:
                state, since = current[victim[2]]
                if state != "do_softirq":  # (handed over on leaving dev_queue_xmit)
                    # In its middle, or as it started, to a handler that waited for it.
                    assert since < t or waiting, (t, state)
                    preempted.append((victim[2], state, since < t))
                    back = next(j for j in range(i, len(recs)) if recs[j][2] == victim[2])
                    assert recs[back][1:4] == ("deq", victim[2], "CPU cores")
                    assert recs[back - 1][1:4] == ("enq", ("tx", "NAPI"), "CPU cores")
            waiting = False
    assert len(preempted) > 10
    # In the work the option makes interruptible, never in dev_queue_xmit's.
    assert any(mid for _sm, _state, mid in preempted)
    states = {state for _sm, state, _mid in preempted}
    assert states <= {
        "alloc_skb",
        "do_csum_partial_copy_from_user",
        "ip_fragment",
        "ip_defrag",
        "memcpy",
        "nf_hook",
    }
    lent = {m["name"]: m["core_lent_share"] for m in path.most_critical}
    assert lent["tx:App:do_csum_partial_copy_from_user"] > 0
    assert path.critical_path_ns == pytest.approx(path.elapsed_ns, rel=1e-9)
    _, python = _shipped_path(*pre, engine="python")
    assert python.most_critical == path.most_critical
