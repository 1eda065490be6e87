"""A run folder's ``report.html``: one page a person opens to see what a run gave.

The page stands on its own (no file or network beside it): the verdict first
(what limits the system and what a change would buy, when the run was explained),
then the run's figures, its pictures inline (the time series when one was
recorded; the critical-path timeline and graph when the run was traced or
analysed) and the configuration simulated.  :func:`write_report` is the one entry
point; ``cpasim run/validate/ladder --out`` and :func:`cpasim.run` call it.

The graph is Graphviz's SVG (``dot -Tsvg``), inlined; without Graphviz the page
says so and the folder keeps the graph as ``critical-path.dot``.
"""

from __future__ import annotations

import base64
import io
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path

from cpasim.files import is_stream, write_text_atomically
from cpasim.results import metric_text

REPORT = "report.html"
#: The critical-path graph kept beside the page when Graphviz cannot draw it.
GRAPH_DOT = "critical-path.dot"
#: Path edges an analysis keeps for the timeline (its listing must reach the run's end).
LISTING = 5_000_000
#: Seconds Graphviz may take to lay out the graph.
DOT_TIMEOUT_S = 60

_STYLE = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 70em;
       padding: 0 1.5em; color: #1a1a1a; }
h1 { font-size: 1.5em; margin-bottom: 0.1em; }
h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ddd; }
.sub { color: #555; margin-top: 0; }
.verdict { border-left: 6px solid #cb181d; background: #fff5f0; padding: 0.8em 1.2em; }
.verdict.none { border-color: #999; background: #f4f4f4; }
.headline { font-size: 1.3em; font-weight: 600; margin: 0.2em 0 0.5em; }
table { border-collapse: collapse; }
td, th { padding: 0.2em 0.9em 0.2em 0; vertical-align: top; text-align: left; }
th { font-weight: 600; }
table.grid td, table.grid th { border-bottom: 1px solid #eee; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
code, pre { font: 13px/1.4 ui-monospace, monospace; }
p code { white-space: nowrap; }
pre { background: #f6f6f6; padding: 0.8em; overflow: auto; max-height: 40em; }
figure { margin: 1em 0 2em; }
figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figure .svg { border: 1px solid #eee; }
figure .svg svg { max-width: 100%; height: auto; }
figcaption { color: #444; margin-top: 0.3em; }
.missing { color: #8a4b00; }
"""


def write_report(
    folder: str | Path,
    *,
    result: Mapping,
    config_text: str,
    series: Path | None = None,
    analysis=None,
    trace=None,
    images: Sequence[tuple[str, Path]] = (),
    title: str | None = None,
) -> Path:
    """Write ``folder/report.html``; returns its path.

    ``result``: what the run folder's ``result.json`` holds (a run's, a
    validation's or a ladder's); its ``verdict`` (:mod:`cpasim.verdict`'s JSON)
    is the page's headline when present.  ``config_text``: the scenario
    simulated, as ``config.toml`` holds it.  ``series``: the time series file,
    drawn when given.  ``analysis``: the run's unmodified
    :class:`~cpasim.analysis.AnalysisResult`, for the critical-path graph;
    ``trace``: the trace (a file or a re-readable
    :class:`~cpasim.tracing.records.TraceSource`), for the timeline; with a trace
    and no analysis (or one whose listing stops short of the run's end) the trace
    is analysed here.  ``images``: further pictures (caption, PNG file), e.g. the
    ladder's chart.
    """
    folder = Path(folder)
    pictures = []
    # A series or trace sent to a device or pipe (files.is_stream) is gone: not read back.
    if series is not None and is_stream(series):
        pictures.append(_streamed("The time series", series))
        series = None
    if isinstance(trace, str | Path) and is_stream(trace):
        pictures.append(_streamed("The trace", trace))
        trace = None
    if trace is not None and (analysis is None or _listing_short(analysis)):
        analysis = _analyse(trace, result)
    parts = [_head(title or _title(result), result)]
    parts.append(_verdicts(result))
    parts.append(_summary(result))
    if series is not None:
        pictures.append(_series_figure(Path(series)))
    pictures += [_png_figure(caption, Path(path)) for caption, path in images]
    if analysis is not None and trace is not None:
        pictures.append(_timeline_figure(trace, analysis))
    if analysis is not None:
        pictures.append(_graph_figure(analysis, folder))
    if pictures:
        parts.append("<h2>Pictures</h2>" + "".join(pictures))
    parts.append(
        "<h2>Configuration</h2><details><summary>The scenario as simulated "
        "(<code>config.toml</code> in this folder; <code>cpasim run config.toml</code> "
        f"runs it again)</summary><pre>{escape(config_text)}</pre></details>"
    )
    page = (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>{escape(title or _title(result))}</title><style>{_STYLE}</style></head>"
        "<body>" + "\n".join(parts) + "</body></html>\n"
    )
    path = folder / REPORT
    write_text_atomically(path, page)
    return path


# -- what kind of result ----------------------------------------------------------------


def _kind(result: Mapping) -> str:
    if "configs" in result:
        return "ladder"
    if any(k.startswith("actual_") for k in result):
        return "validation"
    return "run"


def _title(result: Mapping) -> str:
    kind = _kind(result)
    if kind == "ladder":
        return "cpasim ladder"
    if kind == "validation":
        return "cpasim validate"
    return "cpasim run" + (f": {result['scenario']}" if result.get("scenario") else "")


def _head(title: str, result: Mapping) -> str:
    sub = []
    if result.get("workload"):
        sub.append(f"workload {escape(str(result['workload']))}")
    if result.get("config_digest"):
        sub.append(f"config {escape(str(result['config_digest']))}")
    line = f"<p class='sub'>{' · '.join(sub)}</p>" if sub else ""
    return f"<h1>{escape(title)}</h1>{line}"


# -- the verdict ---------------------------------------------------------------------


def _verdicts(result: Mapping) -> str:
    """The run's verdict, then any other (``changed_verdict``: after the change)."""
    verdict = result.get("verdict")
    if not verdict:
        return (
            "<section class='verdict none'><p class='headline'>This run was not explained."
            "</p><p>What limits it, and what a change would buy, is found from its critical "
            "path: run it again with <code>--explain</code> (e.g. <code>cpasim run "
            "SCENARIO --explain --out DIR</code>).</p></section>"
        )
    out = [_verdict(verdict, None)]
    for key, other in result.items():
        if key.endswith("_verdict") and other:
            out.append(_verdict(other, key.removesuffix("_verdict").replace("_", " ")))
    return "".join(out)


def _verdict(v: Mapping, which: str | None) -> str:
    head = f"<p class='sub'>verdict of the {escape(which)} system</p>" if which else ""
    rows = [f"<p class='headline'>{escape(str(v.get('summary') or 'no verdict'))}</p>"]
    facts = []
    if v.get("kind"):
        facts.append(("kind", v["kind"]))
    if v.get("resource"):
        where = f" (host {v['host']})" if v.get("host") else ""
        facts.append(("resource", f"{v['resource']}{where}"))
    change = v.get("change") or {}
    if change:
        facts.append(("change", ", ".join(f"{k}={val}" for k, val in change.items())))
    predicted = v.get("predicted")
    if predicted:
        m = str(predicted.get("metric", ""))
        base, value = predicted.get("baseline"), predicted.get("value")
        ratio = f" (×{value / base:.3g})" if base and value is not None else ""
        facts.append(
            (
                "the change would give",
                f"{metric_text(m, value)}, from {metric_text(m, base)}{ratio}",
            )
        )
    if v.get("next"):
        facts.append(("then limited by", v["next"]))
    table = "".join(
        f"<tr><th>{escape(k)}</th><td>{_code(k, str(val))}</td></tr>" for k, val in facts
    )
    if table:
        rows.append(f"<table>{table}</table>")
    evidence = v.get("evidence") or []
    if evidence:
        rows.append(
            "<p>Evidence:</p><ul>"
            + "".join(f"<li>{escape(str(e))}</li>" for e in evidence)
            + "</ul>"
        )
    return f"<section class='verdict'>{head}{''.join(rows)}</section>"


def _code(key: str, text: str) -> str:
    return f"<code>{escape(text)}</code>" if key == "change" else escape(text)


# -- the figures -----------------------------------------------------------------------


def _summary(result: Mapping) -> str:
    kind = _kind(result)
    if kind == "ladder":
        return "<h2>Configurations</h2>" + _ladder_table(result)
    if kind == "validation":
        return "<h2>Prediction and re-simulation</h2>" + _rows_table(_validation_rows(result))
    return "<h2>Summary</h2>" + _rows_table(_run_rows(result))


def _rows_table(rows: Sequence[tuple[str, str]]) -> str:
    body = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in rows)
    return f"<table class='grid'>{body}</table>"


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _run_rows(r: Mapping) -> list[tuple[str, str]]:
    rows = []
    if r.get("window") == "empty":
        rows.append(("goodput", "- (the run ended before its warm-up did: nothing measured)"))
    else:
        rows.append(("goodput", metric_text("goodput_bps", r.get("goodput_bps"))))
    per = r.get("goodput_bps_per_connection") or {}
    if len(per) > 1:
        values = sorted(per.values())
        rows.append(
            (
                f"per connection ({len(per)})",
                f"min {metric_text('goodput_bps', values[0])}, "
                f"max {metric_text('goodput_bps', values[-1])}",
            )
        )
    lat = r.get("latency_ns")
    if lat:
        rows.append(
            (
                "latency",
                f"mean {metric_text('latency', lat.get('mean'))}, "
                f"p99 {metric_text('latency', lat.get('p99'))} ({lat.get('count', 0)} samples)"
                if lat.get("count")
                else "no request completed after the warm-up",
            )
        )
    for what, key in (
        ("link busy", "link_utilization"),
        ("bottleneck busy", "bottleneck_utilization"),
    ):
        if r.get(key):
            rows.append(
                (what, ", ".join(f"{k.replace('_to_', '->')} {_pct(v)}" for k, v in r[key].items()))
            )
    for host, bus in (r.get("io_bus_utilization") or {}).items():
        rows.append((f"I/O bus {host}", f"up {_pct(bus['up'])}, down {_pct(bus['down'])}"))
    if r.get("memory_utilization"):
        rows.append(
            ("memory busy", ", ".join(f"{h} {_pct(v)}" for h, v in r["memory_utilization"].items()))
        )
    for host, cpu in (r.get("cpu_utilization") or {}).items():
        busy = ", ".join(f"{c} {_pct(v)}" for c, v in cpu.items() if c != "idle" and v > 0.0005)
        rows.append(
            (f"CPU {host}", f"idle {_pct(cpu.get('idle', 0.0))}" + (f"; {busy}" if busy else ""))
        )
    drops = {k: v for k, v in (r.get("drops") or {}).items() if v}
    rows.append(("drops", ", ".join(f"{k} {v}" for k, v in drops.items()) or "none"))
    if "retransmits" in r:
        rows.append(("retransmits", str(r["retransmits"])))
    if "sim_time_ns" in r:
        rows.append(
            (
                "simulated",
                f"{metric_text('time', r['sim_time_ns'])}, {r.get('events', 0)} events, "
                f"wall {r.get('wall_s', 0.0):.2f} s",
            )
        )
    rows += [("warning", str(w)) for w in r.get("warnings") or []]
    return rows


def _validation_rows(r: Mapping) -> list[tuple[str, str]]:
    m = str(r.get("metric", "goodput_bps"))
    predicted = r.get(f"predicted_{m}")
    rows = [
        ("baseline", metric_text(m, r.get(f"baseline_{m}"))),
        (
            "predicted",
            metric_text(m, predicted) if predicted is not None else f"refused: {r.get('refused')}",
        ),
        ("re-simulated", metric_text(m, r.get(f"actual_{m}"))),
        ("error", "-" if r.get("error") is None else f"{r['error']:.1%}"),
        ("bottleneck before", str(r.get("baseline_bottleneck"))),
    ]
    if predicted is not None:
        rows.append(("bottleneck predicted", str(r.get("predicted_bottleneck"))))
    rows.append(("bottleneck re-simulated", str(r.get("actual_bottleneck"))))
    rows += [("what-if", str(t)) for t in r.get("transforms") or []]
    return rows


def _ladder_table(r: Mapping) -> str:
    m = str(r.get("metric", "goodput_bps"))
    head = "<tr><th>config</th><th>change</th><th>re-simulated</th><th>bottleneck</th>"
    head += "<th>predicted from config 1 (error)</th></tr>"
    body = []
    for c in r.get("configs") or []:
        first = next((p for p in c.get("predictions", []) if p.get("from_config") == 1), None)
        pred = f"{metric_text(m, first[f'predicted_{m}'])} ({first['error']:.1%})" if first else "—"
        cells = [
            f"<td class='num'>{c['config']}</td>",
            f"<td><code>{escape(str(c.get('change') or 'baseline'))}</code></td>",
            f"<td class='num'>{escape(metric_text(m, c.get(f'actual_{m}')))}</td>",
            f"<td>{escape(str(c.get('actual_bottleneck')))}</td>",
            f"<td>{escape(pred)}</td>",
        ]
        body.append("<tr>" + "".join(cells) + "</tr>")
    stopped = f"<p>Stopped early: {escape(str(r['stopped']))}.</p>" if r.get("stopped") else ""
    return f"<table class='grid'>{head}{''.join(body)}</table>{stopped}"


# -- the pictures ----------------------------------------------------------------------


def _figure(inner: str, caption: str) -> str:
    return f"<figure>{inner}<figcaption>{escape(caption)}</figcaption></figure>"


def _img(png: bytes, alt: str) -> str:
    data = base64.b64encode(png).decode("ascii")
    return f"<img alt='{escape(alt)}' src='data:image/png;base64,{data}'>"


def _png_of(figure) -> bytes:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    try:
        figure.savefig(buf, format="png", dpi=100)
    finally:
        plt.close(figure)
    return buf.getvalue()


def _agg() -> None:
    import matplotlib

    matplotlib.use("Agg")


def _series_figure(path: Path) -> str:
    from cpasim.plot_series import draw_series
    from cpasim.series import read_series

    _agg()
    png = _png_of(draw_series(read_series(path)))
    return _figure(
        _img(png, "time series"),
        f"Time series ({path.name}): windows, queues and goodput over simulated time.",
    )


def _streamed(what: str, path) -> str:
    return (
        f"<p class='missing'>{what} went to <code>{escape(str(path))}</code>, a device or "
        "pipe, as it was made, so it is not drawn here.</p>"
    )


def _png_figure(caption: str, path: Path) -> str:
    return _figure(_img(path.read_bytes(), caption), caption)


def _source(trace):
    from cpasim.tracing import open_trace

    return open_trace(trace) if isinstance(trace, str | Path) else trace


def _timeline_figure(trace, analysis) -> str:
    from cpasim.analysis.timeline import default_window, draw_timeline

    _agg()
    t0, t1 = default_window(analysis)
    png = _png_of(draw_timeline(_source(trace), analysis, (t0, t1)))
    return _figure(
        _img(png, "critical-path timeline"),
        f"Critical-path timeline, {t0 / 1e6:.6g}–{t1 / 1e6:.6g} ms: every state machine's "
        "states (coloured spans), the critical path as a black line through them.",
    )


def _graph_figure(analysis, folder: Path) -> str:
    from cpasim.analysis.dot import to_dot

    text = to_dot(analysis, "high")
    caption = (
        "Critical-path graph: state machines (ellipses) and queues (boxes); the critical "
        "path in red, darker where it spends more of its time."
    )
    svg = render_svg(text)
    if svg is None:
        write_text_atomically(folder / GRAPH_DOT, text)
        return _figure(
            f"<p class='missing'>Graphviz's <code>dot</code> is not installed, so the graph is "
            f"not drawn here; it is in <code>{GRAPH_DOT}</code> beside this page (install "
            f"Graphviz, then <code>dot -Tsvg {GRAPH_DOT}</code>).</p>",
            caption,
        )
    return _figure(f"<div class='svg'>{svg}</div>", caption)


def render_svg(dot_text: str) -> str | None:
    """Graphviz's SVG of ``dot_text`` as an element to inline (no XML prologue), or
    None without Graphviz."""
    exe = shutil.which("dot")
    if exe is None:
        return None
    done = subprocess.run(
        [exe, "-Tsvg"], input=dot_text, capture_output=True, text=True, timeout=DOT_TIMEOUT_S
    )
    if done.returncode != 0:
        from cpasim.errors import CpasimError

        raise CpasimError(f"Graphviz could not draw the critical-path graph: {done.stderr.strip()}")
    svg = done.stdout
    return svg[svg.index("<svg") :]


# -- analysing a trace for the pictures ----------------------------------------------------


def _listing_short(analysis) -> bool:
    paths = [analysis.path] if analysis.path is not None else list(analysis.connections.values())
    return any(p.reachable and len(p.edges) < p.edge_count for p in paths)


def _analyse(trace, result: Mapping):
    """The unmodified critical path of ``trace``, from the run's own start and end,
    with the whole listing the timeline draws from."""
    from cpasim.analysis import analyze

    start = ":".join(result.get("analysis_start") or ("tx", "App"))
    end = ":".join(result.get("analysis_end") or ("rx", "App"))
    return analyze(_source(trace), start, end, listing_limit=LISTING)
