"""Ctrl-C, SIGTERM and SIGHUP: one line, status 128 + the signal, nothing lost or left.

SIGTERM (kill, timeout, a batch scheduler) and SIGHUP (a closed terminal) stop a
command as Ctrl-C does (:mod:`cpasim.interrupts`): the file an output replaces
keeps what it held, an interrupted run keeps its partial trace, no temporary
file is left, and stderr gets one line — at any moment from the start of
cpasim's code, while it imports its commands too.

The in-process tests send the signal to the test's own process from inside a
command (the handler is the one the console script gets).  The campaigns at the
end run the installed ``cpasim`` and signal it at random times; they take
seconds each and are marked slow.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from inprocess import at_call, cli, session

from cpasim.tracing import open_trace

ROOT = Path(__file__).resolve().parent.parent
TRACES = ROOT / "tests" / "traces"
SCENARIO = ROOT / "scenarios" / "tcp-stream.toml"
SHORT = ["--set", "sim.duration=3ms", "--set", "sim.warmup=1ms"]
OLD = "what the file held before\n"
STATUS = {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGHUP: 129}
#: The console script of this environment (scripts/test installs it).
CPASIM = Path(sys.executable).parent / "cpasim"


@pytest.fixture(autouse=True)
def stoppable():
    """The stop signals as a terminal gives them to a command.  A test run under nohup
    or as a background job starts with SIGHUP or SIGINT ignored, which cpasim (as
    any program) keeps ignored, in this process and in the commands it starts."""
    previous = {}
    for signum, handler in (
        (signal.SIGINT, signal.default_int_handler),
        (signal.SIGTERM, signal.SIG_DFL),
        (signal.SIGHUP, signal.SIG_DFL),
    ):
        if signal.getsignal(signum) is signal.SIG_IGN:
            previous[signum] = signal.signal(signum, handler)
    yield
    for signum, handler in previous.items():
        signal.signal(signum, handler)


def signal_at(monkeypatch, target, name: str, call: int, signum: int) -> None:
    """Send ``signum`` to this process at the ``call``-th call of ``target.name``."""
    at_call(monkeypatch, target, name, call, lambda: os.kill(os.getpid(), signum))


def files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


# --- in this process ---------------------------------------------------------------------


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_signal_while_an_output_is_written_keeps_the_old_file(tmp_path, monkeypatch, signum):
    import cpasim.tracing.jsonl

    out = tmp_path / "o.jsonl"
    out.write_text(OLD)
    signal_at(monkeypatch, cpasim.tracing.jsonl, "record_to_dict", 50, signum)
    code, _, err = cli("trace", "convert", TRACES / "model_webserver.cpt", out)
    assert (code, err) == (STATUS[signum], "cpasim: interrupted\n")
    assert out.read_text() == OLD
    assert files(tmp_path) == ["o.jsonl"]  # no .o.jsonl.*.part


def test_sigterm_during_a_run_keeps_the_old_trace_and_the_partial_beside_it(tmp_path, monkeypatch):
    from cpasim.model.environment import Kernel

    path = tmp_path / "t.cpt"
    path.write_text(OLD)
    signal_at(monkeypatch, Kernel, "run_until", 5, signal.SIGTERM)
    code, _, err = cli("run", SCENARIO, *SHORT, "--trace", path)
    partial = tmp_path / "t.partial.cpt"
    assert code == 143
    assert err == f"cpasim: run interrupted, no result; the trace recorded so far is in {partial}\n"
    assert path.read_text() == OLD
    assert sum(len(c) for c in open_trace(partial).chunks()) > 100
    assert files(tmp_path) == ["t.cpt", "t.partial.cpt"]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_the_commands_are_imported_is_one_line(monkeypatch, signum):
    import cpasim.cli

    signal_at(monkeypatch, cpasim.cli, "_register", 1, signum)
    code, out, err = cli("params", "-s", SCENARIO)
    assert (code, out, err) == (STATUS[signum], "", "cpasim: interrupted\n")


def test_a_signal_ignored_at_start_stays_ignored(monkeypatch):
    """nohup ignores SIGHUP: a command started under it runs through one."""
    import cpasim.cli

    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        signal_at(monkeypatch, cpasim.cli, "_register", 1, signal.SIGHUP)
        code, out, err = cli("params", "-s", SCENARIO, "--json")
        assert code == 0 and out and not err, err
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, previous)


def test_handlers_are_given_back_after_a_command():
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    cli("params", "-s", SCENARIO, "--json")
    assert {s: signal.getsignal(s) for s in before} == before


# --- the installed command, signalled from outside ------------------------------------------


def _catches(pid: int, signum: int) -> bool:
    """Whether process ``pid`` has a handler of its own for ``signum`` (SigCgt)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("SigCgt:"):
                return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    except (FileNotFoundError, ProcessLookupError):
        pass
    return False


