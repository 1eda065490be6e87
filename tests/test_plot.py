"""Figures of sweep files: lines with bands, heat maps, bounds, clear errors."""

from __future__ import annotations

import matplotlib.image
import pytest

from cpasim.errors import CpasimError
from cpasim.plot import _window_size, draw, link_bound, load, plot, window_bound
from cpasim.sweeps import table

GBPS = 1e9


def synthetic(path, *, rates=("1Gbps", "10Gbps"), wmems=("64KiB", "1MiB"), repeat=2):
    """A sweep file shaped like a real one: values as written, resolved cfg columns."""
    resolved = {"1Gbps": 1e9, "10Gbps": 1e10, "64KiB": 65536, "1MiB": 2**20}
    rows = []
    for rate in rates:
        for wmem in wmems:
            for r in range(repeat):
                bound = min(
                    link_bound(resolved[rate], 1500),
                    window_bound(resolved[wmem], resolved[rate], 50e3, 1500),
                )
                rows.append(
                    {
                        "link.rate": rate,
                        "tcp.wmem": wmem,
                        "repeat": r,
                        "seed": 1,
                        "error": None,
                        "goodput_bps": bound * (1 - 0.01 * r),
                        "latency.mean_ns": 1e5 + r,
                        "cfg.link.rate": resolved[rate],
                        "cfg.link.delay": 50e3,
                        "cfg.link.mtu": 1500,
                        "cfg.hosts.tx.tcp.wmem": resolved[wmem],
                        "cfg.hosts.rx.tcp.rmem": resolved[wmem],
                        "cfg.hosts.tx.tcp.timestamps": True,
                        "cfg.tcp.wmem": resolved[wmem],
                        "scenario_digest": "abc",
                    }
                )
    rows.append(
        {
            "link.rate": "1Gbps",
            "tcp.wmem": "9MiB",
            "repeat": 0,
            "seed": 1,
            "error": "impossible",
            "scenario_digest": "abc",
        }
    )
    table.write_rows(path, rows, ["link.rate", "tcp.wmem", "repeat", "seed", "error"])
    return path


def test_link_bound_matches_the_classic_941_mbps():
    # 1 Gb/s Ethernet, MTU 1500, TCP timestamps: 1448 / 1538 of the line rate.
    assert link_bound(1e9, 1500) == pytest.approx(941.48e6, rel=1e-4)
    assert link_bound(1e9, 1500, timestamps=False) == pytest.approx(1e9 * 1460 / 1538)


def test_window_bound_is_window_over_rtt():
    rtt = 2 * 100e-6 + (1538 + 90) * 8 / 1e9
    assert window_bound(65536, 1e9, 100e3, 1500) == pytest.approx(65536 * 8 / rtt)


def test_window_of_a_row_under_either_buffer_rules():
    fixed = {"cfg.hosts.tx.tcp.wmem": 2**20, "cfg.hosts.rx.tcp.rmem": 65536}
    assert _window_size(fixed, 1500, True) == 65536
    linux = {
        "cfg.hosts.tx.tcp.wmem": 0,
        "cfg.hosts.rx.tcp.rmem": 0,
        "cfg.hosts.rx.tcp.rcvbuf": 65536,
        "cfg.hosts.rx.tcp.core_rmem_max": 4194304,
        "cfg.hosts.rx.tcp.rx_truesize": 2304,
    }
    assert _window_size(linux, 1500, True) == 80480  # what Linux 6.18 offers for -w 64K
    assert _window_size({**linux, "cfg.hosts.rx.tcp.rcvbuf": 0}, 1500, True) is None  # autotuned
    assert _window_size({**linux, "cfg.hosts.tx.tcp.wmem": 32768}, 1500, True) == 32768


def test_failed_rows_are_left_out_and_keys_found(tmp_path):
    rows, keys = load(synthetic(tmp_path / "s.csv"))
    assert keys == ["link.rate", "tcp.wmem"]
    assert len(rows) == 8 and all(r["error"] is None for r in rows)
    assert {r["tcp.wmem"] for r in rows} == {"64KiB", "1MiB"}


def test_lines_with_hue_band_units_and_bounds(tmp_path):
    rows, keys = load(synthetic(tmp_path / "s.csv"))
    figure = draw(rows, keys, x="link.rate", y="goodput_bps", hue="tcp.wmem")
    axes = figure.axes[0]
    lines = axes.get_lines()
    assert [line.get_label() for line in lines[:4]] == [
        "tcp.wmem=64KiB",
        "tcp.wmem=1MiB",
        "link bound",
        "window bound",
    ]
    # One window bound per window size, in its line's colour; the link bound once.
    dotted = [line for line in lines if line.get_linestyle() == ":"]
    dashed = [line for line in lines if line.get_linestyle() == "--"]
    assert len(dotted) == 2 and len(dashed) == 1
    assert [d.get_color() for d in dotted] == [lines[0].get_color(), lines[1].get_color()]
    for line, window in zip(dotted, (65536, 2**20), strict=True):
        assert line.get_ydata()[0] == pytest.approx(window_bound(window, 1e9, 50e3, 1500) / GBPS)
    assert list(dashed[0].get_ydata()) == pytest.approx(
        [link_bound(1e9, 1500) / GBPS, link_bound(1e10, 1500) / GBPS]
    )
    assert axes.get_xlabel() == "link.rate [Gb/s]"
    assert axes.get_ylabel() == "goodput [Gb/s]"
    first = axes.get_lines()[0]
    assert list(first.get_xdata()) == [1.0, 10.0]
    # Mean over the two repeats (the second is 1% lower).
    expected = min(link_bound(1e9, 1500), window_bound(65536, 1e9, 50e3, 1500)) * 0.995 / GBPS
    assert first.get_ydata()[0] == pytest.approx(expected)
    assert len(axes.collections) == 2  # one min/max band per line


