"""Analyzer speed and memory on a synthetic pipeline and on a model trace.

Prints, at 1x, 4x and 16x trace length of the synthetic pipeline:

- records/s of the analyzer pass alone (trace pre-generated in memory, best of
  ``--repeat`` runs; wall clock and CPU time, since the machine may be shared),
  against the 1,000,000 records/s target;
- Python memory (tracemalloc) while the trace is generated on the fly and
  analysed: the peak and what the pass still holds at the end, next to the peak
  of generating alone, and the path nodes not yet folded into summaries.  Flat
  memory means these do not grow with the trace.

The trace: sender app with a credit window, six stages with bounded rings
between them, receiver app returning the credits (``PipelineSpec``).

Then records/s of the pass on a real model trace: ``scenarios/tcp-stream.toml``
simulated for ``--model-ms`` (the trace read into memory first, so only the
analyzer is timed), which is what users analyze.

    .venv/bin/python bench/bench_analyzer.py [--items 5000] [--repeat 3] [--model-ms 30]
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import tempfile
import time
import tracemalloc
from pathlib import Path

from cpasim.analysis import Transforms, analyze
from cpasim.analysis.criticalpath import CriticalPathPass
from cpasim.analysis.pathlog import PARENT, Summary
from cpasim.analysis.synthetic import PipelineSpec, pipeline_source
from cpasim.config import load_scenario
from cpasim.simulate import simulate
from cpasim.trace import open_trace
from cpasim.trace.memory import MemorySource

TARGET = 1_000_000
SCENARIO = Path(__file__).resolve().parent.parent / "scenarios" / "tcp-stream.toml"


def _spec(items: int) -> PipelineSpec:
    return PipelineSpec(items=items, stages=6, ring=64, window=32, work_ns=100.0, wake_ns=5.0)


def speed(spec: PipelineSpec, repeat: int) -> tuple[int, float, float]:
    """Records, best wall seconds and best CPU seconds of the pass alone."""
    src = pipeline_source(spec)
    mem = MemorySource(list(src.chunks()), src.key)
    n = len(mem)
    wall = cpu = float("inf")
    for _ in range(repeat):
        gc.collect()
        w0, c0 = time.perf_counter(), time.process_time()
        res = analyze(mem, "tx:App", "rx:App")
        wall = min(wall, time.perf_counter() - w0)
        cpu = min(cpu, time.process_time() - c0)
    assert abs(res.critical_path_ns - res.elapsed_ns) <= 1e-9 * res.elapsed_ns
    return n, wall, cpu


def timed(mem: MemorySource, start: str, end: str, repeat: int) -> tuple[float, float]:
    """Best wall and CPU seconds of ``analyze`` over ``repeat`` runs."""
    wall = cpu = float("inf")
    for _ in range(repeat):
        gc.collect()
        w0, c0 = time.perf_counter(), time.process_time()
        analyze(mem, start, end)
        wall = min(wall, time.perf_counter() - w0)
        cpu = min(cpu, time.process_time() - c0)
    return wall, cpu


def model_speed(ms: float, repeat: int) -> tuple[int, float, float]:
    """Records, best wall and CPU seconds of the pass on a tcp-stream model trace."""
    cfg = load_scenario(SCENARIO, sets=[f"sim.duration={ms}ms", f"sim.warmup={ms / 6:g}ms"])
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.cpt"
        res = simulate(cfg, trace_path=path)
        src = open_trace(path)
        mem = MemorySource(list(src.chunks()), src.key)
    wall, cpu = timed(
        mem,
        f"{res.analysis_start[0]}:{res.analysis_start[1]}",
        f"{res.analysis_end[0]}:{res.analysis_end[1]}",
        repeat,
    )
    return len(mem), wall, cpu


def memory(spec: PipelineSpec) -> tuple[int, int, int, int]:
    """Peak of generating alone; peak and retained memory of generating + the pass; live nodes."""
    gc.collect()
    tracemalloc.start()
    for _ in pipeline_source(spec).chunks():
        pass
    _, gen_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()

    gc.collect()
    tracemalloc.start()
    src = pipeline_source(spec)
    p = CriticalPathPass(Transforms(), ("tx", "App"), ("rx", "App"))
    for chunk in src.chunks():
        p.feed(chunk, src.key)
    del chunk
    gc.collect()
    retained, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    seen = set()
    for h in p.handles():
        while h is not None and not isinstance(h, Summary) and id(h) not in seen:
            seen.add(id(h))
            h = h[PARENT]
    return gen_peak, peak, retained, len(seen)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=5000, help="items at 1x")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--model-ms", type=float, default=30.0, help="simulated ms of the model run")
    args = ap.parse_args()
    print(f"analyzer bench: {dataclasses.replace(_spec(args.items), items=0)}")
    print(
        f"{'length':>6} {'records':>10} {'wall s':>7} {'rec/s wall':>11} {'rec/s cpu':>10} "
        f"{'/target':>7} {'gen peak':>9} {'pass peak':>9} {'retained':>9} {'live nodes':>10}"
    )
    for mult in (1, 4, 16):
        spec = _spec(args.items * mult)
        n, wall, cpu = speed(spec, args.repeat if mult == 1 else 1)
        gen_peak, peak, retained, live = memory(spec)
        mib = 2**20
        print(
            f"{mult:>5}x {n:>10,} {wall:>7.2f} {n / wall:>11,.0f} {n / cpu:>10,.0f} "
            f"{n / cpu / TARGET:>7.2f} {gen_peak / mib:>8.2f}M {peak / mib:>8.2f}M "
            f"{retained / mib:>8.2f}M {live:>10,}"
        )
    print(
        "gen peak: generating the trace alone; pass peak / retained: generating it while the\n"
        "pass runs (peak, and what is still held at the end); live nodes: path nodes not yet\n"
        "folded into summaries.  Flat memory = pass peak and retained do not grow with length."
    )
    n, wall, cpu = model_speed(args.model_ms, args.repeat)
    print(
        f"model trace (tcp-stream, {args.model_ms:g} ms simulated): {n:,} records, "
        f"{n / wall:,.0f} rec/s wall, {n / cpu:,.0f} rec/s cpu, {n / cpu / TARGET:.2f} of target"
    )


if __name__ == "__main__":
    main()
