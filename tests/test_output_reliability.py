"""Outputs: a full disk, Ctrl-C (twice too) or a failure never costs a file its old
content, never leaves a temporary file, and is one line, never a traceback.
Sweep files survive a kill mid-row; error lines are escaped and bounded."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from inprocess import at_call, session

import cpasim.files
from cpasim.cli import main
from cpasim.errors import CpasimError, one_line, shown
from cpasim.files import replace_atomically, write_text_atomically
from cpasim.sweeps.table import read_rows, write_rows
from cpasim.tracing import open_trace

ROOT = Path(__file__).resolve().parent.parent
TRACES = ROOT / "tests" / "traces"
SCENARIO = ROOT / "scenarios" / "tcp-stream.toml"
SHORT = ["--set", "sim.duration=3ms", "--set", "sim.warmup=1ms"]
OLD = "what the file held before\n"


def cli(args) -> int:
    with pytest.raises(SystemExit) as stop:
        main([str(a) for a in args])
    return stop.value.code


@pytest.fixture
def full_disk(monkeypatch):
    """Every output file cpasim creates sits on a full disk: its temporary file is a
    link to /dev/full, where every write fails with ENOSPC."""
    assert os.path.exists("/dev/full"), "the full-disk tests need Linux's /dev/full"
    real_mkstemp, real_chmod = tempfile.mkstemp, os.chmod

    def mkstemp(suffix=None, prefix=None, dir=None, text=False):
        fd, name = real_mkstemp(suffix=suffix, prefix=prefix, dir=dir)
        os.close(fd)
        os.unlink(name)
        os.symlink("/dev/full", name)
        return os.open("/dev/full", os.O_WRONLY), name

    def chmod(path, mode, **kwargs):  # never through the link to /dev/full itself
        if not os.path.islink(path):
            real_chmod(path, mode, **kwargs)

    monkeypatch.setattr(cpasim.files.tempfile, "mkstemp", mkstemp)
    monkeypatch.setattr(os, "chmod", chmod)


def sweep_file(path: Path) -> None:
    rows = [
        {"link.rate": r, "repeat": 0, "seed": 1, "error": None, "goodput_bps": 1e8 * i}
        for i, r in enumerate(("1Gbps", "2Gbps"), 1)
    ]
    write_rows(path, rows)


# (name, what to run given the folder, the file that must keep its old content)
CASES = {
    "run --trace .cpt": (lambda d: ["run", SCENARIO, *SHORT, "--trace", d / "t.cpt"], "t.cpt"),
    "run --trace .jsonl": (
        lambda d: ["run", SCENARIO, *SHORT, "--trace", d / "t.jsonl"],
        "t.jsonl",
    ),
    "run --series": (lambda d: ["run", SCENARIO, *SHORT, "--series", d / "s.csv"], "s.csv"),
    "run --pcap": (lambda d: ["run", SCENARIO, *SHORT, "--pcap", d / "c.pcap"], "c.pcap"),
    "run --out": (
        lambda d: ["run", SCENARIO, *SHORT, "--out", d / "run", "--overwrite"],
        "run/config.toml",
    ),
    "trace convert .jsonl": (
        lambda d: ["trace", "convert", TRACES / "model_webserver.cpt", d / "o.jsonl"],
        "o.jsonl",
    ),
    "trace convert .cpt": (
        lambda d: ["trace", "convert", TRACES / "stack_driver.jsonl", d / "o.cpt"],
        "o.cpt",
    ),
    "analyze --dot": (
        lambda d: [
            "analyze",
            TRACES / "stack_driver.jsonl",
            "--start",
            "h:Stack",
            "--end",
            "h:Driver",
            "--dot",
            d / "g.dot",
        ],
        "g.dot",
    ),
    "sweep --out": (
        lambda d: [
            "sweep",
            SCENARIO,
            *SHORT,
            "--grid",
            "link.rate=1Gbps",
            "--workers",
            "1",
            "--no-progress",
            "--out",
            d / "w.csv",
            "--overwrite",
        ],
        "w.csv",
    ),
    "plot --out": (
        lambda d: [
            "plot",
            d / "in.csv",
            "--x",
            "link.rate",
            "--y",
            "goodput_bps",
            "--out",
            d / "p.png",
        ],
        "p.png",
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_a_full_disk_keeps_the_old_file_and_is_one_line(tmp_path, case, capsys, request):
    command, kept = CASES[case]
    (tmp_path / "run").mkdir()
    sweep_file(tmp_path / "in.csv")
    (tmp_path / kept).write_text(OLD)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    request.getfixturevalue("full_disk")
    code = cli(command(tmp_path))
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert "No space left on device" in err and kept.split("/")[-1] in err, err
    assert (tmp_path / kept).read_text() == OLD
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


@pytest.mark.parametrize("extra", [[], ["--trace", "t.cpt"]])
def test_a_full_disk_with_out_leaves_no_empty_run_folder(tmp_path, capsys, request, extra):
    """The run folder (and the parents made for it) go again when nothing reached them."""
    request.getfixturevalue("full_disk")
    out = tmp_path / "runs" / "first"
    code = cli(["run", SCENARIO, *SHORT, "--out", out, *extra])
    err = capsys.readouterr().err
    assert code == 2 and "No space left on device" in err and err.count("\n") == 1, err
    assert list(tmp_path.iterdir()) == []


def test_a_run_folder_that_holds_a_file_is_kept_when_a_later_write_fails(
    tmp_path, capsys, monkeypatch
):
    import cpasim.runfolder

    def full(*args):
        raise CpasimError("result.json: cannot write output file: No space left on device")

    monkeypatch.setattr(cpasim.runfolder, "write_result", full)
    out = tmp_path / "run"
    assert cli(["run", SCENARIO, *SHORT, "--out", out]) == 2
    capsys.readouterr()
    assert sorted(p.name for p in out.iterdir()) == ["config.toml"]


def test_a_failed_write_of_any_kind_leaves_no_temporary(tmp_path):
    out = tmp_path / "x.txt"
    write_text_atomically(out, OLD)
    for error in (KeyboardInterrupt(), OSError(28, "No space left on device")):

        def fail(tmp, error=error):
            tmp.write_text("half")
            raise error

        with pytest.raises((KeyboardInterrupt, CpasimError)):
            replace_atomically(out, fail)
        assert out.read_text() == OLD
        assert [p.name for p in tmp_path.iterdir()] == ["x.txt"]


def test_temporary_names_are_fresh_and_hidden_beside_the_target(tmp_path, monkeypatch):
    seen = []
    real = os.replace

    def replace(src, dst):
        seen.append(Path(src))
        real(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    for _ in range(2):
        write_text_atomically(tmp_path / "a.toml", "x = 1\n")
    assert seen[0] != seen[1]
    for tmp in seen:
        assert tmp.parent == tmp_path and tmp.name.startswith(".a.toml.")
        assert tmp.name.endswith(".part")


# --- Ctrl-C --------------------------------------------------------------------------


def interrupt_at(monkeypatch, target, name, after: int) -> None:
    """Make ``target.name`` raise KeyboardInterrupt on its ``after``-th call."""

    def ctrl_c() -> None:
        raise KeyboardInterrupt

    at_call(monkeypatch, target, name, after, ctrl_c)


def test_ctrl_c_during_the_run_keeps_the_old_jsonl_and_the_partial_beside_it(
    tmp_path, monkeypatch, capsys
):
    from cpasim.model.environment import Kernel

    path = tmp_path / "old.jsonl"
    path.write_text(OLD)
    interrupt_at(monkeypatch, Kernel, "run_until", 5)
    assert cli(["run", SCENARIO, *SHORT, "--trace", path]) == 130
    err = capsys.readouterr().err
    partial = tmp_path / "old.partial.jsonl"
    assert err == f"cpasim: run interrupted, no result; the trace recorded so far is in {partial}\n"
    assert path.read_text() == OLD
    assert sum(len(c) for c in open_trace(partial).chunks()) > 100
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.jsonl", "old.partial.jsonl"]


def test_ctrl_c_twice_during_the_jsonl_write_out_keeps_the_old_file(tmp_path, monkeypatch, capsys):
    import cpasim.tracing.jsonl
    from cpasim.model.environment import Kernel

    path = tmp_path / "old.jsonl"
    path.write_text(OLD)
    interrupt_at(monkeypatch, Kernel, "run_until", 5)  # the first Ctrl-C
    interrupt_at(monkeypatch, cpasim.tracing.jsonl, "record_to_dict", 50)  # the second
    assert cli(["run", SCENARIO, *SHORT, "--trace", path]) == 130
    err = capsys.readouterr().err
    assert err == f"cpasim: run interrupted, no result; no trace written ({path} is as it was)\n"
    assert path.read_text() == OLD
    assert [p.name for p in tmp_path.iterdir()] == ["old.jsonl"]


def test_ctrl_c_while_a_finished_run_writes_its_jsonl_keeps_the_old_file(
    tmp_path, monkeypatch, capsys
):
    import cpasim.tracing.jsonl

    path = tmp_path / "old.jsonl"
    path.write_text(OLD)
    interrupt_at(monkeypatch, cpasim.tracing.jsonl, "record_to_dict", 50)
    assert cli(["run", SCENARIO, *SHORT, "--trace", path]) == 130
    assert "no trace written" in capsys.readouterr().err
    assert path.read_text() == OLD
    assert [p.name for p in tmp_path.iterdir()] == ["old.jsonl"]


def test_ctrl_c_in_any_command_keeps_the_old_file_without_a_traceback(
    tmp_path, monkeypatch, capsys
):
    import cpasim.tracing.jsonl

    out = tmp_path / "o.jsonl"
    out.write_text(OLD)
    interrupt_at(monkeypatch, cpasim.tracing.jsonl, "record_to_dict", 10)
    assert cli(["trace", "convert", TRACES / "model_webserver.cpt", out]) == 130
    assert "Traceback" not in capsys.readouterr().err
    assert out.read_text() == OLD
    assert [p.name for p in tmp_path.iterdir()] == ["o.jsonl"]


# --- sweep files -----------------------------------------------------------------------


def sweep_args(out: Path, *more: str) -> list:
    grid = ["--grid", "link.rate=1Gbps,2Gbps"]
    return [
        "sweep",
        SCENARIO,
        *SHORT,
        *grid,
        "--workers",
        "1",
        "--no-progress",
        "--out",
        out,
        *more,
    ]


def test_resume_after_a_kill_mid_row_runs_the_cut_row_again(tmp_path, capsys):
    out = tmp_path / "s.csv"
    assert cli(sweep_args(out)) == 0
    whole = out.read_text()
    first, second = read_rows(out)[:2]
    # What a kill during the append of the second row leaves: that row cut short.
    cut = whole[: whole.rindex("\n", 0, len(whole) - 1) + 1 + 30]
    out.write_text(cut)
    with pytest.raises(CpasimError, match="the last row is cut short"):
        read_rows(out)
    assert cli(sweep_args(out, "--resume")) == 0
    capsys.readouterr()
    again = read_rows(out)
    drop = ("wall_s",)
    assert [{k: v for k, v in r.items() if k not in drop} for r in again] == [
        {k: v for k, v in r.items() if k not in drop} for r in (first, second)
    ]


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("a,b\n", "not a cpasim sweep file (its header is a,b"),
        ("x,repeat,seed,error\n", "the file varies x, this sweep varies link.rate"),
    ],
)
def test_resume_of_a_file_holding_only_a_foreign_header_is_refused(
    tmp_path, capsys, header, expected
):
    """It was taken for a sweep with no finished row, and replaced."""
    out = tmp_path / "s.csv"
    out.write_text(header)
    assert cli(sweep_args(out, "--resume")) == 2
    err = capsys.readouterr().err
    assert expected in err and err.count("\n") == 1, err
    assert out.read_text() == header


def test_resume_of_the_header_a_sweep_writes_before_its_first_row(tmp_path, capsys):
    out = tmp_path / "s.csv"
    out.write_text("link.rate,repeat,seed,error\n")  # killed before its first row
    assert cli(sweep_args(out, "--resume")) == 0
    capsys.readouterr()
    assert len(read_rows(out)) == 2


def test_a_short_row_in_the_middle_is_one_line(tmp_path):
    out = tmp_path / "s.csv"
    out.write_text("a,b,c\n1,2,3\n4,5\n6,7,8\n")
    with pytest.raises(CpasimError, match=r"s\.csv: line 3 has fewer cells than the header"):
        read_rows(out)


def test_sweep_out_naming_a_directory_fails_before_any_point(tmp_path, capsys, monkeypatch):
    import cpasim.sweeps

    ran = []
    monkeypatch.setattr(cpasim.sweeps, "evaluate", lambda *a: ran.append(a) or {})
    target = tmp_path / "d.csv"
    target.mkdir()
    assert cli(sweep_args(target)) == 2
    err = capsys.readouterr().err
    assert (
        err == f"cpasim: error: --out {target}: is a directory, expected a .csv or .parquet file\n"
    )
    assert ran == []


def test_sweep_out_in_an_unwritable_directory_fails_before_any_point(tmp_path, capsys, monkeypatch):
    import cpasim.sweeps

    ran = []
    monkeypatch.setattr(cpasim.sweeps, "evaluate", lambda *a: ran.append(a) or {})

    def refused(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(cpasim.files.tempfile, "mkstemp", refused)
    out = tmp_path / "s.csv"
    assert cli(sweep_args(out)) == 2
    err = capsys.readouterr().err
    assert err == f"cpasim: error: --out {out}: cannot write output file: Permission denied\n"
    assert ran == []


# --- error lines ---------------------------------------------------------------------


def test_shown_escapes_control_characters_and_cuts_long_values():
    assert shown("a\nb\x1b[31mc\u2028") == "a\\nb\\x1b[31mc\\u2028"
    long = shown("é" * 5000)
    assert long.startswith("é" * 80) and long.endswith("... (5,000 characters)")
    assert shown(12) == "12"


def test_one_line_escapes_and_cuts_the_middle():
    text = one_line("start\n" + "x" * 10_000 + "\x1b]0;title\x07end")
    assert "\n" not in text and "\x1b" not in text and "\x07" not in text
    assert len(text) < 2100 and text.startswith("start\\n") and text.endswith("\\x07end")


def test_a_two_megabyte_scenario_value_is_not_echoed_whole(tmp_path, capsys):
    scenario = tmp_path / "big.toml"
    scenario.write_text('[workload]\nkind = "' + "a" * 2_000_000 + '\\n\\u001b[2J"\n')
    assert cli(["run", scenario]) == 2
    err = capsys.readouterr().err
    assert err.startswith("cpasim: error: ") and err.count("\n") == 1
    assert len(err) < 2200 and "\x1b" not in err


# --- workers, Dask, numba ---------------------------------------------------------------

PARENT = """
import sys, time
from cpasim.sweeps.executors import run_processes
print("started", flush=True)
for _ in run_processes(time.sleep, [600, 600], 2):
    pass
