"""Levels of detail against ns-3: tcp-stream at 1 Gb/s, segments per second side by side.

Runs the shipped ``tcp-stream`` scenario at 1 Gb/s (``nic.itr=off``, as
bench_sim.py) with both hosts ideal (``host.detail=ideal``) and full, and ns-3
simulating the same network (``bench/ns3_tcp_stream.py``) in a worker process of
its own, round after round in turn, so that all three see the same machine load.
Times are CPU time of the simulation alone (best of ``--repeat``); wall figures are
printed too.  Prints segments per second and events per segment for each, and the
ratio of cpasim's ideal level to ns-3 (target >= 1.0).

ns-3 runs under an interpreter that has its bindings (``pip install ns3``, the
registry's wheel, into a virtual environment of its own): ``--ns3-python PATH``, or
``$CPASIM_NS3_PYTHON``, or this interpreter if it has them.  Without one the ns-3
figures are skipped with a line saying so; ``--setup-ns3 DIR`` makes one (a venv at
DIR with ``ns3`` installed) and uses it.

    .venv/bin/python bench/bench_detail.py [--duration 200ms] [--repeat 3]
        [--ns3-python PATH | --setup-ns3 DIR] [--events]

``--events`` also lists, per level, the events per segment by kind and by the
process each wakes, and the waits of the processes by why each needed an event or
that it needed none (:meth:`Kernel.sleep <cpasim.model.environment.Kernel.sleep>`)
(a separate, untimed run of each).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import venv
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
NS3_SCRIPT = HERE / "ns3_tcp_stream.py"
#: The two levels, as --set overrides of bench_sim's 1 Gb/s case.
LEVELS = {"ideal": ["host.detail=ideal"], "full": []}
TARGET_RATIO = 1.0


def ns3_python(given: str | None) -> tuple[str | None, str]:
    """The interpreter with ns-3's bindings, or None and why not."""
    chosen = given or os.environ.get("CPASIM_NS3_PYTHON")
    if chosen:
        if not Path(chosen).exists():
            return None, f"{chosen}: no such interpreter"
        return chosen, chosen
    if importlib.util.find_spec("ns") is not None:
        return sys.executable, sys.executable
    return None, (
        "not installed: pip install ns3 into a virtual environment and pass "
        "--ns3-python VENV/bin/python (or set CPASIM_NS3_PYTHON), or run with "
        "--setup-ns3 DIR"
    )


def setup_ns3(directory: Path) -> str:
    """A venv at ``directory`` with the registry's ``ns3`` wheel; its interpreter."""
    python = directory / "bin" / "python"
    if not python.exists():
        venv.create(directory, with_pip=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", "ns3"], check=True)
    return str(python)


class Ns3Worker:
    """ns-3's tcp-stream in a child process, one run per request (its bindings' start-up,
    about 20 s, is paid once and not timed)."""

    def __init__(self, python: str, duration: str) -> None:
        self.proc = subprocess.Popen(
            [python, str(NS3_SCRIPT), "--serve", "--duration", duration],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,  # cling's notes on static initializers
            text=True,
        )
        hello = self._reply()
        self.error = hello.get("error") if hello else "the ns-3 worker exited"

    def _reply(self) -> dict | None:
        line = self.proc.stdout.readline()
        return json.loads(line) if line else None

    def run(self) -> dict:
        self.proc.stdin.write("run\n")
        self.proc.stdin.flush()
        reply = self._reply()
        if reply is None:
            raise RuntimeError("the ns-3 worker exited during a run")
        return reply

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=60)


#: Why a process's wait needed a SimPy event (:func:`count_events`), in the order shown.
WAIT_CAUSES = {
    "woken": "woken by another state machine (a get, a core, a frame nobody had sent yet)",
    "earlier": "another event due before it",
    "tie": "another event due at the same instant, scheduled before it (FIFO)",
    "shared": "another callback of the event that resumed it still to run",
    "pause": "past the slice of the run being processed",
    "timeout": "a timeout yielded as such (not through Kernel.sleep)",
    "none": "none: nothing came first, the clock moved on (Kernel.sleep)",
}


