"""What a newcomer reads: suggestions, help, notes, folded listings, short reprs."""

from __future__ import annotations

import json
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

import cpasim
import cpasim.cli
from cpasim.analysis.fold import base, fold_profile, fold_queues, fold_slack, natural_sorted
from cpasim.analysis.names import closest, hint
from cpasim.cli import app, main
from cpasim.config import load_scenario
from cpasim.errors import CpasimError

cpasim.cli._register()
runner = CliRunner()
ROOT = Path(__file__).resolve().parents[1]
TRACES = Path(__file__).parent / "traces"
STACK = str(TRACES / "stack_driver.jsonl")
MODEL = TRACES / "model_tcp_stream.cpt"
STREAM = str(ROOT / "scenarios" / "tcp-stream.toml")


# -- name suggestions -------------------------------------------------------------------

FIFTY = [f"{h}:{sm}" for h in ("rx", "tx") for sm in ("App", "NIC RX", "NIC TX", "MAC")] + [
    f"tx:Q{i}" for i in range(42)
]


def test_a_name_wrong_only_in_case_is_named_not_fifty_others():
    assert closest("tx:app", FIFTY) == ["tx:App"]
    assert hint("tx:app", FIFTY) == "did you mean 'tx:App'?"
    # Not a case slip: the few nearest, never the whole list.
    near = hint("tx:Appp", FIFTY)
    assert near.startswith("closest: tx:App") and near.count(",") < 5
    assert "the trace has 50" in hint("zz:zz", FIFTY)
    assert hint("h:Nic", ["h:Driver", "h:Stack"]) == "the trace has: h:Driver, h:Stack"


def test_analyze_start_in_the_wrong_case_suggests_the_name():
    r = runner.invoke(app, ["analyze", STACK, "--start", "h:stack", "--end", "h:Driver"])
    assert r.exit_code != 0
    assert "no state machine h:stack; did you mean 'h:Stack'?" in str(r.exception)


def test_a_pattern_wrong_only_in_case_is_named():
    r = runner.invoke(
        app, ["analyze", STACK, "--start", "h:Stack", "--end", "h:Driver", "--break", "h:PKTQ"]
    )
    assert "did you mean h:pktq?" in str(r.exception)


# -- key suggestions --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "said"),
    [
        ("link.speed", "did you mean 'link.rate'?"),
        ("link.latency", "did you mean 'link.delay'?"),
        ("link.rat", "did you mean 'link.rate'?"),
        ("lnk.rate", "did you mean 'link.rate'?"),
        ("Link.Rate", "did you mean 'link.rate'?"),
        ("hosts.tx.tcp.wmme", "did you mean 'hosts.tx.tcp.wmem'?"),
        ("link.zzz", "link has: delay, loss, mtu, rate"),
        ("cpu.bogus", "cpu has: cache.*, cores, cost.*, freq, irq_cores, irq_preempt"),
    ],
)
def test_an_unknown_key_suggests_the_one_meant(key, said):
    with pytest.raises(CpasimError) as exc:
        load_scenario(STREAM, sets=[f"{key}=1"])
    assert said in str(exc.value)


# -- sweep --repeat without randomness --------------------------------------------------


def test_random_draws_name_every_source_of_randomness():
    from cpasim.model.system import random_draws

    cfg = load_scenario(STREAM)
    assert random_draws(cfg) == []
    assert random_draws(cfg.with_overrides({"link.loss": 0.01})) == ["link.loss = 0.01"]
    assert random_draws(cfg.with_overrides({"tcp.cc": "bbr"})) == [
        "hosts.tx.tcp.cc = bbr",
        "hosts.rx.tcp.cc = bbr",
    ]
    web = load_scenario(ROOT / "scenarios" / "webserver.toml")
    assert "the webserver's file sizes" in random_draws(web)


def test_repeats_that_cannot_differ_get_a_note():
    from cpasim.sweeps import plan, repeat_note

    base, _keys, points = plan(STREAM, {"link.rate": ["1Gbps", "2Gbps"]}, repeat=3)
    note = repeat_note(base, points, 3)
    assert note is not None and "--repeat 3" in note and "same row" in note
    assert repeat_note(base, points, 1) is None
    # One point with loss is enough for repeats to differ.
    base, _keys, points = plan(STREAM, {"link.loss": ["0", "0.01"]}, repeat=2)
    assert repeat_note(base, points, 2) is None


