"""Answering a what-if from an existing trace vs re-simulating the change.

    python bench/bench_predict.py      (or: python bench/run.py predict)

Records the baseline's trace once (not timed), then times ``predict`` from it
(one analysis pass with the change's transforms; the baseline's own analysis
is stored in the trace's sidecar) against ``simulate`` of the changed
configuration without tracing, the cheapest way to get the answer by
re-simulation.  Saidi's analysis took minutes where his detailed simulations
took hours; the target here is predict >= 20x faster.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from cpasim.config import load_scenario
from cpasim.predict.predict import changed_config, predict
from cpasim.predict.runs import traced_run
from cpasim.simulate import simulate

HERE = Path(__file__).resolve().parent
SCENARIO = HERE.parent / "scenarios" / "tcp-stream.toml"
CHANGE = ("link.rate", "10Gbps")  # the seed's first step
TARGET = 20.0


def main() -> None:
    scenario = SCENARIO
    key, value = CHANGE
    cfg = load_scenario(scenario)
    new = changed_config(cfg, {key: value})
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        run = traced_run(cfg, Path(tmp) / "base.cpt")
        record_s = time.perf_counter() - t0
        size = run.trace.stat().st_size
        t0 = time.perf_counter()
        p = predict(run, new)
        predict_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    res = simulate(new)
    sim_s = time.perf_counter() - t0
    print(f"scenario          {scenario.name}, change {key}={value}")
    print(f"baseline          recorded and analysed in {record_s:.2f} s, trace {size / 1e6:.1f} MB")
    print(f"predict           {predict_s:.2f} s  -> {p.predicted / 1e6:.1f} Mb/s")
    got = res.goodput_bps / 1e6
    print(f"re-simulate       {sim_s:.2f} s  -> {got:.1f} Mb/s ({res.events} events)")
    ratio = sim_s / predict_s if predict_s > 0 else float("inf")
    verdict = "meets" if ratio >= TARGET else "misses"
    print(f"speed-up          {ratio:.2f}x (target >= {TARGET:g}x: {verdict})")


if __name__ == "__main__":
    main()