@dataclass
class EventCounts:
    """One run's events and waits, each per data segment (:func:`count_events`)."""

    result: object
    by_waiter: list[tuple[str, float]]  # ("kind -> process or callback woken", events)
    waits: dict[str, float]  # WAIT_CAUSES key -> the processes' waits for that reason
    no_event: dict[str, float]  # process -> its waits that went on without an event
    ties: float  # events processed while another was due at the same instant


def count_events(cfg) -> EventCounts:
    """Where a run's events go, counted event by event (an untraced run): each event
    named by its kind and what it wakes (the process, or a carrier's callback), and
    each wait of a process by why it needed an event, or that it needed none.
    scripts/figures shows these for docs/detail-levels.md."""
    from collections import Counter
    from heapq import heappop

    from simpy.events import PENDING

    from cpasim.model import environment
    from cpasim.simulate import simulate

    counts: Counter = Counter()
    waits: Counter = Counter()
    no_event: Counter = Counter()
    ties = 0

    def run_until(env, t):  # Kernel.run_until, counting
        nonlocal ties
        queue = env._queue
        env._until = t  # as the Kernel's own loop: Kernel.sleep looks at both
        while queue and queue[0][0] < t:
            env._now, _, _, event = heappop(queue)
            callbacks, event.callbacks = event.callbacks, None
            env._callbacks = callbacks
            ties += bool(queue) and queue[0][0] == env._now
            owners = [getattr(c, "__self__", None) for c in callbacks]
            procs = [o for o in owners if isinstance(o, environment._Process)]
            if procs:  # the process it resumes (a bounded store's get also serves puts)
                woken = procs[0]._generator.__qualname__
            else:
                woken = getattr(callbacks[0], "__qualname__", "?") if callbacks else "-"
            counts[f"{type(event).__name__.lstrip('_')} -> {woken}"] += 1
            for callback in callbacks:
                callback(event)
        env._until, env._callbacks = float("-inf"), (None,)
        return True

    def cause(proc, event) -> str | None:
        """Why ``proc``, yielding ``event``, waits for an event (None: it does not)."""
        if event.callbacks is None:
            return None  # already processed: Kernel.sleep's, counted there
        if event._value is PENDING:
            return "woken"
        env = proc.env
        queue = env._queue
        at = next(entry[0] for entry in queue if entry[3] is event)
        if env._callbacks[-1] is not proc._resume:
            return "shared"
        if queue[0][0] < at:
            return "earlier"
        if queue[0][3] is not event:
            return "tie"
        return "pause" if at >= env._until else "timeout"

    def process(env, generator):
        proc = plain_process(env, generator)
        send = proc._send

        def watched(value):
            event = send(value)
            why = cause(proc, event)
            if why is not None:
                waits[why] += 1
            return event

        proc._send = watched
        return proc

    def sleep(env, delay):
        event = plain_sleep(env, delay)
        if event is environment.GONE_ON:
            waits["none"] += 1
            no_event[env._active_proc._generator.__qualname__] += 1
        return event

    kernel = environment.Kernel
    plain_run, plain_process, plain_sleep = kernel.run_until, kernel.process, kernel.sleep
    kernel.run_until, kernel.process, kernel.sleep = run_until, process, sleep
    try:
        result = simulate(cfg)
    finally:
        kernel.run_until, kernel.process, kernel.sleep = plain_run, plain_process, plain_sleep
    n = result.frames["tx_to_rx"]
    return EventCounts(
        result,
        [(what, k / n) for what, k in counts.most_common()],
        {why: waits[why] / n for why in WAIT_CAUSES if waits[why]},
        {who: k / n for who, k in no_event.most_common()},
        ties / n,
    )


def events_by_waiter(cfg) -> tuple[object, list[tuple[str, float]]]:
    """Where a run's events go: (its result, [(what, events per segment)]), each event
    named by its kind and what it wakes (:func:`count_events`)."""
    counts = count_events(cfg)
    return counts.result, counts.by_waiter


