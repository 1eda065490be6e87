"""The mechanisms the older seeds' machines need: a slow NIC controller (seed 000's
LANCE), request/response over UDP (seed 000's RPC), receive copies dearer than
send copies and TSO buffers per super-segment (seed 003's Pentium M)."""

from __future__ import annotations

import pytest

from cpasim.config import load_scenario
from cpasim.simulate import simulate

# A quiet machine: 1 GHz, every cost zero unless a test sets it, no interrupt
# moderation, so that one cost or latency moves the round trip by itself alone.
QUIET = {
    "sim.duration": "10ms",
    "sim.warmup": "1ms",
    "cpu.freq": "1GHz",
    "link.rate": "100Mbps",
    "link.delay": "1us",
    "nic.itr": "off",
    "tcp.nagle": "false",
    "tcp.timestamps": "false",
    "tcp.cc": "newreno",
    "tcp.sack": "false",
    **{
        f"cpu.cost.{k}": "0"
        for k in (
            "syscall",
            "copy",
            "copy_per_byte",
            "tx_packet",
            "rx_packet",
            "ack",
            "interrupt",
            "descriptor",
            "context_switch",
            "skb_alloc",
            "skb_free",
            "user",
        )
    },
}


def run(**sets):
    over = {**QUIET, **{k.replace("__", "."): str(v) for k, v in sets.items()}}
    return simulate(load_scenario(None).with_overrides(over, where="test")).to_json()


def rtt(**sets) -> float:
    return run(**sets)["latency_ns"]["mean"]


# -- the controller's latency ------------------------------------------------------------------
def test_controller_latency_adds_to_each_frame_in_its_direction():
    # A 1-byte ping-pong sends one frame each way (the echo carries the ACK): each
    # passes one sending and one receiving controller.
    base = rtt(workload__kind="pingpong", workload__message_size="1B")
    tx = rtt(workload__kind="pingpong", workload__message_size="1B", nic__tx_latency="40us")
    rx = rtt(workload__kind="pingpong", workload__message_size="1B", nic__rx_latency="15us")
    # Within 50 ns: the bus's arbitration shifts with the frames' timing.
    assert tx - base == pytest.approx(2 * 40_000, abs=50.0)
    assert rx - base == pytest.approx(2 * 15_000, abs=50.0)


def test_controller_latency_on_one_host_only():
    base = rtt(workload__kind="pingpong", workload__message_size="1B")
    one = rtt(
        workload__kind="pingpong", workload__message_size="1B", hosts__rx__nic__tx_latency="40us"
    )
    assert one - base == pytest.approx(40_000, abs=50.0)


@pytest.mark.slow
def test_controller_latency_off_costs_no_event():
    base = run(workload__kind="pingpong", workload__message_size="1B")
    on = run(workload__kind="pingpong", workload__message_size="1B", nic__tx_latency="1ns")
    assert on["events"] > base["events"]
    zero = run(workload__kind="pingpong", workload__message_size="1B", nic__tx_latency="0")
    assert zero == {**base, "wall_s": zero["wall_s"]}


# -- RPC over UDP --------------------------------------------------------------------------------
def test_rpc_round_trip_is_two_datagrams_each_way_once():
    r = run(workload__kind="rpc", workload__request_size="1B", workload__response_size="1B")
    calls = r["latency_ns"]["count"]
    assert calls > 100
    # One request frame and one response frame per call (no ACKs: UDP).
    assert abs(r["frames"]["tx_to_rx"] - calls) <= 1
    assert abs(r["frames"]["rx_to_tx"] - calls) <= 1


def test_rpc_response_size_moves_only_the_response():
    small = run(workload__kind="rpc", workload__request_size="1B", workload__response_size="1B")
    big = run(workload__kind="rpc", workload__request_size="1B", workload__response_size="3000B")
    # 3000 B + UDP header fragments into three frames at a 1500 B MTU.
    calls = big["latency_ns"]["count"]
    assert abs(big["frames"]["rx_to_tx"] - 3 * calls) <= 3
    assert abs(big["frames"]["tx_to_rx"] - calls) <= 1
    assert big["latency_ns"]["mean"] > small["latency_ns"]["mean"] + 2 * 120_000


def test_udp_send_cost_is_paid_once_per_datagram_on_each_side():
    base = rtt(workload__kind="rpc", workload__request_size="1B", workload__response_size="1B")
    paid = rtt(
        workload__kind="rpc",
        workload__request_size="1B",
        workload__response_size="1B",
        cpu__cost__udp_send="5000",
    )
    assert paid - base == pytest.approx(2 * 5000.0, abs=50.0)  # 5000 cycles at 1 GHz


def test_rpc_is_deterministic():
    a = run(workload__kind="rpc", workload__request_size="100B", workload__response_size="2000B")
    b = run(workload__kind="rpc", workload__request_size="100B", workload__response_size="2000B")
    assert a["latency_ns"] == b["latency_ns"] and a["events"] == b["events"]


# -- receive copies --------------------------------------------------------------------------------
def test_receive_copy_cost_is_paid_per_byte_read():
    # An RPC of 4000-byte datagrams copies each whole datagram once on the way out
    # and once on the way in, on the critical path (a TCP read would overlap the
    # copy of one segment with the arrival of the next).
    kw = {
        "workload__kind": "rpc",
        "workload__request_size": "4000B",
        "workload__response_size": "4000B",
    }
    base = rtt(**kw)
    dear = rtt(**kw, cpu__cost__copy_recv_per_byte="2")  # the scenario copies for free
    assert dear - base == pytest.approx(2 * 4000 * 2.0, abs=50.0)
    # copy_per_byte is paid by both copies, send and receive.
    both = rtt(**kw, cpu__cost__copy_per_byte="2")
    assert both - base == pytest.approx(2 * 2 * 4000 * 2.0, abs=50.0)


# -- TSO: one buffer per super-segment ---------------------------------------------------------
SENT = 64 * 65536  # bytes written (and read): sixty-four 64 KiB writes


def _buffer_cycles_per_byte_sent(tso: bool) -> float:
    r = run(
        workload__kind="tcp_stream",
        workload__bytes=f"{SENT}B",
        sim__warmup="0",
        nic__tso=str(tso).lower(),
        link__rate="10Gbps",
        cpu__cost__skb_alloc="1000",
    )
    # One core at 1 GHz: a cycle is a nanosecond; measured from t = 0.  NAPI also
    # allocates a buffer for every frame it receives (the ACKs).
    busy = r["cpu_utilization"]["tx"]["buffer"] * r["sim_time_ns"]
    return (busy - 1000 * r["frames"]["rx_to_tx"]) / SENT


@pytest.mark.slow
def test_tso_allocates_one_buffer_per_size_goal():
    # tcp_sendmsg starts a new buffer when the tail one holds size_goal bytes: one
    # MSS (1460 B) without TSO, a super-segment (44 MSS, 64240 B) with it, so a
    # 64 KiB write takes two.
    assert _buffer_cycles_per_byte_sent(False) == pytest.approx(1000 / 1460, rel=0.01)
    assert _buffer_cycles_per_byte_sent(True) == pytest.approx(2 * 1000 / 65536, rel=0.01)
