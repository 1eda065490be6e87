"""Where numba keeps the compiled analyzer, when it compiles it again, and what
happens when it cannot keep it.

The kernel's entry points (the functions Python calls) are compiled with
``cache=True``, each with the machine code of what it calls: numba keeps it in
``__pycache__`` beside each module of
:mod:`cpasim.analysis.kernel`, or in the user's cache directory
(``NUMBA_CACHE_DIR``, else ``~/.cache/numba``).

numba keys a function's cache on its own file only, but a function's machine
code holds every function it calls from the package's other modules: edit
one, and the others would load stale code.  :func:`key_cache_on_package`
keys them all on the sources of the whole package instead, so any edit
compiles the kernel afresh.

Where no cache directory is writable (an installation on a read-only file
system, a locked-down home), numba refuses to define the functions at all.
Then the kernel is compiled into a private temporary directory instead,
removed at exit: every run compiles it again (slower to start), but the
analysis works.

Loading the kernel loads numba's implementations of numpy's functions, one of
which probes for BLAS by importing scipy's linear algebra; the command line's
process skips that probe (:mod:`cpasim.cli_process`).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import hashlib
import importlib
import os
import shutil
import sys
import tempfile

from cpasim import cli_process

_MODULE = "cpasim.analysis.kernel"


def import_kernel():
    """:mod:`cpasim.analysis.kernel`, with a temporary cache if numba has no other."""
    cli_process.before_numba_loads()
    try:
        return importlib.import_module(_MODULE)
    except RuntimeError as exc:
        if "cannot cache" not in str(exc):
            raise
    from numba.core import config

    for name in [n for n in sys.modules if n == _MODULE or n.startswith(_MODULE + ".")]:
        sys.modules.pop(name)  # the half-defined modules numba gave up on
    cache = tempfile.mkdtemp(prefix="cpasim-numba-")
    atexit.register(shutil.rmtree, cache, ignore_errors=True)
    config.CACHE_DIR = cache
    print(
        "cpasim: numba's cache directories are not writable (set NUMBA_CACHE_DIR to one "
        "that is); compiling the analyzer for this run only",
        file=sys.stderr,
    )
    return importlib.import_module(_MODULE)


@contextlib.contextmanager
def loading_uncollected():
    """Run the block (numba and the kernel loading) without collecting cycles in the
    command line's process, while the kernel is not loaded yet
    (:func:`cpasim.cli_process.uncollected`)."""
    if _MODULE in sys.modules:
        yield
        return
    with cli_process.uncollected():
        yield


@functools.cache
def _hash_sources(stats: tuple) -> bytes:
    """Hash of the files in ``stats`` ((path, mtime, size), ...): re-read when one changes."""
    digest = hashlib.sha256()
    for path, _mtime, _size in stats:
        digest.update(os.path.basename(path).encode() + b"\0")
        with open(path, "rb") as f:
            digest.update(f.read())
    return digest.digest()


def package_stamp(package: str) -> bytes:
    """A hash of the Python sources of the directory ``package``."""
    paths = sorted(os.path.join(package, f) for f in os.listdir(package) if f.endswith(".py"))
    stats = tuple((p, os.stat(p).st_mtime_ns, os.stat(p).st_size) for p in paths)
    return _hash_sources(stats)


_keyed: set[str] = set()


def key_cache_on_package(package: str) -> None:
    """Key numba's cache of every function defined in a module of the directory
    ``package`` on the sources of all its modules (call before they are imported).

    Each of numba's cache locators gets a variant that takes only those
    functions and stamps them with :func:`package_stamp`; numba discards a
    cache index whose stamp differs.
    """
    package = os.path.realpath(package)
    if package in _keyed:
        return
    _keyed.add(package)
    from numba.core.caching import CacheImpl

    class PackageStamp:
        @classmethod
        def from_function(cls, py_func, py_file):
            if os.path.realpath(os.path.dirname(py_file)) != package:
                return None
            return super().from_function(py_func, py_file)

        def get_source_stamp(self):
            return package_stamp(package)

    own = CacheImpl._locator_classes
    own[:0] = [type(f"Package{c.__name__}", (PackageStamp, c), {}) for c in own]
