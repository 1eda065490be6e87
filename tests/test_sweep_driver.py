"""The sweep machinery with a stand-in point runner: files, resume, failures, Ctrl-C."""

from __future__ import annotations

import csv
import functools

import pytest

from cpasim.errors import CpasimError
from cpasim.sweeps import executors, runner, table
from cpasim.sweeps.points import make_points
from cpasim.sweeps.runner import SweepInterrupted, execute

KEYS = ["x", "y"]
DIGEST = "d1"


def fake_runner(point):
    """Metrics that depend only on the point; 'bad'/'boom' values fail."""
    values = point.overrides
    if values.get("y") == "bad":
        raise CpasimError("x and y=bad cannot go together")
    if values.get("y") == "boom":
        raise ZeroDivisionError("division by zero")
    x = float(values["x"])
    return {"goodput": x * 10 + point.repeat, "seed_echo": point.seed, "n.deep": x}


def interrupting_runner(stop_at, point):
    if point.index == stop_at:
        raise KeyboardInterrupt
    return fake_runner(point)


def grid_points(repeat=1, ys=("a", "b")):
    return make_points({"x": ["1", "2", "3"], "y": list(ys)}, repeat=repeat, base_seed=3)


def run(points, runner=fake_runner, **kw):
    kw.setdefault("progress", False)
    kw.setdefault("workers", 1)
    return execute(points, runner, keys=KEYS, digest=DIGEST, **kw)


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_rows_in_grid_order_with_identity_and_metrics(tmp_path):
    points = grid_points(repeat=2)
    rows = run(points, out=tmp_path / "s.csv")
    assert [(r["x"], r["y"], r["repeat"]) for r in rows] == [
        (p.overrides["x"], p.overrides["y"], p.repeat) for p in points
    ]
    assert all(r["seed"] == r["seed_echo"] for r in rows)
    on_disk = read_csv(tmp_path / "s.csv")
    assert list(on_disk[0]) == [
        "x",
        "y",
        "repeat",
        "seed",
        "error",
        "goodput",
        "seed_echo",
        "n.deep",
        "scenario_digest",
    ]
    assert [float(r["goodput"]) for r in on_disk] == [r["goodput"] for r in rows]


def test_process_pool_gives_the_same_rows_as_in_process(tmp_path):
    points = grid_points(repeat=2)
    inline = run(points)
    pooled = run(points, workers=2)
    assert pooled == inline


@pytest.mark.slow
def test_failing_points_become_rows_and_do_not_stop_the_sweep(tmp_path):
    points = grid_points(ys=("a", "bad", "boom"))
    rows = run(points, out=tmp_path / "s.csv", workers=2)
    assert len(rows) == 9
    by_y = {r["y"]: r for r in rows if r["x"] == "2"}
    assert by_y["a"]["error"] is None and by_y["a"]["goodput"] == 20.0
    assert by_y["bad"]["error"] == "x and y=bad cannot go together"
    assert by_y["boom"]["error"] == "ZeroDivisionError: division by zero"
    assert "goodput" not in by_y["bad"]
    on_disk = read_csv(tmp_path / "s.csv")
    assert [r["error"] for r in on_disk].count("") == 3


def test_resume_after_half_gives_the_rows_of_one_full_run(tmp_path):
    points = grid_points(repeat=2)
    full = run(points, out=tmp_path / "full.csv")
    half = points[::2]
    run(half, out=tmp_path / "part.csv")
    calls = []

    def counting(point):
        calls.append(point.ident)
        return fake_runner(point)

    resumed = execute(
        points,
        counting,
        keys=KEYS,
        digest=DIGEST,
        out=tmp_path / "part.csv",
        resume=True,
        workers=1,
        progress=False,
    )
    assert sorted(calls) == sorted(p.ident for p in points[1::2])
    assert resumed == full
    assert read_csv(tmp_path / "part.csv") == read_csv(tmp_path / "full.csv")


def test_resume_reruns_failed_rows(tmp_path):
    points = grid_points(ys=("bad",))
    run(points, out=tmp_path / "s.csv")
    rows = execute(
        points,
        functools.partial(interrupting_runner, -1),
        keys=KEYS,
        digest=DIGEST,
        out=tmp_path / "s.csv",
        resume=True,
        workers=1,
        progress=False,
    )
    assert all(r["error"] for r in rows)
    assert len(read_csv(tmp_path / "s.csv")) == 3


