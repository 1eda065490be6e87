"""The verdict: what limits a run, in a user's words, with the change and its gain.

Quick tests build the verdict from made-up critical paths and end states, one per
kind and per side of a window; the slow ones build each case as a user would
(``cpasim run S --explain --json``) and check its kind and its change.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

import cpasim.cli
from cpasim.cli import app
from cpasim.config import load_scenario
from cpasim.predict.runs import PathSummary
from cpasim.stall import Stall
from cpasim.verdict import KINDS, explain, idle_line, saturated

ROOT = Path(__file__).resolve().parent.parent
STREAM = ROOT / "scenarios" / "tcp-stream.toml"
cpasim.cli._register()
runner = CliRunner()

MSS = 1448


def _path(most=(), loops=(), busy=None, conns=("",)):
    return PathSummary(
        dict.fromkeys(conns, 1e6),
        most[0][0] if most else None,
        most[0][1] if most else 0.0,
        [{"name": n, "share": s, "waiting_share": 0.0, "time_ns": 0.0} for n, s in most],
        [{"edge": e, "count": c} for e, c in loops],
        busy or {},
    )


def _end(**kw):
    base = {
        "conn": "c0",
        "flight": 100_000,
        "unsent": 0,
        "cwnd": 400_000,
        "peer_window": 400_000,
        "sndbuf": 131072,
        "sndbuf_free": 0,
        "rcv_unread": 0,
        "rcv_window": 174760,
        "rcvbuf": 174760,
        "timer_ns": 1.1e8,
        "timer": "rto",
        "rto_ns": 2e8,
        "backoff": 0,
        "retransmits": 0,
    }
    return {**base, **kw}


def _result(tx=None, rx=None, drops=None, link=0.1, **kw):
    out = {
        "workload": "tcp_stream",
        "goodput_bps": 1e9,
        "bytes_measured": 10**7,
        "bytes_delivered": 10**7,
        "sim_time_ns": 1.2e8,
        "retransmits": 0,
        "link_utilization": {"tx_to_rx": link, "rx_to_tx": 0.01},
        "io_bus_utilization": {"tx": {"up": 0.1, "down": 0.5}, "rx": {"up": 0.1, "down": 0.1}},
        "cpu_utilization": {"tx": {"idle": 0.6}, "rx": {"idle": 0.9}},
        "end_state": {
            "tcp": {"tx": [tx or _end()], "rx": [rx or _end(flight=0, cwnd=14480)]},
            "drops": drops or {},
            "last_read_ns": 1.19e8,
        },
    }
    out.update(kw)
    return out


@pytest.fixture(scope="module")
def cfg():
    return load_scenario(STREAM, sets=["link.rate=10Gbps"])


PROPAGATION = [("tx:Link:propagate", 0.4), ("rx:Link:propagate", 0.4)]


def test_the_vocabulary_is_documented():
    doc = (ROOT / "docs" / "verdict.md").read_text()
    documented = set(re.findall(r"^\| `(\w+)` ", doc, re.M))
    assert documented == set(KINDS)


def test_a_busy_link_is_the_link(cfg):
    v = explain(cfg, _result(link=0.97))
    assert (v.kind, v.change) == ("link", {"link.rate": "100Gbps"})
    assert "97% busy" in " ".join(v.evidence)


def test_an_idle_run_says_so_and_points_to_explain(cfg):
    r = _result()
    assert explain(cfg, r) is None
    line = idle_line(r)
    assert "no resource is saturated" in line and "--explain" in line


def test_a_busy_bus_or_cpu_without_a_trace(cfg):
    bus = _result(io_bus_utilization={"tx": {"up": 0.1, "down": 0.95}})
    v = saturated(cfg, bus)
    assert (v.kind, v.host, v.change) == ("bus", "tx", {"hosts.tx.pcie.lanes": "4"})
    cpu = _result(cpu_utilization={"tx": {"idle": 0.02}, "rx": {"idle": 0.9}})
    v = saturated(cfg, cpu)
    assert (v.kind, v.change) == ("cpu", {"hosts.tx.cpu.freq": "8GHz"})
    two = cfg.with_overrides({"hosts.tx.cpu.cores": 2})
    assert saturated(two, cpu).change == {"hosts.tx.cpu.cores": "3"}
    # With a trace the CPU is the path's to tell (a core's speed or their number).
    assert saturated(cfg, cpu, cpu=False) is None


def test_a_send_buffer_loop_changes_only_the_senders_buffer(cfg):
    path = _path(PROPAGATION, [("tx:IP Recv->tx:App[tx:Send buffer]", 120)])
    v = explain(cfg, _result(), path)
    assert v.kind == "window" and v.host == "tx"
    assert "send buffer" in v.resource and "tcp.wmem" in v.resource
    # 4 x (10 Gb/s x 700 us / 8) = 3.5 MB -> 4 MiB, on the sender only.
    assert v.change == {"hosts.tx.tcp.wmem": "4MiB"}
    assert "120 times" in " ".join(v.evidence)
    assert "propagation" not in v.resource


def test_a_full_send_buffer_of_unsent_data_is_the_transmit_paths(cfg):
    """The writer waits for space, but the space holds data not yet sent: the ring."""
    path = _path(
        PROPAGATION,
        [
            ("tx:IP Recv->tx:App[tx:Send buffer]", 120),
            ("tx:NAPI->tx:Driver TX[tx:TX free desc]", 90),
        ],
    )
    v = explain(cfg, _result(tx=_end(unsent=2_000_000, flight=300_000)), path)
    assert (v.kind, v.change) == ("tx_ring", {"hosts.tx.nic.tx_ring": "512"})


def test_the_peers_receive_window_changes_only_the_receiver(cfg):
    path = _path(PROPAGATION, [("tx:IP Recv->tx:TcpSend[tx:Send window]", 181)])
    tx = _end(cwnd=165_000, peer_window=80_482, flight=79_640)
    v = explain(cfg, _result(tx=tx), path)
    assert v.kind == "window" and v.host == "rx"
    assert v.resource.startswith("the receive window host rx offers")
    assert set(v.change) == {"hosts.rx.tcp.rmem"}
    # Linux's rules: the request, and net.core.rmem_max where it would clamp it.
    linux = cfg.with_overrides(
        {"tcp.wmem": 0, "tcp.rmem": 0, "hosts.rx.tcp.rcvbuf": "64KiB"}
    ).with_overrides({"hosts.rx.tcp.core_rmem_max": "1MiB"})
    v = explain(linux, _result(tx=tx), path)
    assert v.change == {"hosts.rx.tcp.rcvbuf": "4MiB", "hosts.rx.tcp.core_rmem_max": "4MiB"}
    assert not any(k.startswith("hosts.tx") or "wmem" in k or "sndbuf" in k for k in v.change)


def test_a_reader_behind_is_the_readers_limit(cfg):
    path = _path(
        [*PROPAGATION, ("rx:App:TcpRecvMsg: copy", 0.15)],
        [("tx:IP Recv->tx:TcpSend[tx:Send window]", 50)],
    )
    tx = _end(cwnd=400_000, peer_window=20_000, flight=20_000)
    rx = _end(flight=0, rcv_unread=150_000, rcvbuf=174_760)
    v = explain(cfg, _result(tx=tx, rx=rx), path)
    assert (v.kind, v.host) == ("cpu", "rx")
    assert v.change == {"hosts.rx.cpu.freq": "32GHz"}
    assert "unread" in " ".join(v.evidence)


def test_a_window_kept_small_by_losses_is_loss(cfg):
    lossy = cfg.with_overrides({"link.loss": 0.01})
    path = _path(PROPAGATION, [("tx:IP Recv->tx:TcpSend[tx:Send window]", 157)])
    tx = _end(cwnd=28_236, peer_window=173_313, flight=27_512, retransmits=19)
    r = _result(tx=tx, drops={"link": {"link_loss": 34}}, retransmits=19)
    v = explain(lossy, r, path)
    assert v.kind == "loss"
    assert "link.loss = 0.01" in v.resource
    assert v.change == {"link.loss": "0.0"}
    assert "tcp.cc=bbr" in v.note
    # Drops at a router's full queue: a deeper queue.
    box = cfg.with_overrides({"bottleneck.rate": "50Mbps"})
    r = _result(tx=tx, drops={"path": {"bottleneck_queue_full": 30}}, retransmits=30)
    v = explain(box, r, path)
    assert (v.kind, v.change) == ("loss", {"bottleneck.queue": "300kB"})
    assert "router" in v.resource


def test_a_congestion_window_without_loss_is_still_opening(cfg):
    path = _path(PROPAGATION, [("tx:IP Recv->tx:TcpSend[tx:Send window]", 9)])
    v = explain(cfg, _result(tx=_end(cwnd=30_000, peer_window=400_000, flight=29_000)), path)
    assert v.kind == "window" and "congestion window" in v.resource
    assert not v.change and "sim.duration" in v.note


def test_propagation_is_never_the_answer_by_itself(cfg):
    """A path of propagation with no loop names no window: the verdict does not say
    'propagation', it says it found no resource a parameter sizes."""
    v = explain(cfg, _result(), _path(PROPAGATION))
    assert v.kind == "app"
    assert "propagat" not in v.resource


#: A prediction's replayed path (a larger send buffer at 1 Gb/s, 1 ms each way): the
#: round trips and the ACKs' interrupt moderation, the wire 2% of it.
REPLAYED = [
    ("tx:Link:propagate", 0.40),
    ("rx:Link:propagate", 0.33),
    ("tx:IRQ Coalesce Timer:countdown", 0.24),
    ("tx:MAC:transmit", 0.02),
]


def test_a_sliver_of_serialization_names_no_link(cfg):
    """The link is named from its serialization only when that is a tenth of the path
    or more: a replayed path of round trips is the round trip's, the interrupt
    moderation on it named; a run's own path without a resource stays the
    application's."""
    v = explain(cfg, _result(), _path(REPLAYED), fallback=False, replayed=True)
    assert v.kind == "link" and "round trip over the link (350 us each way)" in v.resource
    assert v.change == {"link.delay": "175us"}
    assert any("interrupt moderation" in e and "24%" in e for e in v.evidence)
    assert not any("putting frames on the wire" in e for e in v.evidence)
    assert explain(cfg, _result(), _path(REPLAYED)).kind == "app"
    assert explain(cfg, _result(), _path(REPLAYED), fallback=False) is None
    wire = [("tx:Link:propagate", 0.5), ("tx:MAC:transmit", 0.12)]
    v = explain(cfg, _result(), _path(wire), fallback=False)
    assert v.kind == "link" and v.resource.startswith("the link (")