def test_sweep_command_says_the_note_on_stderr(monkeypatch, capsys):
    import cpasim.sweeps

    def fake(*args, note=None, **kwargs):
        note("a note")
        return [], ["link.rate"]

    monkeypatch.setattr(cpasim.sweeps, "sweep_rows", fake)
    with pytest.raises(SystemExit):
        main(["sweep", STREAM, "-g", "link.rate=1Gbps", "-r", "2"])
    assert "cpasim: note: a note" in capsys.readouterr().err


# -- plot takes its axes from the sweep ---------------------------------------------------


def test_default_axes_are_the_first_swept_key_and_the_runs_metric(tmp_path):
    from test_plot import synthetic

    from cpasim.plot import default_axes, load

    path = synthetic(tmp_path / "s.csv")
    assert default_axes(*load(path), path) == ("link.rate", "goodput_bps")
    rows = [{"latency_ns.mean": 5.0}]
    assert default_axes(rows, ["link.delay"], path) == ("link.delay", "latency_ns.mean")
    with pytest.raises(CpasimError, match="no key was swept"):
        default_axes(rows, [], path)


@pytest.mark.slow
def test_plot_takes_its_axes_from_the_swept_keys(tmp_path, capsys):
    from test_plot import synthetic

    path = synthetic(tmp_path / "s.csv")
    with pytest.raises(SystemExit) as done:
        main(["plot", str(path)])
    assert done.value.code in (0, None)
    err = capsys.readouterr().err
    assert "plotting goodput_bps against link.rate" in err
    assert (tmp_path / "s.png").stat().st_size > 0


# -- help -------------------------------------------------------------------------------


def _commands():
    import typer

    def walk(cmd, path):
        yield path, cmd
        for name, sub in getattr(cmd, "commands", {}).items():
            yield from walk(sub, [*path, name])

    return list(walk(typer.main.get_command(app), []))


#: Words before an option that make it another program's or command's, not this one's.
_OTHERS = {"run", "analyze", "iperf3", "cpasim"}


def _quick_or_slow(path):
    # Rendering a help page costs ~0.1 s: the quick suite checks the three that had the
    # faults, CI all of them.
    quick = path in (["ladder"], ["plot"], ["trace", "names"])
    return path if quick else pytest.param(path, marks=pytest.mark.slow)


@pytest.mark.parametrize(
    "path", [_quick_or_slow(p) for p, _c in _commands()], ids=lambda p: " ".join(p) or "-"
)
def test_help_has_no_type_labels_markup_or_foreign_options(path):
    cmd = dict((tuple(p), c) for p, c in _commands())[tuple(path)]
    out = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "200"}).output
    assert "<bool>" not in out and "``" not in out
    own = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)} | {"--help"}
    words = re.sub(r"[│╭╮╰╯─()'`,;]", " ", out).split()
    # An option right after another program's or command's name is that one's, and so
    # are those listed after it ("analyze --scale-comm, --break and --capacity").
    foreign = False
    for before, word in zip(["", *words], words, strict=False):
        if not word.startswith("--"):
            foreign = foreign and word in ("and", "or")
            continue
        option = re.match(r"--[a-z][\w-]*", word)
        if option is None:
            continue
        foreign = foreign or before in _OTHERS or before.startswith("--")
        assert option.group() in own or foreign, f"{' '.join(path)}: mentions {word}"


# -- the ladder chart -------------------------------------------------------------------


def test_chart_labels_never_break_a_value_from_its_unit():
    from cpasim.predict.ladder import _wrap

    for text in (
        "hosts.tx.tcp.wmem=4MiB, hosts.rx.tcp.rmem=4MiB",
        "tcp.wmem=4MiB, tcp.rmem=4MiB",
        "hosts.tx.pcie.lanes=4",
        "tx:NIC TX:DMA packet",
    ):
        lines = _wrap(text).split("\n")
        assert " ".join(lines).replace("= ", "=") == text
        for line in lines:
            assert not re.match(r"^(iB|B|bps|s)\b", line), lines
    assert _wrap("hosts.tx.tcp.wmem=4MiB, x", 12).split("\n") == ["hosts.tx.tcp.wmem=", "4MiB, x"]


