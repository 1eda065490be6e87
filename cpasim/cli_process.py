"""What the command line's own process does differently from a program that
imports cpasim: numba's probe for BLAS, and its look for a configuration file,
skipped (numba compiles nothing there but cpasim's kernel); and the process's
modules loaded without collecting cycles (:func:`uncollected`).

Loading a function from numba's cache loads every implementation numba has of
Python's and numpy's functions (``BaseContext.refresh``), among them
:mod:`numba.np.arraymath`, which on import looks for BLAS by importing
``scipy.linalg``: 0.17 s, a sixth of a fresh ``cpasim predict``, most of it
scipy's array-API layer.  What it finds decides only how ``np.correlate`` and
``np.convolve`` compile (with BLAS's dot or with a loop of numba's own), and
cpasim's kernel calls neither, nor any other function of BLAS.

The command line's process compiles nothing else, so it skips the probe
(:func:`skip_in_this_process`): while that module loads, scipy's BLAS module is
hidden and numba takes BLAS as absent for those two functions; numba's linear
algebra looks for BLAS again when used, and finds it.

numba also imports PyYAML as it loads (15 ms), to read ``.numba_config.yaml``
from the working directory.  Where that directory has no such file, the
command's process hides PyYAML from numba; where it has one, numba reads it as
always.  A program that imports cpasim keeps numba as numba sets itself up.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys

#: Whether this process skips the probe (:func:`skip_in_this_process`).
_skipped = False
#: The module numba's probe imports.
BLAS_MODULE = "scipy.linalg.cython_blas"
#: The file numba reads its settings from, in the working directory, and the module
#: it reads it with.
NUMBA_CONFIG_FILE = ".numba_config.yaml"
YAML_MODULE = "yaml"


def skip_in_this_process() -> None:
    """Say that numba compiles nothing but cpasim's kernel in this process, so that
    :func:`before_numba_loads` skips numba's probe for BLAS."""
    global _skipped
    _skipped = True


@contextlib.contextmanager
def uncollected():
    """Where this process is the command line's (:func:`skip_in_this_process`), run
    the block without collecting cycles, then freeze what it made (``gc.freeze``).

    Loading modules (the command's, numba's, the kernel's machine code) makes
    objects by the hundred thousand that live as long as the process; Python's
    collector, which runs every 700 allocations and walks ever more of them, spent
    45-100 ms of a prediction's start-up on them for nothing.  Frozen, they are out
    of later collections; collection resumes for the command's own work.  A program
    that imports cpasim keeps its collector as it is."""
    if not _skipped:
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()


def before_numba_loads() -> None:
    """Where this process skips the probe, load :mod:`numba.np.arraymath` now with
    scipy's BLAS module hidden, and PyYAML too unless numba has a file to read.
    Nothing to do where the module is loaded already, or scipy's linear algebra is
    (the probe then costs nothing)."""
    if not _skipped or "numba.np.arraymath" in sys.modules or "scipy.linalg" in sys.modules:
        return
    hidden = [BLAS_MODULE]
    if YAML_MODULE not in sys.modules and not os.path.exists(NUMBA_CONFIG_FILE):
        hidden.append(YAML_MODULE)
    for name in hidden:
        sys.modules[name] = None  # importing it now fails at once, as if absent
    try:
        import numba.np.arraymath  # noqa: F401
    finally:
        for name in hidden:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]