def line(name: str, f: dict) -> str:
    return (
        f"{name:14s} goodput {f['goodput_Mbps']:6.1f} Mb/s | {f['segments']:6d} segments, "
        f"{f['events_per_segment']:5.2f} events/segment | CPU {f['cpu_s']:.3f} s "
        f"(wall {f['wall_s']:.3f} s) | {f['segments_per_s']:8,.0f} segments/CPU-s, "
        f"{f['segments'] / f['wall_s']:8,.0f} segments/wall-s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", default="200ms", help="simulated time per run")
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure (best kept)")
    parser.add_argument("--ns3-python", default=None, help="interpreter with ns-3's bindings")
    parser.add_argument("--setup-ns3", type=Path, default=None, help="make one in this venv")
    parser.add_argument(
        "--events", action="store_true", help="also list where each level's events go"
    )
    args, _ = parser.parse_known_args()  # bench/run.py passes its own arguments on
    sys.path.insert(0, str(HERE))
    from bench_sim import case_config, run_once

    cfgs = {
        level: case_config("1Gbps", ["nic.itr=off", *sets], args.duration)
        for level, sets in LEVELS.items()
    }
    given = str(setup_ns3(args.setup_ns3)) if args.setup_ns3 else args.ns3_python
    python, why = ns3_python(given)
    worker = None
    if python is not None:
        worker = Ns3Worker(python, args.duration)
        if worker.error:
            why = f"{python}: {worker.error}"
            worker.close()
            worker = None
    best: dict[str, dict] = {}
    try:
        for _ in range(args.repeat):
            for level, cfg in cfgs.items():
                f = run_once(cfg)
                if level not in best or f["cpu_s"] < best[level]["cpu_s"]:
                    best[level] = f
            if worker is not None:
                f = worker.run()
                if "ns-3" not in best or f["cpu_s"] < best["ns-3"]["cpu_s"]:
                    best["ns-3"] = f
    finally:
        if worker is not None:
            worker.close()
    print(f"tcp-stream at 1 Gb/s, {args.duration} simulated, best of {args.repeat}")
    for level in LEVELS:
        print(line(f"cpasim {level}", best[level]))
    ideal, full = best["ideal"], best["full"]
    print(
        f"ideal / full: {ideal['segments_per_s'] / full['segments_per_s']:.2f}x segments/CPU-s, "
        f"events/segment {ideal['events_per_segment']:.2f} against {full['events_per_segment']:.2f}"
    )
    if args.events:
        for level, cfg in cfgs.items():
            counts = count_events(cfg)
            segments = counts.result.frames["tx_to_rx"]
            print(f"events per segment, {level} ({segments} segments):")
            for what, per in counts.by_waiter:
                if per >= 0.01:
                    print(f"  {per:6.2f}  {what}")
            print(f"waits of a process per segment, {level}, by why each needed an event:")
            for cause, per in counts.waits.items():
                if per >= 0.01:
                    print(f"  {per:6.2f}  {WAIT_CAUSES[cause]}")
            for who, per in counts.no_event.items():
                if per >= 0.01:
                    print(f"  {per:6.2f}    none: {who}")
            print(f"  {counts.ties:6.2f}  events processed with another due at the same instant")
    if "ns-3" not in best:
        print(f"ns-3: skipped ({why})")
        return
    ns3 = best["ns-3"]
    print(line("ns-3", ns3))
    ratio = ideal["segments_per_s"] / ns3["segments_per_s"]
    wall = (ideal["segments"] / ideal["wall_s"]) / (ns3["segments"] / ns3["wall_s"])
    print(
        f"cpasim ideal / ns-3: {ratio:.2f}x segments/CPU-s (target {TARGET_RATIO}: "
        f"{'met' if ratio >= TARGET_RATIO else 'not met'}), {wall:.2f}x segments/wall-s; "
        f"full / ns-3: {full['segments_per_s'] / ns3['segments_per_s']:.2f}x"
    )


if __name__ == "__main__":
    from cpasim.errors import script_main

    raise SystemExit(script_main("bench_detail", main))
