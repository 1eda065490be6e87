"""Bad input of every kind ends in one ``cpasim: error:`` line and exit status 2.

Each case here was found by mutating real scenarios, captures and iperf3 reports
and once ended in a traceback (or a silent wrong answer); the fuzzing itself is
in ``test_fuzz_inputs.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cpasim.cli import main

ROOT = Path(__file__).resolve().parent.parent
TCP = str(ROOT / "scenarios" / "tcp-stream.toml")


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    """Run the command line in-process: (exit status, stdout, stderr).  Anything but
    SystemExit escapes, so a traceback fails the test."""
    try:
        main(list(argv))
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


def refused(capsys, *argv: str) -> str:
    """The one error line of a refused command (asserts exit 2 and nothing else)."""
    code, _, err = cli(capsys, *argv)
    assert code == 2, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("cpasim: error: "), err
    return lines[0]


# --- quantities and --set values ---------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("link.delay", "9e999995s"),  # decimal.Overflow
        ("link.delay", "1e999999999999999999999s"),  # exponent past decimal's own limit
        ("link.rate", "9e999995Gbps"),
        ("tcp.wmem", "9e999995KiB"),
        ("cpu.freq", "1e999999999999999999999GHz"),
        ("link.delay", "9e999995"),  # a TOML float: inf
    ],
)
def test_quantity_beyond_any_float(capsys, key, value):
    line = refused(capsys, "params", "-s", TCP, "--set", f"{key}={value}")
    assert key in line and "expected a finite" in line


@pytest.mark.parametrize("key", ["link.delay", "link.mtu", "tcp.cc", "cpu.cores", "tcp.sack"])
def test_set_integer_beyond_python_digit_limit(capsys, key):
    line = refused(capsys, "params", "-s", TCP, "--set", f"{key}=1{'0' * 5000}")
    assert f"--set {key}" in line and "4300 digits" in line


@pytest.mark.parametrize("nested", ["[" * 1000 + "]" * 1000, "{a=" * 600 + "1" + "}" * 600])
def test_set_value_nested_too_deeply(capsys, nested):
    line = refused(capsys, "params", "-s", TCP, "--set", f"link.delay={nested}")
    assert "--set link.delay" in line and "nested too deeply" in line


def test_grid_value_nested_too_deeply(capsys):
    line = refused(capsys, "sweep", TCP, "--grid", "link.delay=" + "[" * 1000 + "]" * 1000)
    assert "--grid link.delay" in line and "nested too deeply" in line


# --- scenario files ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[" + ".".join(["a"] * 3000) + "]\nx = 1\n", "unknown key"),  # RecursionError
        (".".join(["link"] * 1200) + " = 1\n", "unknown key"),
        ("[link]\ndelay = " + "[" * 1000 + "]" * 1000 + "\n", "nested too deeply"),
        ("[link]\nmtu = 1" + "0" * 5000 + "\n", "4300 digits"),
        ('[link]\ndelay = "9e999995s"\n', "expected a finite time"),
    ],
)
def test_scenario_file_refused(capsys, tmp_path, text, expected):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    line = refused(capsys, "params", "-s", str(path))
    assert str(path) in line and expected in line
