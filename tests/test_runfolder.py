"""Run folders: ``--out DIR`` keeps the resolved scenario and the result together,
and the scenario it keeps reproduces the result."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import cpasim
from cpasim.cli import main
from cpasim.errors import CpasimError
from cpasim.runfolder import artefact_path

ROOT = Path(__file__).resolve().parent.parent
STREAM = str(ROOT / "scenarios" / "tcp-stream.toml")
SHORT = ["--set", "sim.duration=6ms", "--set", "sim.warmup=1ms", "--no-progress"]
#: What differs between two runs of one configuration: the wall time, and the paths
#: the command line named.
SHORT_KEYS = {"sim.duration": "6ms", "sim.warmup": "1ms"}
NOT_RESULTS = {"wall_s", "scenario", "trace", "series"}


def _run(argv, capsys) -> str:
    with pytest.raises(SystemExit) as exc:
        main(["run", *argv])
    out = capsys.readouterr()
    assert exc.value.code in (0, None), out.err
    return out.out


def _results(path: Path) -> dict:
    data = json.loads(path.read_text())
    return {k: v for k, v in data.items() if k not in NOT_RESULTS}


def test_config_toml_reproduces_result_json(tmp_path, capsys):
    a, b = tmp_path / "a", tmp_path / "b"
    _run([STREAM, *SHORT, "--set", "link.rate=2.5Gbps", "--out", str(a)], capsys)
    assert sorted(p.name for p in a.iterdir()) == ["config.toml", "report.html", "result.json"]
    # The folder's own scenario, with nothing set: every override is in it.
    _run([str(a / "config.toml"), "--no-progress", "--out", str(b)], capsys)
    first, again = _results(a / "result.json"), _results(b / "result.json")
    assert first["goodput_bps"] > 0
    assert first == again

    def values(path):  # the comment lines name the digest and the source file
        return [ln for ln in path.read_text().splitlines() if not ln.startswith("#")]

    assert values(a / "config.toml") == values(b / "config.toml")


def test_result_json_is_what_json_prints(tmp_path, capsys):
    out = _run([STREAM, *SHORT, "--json", "--out", str(tmp_path / "r")], capsys)
    printed = json.loads(out)
    kept = json.loads((tmp_path / "r" / "result.json").read_text())
    printed.pop("wall_s"), kept.pop("wall_s")
    assert printed == kept


def test_non_empty_folder_refused_unless_overwrite(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(SystemExit) as exc:
        main(["run", STREAM, *SHORT, "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert err.count("\n") == 1 and "not empty" in err and str(tmp_path) in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]  # nothing written
    _run([STREAM, *SHORT, "--out", str(tmp_path), "--overwrite"], capsys)
    written = {p.name for p in tmp_path.iterdir()}
    assert written == {"notes.txt", "config.toml", "report.html", "result.json"}


@pytest.mark.slow  # its report analyses the trace and draws two figures
def test_trace_and_series_go_into_the_folder(tmp_path, capsys):
    run = tmp_path / "run"
    _run([STREAM, *SHORT, "--out", str(run), "--trace", "t.cpt", "--series", "s.csv"], capsys)
    assert {"config.toml", "result.json", "t.cpt", "s.csv"} <= {p.name for p in run.iterdir()}
    assert json.loads((run / "result.json").read_text())["series"] == str(run / "s.csv")


def test_artefact_path():
    assert artefact_path(None, "capture.pcap") is None
    assert artefact_path(None, "capture.pcap", "x.pcap") == Path("x.pcap")
    assert artefact_path("d", "capture.pcap") == Path("d/capture.pcap")
    assert artefact_path("d", "capture.pcap", "x.pcap") == Path("d/x.pcap")
    assert artefact_path("d", "capture.pcap", "/tmp/x.pcap") == Path("/tmp/x.pcap")


def test_api_run_folder(tmp_path):
    over = {"sim.duration": "6ms", "sim.warmup": "1ms"}
    r = cpasim.run(STREAM, over, out=tmp_path / "api")
    assert json.loads((tmp_path / "api" / "result.json").read_text())["goodput_bps"] == (
        r.goodput_bps
    )
    again = cpasim.run(tmp_path / "api" / "config.toml")
    assert again.goodput_bps == r.goodput_bps and again.events == r.events
    with pytest.raises(CpasimError, match="not empty"):
        cpasim.run(STREAM, over, out=tmp_path / "api")


@pytest.mark.slow
def test_validate_run_folder(tmp_path, capsys):
    run = tmp_path / "v"
    argv = ["validate", STREAM, *SHORT, "--change", "link.rate=2.5Gbps", "--json"]
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--out", str(run)])
    printed = capsys.readouterr().out
    assert exc.value.code in (0, None)
    names = sorted(p.name for p in run.iterdir())
    assert names == ["changed.toml", "config.toml", "report.html", "result.json"]
    assert json.loads((run / "result.json").read_text()) == json.loads(printed)
    base = cpasim.load(run / "config.toml")
    changed = cpasim.load(run / "changed.toml")
    assert base.value("link.rate") != changed.value("link.rate")
    assert changed.digest == cpasim.load(STREAM, {"link.rate": "2.5Gbps", **SHORT_KEYS}).digest
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--out", str(run)])
    assert exc.value.code == 2 and "not empty" in capsys.readouterr().err


@pytest.mark.slow
def test_ladder_run_folder(tmp_path, capsys):
    run = tmp_path / "l"
    with pytest.raises(SystemExit) as exc:
        main(["ladder", STREAM, *SHORT, "--steps", "1", "--json", "--out", str(run)])
    printed, err = capsys.readouterr()
    assert exc.value.code in (0, None)
    names = sorted(p.name for p in run.iterdir())
    assert names == ["config.toml", "ladder.md", "ladder.png", "report.html", "result.json"]
    # The chart says what it is, on stderr, and is in the report too.
    assert f"cpasim: wrote {run / 'ladder.png'}: goodput of 2 configurations" in err
    report = (run / "report.html").read_text()
    assert report.count("data:image/png;base64,") == 1 and "<h1>cpasim ladder</h1>" in report
    assert json.loads((run / "result.json").read_text()) == json.loads(printed)
    assert cpasim.load(run / "config.toml").digest == cpasim.load(STREAM, SHORT_KEYS).digest
