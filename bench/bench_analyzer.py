"""Analyzer speed and memory, both engines, on a synthetic pipeline and on a model trace.

Prints, per engine (``compiled``: the numba kernel, the default; ``python``: the
reference pass) at 1x, 4x and 16x trace length of the synthetic pipeline:

- records/s of ``analyze`` (trace pre-generated in memory, best of ``--repeat``
  runs; wall clock and CPU time, since the machine may be shared), against the
  1,000,000 records/s target and the 10,000,000 records/s goal of ``cpasim
  predict``;
- memory while the trace is generated on the fly and analysed: the peak of
  Python allocations (tracemalloc, which sees numpy arrays allocated from Python
  but not those numba allocates), what the pass still holds at the end, next to
  the peak of generating alone, and the path nodes not yet folded into
  summaries (for the compiled engine the peak too, and the bytes of every
  array it holds at the end, numba's included).  Flat memory means these do
  not grow with the trace.

The trace: sender app with a credit window, six stages with bounded rings
between them, receiver app returning the credits (``PipelineSpec``).

Then records/s of both engines on a real model trace: ``scenarios/tcp-stream.toml``
simulated for ``--model-ms`` (the trace read into memory first, so only the
analyzer is timed), which is what users analyze; the compiled pass's memory on
one model trace cut at 1x, 4x and 16x ``--model-ms``; and the compiled kernel's
cold compile time (empty numba cache, in a fresh process) and cached load time.

    .venv/bin/python bench/bench_analyzer.py [--items 5000] [--repeat 3] [--model-ms 30]
        [--engine compiled] [--no-compile]

``--engine`` times one engine only; ``--no-compile`` leaves out the compile
times (a minute or two of an empty cache each).
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import os
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from cpasim.analysis import Transforms, analyze
from cpasim.analysis.compiled import CompiledPass
from cpasim.analysis.criticalpath import CriticalPathPass
from cpasim.analysis.pathlog import PARENT, Summary
from cpasim.analysis.synthetic import PipelineSpec, pipeline_source
from cpasim.config import load_scenario
from cpasim.predict.window import Prefix
from cpasim.simulate import simulate
from cpasim.tracing import open_trace
from cpasim.tracing.memory import MemorySource

TARGET = 1_000_000
GOAL = 10_000_000
ENGINES = ("compiled", "python")
SCENARIO = Path(__file__).resolve().parent.parent / "scenarios" / "tcp-stream.toml"


def _spec(items: int) -> PipelineSpec:
    return PipelineSpec(items=items, stages=6, ring=64, window=32, work_ns=100.0, wake_ns=5.0)


def timed(mem: MemorySource, start: str, end: str, repeat: int, engine: str):
    """Best wall and CPU seconds of ``analyze`` over ``repeat`` runs, and the last result."""
    wall = cpu = float("inf")
    for _ in range(repeat):
        gc.collect()
        w0, c0 = time.perf_counter(), time.process_time()
        res = analyze(mem, start, end, engine=engine)
        wall = min(wall, time.perf_counter() - w0)
        cpu = min(cpu, time.process_time() - c0)
    return wall, cpu, res


def speed(spec: PipelineSpec, repeat: int, engine: str) -> tuple[int, float, float]:
    """Records, best wall seconds and best CPU seconds of the pass."""
    src = pipeline_source(spec)
    mem = MemorySource(list(src.chunks()), src.key)
    wall, cpu, res = timed(mem, "tx:App", "rx:App", repeat, engine)
    assert abs(res.critical_path_ns - res.elapsed_ns) <= 1e-9 * res.elapsed_ns
    return len(mem), wall, cpu


def memory(spec: PipelineSpec, engine: str) -> dict:
    """Peak of generating alone; peak and retained memory of generating + the pass."""
    gc.collect()
    tracemalloc.start()
    for _ in pipeline_source(spec).chunks():
        pass
    _, gen_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()

    gc.collect()
    tracemalloc.start()
    src = pipeline_source(spec)
    make = CompiledPass if engine == "compiled" else CriticalPathPass
    p = make(Transforms(), ("tx", "App"), ("rx", "App"))
    for chunk in src.chunks():
        p.feed(chunk, src.key)
    del chunk
    gc.collect()
    retained, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    out = {"gen_peak": gen_peak, "peak": peak, "retained": retained}
    if engine == "compiled":
        out.update(live=p.live_nodes, peak_nodes=p.peak_nodes, arrays=p.pool_bytes())
    else:
        seen = set()
        for h in p.handles():
            while h is not None and not isinstance(h, Summary) and id(h) not in seen:
                seen.add(id(h))
                h = h[PARENT]
        out.update(live=len(seen))
    return out


def model_trace(ms: float) -> tuple[MemorySource, str, str]:
    """A tcp-stream model trace of ``ms`` simulated milliseconds, in memory."""
    cfg = load_scenario(SCENARIO, sets=[f"sim.duration={ms}ms", f"sim.warmup={ms / 6:g}ms"])
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.cpt"
        res = simulate(cfg, trace_path=path)
        src = open_trace(path)
        mem = MemorySource(list(src.chunks()), src.key)
    start = f"{res.analysis_start[0]}:{res.analysis_start[1]}"
    end = f"{res.analysis_end[0]}:{res.analysis_end[1]}"
    return mem, start, end


def model_memory(ms: float) -> None:
    """The compiled pass's memory on one tcp-stream model trace cut at 1x, 4x and 16x
    ``ms`` simulated milliseconds (the file streamed, as ``cpasim analyze`` reads it)."""
    cfg = load_scenario(SCENARIO, sets=[f"sim.duration={16 * ms}ms", f"sim.warmup={ms / 6:g}ms"])
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.cpt"
        res = simulate(cfg, trace_path=path)
        for mult in (1, 4, 16):
            src = Prefix(open_trace(path), mult * ms * 1e6)
            p = CompiledPass(Transforms(), res.analysis_start, res.analysis_end)
            for chunk in src.chunks():
                p.feed(chunk, src.key)
            print(
                f"model trace memory, {mult:>2}x ({mult * ms:g} ms simulated): "
                f"{p.records:>9,} records, live nodes {p.live_nodes:,}, peak nodes "
                f"{p.peak_nodes:,}, arrays {p.pool_bytes() / 2**20:.1f} MiB"
            )


_FIRST_USE = """
import time
from cpasim.analysis import analyze
from cpasim.analysis.synthetic import PipelineSpec, pipeline_source
t0 = time.perf_counter()
analyze(pipeline_source(PipelineSpec(items=3, stages=1)), "tx:App", "rx:App", engine="compiled")
t1 = time.perf_counter()
analyze(pipeline_source(PipelineSpec(items=3, stages=1)), "tx:App", "rx:App", engine="compiled")
print(t1 - t0, time.perf_counter() - t1)
"""


def compile_times() -> tuple[float, float]:
    """First compiled analysis in a fresh process: with an empty numba cache, then cached
    (each minus the same analysis once loaded)."""
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        out = []
        for _ in range(2):
            run = subprocess.run(
                [sys.executable, "-c", _FIRST_USE], env=env, capture_output=True, text=True
            )
            first, again = (float(x) for x in run.stdout.split())
            out.append(first - again)
    return out[0], out[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=5000, help="items at 1x")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--model-ms", type=float, default=30.0, help="simulated ms of the model run")
    ap.add_argument("--engine", choices=ENGINES, help="time this engine only")
    ap.add_argument("--no-compile", action="store_true", help="leave out the compile times")
    args = ap.parse_args()
    engines = (args.engine,) if args.engine else ENGINES
    analyze(pipeline_source(_spec(3)), "tx:App", "rx:App")  # compile or load the kernel
    mib = 2**20
    print(f"analyzer bench: {dataclasses.replace(_spec(args.items), items=0)}")
    print(
        f"{'engine':>8} {'length':>6} {'records':>10} {'wall s':>7} {'rec/s wall':>11} "
        f"{'rec/s cpu':>11} {'/target':>7} {'gen peak':>9} {'pass peak':>9} {'retained':>9} "
        f"{'live nodes':>10} {'peak nodes':>10} {'arrays':>8}"
    )
    for mult in (1, 4, 16):
        spec = _spec(args.items * mult)
        for engine in engines:
            n, wall, cpu = speed(spec, args.repeat if mult == 1 else 1, engine)
            m = memory(spec, engine)
            peak_nodes = f"{m['peak_nodes']:,}" if "peak_nodes" in m else "-"
            arrays = f"{m['arrays'] / mib:.2f}M" if "arrays" in m else "-"
            print(
                f"{engine:>8} {mult:>5}x {n:>10,} {wall:>7.2f} {n / wall:>11,.0f} "
                f"{n / cpu:>11,.0f} {n / cpu / TARGET:>7.2f} {m['gen_peak'] / mib:>8.2f}M "
                f"{m['peak'] / mib:>8.2f}M {m['retained'] / mib:>8.2f}M {m['live']:>10,} "
                f"{peak_nodes:>10} {arrays:>8}"
            )
    print(
        "gen peak: generating the trace alone; pass peak / retained: generating it while the\n"
        "pass runs (peak, and what is still held at the end); live / peak nodes: path nodes\n"
        "not yet folded into summaries (at the end / at most); arrays: every array the\n"
        "compiled pass holds at the end.  Flat memory = these do not grow with length."
    )
    mem, start, end = model_trace(args.model_ms)
    n = len(mem)
    rates = {}
    for engine in engines:
        wall, cpu, _ = timed(mem, start, end, args.repeat, engine)
        rates[engine] = n / cpu
        print(
            f"model trace (tcp-stream, {args.model_ms:g} ms simulated), {engine}: {n:,} records, "
            f"{n / wall:,.0f} rec/s wall, {n / cpu:,.0f} rec/s cpu, "
            f"{n / cpu / TARGET:.2f} of target, {n / cpu / GOAL:.2f} of the predict goal"
        )
    if len(rates) == 2:
        print(f"compiled / python on the model trace: {rates['compiled'] / rates['python']:.1f}x")
    if "compiled" in engines:
        model_memory(args.model_ms)
    if args.no_compile:
        return
    cold, cached = compile_times()
    print(
        f"compiled kernel, first use: {cold:.1f} s to compile (empty cache), {cached:.2f} s loaded"
    )


if __name__ == "__main__":
    from cpasim.errors import script_main

    raise SystemExit(script_main("bench_analyzer", main))
