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
