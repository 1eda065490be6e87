"""Which module defines each sub-command, and importing the ones a command line needs.

Each sub-command module registers its commands on the app when imported, and
imports what its commands need (the model, the analyzer, numba ...), so a command
line imports the module of the command it names and no other: ``cpasim predict``
never loads the simulator's modules.  Whatever names no command (``cpasim``,
``cpasim --help``, shell completion, a misspelt name) imports them all, in the
order here, which is the order of ``cpasim --help``: the pipeline first (simulate,
analyze, predict), then the tools around it; typer lists a module's commands
before the groups (``calibrate``, ``trace``) whatever the modules' order.
"""

from __future__ import annotations

import importlib
import os

#: Each command or group of ``cpasim`` and the module of :mod:`cpasim.cli` that
#: defines it, in the order of ``cpasim --help``.
COMMANDS = {
    "run": "run",
    "analyze": "analyze",
    "flows": "flow_cmd",
    "predict": "predict_cmd",
    "validate": "predict_cmd",
    "ladder": "predict_cmd",
    "sweep": "sweep",
    "plot": "sweep",
    "params": "param_list",
    "calibrate": "calibrate_cmd",
    "trace": "trace_tools",
}

#: The modules, in the order they register their commands.
COMMAND_MODULES = (
    "run",
    "analyze",
    "flow_cmd",
    "predict_cmd",
    "sweep",
    "calibrate_cmd",
    "trace_tools",
    "param_list",
)


def needed(args: list[str] | None) -> tuple[str, ...]:
    """The modules a command line ``cpasim ARGS`` needs (``args`` None: all of them).

    The command named first, the module that defines it; ``--version`` first, none
    (it prints and exits before any command); anything else, every module: a help
    that lists the commands, completion, or the error for a name that is none.
    Typer's completion gets its words from the environment, not from ``args``.
    """
    if args is None or "_CPASIM_COMPLETE" in os.environ:
        return COMMAND_MODULES
    if args and args[0] in COMMANDS:
        return (COMMANDS[args[0]],)
    if args and args[0] == "--version":
        return ()
    return COMMAND_MODULES


def register(args: list[str] | None = None) -> None:
    """Import the modules :func:`needed` names, registering their commands on the app,
    and keep the commands in the order of :data:`COMMANDS` whatever the order the
    modules were imported in (one process may run several command lines)."""
    from cpasim.cli.root import app

    for name in needed(args):
        importlib.import_module(f"cpasim.cli.{name}")
    rank = {name: i for i, name in enumerate(COMMANDS)}
    app.registered_commands.sort(key=lambda info: rank.get(info.name, len(rank)))
    app.registered_groups.sort(key=lambda info: rank.get(info.name, len(rank)))
