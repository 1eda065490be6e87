"""``import cpasim``: the functions, their arguments and their result objects."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import simpy

import cpasim
from cpasim.errors import CpasimError

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "scenarios" / "tcp-stream.toml"
SHORT = {"sim.duration": "4ms", "sim.warmup": "1ms"}
FUNCTIONS = ("load", "run", "analyze", "predict", "validate", "sweep", "calibrate")


def _python(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )


def test_dir_lists_the_api_and_every_name_resolves():
    names = dir(cpasim)
    for name in cpasim.__all__:
        assert name in names
        assert getattr(cpasim, name) is not None
    for name in FUNCTIONS:
        assert callable(getattr(cpasim, name)), name
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        cpasim.nothing  # noqa: B018


def test_import_loads_nothing_heavy():
    code = (
        "import sys, cpasim\n"
        "heavy = [m for m in ('numpy', 'simpy', 'rich', 'pandas', 'numba', 'cpasim.api') "
        "if m in sys.modules]\n"
        "print(heavy)"
    )
    done = _python("-c", code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.slow
def test_predict_and_calibrate_stay_functions_after_their_subpackages_load():
    done = _python(
        "-c",
        "import cpasim, cpasim.predict.runs, cpasim.calibrate.fit\n"
        "from cpasim.predict import ladder\n"
        "print(callable(cpasim.predict), callable(cpasim.calibrate), ladder.__name__)",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True", "cpasim.predict.ladder"]


def test_a_scenario_from_a_file_a_dict_or_overrides_is_the_same_run():
    by_keywords = cpasim.run(SCENARIO, **SHORT, **{"link.rate": "100Mbps"})
    by_overrides = cpasim.run(SCENARIO, overrides={**SHORT, "link.rate": "100Mbps"})
    as_dict = {**cpasim.load(SCENARIO).flat(), **SHORT, "link.rate": "100Mbps"}
    from_dict = cpasim.run({k: v for k, v in as_dict.items() if not isinstance(v, float)})
    assert by_keywords.config.digest == by_overrides.config.digest
    assert by_keywords.config.link.rate == 100e6
    assert by_keywords.to_dict() == {**by_overrides.to_dict(), "wall_s": by_keywords.wall_s}
    assert by_keywords.goodput_bps == by_overrides.goodput_bps
    assert from_dict.config.link.rate == 100e6


def test_nested_and_dotted_dicts_are_the_same_scenario():
    nested = cpasim.load({"link": {"rate": "10Gbps"}, "tcp": {"wmem": "1MiB"}})
    dotted = cpasim.load({"link.rate": "10Gbps", "tcp.wmem": "1MiB"})
    assert nested.digest == dotted.digest
    assert nested.digest != cpasim.load().digest


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: cpasim.run(SCENARIO, **{"link.rat": "1Gbps"}), "link.rat"),
        (lambda: cpasim.run({"link": {"rate": "fast"}}), "link.rate"),
        (lambda: cpasim.run(42), "expected a file path, a dict or a Config"),
        (lambda: cpasim.run(ROOT / "nope.toml"), "nope.toml: scenario file not found"),
        (lambda: cpasim.predict(SCENARIO, {}), "give at least one key"),
        (lambda: cpasim.analyze(cpasim.run(overrides=SHORT)), "recorded no trace"),
        (lambda: cpasim.analyze(3.5), "expected a run result"),
        (lambda: cpasim.analyze("x.cpt", scale="tx:*"), "scale: expected a dict"),
    ],
)
def test_bad_input_is_one_line_naming_it(call, message):
    with pytest.raises(CpasimError, match=message) as info:
        call()
    assert "\n" not in str(info.value)


def test_a_run_traced_in_memory_or_to_a_file_analyses_the_same(tmp_path):
    in_memory = cpasim.run(SCENARIO, overrides=SHORT, trace=True)
    on_disk = cpasim.run(SCENARIO, overrides=SHORT, trace=tmp_path / "r.cpt")
    assert on_disk.trace == tmp_path / "r.cpt" and on_disk.trace.exists()
    assert in_memory.goodput_bps == on_disk.goodput_bps  # tracing changes nothing
    a = cpasim.analyze(in_memory)
    b = cpasim.analyze(tmp_path / "r.cpt", "tx:App", "rx:App")
    assert a.to_dict() == b.to_dict()
    assert a.critical_path_ns == pytest.approx(a.elapsed_ns, rel=1e-3)
    half = cpasim.analyze(in_memory, scale={"tx:MAC:transmit": 0.5})
    assert half.critical_path_ns < a.critical_path_ns
    assert half.transforms and not a.transforms


def test_results_are_plain_data_and_frames():
    r = cpasim.run(SCENARIO, overrides=SHORT, trace=True)
    assert json.loads(json.dumps(r.to_dict())) == r.to_dict()
    a = cpasim.analyze(r)
    json.dumps(a.to_dict())
    top = a.to_frame()
    assert list(top.columns[:2]) == ["name", "share"]
    assert list(top["name"]) == [m["name"] for m in a.most_critical]
    for table in ("loops", "edges", "slack", "profile", "queues"):
        assert len(a.to_frame(table)) == len(getattr(a, table)), table
    with pytest.raises(CpasimError, match="expected one of most_critical"):
        a.to_frame("nothing")


def test_to_frame_without_pandas_says_how_to_install_it(monkeypatch):
    table = cpasim.SweepResult([{"link.rate": "1Gbps", "error": None}], ["link.rate"])
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match="pip install pandas"):
        table.to_frame()
    assert table.to_dict()["rows"] == [{"link.rate": "1Gbps", "error": None}]


def test_sweep_result_rows_columns_and_errors():
    table = cpasim.sweep(
        {"sim.duration": "2ms", "sim.warmup": "500us"},
        grid={"link.rate": ["100Mbps", "1Gbps"], "sim.warmup": ["500us", "3ms"]},
        workers=1,
        progress=False,
    )
    assert table.keys == ["link.rate", "sim.warmup"]
    assert len(table) == 4
    assert table.column("link.rate") == ["100Mbps", "100Mbps", "1Gbps", "1Gbps"]
    # A warm-up longer than the run fails its points, each as its own row.
    assert [r["sim.warmup"] for r in table.errors] == ["3ms", "3ms"]
    assert all("sim.warmup" in r["error"] for r in table.errors)
    assert all(r["goodput_bps"] > 0 for r in table.rows if not r["error"])
    frame = table.to_frame()
    assert list(frame.columns[:5]) == ["link.rate", "sim.warmup", "repeat", "seed", "error"]


def test_tracer_and_traced_primitives_from_the_top_level():
    env = simpy.Environment()
    tracer = cpasim.Tracer.in_memory(env)
    pool = cpasim.TracedPool(env, tracer, "a", "Cores", size=1)

    def worker(name):
        sm = tracer.sm("a", name)
        for _ in range(3):
            sm.begin("wait")
            yield pool.acquire(sm)
            sm.begin("run")
            yield env.timeout(10)
            pool.release(sm)

    env.process(worker("W1"))
    env.process(worker("W2"))
    env.run()
    tracer.close()
    a = cpasim.analyze(tracer, "a:W1", "a:W2")
    assert a.critical_path_ns == 60.0  # six runs of 10 on one core, back to back
    faster = cpasim.analyze(tracer, "a:W1", "a:W2", scale={"a:W*:run": 0.5})
    assert faster.critical_path_ns == 30.0
    # Without the shared core nothing ties W2 to W1.
    assert not cpasim.analyze(tracer, "a:W1", "a:W2", breaks="a:Cores").reachable


@pytest.mark.slow
def test_version_and_completion_on_the_command_line():
    done = _python("-m", "cpasim", "--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"cpasim {cpasim.__version__}"
    helped = _python("-m", "cpasim", "--help")
    assert "--install-completion" in helped.stdout and "--version" in helped.stdout
