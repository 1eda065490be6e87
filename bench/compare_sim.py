"""Simulation speed at two git revisions: bench_sim.py's cases, run alternately.

    .venv/bin/python bench/compare_sim.py OLD [NEW] [--duration 40ms] [--repeat 3]
        [--tolerance 0.05]

``OLD`` and ``NEW`` (default ``HEAD``) are anything ``git rev-parse`` takes:
committed trees are compared, not uncommitted changes.  Each revision is checked
out with ``git worktree add --detach`` into a temporary directory and served by
a worker process of its own, started with ``PYTHONPATH`` at that checkout, so
``cpasim`` and ``scenarios/tcp-stream.toml`` are the revision's; the measuring
harness (``bench_sim.CASES``, ``case_config`` and ``run_once``) is this
checkout's, the same for both.  The workers are children of this process (one
process group) and run one simulation at a time when asked: case after case,
the two revisions in turn, round after round, so that both see the same machine
load and never compete with each other.  Times are the CPU time of
``simulate()``, best of ``--repeat`` runs.

Per case it prints segments per CPU-second at both revisions and their ratio
NEW / OLD (of the best runs; and the median of the rounds' ratios, steadier where the
machine's speed wanders, each revision going first every other round), events per
segment at both (they differ only when the model's events changed) and whether NEW
is within ``--tolerance`` of OLD (the best runs' ratio); the exit status is 1 when
some case is slower by more than that, 2 on bad input.  The temporary
worktrees are removed on the way out, also after an error, Ctrl-C or SIGTERM.

Not registered by ``bench/run.py`` (which runs ``bench_*.py``): it needs a
revision to compare with.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCENARIO_IN_TREE = Path("scenarios") / "tcp-stream.toml"


# --- worker: one revision's simulations, run when the parent asks -----------------


def worker(tree: Path, duration: str) -> int:
    """Serve runs of bench_sim's cases with the ``cpasim`` of ``tree``.

    Protocol on stdin/stdout, one JSON object a line: first a greeting naming the
    ``cpasim`` imported (or an error), then one reply per case index read.
    """
    reply = sys.stdout
    sys.stdout = sys.stderr  # a stray print in the model must not garble the replies

    def send(obj: dict) -> None:
        reply.write(json.dumps(obj) + "\n")
        reply.flush()

    try:
        import bench_sim  # this checkout's harness; its ``cpasim`` import is the tree's

        import cpasim

        cfgs = [
            bench_sim.case_config(rate, extra, duration, scenario=tree / SCENARIO_IN_TREE)
            for rate, extra in bench_sim.CASES
        ]
    except Exception as exc:  # reported by the parent as one line
        send({"error": f"{type(exc).__name__}: {exc}"})
        return 2
    send({"cpasim": str(Path(cpasim.__file__).resolve())})
    try:
        for line in sys.stdin:
            send(bench_sim.run_once(cfgs[int(line)]))
    except KeyboardInterrupt:
        return 130  # the parent, in the same process group, reports and cleans up
    return 0


# --- parent: worktrees, workers, alternation -----------------------------------------


class Failure(Exception):
    """Bad input or a revision that cannot run the cases: one line, exit 2."""


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise Failure(f"git {' '.join(args)}: {done.stderr.strip() or 'failed'}")
    return done.stdout.strip()


class Revision:
    """One revision checked out in a temporary worktree, with its worker process."""

    def __init__(self, repo: Path, name: str, rev: str, tmp: Path) -> None:
        self.repo, self.name, self.rev = repo, name, rev
        try:
            self.sha = git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
        except Failure:
            raise Failure(f"{rev!r} is not a commit of {repo}") from None
        self.tree = tmp / name
        self.proc: subprocess.Popen | None = None
        git(repo, "worktree", "add", "--detach", "--quiet", str(self.tree), self.sha)

    def start(self, duration: str) -> None:
        env = dict(os.environ, PYTHONPATH=str(self.tree), PYTHONDONTWRITEBYTECODE="1")
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--worker", str(self.tree), duration],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=self.tree,
            env=env,
        )
        hello = self._read()
        if "error" in hello:
            raise Failure(f"{self.rev} ({self.sha[:10]}): {hello['error']}")
        imported = Path(hello["cpasim"])
        if not imported.is_relative_to(self.tree.resolve()):
            raise Failure(
                f"{self.rev}: the worker imported cpasim from {imported}, not from "
                f"{self.tree} (an installed cpasim shadows PYTHONPATH)"
            )

    def run(self, case: int) -> dict:
        self.proc.stdin.write(f"{case}\n")
        self.proc.stdin.flush()
        return self._read()

    def _read(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            raise Failure(f"{self.rev} ({self.sha[:10]}): the worker exited (see above)")
        return json.loads(line)

    def close(self) -> bool:
        """Stop the worker and remove the worktree; False if git could not remove it."""
        if self.proc is not None:
            if self.proc.stdin:
                self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        removed = subprocess.run(
            ["git", "-C", str(self.repo), "worktree", "remove", "--force", str(self.tree)],
            capture_output=True,
        )
        return removed.returncode == 0


def _terminate(signum, frame) -> None:
    raise SystemExit(128 + signum)  # unwinds through the clean-up below


def compare(old: str, new: str, duration: str, repeat: int, tolerance: float) -> int:
    sys.path.insert(0, str(HERE))
    from bench_sim import CASES  # only the labels; the workers import their own copy

    repo = Path(git(HERE, "rev-parse", "--show-toplevel"))
    tmp = Path(tempfile.mkdtemp(prefix="cpasim-compare-"))
    revisions: list[Revision] = []
    signal.signal(signal.SIGTERM, _terminate)
    try:
        for name, rev in (("old", old), ("new", new)):
            revisions.append(Revision(repo, name, rev, tmp))
        for r in revisions:
            r.start(duration)
        best: list[list[dict | None]] = [[None] * len(CASES) for _ in revisions]
        rounds: list[list[float]] = [[] for _ in CASES]  # each round's new/old speed
        for i in range(repeat):
            for case in range(len(CASES)):
                cpu = {}
                # Each revision goes first every other round: neither is always the
                # one that runs after the other has warmed (or cooled) the machine.
                for k in (0, 1) if i % 2 == 0 else (1, 0):
                    f = revisions[k].run(case)
                    cpu[k] = f["cpu_s"]
                    if best[k][case] is None or f["cpu_s"] < best[k][case]["cpu_s"]:
                        best[k][case] = f
                rounds[case].append(cpu[0] / cpu[1])
    finally:
        removed = [r.close() for r in revisions]
        shutil.rmtree(tmp, ignore_errors=True)
        if not all(removed):  # the directory is gone now: drop git's record of it
            subprocess.run(["git", "-C", str(repo), "worktree", "prune"], capture_output=True)

    o, n = revisions
    print(f"old: {o.rev} ({o.sha[:10]})  new: {n.rev} ({n.sha[:10]})  duration {duration}")
    slower = 0
    for (rate, extra), fo, fn, paired in zip(CASES, best[0], best[1], rounds, strict=True):
        ratio = fn["segments_per_s"] / fo["segments_per_s"]
        ok = ratio >= 1 - tolerance
        slower += not ok
        label = f"{rate} {' '.join(extra)}".strip()
        print(
            f"tcp-stream {label}: {fo['segments_per_s']:7,.0f} -> {fn['segments_per_s']:7,.0f} "
            f"segments/s, new/old {ratio:.3f} "
            f"({'within' if ok else 'SLOWER than'} {tolerance:.0%}; median of the "
            f"rounds' ratios {statistics.median(paired):.3f}) | "
            f"events/segment {fo['events_per_segment']:.2f} -> {fn['events_per_segment']:.2f} | "
            f"segments {fo['segments']} -> {fn['segments']}"
        )
    return 1 if slower else 0


def main() -> int:
    if len(sys.argv) == 4 and sys.argv[1] == "--worker":
        return worker(Path(sys.argv[2]), sys.argv[3])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", help="revision to compare against (e.g. main)")
    parser.add_argument("new", nargs="?", default="HEAD", help="revision measured (HEAD)")
    parser.add_argument("--duration", default="40ms", help="simulated time per run")
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure (best kept)")
    parser.add_argument(
        "--tolerance", type=float, default=0.05, help="largest slowdown accepted (0.05: 5%%)"
    )
    args = parser.parse_args()
    try:
        return compare(args.old, args.new, args.duration, args.repeat, args.tolerance)
    except Failure as exc:
        print(f"compare_sim: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
