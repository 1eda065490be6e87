"""``cpasim.sweep`` on worker processes, called at the top level of a user's code.

A worker process must never run the caller's ``__main__``: a plain script with
no ``if __name__ == "__main__":`` guard, a script piped to ``python -`` and
``python -c`` code must each get their rows once, with the script's own output
printed once.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import cpasim
from cpasim.errors import CpasimError
from cpasim.sweeps import executors

ROOT = Path(__file__).resolve().parent.parent

TEMPLATE = """\
import cpasim
print("top of the script")
table = cpasim.sweep(
    "scenarios/tcp-stream.toml",
    grid={"link.rate": ["100Mbps", "1Gbps"]},
    overrides={"sim.duration": "2ms", "sim.warmup": "500us"},
    workers=2,
    progress=False,EXECUTOR
)
for row in table.rows:
    print("row", row["link.rate"], row["error"], row["goodput_bps"] > 0)
"""
SCRIPT = TEMPLATE.replace("EXECUTOR", "")
DASK_SCRIPT = TEMPLATE.replace("EXECUTOR", '\n    dask="local",')


def _run(args, stdin=None):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=180,
    )


def _check(done):
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("top of the script") == 1, done.stdout
    assert done.stdout.splitlines()[1:] == ["row 100Mbps None True", "row 1Gbps None True"]
    assert "Traceback" not in done.stderr, done.stderr


@pytest.mark.slow
def test_unguarded_script_gets_its_rows_once(tmp_path):
    script = tmp_path / "sweep_script.py"
    script.write_text(SCRIPT)
    _check(_run([str(script)]))


@pytest.mark.slow
def test_script_on_stdin_gets_its_rows_once():
    _check(_run(["-"], stdin=SCRIPT))


@pytest.mark.slow
def test_dask_local_cluster_from_an_unguarded_script_and_stdin(tmp_path):
    script = tmp_path / "dask_script.py"
    script.write_text(DASK_SCRIPT)
    _check(_run([str(script)]))
    _check(_run(["-"], stdin=DASK_SCRIPT))


def test_code_without_a_main_file_gets_its_rows_once():
    # Like a notebook kernel: __main__ has no file to re-run.
    _check(_run(["-c", SCRIPT]))


@pytest.mark.slow
def test_main_module_is_restored_after_the_workers_start():
    main = sys.modules["__main__"]
    table = cpasim.sweep(
        grid={"link.rate": ["100Mbps", "1Gbps"]},
        overrides={"sim.duration": "2ms", "sim.warmup": "500us"},
        workers=2,
        progress=False,
    )
    assert sys.modules["__main__"] is main
    assert table.column("error") == [None, None]


def _lost(position_item):  # a worker that dies takes its point with it
    os._exit(3)


@pytest.mark.slow
def test_a_sweep_whose_every_point_is_lost_raises_with_the_cause():
    from cpasim.sweeps.points import make_points
    from cpasim.sweeps.runner import execute

    points = make_points({"link.rate": ["1Gbps", "2Gbps"]}, zip_axes=False, repeat=1, base_seed=1)
    with pytest.raises(CpasimError, match="no point of the sweep could run.*BrokenProcessPool"):
        execute(points, _lost, keys=["link.rate"], digest="d", workers=2, progress=False)


def test_no_worker_processes_falls_back_to_this_process(monkeypatch, capsys):
    def refuse(method):
        raise OSError("no semaphores here")

    monkeypatch.setattr(executors.multiprocessing, "get_context", refuse)
    values = dict(executors.run_processes(abs, [-1, -2, -3], 2))
    assert values == {0: 1, 1: 2, 2: 3}
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "running in this process" in err
