"""Special files: what cp, a shell's ``>`` and rsync do with them, cpasim does.

- A character device or a FIFO given as an output is written to in place, never
  replaced by a rename (``--pcap /dev/null``, a named pipe another tool reads):
  the node stays what it was, no temporary file is left beside it, and what a
  reader of the FIFO gets is what the same command writes to a file.
- An input that is a FIFO, a device or a directory is refused with one line
  before a byte is read: a FIFO nobody writes to would block forever, /dev/zero
  would be read until memory runs out.

The fuzzing at the end hands each command that writes or reads a file a special
file of each kind.  Character devices are made with mknod in a temporary
directory when the tests run as root (so that a regression replaces a node of
the test's own, never the system's); otherwise the system's /dev/null serves,
which a regression could not replace without root.
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from inprocess import cli

ROOT = Path(__file__).resolve().parent.parent
TRACES = ROOT / "tests" / "traces"
SCENARIO = ROOT / "scenarios" / "tcp-stream.toml"
SHORT = ["--set", "sim.duration=3ms", "--set", "sim.warmup=1ms"]
NULL = os.makedev(1, 3)  # Linux's /dev/null
FULL = os.makedev(1, 7)  # Linux's /dev/full: every write fails with ENOSPC


def one_line_error(code: int, err: str) -> str:
    assert code == 2, err
    assert err.startswith("cpasim: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err


def char_device(path: Path, device: int = NULL) -> Path:
    """A character device node at ``path`` (root), else the system's node itself."""
    if os.geteuid() == 0:
        os.mknod(path, 0o666 | stat.S_IFCHR, device)
        return path
    return Path("/dev/null" if device == NULL else "/dev/full")


@contextlib.contextmanager
def no_hang(seconds: int = 20):
    """Fail (rather than hang the suite) if the body blocks for ``seconds``."""

    def expired(signum, frame):
        raise TimeoutError(f"blocked for {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


class FifoReader:
    """A FIFO at ``path`` and a thread reading all that is written to it."""

    def __init__(self, path: Path):
        os.mkfifo(path)
        self.path = path
        self.data = b""
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        with open(self.path, "rb") as fh:  # opens once a writer does
            self.data = fh.read()

    def result(self) -> bytes:
        self.thread.join(20)
        assert not self.thread.is_alive(), "the FIFO's writer never closed it"
        return self.data


def litter(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".") or "part" in p.name)


# --- outputs: streamed to, never replaced ------------------------------------------------

# name -> (the command given the output's path, the output's file name)
OUTPUTS = {
    "run --pcap": (lambda o: ["run", SCENARIO, *SHORT, "--pcap", o], "c.pcap"),
    "run --trace .cpt": (lambda o: ["run", SCENARIO, *SHORT, "--trace", o], "t.cpt"),
    "run --trace .jsonl": (lambda o: ["run", SCENARIO, *SHORT, "--trace", o], "t.jsonl"),
    "run --series": (lambda o: ["run", SCENARIO, *SHORT, "--series", o], "s.csv"),
    "analyze --dot": (
        lambda o: (
            ["analyze", TRACES / "stack_driver.jsonl", "--start", "h:Stack"]
            + ["--end", "h:Driver", "--dot", o]
        ),
        "g.dot",
    ),
    "trace convert": (lambda o: ["trace", "convert", TRACES / "stack_driver.jsonl", o], "o.cpt"),
    "sweep --out": (
        lambda o: (
            ["sweep", SCENARIO, *SHORT, "--grid", "link.rate=1Gbps,2Gbps"]
            + ["--workers", "1", "--no-progress", "--out", o]
        ),
        "w.csv",
    ),
    "plot --out": (
        lambda o: (
            ["plot", sweep_table(o.parent if o.parent.is_dir() else Path("/nonexistent"))]
            + ["--x", "link.rate", "--y", "goodput_bps", "--out", o]
        ),
        "p.png",
    ),
}


def sweep_table(folder: Path) -> Path:
    """A small sweep results file to plot (beside the output, in the test's folder)."""
    path = folder / "in-table.csv"
    if folder.is_dir() and folder != Path("/dev"):
        path.write_text("link.rate,repeat,seed,error,goodput_bps\n1Gbps,0,1,,9e8\n2Gbps,0,1,,1e9\n")
    return path


@pytest.mark.parametrize("case", OUTPUTS)
def test_an_output_on_a_character_device_is_written_to_not_replaced(tmp_path, case):
    command, name = OUTPUTS[case]
    node = char_device(tmp_path / name)
    code, _, err = cli(*command(node))
    assert code == 0, err
    assert stat.S_ISCHR(os.stat(node).st_mode), f"{node} was replaced"
    assert litter(tmp_path) == []
    assert stat.S_ISCHR(os.stat(node).st_mode)


#: Written the same way as another case (a picture and a series as a dot graph, once
#: whole; JSON Lines as a .cpt, as it is made): run in the slow suite.
SLOW_FIFO = ("plot --out", "run --series", "run --trace .jsonl")


