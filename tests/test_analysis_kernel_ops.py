"""The compiled kernel's operations, one by one, against their references.

The whole-pass differential tests (``test_analysis_engine.py``) say *that*
the engines disagree; these say *where*.  The queue operations of
:mod:`cpasim.analysis.kernel.rings` (put, take, shifted, slots, freed slots,
resize) run on random sequences beside :class:`~cpasim.analysis.queues.QueueState`:
the same results, the same units held, and every node's reference count equal
to the segments that hold it.  They run as plain Python (``NUMBA_DISABLE_JIT``,
in a child process: the source numba compiles, without the compile), on
numpy record arrays as numba sees them.

numba's cache is keyed on the whole kernel package (``numba_cache``): editing
one module must recompile the functions of another that call into it.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run_child(*args: str, env: dict | None = None) -> str:
    out = subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


@pytest.mark.slow
def test_queue_operations_match_the_reference():
    out = _run_child(__file__, "40", "150", env={"NUMBA_DISABLE_JIT": "1"})
    assert out.strip() == "ok 40", out


@pytest.mark.slow
def test_an_edit_to_one_kernel_module_recompiles_its_callers(tmp_path):
    """A function's cached machine code holds what it calls from the package's
    other modules: numba alone would load it stale after an edit of those."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        "from cpasim.analysis.numba_cache import key_cache_on_package\n"
        "key_cache_on_package(__path__[0])\n"
    )
    (pkg / "caller.py").write_text(
        "from numba import njit\nfrom pkg.callee import g\n\n"
        "@njit(cache=True)\ndef f():\n    return g() + 1\n"
    )
    callee = "from numba import njit\n\n@njit(cache=True)\ndef g():\n    return {}\n"
    (pkg / "callee.py").write_text(callee.format(1))
    code = "import sys; sys.path.insert(0, sys.argv[1]); from pkg.caller import f; print(f())"
    env = {"NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    assert _run_child("-c", code, str(tmp_path), env=env).strip() == "2"
    assert _run_child("-c", code, str(tmp_path), env=env).strip() == "2"  # from the cache
    (pkg / "callee.py").write_text(callee.format(10))
    assert _run_child("-c", code, str(tmp_path), env=env).strip() == "11"


# -- the child: both implementations, side by side ------------------------------


class Pair:
    """One queue twice: the kernel's rows and rings, and a ``QueueState``."""

    def __init__(self, rng: random.Random):
        import numpy as np

        from cpasim.analysis.kernel import layout as L
        from cpasim.analysis.kernel.state import Nodes, Queues
        from cpasim.analysis.pathlog import CP
        from cpasim.analysis.queues import QueueState

        def table(dtype, shape):
            return np.zeros(shape, dtype).view(np.recarray)

        self.L = L
        self.rng = rng
        cap = rng.choice([-1, -1, 3, 6])
        extra = rng.choice([0, 0, 2]) if cap < 0 else rng.choice([0, 1])
        flow = rng.random() < 0.8
        cps = [float(rng.randint(0, 20)) for _ in range(24)]
        self.ref_nodes = []
        for cp in cps:
            node = [None] * 9
            node[CP] = cp
            self.ref_nodes.append(node)
        self.index = {id(n): i for i, n in enumerate(self.ref_nodes)}
        nodes = table(L.NODE, len(cps))
        nodes.cp = cps
        self.nodes = Nodes(nodes, np.zeros(0, np.int64), np.zeros(4096, np.int64))
        row = table(L.QUEUE, 1)
        row.cap, row.extra, row.flow = cap, extra, flow
        rings = table(L.RING, (1, 3))
        rings.off = [[0, 512, 1024]]
        rings.cap = 512
        self.queues = Queues(
            row,
            rings,
            table(L.SEGMENT, 3 * 512),
            np.zeros((1, 3), np.int64),
            table(L.WARNING, 4),
            table(L.CANDIDATE, 2048),
            np.ones(1),
        )
        self.m = table(L.META, 1)[0]
        self.ref = QueueState(0, False, 1.0, extra)
        self.ref.cap, self.ref.flow = cap, flow
        self.t = 0.0

    # -- helpers -----------------------------------------------------------------

    def node(self):
        """A random producer: ``(kernel handle, reference node)``, or none."""
        if self.rng.random() < 0.15:
            return -1, None
        i = self.rng.randrange(len(self.ref_nodes))
        return i, self.ref_nodes[i]

    def handle(self, node) -> int:
        return -1 if node is None else self.index[id(node)]

    def candidates(self) -> list:
        c = self.queues.cand[: self.m.ncand]
        return list(zip(c.node.tolist(), c.sm.tolist(), c.conn.tolist(), strict=True))

    def units(self, units: list) -> list:
        return [(self.handle(n), sm, conn) for n, sm, conn in units]

    def ring(self, r: int) -> list:
        from cpasim.analysis.kernel.rings import ring_at

        segs = self.queues.segments
        return [segs[ring_at(self.queues.rings, 0, r, j)] for j in range(self.queues.rings[0, r].n)]

    # -- operations ----------------------------------------------------------------

    def enq(self):
        from cpasim.analysis.kernel import rings

        n, (h, node) = self.rng.randint(1, 3), self.node()
        conn, sm = self.rng.randint(-1, 1), self.rng.randint(0, 3)
        if self.ref.cap >= 0:
            since = self.rng.choice([-1.0, self.t - 1.5])
            self.m.ncand = 0
            got = rings.slots(self.nodes, self.queues, self.m, 0, n, since, True)
            units: list = []
            want = self.ref.slots(n, since, units)
            assert (got[0], got[1]) == (self.handle(want[0]), want[1]), (got, want)
            assert (got[2] if got[3] else None) == want[2], (got, want)
            assert self.candidates() == self.units(units)
        rings.put(self.nodes, self.queues, 0, n, h, self.t, conn, sm)
        if self.ref.cap >= 0:
            rings.trim_freed(self.nodes, self.queues, self.m, 0)
        self.ref.put(n, node, self.t, conn, sm)

    def take(self):
        from cpasim.analysis.kernel import rings

        held = self.ref.tail - self.ref.head
        if held == 0:
            return self.enq()
        n, remove = self.rng.randint(1, held), self.rng.random() < 0.8
        cur = self.rng.randint(-1, 1)
        p0 = self.ref.head
        self.m.ncand = 0
        got = rings.take(self.nodes, self.queues, self.m, 0, n, remove, cur, self.t, True)
        units: list = []
        want = self.ref.take(n, remove, cur, self.t, units)
        assert got == (self.handle(want[0]), want[1], want[2], want[3]), (got, want)
        assert self.candidates() == self.units(units)
        if self.ref.extra and self.ref.cap < 0:
            self.m.ncand = 0
            lo = p0 - self.ref.extra
            got = rings.shifted(self.nodes, self.queues, self.m, 0, lo, lo + n, cur, True)
            units = []
            want = self.ref.shifted(lo, lo + n, cur, units)
            assert got == (self.handle(want[0]), want[1]), (got, want)
            assert self.candidates() == self.units(units)
        if remove and self.ref.cap >= 0:
            h, node = self.node()
            sm, head = self.rng.randint(0, 3), self.ref.head
            rings.put_freed(self.nodes, self.queues, 0, n, h, self.t, sm)
            self.ref.free(head - n, head, node, self.t, sm)

    def resize(self):
        from cpasim.analysis.kernel import rings

        n, sm = self.rng.randint(0, 8), self.rng.randint(0, 3)
        assert rings.resize(self.nodes, self.queues, self.m, 0, n, self.t, sm)
        self.ref.resize(n, self.t, sm)

    # -- checks ----------------------------------------------------------------

    def release_pending(self):
        """What the record's end does: release the references dropped."""
        for k in range(self.m.npend):
            self.nodes.table[self.nodes.pend[k]].refs -= 1
        self.m.npend = 0

    def check(self):
        L, row, ref = self.L, self.queues.table[0], self.ref
        assert (row.head, row.tail, row.occ_max, row.arrivals) == (
            ref.head,
            ref.tail,
            ref.occ_max,
            ref.arrivals,
        )
        assert row.occ_area == ref.occ_area
        assert (row.enq_t1 if row.has_enq else None) == ref.enq_t1
        for r, segs in ((L.LIVE, ref.live), (L.PAST, ref.past)):
            got = [(s.first, s.end, s.node, s.t, s.conn, s.sm) for s in self.ring(r)]
            want = [(f, e, self.handle(n), t, c, sm) for f, e, n, t, c, sm in segs]
            assert got == want, (r, got, want)
        got = [(s.first, s.end, s.node, s.t, s.sm) for s in self.ring(L.FREED)]
        want = [(f, e, self.handle(n), t, sm) for f, e, n, t, sm in ref.freed]
        assert got == want, (got, want)
        holders = [0] * len(self.ref_nodes)
        for r in (L.LIVE, L.PAST, L.FREED):
            for s in self.ring(r):
                if s.node >= 0:
                    holders[s.node] += 1
        assert self.nodes.table.refs.tolist() == holders

    def step(self):
        self.t += self.rng.choice([0.0, 0.5, 1.0, 2.5])
        op = self.rng.choices([self.enq, self.take, self.resize], [5, 5, 1])[0]
        op()
        self.release_pending()
        self.check()


def main(seeds: int, steps: int) -> None:
    for seed in range(seeds):
        pair = Pair(random.Random(seed))
        for _ in range(steps):
            pair.step()
    print("ok", seeds)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main(int(sys.argv[1]), int(sys.argv[2]))
