"""Write calibration/SEEDS.md: seed 004's figures against the model's, row by row.

    .venv/bin/python calibration/seeds_report.py           # measure, write SEEDS.md
    .venv/bin/python calibration/seeds_report.py --check   # measure, compare: exit 1 with
                                                           # a diff when SEEDS.md is stale

The prose is ``calibration/SEEDS.in.md``; each ``{{table:NAME}}`` in it becomes the table
of :mod:`seed_rows`'s rows of that name (seed, model, residual, tolerance, label), with
the reason of each row beyond its tolerance below it, and each ``{{model:ROW}}`` the
model's figure of one row (``ROW`` as :func:`seed_rows.row_id` names it).  Every figure
in a table is measured when the file is written (several minutes: the runs are the
tests', made once each), so the file cannot go stale without ``--check`` failing;
``tests/test_seed_rows.py`` runs it.
"""

from __future__ import annotations

import difflib
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import seed_rows  # noqa: E402

from cpasim.errors import CpasimError, script_main  # noqa: E402

HERE = Path(__file__).resolve().parent
TEMPLATE = HERE / "SEEDS.in.md"
REPORT = HERE / "SEEDS.md"
PLACEHOLDER = re.compile(r"\{\{(table|model):([^}]+)\}\}")


def show(row: seed_rows.Row, value: float) -> str:
    """A figure in the row's unit."""
    if row.unit == "Gb/s":
        return f"{value:.3f} Gb/s"
    if row.unit == "Mb/s":
        return f"{value:.0f} Mb/s"
    if row.unit == "% error":
        return f"{value:+.1f}%"
    return f"{value:.2f}%"


def seed_cell(row: seed_rows.Row) -> str:
    if row.seed_text:
        return row.seed_text
    if row.unit == "Gb/s":
        return f"{row.seed:g} Gb/s"
    if row.unit == "Mb/s":
        return f"{row.seed:g} Mb/s"
    return show(row, row.seed)


def residual_cell(row: seed_rows.Row, value: float) -> str:
    if row.below:
        return "below" if row.holds(value) else "above"
    res = row.residual(value)
    return f"{res:+.1f} points" if row.points else f"{res:+.1%}"


def tolerance_cell(row: seed_rows.Row) -> str:
    if row.xfail:
        return "strict xfail"
    if row.below:
        return f"< {show(row, row.seed)}"
    return f"±{row.tol:g} points" if row.points else f"±{row.tol:.1%}"


def table(name: str, figures: dict[str, float]) -> str:
    rows = [r for r in seed_rows.rows() if r.table == name]
    if not rows:
        raise CpasimError(f"{TEMPLATE}: no rows for table {name!r}")
    out = [
        "| quantity | seed | model | residual | tolerance | label |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        v = figures[seed_rows.row_id(r)]
        label = r.label + (f": {r.note}" if r.note else "")
        cells = [r.quantity, seed_cell(r), show(r, v), residual_cell(r, v), tolerance_cell(r)]
        out.append("| " + " | ".join([*cells, label]) + " |")
    beyond = [r for r in rows if r.xfail]
    if beyond:
        out += ["", "Beyond the tolerance (strict xfails of `tests/test_seed_rows.py`):", ""]
        out += [f"- **{r.quantity}**: {r.xfail}." for r in beyond]
    return "\n".join(out)


def measure() -> dict[str, float]:
    """Every row's model figure, by row id."""
    return {seed_rows.row_id(r): r.measure() for r in seed_rows.rows()}


def render(figures: dict[str, float]) -> str:
    by_id = {seed_rows.row_id(r): r for r in seed_rows.rows()}

    def fill(m: re.Match) -> str:
        kind, key = m.group(1), m.group(2)
        if kind == "table":
            return table(key, figures)
        if key not in by_id:
            raise CpasimError(f"{TEMPLATE}: no row {key!r}")
        return show(by_id[key], figures[key])

    return PLACEHOLDER.sub(fill, TEMPLATE.read_text())


def check(text: str) -> int:
    """0 when SEEDS.md is ``text``; else 1, printing the difference."""
    have = REPORT.read_text() if REPORT.exists() else ""
    if have == text:
        return 0
    name = str(REPORT.relative_to(HERE.parent))
    diff = difflib.unified_diff(
        have.splitlines(), text.splitlines(), name, name + " (as the model gives it)", lineterm=""
    )
    print("\n".join(diff))
    print(f"{name} differs from what the model gives: re-create it with {Path(__file__).name}")
    return 1


def main(argv: list[str]) -> int:
    unknown = [a for a in argv if a != "--check"]
    if unknown:
        print(f"unknown argument(s) {' '.join(unknown)}; expected --check or nothing")
        return 2
    text = render(measure())
    if "--check" in argv:
        return check(text)
    REPORT.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(script_main("seeds_report", main, sys.argv[1:]))
