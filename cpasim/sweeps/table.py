"""Sweep rows and the files they live in.

A row is a flat ``dict``: the identity columns (the varied keys with their
values as written, ``repeat``, ``seed``), ``error`` (empty when the point
ran), the metrics, and context columns (``cfg.<key>``, ``scenario_digest``).
Nested results are flattened with dotted names (``cpu_utilization.tx.copy``).

Output files:

* CSV is written as rows finish (append + flush), so an interrupted sweep
  leaves a valid file of the finished rows (a kill during an append leaves the
  last row cut short, which ``--resume`` drops and runs again); a row that brings new columns
  rewrites the file with the wider header.  At the end the file is rewritten
  in grid order.  Every full rewrite goes through a temporary file and a
  rename, so the file on disk is always complete.
* Parquet (needs pandas + pyarrow) is written once, at the end or on Ctrl-C.
"""

from __future__ import annotations

import csv
import errno
import io
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from cpasim.errors import CpasimError
from cpasim.files import replace_atomically, write_error
from cpasim.inputs import InputError, open_input, read_bytes

#: The column a sweep over levels of detail adds (:mod:`cpasim.sweeps.agreement`).
AGREEMENT = "ideal_vs_full"

TABLE_INSTALL_HINT = "install it with: pip install 'cpasim[table]'"
FORMATS = (".csv", ".parquet")

REPEAT = "repeat"
SEED = "seed"
ERROR = "error"
DIGEST = "scenario_digest"


def flatten(tree: Mapping, prefix: str = "") -> dict[str, object]:
    """Nested mappings to one level with dotted keys; lists become their text."""
    flat: dict[str, object] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, f"{name}."))
        elif isinstance(value, (list, tuple)):
            flat[name] = str(list(value))
        else:
            flat[name] = value
    return flat


def columns_of(rows: Iterable[Mapping], first: Sequence[str] = ()) -> list[str]:
    """``first``, then every other column in order of first appearance; the digest last."""
    seen = dict.fromkeys(first)
    for row in rows:
        seen.update(dict.fromkeys(row))
    if DIGEST in seen:
        del seen[DIGEST]
        seen[DIGEST] = None
    return list(seen)


def parse_cell(text: str) -> object:
    """A CSV cell back to a value: '' → None, numbers → int/float, else the text."""
    if text == "":
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    if text in ("True", "False"):
        return text == "True"
    return text


def _cell(value: object) -> object:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return value


def check_format(path: Path) -> str:
    """The output format from the file name; parquet also needs its libraries."""
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise CpasimError(f"--out {path}: expected a file ending in .csv or .parquet")
    if suffix == ".parquet":
        require_pandas("--out *.parquet", parquet=True)
    return suffix


def require_pandas(what: str, *, parquet: bool = False):
    try:
        import pandas

        if parquet:
            import pyarrow  # noqa: F401
    except ImportError:
        raise CpasimError(f"{what} needs pandas and pyarrow; {TABLE_INSTALL_HINT}") from None
    return pandas


