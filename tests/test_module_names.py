"""Every module of the package has a name of its own: no two files share one, and
none shadows a standard-library module (a reader, a traceback or ``grep`` then
names one thing)."""

import sys
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "cpasim"
#: Names every package has by Python's convention, not by choice.
CONVENTIONAL = {"__init__", "__main__"}


def _modules() -> dict[str, list[str]]:
    where: dict[str, list[str]] = defaultdict(list)
    for path in PACKAGE.rglob("*.py"):
        if path.stem not in CONVENTIONAL:
            where[path.stem].append(str(path.relative_to(PACKAGE.parent)))
    return where


def test_no_two_modules_share_a_name():
    shared = {name: paths for name, paths in _modules().items() if len(paths) > 1}
    assert shared == {}


def _packages() -> dict[str, str]:
    return {
        path.parent.name: str(path.parent.relative_to(PACKAGE.parent))
        for path in PACKAGE.rglob("__init__.py")
        if path.parent != PACKAGE
    }


def test_no_module_shadows_the_standard_library():
    shadowing = {
        name: paths for name, paths in _modules().items() if name in sys.stdlib_module_names
    }
    assert shadowing == {}


def test_no_package_shadows_the_standard_library_or_a_module():
    """A package is a module too: ``cpasim.trace`` would read as the standard library's
    ``trace`` in a traceback."""
    modules = _modules()
    clashes = {
        name: path
        for name, path in _packages().items()
        if name in sys.stdlib_module_names or name in modules
    }
    assert clashes == {}
