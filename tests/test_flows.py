"""[[flows]]: flows that differ in one scenario (cpasim.config.flow_tables, cpasim.model.flows).

Loading, refusals, the digest and what a run of several kinds of flow reports: each
flow's goodput, retransmissions and round trips, the aggregate and Jain's index, the
per-flow series columns and the ICMP echoes of the capture.  Quick: every run here
simulates a few milliseconds of a fast link.
"""

from __future__ import annotations

import json
from pathlib import Path

import dpkt
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from inprocess import cli

from cpasim.config import load_scenario
from cpasim.errors import CpasimError
from cpasim.model.flows import jain, percentiles
from cpasim.simulate import simulate

ROOT = Path(__file__).resolve().parent.parent
TCP = ROOT / "scenarios" / "tcp-stream.toml"
SHORT = ("--set", "sim.duration=6ms", "--set", "sim.warmup=1ms")

#: A short mix on a fast link: two bulk flows of different congestion control, a
#: ping and an RPC flow, through a 100 Mb/s bottleneck.
MIX = """
[sim]
duration = "12ms"
warmup = "2ms"

[link]
rate = "1Gbps"
delay = "100us"

[bottleneck]
rate = "100Mbps"
queue = "30kB"

[[flows]]
tcp.cc = "cubic"

[[flows]]
tcp.cc = "bbr"
start = "1ms"

[[flows]]
kind = "ping"
workload.interval = "500us"

[[flows]]
kind = "rpc"
workload.request_size = "100B"
workload.response_size = "2kB"
workload.think_time = "200us"
"""


def scenario(tmp_path: Path, text: str, name: str = "s.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def mix(tmp_path_factory):
    path = scenario(tmp_path_factory.mktemp("mix"), MIX)
    cfg = load_scenario(path)
    return cfg, simulate(cfg).to_json()


# --- the scenario --------------------------------------------------------------------------


def test_tables_become_flows_with_their_own_keys(tmp_path):
    cfg = load_scenario(scenario(tmp_path, MIX))
    assert [g.kind for g in cfg.flows] == ["bulk", "bulk", "ping", "rpc"]
    assert cfg.flow_count == 4
    assert cfg.flow_config(0).tx.tcp.cc == "cubic" and cfg.flow_config(1).tx.tcp.cc == "bbr"
    assert cfg.flows[1].start == 1e6 and cfg.flows[2].interval == 500e3
    assert cfg.flow_config(3).workload.response_size == 2000
    # The scenario's own keys stay as they are; one table's are its flows' only.
    assert cfg.tx.tcp.cc == "cubic" and cfg.value("flows.1.tcp.cc") == "bbr"


def test_a_scenario_without_flows_keeps_its_digest_and_a_table_changes_it(tmp_path):
    plain = load_scenario(TCP)
    assert plain.digest == "efea8a37fb089d3f"  # as main gives it, without [[flows]]
    with_flow = load_scenario(scenario(tmp_path, TCP.read_text() + "\n[[flows]]\n"))
    assert with_flow.digest != plain.digest
    again = load_scenario(scenario(tmp_path, with_flow.to_toml(), "again.toml"))
    assert again.digest == with_flow.digest and again.flows == with_flow.flows


def test_to_toml_writes_the_tables_back(tmp_path):
    cfg = load_scenario(scenario(tmp_path, MIX))
    back = load_scenario(scenario(tmp_path, cfg.to_toml(), "back.toml"))
    assert back.digest == cfg.digest


def test_set_changes_one_table(tmp_path):
    path = scenario(tmp_path, MIX)
    cfg = load_scenario(path, sets=["flows.1.tcp.cc=cubic", "flows.0.count=3"])
    assert cfg.flow_config(1).tx.tcp.cc == "cubic" and cfg.flow_count == 6
    base = load_scenario(path)
    changed = base.with_overrides({"flows.1.tcp.cc": "reno"})
    assert set(base.changes(changed)) == {
        "flows.1.hosts.tx.tcp.cc",
        "flows.1.hosts.rx.tcp.cc",
    }


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        ('link.rate = "1Gbps"', "flows[0]: link.rate is not a per-flow key"),
        ("count = 0", "flows[0]: count = 0 is out of range"),
        ('kind = "ping"\nworkload.interval = "0s"', "flows[0]: workload.interval = '0s'"),
        ('start = "3s"', "flows[0]: start (3s) is not before the end of the run"),
        ('kind = "ping"\ntcp.cc = "bbr"', "flows[0]: tcp.cc does nothing for a flow of kind"),
        ("tcp.colour = 1", "flows[0]: unknown key 'tcp.colour'"),
        ('kind = "video"', "flows[0]: kind = 'video': expected one of bulk, ping, rpc"),
        ('workload.think_time = "1ms"', "workload.think_time does nothing for a flow of kind"),
        ('kind = "ping"\nworkload.ping_size = "1500B"', "exceed link.mtu (1500 B)"),
    ],
)
def test_bad_tables_are_refused_in_one_line(tmp_path, table, expected):
    path = scenario(tmp_path, f'[sim]\nduration = "2s"\n\n[[flows]]\n{table}\n')
    code, _, err = cli("run", str(path))
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("cpasim: error: ") and expected in lines[0], lines[0]


