"""Run every benchmark in ``bench/`` and print their figures.

    python bench/run.py            # all benchmarks
    python bench/run.py sim tracing  # only bench_sim.py and bench_tracing.py

Each benchmark is a plain script that prints figures and ratios measured in
one process; this runner only calls them one after the other so that they do
not compete for the machine's cores.
"""

from __future__ import annotations

import runpy
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(names: list[str]) -> int:
    scripts = sorted(HERE.glob("bench_*.py"))
    if names:
        wanted = {f"bench_{n}.py" for n in names}
        unknown = wanted - {s.name for s in scripts}
        if unknown:
            print(
                f"bench: unknown benchmark(s): {', '.join(sorted(unknown))}; "
                f"have: {', '.join(s.stem[6:] for s in scripts)}",
                file=sys.stderr,
            )
            return 2
        scripts = [s for s in scripts if s.name in wanted]
    for script in scripts:
        print(f"== {script.stem} ==", flush=True)
        started = time.perf_counter()
        sys.argv = [str(script)]  # each benchmark's own defaults, not the runner's arguments
        try:
            runpy.run_path(str(script), run_name="__main__")
        except SystemExit as end:  # a benchmark ends with its status: 0 goes on
            if end.code:
                return end.code if isinstance(end.code, int) else 2
        print(f"   ({time.perf_counter() - started:.1f} s)\n", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
