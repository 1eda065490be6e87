"""Figures of sweep results: lines with a min/max band over repeats, or a heat map.

For goodput against ``link.rate`` or a socket-buffer key the closed-form
bounds are drawn too, computed from each row's resolved ``cfg.*`` columns:

* link bound = rate × MSS / (MSS + 90), MSS = mtu − 52 with TCP timestamps
  (90 B = 40 B TCP/IP headers + 12 B timestamps + 38 B Ethernet framing;
  without timestamps MSS = mtu − 40 and the overhead is 78 B);
* window bound = window / RTT, window = min(tx send buffer, rx receive
  buffer), RTT = 2 × link.delay + serialization of one full frame and of
  its ACK (90 B on the wire with timestamps, 78 B without).
"""

from __future__ import annotations

import math
import sys
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path

from cpasim.errors import CpasimError
from cpasim.files import replace_atomically
from cpasim.model.sockbuf import largest_window
from cpasim.protocol import ETHERNET_FRAMING, mss_for, tcp_header
from cpasim.sweeps import table

WINDOW_KEYS = ("tcp.wmem", "tcp.rmem", "tcp.sndbuf", "tcp.rcvbuf")
#: Units for configuration keys by their kind, and for known metric names.
KIND_UNITS = {"rate": ("Gb/s", 1e9), "time": ("µs", 1e3), "freq": ("GHz", 1e9)}


def link_bound(rate: float, mtu: float, timestamps: bool = True) -> float:
    """Goodput (bit/s) of a link-limited TCP stream."""
    mss = mss_for(mtu, timestamps)
    return rate * mss / (mss + tcp_header(timestamps) + ETHERNET_FRAMING)


def window_bound(
    window: float, rate: float, delay: float, mtu: float, timestamps: bool = True
) -> float:
    """Goodput (bit/s) of a window-limited TCP stream: one window per round trip."""
    data_frame = mtu + ETHERNET_FRAMING
    # The ACK's framing as for a full frame: the bound leaves out the padding
    # of frames below Ethernet's minimum (6 B on an ACK without timestamps).
    ack_frame = tcp_header(timestamps) + ETHERNET_FRAMING
    rtt_s = 2 * delay * 1e-9 + (data_frame + ack_frame) * 8 / rate
    return window * 8 / rtt_s


def _base_key(key: str) -> str:
    parts = key.split(".", 2)
    return parts[2] if len(parts) == 3 and parts[0] == "hosts" else key


def axis_unit(column: str, values: Sequence[float]) -> tuple[str, float]:
    """(unit label, divisor) for a configuration key or a metric column."""
    key = column.removeprefix("cfg.")
    try:
        from cpasim.config.resolve import spec_of

        kind = spec_of(key).type
    except (KeyError, ImportError):
        kind = None
    if kind in KIND_UNITS:
        return KIND_UNITS[kind]
    if kind == "size":
        top = max((abs(v) for v in values), default=0)
        return ("MiB", 2**20) if top >= 2**21 else ("KiB", 1024) if top >= 2**11 else ("B", 1)
    return table.display_unit(column)


def _label(name: str, unit: str) -> str:
    return f"{table.without_unit_suffix(name)} [{unit}]" if unit else name


