"""Output files appear whole, with the mode the user's umask gives a new file."""

from __future__ import annotations

import os
import stat

import pytest

from cpasim.files import replace_atomically, write_text_atomically
from cpasim.sweeps.table import write_rows


@pytest.fixture
def umask():
    def set_mask(mask: int) -> None:
        os.umask(mask)

    old = os.umask(0o022)
    yield set_mask
    os.umask(old)


@pytest.mark.parametrize("mask", [0o022, 0o027, 0o077])
def test_sweep_table_gets_the_umask_mode(tmp_path, umask, mask):
    umask(mask)
    out = tmp_path / "sweep.csv"
    write_rows(out, [{"a": 1, "b": 2.5}])
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~mask
    assert out.read_text().splitlines() == ["a,b", "1,2.5"]


def test_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, umask):
    out = tmp_path / "x.txt"
    write_text_atomically(out, "old\n")

    def fail(tmp):
        tmp.write_text("half")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        replace_atomically(out, fail)
    assert out.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["x.txt"]


def test_graph_and_run_record_get_the_umask_mode(tmp_path, umask):
    from pathlib import Path

    from typer.testing import CliRunner

    import cpasim.cli
    from cpasim.config import load_scenario
    from cpasim.predict.runs import sidecar_path, write_run_record
    from cpasim.tracing import trace_digest

    umask(0o027)
    stack = Path(__file__).parent / "traces" / "stack_driver.jsonl"
    dot = tmp_path / "g.dot"
    cpasim.cli._register()
    args = ["analyze", str(stack), "--start", "h:Stack", "--end", "h:Driver", "--dot", str(dot)]
    assert CliRunner().invoke(cpasim.cli.app, args).exit_code == 0
    assert stat.S_IMODE(dot.stat().st_mode) == 0o640
    trace = tmp_path / "r.cpt"
    trace.write_bytes((Path(__file__).parent / "traces" / "model_tcp_stream.cpt").read_bytes())
    write_run_record(load_scenario(None), trace, {"goodput_bps": 1.0}, trace_digest(trace))
    assert stat.S_IMODE(sidecar_path(trace).stat().st_mode) == 0o640
