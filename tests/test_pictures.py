"""Pictures of a trace: Graphviz graphs that render and read, and the timeline."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

import cpasim
from cpasim.analysis.dot import to_dot

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"


@pytest.fixture(scope="module")
def stream(tmp_path_factory):
    """A short traced 10 Gb/s stream: hundreds of per-frame ``Link#k`` instances."""
    path = tmp_path_factory.mktemp("trace") / "t.cpt"
    cpasim.run(
        SCENARIOS / "tcp-stream.toml",
        trace=path,
        **{"sim.duration": "10ms", "sim.warmup": "1ms"},
    )
    return path, cpasim.analyze(path)


def _dot() -> str:
    dot = shutil.which("dot")
    assert dot, "Graphviz `dot` is needed to check the graphs render (.ci/run installs it)"
    return dot


def _nodes(text: str) -> list[str]:
    return re.findall(r"^\s+(\w+) \[label=", text, flags=re.M)


@pytest.mark.parametrize("graph", ["high", "global", "sm:tx:TcpSend", "sm:rx:Link"])
def test_every_graph_renders_with_dot_at_a_readable_size(stream, tmp_path, graph):
    _path, result = stream
    text = to_dot(result, graph)
    out = subprocess.run(
        [_dot(), "-Tplain"], input=text, capture_output=True, text=True, check=False
    )
    assert out.returncode == 0 and "Error" not in out.stderr, out.stderr
    # `graph SCALE WIDTH HEIGHT` in inches: a page or a few screens, not 455 inches.
    _g, _scale, width, height = out.stdout.splitlines()[0].split()
    assert float(width) * float(height) < 40 * 60, (width, height)


def test_numbered_instances_collapse_into_one_node(stream):
    _path, result = stream
    names = result.pass_state.key.sms
    links = sum(1 for _sys, sm, _inst in names if sm == "Link")
    assert links > 300  # the trace really has per-frame instances to collapse
    high = to_dot(result, "high")
    assert len(_nodes(high)) < 80
    assert re.search(r'label="Link ×\d+\\n', high)
    assert len(_nodes(to_dot(result, "global"))) < 150


def test_critical_path_is_highlighted(stream):
    _path, result = stream
    high = to_dot(result, "high")
    red = [line for line in high.splitlines() if "->" in line and 'color="#cb181d"' in line]
    grey = [line for line in high.splitlines() if "->" in line and 'color="#909090"' in line]
    assert red and grey
    # The hand-over into the MAC through the TX FIFO carries every frame on the path.
    assert any("on path" in line for line in red)
    # The biggest share (the link or the MAC here) is the darkest, widest node.
    nodes = [
        (float(m.group(1)), line)
        for line in high.splitlines()
        if (m := re.search(r"([\d.]+)% of path", line)) and "->" not in line
    ]
    share, top = max(nodes)
    assert share > 20 and ('label="Link' in top or 'label="MAC' in top)
    fills = [re.search(r'fillcolor="#(\w\w)', line).group(1) for _s, line in nodes]
    assert re.search(r'fillcolor="#(\w\w)', top).group(1) == min(fills)
    assert "Red = critical path" in high  # the legend


def test_single_sm_graph_shows_each_states_own_share(stream):
    _path, result = stream
    text = to_dot(result, "sm:tx:MAC")
    shares = re.findall(r"([\d.]+)% of path", text)
    # transmit is the only MAC state with time on the path: its share, once.
    own = result.path.state_totals["tx:MAC:transmit"] / result.critical_path_ns
    assert shares == [f"{100 * own:.1f}"]
