"""Progress of long work shows on stderr, names its step, and never touches stdout."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

import cpasim.cli
import cpasim.cli.analyze
from cpasim import progress
from cpasim.cli import main

TRACE = Path(__file__).parent / "traces" / "model_tcp_stream.cpt"


@pytest.fixture
def terminal(monkeypatch):
    """stderr taken for a terminal, and progress due at once."""
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setattr(progress, "PROGRESS_AFTER_S", 0.0)


def test_spinner_names_each_step_on_stderr_only(terminal, capsys):
    with progress.activity("outer work"):
        time.sleep(0.3)
        with progress.note("step two"):
            time.sleep(0.3)
    out, err = capsys.readouterr()
    assert out == ""
    assert "outer work" in err and "step two" in err


def test_short_work_shows_nothing(monkeypatch, capsys):
    monkeypatch.setenv("FORCE_COLOR", "1")
    with progress.activity("quick"):
        pass
    assert capsys.readouterr().err == ""


def test_nothing_when_stderr_is_no_terminal(monkeypatch, capsys):
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.setenv("TERM", "dumb")
    monkeypatch.setattr(progress, "PROGRESS_AFTER_S", 0.0)
    with progress.activity("piped"):
        time.sleep(0.3)
    assert capsys.readouterr().err == ""


def test_note_without_a_command_shows_nothing(terminal, capsys):
    with progress.note("library step"):
        time.sleep(0.2)
    assert capsys.readouterr().err == ""


class _Slow:
    """A trace that takes a moment per chunk, so the progress is due."""

    def __init__(self, source):
        self.source, self.name = source, source.name

    @property
    def key(self):
        return self.source.key

    def chunks(self):
        for chunk in self.source.chunks():
            time.sleep(0.3)
            yield chunk


@pytest.mark.parametrize("flag", ["--progress", "--no-progress"])
def test_analyze_progress_never_in_json(terminal, monkeypatch, capsys, flag):
    opened = cpasim.cli.analyze._open
    monkeypatch.setattr(cpasim.cli.analyze, "_open", lambda p: _Slow(opened(p)))
    args = ["analyze", str(TRACE), "--start", "tx:App", "--end", "rx:App", "--json", flag]
    with pytest.raises(SystemExit) as done:
        main(args)
    assert done.value.code == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["critical_path_ns"] > 0
    if flag == "--progress":
        assert "analysing model_tcp_stream.cpt" in err and "records" in err
    else:
        assert err == ""