def _number(value: object) -> float | None:
    """A cell as a number to draw; None for text, a blank (NaN) or an infinity, which
    have no place on an axis and are left out as blanks are."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        value = float(value)
    except OverflowError:  # an integer beyond any float
        return None
    return value if math.isfinite(value) else None


def load(results: str | Path) -> tuple[list[dict], list[str]]:
    """The successful rows of a sweep file and its varied keys."""
    results = Path(results)
    rows = table.read_rows(results)
    if not rows:
        raise CpasimError(f"{results}: the file has no rows")
    header = list(rows[0])
    if table.REPEAT not in header:
        raise CpasimError(f"{results}: not a cpasim sweep file (no {table.REPEAT!r} column)")
    keys = header[: header.index(table.REPEAT)]
    text = table.read_rows(results, text_columns=keys)  # values as written
    ok = [r for r in text if not r.get(table.ERROR)]
    if not ok:
        raise CpasimError(f"{results}: every row failed; nothing to plot")
    return ok, keys


def _check_column(name: str, option: str, rows: Sequence[Mapping], results: Path) -> None:
    if name not in rows[0]:
        available = ", ".join(c for c in rows[0] if c != table.DIGEST)
        raise CpasimError(f"{option} {name}: no such column in {results}; available: {available}")


def _x_position(row: Mapping, x: str) -> object:
    """Numeric x for a row: the resolved ``cfg.<x>`` when present, else the cell."""
    resolved = row.get(f"cfg.{x}")
    return resolved if _number(resolved) is not None else row[x]


def default_axes(rows: Sequence[Mapping], keys: Sequence[str], results: Path) -> tuple[str, str]:
    """``(x, y)`` when not given: the first swept key, and the run's own metric
    (mean latency for request/response workloads, goodput for streams)."""
    if not keys:
        raise CpasimError(f"{results}: no key was swept (only repeats); give --x and --y")
    latency = any(_number(r.get("latency_ns.mean")) is not None for r in rows)
    return keys[0], "latency_ns.mean" if latency else "goodput_bps"


def plot(
    results: str | Path,
    *,
    x: str | None = None,
    y: str | None = None,
    hue: str | None = None,
    heatmap: bool = False,
    out: str | Path | None = None,
) -> Path:
    """Draw ``y`` against ``x`` from a sweep file into a PNG; returns its path.
    Without ``x``/``y``: :func:`default_axes`."""

    results = Path(results)
    rows, keys = load(results)
    default_x, default_y = default_axes(rows, keys, results) if x is None or y is None else (x, y)
    x, y = x or default_x, y or default_y
    for name, option in ((x, "--x"), (y, "--y"), (hue, "--hue")):
        if name is not None:
            _check_column(name, option, rows, results)
    out = Path(out) if out is not None else results.with_suffix(".png")
    if out.suffix.lower() not in (".png", ".svg", ".pdf"):
        raise CpasimError(f"--out {out}: expected a file ending in .png, .svg or .pdf")
    figure = draw(rows, keys, x=x, y=y, hue=hue, heatmap=heatmap)
    infinite = sum(_infinite(r.get(y)) for r in rows)
    if infinite:
        print(
            f"cpasim: {y}: {infinite} row(s) of {results.name} infinite, left out of the figure",
            file=sys.stderr,
        )
    return save_figure(figure, out)


def _infinite(value: object) -> bool:
    """A number too large for an axis (what :func:`_number` leaves out besides blanks)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isinf(float(value))
    except OverflowError:
        return True


def save_figure(figure, out: Path) -> Path:
    """Write ``figure`` to ``out`` (its format from the suffix) under a temporary name,
    renamed when whole; the figure is closed either way."""
    import matplotlib.pyplot as plt

    try:
        fmt = out.suffix.lower()[1:]
        replace_atomically(out, lambda tmp: figure.savefig(tmp, dpi=120, format=fmt))
    except OSError as exc:
        raise CpasimError(f"--out {out}: cannot write the figure ({exc.strerror})") from None
    finally:
        plt.close(figure)
    return out