def test_resume_refuses_another_scenario_or_other_keys(tmp_path):
    points = grid_points()
    run(points, out=tmp_path / "s.csv")
    with pytest.raises(CpasimError, match="different scenario"):
        execute(
            points,
            fake_runner,
            keys=KEYS,
            digest="other",
            out=tmp_path / "s.csv",
            resume=True,
            workers=1,
            progress=False,
        )
    with pytest.raises(CpasimError, match="the file varies x, y, this sweep varies x"):
        execute(
            points,
            fake_runner,
            keys=["x"],
            digest=DIGEST,
            out=tmp_path / "s.csv",
            resume=True,
            workers=1,
            progress=False,
        )


def test_existing_output_needs_resume_or_overwrite(tmp_path):
    out = tmp_path / "s.csv"
    out.write_text("precious\n")
    with pytest.raises(CpasimError, match="exists; pass --resume"):
        run(grid_points(), out=out)
    assert out.read_text() == "precious\n"
    run(grid_points(), out=out, overwrite=True)
    assert len(read_csv(out)) == 6


def test_bad_output_names(tmp_path):
    with pytest.raises(CpasimError, match=r"\.csv or \.parquet"):
        run(grid_points(), out=tmp_path / "s.txt")
    with pytest.raises(CpasimError, match="does not exist"):
        run(grid_points(), out=tmp_path / "nowhere" / "s.csv")


def ctrl_c_at(out, stop_at: int, **kw) -> SweepInterrupted:
    """How a sweep of :func:`grid_points` into ``out`` ends when its point ``stop_at``
    is Ctrl-C'd."""
    with pytest.raises(SweepInterrupted) as info:
        run(grid_points(), runner=functools.partial(interrupting_runner, stop_at), out=out, **kw)
    return info.value


def test_ctrl_c_in_a_point_writes_the_finished_rows(tmp_path):
    out = tmp_path / "s.csv"
    stop = ctrl_c_at(out, 3)
    assert (stop.finished, stop.total) == (3, 6)
    assert "3 of 6 points finished" in str(stop)
    assert [(r["x"], r["y"]) for r in read_csv(out)] == [("1", "a"), ("1", "b"), ("2", "a")]


def test_ctrl_c_before_any_point_finished_says_the_file_is_as_it_was(tmp_path):
    """(It said 'written to s.csv' of a file it never wrote, or one it left as it was.)"""
    out = tmp_path / "s.csv"
    for old in (None, "what the file held before\n"):
        if old is not None:
            out.write_text(old)
        stop = ctrl_c_at(out, 0, overwrite=True)
        assert str(stop) == f"interrupted: 0 of 6 points finished; {out} is as it was"
        assert (out.read_text() if out.exists() else None) == old


@pytest.mark.slow
def test_ctrl_c_in_the_collection_loop_leaves_a_valid_csv(tmp_path, monkeypatch):
    points = grid_points(repeat=2)
    out = tmp_path / "s.csv"
    seen = []
    real_append = table.CsvAppender.append

    def append(self, row):
        if len(seen) == 4:
            raise KeyboardInterrupt
        seen.append(row)
        real_append(self, row)

    monkeypatch.setattr(table.CsvAppender, "append", append)
    with pytest.raises(SweepInterrupted):
        run(points, out=out, workers=2)
    on_disk = read_csv(out)
    assert len(on_disk) >= 4
    order = [(p.overrides["x"], p.overrides["y"], str(p.repeat)) for p in points]
    got = [(r["x"], r["y"], r["repeat"]) for r in on_disk]
    assert got == [o for o in order if o in got]  # grid order, nothing torn
    for r in on_disk:
        assert float(r["goodput"]) == float(r["x"]) * 10 + int(r["repeat"])
    # Resuming finishes the sweep with the same rows as one full run.
    monkeypatch.setattr(table.CsvAppender, "append", real_append)
    resumed = run(points, out=out, resume=True)
    assert resumed == run(points)