def test_flows_refuse_what_they_replace(tmp_path):
    text = "[[flows]]\n"
    with pytest.raises(CpasimError, match="workload.connections .3. cannot be used"):
        load_scenario(scenario(tmp_path, "[workload]\nconnections = 3\n" + text))
    with pytest.raises(CpasimError, match='needs workload.kind = "tcp_stream"'):
        load_scenario(scenario(tmp_path, '[workload]\nkind = "pingpong"\n' + text))
    with pytest.raises(CpasimError, match="no table 2 in the scenario; it has 1"):
        load_scenario(scenario(tmp_path, text), sets=["flows.2.tcp.cc=bbr"])
    with pytest.raises(CpasimError, match=r"it has no \[\[flows\]\] tables"):
        load_scenario(TCP, sets=["flows.0.tcp.cc=bbr"])
    with pytest.raises(CpasimError, match=r"written as \[\[flows\]\] tables"):
        load_scenario(scenario(tmp_path, "[flows]\ncount = 2\n"))


# --- one run of four kinds -----------------------------------------------------------------


def test_one_bulk_flow_is_the_plain_stream(tmp_path):
    """A scenario with one [[flows]] table of defaults runs exactly as without it."""
    sets = ["sim.duration=6ms", "sim.warmup=1ms"]
    plain = simulate(load_scenario(TCP, sets=sets)).to_json()
    flows = simulate(
        load_scenario(scenario(tmp_path, TCP.read_text() + "\n[[flows]]\n"), sets=sets)
    ).to_json()
    for key in ("goodput_bps", "events", "frames", "retransmits", "cpu_utilization"):
        assert flows[key] == plain[key], key
    assert flows["flows"][0]["goodput_bps"] == plain["goodput_bps"]
    assert "flows" not in plain and "retransmit_causes" not in plain


def test_each_flow_reports_its_kind_and_figures(mix):
    cfg, out = mix
    entries = out["flows"]
    assert [(e["index"], e["kind"], e["cc"]) for e in entries] == [
        (0, "bulk", "cubic"),
        (1, "bulk", "bbr"),
        (2, "ping", None),
        (3, "rpc", "cubic"),
    ]
    for e in entries[:2]:
        assert e["goodput_bps"] > 0 and e["rtt_ns"]["count"] > 0
        assert e["rtt_ns"]["p50"] <= e["rtt_ns"]["p90"] <= e["rtt_ns"]["p99"]
        assert set(e["srtt_ns"]) == {"p50", "p90", "p99", "count"}
    ping, rpc = entries[2], entries[3]
    # An echo crosses the link twice: at least two propagation delays.
    assert ping["latency_ns"]["count"] > 5 and ping["latency_ns"]["p50"] > 2 * cfg.link.delay
    assert ping["goodput_bps"] == 0 and ping["rtt_ns"] is None
    assert rpc["latency_ns"]["count"] > 0 and rpc["goodput_bps"] > 0
    agg = out["flows_aggregate"]
    assert agg["goodput_bps"] == pytest.approx(sum(e["goodput_bps"] for e in entries))
    assert agg["goodput_bps"] == pytest.approx(out["goodput_bps"])
    assert agg["bulk_flows"] == 2
    assert agg["jain_index"] == pytest.approx(jain([e["goodput_bps"] for e in entries[:2]]))
    # The ping is no path of the run's own analysis, the others are.
    assert out["analysis_conns"] == ["c0", "c1", "c3"]