def draw(
    rows: Sequence[Mapping],
    keys: Sequence[str],
    *,
    x: str,
    y: str,
    hue: str | None = None,
    heatmap: bool = False,
):
    """The matplotlib Figure of :func:`plot` for rows already loaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not any(_number(r.get(y)) is not None for r in rows):
        raise CpasimError(f"--y {y}: the column holds no finite numbers")
    others = [k for k in keys if k not in (x, hue)]
    second = None
    if heatmap:
        second = hue if hue is not None else (others[0] if len(others) == 1 else None)
        if second is None:
            raise CpasimError("--heatmap needs --hue or exactly two varied keys in the file")
    elif hue is None and len(keys) == 2 and x in keys:
        second = others[0]
    figure, axes = plt.subplots(figsize=(7, 4.5), layout="constrained")
    if second is not None:
        _heatmap(figure, axes, rows, x, second, y)
    else:
        _lines(axes, rows, x, y, hue)
    return figure


def _lines(axes, rows: Sequence[Mapping], x: str, y: str, hue: str | None) -> None:
    xs_all = [_x_position(r, x) for r in rows]
    numeric_x = all(_number(v) is not None for v in xs_all)
    x_unit, x_scale = axis_unit(x, [float(v) for v in xs_all] if numeric_x else [])
    y_unit, y_scale = axis_unit(y, [v for r in rows if (v := _number(r[y])) is not None])
    categories = list(dict.fromkeys(str(v) for v in xs_all))

    def position(row):
        v = _x_position(row, x)
        return float(v) / x_scale if numeric_x else categories.index(str(v))

    groups: dict[object, list[Mapping]] = defaultdict(list)
    for row in rows:
        if _number(row[y]) is not None:
            groups[row.get(hue) if hue else None].append(row)
    colors = {}
    all_means: list[float] = []
    for label, members in groups.items():
        by_x: dict[float, list[float]] = defaultdict(list)
        for row in members:
            by_x[position(row)].append(_number(row[y]) / y_scale)
        xs = sorted(by_x)
        mean = [sum(by_x[v]) / len(by_x[v]) for v in xs]
        all_means += mean
        line = axes.plot(xs, mean, marker="o", label=f"{hue}={label}" if hue else y)[0]
        colors[label] = line.get_color()
        if any(len(by_x[v]) > 1 for v in xs):
            lo, hi = [min(by_x[v]) for v in xs], [max(by_x[v]) for v in xs]
            axes.fill_between(xs, lo, hi, color=line.get_color(), alpha=0.2, linewidth=0)
    if numeric_x and "goodput" in y.lower() and _base_key(x) in ("link.rate", *WINDOW_KEYS):
        _bounds(axes, groups, colors, position, y_scale)
    if not numeric_x:
        axes.set_xticks(range(len(categories)), categories)
    elif spans_decades([position(r) for r in rows]):
        axes.set_xscale("log")
        # The swept values themselves as ticks: a sweep has few, and they are what was asked.
        ticks = sorted({position(r) for r in rows})
        axes.set_xticks(ticks, [f"{t:g}" for t in ticks])
        axes.minorticks_off()
    if spans_decades(all_means):
        # Half a decade-ish of room each side (the bounds start the axis at 0, which a
        # log axis cannot show).
        axes.set_ylim(min(all_means) / 2, max(all_means) * 2)
        axes.set_yscale("log")
    axes.set_xlabel(_label(x, x_unit))
    axes.set_ylabel(_label(y, y_unit))
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize="small")


#: A numeric axis goes logarithmic when its positive values span more than this factor.
LOG_SPAN = 20.0


def spans_decades(values: Sequence[float]) -> bool:
    """True when ``values`` are all positive and the largest is over LOG_SPAN× the smallest."""
    values = [float(v) for v in values]
    return bool(values) and min(values) > 0 and max(values) / min(values) > LOG_SPAN


def _bounds(axes, groups: Mapping, colors: Mapping, position, y_scale: float) -> None:
    """The closed-form bounds per line (dashed: link, dotted: window), each
    curve drawn once, when the rows carry the resolved settings."""
    needed = ("cfg.link.rate", "cfg.link.mtu", "cfg.link.delay")
    drawn: set[tuple] = set()
    top = 0.0
    for label, members in groups.items():
        if not all(_number(members[0].get(c)) is not None for c in needed):
            continue
        link: dict[float, float] = {}
        window: dict[float, float] = {}
        for row in members:
            rate, mtu, delay = (float(row[c]) for c in needed)
            stamps = row.get("cfg.hosts.tx.tcp.timestamps") not in (False, "False")
            link[position(row)] = link_bound(rate, mtu, stamps) / y_scale
            size = _window_size(row, mtu, stamps)
            if size is not None:
                bound = window_bound(size, rate, delay, mtu, stamps)
                window[position(row)] = bound / y_scale
        top = max(top, *link.values())
        for name, bound, style in (("link bound", link, "--"), ("window bound", window, ":")):
            curve = tuple(sorted(bound.items()))
            if not curve or (name, curve) in drawn:
                continue
            color = "grey" if name == "link bound" or len(groups) == 1 else colors[label]
            shown = name not in {n for n, _ in drawn}
            axes.plot(*zip(*curve, strict=True), style, color=color, label=name if shown else None)
            drawn.add((name, curve))
    if top:
        axes.set_ylim(0, top * 1.15)


def _window_size(row: Mapping, mtu: float, stamps: bool) -> float | None:
    """The largest window of a row's run: the receiver's fixed buffer or what its
    SO_RCVBUF offers under Linux's rules, at most a fixed send buffer; None when
    the receive buffer is autotuned or the settings are not recorded."""
    wmem, rmem = (_number(row.get(f"cfg.hosts.{c}")) for c in ("tx.tcp.wmem", "rx.tcp.rmem"))
    if rmem:
        window = rmem
    else:
        keys = ("rcvbuf", "core_rmem_max", "rx_truesize")
        request, core_max, truesize = (_number(row.get(f"cfg.hosts.rx.tcp.{k}")) for k in keys)
        if not (request and core_max and truesize):
            return None
        mss = mss_for(int(mtu), stamps)
        window = largest_window(int(request), int(core_max), int(truesize), mss)
    # A Linux send buffer (twice the request, or autotuned) holds more than a window.
    return min(window, wmem) if wmem else window


def _heatmap(figure, axes, rows: Sequence[Mapping], x: str, second: str, y: str) -> None:
    xs = _ordered(rows, x)
    ys = _ordered(rows, second)
    y_unit, y_scale = axis_unit(y, [v for r in rows if (v := _number(r[y])) is not None])
    cells: dict[tuple[int, int], list[float]] = defaultdict(list)
    for row in rows:
        value = _number(row[y])
        if value is not None:
            cells[ys.index(str(row[second])), xs.index(str(row[x]))].append(value / y_scale)
    grid = [[math.nan] * len(xs) for _ in ys]
    for (i, j), values in cells.items():
        grid[i][j] = sum(values) / len(values)
    from matplotlib.colors import LogNorm

    values = [v for row in grid for v in row if v == v]
    norm = LogNorm(min(values), max(values)) if spans_decades(values) else None
    image = axes.imshow(grid, origin="lower", aspect="auto", cmap="viridis", norm=norm)
    # Cell labels: sized to the grid, dark on the light end of the map and light on
    # the dark end, so every cell reads.
    size = max(6.0, min(11.0, 60.0 / max(len(xs), len(ys))))
    for i in range(len(ys)):
        for j in range(len(xs)):
            value = grid[i][j]
            if value != value:
                axes.text(j, i, "—", ha="center", va="center", color="grey", fontsize=size)
                continue
            r, g, b, _a = image.cmap(image.norm(value))
            ink = "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.5 else "white"
            axes.text(j, i, f"{value:.3g}", ha="center", va="center", color=ink, fontsize=size)
    axes.set_xticks(range(len(xs)), xs, rotation=30 if len(xs) > 6 else 0)
    axes.set_yticks(range(len(ys)), ys)
    axes.set_xlabel(x)
    axes.set_ylabel(second)
    axes.set_title(f"{_label(y, y_unit)}, mean over repeats (— = no successful run)", fontsize=9)
    figure.colorbar(image, ax=axes, label=_label(y, y_unit))


def _ordered(rows: Sequence[Mapping], key: str) -> list[str]:
    """The values of ``key`` as written, sorted by their resolved value when known."""
    pairs = {str(r[key]): _number(_x_position(r, key)) for r in rows}
    if all(v is not None for v in pairs.values()):
        return sorted(pairs, key=lambda k: pairs[k])
    return list(pairs)
