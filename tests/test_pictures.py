"""Pictures of a trace: Graphviz graphs that render and read, and the timeline."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

import cpasim
from cpasim.analysis.dot import to_dot
from cpasim.errors import CpasimError

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


@pytest.fixture(scope="module")
def pingpong(tmp_path_factory):
    path = tmp_path_factory.mktemp("trace") / "pp.cpt"
    cpasim.run(
        SCENARIOS / "pingpong.toml", trace=path, **{"sim.duration": "2ms", "sim.warmup": "0.5ms"}
    )
    return path


def _analyze_cli(*args):
    from typer.testing import CliRunner

    import cpasim.cli
    from cpasim.cli import app

    cpasim.cli._register()
    return CliRunner().invoke(app, ["analyze", *map(str, args)])


@pytest.mark.slow
def test_timeline_writes_an_image_of_the_window(pingpong, tmp_path):
    import matplotlib.image

    png, svg = tmp_path / "t.png", tmp_path / "t.svg"
    for out in (png, svg):
        r = _analyze_cli(
            pingpong, "--start", "tx:App", "--end", "rx:App", "--timeline", out,
            "--window", "1ms:1.1ms",
        )  # fmt: skip
        assert r.exit_code == 0, r.output
    height, width, _ = matplotlib.image.imread(png).shape
    assert 800 < width < 2000 and 300 < height < 1500
    assert svg.read_text().lstrip().startswith("<?xml") and "<svg" in svg.read_text()
    assert not list(tmp_path.glob("*.tmp*"))


def test_timeline_respects_the_window(pingpong):
    from cpasim.analysis.timeline import draw_timeline, state_spans
    from cpasim.tracing import open_trace

    result = cpasim.analyze(pingpong)
    spans = state_spans(open_trace(pingpong), 1.0e6, 1.1e6)
    assert spans and all(1.0e6 <= t0 < t1 <= 1.1e6 for _sm, _s, t0, t1 in spans)
    fig = draw_timeline(open_trace(pingpong), result, (1.0e6, 1.1e6))
    ax = fig.axes[0]
    assert ax.get_xlim() == (0.0, 100.0)  # µs since the window's start
    # The path is drawn: a whole round trip fits in 100 µs, through both hosts.
    path = [ln for ln in ax.get_lines() if ln.get_color() == "black"]
    rows = {lab.get_text() for lab in ax.get_yticklabels()}
    assert len(path) > 20 and {"tx:App", "rx:App", "tx:MAC", "rx:MAC"} <= rows
    narrow = draw_timeline(open_trace(pingpong), result, (1.0e6, 1.01e6))
    assert len(narrow.axes[0].get_lines()) < len(path)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--timeline", "x.png", "--window", "3ms"], "--window '3ms': expected START:END"),
        (["--timeline", "x.png", "--window", "2ms:1ms"], "END must be later than START"),
        (["--timeline", "x.png", "--window", "1ms:2parsecs"], "--window"),
        (["--timeline", "x.txt"], "expected a file ending in .png, .svg or .pdf"),
        (["--window", "1ms:2ms"], "--window: only with --timeline"),
        (["--timeline", "x.png", "--window", "1s:2s"], "the trace has no state between"),
        (["--timeline", "x.png", "--scale", "tx:MAC:*=2"], "draws the measured trace"),
    ],
)
def test_timeline_bad_input(pingpong, tmp_path, monkeypatch, args, words):
    monkeypatch.chdir(tmp_path)
    r = _analyze_cli(pingpong, "--start", "tx:App", "--end", "rx:App", *args)
    # In process the CpasimError surfaces as the exception; the command maps it to exit 2.
    assert isinstance(r.exception, CpasimError) and words in str(r.exception), r.output
    assert "\n" not in str(r.exception)
    assert not (tmp_path / "x.png").exists()
