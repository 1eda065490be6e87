"""The compiled per-record loop of the critical-path pass (numba).

The same algorithm as :class:`cpasim.analysis.criticalpath.CriticalPathPass`
(the readable reference), on integer handles instead of Python objects, one
module per concern:

- :mod:`.layout`: what each table holds, as numpy record types;
- :mod:`.state`: what the pass owns (structrefs) and the views a record
  works on (named tuples);
- :mod:`.nodes`: path nodes and their reference counts;
- :mod:`.summaries`: the folded prefix of a path (``pathlog.Summary``);
- :mod:`.rings`: the units each queue holds (``queues.QueueState``);
- :mod:`.edges`: edge codes, (SM, state) cells and the profile's counts;
- :mod:`.cores`, :mod:`.conns`: cores lent; connections, links and ends;
- :mod:`.ops`: what each queue op means for the path;
- :mod:`.growth`: room for the next record, and growing the tables;
- :mod:`.step`: :func:`run`, the loop, one step per phase of a record;
- :mod:`.commit`: folding the settled prefix of the paths (``pathlog.commit``);
- :mod:`.export`: what :mod:`cpasim.analysis.compiled` reads out.

Every float is summed in the same order as the reference pass, so results are
bit-identical (``tests/test_analysis_engine.py``).  The machine code is cached
with the package's sources as its key (:mod:`cpasim.analysis.numba_cache`).
"""

from cpasim.analysis.numba_cache import key_cache_on_package

key_cache_on_package(__path__[0])

from cpasim.analysis.kernel.export import (  # noqa: E402
    dict_items,
    finish,
    free_finished,
    live_units,
    nbytes,
    refcount_errors,
    set_factors,
    tables,
)
from cpasim.analysis.kernel.layout import (  # noqa: E402
    CONN,
    ERR_RESIZE,
    ERR_SHORT,
    K_INTRA,
    K_START,
    QUEUE,
    RING,
    SM,
    W_EMPTY,
    W_FULL,
    Chunk,
    Keyed,
)
from cpasim.analysis.kernel.state import new_meta, new_state  # noqa: E402
from cpasim.analysis.kernel.step import run  # noqa: E402

__all__ = [
    "CONN",
    "ERR_RESIZE",
    "ERR_SHORT",
    "K_INTRA",
    "K_START",
    "QUEUE",
    "RING",
    "SM",
    "W_EMPTY",
    "W_FULL",
    "Chunk",
    "Keyed",
    "dict_items",
    "finish",
    "free_finished",
    "live_units",
    "nbytes",
    "new_meta",
    "new_state",
    "refcount_errors",
    "run",
    "set_factors",
    "tables",
]
