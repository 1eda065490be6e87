"""Start-up: how long a fresh ``cpasim`` process takes, and where that time goes.

    python bench/bench_startup.py [--repeat 10] [--trace T.cpt]

An answer from an existing trace should take a person well under a second of
waiting (target: ``cpasim predict --trace`` under 1 s end to end).  Records the
baseline trace of ``tcp-stream`` once (``cpasim run ... --trace``, not timed; or
reuses ``--trace``), then times, each ``--repeat`` times in a fresh process, wall
clock (best / median / worst) and the median CPU time (user + system):

- ``python -c pass``: the interpreter's own start-up, the floor of any command;
- ``cpasim --version``: the interpreter, the command line's framework and the
  entry point, no command;
- ``cpasim predict --trace T scenarios/tcp-stream.toml --change link.rate=10Gbps``,
  reusing the trace (the answer from the trace's tail, without re-simulating).

Then where the predict command's time goes, in as many fresh processes under
``python -X importtime`` (which adds its own overhead; medians): the time spent
importing, by the package of each module imported (its own time, not its
imports'), the kernel's machine code loaded from numba's on-disk cache, the rest
of the command (reading the trace's tail, analysing it, predicting, printing), and
before and after it the interpreter starting and shutting down; and, within
those, the time Python spent collecting cycles (``gc.callbacks``).
Python keeps the bytecode it compiles (a first, untimed run writes it), whatever
this process was told, as a user's installation does.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCENARIO = HERE.parent / "scenarios" / "tcp-stream.toml"
CHANGE = "link.rate=10Gbps"
#: ``cpasim predict --trace`` reusing a trace, in a fresh process, end to end.
TARGET_S = 1.0
#: The command as a user runs it: the console script beside this interpreter.
CPASIM = [str(Path(sys.executable).with_name("cpasim"))]

#: Runs the predict command in this process, timing numba's loads from its cache and
#: noting the modules imported during them, and timing Python's collections of
#: cycles; prints ``{"wall": s, "cache_load": s, "loads": n, "imported": [module,
#: ...], "gc": s, "collections": n, "began": t, "ended": t}`` (``time.time()``
#: as the driver begins and once the command is over) on the real stdout as the
#: process's exit handlers run, as the console script ends it.
DRIVER = r"""
import time
began = time.time()
t0 = time.perf_counter()
import atexit, contextlib, gc, io, json, sys
import cpasim.analysis.numba_cache as nc
spent = {"cache_load": 0.0, "loads": 0, "imported": [], "gc": 0.0, "collections": 0}
collection_began = [0.0]
def collecting(phase, info):
    if phase == "start":
        collection_began[0] = time.perf_counter()
    else:
        spent["gc"] += time.perf_counter() - collection_began[0]
        spent["collections"] += 1
gc.callbacks.append(collecting)
_import_kernel = nc.import_kernel
def import_kernel():
    kernel = _import_kernel()
    from numba.core.caching import Cache
    load = Cache.load_overload
    def timed(self, *args, **kwargs):
        before = set(sys.modules)
        t = time.perf_counter()
        try:
            return load(self, *args, **kwargs)
        finally:
            spent["cache_load"] += time.perf_counter() - t
            spent["loads"] += 1
            spent["imported"] += sorted(set(sys.modules) - before)
    Cache.load_overload = timed
    return kernel
nc.import_kernel = import_kernel
from cpasim.cli import console
out = sys.stdout
sys.argv[0] = "cpasim"  # the process is the command's, as when cpasim is run
def over():  # an exit handler: runs after those the command registers (last in, first out)
    spent["wall"] = time.perf_counter() - t0
    spent["began"], spent["ended"] = began, time.time()
    print(json.dumps(spent), file=out, flush=True)
atexit.register(over)
with contextlib.redirect_stdout(io.StringIO()):
    console()
