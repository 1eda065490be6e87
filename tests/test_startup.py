"""A fresh ``cpasim`` process loads what its command needs and no more.

``cpasim predict --trace`` answers from a trace without simulating: its process
must not import the simulator (SimPy, the model's components), the other commands'
modules, or scipy's linear algebra, which numba would probe for BLAS while it loads
the compiled analyzer (:mod:`cpasim.cli_process`).  ``bench/bench_startup.py``
measures what that buys; these tests guard it.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer

import cpasim.cli
from cpasim import cli_process
from cpasim.cli import commands

ROOT = Path(__file__).resolve().parent.parent

#: Modules a command that reads a trace never needs: the simulator, what
#: re-simulates (validate, ladder), the capture writer, the plotting and sweeping
#: libraries, scipy.
SIMULATOR = (
    "simpy",
    "cpasim.simulate",
    "cpasim.model.system",
    "cpasim.capture",
    "cpasim.predict.validation",
    "cpasim.predict.ladder",
)
HEAVY = ("scipy", "numba", "matplotlib", "dask", "pandas")


def _loaded(code: str) -> list[str]:
    """The modules of interest loaded after running ``code`` in a fresh interpreter."""
    probe = (
        f"{code}\nimport json, sys\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('cpasim.cli.')"
        f" or m.split('.')[0] in {HEAVY!r} or m.startswith({SIMULATOR!r}))))"
    )
    return json.loads(_python(probe).splitlines()[-1])


def _python(code: str, cwd: Path = ROOT) -> str:
    """The output of ``code`` run in a fresh interpreter, which must succeed."""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


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


def test_the_probe_is_skipped_only_where_asked(monkeypatch):
    monkeypatch.setattr(cli_process, "_skipped", False)
    cli_process.before_numba_loads()  # a program that imports cpasim: numba as it is
    assert sys.modules.get(cli_process.BLAS_MODULE, "absent") is not None
    cli_process.skip_in_this_process()
    assert cli_process._skipped


@pytest.mark.slow  # importing numba: half a second of CPU
def test_numba_loads_without_scipy_linalg_where_the_probe_is_skipped():
    code = (
        "from cpasim import cli_process\n"
        "cli_process.skip_in_this_process()\n"
        "cli_process.before_numba_loads()\n"
        "import sys, numba.np.arraymath as a, numba.core.config as c\n"
        "assert not a._HAVE_BLAS\n"
        "assert cli_process.BLAS_MODULE not in sys.modules  # importable again\n"
        "assert not c._HAVE_YAML and cli_process.YAML_MODULE not in sys.modules\n"
    )
    assert "scipy.linalg" not in _loaded(code)


@pytest.mark.slow  # importing numba: half a second of CPU
def test_numba_reads_its_configuration_file_where_there_is_one(tmp_path):
    (tmp_path / cli_process.NUMBA_CONFIG_FILE).write_text("debug_cache: 0\n")
    code = (
        "from cpasim import cli_process\n"
        "cli_process.skip_in_this_process()\n"
        "cli_process.before_numba_loads()\n"
        "import numba.core.config as c\n"
        "assert c._HAVE_YAML\n"
    )
    _python(code, cwd=tmp_path)


def test_the_kernel_caches_the_functions_python_calls_and_no_other():
    """Each cached function costs every process that loads the kernel a third of a
    millisecond to set up; one Python calls uncached is compiled in every process.
    Python calls the package's exports (``kernel.__all__``); what they call is held
    in their machine code."""
    kernel = ROOT / "cpasim" / "analysis" / "kernel"
    init = ast.parse((kernel / "__init__.py").read_text())
    exported = next(
        ast.literal_eval(node.value)
        for node in init.body
        if isinstance(node, ast.Assign) and node.targets[0].id == "__all__"
    )
    cached, compiled = set(), set()
    for path in kernel.glob("*.py"):
        for node in ast.parse(path.read_text()).body:
            for deco in getattr(node, "decorator_list", []):
                call = deco if isinstance(deco, ast.Call) else None
                func = call.func if call else deco
                if isinstance(func, ast.Name) and func.id == "njit":
                    compiled.add(node.name)
                    if call and any(k.arg == "cache" for k in call.keywords):
                        cached.add(node.name)
    assert len(compiled) > 50  # the whole kernel was read
    assert {"run", "new_state", "finish", "set_factors"} <= cached
    assert cached == compiled & set(exported)


def test_the_command_process_leaves_its_objects_to_the_system_at_exit():
    """A command run as the process's own (``cpasim ...``) freezes what lives when it
    ends, so that the interpreter's shutdown does not walk it again and again; called
    with arguments (a test, a program of its own), it leaves the process as it was."""
    code = (
        "import gc, sys\n"
        "from cpasim.cli import main\n"
        "sys.argv = ['cpasim', '--version']\n"
        "try:\n    main()\nexcept SystemExit as end:\n    assert end.code == 0\n"
        "frozen = gc.get_freeze_count()\n"
        "gc.unfreeze()\n"
        "try:\n    main(['--version'])\nexcept SystemExit:\n    pass\n"
        "print(frozen > 1000, gc.get_freeze_count())\n"
    )
    assert _python(code).splitlines() == ["cpasim 0.1.0", "cpasim 0.1.0", "True 0"]


def test_a_command_line_is_parsed_without_pydantic_or_rich():
    """typer from 0.29 coerces every option through pydantic, a tenth of a second of
    every command's start-up (pyproject.toml keeps typer below it); rich draws help,
    errors and progress on a terminal, none of which a successful command needs."""
    code = (
        "import sys\nfrom cpasim.cli import main\n"
        "try:\n    main(['params', 'tcp.wmem'])\nexcept SystemExit as end:\n"
        "    assert end.code == 0, end.code\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'pydantic', 'rich'}))\n"
    )
    assert _python(code).splitlines()[-1] == "[]"


#: A process that runs the console script's function, with an exit handler.
CONSOLE = """
import atexit, sys
{setup}
atexit.register(print, "exit handler ran")
sys.argv = ["cpasim", *{args!r}]
from cpasim.cli import console
console()
"""


def _console(args: list[str], setup: str = "") -> subprocess.CompletedProcess:
    code = CONSOLE.format(setup=setup, args=args)
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=False
    )


def test_the_console_script_ends_its_process_once_exit_handlers_ran_and_output_is_out():
    done = _console(["--version"])
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["cpasim 0.1.0", "exit handler ran"]
    bad = _console(["params", "no.such.key"])
    assert bad.returncode == 2
    assert bad.stderr.startswith("cpasim: error: ") and bad.stderr.count("\n") == 1
    assert bad.stdout.splitlines() == ["exit handler ran"]


def test_the_console_script_leaves_a_process_with_a_running_thread_to_python():
    """Python waits for a thread that is not a daemon; so does the console script."""
    waits = (
        "import threading, time\n"
        "def late():\n    time.sleep(0.2)\n    print('thread done', flush=True)\n"
        "threading.Thread(target=late).start()"
    )
    done = _console(["--version"], waits)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["cpasim 0.1.0", "thread done", "exit handler ran"]


@pytest.mark.parametrize("command_process", [False, True])
def test_the_command_process_loads_without_collecting_cycles(monkeypatch, command_process):
    """What loads (the command's modules, numba) lives as long as the process: the
    command's process does not walk it while it loads (45-100 ms of a prediction),
    and freezes it after; numba's loading only while the kernel is not loaded."""
    import gc

    from cpasim.analysis import numba_cache

    monkeypatch.setattr(cli_process, "_skipped", command_process)
    monkeypatch.delitem(sys.modules, numba_cache._MODULE, raising=False)
    frozen = gc.get_freeze_count()
    try:
        for block in (cli_process.uncollected, numba_cache.loading_uncollected):
            with block():
                collecting = gc.isenabled()
                made = [[] for _ in range(1000)]
            assert gc.isenabled()
            assert collecting is not command_process
            assert (gc.get_freeze_count() >= frozen + len(made)) is command_process
        monkeypatch.setitem(sys.modules, numba_cache._MODULE, numba_cache)
        with numba_cache.loading_uncollected():
            assert gc.isenabled()
    finally:
        gc.unfreeze()


def test_one_blas_thread_in_the_command_process_unless_the_user_chose(monkeypatch):
    monkeypatch.setattr(os, "environ", {"PATH": "/bin"})
    cpasim.cli._one_blas_thread()
    assert os.environ == {"PATH": "/bin", "OPENBLAS_NUM_THREADS": "1"}
    for name in cpasim.cli.BLAS_THREADS:
        monkeypatch.setattr(os, "environ", {name: "4"})
        cpasim.cli._one_blas_thread()
        assert os.environ == {name: "4"}


FAST = """
[sim]
duration = "6ms"
warmup = "1ms"
"""


@pytest.mark.slow
def test_predict_from_a_trace_loads_no_simulator_and_answers_the_same(tmp_path):
    """The command as a user runs it (its own process, skipping numba's probe for
    BLAS) gives the answer of an ordinary process, without loading the simulator."""
    from cpasim.config import load_scenario
    from cpasim.predict.runs import traced_run
    from cpasim.predict.whatif import changed_config, predict

    scenario = tmp_path / "fast.toml"
    scenario.write_text(FAST)
    trace = tmp_path / "base.cpt"
    cfg = load_scenario(scenario)
    run = traced_run(cfg, trace)
    here = predict(run, changed_config(cfg, {"link.rate": "10Gbps"}))
    args = ["predict", "--trace", str(trace), str(scenario), "--change", "link.rate=10Gbps"]
    code = (
        "import sys\n"
        f"sys.argv = ['cpasim', *{[*args, '--json']!r}]\n"
        "from cpasim.cli import main\n"
        "try:\n    main()\nexcept SystemExit as end:\n    assert not end.code, end.code\n"
    )
    loaded = _loaded(code)
    assert not [m for m in loaded if m.startswith(SIMULATOR) or m.startswith("scipy.linalg")]
    assert "numba" in loaded  # the compiled analyzer did the work
    done = subprocess.run(
        [sys.executable, "-m", "cpasim", *args, "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    assert json.loads(done.stdout)["predicted_goodput_bps"] == here.predicted
