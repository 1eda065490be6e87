"""A run folder's report.html: what it says, and that it renders in a real browser."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import cpasim
from cpasim import runreport
from cpasim.cli import main

ROOT = Path(__file__).resolve().parents[1]
STREAM = str(ROOT / "scenarios" / "tcp-stream.toml")
TRACES = Path(__file__).parent / "traces"

#: The verdict as cpasim.verdict writes it into result.json (the JSON contract).
VERDICT = {
    "kind": "window",
    "resource": "the send buffer (tcp.wmem) of host tx",
    "host": "tx",
    "summary": "limited by the send buffer of host tx: 128 KiB in flight per round trip",
    "evidence": ["121 resource loops through tx:Send buffer", "link 11.5% busy"],
    "change": {"hosts.tx.tcp.wmem": "4MiB"},
    "predicted": {"metric": "goodput_bps", "baseline": 1.08e9, "value": 1.62e9},
    "next": "the PCIe x1 DMA on tx",
}


def _result(**more) -> dict:
    return {
        "scenario": "scenarios/tcp-stream.toml",
        "workload": "tcp_stream",
        "config_digest": "abc123",
        "goodput_bps": 1.08e9,
        "link_utilization": {"tx_to_rx": 0.115, "rx_to_tx": 0.003},
        "cpu_utilization": {"tx": {"copy": 0.25, "idle": 0.6}},
        "drops": {"rx_fifo": 0},
        "retransmits": 0,
        "sim_time_ns": 1.2e8,
        "events": 100,
        "wall_s": 1.0,
        "analysis_start": ["tx", "App"],
        "analysis_end": ["rx", "App"],
        **more,
    }


def test_the_verdict_is_the_headline(tmp_path):
    page = runreport.write_report(
        tmp_path, result=_result(verdict=VERDICT), config_text="[link]\nrate = '<10Gbps>'\n"
    ).read_text()
    headline = re.search(r"<p class='headline'>(.*?)</p>", page).group(1)
    assert headline == html.escape(VERDICT["summary"])
    assert page.index(headline) < page.index("<h2>Summary</h2>")
    assert "<code>hosts.tx.tcp.wmem=4MiB</code>" in page
    assert "1.62 Gb/s, from 1.08 Gb/s (×1.5)" in page
    assert "121 resource loops" in page and "the PCIe x1 DMA on tx" in page
    assert "&lt;10Gbps&gt;" in page  # the config is escaped, not markup
    assert "1.08 Gb/s" in page and "tx-&gt;rx 11.5%" in page


def test_without_a_verdict_the_page_says_how_to_get_one(tmp_path):
    page = runreport.write_report(tmp_path, result=_result(), config_text="").read_text()
    assert "This run was not explained." in page and "--explain" in page


def test_validation_and_ladder_results_get_their_own_tables(tmp_path):
    validation = {
        "metric": "goodput_bps",
        "baseline_goodput_bps": 1e9,
        "predicted_goodput_bps": 1.2e9,
        "actual_goodput_bps": 1.25e9,
        "error": 0.04,
        "baseline_bottleneck": "tx:Link:propagate",
        "predicted_bottleneck": "tx:App:copy",
        "actual_bottleneck": "tx:App:copy",
        "transforms": ["tx:MAC:transmit × 0.1"],
    }
    page = runreport.write_report(tmp_path, result=validation, config_text="").read_text()
    assert "<h1>cpasim validate</h1>" in page and "4.0%" in page and "1.25 Gb/s" in page
    ladder = {
        "metric": "goodput_bps",
        "stopped": None,
        "configs": [
            {"config": 1, "change": None, "actual_goodput_bps": 1e9, "actual_bottleneck": "a"},
            {
                "config": 2,
                "change": "link.rate=10Gbps",
                "actual_goodput_bps": 1.3e9,
                "actual_bottleneck": "b",
                "predictions": [{"from_config": 1, "predicted_goodput_bps": 1.2e9, "error": 0.08}],
            },
        ],
    }
    page = runreport.write_report(tmp_path, result=ladder, config_text="").read_text()
    assert "<code>link.rate=10Gbps</code>" in page and "1.2 Gb/s (8.0%)" in page


def test_without_graphviz_the_page_says_so_and_keeps_the_graph(tmp_path, monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    analysis = cpasim.analyze(TRACES / "stack_driver.jsonl", "h:Stack", "h:Driver")
    page = runreport.write_report(tmp_path, result=_result(), config_text="", analysis=analysis)
    text = page.read_text()
    assert "Graphviz's <code>dot</code> is not installed" in text
    assert (tmp_path / runreport.GRAPH_DOT).read_text().startswith("digraph")


# -- in a real browser ------------------------------------------------------------------

#: Run in the page once it has loaded: what the browser made of every picture.
_PROBE = """<script>
window.addEventListener('load', () => {
  const imgs = [...document.images].map(i => [i.alt, i.complete, i.naturalWidth, i.naturalHeight]);
  const svgs = [...document.querySelectorAll('figure svg')].map(s => {
    const r = s.getBoundingClientRect();
    return [r.width, r.height, s.querySelectorAll('g.node').length];
  });
  const h = document.querySelector('.headline');
  const out = document.createElement('pre');
  out.id = 'probe';
  out.textContent = JSON.stringify({imgs, svgs, headline: h ? h.innerText : null});
  document.body.appendChild(out);
});
</script>"""


def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        message = "headless Chromium is needed to check report.html (.ci/run installs it)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.fail(message + "; install it with: apt-get install chromium")
    return exe


def _rendered(page: Path, tmp_path: Path) -> dict:
    """Load ``page`` (with the probe added) in headless Chromium; the probe's findings."""
    probed = tmp_path / "probed.html"
    probed.write_text(page.read_text().replace("</body>", _PROBE + "</body>"))
    profile = tmp_path / "chromium-profile"
    profile.mkdir()
    done = subprocess.run(
        [
            _chromium(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={profile}",
            "--window-size=1300,2000",
            "--virtual-time-budget=10000",
            "--dump-dom",
            probed.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    found = re.search(r"<pre id=\"probe\">(.*?)</pre>", done.stdout, re.S)
    assert found, f"the page did not load in Chromium: {done.stderr[-2000:]}"
    return json.loads(html.unescape(found.group(1)))


@pytest.mark.slow
def test_report_renders_in_a_browser_with_every_picture(tmp_path, capsys):
    folder = tmp_path / "run"
    with pytest.raises(SystemExit) as done:
        main(
            [
                "run",
                STREAM,
                "--set",
                "sim.duration=6ms",
                "--set",
                "sim.warmup=1ms",
                "--out",
                str(folder),
                "--trace",
                "t.cpt",
                "--series",
                "s.csv",
                "--no-progress",
            ]
        )
    assert done.value.code in (0, None)
    seen = _rendered(folder / runreport.REPORT, tmp_path)
    assert seen["headline"] == "This run was not explained."
    # The series and the timeline as images, the graph as inline SVG: all drawn.
    assert len(seen["imgs"]) == 2
    for alt, complete, width, height in seen["imgs"]:
        assert complete and width > 300 and height > 200, alt
    [(width, height, nodes)] = seen["svgs"]
    assert width > 300 and height > 200 and nodes > 10
    # An explained run: its verdict is the headline the browser shows.
    result = json.loads((folder / "result.json").read_text())
    (tmp_path / "explained").mkdir()
    page = runreport.write_report(
        tmp_path / "explained",
        result={**result, "verdict": VERDICT},
        config_text=(folder / "config.toml").read_text(),
        trace=folder / "t.cpt",
    )
    seen = _rendered(page, tmp_path / "explained")
    assert seen["headline"] == VERDICT["summary"]
    assert len(seen["imgs"]) == 1 and seen["imgs"][0][2] > 300
    assert seen["svgs"][0][0] > 300
