"""Answering a what-if from an existing trace vs re-simulating the change.

    python bench/bench_predict.py      (or: python bench/run.py predict)

Records the baseline's trace once (not timed), then times ``predict`` from it
against ``simulate`` of the changed configuration without tracing, the
cheapest way to get the answer by re-simulation:

- ``predict``: the default, over the trace's tail (the window its sidecar
  snapshots, :mod:`cpasim.predict.window`), in this process;
- ``predict --whole``: over the whole measured interval;
- the ``cpasim predict --trace`` command as a user runs it, a fresh process
  (interpreter start and imports included, bytecode kept as Python keeps it), against
  ``cpasim run`` of the change; target: under a second.

Each is the best of ``REPEAT`` runs.  Saidi's analysis took minutes where his
detailed simulations took hours; the target here is predict >= 20x faster.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cpasim.config import load_scenario
from cpasim.predict.runs import traced_run
from cpasim.predict.whatif import changed_config, predict
from cpasim.simulate import simulate

HERE = Path(__file__).resolve().parent
SCENARIO = HERE.parent / "scenarios" / "tcp-stream.toml"
CHANGE = ("link.rate", "10Gbps")  # the seed's first step
TARGET = 20.0
#: ``cpasim predict --trace`` reusing a trace, in a fresh process, end to end.
FRESH_TARGET_S = 1.0
REPEAT = 3
CLI = [str(Path(sys.executable).parent / "cpasim")]


def best(fn) -> tuple[float, object]:
    times, out = [], None
    for _ in range(REPEAT):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def fresh(cmd: list[str]) -> tuple[float, float]:
    """Best wall and CPU seconds (user + system, the machine's load counted less) of
    ``cmd`` in a fresh process, as a user runs it: Python may keep its bytecode (a
    first run writes it, and is not timed), whatever this process was told."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run(cmd, capture_output=True, check=True, env=env)
    walls, cpus = [], []
    for _ in range(REPEAT):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(cmd, capture_output=True, check=True, env=env)
        walls.append(time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return min(walls), min(cpus)


def verdict(ratio: float) -> str:
    return f"{ratio:6.1f}x (target >= {TARGET:g}x: {'meets' if ratio >= TARGET else 'misses'})"


def main() -> None:
    key, value = CHANGE
    cfg = load_scenario(SCENARIO)
    new = changed_config(cfg, {key: value})
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "base.cpt"
        t0 = time.perf_counter()
        run = traced_run(cfg, trace)
        record_s = time.perf_counter() - t0
        size = trace.stat().st_size
        tail_s, tail = best(lambda: predict(run, new))
        whole_s, whole = best(lambda: predict(run, new, whole=True))
        cli = [*CLI, "predict", str(SCENARIO), "--change", f"{key}={value}", "--trace", str(trace)]
        cli_s, cli_cpu = fresh(cli)
        cli_pred = json.loads(
            subprocess.run([*cli, "--json"], capture_output=True, text=True, check=True).stdout
        )["predicted_goodput_bps"]
    sim_s, res = best(lambda: simulate(new))
    run_cli = [*CLI, "run", str(SCENARIO), "--set", f"{key}={value}", "--json"]
    run_cli_s, run_cli_cpu = fresh(run_cli)
    got = res.goodput_bps / 1e6
    lo, hi = tail.analysed_ns
    print(f"scenario            {SCENARIO.name}, change {key}={value}")
    print(f"baseline            recorded in {record_s:.2f} s, trace {size / 1e6:.1f} MB")
    print(
        f"predict (tail)      {tail_s * 1e3:7.1f} ms -> {tail.predicted / 1e6:.1f} Mb/s"
        f"  (analyses {lo / 1e6:g}-{hi / 1e6:g} ms of the run)"
    )
    print(f"predict --whole     {whole_s * 1e3:7.1f} ms -> {whole.predicted / 1e6:.1f} Mb/s")
    print(f"re-simulate         {sim_s * 1e3:7.1f} ms -> {got:.1f} Mb/s ({res.events} events)")
    print(
        f"cpasim predict      {cli_s * 1e3:7.1f} ms -> {cli_pred / 1e6:.1f} Mb/s (fresh process; "
        f"CPU {cli_cpu * 1e3:.0f} ms; target < {FRESH_TARGET_S * 1e3:.0f} ms: "
        f"{'meets' if cli_s < FRESH_TARGET_S else 'misses'})"
    )
    print(
        f"cpasim run          {run_cli_s * 1e3:7.1f} ms "
        f"(fresh process; CPU {run_cli_cpu * 1e3:.0f} ms)"
    )
    print(f"speed-up (tail)     {verdict(sim_s / tail_s)}")
    print(f"speed-up (whole)    {verdict(sim_s / whole_s)}")
    print(f"speed-up (commands) {verdict(run_cli_s / cli_s)}")


if __name__ == "__main__":
    from cpasim.errors import script_main

    raise SystemExit(script_main("bench_predict", main))
