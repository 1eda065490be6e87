"""What the Python API's result objects share: ``to_dict()`` and ``to_frame()``.

pandas is optional: :func:`frame` builds a DataFrame when it is installed and
says how to install it when it is not.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

PANDAS_HINT = "to_frame() needs pandas; install it with: pip install pandas (or use .to_dict())"


def frame(rows: Iterable[Mapping], columns: Sequence[str] | None = None):
    """A pandas DataFrame of ``rows`` (dicts), columns in ``columns``' order if given."""
    try:
        import pandas
    except ImportError:
        raise ImportError(PANDAS_HINT) from None
    return pandas.DataFrame(list(rows), columns=list(columns) if columns is not None else None)


def metric_text(metric: str, value: float | None) -> str:
    """A run's metric for people: ``1.29 Gb/s`` (goodput), ``123.5 us`` (latency)."""
    from cpasim.units import RATE, TIME, human

    if value is None:
        return "-"
    if metric.startswith("goodput"):
        return human(value, RATE)
    return human(value, TIME)


def html_table(title: str, rows: Iterable[tuple[str, object]]) -> str:
    """A small two-column table (name, value) under ``title``: what a notebook shows
    for a result object (``_repr_html_``).  Every text is escaped."""
    from html import escape

    body = "".join(
        f"<tr><th style='text-align:left'>{escape(str(k))}</th>"
        f"<td style='text-align:left'>{escape(str(v))}</td></tr>"
        for k, v in rows
    )
    return f"<table><caption style='text-align:left'><b>{escape(title)}</b></caption>{body}</table>"