"""

#: Packages whose import time is shown on a line of its own; the rest is "other".
PACKAGES = {
    "cpasim": "cpasim",
    **dict.fromkeys(
        ("typer", "click", "rich", "pydantic", "pydantic_core", "annotated_types"),
        "typer, click, rich (pydantic)",
    ),
    "numpy": "numpy",
    "numba": "numba, llvmlite",
    "llvmlite": "numba, llvmlite",
    "scipy": "scipy",
    "simpy": "simpy",
    "matplotlib": "matplotlib",
    "dask": "dask",
}


def env() -> dict[str, str]:
    """This environment, with Python allowed to keep the bytecode it compiles."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def timed(cmd: list[str]) -> tuple[float, float, subprocess.CompletedProcess]:
    """Wall and CPU seconds (user + system) of ``cmd`` in a fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env(), check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise SystemExit(f"bench_startup: {' '.join(cmd)} failed:\n{done.stderr}")
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall, cpu, done


def fresh(cmd: list[str], repeat: int) -> tuple[list[float], list[float]]:
    """Walls and CPU times of ``repeat`` fresh runs of ``cmd`` (after an untimed one)."""
    timed(cmd)
    runs = [timed(cmd)[:2] for _ in range(repeat)]
    return [w for w, _ in runs], [c for _, c in runs]


def own_times(stderr: str) -> dict[str, float]:
    """Seconds each module took to import itself (not its imports), from ``-X importtime``."""
    own = {}
    for line in stderr.splitlines():
        if line.startswith("import time:") and "imported package" not in line:
            us, _cumulative, name = line[len("import time:") :].split("|")
            own[name.strip()] = int(us) / 1e6
    return own


def import_split(own: dict[str, float]) -> dict[str, float]:
    """Seconds of import time by package."""
    split: dict[str, float] = {}
    for name, s in own.items():
        group = PACKAGES.get(name.split(".")[0], "other (standard library ...)")
        split[group] = split.get(group, 0.0) + s
    return split


def where(cmd: list[str], repeat: int) -> tuple[dict[str, float], dict]:
    """Medians over ``repeat`` fresh runs of the predict command ``cmd`` (its arguments
    after ``cpasim``) under ``-X importtime``: import time by package, and the driver's
    figures (whole wall; numba's cache loads, besides the imports made during them, which
    are numba's registries of what it can compile, and the time of those imports)."""
    run = [sys.executable, "-X", "importtime", "-c", DRIVER, *cmd]
    splits, figures = [], []
    for _ in range(repeat):
        started = time.time()
        _, _, done = timed(run)
        over = time.time()
        own = own_times(done.stderr)
        splits.append(import_split(own))
        got = json.loads(done.stdout.splitlines()[-1])
        got["start"] = got.pop("began") - started
        got["shutdown"] = over - got.pop("ended")
        got["load_imports"] = sum(own.get(m, 0.0) for m in got.pop("imported"))
        got["cache_load"] -= got["load_imports"]
        figures.append(got)
    groups = sorted({g for s in splits for g in s})
    split = {g: statistics.median(s.get(g, 0.0) for s in splits) for g in groups}
    keys = figures[0].keys()
    return split, {k: statistics.median(f[k] for f in figures) for k in keys}


def ms(s: float) -> str:
    return f"{s * 1e3:7.0f} ms"


def row(label: str, walls: list[float], cpus: list[float]) -> str:
    return (
        f"{label:<34} best {ms(min(walls))}  median {ms(statistics.median(walls))}  "
        f"worst {ms(max(walls))}  CPU {ms(statistics.median(cpus))}"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=10, help="fresh runs of each (default 10)")
    ap.add_argument("--trace", type=Path, help="a trace of tcp-stream to reuse (else made)")
    args = ap.parse_args(argv)
    print(f"load (uptime) {os.getloadavg()[0]:.2f} at start", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        trace = args.trace or Path(tmp) / "base.cpt"
        if not trace.exists():
            timed([*CPASIM, "run", str(SCENARIO), "--trace", str(trace), "--json"])
        predict = ["predict", "--trace", str(trace), str(SCENARIO), "--change", CHANGE]
        pass_w, pass_c = fresh([sys.executable, "-c", "pass"], args.repeat)
        ver_w, ver_c = fresh([*CPASIM, "--version"], args.repeat)
        pred_w, pred_c = fresh([*CPASIM, *predict], args.repeat)
        split, figures = where(predict, args.repeat)
    print(f"fresh processes, {args.repeat} runs each (wall; CPU = user + system, median):")
    print(row("python -c pass", pass_w, pass_c))
    print(row("cpasim --version", ver_w, ver_c))
    print(row("cpasim predict --trace (reused)", pred_w, pred_c))
    met = "meets" if statistics.median(pred_w) < TARGET_S else "misses"
    print(f"{'':<34} target < {TARGET_S * 1e3:.0f} ms (median): {met}")
    imports = sum(split.values())
    print(f"where cpasim predict's time goes (python -X importtime, median of {args.repeat}):")
    for group, s in sorted(split.items(), key=lambda kv: -kv[1]):
        print(f"  {'importing ' + group:<40} {ms(s)}")
    print(f"  {'imports in all':<40} {ms(imports)}")
    print(
        f"  {'  of which while numba loads the kernel':<40} {ms(figures['load_imports'])}"
        "  (numba's registries of what it compiles)"
    )
    print(
        f"  {'numba loading the kernel from cache':<40} {ms(figures['cache_load'])}"
        f"  ({figures['loads']:.0f} functions, besides those imports)"
    )
    rest = figures["wall"] - imports - figures["cache_load"]
    print(f"  {'the command besides (read, analyse, ...)':<40} {ms(max(0.0, rest))}")
    print(f"  {'from the first import to the end':<40} {ms(figures['wall'])}")
    print(
        f"  {'  of which Python collecting cycles':<40} {ms(figures['gc'])}"
        f"  ({figures['collections']:.0f} collections, within the lines above)"
    )
    print(f"  {'before it: starting the interpreter':<40} {ms(figures['start'])}")
    print(f"  {'after it: the interpreter shutting down':<40} {ms(figures['shutdown'])}")
    print(f"load (uptime) {os.getloadavg()[0]:.2f} at end")
    return 0


if __name__ == "__main__":
    from cpasim.errors import script_main

    raise SystemExit(script_main("bench_startup", main))