# -- progress off a terminal ------------------------------------------------------------


def test_no_progress_output_at_all_when_stderr_is_no_terminal(monkeypatch, capsys):
    from cpasim import progress, simulate

    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.setenv("TERM", "dumb")
    monkeypatch.setattr(simulate, "PROGRESS_AFTER_S", -1.0)
    monkeypatch.setattr(progress, "PROGRESS_AFTER_S", 0.0)
    with progress.activity("piped"):
        cpasim.run(STREAM, progress=True, **{"sim.duration": "1ms", "sim.warmup": "0.2ms"})
    assert capsys.readouterr().err == ""


# -- analyze: folded, cut to --top, ends from the sidecar ---------------------------------


def test_instances_fold_and_sort_as_numbers():
    assert base("tx:A#1->rx:B#22[rx:q#3]") == "tx:A->rx:B[rx:q]"
    assert natural_sorted(["rx:Link#10", "rx:Link#2", "rx:Link"]) == [
        "rx:Link",
        "rx:Link#2",
        "rx:Link#10",
    ]
    st = [{"state": "go", "active_ns": 4.0, "waiting_ns": 0.0, "entered": 2}]
    rows = fold_profile(
        [
            {"sm": "rx:Link#2", "active_ns": 4.0, "waiting_ns": 6.0, "states": st},
            {"sm": "rx:Link#10", "active_ns": 2.0, "waiting_ns": 8.0, "states": st},
            {"sm": "rx:App", "active_ns": 1.0, "waiting_ns": 0.0, "states": []},
        ]
    )
    assert [(r["sm"], r["instances"], r["active_ns"]) for r in rows] == [
        ("rx:Link", 2, 3.0),
        ("rx:App", 1, 1.0),
    ]
    q = {
        "capacity": 1,
        "held_at_end": 0,
        "mean_occupancy": 0.5,
        "max_occupancy": 1,
        "waits_empty": 2,
        "waited_empty_ns": 10.0,
        "waits_full": 0,
        "waited_full_ns": 0.0,
        "comm_latency_mean_ns": 4.0,
        "comm_latency_max_ns": 5.0,
        "arrivals": 2,
        "arrival_rate_per_s": 1.0,
    }
    folded = fold_queues(
        [
            {**q, "queue": "tx:wire#1"},
            {**q, "queue": "tx:wire#12", "waits_full": 1, "waited_full_ns": 3.0},
        ]
    )
    [wire] = folded
    assert wire["queue"] == "tx:wire" and wire["instances"] == 2 and wire["capacity"] == 1
    assert wire["waits_full"] == 0.5 and wire["comm_latency_mean_ns"] == 4.0
    assert fold_slack([{"name": "a#1", "slack_ns": 5.0}, {"name": "a#2", "slack_ns": 2.0}]) == [
        {"name": "a", "slack_ns": 2.0, "instances": 2}
    ]


def test_detail_obeys_top_and_folds_instances():
    r = runner.invoke(
        app, ["analyze", str(MODEL), "--start", "tx:App", "--end", "rx:App", "--detail"]
    )
    assert r.exit_code == 0, r.output
    assert not re.search(r"Link#\d", r.output)  # every numbered instance folded
    assert re.search(r"Link ×\d+", r.output)
    short = runner.invoke(
        app,
        ["analyze", str(MODEL), "--start", "tx:App", "--end", "rx:App", "--detail", "--top", "2"],
    ).output
    rows = [ln for ln in short.splitlines() if ln.startswith("│")]
    assert len(rows) <= 5 * 2  # five tables of at most two rows
    assert "more state machines (--top" in short and "more queues" in short
    assert len(short.splitlines()) < 60


def test_analyze_takes_the_runs_ends_from_the_sidecar(tmp_path):
    trace = tmp_path / "w.cpt"
    cpasim.run(
        ROOT / "scenarios" / "webserver.toml",
        trace=trace,
        **{"sim.duration": "1ms", "sim.warmup": "0.1ms"},
    )
    r = runner.invoke(app, ["analyze", str(trace), "--json"])
    assert r.exit_code == 0, r.output
    assert "--start rx:App --end rx:App (the run's, from w.cpt.run.json)" in r.stderr
    assert json.loads(r.stdout)["start"] == "rx:App"
    # The API reads it too (a webserver's path runs rx:App -> rx:App).
    assert cpasim.analyze(trace).start == "rx:App"
    bare = tmp_path / "bare.cpt"
    shutil.copy(trace, bare)
    r = runner.invoke(app, ["analyze", str(bare)])
    assert r.exit_code != 0
    assert "give --start and --end" in str(r.exception)
    assert "bare.cpt.run.json" in str(r.exception)