def test_every_retransmission_has_a_cause(mix):
    _, out = mix
    causes = out.get("retransmit_causes") or {}
    assert sum(causes.values()) == out["retransmits"]
    assert out["retransmits"] == sum(e["retransmits"] for e in out["flows"])
    drops = out["drops"]["bottleneck_queue_full"]
    assert causes.get("bottleneck_queue_full", 0) <= drops


def test_a_start_delays_the_flow(tmp_path):
    text = MIX.replace('start = "1ms"', 'start = "9ms"')
    out = simulate(load_scenario(scenario(tmp_path, text))).to_json()
    late, early = out["flows"][1], out["flows"][0]
    assert late["start_ns"] == 9e6
    assert 0 < late["bytes_measured"] < early["bytes_measured"]


def test_sized_flows_end_the_run_and_report_their_completion(tmp_path):
    text = """
[link]
rate = "1Gbps"
delay = "50us"

[[flows]]
count = 2
workload.bytes = "200kB"

[[flows]]
kind = "ping"
workload.interval = "100us"
"""
    out = simulate(load_scenario(scenario(tmp_path, text), sets=["sim.warmup=0s"])).to_json()
    done = [e["completion_ns"] for e in out["flows"][:2]]
    assert all(d is not None for d in done)
    assert out["sim_time_ns"] == max(done)
    assert out["bytes_delivered"] == 400_000
    assert "transfer" not in out


def test_summary_lists_the_flows(tmp_path):
    code, out, err = cli("run", str(scenario(tmp_path, MIX)))
    assert code == 0, err
    assert "workload     4 flows: 2 bulk, 1 ping, 1 rpc" in out
    assert "fairness     Jain's index" in out
    lines = [line for line in out.splitlines() if line.startswith("  flow ")]
    assert len(lines) == 4 and "bulk bbr" in lines[1] and "ping" in lines[2]
    assert "(bottleneck_queue_full" in out or "retransmits  0" in out


def test_many_flows_are_summarised_per_table(tmp_path):
    text = MIX.replace('[[flows]]\ntcp.cc = "cubic"', '[[flows]]\ncount = 10\ntcp.cc = "cubic"')
    code, out, err = cli("run", str(scenario(tmp_path, text)), "--set", "sim.duration=4ms")
    assert code == 0, err
    assert "  flows 0-9  bulk cubic" in out and "Jain's index" in out
    assert "  flows 10   bulk bbr" in out and "  flows 11   ping" in out


def test_many_connections_show_their_spread_not_each():
    code, out, err = cli("run", str(TCP), "--set", "workload.connections=9", *SHORT)
    assert code == 0, err
    line = next(x for x in out.splitlines() if x.startswith("  per conn"))
    assert "min " in line and "median " in line and "9 connections, Jain's index" in line
    code, out, _ = cli("run", str(TCP), "--set", "workload.connections=3", *SHORT)
    line = next(x for x in out.splitlines() if x.startswith("  per conn"))
    assert line.split()[2::3] == ["c0", "c1", "c2"]


def test_the_series_has_each_flows_columns(tmp_path):
    cfg = load_scenario(scenario(tmp_path, MIX))
    r = simulate(cfg, series=1e6)
    names = r.series.names
    assert {"c0.goodput_bps", "c1.goodput_bps", "c3.goodput_bps"} <= set(names)
    assert {"c2.latency_ns", "c3.latency_ns"} <= set(names) and "c2.goodput_bps" not in names
    assert {"tx.c0.cwnd_bytes", "tx.c1.srtt_ns"} <= set(names)
    rows = r.series.rows
    i = names.index("c2.latency_ns")
    assert any(row[i] == row[i] and row[i] > 2 * cfg.link.delay for row in rows)