def test_csv_is_valid_after_every_append_even_when_columns_grow(tmp_path):
    out = tmp_path / "s.csv"
    app = table.CsvAppender(out, [], ["x", "repeat"])
    app.append({"x": "1", "repeat": 0, "error": "failed"})
    assert read_csv(out) == [{"x": "1", "repeat": "0", "error": "failed"}]
    app.append({"x": "2", "repeat": 0, "error": None, "goodput": 5.0})
    assert read_csv(out)[1] == {"x": "2", "repeat": "0", "error": "", "goodput": "5.0"}
    assert read_csv(out)[0]["goodput"] == ""


def test_parquet_is_written_at_the_end_and_resumable(tmp_path):
    points = grid_points(repeat=2)
    out = tmp_path / "s.parquet"
    full = run(points)
    run(points[:5], out=out)
    assert len(table.read_rows(out, KEYS)) == 5
    assert run(points, out=out, resume=True) == full
    back = table.read_rows(out, KEYS)
    assert [(r["x"], r["goodput"]) for r in back] == [(r["x"], r["goodput"]) for r in full]


def test_parquet_without_pandas_says_how_to_install(monkeypatch, tmp_path):
    import builtins

    real_import = builtins.__import__

    def no_pyarrow(name, *args, **kwargs):
        if name == "pyarrow":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pyarrow)
    with pytest.raises(CpasimError, match=r"pip install 'cpasim\[table\]'"):
        run(grid_points(), out=tmp_path / "s.parquet")


def test_dask_missing_says_how_to_install(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_distributed(name, *args, **kwargs):
        if name == "distributed" or name.startswith("distributed."):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_distributed)
    with pytest.raises(CpasimError, match=r"--dask needs .*pip install 'cpasim\[dask\]'"):
        run(grid_points(), dask="local")


def test_a_dead_worker_becomes_an_error_row(monkeypatch):
    failure = executors.ExecutorFailure("BrokenProcessPool: a worker died")

    def stream(fn, items):
        for position, item in enumerate(items):
            yield position, failure if position == 1 else fn(item)

    monkeypatch.setattr(executors, "run_inline", stream)
    rows = run(grid_points())
    assert rows[1]["error"] == "BrokenProcessPool: a worker died"
    assert rows[0]["error"] is None and len(rows) == 6


def test_identity_columns_come_first():
    assert runner.identity_columns(["k"]) == ["k", "repeat", "seed", "error"]


@pytest.mark.slow
def test_a_sweep_that_cannot_start_leaves_no_file(tmp_path):
    out = tmp_path / "s.csv"
    with pytest.raises(CpasimError, match="--dask foo: expected tcp://HOST:PORT or 'local'"):
        run(grid_points(), out=out, dask="foo")
    assert not out.exists()


def test_summary_table_prints_names_literally_with_display_units():
    import io

    from rich.console import Console

    rows = [
        {
            "link.rate": "[1Gbps]",
            table.REPEAT: 0,
            "goodput_bps": 9.4e8,
            "latency_ns.mean": 2500.0,
            "critical_state": "tx:Link:propagate",
            "critical_state_share": 0.5,
        }
    ]
    out = io.StringIO()
    Console(file=out, width=200).print(table.render(rows, ["link.rate"]))
    text = out.getvalue()
    assert "tx:Link:propagate (50%)" in text  # not an emoji for ":link:"
    assert "[1Gbps]" in text  # not taken for a style
    assert "goodput (Gb/s)" in text and "0.94" in text
    assert "latency.mean (µs)" in text and "2.5" in text
    assert "goodput_bps" not in text


def test_without_worker_processes_the_points_run_here(monkeypatch, capsys):
    """Where a process pool cannot start (no semaphores, no /dev/shm), the sweep says
    so in one line and runs every point in this process."""

    def no_pool(*args, **kwargs):
        raise OSError("no semaphores")

    monkeypatch.setattr(executors, "ProcessPoolExecutor", no_pool)
    got = dict(executors.run_processes(abs, [-1, -2, -3], 2))
    assert got == {0: 1, 1: 2, 2: 3}
    err = capsys.readouterr().err
    assert err == "cpasim: worker processes unavailable (no semaphores); running in this process\n"