@pytest.mark.slow
def test_dot_and_timeline_say_what_they_wrote(tmp_path):
    dot, png = tmp_path / "g.dot", tmp_path / "t.png"
    r = runner.invoke(
        app,
        [
            "analyze",
            str(MODEL),
            "--start",
            "tx:App",
            "--end",
            "rx:App",
            "--dot",
            str(dot),
            "--timeline",
            str(png),
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    said = [ln for ln in r.stderr.splitlines() if ln.startswith("cpasim: wrote")]
    assert said == [
        f"cpasim: wrote {png}: the critical path through every state machine's states, "
        + said[0].split("states, ")[1],
        f"cpasim: wrote {dot}: the state machines and queues, critical path in red "
        f"(Graphviz: dot -Tsvg {dot})",
    ]
    assert re.search(r"[\d.]+ ms to [\d.]+ ms$", said[0])
    json.loads(r.stdout)  # stdout stays the JSON


def test_ladder_plot_line_names_what_it_shows():
    from cpasim.predict.ladder import Ladder, plot_what

    lad = Ladder("goodput_bps", [object(), object(), object()], None)
    assert plot_what(lad).startswith("goodput of 3 configurations, each predicted")


# -- reprs ------------------------------------------------------------------------------


class _Tables(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)

    def handle_data(self, data):
        self.text.append(data)


def _html(obj) -> tuple[list[str], str]:
    parser = _Tables()
    parser.feed(obj._repr_html_())
    return parser.tags, " ".join(parser.text)


def _path(bottleneck, cp=1e6):
    from cpasim.predict.runs import PathSummary

    return PathSummary({"": cp}, bottleneck, 0.4, [], [])


def _prediction():
    from cpasim.predict.whatif import Prediction

    return Prediction(
        "goodput_bps",
        1.08e9,
        1.62e9,
        _path("tx:Link:propagate"),
        _path("tx:NIC TX:DMA packet", 2e6 / 3),
        ("tx:MAC:transmit × 0.1",),
        (0.0, 1e8),
    )


def test_prediction_repr_is_one_short_line():
    text = repr(_prediction())
    assert "\n" not in text and len(text) < 160
    assert text == (
        "Prediction(goodput_bps: 1.08 Gb/s -> 1.62 Gb/s (x1.500), bottleneck "
        "tx:Link:propagate -> tx:NIC TX:DMA packet)"
    )


def test_results_show_a_table_in_notebooks():
    from cpasim.predict.ladder import Ladder, Rung
    from cpasim.predict.validation import Validation

    res = cpasim.run(STREAM, **{"sim.duration": "1ms", "sim.warmup": "0.2ms"})
    tags, text = _html(res)
    assert tags[0] == "table" and "goodput" in text and "b/s" in text
    analysis = cpasim.analyze(STACK, "h:Stack", "h:Driver")
    tags, text = _html(analysis)
    assert tags[0] == "table" and "critical path h:Stack -> h:Driver" in text
    tags, text = _html(_prediction())
    assert "1.62 Gb/s (×1.500)" in text and "tx:NIC TX:DMA packet" in text
    p = _prediction()
    v = Validation("goodput_bps", p.baseline, p.baseline_path, p, 1.5e9, _path("tx:App:copy"))
    tags, text = _html(v)
    assert "re-simulated" in text and "8.0%" in text
    runs = [SimpleNamespace(metric=m, path=_path(b)) for m, b in ((1e9, "a<b>"), (2e9, "c"))]
    remedy = SimpleNamespace(describe=lambda: "link.rate=10Gbps")
    lad = Ladder("goodput_bps", [Rung(1, None, runs[0]), Rung(2, remedy, runs[1])], None)
    raw = lad._repr_html_()
    assert "a&lt;b&gt;" in raw and "<b>a" not in raw  # names are escaped
    tags, text = _html(lad)
    assert "config 2: link.rate=10Gbps" in text and "2 Gb/s" in text