def read_rows(
    path: Path, text_columns: Sequence[str] = (), *, drop_cut_row: bool = False
) -> list[dict[str, object]]:
    """The rows of a sweep file (CSV or parquet); ``text_columns`` stay strings.

    A CSV file whose last row is cut short (no line end) is refused, or with
    ``drop_cut_row`` read without that row (what ``--resume`` does: it runs the
    point again)."""
    path = Path(path)
    try:  # refused now, with why, when it cannot be read
        open_input(path, "sweep results").close()
    except InputError as exc:
        if exc.errno == errno.ENOENT:
            raise CpasimError(f"{path}: no such sweep results file") from None
        raise
    if path.suffix.lower() == ".parquet":
        pandas = require_pandas(f"reading {path}", parquet=True)
        try:
            with open_input(path, "sweep results") as fh:
                frame = pandas.read_parquet(fh)
        except CpasimError:
            raise
        except Exception as exc:
            raise CpasimError(f"{path}: not a readable parquet file ({exc})") from None
        rows = frame.astype(object).where(frame.notna(), None).to_dict("records")
        keep = set(text_columns)
        return [
            {k: (str(v) if k in keep and v is not None else v) for k, v in r.items()} for r in rows
        ]
    if path.suffix.lower() != ".csv":
        raise CpasimError(f"{path}: expected a .csv or .parquet sweep results file")
    keep = set(text_columns)
    try:
        text = read_bytes(path, "sweep results").decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CpasimError(f"{path}: not a readable CSV file ({exc})") from None
    if text and not text.endswith("\n"):
        # Rows are appended as points finish: a sweep killed while appending one
        # leaves it cut.  The rows before it are whole.
        if not drop_cut_row:
            raise CpasimError(
                f"{path}: the last row is cut short (the sweep writing it was stopped); "
                "continue the sweep with --resume to complete the file"
            )
        text = text[: text.rfind("\n") + 1]
    try:
        reader = csv.DictReader(io.StringIO(text, newline=""))
        raw = list(reader)
    except csv.Error as exc:
        raise CpasimError(f"{path}: not a readable CSV file ({exc})") from None
    for number, r in enumerate(raw, 2):
        if None in r:
            raise CpasimError(f"{path}: line {number} has more cells than the header")
        if None in r.values():
            raise CpasimError(f"{path}: line {number} has fewer cells than the header")
    return [{k: (v if k in keep else parse_cell(v)) for k, v in r.items()} for r in raw]


def read_columns(path: Path) -> list[str]:
    """The column names of a sweep file, from its header (a file of no rows has one)."""
    path = Path(path)
    if path.suffix.lower() == ".parquet":
        pandas = require_pandas(f"reading {path}", parquet=True)
        try:
            with open_input(path, "sweep results") as fh:
                return [str(c) for c in pandas.read_parquet(fh).columns]
        except CpasimError:
            raise
        except Exception as exc:
            raise CpasimError(f"{path}: not a readable parquet file ({exc})") from None
    try:
        text = read_bytes(path, "sweep results").decode("utf-8")
        return next(csv.reader(io.StringIO(text, newline="")), [])
    except (UnicodeDecodeError, csv.Error) as exc:
        raise CpasimError(f"{path}: not a readable CSV file ({exc})") from None


def write_rows(path: Path, rows: Sequence[Mapping], first: Sequence[str] = ()) -> None:
    """Write the whole table atomically, as CSV or parquet by the file name."""
    path = Path(path)
    columns = columns_of(rows, first)
    if path.suffix.lower() == ".parquet":
        pandas = require_pandas("--out *.parquet", parquet=True)
        frame = pandas.DataFrame([{c: r.get(c) for c in columns} for r in rows], columns=columns)
        replace_atomically(path, lambda tmp: frame.to_parquet(tmp, index=False))
    else:
        replace_atomically(path, lambda tmp: _write_csv(tmp, rows, columns))


def _write_csv(path: Path, rows: Sequence[Mapping], columns: Sequence[str]) -> None:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, columns)
        writer.writeheader()
        for row in rows:
            writer.writerow({c: _cell(row.get(c)) for c in columns})


class CsvAppender:
    """Keeps a CSV file valid while rows arrive in any order."""

    def __init__(self, path: Path, rows: Sequence[Mapping], first: Sequence[str]):
        self.path = Path(path)
        self.first = list(first)
        self.rows = list(rows)
        self.columns = columns_of(self.rows, self.first)
        replace_atomically(self.path, lambda tmp: _write_csv(tmp, self.rows, self.columns))

    def append(self, row: Mapping) -> None:
        self.rows.append(row)
        if any(c not in self.columns for c in row):
            self.columns = columns_of(self.rows, self.first)
            replace_atomically(self.path, lambda tmp: _write_csv(tmp, self.rows, self.columns))
            return
        try:
            with self.path.open("a", newline="") as f:
                writer = csv.DictWriter(f, self.columns)
                writer.writerow({c: _cell(row.get(c)) for c in self.columns})
                f.flush()
        except OSError as exc:  # a full disk: the rows before this one are whole
            raise write_error(self.path, exc, "sweep table") from None


