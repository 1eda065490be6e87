"""The package's imports: no module imports itself back through others, and reading
a scenario loads no simulator.

The graph is of imports a module runs when it is loaded (its top level); an import
inside a function runs when the function does, after every module is loaded.  The
configuration is read before any run (``cpasim params``, a sweep's checks) and by
the kinds' registries' rules: it must not load SimPy or numpy.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "cpasim"
#: An import statement at the top level: unindented, parentheses followed to their end.
_TOP_IMPORT = re.compile(r"^(?:from [\w.]+ import (?:\([^)]*\)|.*)|import .*)$", re.MULTILINE)


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _top_level_imports(path: Path, modules: set[str]) -> set[str]:
    """The package's modules ``path`` imports when it is loaded."""
    name = _module(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    # Only the statements at the top level, unindented: parsing them alone is quick.
    statements = "\n".join(m.group(0) for m in _TOP_IMPORT.finditer(path.read_text()))
    for node in ast.parse(statements).body:
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            # ``from pkg import mod`` imports the module; ``from mod import name`` the module.
            targets = [f"{base}.{a.name}" for a in node.names] + [base]
        else:
            continue
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` (its modules in order, the first again at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for root in sorted(graph):
        if root in state:
            continue
        path, stack = [root], [iter(sorted(graph[root]))]
        state[root] = 1
        while stack:
            child = next(stack[-1], None)
            if child is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(child) == 1:
                return [*path[path.index(child) :], child]
            elif child not in state:
                state[child] = 1
                path.append(child)
                stack.append(iter(sorted(graph[child])))
    return None


def test_no_module_imports_itself_back():
    files = sorted(PACKAGE.rglob("*.py"))
    modules = {_module(p) for p in files}
    graph = {_module(p): _top_level_imports(p, modules) for p in files}
    # A package imports its parent first: that edge is Python's, not the code's.
    for name in graph:
        graph[name] = {m for m in graph[name] if not name.startswith(m + ".")}
    assert _cycle(graph) is None


def test_the_cycle_finder_finds_one():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_reading_a_scenario_loads_no_simulator():
    code = (
        "import sys, cpasim.config\n"
        "cpasim.config.load_scenario(None, sets=['workload.kind=rpc', 'bus.kind=m5'])\n"
        "print(' '.join(m for m in ('numpy', 'simpy') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