@pytest.mark.parametrize(
    "case", [pytest.param(c, marks=pytest.mark.slow) if c in SLOW_FIFO else c for c in OUTPUTS]
)
def test_a_fifo_output_receives_what_a_file_would_hold(tmp_path, case):
    command, name = OUTPUTS[case]
    (tmp_path / "file").mkdir()
    assert cli(*command(tmp_path / "file" / name))[0] == 0
    expected = (tmp_path / "file" / name).read_bytes()
    reader = FifoReader(tmp_path / name)
    with no_hang():
        code, _, err = cli(*command(tmp_path / name))
    assert code == 0, err
    got = reader.result()
    assert stat.S_ISFIFO(os.stat(tmp_path / name).st_mode)
    if case == "sweep --out":  # its rows carry their wall time: compare the rest
        assert [r.split(",")[:4] for r in got.decode().splitlines()] == [
            r.split(",")[:4] for r in expected.decode().splitlines()
        ]
    else:
        assert got == expected
    assert litter(tmp_path) == [] and litter(tmp_path / "file") == []


def test_a_write_that_fails_on_a_device_is_one_line(tmp_path):
    node = char_device(tmp_path / "c.pcap", FULL)
    err = one_line_error(*cli("run", SCENARIO, *SHORT, "--pcap", node)[::2])
    assert f"{node}: cannot write capture file: No space left on device" in err
    assert stat.S_ISCHR(os.stat(node).st_mode)


def test_a_trace_streamed_to_a_device_gets_no_sidecar(tmp_path):
    node = char_device(tmp_path / "t.cpt")
    assert cli("run", SCENARIO, *SHORT, "--trace", node)[0] == 0
    assert not Path(f"{node}.run.json").exists()


def test_explain_refuses_a_streamed_trace_before_the_run(tmp_path):
    """--explain reads its trace back; one gone to a device cannot be."""
    node = char_device(tmp_path / "t.cpt")
    code, out, err = cli("run", SCENARIO, *SHORT, "--trace", node, "--explain")
    one_line_error(code, err)
    assert f"--explain: reads the trace back, and --trace {node} is a device or pipe" in err
    assert out == "" and stat.S_ISCHR(os.stat(node).st_mode)


def test_a_run_folder_report_says_what_was_streamed_and_does_not_read_it(tmp_path):
    """report.html draws the series and the timeline from the files: a series sent to
    a FIFO (whose reader has it) and a trace sent to a device are not read back."""
    node = char_device(tmp_path / "t.cpt")
    reader = FifoReader(tmp_path / "s.csv")
    with no_hang():
        code, _, err = cli(
            "run", SCENARIO, *SHORT, "--trace", node, "--series", tmp_path / "s.csv",
            "--out", tmp_path / "run",
        )  # fmt: skip
    assert code == 0, err
    assert reader.result().startswith(b"time_ns,")
    page = (tmp_path / "run" / "report.html").read_text()
    assert f"The time series went to <code>{tmp_path / 's.csv'}</code>, a device or pipe" in page
    assert f"The trace went to <code>{node}</code>" in page
    assert stat.S_ISCHR(os.stat(node).st_mode) and litter(tmp_path) == []


def test_sweep_resume_of_a_device_is_refused(tmp_path):
    node = char_device(tmp_path / "w.csv")
    command = OUTPUTS["sweep --out"][0](node)
    err = one_line_error(*cli(*command, "--resume")[::2])
    assert "cannot read sweep results: it is a character device" in err


def test_a_block_device_or_socket_output_is_refused(tmp_path):
    import socket

    sock = tmp_path / "s.pcap"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(sock))
        err = one_line_error(*cli("run", SCENARIO, *SHORT, "--pcap", sock)[::2])
    assert "cannot write capture file: it is a socket" in err


# --- inputs: refused, never waited on -----------------------------------------------------

# name -> the command given the input's path and the test's folder
INPUTS = {
    "params -s": lambda i, d: ["params", "-s", i],
    "run": lambda i, d: ["run", i],
    "trace info": lambda i, d: ["trace", "info", i],
    "trace names": lambda i, d: ["trace", "names", i],
    "trace convert": lambda i, d: ["trace", "convert", i, d / "out.cpt"],
    "analyze": lambda i, d: ["analyze", i, "--start", "h:A", "--end", "h:A"],
    "analyze (the run's ends)": lambda i, d: ["analyze", i],
    "calibrate show": lambda i, d: ["calibrate", "show", i],
    "calibrate inspect": lambda i, d: ["calibrate", "inspect", i],
    "plot": lambda i, d: ["plot", i, "--x", "a", "--y", "b", "--out", d / "p.png"],
    "sweep --resume": lambda i, d: ["sweep", "-g", "link.rate=1Gbps", "--out", i, "--resume"],
    "predict --trace": lambda i, d: (
        ["predict", SCENARIO, "--change", "link.rate=2Gbps"] + ["--trace", i]
    ),
}
KINDS = {
    "a FIFO": lambda p: os.mkfifo(p) or p,
    "a character device": char_device,
    "endless zeros": lambda p: Path("/dev/zero"),
    "a directory": lambda p: p.mkdir() or p,
}
WHAT = {
    "a FIFO": "it is a FIFO (a named pipe), not a regular file",
    "a character device": "it is a character device, not a regular file",
    "endless zeros": "it is a character device, not a regular file",
    "a directory": "is a directory",
}


