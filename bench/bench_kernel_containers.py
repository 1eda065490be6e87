"""Which numba container keeps the analyzer kernel's per-record speed.

A stand-in for the kernel's per-record work (take a node from a pool, read and
write an SM's row, release the nodes given up) over ``--records`` records,
with the arrays handed to the inlined step as:

- ``positional``: plain views, one argument each (the kernel before its split);
- ``named tuple``: named tuples of the same views (what the kernel does now);
- ``named tuple + dicts``: the same, and a named tuple of four typed dicts handed
  to the step, used only on a branch never taken (what the kernel avoids: see
  ``cpasim/analysis/kernel/step.py``);
- ``structref``, ``jitclass``: one mutable struct holding the arrays;
- ``record arrays``: the SM and node tables as numpy record arrays, read by
  field name (what the kernel does now), through named tuples of views.

Prints ns per record (best of ``--repeat``, CPU time).

    .venv/bin/python bench/bench_kernel_containers.py [--records 5000000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import time
from collections import namedtuple

import numpy as np
from numba import njit, types
from numba.experimental import jitclass, structref
from numba.typed import Dict

from cpasim.analysis.kernel.state import as_view

NSM = 16
NODE = np.dtype([("parent", np.int64), ("refs", np.int64), ("cp", np.float64)])
SM = np.dtype([("node", np.int64), ("state", np.int64), ("t", np.float64)])
META = np.dtype([("nfree", np.int64), ("npend", np.int64)])

Pool = namedtuple("Pool", ["ni", "nf", "free", "pend", "meta"])
Sms = namedtuple("Sms", ["i", "f"])
Records = namedtuple("Records", ["nodes", "free", "pend", "sms"])
Dicts = namedtuple("Dicts", ["a", "b", "c", "d"])


@njit(inline="always")
def _step(ni, nf, free, pend, sm_i, sm_f, meta, sm, t):
    """Take a node, hang it under the SM's, release the SM's old one."""
    k = meta[0] - 1
    meta[0] = k
    x = free[k]
    old = sm_i[sm, 0]
    ni[x, 0] = old
    ni[x, 1] = 1
    nf[x, 0] = nf[old, 0] + (t - sm_f[sm, 0]) if old >= 0 else 0.0
    sm_f[sm, 0] = t
    sm_i[sm, 0] = x
    sm_i[sm, 1] += 1
    if old >= 0:
        pend[meta[1]] = old
        meta[1] += 1
    for j in range(meta[1]):
        free[meta[0]] = pend[j]
        meta[0] += 1
    meta[1] = 0
    return nf[x, 0]


@njit
def positional(ni, nf, free, pend, sm_i, sm_f, meta, sms):
    ni, nf, free, pend = as_view(ni), as_view(nf), as_view(free), as_view(pend)
    sm_i, sm_f, meta = as_view(sm_i), as_view(sm_f), as_view(meta)
    acc = 0.0
    for i in range(len(sms)):
        acc += _step(ni, nf, free, pend, sm_i, sm_f, meta, sms[i], float(i))
    return acc


@njit(inline="always")
def _step_tuple(pool, s, sm, t):
    return _step(pool.ni, pool.nf, pool.free, pool.pend, s.i, s.f, pool.meta, sm, t)


@njit(inline="always")
def _step_tuple_dict(pool, s, dicts, sm, t):
    if t < 0.0:
        dicts.a[sm] = 1
    return _step(pool.ni, pool.nf, pool.free, pool.pend, s.i, s.f, pool.meta, sm, t)


@njit
def named_tuple(ni, nf, free, pend, sm_i, sm_f, meta, sms):
    pool = Pool(as_view(ni), as_view(nf), as_view(free), as_view(pend), as_view(meta))
    s = Sms(as_view(sm_i), as_view(sm_f))
    acc = 0.0
    for i in range(len(sms)):
        acc += _step_tuple(pool, s, sms[i], float(i))
    return acc


@njit
def named_tuple_dict(ni, nf, free, pend, sm_i, sm_f, meta, dicts, sms):
    pool = Pool(as_view(ni), as_view(nf), as_view(free), as_view(pend), as_view(meta))
    s = Sms(as_view(sm_i), as_view(sm_f))
    acc = 0.0
    for i in range(len(sms)):
        acc += _step_tuple_dict(pool, s, dicts, sms[i], float(i))
    return acc


@structref.register
class _StructType(types.StructRef):
    def preprocess_fields(self, fields):
        return tuple((name, types.unliteral(typ)) for name, typ in fields)


class Struct(structref.StructRefProxy):
    pass


structref.define_proxy(Struct, _StructType, ["ni", "nf", "free", "pend", "meta", "sm_i", "sm_f"])


@jitclass(
    [
        ("ni", types.int64[:, ::1]),
        ("nf", types.float64[:, ::1]),
        ("free", types.int64[::1]),
        ("pend", types.int64[::1]),
        ("meta", types.int64[::1]),
        ("sm_i", types.int64[:, ::1]),
        ("sm_f", types.float64[:, ::1]),
    ]
)
class Jit:
    def __init__(self, ni, nf, free, pend, meta, sm_i, sm_f):
        self.ni, self.nf, self.free, self.pend = ni, nf, free, pend
        self.meta, self.sm_i, self.sm_f = meta, sm_i, sm_f


@njit(inline="always")
def _step_struct(p, sm, t):
    return _step(p.ni, p.nf, p.free, p.pend, p.sm_i, p.sm_f, p.meta, sm, t)


@njit
def struct(p, sms):
    acc = 0.0
    for i in range(len(sms)):
        acc += _step_struct(p, sms[i], float(i))
    return acc


@njit(inline="always")
def _step_records(r, meta, sm, t):
    k = meta.nfree - 1
    meta.nfree = k
    x = r.free[k]
    s = r.sms[sm]
    old = s.node
    n = r.nodes[x]
    n.parent = old
    n.refs = 1
    n.cp = r.nodes[old].cp + (t - s.t) if old >= 0 else 0.0
    s.t = t
    s.node = x
    s.state += 1
    if old >= 0:
        r.pend[meta.npend] = old
        meta.npend += 1
    for j in range(meta.npend):
        r.free[meta.nfree] = r.pend[j]
        meta.nfree += 1
    meta.npend = 0
    return r.nodes[x].cp


@njit
def record_arrays(nodes, free, pend, sm_table, meta, sms):
    r = Records(as_view(nodes), as_view(free), as_view(pend), as_view(sm_table))
    m = as_view(meta)[0]
    acc = 0.0
    for i in range(len(sms)):
        acc += _step_records(r, m, sms[i], float(i))
    return acc


def _arrays():
    n = 4096
    sm_i = np.full((NSM, 2), -1, np.int64)
    sm_i[:, 1] = 0
    free = np.arange(n)[::-1].copy()
    meta = np.array([n, 0], np.int64)
    return np.zeros((n, 2), np.int64), np.zeros((n, 1)), free, np.zeros(16, np.int64), sm_i, meta


@njit
def _dicts():
    return Dicts(
        Dict.empty(types.int64, types.int64),
        Dict.empty(types.int64, types.int64),
        Dict.empty(types.int64, types.int64),
        Dict.empty(types.int64, types.int64),
    )


def _variants():
    def flat():
        ni, nf, free, pend, sm_i, meta = _arrays()
        return ni, nf, free, pend, sm_i, np.zeros((NSM, 1)), meta

    def struct_args(make):
        ni, nf, free, pend, sm_i, sm_f, meta = flat()
        return (make(ni, nf, free, pend, meta, sm_i, sm_f),)

    def records():
        n = 4096
        sm_table = np.zeros(NSM, SM)
        sm_table["node"] = -1
        meta = np.zeros(1, META)
        meta["nfree"] = n
        return np.zeros(n, NODE), np.arange(n)[::-1].copy(), np.zeros(16, np.int64), sm_table, meta

    return [
        ("positional", positional, flat),
        ("named tuple", named_tuple, flat),
        ("named tuple + dicts", named_tuple_dict, lambda: (*flat(), _dicts())),
        ("structref", struct, lambda: struct_args(Struct)),
        ("jitclass", struct, lambda: struct_args(Jit)),
        ("record arrays", record_arrays, records),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=5_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    sms = np.random.default_rng(1).integers(0, NSM, args.records).astype(np.int64)
    for name, run, make in _variants():
        run(*make(), sms[:100])  # compile
        best = float("inf")
        for _ in range(args.repeat):
            arrays = make()
            c0 = time.process_time()
            run(*arrays, sms)
            best = min(best, time.process_time() - c0)
        print(f"{name:>20}: {best * 1e9 / len(sms):6.2f} ns/record", flush=True)


if __name__ == "__main__":
    from cpasim.errors import script_main

    raise SystemExit(script_main("bench_kernel_containers", main))