def test_request_response_waits_for_the_round_trip(cfg):
    ping = cfg.with_overrides({"workload.kind": "pingpong"})
    r = _result(workload="pingpong")
    v = explain(ping, r, _path([("tx:Link:propagate", 0.36), ("rx:Link:propagate", 0.35)]))
    assert v.kind == "link" and "round trip" in v.resource
    assert v.change == {"link.delay": "175us"}


def test_bus_cores_and_rings_from_the_path(cfg):
    v = explain(cfg, _result(), _path([("tx:NIC TX:DMA packet", 0.6)]))
    assert (v.kind, v.change) == ("bus", {"hosts.tx.pcie.lanes": "4"})
    bound = _path([("tx:App:TcpSendMsg: copy", 0.5)], busy={"tx:CPU cores": 2e6})
    bound = PathSummary(bound.critical_path_ns, "tx:CPU cores", 1.0, [], [], {"tx:CPU cores": 2e6})
    v = explain(cfg, _result(), bound)
    assert (v.kind, v.change) == ("cores", {"hosts.tx.cpu.cores": "2"})
    assert "whole measured run" in v.evidence[0]
    q = _path(PROPAGATION, [("tx:IP Recv->tx:Driver TX[tx:qdisc]", 40)])
    assert explain(cfg, _result(), q).change == {"hosts.tx.qdisc.len": "2000"}