@contextlib.contextmanager
def started(args: list, cwd: Path) -> Iterator[subprocess.Popen]:
    """The installed cpasim, once cpasim's own code runs (its SIGTERM handler is in
    place: the interpreter's start-up before it is Python's, not cpasim's); killed
    with its workers if the test ends first."""
    assert CPASIM.exists(), f"{CPASIM}: the console script is not installed"
    with subprocess.Popen(
        [CPASIM, *map(str, args)],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    ) as proc:
        try:
            deadline = time.monotonic() + 60
            while not _catches(proc.pid, signal.SIGTERM):
                assert proc.poll() is None, proc.communicate()
                assert time.monotonic() < deadline, "cpasim never took charge of SIGTERM"
                time.sleep(0.002)
            yield proc
        finally:
            for pid in session(proc.pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_the_imports_of_the_installed_command(tmp_path, signum):
    """The first second of a command is spent importing: a signal then is one line
    (it was a KeyboardInterrupt traceback), with no output and no file."""
    with started(["run", SCENARIO, *SHORT, "--trace", "t.cpt"], tmp_path) as proc:
        os.kill(proc.pid, signum)
        out, err = proc.communicate(timeout=60)
    assert (proc.returncode, out, err) == (STATUS[signum], "", "cpasim: interrupted\n")
    assert files(tmp_path) == []


def check_signalled_run(folder: Path, signum: int, delay: float) -> None:
    """``cpasim run`` writing a trace, a series and a capture over old files, signalled
    ``delay`` seconds after cpasim took charge: each file is then the old one or a
    whole new one, a partial trace is whole up to where it stops, nothing else is
    left, and the run ends with its result or one line and 128 + the signal."""
    names = ("t.cpt", "s.csv", "c.pcap")
    for name in names:
        (folder / name).write_text(OLD)
    args = ["run", SCENARIO, "--set", "sim.duration=40ms", "--no-progress"]
    args += ["--trace", "t.cpt", "--series", "s.csv", "--pcap", "c.pcap"]
    with started(args, folder) as proc:
        time.sleep(delay)
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signum)
        out, err = proc.communicate(timeout=120)
    assert "Traceback" not in err and "Exception ignored" not in err, err
    if proc.returncode in (0, -signum):
        # The signal came after the command was over (in the interpreter's last
        # instants, Python hands signals back to the system: -signum).
        assert out.startswith("scenario ") and err == "", err
    else:
        assert proc.returncode == STATUS[signum], err
        assert err.count("\n") == 1 and err.startswith("cpasim: "), err
    left = set(files(folder)) - {*names, "t.cpt.run.json", "t.partial.cpt"}
    assert left == set(), f"left behind: {left}"
    for name in names:
        if (folder / name).read_bytes() != OLD.encode() and name == "t.cpt":
            assert sum(len(c) for c in open_trace(folder / name).chunks()) > 0
    if (folder / "t.partial.cpt").exists():
        assert "the trace recorded so far is in" in err
        sum(len(c) for c in open_trace(folder / "t.partial.cpt").chunks())  # reads whole


@pytest.mark.slow
def test_signals_at_random_times_campaign(tmp_path):
    rng = random.Random(20240611)
    for trial in range(14):
        folder = tmp_path / f"trial{trial}"
        folder.mkdir()
        signum = rng.choice([signal.SIGINT, signal.SIGTERM])
        # Half the trials within the imports (the first second), half anywhere.
        delay = rng.uniform(0, 1.0) if trial % 2 else rng.uniform(0, 6.0)
        check_signalled_run(folder, signum, delay)


@pytest.mark.slow
def test_a_sigterm_sweep_writes_its_rows_stops_its_workers_and_leaks_nothing(tmp_path):
    """A SIGTERM'd sweep printed resource_tracker's "leaked semaphore" warning and
    left hidden .part files; its workers must end with it."""
    out = tmp_path / "w.csv"
    args = ["sweep", SCENARIO, "--set", "sim.duration=150ms", "--no-progress"]
    args += ["-g", "link.rate=1Gbps,2Gbps,3Gbps,4Gbps,5Gbps,6Gbps,7Gbps,8Gbps"]
    with started([*args, "--workers", "2", "--out", out], tmp_path) as proc:
        deadline = time.monotonic() + 120
        while not (out.exists() and out.read_text().count("\n") >= 2):  # a row finished
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        deadline = time.monotonic() + 20
        while session(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        workers = session(proc.pid)
    assert proc.returncode == 143, err
    assert err.startswith("cpasim: interrupted: ") and err.count("\n") == 1, err
    assert "written to" in err and "leaked" not in err
    assert files(tmp_path) == ["w.csv"]
    rows = out.read_text().splitlines()
    assert 2 <= len(rows) < 9 and all(r.count(",") == rows[0].count(",") for r in rows)
    assert workers == []
