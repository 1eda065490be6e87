"""A fresh ``cpasim`` process loads what its command needs and no more.

``cpasim predict --trace`` answers from a trace without simulating: its process
must not import the simulator (SimPy, the model's components) or the other
commands' modules.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import typer

import cpasim.cli
from cpasim.cli import commands

ROOT = Path(__file__).resolve().parent.parent

#: Modules a command that reads a trace never needs: the simulator, the capture
#: writer, the plotting and sweeping libraries, scipy.
SIMULATOR = ("simpy", "cpasim.simulate", "cpasim.model.system", "cpasim.capture")
HEAVY = ("scipy", "numba", "matplotlib", "dask", "pandas")


def _loaded(code: str) -> list[str]:
    """The modules of interest loaded after running ``code`` in a fresh interpreter."""
    probe = (
        f"{code}\nimport json, sys\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('cpasim.cli.')"
        f" or m.split('.')[0] in {HEAVY!r} or m.startswith({SIMULATOR!r}))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, check=False
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_the_predict_command_imports_no_simulator_and_no_other_command():
    loaded = _loaded("from cpasim.cli import _register\n_register(['predict', '--help'])")
    assert loaded == [
        "cpasim.cli.commands",
        "cpasim.cli.outputs",
        "cpasim.cli.predict_cmd",
        "cpasim.cli.root",
    ]


def test_a_command_line_imports_the_module_of_the_command_it_names():
    assert commands.needed(["predict", "--trace", "t.cpt", "s.toml"]) == ("predict_cmd",)
    assert commands.needed(["plot", "x.json"]) == ("sweep",)
    assert commands.needed(["trace", "info", "t.cpt"]) == ("trace_tools",)
    assert commands.needed(["--version"]) == ()
    # A help that lists the commands, a name that is none, no arguments: all of them.
    for args in ([], ["--help"], ["--help", "predict"], ["prdict"], None):
        assert commands.needed(args) == commands.COMMAND_MODULES


def test_completion_sees_every_command(monkeypatch):
    monkeypatch.setenv("_CPASIM_COMPLETE", "complete_bash")
    assert commands.needed(["predict"]) == commands.COMMAND_MODULES


def test_the_table_names_every_command_its_module_and_the_help_order():
    cpasim.cli._register()
    app = cpasim.cli.app
    defined = {info.name: info.callback.__module__ for info in app.registered_commands}
    defined |= {
        info.name: info.typer_instance.registered_commands[0].callback.__module__
        for info in app.registered_groups
    }
    assert defined == {name: f"cpasim.cli.{m}" for name, m in commands.COMMANDS.items()}
    assert set(commands.COMMAND_MODULES) == set(commands.COMMANDS.values())
    group = typer.main.get_command(app)
    assert group.list_commands(typer.Context(group)) == list(commands.COMMANDS)