def test_a_stalled_run_names_its_drops_and_its_timer(cfg):
    r = _result(
        tx=_end(flight=184_000, timer_ns=204.2e6, unsent=10**6),
        drops={"rx": {"rx_fifo": 5}},
        bytes_measured=0,
        goodput_bps=0.0,
    )
    r["end_state"]["last_read_ns"] = 4e6
    stall = Stall.of(cfg, r)
    assert stall.kind == "timeout" and stall.host == "tx"
    text = stall.sentence
    assert "5 frames dropped at host rx: its NIC's receive FIFO was full" in text
    assert "fires at 204.2 ms, after the run ended" in text
    v = explain(cfg, r)
    assert (v.kind, v.change) == ("timeout", {"hosts.rx.nic.rx_fifo": "192KiB"})
    assert v.stalled and v.predicted is None


def test_a_run_that_stopped_delivering_is_stalled_too(cfg):
    r = _result(tx=_end(flight=0, unsent=500_000, peer_window=0))
    r["end_state"]["last_read_ns"] = 5e7  # silent for the last 70 of 100 ms measured
    stall = Stall.of(cfg, r)
    assert stall.kind == "window" and "stopped delivering at 50 ms" in stall.what
    assert Stall.of(cfg, _result()) is None


def test_the_stalled_tso_run_is_not_a_silent_zero():
    """Issue: 100 Gb/s with TSO and Linux's buffers read 'goodput 0 b/s' and nothing
    more.  Now the summary says why, and the JSON carries the stall."""
    sets = ["link.rate=100Gbps", "tcp.wmem=0", "tcp.rmem=0", "nic.tso=true"]
    args = ["run", str(STREAM), "--no-progress", *(x for s in sets for x in ("--set", s))]
    out = runner.invoke(app, args)
    assert out.exit_code == 0, out.output
    assert "limited by   host tx's retransmission timer  [timeout]" in out.output
    assert "dropped at host rx: its NIC's receive FIFO was full" in out.output
    assert "change     hosts.rx.nic.rx_fifo=192KiB" in out.output
    data = json.loads(runner.invoke(app, [*args, "--json"]).output)
    assert data["stall"]["kind"] == "timeout"
    assert any("retransmission timer fires at" in w for w in data["warnings"])