#: Metric columns worth showing in the summary table, in order (prefixes).
HEADLINE = ("goodput", "latency_ns.mean", "latency_ns.p99", "retransmits")


def display_unit(name: str) -> tuple[str, float]:
    """A readable unit for a metric column and the divisor to reach it."""
    lower = name.lower()
    if lower.endswith("bps") or "goodput" in lower or "throughput" in lower:
        return "Gb/s", 1e9
    if lower.endswith("_ns") or "latency" in lower or "rtt" in lower:
        return "µs", 1e3
    return "", 1.0


def without_unit_suffix(name: str) -> str:
    """``goodput_bps`` → ``goodput``, ``latency_ns.p99`` → ``latency.p99``: for a heading
    that names the unit the values are shown in, which is not the stored one."""
    return re.sub(r"_(bps|ns)(?=\.|$)", "", name)


def display_header(name: str) -> str:
    """A metric column's heading with the unit its cells are shown in
    (``goodput_bps`` shows as ``goodput (Gb/s)``)."""
    unit, _ = display_unit(name)
    return f"{without_unit_suffix(name)} ({unit})" if unit else name


def headline_columns(rows: Sequence[Mapping], limit: int = 5) -> list[str]:
    """The HEADLINE metrics the rows have numbers for, at most ``limit``."""
    chosen = []
    for prefix in HEADLINE:
        for column in columns_of(rows):
            if (
                column.startswith(prefix)
                and column not in chosen
                and any(
                    isinstance(r.get(column), (int, float)) and not isinstance(r.get(column), bool)
                    for r in rows
                )
            ):
                chosen.append(column)
    return chosen[:limit]


def _analysis_cell(row: Mapping, column: str) -> str:
    text = str(row.get(column) or "")
    share = row.get(f"{column}_share")
    return f"{text} ({share:.0%})" if text and isinstance(share, float) else text


def render(rows: Sequence[Mapping], keys: Sequence[str]):
    """A rich Table summarising a sweep: varied keys, a few metrics, errors."""
    from rich.table import Table
    from rich.text import Text

    # Cells and headings are Text, never markup: a state named tx:Link:propagate
    # stays literal (as markup ":link:" would become an emoji and "[x]" a style).

    extra = [c for c in ("critical_state", "resource_loop") if any(r.get(c) for r in rows)]
    metrics = headline_columns(rows)
    agreement = any(r.get(AGREEMENT) is not None for r in rows)  # a sweep over host.detail
    repeats = any(r.get(REPEAT) for r in rows)
    errors = any(r.get(ERROR) for r in rows)
    grid = Table(title=f"sweep: {len(rows)} runs", title_justify="left")
    for key in keys:
        grid.add_column(Text(key))
    if repeats:
        grid.add_column(REPEAT, justify="right")
    for name in metrics:
        grid.add_column(Text(display_header(name)), justify="right")
    if agreement:
        grid.add_column(Text("ideal vs full"), justify="right")
    for name in extra:
        grid.add_column(Text(name))
    if errors:
        grid.add_column(ERROR, style="red")
    for row in rows:
        cells = [str(row.get(k, "")) for k in keys]
        if repeats:
            cells.append(str(row.get(REPEAT, "")))
        for name in metrics:
            value = row.get(name)
            _, scale = display_unit(name)
            cells.append("" if not isinstance(value, (int, float)) else f"{value / scale:.4g}")
        if agreement:
            value = row.get(AGREEMENT)
            cells.append("" if not isinstance(value, (int, float)) else f"{value:+.2%}")
        cells += [_analysis_cell(row, c) for c in extra]
        if errors:
            cells.append(str(row.get(ERROR) or ""))
        grid.add_row(*(Text(c) for c in cells))
    return grid