def test_the_capture_holds_every_flow(tmp_path):
    from cpasim.pcap_spec import PcapSpec

    cfg = load_scenario(scenario(tmp_path, MIX))
    pcap = tmp_path / "mix.pcap"
    simulate(cfg, pcap=PcapSpec(pcap))
    kinds = {}
    with pcap.open("rb") as f:
        for _, buf in dpkt.pcap.Reader(f):
            l4 = dpkt.ethernet.Ethernet(buf).data.data
            if isinstance(l4, dpkt.icmp.ICMP):
                key = ("icmp", l4.type)
            else:
                key = ("tcp", max(l4.sport, l4.dport))
            kinds[key] = kinds.get(key, 0) + 1
    assert kinds[("icmp", 8)] > 5 and kinds[("icmp", 0)] > 5
    assert {("tcp", 40000), ("tcp", 40001), ("tcp", 40003)} <= set(kinds)


def test_percentiles_and_jain():
    assert percentiles([]) is None
    q = percentiles([1.0, 2.0, 3.0, 4.0], mean=True)
    assert q["mean"] == 2.5 and q["p50"] == 2.5 and q["count"] == 4
    assert jain([5, 5, 5]) == pytest.approx(1.0)
    assert jain([1, 0, 0, 0]) == pytest.approx(0.25)
    assert jain([]) is None and jain([0, 0]) is None


# Round trips in ns: integers (ties), and floats from sub-microsecond to seconds.
SAMPLES = st.lists(
    st.one_of(st.integers(0, 10**10), st.floats(1e-3, 1e10, allow_nan=False)),
    min_size=1,
    max_size=120,
)


@settings(max_examples=80, deadline=None)
@given(SAMPLES)
def test_percentiles_are_numpys_bit_for_bit(samples):
    a = np.asarray(samples, dtype=float)
    p50, p90, p99 = np.percentile(a, (50, 90, 99))
    want = {"mean": a.mean(), "p50": p50, "p90": p90, "p99": p99, "count": len(samples)}
    got = percentiles(samples, mean=True)
    assert list(got) == list(want)
    assert [float(v).hex() for v in got.values()] == [float(v).hex() for v in want.values()]


def test_run_json_has_the_flows(tmp_path):
    code, out, err = cli("run", str(scenario(tmp_path, MIX)), "--json")
    assert code == 0, err
    data = json.loads(out)
    assert len(data["flows"]) == 4 and "jain_index" in data["flows_aggregate"]


# --- each flow's verdict ---------------------------------------------------------------------

#: CUBIC beside BBR and a ping through a saturated 50 Mb/s bottleneck: what a run of
#: it reports (the figures are of tests/test_flows_analysis.py's one-second mix), and
#: each flow's path, led by the router's serialization as when flows share it.
VERDICT_MIX = ROOT / "scenarios" / "flows-mix.toml"


def _mix_result(cubic_bps: float, bbr_bps: float) -> dict:
    sender = {"flight": 49_000, "unsent": 900_000, "peer_window": 1_280_000, "rcvbuf": 0}
    return {
        "workload": "tcp_stream",
        "sim_time_ns": 1e9,
        "goodput_bps": cubic_bps + bbr_bps,
        "bytes_measured": 1,
        "retransmits": 206,
        "bottleneck_utilization": {"tx_to_rx": 0.998},
        "link_utilization": {"tx_to_rx": 0.05, "rx_to_tx": 0.002},
        "flows_aggregate": {"bulk_flows": 2, "bulk_goodput_bps": cubic_bps + bbr_bps},
        "end_state": {
            "tcp": {
                "tx": [
                    {**sender, "conn": "c0", "cwnd": 49_000, "retransmits": 75},
                    {**sender, "conn": "c1", "cwnd": 190_000, "retransmits": 131},
                ]
            },
            "drops": {"path": {"bottleneck_queue_full": 206}},
        },
        "flows": [
            {"index": 0, "table": 0, "kind": "bulk", "cc": "cubic", "goodput_bps": cubic_bps,
             "bytes_measured": 1, "retransmits": 75,
             "retransmit_causes": {"bottleneck_queue_full": 75}},
            {"index": 1, "table": 1, "kind": "bulk", "cc": "bbr", "goodput_bps": bbr_bps,
             "bytes_measured": 1, "retransmits": 131,
             "retransmit_causes": {"bottleneck_queue_full": 131}},
            {"index": 2, "table": 2, "kind": "ping", "cc": None, "goodput_bps": 0.0,
             "bytes_measured": 0, "retransmits": 0,
             "latency_ns": {"p50": 34.5e6, "p90": 38e6, "p99": 40e6, "count": 67}},
        ],
    }  # fmt: skip


