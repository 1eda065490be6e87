"""Sweep throughput: local worker scaling and the per-point cost of the Dask path.

    .venv/bin/python bench/bench_sweep.py [--duration 250ms]

1. A 16-point sweep (link.rate × tcp.wmem) with 1 and with 2 local workers;
   target: ≥ 1.7× speed-up on 2 cores (a quiet machine; other load skews it).
2. Trivially short points (sim.duration = 10us) through the local process
   pool and through a Dask LocalCluster with the same number of workers.
   Each path runs a small and a large sweep; the difference divided by the
   extra points is the marginal cost per point, free of start-up time.

Prints figures and ratios; asserts nothing.
"""

from __future__ import annotations

import time

from cpasim.sweeps import sweep_rows
from cpasim.sweeps.executors import cores

RATES = ["1Gbps", "2Gbps", "5Gbps", "10Gbps"]
WINDOWS = ["64KiB", "128KiB", "256KiB", "512KiB"]
#: Simulated time per point of the scaling sweep: about a second of wall time,
#: the size of a real scenario run (``--duration`` changes it).
DURATION = "250ms"
#: Sizes of the two sweeps of trivially short points.
SHORT_POINTS = (16, 400)


def timed(**kwargs) -> tuple[float, int, int]:
    start = time.perf_counter()
    rows, _ = sweep_rows(progress=False, **kwargs)
    elapsed = time.perf_counter() - start
    return elapsed, len(rows), sum(bool(r["error"]) for r in rows)


def main(duration: str = DURATION) -> None:
    n = min(2, cores())

    grid = {"link.rate": RATES, "tcp.wmem": WINDOWS}
    # Fixed buffers: the receive side stays at 64 KiB while the sweep varies the send side.
    sets = [f"sim.duration={duration}", "sim.warmup=0s", "tcp.rmem=64KiB"]
    one, count, failed = timed(grid=grid, sets=sets, workers=1)
    two, _, _ = timed(grid=grid, sets=sets, workers=n)
    print(f"sweep of {count} points (sim.duration={duration}), {failed} failed")
    print(f"  1 worker : {one:7.2f} s  ({one / count * 1e3:6.1f} ms/point)")
    print(f"  {n} workers: {two:7.2f} s  ({two / count * 1e3:6.1f} ms/point)")
    print(f"  speed-up : {one / two:5.2f}x  (target >= 1.7x on 2 idle cores)")

    tiny = ["sim.duration=10us", "sim.warmup=0s"]
    small, large = SHORT_POINTS
    print(f"trivially short points (sim.duration=10us) on {n} workers: {small} and {large} points")
    marginal = {}
    for name, extra in (("local processes", {}), ("Dask LocalCluster", {"dask": "local"})):
        times = []
        for count in SHORT_POINTS:
            grid = {"link.delay": [f"{i}us" for i in range(count)]}
            elapsed, _, _ = timed(grid=grid, sets=tiny, workers=n, **extra)
            times.append(elapsed)
        marginal[name] = (times[1] - times[0]) / (large - small)
        print(
            f"  {name:18}: {times[0]:6.2f} s / {times[1]:6.2f} s, "
            f"start-up ~{times[0] - small * marginal[name]:5.2f} s, "
            f"{marginal[name] * 1e3:6.1f} ms/point"
        )
    local, dask = marginal["local processes"], marginal["Dask LocalCluster"]
    print(f"  Dask extra cost: {(dask - local) * 1e3:+.1f} ms/point, ratio {dask / local:.2f}x")


if __name__ == "__main__":
    import argparse

    from cpasim.errors import script_main

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", default=DURATION, help="simulated time per point")
    raise SystemExit(script_main("bench_sweep", main, parser.parse_args().duration))
