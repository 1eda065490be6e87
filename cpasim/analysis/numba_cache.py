"""Where numba keeps the compiled analyzer, and what happens when it cannot.

The kernel's functions are compiled with ``cache=True``: numba keeps the
machine code in ``__pycache__`` beside :mod:`cpasim.analysis.kernel`, or in the
user's cache directory (``NUMBA_CACHE_DIR``, else ``~/.cache/numba``).  Where
none of them is writable (an installation on a read-only file system, a
locked-down home), numba refuses to define the functions at all.  Then the
kernel is compiled into a private temporary directory instead, removed at
exit: every run compiles it again (slower to start), but the analysis works.
"""

from __future__ import annotations

import atexit
import importlib
import shutil
import sys
import tempfile

_MODULE = "cpasim.analysis.kernel"


def import_kernel():
    """:mod:`cpasim.analysis.kernel`, with a temporary cache if numba has no other."""
    try:
        return importlib.import_module(_MODULE)
    except RuntimeError as exc:
        if "cannot cache" not in str(exc):
            raise
    from numba.core import config

    sys.modules.pop(_MODULE, None)  # the half-defined module numba gave up on
    cache = tempfile.mkdtemp(prefix="cpasim-numba-")
    atexit.register(shutil.rmtree, cache, ignore_errors=True)
    config.CACHE_DIR = cache
    print(
        "cpasim: numba's cache directories are not writable (set NUMBA_CACHE_DIR to one "
        "that is); compiling the analyzer for this run only",
        file=sys.stderr,
    )
    return importlib.import_module(_MODULE)