def check_input_refused(folder: Path, case: str, kind: str) -> None:
    name = "in.cpt" if case.startswith(("trace", "analyze", "predict")) else "in.csv"
    path = KINDS[kind](folder / name)
    with no_hang():
        code, _, err = cli(*INPUTS[case](path, folder))
    err = one_line_error(code, err)
    assert str(path) in err, err
    if case == "sweep --resume" and path.suffix != ".csv":  # /dev/zero: no table's name
        assert "expected a file ending in .csv or .parquet" in err
    else:
        assert WHAT[kind] in err, err
    assert not (folder / "out.cpt").exists() and not (folder / "p.png").exists()


@pytest.mark.parametrize("kind", ["a FIFO", "endless zeros", "a directory"])
@pytest.mark.parametrize("case", INPUTS)
def test_a_special_file_given_as_an_input_is_refused_at_once(tmp_path, case, kind):
    """(A device node of the test's own is one of the kinds the fuzzing below draws.)"""
    check_input_refused(tmp_path, case, kind)


SIDECAR_READERS = {
    "analyze (the run's ends)": lambda t: ["analyze", t],
    "analyze (the run's verdict)": lambda t: ["analyze", t, "--start", "tx:App", "--end", "rx:App"],
    "predict --trace": lambda t: ["predict", SCENARIO, "--change", "link.rate=2Gbps", "--trace", t],
    "trace convert": lambda t: ["trace", "convert", t, t.with_name("out.jsonl")],
}


@pytest.mark.parametrize("case", SIDECAR_READERS)
def test_a_fifo_where_a_sidecar_goes_is_never_waited_on(tmp_path, case):
    """The trace is a file, its sidecar (X.cpt.run.json) a FIFO: a reader that must
    have the sidecar refuses it in one line, one that can do without goes on."""
    trace = tmp_path / "t.cpt"
    trace.write_bytes((TRACES / "model_tcp_stream.cpt").read_bytes())
    os.mkfifo(tmp_path / "t.cpt.run.json")
    with no_hang():
        code, _, err = cli(*SIDECAR_READERS[case](trace))
    if case in ("analyze (the run's ends)", "predict --trace"):
        err = one_line_error(code, err)
        assert f"t.cpt.run.json: cannot read run sidecar: {WHAT['a FIFO']}" in err
    else:
        assert code == 0, err
    assert stat.S_ISFIFO(os.stat(tmp_path / "t.cpt.run.json").st_mode)
    assert not (tmp_path / "out.jsonl.run.json").exists()


# --- fuzzing: any command, any special file, in either role --------------------------------

QUICK = settings(
    max_examples=6,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
CAMPAIGN = settings(QUICK, max_examples=200)


def check_any(folder: Path, role: str, case: str, kind: str) -> None:
    if role == "input":
        check_input_refused(folder, case, kind)
        return
    command, name = OUTPUTS[case]
    if kind == "a FIFO":
        reader = FifoReader(folder / name)
        with no_hang():
            code, _, err = cli(*command(folder / name))
        reader.result()
    else:
        node = char_device(folder / name, FULL if kind == "/dev/full" else NULL)
        code, _, err = cli(*command(node))
    if kind == "/dev/full":
        one_line_error(code, err)
    else:
        assert code == 0, err
    assert litter(folder) == [], "temporary files left beside the output"


special = st.one_of(
    st.tuples(st.just("input"), st.sampled_from(sorted(INPUTS)), st.sampled_from(sorted(KINDS))),
    st.tuples(
        st.just("output"),
        st.sampled_from(sorted(OUTPUTS)),
        st.sampled_from(["a FIFO", "a character device", "/dev/full"]),
    ),
)


@QUICK
@given(special)
def test_special_files_in_any_role(tmp_path_factory, drawn):
    check_any(tmp_path_factory.mktemp("special"), *drawn)


@pytest.mark.slow
@CAMPAIGN
@given(special)
def test_special_files_campaign(tmp_path_factory, drawn):
    check_any(tmp_path_factory.mktemp("special"), *drawn)


def test_a_sweep_appends_rows_to_a_file_and_gives_a_stream_its_table_once(tmp_path, monkeypatch):
    """A file receives each row as it finishes (an interrupted sweep keeps them); a
    FIFO's reader would take the first of several writes for the whole table."""
    from cpasim.sweeps import table

    appended = []
    real = table.CsvAppender.append
    monkeypatch.setattr(
        table.CsvAppender, "append", lambda self, row: appended.append(row) or real(self, row)
    )
    command = OUTPUTS["sweep --out"][0]
    assert cli(*command(tmp_path / "w.csv"))[0] == 0
    assert len(appended) == 2
    appended.clear()
    reader = FifoReader(tmp_path / "f.csv")
    with no_hang():
        assert cli(*command(tmp_path / "f.csv"))[0] == 0
    assert appended == [] and reader.result().decode().count("\n") == 3
