"""Figures of a time series (:mod:`cpasim.series`): windows, queues and goodput
over simulated time, one panel each, sharing the time axis.

Only what moved is drawn: a queue that stayed empty the whole run is left out
(the legend says how many), so the panels show where the packets waited.
"""

from __future__ import annotations

import re
from pathlib import Path

from cpasim.errors import CpasimError
from cpasim.inputs import open_input
from cpasim.series import read_series

#: Columns that make a file a time series (as opposed to a sweep).
MARKERS = ("time_ns", "interval_ns", "goodput_bps")
#: The goodput panel's trend line averages len(series) / SMOOTH_ROWS rows.
SMOOTH_ROWS = 50
#: Connections drawn in the window panel, and the share of the largest one's bytes in
#: flight below which a connection (e.g. the request direction) is left out.
MAX_SENDERS = 6
MINOR = 0.05
_CONN = re.compile(r"^(tx|rx)\.(c\d+)\.(\w+)_(bytes|ns)$")


def is_series(path: str | Path) -> bool:
    """Does ``path`` hold a time series?  (Reads only the header of a CSV.)"""
    path = Path(path)
    try:
        with open_input(path, "series") as fh:
            if path.suffix.lower() == ".parquet":
                import pyarrow.parquet as pq

                names = pq.read_schema(fh).names
            else:
                names = fh.readline(1 << 20).decode("utf-8").strip().split(",")
    except (CpasimError, OSError, UnicodeDecodeError, ValueError, ImportError):
        # Not a readable series (pyarrow's errors are ValueErrors): the sweep reader
        # then says what the file is not.
        return False
    return all(m in names for m in MARKERS)


def _senders(frame) -> tuple[list[tuple[str, str]], int]:
    """(host, conn) of the connections that carried the most data, and how
    many more there are: a request direction whose bytes in flight never reach
    MINOR of the largest connection's is left out, and at most MAX_SENDERS drawn."""
    peak = {}
    for col in frame.columns:
        m = _CONN.match(col)
        if m and m.group(3) == "inflight":
            peak[m.group(1), m.group(2)] = float(frame[col].max())
    top = max(peak.values(), default=0.0)
    moved = sorted((k for k, v in peak.items() if v > 0 and v >= MINOR * top), key=peak.get)
    moved.reverse()
    drawn = sorted(moved[:MAX_SENDERS], key=lambda k: (k[0], int(k[1][1:])))
    return drawn, len(moved) - len(drawn)


def draw_series(frame):
    """The matplotlib Figure of a series DataFrame."""
    import matplotlib.pyplot as plt

    t = frame["time_ns"] / 1e6
    byte_queues = [
        c for c in frame.columns if c.endswith("_bytes") and not _CONN.match(c) and frame[c].any()
    ]
    count_queues = [
        c for c in frame.columns if c.endswith(("_pkts", "_desc", "_frames")) and frame[c].any()
    ]
    empty = sum(
        1
        for c in frame.columns
        if c.endswith(("_pkts", "_desc", "_frames", "_bytes"))
        and not _CONN.match(c)
        and not frame[c].any()
    )
    panels = ["window", *(["bytes"] if byte_queues else []), "count", "goodput"]
    figure, axes = plt.subplots(
        len(panels), 1, sharex=True, figsize=(10, 2.6 * len(panels)), constrained_layout=True
    )
    ax = dict(zip(panels, axes, strict=True))
    senders, more = _senders(frame)
    for host, conn in senders:
        p = f"{host}.{conn}."
        line = ax["window"].plot(t, frame[p + "cwnd_bytes"] / 1024, label=f"{host} {conn} cwnd")
        color = line[0].get_color()
        flight = frame[p + "inflight_bytes"] / 1024
        ax["window"].plot(t, flight, ":", color=color, label=f"{host} {conn} in flight")
        ss = frame[p + "ssthresh_bytes"]
        if ss.notna().any():
            ax["window"].plot(
                t, ss / 1024, "--", color=color, alpha=0.6, label=f"{host} {conn} ssthresh"
            )
    ax["window"].set_ylabel("window [KiB]")
    ax["window"].set_title(
        "congestion window (solid), bytes in flight (dotted), ssthresh (dashed)"
        + (f"; {more} more connection(s) not drawn" if more else "")
    )
    for c in byte_queues:
        ax["bytes"].plot(t, frame[c] / 1024, label=c.removesuffix("_bytes"))
    if byte_queues:
        ax["bytes"].set_ylabel("queued [KiB]")
        ax["bytes"].set_title("queues counted in bytes")
    for c in count_queues:
        ax["count"].plot(t, frame[c], label=c)
    ax["count"].set_ylabel("occupancy [entries]")
    ax["count"].set_title(
        "queues counted in packets / descriptors"
        + (f" ({empty} queue(s) that stayed empty not drawn)" if empty else "")
    )
    # Reads come in bursts (a whole receive buffer after a recovery), so one interval
    # can show many times the line rate: the mean over SMOOTH_ROWS rows carries the
    # trend, and the axis is scaled to it with single-interval spikes cut off.
    goodput = frame["goodput_bps"] / 1e6
    weights = frame["interval_ns"]
    window = max(1, len(frame) // SMOOTH_ROWS)
    smooth = (goodput * weights).rolling(window, min_periods=1).sum() / weights.rolling(
        window, min_periods=1
    ).sum()
    ax["goodput"].step(t, goodput, where="pre", color="0.7", lw=0.8, label="per interval")
    ax["goodput"].plot(t, smooth, color="black", label=f"mean over {window} intervals")
    ax["goodput"].set_ylabel("goodput [Mb/s]")
    top = max(float(smooth.max()), float(goodput.quantile(0.95)))
    clipped = float(goodput.max()) > 1.3 * top
    ax["goodput"].set_ylim(0, 1.3 * top if top > 0 else 1)
    ax["goodput"].set_title(
        "goodput (bytes read by the receiving applications)"
        + (f"; peaks up to {goodput.max():.4g} Mb/s cut off" if clipped else "")
    )
    ax["goodput"].set_xlabel("simulated time [ms]")
    for a in axes:
        a.grid(True, alpha=0.3)
        if a.get_legend_handles_labels()[0]:
            a.legend(fontsize="small", loc="upper left", ncols=2)
    return figure


def plot_series(path: str | Path, out: str | Path | None = None) -> Path:
    """Draw a series file into a PNG (or .svg/.pdf); returns its path."""
    from cpasim.plot import save_figure

    path = Path(path)
    frame = read_series(path)
    missing = [m for m in MARKERS if m not in frame.columns]
    if missing:
        raise CpasimError(f"{path}: not a cpasim series (no column {missing[0]!r})")
    out = Path(out) if out is not None else path.with_suffix(".png")
    if out.suffix.lower() not in (".png", ".svg", ".pdf"):
        raise CpasimError(f"--out {out}: expected a file ending in .png, .svg or .pdf")
    return save_figure(draw_series(frame), out)
