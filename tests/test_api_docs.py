"""docs/api.md and the manual's index (docs/README.md): every Python block runs, in
order, as one script."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "api.md"


def blocks(page: Path = PAGE) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", page.read_text(), flags=re.S | re.M)


def run_blocks(page: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    """The page's Python blocks as one script, run from a directory of its own (like
    a user's) with the repository's data linked in."""
    for data in ("scenarios", "calibration"):
        (tmp_path / data).symlink_to(ROOT / data)
    script = tmp_path / "examples.py"
    script.write_text("\n\n".join(blocks(page)))
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    return done


def test_the_page_has_an_example_for_every_function():
    text = "\n".join(blocks())
    for name in ("load", "run", "analyze", "predict", "validate", "sweep", "calibrate"):
        assert f"cpasim.{name}(" in text, name
    assert "inspect_capture(" in text and "Tracer.in_memory(" in text


@pytest.mark.slow
def test_every_example_runs(tmp_path):
    out = run_blocks(PAGE, tmp_path).stdout
    assert "10 Gb/s link:" in out and "error " in out and "rms error" in out


@pytest.mark.slow
def test_the_index_python_example_runs(tmp_path):
    assert blocks(ROOT / "docs" / "README.md")
    run_blocks(ROOT / "docs" / "README.md", tmp_path)
