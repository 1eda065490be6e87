"""Imports every sub-command module so that each registers itself on the app.

The order here is the order of ``cpasim --help``: the pipeline first
(simulate, analyze, predict), then the tools around it.
"""

import importlib

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

for _name in COMMAND_MODULES:
    importlib.import_module(f"cpasim.cli.{_name}")
