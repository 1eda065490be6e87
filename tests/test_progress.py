"""Progress of long work shows on stderr, names its step, and never touches stdout."""

from __future__ import annotations

import json
import re
import sys
import time
from contextlib import contextmanager
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


@pytest.fixture
def piped(monkeypatch, tmp_path):
    """The plain lines due at once and often; the log file :func:`_stderr_to` writes."""
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.setenv("TERM", "dumb")
    monkeypatch.setattr(progress, "PROGRESS_AFTER_S", 0.05)
    monkeypatch.setattr(progress, "PLAIN_EVERY_S", 0.05)
    return tmp_path / "stderr.log"


@contextmanager
def _stderr_to(log: Path):
    """stderr a log file for the block (set in the test itself: pytest's capture puts
    its own sys.stderr back between a fixture's set-up and the test)."""
    with log.open("w") as stderr, pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys, "stderr", stderr)
        yield


def _until(log: Path, text: str) -> None:
    """Wait for ``text`` in the log (a line is due within a second)."""
    deadline = time.monotonic() + 30
    while text not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert text in log.read_text()


def test_off_a_terminal_plain_lines_name_the_step_and_the_time(piped):
    with _stderr_to(piped):
        with progress.activity("cpasim predict"):
            _until(piped, "cpasim predict (")
            with progress.note("simulating into a.cpt"):
                _until(piped, "cpasim predict: simulating into a.cpt (")
        lines = piped.read_text().splitlines()
        time.sleep(0.2)  # the work is over: no more lines
        assert piped.read_text().splitlines() == lines
        with progress.activity("compiling the analyzer"):  # not a command: cpasim says it
            _until(piped, "cpasim: compiling the analyzer (")
    assert all(
        re.fullmatch(r"cpasim predict(: simulating into a\.cpt)? \(\d+ s\)", line) for line in lines
    ), lines


def test_off_a_terminal_short_work_and_no_progress_show_nothing(piped, monkeypatch):
    with _stderr_to(piped):
        with progress.activity("quiet", enabled=False):
            time.sleep(0.3)
        monkeypatch.setattr(progress, "PROGRESS_AFTER_S", 2.0)
        with progress.activity("short"):
            time.sleep(0.3)
    assert piped.read_text() == ""


def test_a_buffer_in_memory_shows_nothing(monkeypatch, capsys):
    """A test runner's capture (as CliRunner's or capsys') is neither terminal nor log."""
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.setattr(progress, "PROGRESS_AFTER_S", 0.0)
    with progress.activity("captured"):
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