def test_heat_map_when_two_keys_vary_and_no_hue(tmp_path):
    rows, keys = load(synthetic(tmp_path / "s.csv"))
    figure = draw(rows, keys, x="link.rate", y="goodput_bps")
    axes = figure.axes[0]
    assert len(axes.images) == 1
    assert [t.get_text() for t in axes.get_xticklabels()] == ["1Gbps", "10Gbps"]
    assert [t.get_text() for t in axes.get_yticklabels()] == ["64KiB", "1MiB"]
    assert figure.axes[1].get_ylabel() == "goodput [Gb/s]"


def test_window_axis_in_kib_or_mib(tmp_path):
    rows, keys = load(synthetic(tmp_path / "s.csv", rates=("1Gbps",)))
    figure = draw(rows, keys, x="tcp.wmem", y="latency.mean_ns", hue="link.rate")
    axes = figure.axes[0]
    assert axes.get_xlabel() == "tcp.wmem [KiB]"
    assert axes.get_ylabel() == "latency.mean [µs]"
    assert "link bound" not in [line.get_label() for line in axes.get_lines()]


def test_plot_writes_a_png(tmp_path):
    path = synthetic(tmp_path / "s.csv")
    out = plot(path, x="tcp.wmem", y="goodput_bps", hue="link.rate")
    assert out == tmp_path / "s.png"
    image = matplotlib.image.imread(out)
    assert image.shape[0] > 300 and image.shape[1] > 500


def test_unknown_columns_list_the_available_ones(tmp_path):
    path = synthetic(tmp_path / "s.csv")
    with pytest.raises(CpasimError, match=r"--y goodput: no such column .*available: link\.rate, "):
        plot(path, x="link.rate", y="goodput")
    with pytest.raises(CpasimError, match="--hue"):
        plot(path, x="link.rate", y="goodput_bps", hue="nope")


def test_other_bad_inputs(tmp_path):
    path = synthetic(tmp_path / "s.csv")
    with pytest.raises(CpasimError, match="no such sweep results file"):
        plot(tmp_path / "missing.csv", x="a", y="b")
    with pytest.raises(CpasimError, match="holds no finite numbers"):
        plot(path, x="link.rate", y="scenario_digest")
    with pytest.raises(CpasimError, match=r"\.png"):
        plot(path, x="link.rate", y="goodput_bps", out=tmp_path / "f.txt")


def decades(path):
    """Rates over three decades, two windows: goodput spans decades too."""
    rows = []
    for rate in ("10Mbps", "100Mbps", "1Gbps", "10Gbps"):
        for wmem in ("16KiB", "64KiB", "256KiB", "1MiB"):
            value = {"10Mbps": 1e7, "100Mbps": 1e8, "1Gbps": 1e9, "10Gbps": 1e10}[rate]
            size = {"16KiB": 2**14, "64KiB": 2**16, "256KiB": 2**18, "1MiB": 2**20}[wmem]
            good = min(link_bound(value, 1500), window_bound(size, value, 50e3, 1500))
            rows.append(
                {"link.rate": rate, "tcp.wmem": wmem, "repeat": 0, "seed": 1, "error": None,
                 "goodput_bps": good, "cfg.link.rate": value, "cfg.tcp.wmem": size,
                 "scenario_digest": "abc"}
            )  # fmt: skip
    table.write_rows(path, rows, ["link.rate", "tcp.wmem", "repeat", "seed", "error"])
    return path


def test_axes_spanning_decades_are_logarithmic(tmp_path):
    rows, keys = load(decades(tmp_path / "d.csv"))
    axes = draw(rows, keys, x="link.rate", y="goodput_bps", hue="tcp.wmem").axes[0]
    assert axes.get_xscale() == "log" and axes.get_yscale() == "log"
    assert [t.get_text() for t in axes.get_xticklabels()] == ["0.01", "0.1", "1", "10"]
    # One decade or less stays linear (the sweep above).
    rows, keys = load(synthetic(tmp_path / "s.csv"))
    axes = draw(rows, keys, x="link.rate", y="goodput_bps", hue="tcp.wmem").axes[0]
    assert axes.get_xscale() == "linear" and axes.get_yscale() == "linear"


@pytest.mark.slow
def test_heat_map_cells_read_on_their_colour(tmp_path):
    rows, keys = load(decades(tmp_path / "d.csv"))
    figure = draw(rows, keys, x="link.rate", y="goodput_bps")
    axes = figure.axes[0]
    image = axes.images[0]
    assert type(image.norm).__name__ == "LogNorm"  # values over three decades
    assert len(axes.texts) == 16
    for text in axes.texts:
        value = float(text.get_text())
        r, g, b, _ = image.cmap(image.norm(value))
        light = 0.299 * r + 0.587 * g + 0.114 * b > 0.5
        assert text.get_color() == ("black" if light else "white")
    assert {t.get_color() for t in axes.texts} == {"black", "white"}