# -- each case as a user builds it ------------------------------------------------------
#: (scenario, --set, kind, host, the keys the change names)
CASES = {
    "link": ("tcp-stream", [], "link", "", {"link.rate"}),
    "window": ("tcp-stream", ["link.rate=10Gbps"], "window", "tx", {"hosts.tx.tcp.wmem"}),
    "bus": (
        "tcp-stream",
        ["link.rate=10Gbps", "tcp.wmem=4MiB", "tcp.rmem=4MiB"],
        "bus",
        "tx",
        {"hosts.tx.pcie.lanes"},
    ),
    "cores": (
        "tcp-stream",
        ["link.rate=10Gbps", "tcp.wmem=4MiB", "tcp.rmem=4MiB", "hosts.tx.pcie.lanes=4"],
        "cores",
        "tx",
        {"hosts.tx.cpu.cores"},
    ),
    "bottleneck": ("tcp-stream", ["bottleneck.rate=50Mbps"], "bottleneck", "", None),
    "receive window": (
        "tcp-stream",
        ["link.rate=10Gbps", "tcp.wmem=0", "tcp.rmem=0", "hosts.rx.tcp.rcvbuf=64KiB"],
        "window",
        "rx",
        {"hosts.rx.tcp.rcvbuf"},
    ),
    "udp": ("udp-stream", [], "bus", "tx", {"hosts.tx.pcie.lanes"}),
    "copy engine": ("rx-copy-engine", [], "cores", "rx", {"hosts.rx.cpu.cores"}),
    "tx ring": (
        "tcp-stream",
        ["link.rate=10Gbps", "tcp.wmem=4MiB", "tcp.rmem=4MiB", "hosts.tx.nic.tx_ring=4"],
        "tx_ring",
        "tx",
        {"hosts.tx.nic.tx_ring"},
    ),
    "lossy link": ("tcp-stream", ["link.loss=0.01"], "loss", "tx", {"link.loss"}),
    "stalled tso": (
        "tcp-stream",
        ["link.rate=100Gbps", "tcp.wmem=0", "tcp.rmem=0", "nic.tso=true"],
        "timeout",
        "tx",
        {"hosts.rx.nic.rx_fifo"},
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
def test_explain_names_the_limit_a_user_would_find(case):
    scenario, sets, kind, host, keys = CASES[case]
    args = ["run", str(ROOT / "scenarios" / f"{scenario}.toml"), "--explain", "--json"]
    args += [x for s in sets for x in ("--set", s)]
    out = runner.invoke(app, [*args, "--no-progress"])
    assert out.exit_code == 0, out.output
    v = json.loads(out.output)["verdict"]
    assert (v["kind"], v["host"]) == (kind, host), v
    if keys is not None:
        assert set(v["change"]) == keys, v
    assert v["summary"].startswith("limited by ") and "propagat" not in v["summary"]
    if v["predicted"] is not None:  # a change predicted from the trace
        assert v["predicted"]["value"] > v["predicted"]["baseline"] > 0
    if case in LADDER_NEXT:  # the ladder's next rung, as the prediction sees it
        assert v["next_kind"] == LADDER_NEXT[case], v


#: The seed's ladder (figure 6.2): each rung's change predicts the next rung's limit.
LADDER_NEXT = {"link": "window", "window": "bus", "bus": "cores", "cores": "cpu"}


@pytest.mark.slow
def test_an_explained_run_folder_reports_its_verdict(tmp_path):
    """``run --explain --out DIR``: result.json and report.html carry the verdict."""
    out = tmp_path / "run"
    args = ["run", str(STREAM), "--explain", "--out", str(out), "--no-progress"]
    res = runner.invoke(app, [*args, "--set", "link.rate=10Gbps"])
    assert res.exit_code == 0, res.output
    verdict = json.loads((out / "result.json").read_text())["verdict"]
    assert verdict["kind"] == "window"
    page = (out / "report.html").read_text()
    assert verdict["summary"].replace("'", "&#x27;") in page
    assert not any(out.glob("*.cpt"))  # the trace --explain needed was a temporary one
