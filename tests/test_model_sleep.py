"""Waits that need no event (:meth:`Kernel.sleep`) change nothing a run produces.

The model's processes wait for their work, DMAs, the controller, the MAC and the
copy engine with ``Kernel.sleep``, which goes on without a SimPy event when that
event would have been the next one processed anyway.  A run must come out exactly
as with a timeout for every wait: the same result (but for the events counted) and
the same trace, chunk for chunk.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cpasim.config import load_scenario
from cpasim.model.environment import Kernel
from cpasim.simulate import simulate
from cpasim.tracing import Tracer

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"


def _run(cfg):
    tracer = Tracer.in_memory(None, chunk_records=7)  # many chunks, each ending between events
    result = simulate(cfg, tracer=tracer).to_json()
    tracer.close()
    result.pop("wall_s")
    return result.pop("events"), result, [c.tobytes() for c in tracer.sink.chunks]


QUICK = [
    ("tcp-stream.toml", ["sim.duration=2ms"]),
    ("udp-stream.toml", ["sim.duration=600us"]),  # M5's bus
    ("rx-copy-engine.toml", ["sim.duration=800us", "memory.bandwidth=2GB/s"]),
]
#: Every shipped scenario, long enough for its workload to get going.
SHIPPED = [
    pytest.param(
        path.name,
        ["sim.duration=30ms" if path.stem.startswith("flows") else "sim.duration=5ms"],
        marks=pytest.mark.slow,
        id=path.stem,
    )
    for path in sorted(SCENARIOS.glob("*.toml"))
]


@pytest.mark.parametrize(("scenario", "sets"), [*QUICK, *SHIPPED])
def test_a_run_is_the_same_with_a_timeout_for_every_wait(scenario, sets, monkeypatch):
    cfg = load_scenario(SCENARIOS / scenario, sets=[*sets, "sim.warmup=200us"])
    events, result, chunks = _run(cfg)
    monkeypatch.setattr(Kernel, "sleep", Kernel.timeout)
    timed_events, timed_result, timed_chunks = _run(cfg)
    assert result == timed_result
    assert chunks == timed_chunks
    assert events < 0.97 * timed_events
