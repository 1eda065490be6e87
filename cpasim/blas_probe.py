"""numba's probe for BLAS, skipped where numba compiles nothing but cpasim's kernel.

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
algebra looks for BLAS again when used, and finds it.  A program that imports
cpasim keeps numba as numba sets itself up.
"""

from __future__ import annotations

import sys

#: Whether this process skips the probe (:func:`skip_in_this_process`).
_skipped = False
#: The module numba's probe imports.
BLAS_MODULE = "scipy.linalg.cython_blas"


def skip_in_this_process() -> None:
    """Say that numba compiles nothing but cpasim's kernel in this process, so that
    :func:`before_numba_loads` skips numba's probe for BLAS."""
    global _skipped
    _skipped = True


def before_numba_loads() -> None:
    """Where this process skips the probe, load :mod:`numba.np.arraymath` now with
    scipy's BLAS module hidden.  Nothing to do where the module is loaded already,
    or scipy's linear algebra is (the probe then costs nothing)."""
    if not _skipped or "numba.np.arraymath" in sys.modules or "scipy.linalg" in sys.modules:
        return
    sys.modules[BLAS_MODULE] = None  # importing it now fails at once, as if absent
    try:
        import numba.np.arraymath  # noqa: F401
    finally:
        if BLAS_MODULE in sys.modules and sys.modules[BLAS_MODULE] is None:
            del sys.modules[BLAS_MODULE]