"""


DASK_PARENT = """
import time
from cpasim.sweeps.executors import run_dask
print("started", flush=True)
for _ in run_dask(time.sleep, [600, 600], "local", 2):
    pass
"""


@pytest.mark.slow  # two Python processes and their workers, and seconds of waiting
@pytest.mark.parametrize("script", [PARENT, DASK_PARENT])
def test_sweep_workers_end_when_the_sweep_is_killed(tmp_path, script):
    """Local workers (+ forkserver) and a local Dask cluster's workers (+ resource
    tracker) end once the sweep is killed with SIGKILL."""
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert proc.stdout.readline().strip() == "started"
        deadline = time.monotonic() + 60
        # The sweep, two workers and the forkserver (Dask: the resource tracker).
        while len(session(proc.pid)) < 4 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(session(proc.pid)) >= 4, session(proc.pid)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 15
        while session(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert session(proc.pid) == []
    finally:
        proc.stdout.close()
        for pid in session(proc.pid):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
def test_local_dask_is_started_with_no_dashboard_and_no_http_routes(monkeypatch):
    import dask.config
    import distributed

    from cpasim.sweeps.executors import run_dask

    seen = {}

    class Stop(Exception):
        pass

    def cluster(**kwargs):
        seen.update(kwargs)
        seen["routes"] = (
            dask.config.get("distributed.scheduler.http.routes"),
            dask.config.get("distributed.worker.http.routes"),
        )
        raise Stop

    monkeypatch.setattr(distributed, "LocalCluster", cluster)
    with pytest.raises(Stop):
        list(run_dask(len, [[1]], "local", 1))
    assert seen["dashboard_address"] is None
    assert seen["routes"] == ([], [])


def test_an_unwritable_numba_cache_falls_back_to_a_temporary_one(monkeypatch, capsys):
    import importlib

    from numba.core import config

    import cpasim.analysis.numba_cache as numba_cache

    real_import = importlib.import_module
    kernel = real_import("cpasim.analysis.kernel")
    calls = []

    def import_module(name):
        calls.append(name)
        if len(calls) == 1:
            raise RuntimeError(f"cannot cache function 'x': no locator available for file {name!r}")
        return kernel

    monkeypatch.setattr(numba_cache.importlib, "import_module", import_module)
    monkeypatch.setattr(config, "CACHE_DIR", config.CACHE_DIR)
    monkeypatch.setitem(sys.modules, "cpasim.analysis.kernel", kernel)
    assert numba_cache.import_kernel() is kernel
    assert calls == ["cpasim.analysis.kernel"] * 2
    assert Path(config.CACHE_DIR).is_dir() and "cpasim-numba-" in config.CACHE_DIR
    assert "not writable" in capsys.readouterr().err