def _shared_path():
    from cpasim.predict.runs import PathSummary

    return PathSummary(
        critical_path_ns={"c0": 1e9},
        bottleneck="path:Bottleneck:serialize",
        share=0.85,
        most_critical=[
            {"name": "path:Bottleneck:serialize", "share": 0.85},
            {"name": "tx:Link:propagate", "share": 0.04},
        ],
        loops=[],
    )


def test_each_flow_gets_its_own_verdict():
    from cpasim.verdict import explain_flow, flow_lines, flows_sentence

    cfg = load_scenario(VERDICT_MIX)
    result = _mix_result(15.3e6, 32.5e6)
    pairs = [(f, explain_flow(cfg, result, f, _shared_path())) for f in result["flows"]]
    assert [v.kind for _, v in pairs] == ["loss", "bottleneck", "bottleneck"]
    assert flows_sentence(pairs) == (
        "flow 0 (cubic) limited by loss; flow 1 (bbr) by the bottleneck; "
        "flow 2 (ping) by the bottleneck"
    )
    cubic, bbr, ping = (v for _, v in pairs)
    # Why CUBIC and not BBR: its share of the router both fill, first; its own losses.
    assert cubic.evidence[0].startswith("15.3 Mb/s: 64% of an equal share (23.9 Mb/s)")
    assert "75 retransmissions" in cubic.evidence
    assert cubic.change == {"bottleneck.queue": "250kB"}
    # The ping waits behind the bulk flows in the router's queue: a shorter one helps it.
    assert ping.evidence[0].startswith("its round trip p50 34.5 ms, 20 ms of it propagation")
    assert ping.change == {"bottleneck.queue": "62500B"}
    lines = flow_lines(pairs)
    assert lines[0].startswith("flows        flow 0 (cubic) limited by loss")
    assert flow_lines([]) == []


def test_flows_at_an_equal_share_are_the_bottlenecks():
    from cpasim.verdict import explain_flow

    cfg = load_scenario(VERDICT_MIX)
    result = _mix_result(23e6, 24.8e6)
    kinds = [explain_flow(cfg, result, f, _shared_path()).kind for f in result["flows"][:2]]
    assert kinds == ["bottleneck", "bottleneck"]


def test_a_flows_own_buffer_is_its_tables_key():
    from cpasim.verdict import Verdict, _flow_keys

    cfg = load_scenario(VERDICT_MIX)
    v = Verdict("window", "x", change={"hosts.tx.tcp.wmem": "4MiB", "bottleneck.rate": "1Gbps"})
    flow = {"index": 1, "table": 1}
    assert _flow_keys(v, cfg, flow).change == {
        "flows.1.hosts.tx.tcp.wmem": "4MiB",
        "bottleneck.rate": "1Gbps",
    }


def test_the_flows_command_gives_each_flows_path(tmp_path):
    """A traced run of one bulk flow: ``cpasim flows`` gives its critical path."""
    path = scenario(tmp_path, '[sim]\nduration = "6ms"\nwarmup = "1ms"\n\n[[flows]]\n')
    trace = tmp_path / "t.cpt"
    code, _, err = cli("run", str(path), "--trace", str(trace))
    assert code == 0, err
    code, out, err = cli("flows", str(trace), "--json")
    assert code == 0, err
    (flow,) = json.loads(out)["flows"]
    assert (flow["index"], flow["kind"]) == (0, "bulk")
    assert 0 < flow["critical_path_ns"] <= 6e6
