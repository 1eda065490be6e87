"""``cpasim analyze`` in-process and as the installed command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import cpasim.cli
from cpasim.cli import app

TRACES = Path(__file__).parent / "traces"
STACK = str(TRACES / "stack_driver.jsonl")
CPASIM = Path(sys.executable).parent / "cpasim"

cpasim.cli._register()
runner = CliRunner()


def run(*args):
    return runner.invoke(app, ["analyze", *args])


def test_plain_output_names_the_bottleneck():
    r = run(STACK, "--start", "h:Stack", "--end", "h:Driver")
    assert r.exit_code == 0, r.output
    assert "critical path 18 ns (elapsed 18 ns, ratio 1.0000)" in r.output
    assert "h:Stack:Append hdrs" in r.output
    assert "27.78%" in r.output
    assert "h:Stack->h:Driver[h:pktq]" in r.output
    assert "resource loops: none" in r.output


def test_detail_shows_profile_queues_and_near_critical_names():
    plain = run(STACK, "--start", "h:Stack", "--end", "h:Driver")
    assert "per-SM profile" not in plain.output and "slack" not in plain.output
    r = run(STACK, "--start", "h:Stack", "--end", "h:Driver", "--detail")
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert "near-critical (slack): none competed with the path" in lines
    profile = next(i for i, ln in enumerate(lines) if ln.startswith("per-SM profile (whole"))
    stack = next(ln for ln in lines[profile:] if "h:Stack " in ln)
    # Stack: 11 ns active over 5 entries, its busiest state first.
    assert stack.split("│")[1:5] == [" h:Stack       ", "  11 ns ", "    0 ns ", "       5 "]
    assert "Append hdrs 5 ns, Look up dest 4 ns, Queue pkt 2 ns" in stack
    queues = next(i for i, ln in enumerate(lines) if ln.startswith("queues (whole trace"))
    pktq = next(ln for ln in lines[queues:] if "h:pktq" in ln)
    assert "1 (13 ns)" in pktq and "2 ns / 2 ns" in pktq


def test_detail_lists_names_that_lost_a_race_with_their_slack():
    from cpasim.cli.analyze import _fmt

    args = [str(TRACES / "model_tcp_stream.cpt"), "--start", "tx:App", "--end", "rx:App"]
    slack = json.loads(run(*args, "--json").output)["slack"]
    assert slack
    r = run(*args, "--detail", "--top", "3")
    assert r.exit_code == 0, r.output
    rows = [ln for ln in r.output.splitlines() if ln.startswith("│")]
    for entry in slack[:3]:
        assert any(entry["name"] in ln and _fmt(entry["slack_ns"]) in ln for ln in rows)


def test_json_has_the_contract_fields():
    r = run(STACK, "--start", "h:Stack", "--end", "h:Driver", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    for field in (
        "critical_path_ns",
        "start_ns",
        "end_ns",
        "elapsed_ns",
        "most_critical",
        "loops",
        "warnings",
        "edges",
    ):
        assert field in out
    assert out["critical_path_ns"] == 18
    assert out["edges"][4] == {
        "name": "h:Stack->h:Driver[h:pktq]",
        "cumulative_ns": 13.0,
        "increment_ns": 2.0,
        "waiting": False,
    }


def test_whatif_options():
    r = run(
        STACK,
        "--start",
        "h:Stack",
        "--end",
        "h:Driver",
        "--json",
        "--scale",
        "h:Stack:Look*=0.5",
        "--scale-comm",
        "h:pktq=0",
    )
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["critical_path_ns"] == 14


def test_connections_in_json():
    r = run(str(TRACES / "two_conns.jsonl"), "--start", "tx:App", "--end", "rx:Sink", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert {c: v["critical_path_ns"] for c, v in out["connections"].items()} == {
        "c1": 6.0,
        "c2": 10.0,
    }


def test_dot_graphs(tmp_path):
    for graph in ("high", "global", "sm:h:Driver"):
        dot = tmp_path / f"{graph.replace(':', '_')}.dot"
        r = run(
            STACK, "--start", "h:Stack", "--end", "h:Driver", "--dot", str(dot), "--graph", graph
        )
        assert r.exit_code == 0, r.output
        text = dot.read_text()
        assert text.startswith("digraph cpasim {") and text.rstrip().endswith("}")
    assert '"pktq"' in (tmp_path / "high.dot").read_text()
    # Each state carries its own visits, time and share of the path, once.
    assert "Fill desc\\n1× 4ns\\n22.2% of path" in (tmp_path / "global.dot").read_text()


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--end", "h:Nic"], "no state machine h:Nic; the trace has: h:Driver, h:Stack"),
        (["--end", "h:Driver", "--scale", "h:*=-1"], "must be a finite number >= 0"),
        (["--end", "h:Driver", "--scale", "h:*=fast"], "is not a number"),
        (["--end", "h:Driver", "--scale", "h:*"], "expected PATTERN=VALUE"),
        (["--end", "h:Driver", "--scale", "Stack=2"], "--scale 'Stack' matches no state"),
        (["--end", "h:Driver", "--break", "h:[pkt"], "unclosed"),
        (["--end", "h:Driver", "--capacity", "h:pktq=4"], "must be written +K"),
        (["--end", "h:Driver", "--capacity", "h:pktq=+x"], "is not +K"),
        (["--end", "h:Driver", "--graph", "nice", "--dot", "x.dot"], "expected high, global"),
        (["--end", "h:Driver", "--break", "h:pktq"], "not reachable from start"),
        (["--end", "h:Driver", "--conn", "7"], "no connection '7'"),
        (["--end", "h:Driver", "--dot", "/dev/null", "--graph", "sm:h:Nic"], "no state machine"),
    ],
)
def test_bad_input_is_one_clear_error(args, words):
    r = runner.invoke(app, ["analyze", STACK, "--start", "h:Stack", *args])
    assert r.exit_code != 0
    assert words in str(r.exception) or words in r.output


@pytest.mark.parametrize(
    ("option", "pattern", "words"),
    [
        ("--scale", "h:Stack:Lookup*=0.5", "--scale 'h:Stack:Lookup*' matches no state"),
        ("--scale", "h:Stack:Lookup*=0.5", "closest: h:Stack:Look up dest"),
        ("--scale-comm", "h:pkq=0", "--scale-comm 'h:pkq' matches no queue"),
        ("--break", "h:pkq", "closest: h:pktq"),
        ("--capacity", "h:Pktq=+1", "--capacity 'h:Pktq' matches no queue"),
    ],
)
def test_whatif_pattern_matching_nothing_is_an_error(option, pattern, words):
    r = runner.invoke(
        app, ["analyze", STACK, "--start", "h:Stack", "--end", "h:Driver", option, pattern]
    )
    assert r.exit_code != 0
    assert words in str(r.exception)


def test_trace_names_lists_what_patterns_match():
    r = runner.invoke(app, ["trace", "names", STACK])
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert lines[:2] == ["systems (1)", "  h"]
    for name in ("h:Stack", "h:Driver", "h:Stack:Look up dest", "h:Driver:Fill desc", "h:pktq"):
        assert f"  {name}" in lines
    out = json.loads(runner.invoke(app, ["trace", "names", STACK, "--json"]).output)
    assert out["queues"] == {"h:pktq": 1}
    assert set(out["states"]) == {
        "h:Stack:Append hdrs",
        "h:Stack:Look up dest",
        "h:Stack:Queue pkt",
        "h:Stack:Get pkt",
        "h:Driver:Idle",
        "h:Driver:Fill desc",
        "h:Driver:Notify NIC",
    }


@pytest.mark.slow
def test_installed_command_errors_cleanly():
    ok = subprocess.run(
        [str(CPASIM), "analyze", STACK, "--start", "h:Stack", "--end", "h:Driver", "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["critical_path_ns"] == 18
    bad = subprocess.run(
        [
            str(CPASIM),
            "analyze",
            str(TRACES / "bad_time_backwards.jsonl"),
            "--start",
            "h:A",
            "--end",
            "h:A",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode == 2
    assert bad.stderr.startswith("cpasim: error: ")
    assert "bad_time_backwards.jsonl:3: time goes backwards" in bad.stderr
    assert "Traceback" not in bad.stderr and bad.stderr.count("\n") == 1


def test_analyzer_does_not_import_the_model():
    code = (
        "import sys, cpasim.analysis, cpasim.analysis.dot, cpasim.cli.analyze\n"
        "bad = [m for m in sys.modules if m.startswith(('cpasim.model', 'cpasim.simulate'))]\n"
        "assert not bad, bad\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_lenient_counts_overdraws():
    bad = str(TRACES / "bad_deq_more.jsonl")
    strict = runner.invoke(app, ["analyze", bad, "--start", "h:A", "--end", "h:B"])
    assert strict.exit_code != 0
    assert "record 3: h:B takes 3 units from queue h:x, which holds 2" in str(strict.exception)
    ok = runner.invoke(app, ["analyze", bad, "--start", "h:A", "--end", "h:B", "--lenient"])
    assert ok.exit_code == 0, ok.output
    assert "warnings (1):" in ok.output and "more units than held" in ok.output
