"""The quick suite (``scripts/test -m "not slow"``) still guards every module.

It leaves out the slow tests, so a module whose only tests are slow would go
unguarded between CI runs.  The check runs the quick suite under
``tests/module_guard.py`` and asks that every cpasim module with a function of its
own had one of them called by a quick test (the failure names the modules that have
none).  It costs a few times the quick suite, so it is slow itself: CI runs it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import QUICK_EXAMPLES, cap_examples, quick_run
from hypothesis import given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_every_module_is_exercised_by_a_quick_test(tmp_path):
    out = tmp_path / "guard.json"
    env = dict(os.environ, CPASIM_MODULE_GUARD=str(out))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "tests"), env.get("PYTHONPATH")]))
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-m", "not slow", "-p", "module_guard"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert out.exists(), f"exit {proc.returncode}: {proc.stdout[-3000:]}{proc.stderr[-3000:]}"
    guard = json.loads(out.read_text())
    assert "cpasim.simulate" in guard["modules"] and "cpasim.model" in guard["no_functions"]
    unguarded = sorted(m for m, test in guard["modules"].items() if test is None)
    assert not unguarded, f"no quick test calls a function of {', '.join(unguarded)}"
    # A module with nothing to call is exercised by importing it; but a program
    # (``python -m cpasim``, two lines that call cpasim.cli.main) only runs as one.
    unloaded = [m for m, imported in guard["no_functions"].items() if not imported]
    assert all(m.endswith(".__main__") for m in unloaded), unloaded
    # The compiled analyzer's modules run as machine code: they are guarded by the
    # quick tests of the compiled pass that calls them (its agreement with the
    # reference pass), which must have loaded every one of them.
    assert guard["modules"]["cpasim.analysis.compiled"] is not None
    assert guard["compiled"] and all(guard["compiled"].values()), guard["compiled"]


@pytest.mark.parametrize(
    ("markexpr", "quick"),
    [("not slow", True), ("not slow and not dask", True), ("", False), ("slow", False),
     ("not slow or slow", False)],
)  # fmt: skip
def test_a_quick_run_is_one_that_leaves_the_slow_tests_out(markexpr, quick):
    assert quick_run(SimpleNamespace(getoption={"markexpr": markexpr}.get)) is quick


def test_quick_runs_cap_hypothesis_examples():
    """What ``conftest.py`` does to each hypothesis test in a quick run."""
    tried = []

    @settings(max_examples=5 * QUICK_EXAMPLES, database=None)
    @given(st.integers())
    def prop(x):
        tried.append(x)

    cap_examples(prop)
    prop()
    assert 0 < len(tried) <= QUICK_EXAMPLES
