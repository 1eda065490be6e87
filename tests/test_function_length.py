"""No function of the analyzer is longer than a newcomer can read at once."""

from __future__ import annotations

import ast
from pathlib import Path

ANALYSIS = Path(__file__).resolve().parent.parent / "cpasim" / "analysis"
MOST_LINES = 80


def function_lengths(root: Path):
    """``(lines, "path:line name")`` of every function and method under ``root``,
    from its ``def`` line to its last line (nested functions counted on their own
    too; decorators not counted)."""
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                where = f"{path.relative_to(root.parent.parent)}:{node.lineno} {node.name}"
                yield node.end_lineno - node.lineno + 1, where


def test_no_analysis_function_is_over_80_lines():
    long = sorted(f"{where} ({n} lines)" for n, where in function_lengths(ANALYSIS) if n > 80)
    assert not long, f"functions over {MOST_LINES} lines: " + "; ".join(long)


def test_function_lengths_are_counted(tmp_path):
    pkg = tmp_path / "pkg" / "sub"
    pkg.mkdir(parents=True)
    body = "\n".join(f"        x = {i}" for i in range(81))
    (pkg / "m.py").write_text(
        f"def short():\n    pass\n\n\nclass C:\n    def long(self):\n{body}\n"
    )
    assert sorted(function_lengths(pkg)) == [
        (2, "pkg/sub/m.py:1 short"),
        (82, "pkg/sub/m.py:6 long"),
    ]
