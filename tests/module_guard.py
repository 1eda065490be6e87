"""A pytest plugin: which cpasim modules the tests that ran exercised, and where first.

Loaded by ``tests/test_quick_guard.py`` into a run of the quick suite
(``-p module_guard``).  While each test runs (its fixtures included) a trace
function sees every Python function called; a module counts as exercised when a
function or method of its own runs -- importing it (its top level, its class bodies
and whatever they call) does not count.  Tracing costs a few times the suite's own time, so it
stops as soon as every module has been seen.  The result goes to the JSON file
named by ``CPASIM_MODULE_GUARD``: per module, the first test that exercised it
(null if none did); the modules with no function of their own (a package that
imports its parts, a ``__main__``), each with whether the run imported it; and the
modules of the compiled analyzer (:data:`COMPILED`), whose functions numba runs as
machine code that no trace function sees, each with whether the run imported it:
they are exercised by the compiled pass (``cpasim.analysis.compiled``) that calls them.
"""

from __future__ import annotations

import inspect
import json
import os
import sys
import threading
from pathlib import Path

import pytest

import cpasim

PACKAGE = Path(cpasim.__file__).resolve().parent
#: The package of numba kernels: its functions run compiled, out of a trace's sight.
COMPILED = "cpasim.analysis.kernel"
#: Tests that recurse to Python's limit on purpose (a value nested 1,000 deep) run
#: untraced: under this trace function CPython 3.11.7 crashed (SIGSEGV) in
#: tomllib's recursion, or not, with the code unchanged and only the process's
#: layout different (the same run started from ``bash -c``, or in gdb, passed).
UNTRACED = ("nested_too_deeply", "nested too deeply")


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _defines_functions(path: Path) -> bool:
    code = compile(path.read_text(), str(path), "exec")
    stack = list(code.co_consts)
    while stack:
        const = stack.pop()
        if inspect.iscode(const):
            if const.co_flags & inspect.CO_OPTIMIZED:
                return True
            stack.extend(const.co_consts)  # a class body: its methods
    return False


class ModuleGuard:
    def __init__(self, out: Path) -> None:
        self.out = out
        files = sorted(PACKAGE.rglob("*.py"))
        self.module_of = {str(p): _module_name(p) for p in files}
        self.compiled = sorted(
            m for m in set(self.module_of.values()) if m == COMPILED or m.startswith(COMPILED + ".")
        )
        self.idle = sorted(
            _module_name(p)
            for p in files
            if not _defines_functions(p) and _module_name(p) not in self.compiled
        )
        self.first: dict[str, str] = {}
        self.todo = len(set(self.module_of.values())) - len(self.idle) - len(self.compiled)
        self.seen: set = set()
        #: The compiled modules some test had loaded (a test may unload them again).
        self.loaded: set[str] = set()
        self.test = ""

    def _importing(self, frame) -> bool:
        """Whether ``frame`` runs on behalf of a cpasim module's top level (an import)."""
        while frame is not None:
            code = frame.f_code
            if not code.co_flags & inspect.CO_OPTIMIZED and code.co_filename in self.module_of:
                return True
            frame = frame.f_back
        return False

    def _call(self, frame, event, arg):
        code = frame.f_code
        if code in self.seen:
            return None
        module = self.module_of.get(code.co_filename)
        if module is not None and self._importing(frame):
            return None  # counted when a test calls it, not when its module loads
        self.seen.add(code)
        if module is not None and module not in self.first and module not in self.compiled:
            self.first[module] = self.test
            if len(self.first) == self.todo:
                sys.settrace(None)
                threading.settrace(None)
        return None

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        tracing = len(self.first) < self.todo and not any(u in item.nodeid for u in UNTRACED)
        if tracing:
            self.test = item.nodeid
            threading.settrace(self._call)
            sys.settrace(self._call)
        try:
            yield
        finally:
            if tracing:
                sys.settrace(None)
                threading.settrace(None)
            self.loaded.update(m for m in self.compiled if m in sys.modules)

    def pytest_sessionfinish(self, session):
        modules = {m: self.first.get(m) for m in sorted(set(self.module_of.values()))}
        for m in (*self.idle, *self.compiled):
            modules.pop(m)
        idle = {m: m in sys.modules for m in self.idle}
        compiled = {m: m in self.loaded for m in self.compiled}
        data = {"modules": modules, "no_functions": idle, "compiled": compiled}
        self.out.write_text(json.dumps(data, indent=1))


def pytest_configure(config: pytest.Config) -> None:
    out = os.environ.get("CPASIM_MODULE_GUARD")
    if out:
        config.pluginmanager.register(ModuleGuard(Path(out)), "cpasim-module-guard")
