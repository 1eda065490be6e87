"""Seed 004's figures row by row: what cpasim gives for each, its label and its tolerance.

Every row of calibration/SEEDS.md's tables is one :class:`Row`: the seed's figure (a
row of ``calibration/seeds/saidi_ch6.csv``, or a figure computed from such rows), how
the model's figure is measured, its label and the tolerance the model achieves, or
the reason it is a strict xfail.  ``calibration/seeds_report.py`` renders the tables
from these rows and ``tests/test_seed_rows.py`` holds each row to its tolerance, so
the document and the tests cannot disagree.

Labels: *fitted* (a fit's target), *derived from fitted values*, *held out* (used in no
fit) and *closed form*.  Tolerances: bandwidths relative; shares of the critical path
and the seed's "% waiting" in percentage points, at the tolerance achieved and at most
3 points or 10% of the seed's figure, whichever is larger (:data:`SHARE_LIMIT`); a row
beyond is a strict xfail whose reason says why, with figures.

The runs are short (the tests' lengths: 30 ms after 10 ms for the UDP and copy-engine
streams, 50 ms after 20 ms for the TCP ladder, the web server's full 120 ms), each made
once per process (:func:`functools.cache`), so the report and the tests share them.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import fit_copy_engine
import fit_seeds

from cpasim.calibrate.reference import read_reference

ROOT = Path(__file__).resolve().parent.parent
SAIDI = ROOT / "calibration" / "seeds" / "saidi_ch6.csv"
SCENARIOS = ROOT / "scenarios"

#: A share's tolerance may not exceed this many percentage points or this share of the
#: seed's figure, whichever is larger.
SHARE_LIMIT = (3.0, 0.10)

X1, X4 = "UDP stream PCIe x1", "UDP stream PCIe x4"
UDP_SHORT = ("sim.duration=30ms", "sim.warmup=10ms")
TCP_SHORT = ("sim.duration=50ms", "sim.warmup=20ms")
CALL = "tx:App:ip_push_pending_frames"

#: The TCP ladder's configurations, cumulative (names as saidi_ch6.csv's "system").
LADDER = tuple((name, tuple(change)) for name, change in fit_seeds.LADDER)
#: The copy-engine configurations.
COPY_ENGINE = {name: tuple(change) for name, change in fit_copy_engine.CONFIGS}
#: The seed's cache effect on the ladder (cpu.cache.ack_footprint): gem5's data cache at
#: the thesis's revision (configs/example/fs.py: 64 KiB L1, 64-byte blocks), the writer's
#: copies hitting (the data it just wrote), and the sender's copy refitted to
#: configuration 4's 2992 Mb/s with it.
ACK_FOOTPRINT = (
    "hosts.tx.cpu.cache.size=64KiB",
    "hosts.tx.cpu.cache.line=64B",
    "hosts.tx.cpu.cache.working_set=64KiB",
    "hosts.tx.cpu.cache.ack_footprint=true",
    "hosts.tx.cpu.cost.copy_per_byte=3.56",
)
#: Web server runs: three cores, one of them for interrupts, two server processes.
THIRD_CORE = ("hosts.tx.cpu.cores=3", "hosts.tx.cpu.irq_cores=1", "workload.processes=2")


# -- the seed's figures -----------------------------------------------------------------------
@cache
def _saidi() -> dict[tuple[str, str], float]:
    return {(f.quantity, f.system): f.value for f in read_reference(SAIDI)}


def seed(quantity: str, system: str = X4) -> float:
    """One figure of saidi_ch6.csv, in its own unit (Gb/s, Mb/s, percent)."""
    return _saidi()[(quantity, system)]


# -- the runs ---------------------------------------------------------------------------------
_TMP: Path | None = None


def _tmp() -> Path:
    global _TMP
    if _TMP is None:
        _TMP = Path(tempfile.mkdtemp(prefix="cpasim-seeds-"))
        atexit.register(shutil.rmtree, _TMP, True)
    return _TMP


def config(scenario: str, sets: tuple[str, ...]):
    from cpasim.config import load_scenario

    return load_scenario(SCENARIOS / scenario, sets=list(sets))


_TRACED: dict[tuple, object] = {}
_RESULTS: dict[tuple, dict] = {}


def result(scenario: str, sets: tuple[str, ...]) -> dict:
    """``Result.to_json()`` of one run: the traced run's when there is one (tracing
    never changes a result), else an untraced run's."""
    key = (scenario, sets)
    if key in _TRACED:
        return _TRACED[key].result
    if key not in _RESULTS:
        from cpasim.simulate import simulate

        _RESULTS[key] = simulate(config(scenario, sets)).to_json()
    return _RESULTS[key]


def traced(scenario: str, sets: tuple[str, ...]):
    """One traced, analysed run (:class:`cpasim.predict.runs.TracedRun`)."""
    key = (scenario, sets)
    if key not in _TRACED:
        from cpasim.predict.runs import traced_run

        trace = _tmp() / f"run{len(_TRACED)}.cpt"
        _TRACED[key] = traced_run(config(scenario, sets), trace)
    return _TRACED[key]


@cache
def states(scenario: str, sets: tuple[str, ...], scale: tuple = ()) -> dict[str, tuple]:
    """``{state: (share, core-lent share)}`` of every state on the run's critical path,
    with the states ``scale`` names scaled."""
    from cpasim.analysis import Transforms, analyze
    from cpasim.tracing import open_trace

    run = traced(scenario, sets)
    res = analyze(
        open_trace(run.trace),
        run.start,
        run.end,
        transforms=Transforms(scale=list(scale)),
        min_share=0.0,
    )
    return {m["name"]: (m["share"], m["core_lent_share"]) for m in res.path.most_critical}


def udp(lanes: int = 1, *extra: str) -> tuple[str, ...]:
    return (*UDP_SHORT, f"hosts.tx.pcie.lanes={lanes}", *extra)


def tcp(index: int, *extra: str) -> tuple[str, ...]:
    """The ``--set`` list of ladder configuration ``index`` (0-3)."""
    return (*TCP_SHORT, *(s for _, change in LADDER[: index + 1] for s in change), *extra)


def engine(name: str, *extra: str) -> tuple[str, ...]:
    return (*UDP_SHORT, *COPY_ENGINE[name], *extra)


# -- what the model gives ---------------------------------------------------------------------
def link_gbps(scenario: str, sets: tuple[str, ...]) -> float:
    r = traced(scenario, sets).result  # the run the path's shares come from
    return r["link_utilization"]["tx_to_rx"] * config(scenario, sets).link.rate / 1e9


def goodput(
    scenario: str, sets: tuple[str, ...], unit: float = 1e6, *, trace: bool = False
) -> float:
    """Goodput of one run in ``unit``; ``trace``: of the traced run (one the tests and
    the predictions analyse anyway)."""
    r = traced(scenario, sets).result if trace else result(scenario, sets)
    return r["goodput_bps"] / unit


def share(state: str, sets: tuple[str, ...], *, without_call: bool = False) -> float:
    """``state``'s share of the udp-stream path, in percent (0 when not on it)."""
    scale = ((CALL, 0.0),) if without_call else ()
    return 100 * states("udp-stream.toml", sets, scale).get(state, (0.0, 0.0))[0]


def lent(state: str, sets: tuple[str, ...], *, without_call: bool = False) -> float:
    """``state``'s core-lent share (the seed's "% waiting"), in percent."""
    scale = ((CALL, 0.0),) if without_call else ()
    return 100 * states("udp-stream.toml", sets, scale).get(state, (0.0, 0.0))[1]


def others(sets: tuple[str, ...], listed: tuple[str, ...]) -> float:
    """Percent of the x4 path in states other than ``listed``."""
    return 100 - sum(share(s, sets) for s in listed)


def largest_other(sets: tuple[str, ...], listed: tuple[str, ...]) -> float:
    """The largest share, in percent, of a state of the sending application (the seed's
    ``Sys Send``) on the path other than ``listed``."""
    path = states("udp-stream.toml", sets)
    mine = (v[0] for k, v in path.items() if k.startswith("tx:App:") and k not in listed)
    return 100 * max(mine, default=0.0)


def prediction_error(index: int, source: int, *extra: str) -> float:
    """Percent error of ladder configuration ``index`` predicted from ``source``'s trace
    against its re-simulation (``extra``: ``--set`` changes to every configuration)."""
    from cpasim.predict.whatif import predict

    target = tcp(index, *extra)
    p = predict(traced("tcp-stream.toml", tcp(source, *extra)), config("tcp-stream.toml", target))
    actual = goodput("tcp-stream.toml", target, 1.0)
    return 100 * (p.predicted - actual) / actual


def link_goodput_mbps() -> float:
    """TCP goodput of configuration 1's 1 Gb/s link (MSS and TCP/IP headers with
    timestamps), the bound the seed reads its run at."""
    from cpasim.model.link import link_goodput

    return link_goodput(config("tcp-stream.toml", tcp(0)).link.rate, 1448, 52) / 1e6


def web_connections(*sets: str) -> list[float]:
    """Per-connection goodput of a web server run, Mb/s, smallest first."""
    per = result("webserver.toml", tuple(sets))["goodput_bps_per_connection"]
    return sorted(v / 1e6 for v in per.values())


# -- rows -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Row:
    """One figure of the seed against the model's."""

    table: str  # which table of SEEDS.md
    quantity: str  # the first cell
    seed: float | None  # the seed's figure in the row's unit (None: it gives none)
    model: Callable[[], float]
    unit: str  # "Gb/s", "Mb/s", "%" (a share: compared in points), "% error" (points)
    label: str  # fitted, derived from fitted values, held out, closed form
    tol: float = 0.0  # relative (bandwidths) or percentage points (shares, errors)
    xfail: str = ""  # why the row is beyond 10% / the share limit
    seed_text: str = ""  # how the seed's cell reads, when not just its figure
    note: str = ""  # said beside the label
    below: bool = False  # the seed only says the figure is below its own (a < bound)

    @property
    def points(self) -> bool:
        return self.unit.startswith("%")

    def measure(self) -> float:
        return self.model()

    def residual(self, got: float) -> float:
        """Points for shares and errors, a fraction for bandwidths."""
        if self.points:
            return got - self.seed
        return (got - self.seed) / self.seed

    def holds(self, got: float) -> bool:
        if self.below:
            return got < self.seed
        return abs(self.residual(got)) <= self.tol + 1e-12

    def limit(self) -> float:
        """The largest tolerance the rule allows this row."""
        if self.points:
            return max(SHARE_LIMIT[0], SHARE_LIMIT[1] * abs(self.seed))
        return SHARE_LIMIT[1]


def _udp_rows() -> list[Row]:
    x1, x4 = udp(1), udp(4)
    t61 = ("tx:App:ip_push_pending_frames", "tx:App:do_csum_partial_copy_from_user")
    t61 = (*t61, "tx:App:alloc_skb")
    small = ("udp_sendmsg", "__kmalloc", "release_sock")
    rest = round(100 - sum(seed(f"critical_state_share {s.split(':')[-1]}") for s in t61), 2)
    rows = [
        Row(
            "udp",
            "PCIe x1: bandwidth on the link",
            seed("link_bandwidth", X1),
            lambda: link_gbps("udp-stream.toml", x1),
            "Gb/s",
            "held out",
            0.03,
        ),
        Row(
            "udp",
            "PCIe x1: TX Desc Fetch `Wait`",
            seed("critical_path_share TX descriptor fetch Wait", X1),
            lambda: share("tx:TX Desc Fetch:Wait", x1),
            "%",
            "held out",
            xfail="the transmit engine never runs dry: its 64-entry cache holds 6 to 11 unused "
            "descriptors (mean 8.9) through the run, the sender posting each fragment as the "
            "bus lets its tail write through, so the fetch engine's Wait never joins the "
            "path; with M5's own TX descriptor handling (fetches on the tail write, when dry "
            "and after each write-back, write-backs per 64-byte block) and gem5's bus "
            "arbitrated transaction by transaction, Wait under 1%; asked only when dry for "
            "a 64-descriptor batch, the path locks into the fetch engine (Wait 67%, its reads "
            "31%).  The seed: 'data may not always be ready to transfer when the bus is "
            "free, introducing idle cycles'; its link is 1.8 Gb/s to the model's 1.843",
        ),
        Row(
            "udp",
            "PCIe x1: NIC TX `DMA packet`",
            seed("critical_path_share NIC transmit DMA packet", X1),
            lambda: share("tx:NIC TX:DMA packet", x1),
            "%",
            "held out",
            xfail="98% against 39%: the seed's other 57% is the fetch engine's Wait (the row "
            "above), which the model's path never takes",
        ),
        Row(
            "udp",
            "PCIe x4: bandwidth on the link",
            seed("link_bandwidth", X4),
            lambda: link_gbps("udp-stream.toml", x4),
            "Gb/s",
            "held out",
            0.01,
        ),
        Row(
            "udp",
            "table 6.1: `ip_push_pending_frames`",
            seed("critical_state_share ip_push_pending_frames"),
            lambda: share(CALL, x4),
            "%",
            "held out",
            xfail="the call holds IP Send's fragmenting and netfilter, longer than the seed's "
            "at the model's default costs (without the call, memcpy 9.8% and ip_fragment "
            "8.6% of the path against the seed's 5.97% and 3.60%), and the model's states "
            "below 1% hold 2.6% of the path where the seed's hold 10.8%; at figure 5.3's "
            "granularity (udp_sendmsg, alloc_skb, __kmalloc per fragment, release_sock) and "
            "with interrupts preempting the call the share went from 65.5% to 63.3%",
        ),
        Row(
            "udp",
            "table 6.1: `do_csum_partial_copy_from_user`",
            seed("critical_state_share do_csum_partial_copy_from_user"),
            lambda: share("tx:App:do_csum_partial_copy_from_user", x4),
            "%",
            "fitted",
            0.5,
            note="the sender's copy_send_per_byte, calibration/fit_udp_tables.py",
        ),
        Row(
            "udp",
            "table 6.1: `alloc_skb`",
            seed("critical_state_share alloc_skb"),
            lambda: share("tx:App:alloc_skb", x4),
            "%",
            "held out",
            1.5,
        ),
        Row(
            "udp",
            "table 6.1: the rest of the path, states below 1% each",
            rest,
            lambda: others(x4, t61),
            "%",
            "held out",
            seed_text=f"{rest:.2f}% (100% less the three rows)",
            xfail="the model's path outside the three states is the call's own body "
            "(udp_sendmsg 0.7%), __kmalloc (0.6%) and the link's propagation (1.2%): the "
            "2.6.13 send path's other functions (sys_sendto, ip_append_data's own work, "
            "udp_push_pending_frames, the route lookup) have no cost of their own in the "
            "model, whose udp_send cost per datagram is 0 at its default",
        ),
        Row(
            "udp",
            "table 6.1: any other state of the call (the seed lists those above 1%)",
            1.0,
            lambda: largest_other(x4, t61),
            "%",
            "held out",
            seed_text="< 1% each",
            below=True,
            note=f"the largest of {', '.join(small)} and the rest",
        ),
        Row(
            "udp",
            "table 6.1: `ip_push_pending_frames` % waiting",
            seed("critical_state_waiting ip_push_pending_frames"),
            lambda: lent(CALL, x4),
            "%",
            "held out",
            0.1,
        ),
        Row(
            "udp",
            "table 6.1: `do_csum_partial_copy_from_user` % waiting",
            seed("critical_state_waiting do_csum_partial_copy_from_user"),
            lambda: lent("tx:App:do_csum_partial_copy_from_user", x4),
            "%",
            "held out",
            2.5,
        ),
        Row(
            "udp",
            "table 6.1: `alloc_skb` % waiting",
            seed("critical_state_waiting alloc_skb"),
            lambda: lent("tx:App:alloc_skb", x4),
            "%",
            "held out",
            xfail="34% against 12.41%: the interrupts for the last fragments' completions "
            "come as the next datagram starts, in its first alloc_skb; with interrupts "
            "throttled to 8000/s (e1000's default of the time; 30 ms) the lent share is "
            "the same in every working state, as the seed's, but 2-3% (alloc_skb 2.9%, the "
            "copy 2.1%, link 3.33 Gb/s): the seed's interrupts took several times the "
            "model's CPU time",
        ),
    ]
    t62 = [
        ("qdisc_restart", "tx:IP Send:qdisc_restart", 3.0, ""),
        ("ip_defrag", "tx:IP Send:ip_defrag", 1.0, ""),
        (
            "memcpy",
            "tx:IP Send:memcpy",
            0.0,
            "9.8% against 5.97%: netfilter's gathering copy at the model's default "
            "memcpy_per_byte (1 cycle/B), not fitted",
        ),
        ("do_softirq", "tx:IP Send:do_softirq", 1.5, ""),
    ]
    for state, name, tol, why in t62:
        rows.append(
            Row(
                "udp",
                f"table 6.2: `{state}`",
                seed(f"critical_state_share without ip_push_pending_frames {state}"),
                lambda name=name: share(name, x4, without_call=True),
                "%",
                "held out",
                tol,
                xfail=why,
            )
        )
    fragmenting = ("ip_fragment", "ip_copy_metadata")
    rows += [
        Row(
            "udp",
            "table 6.2: `ip_fragment`",
            seed("critical_state_share without ip_push_pending_frames ip_fragment"),
            lambda: share("tx:IP Send:ip_fragment", x4, without_call=True),
            "%",
            "held out",
            xfail="8.6% against 3.60% (+139% of it): the model's ip_fragment state does the "
            "per-fragment metadata copy the seed shows apart as ip_copy_metadata (3.74%); "
            "with it, the row below, the two agree within 1.3 points",
        ),
        Row(
            "udp",
            "table 6.2: `ip_fragment` with its `ip_copy_metadata`",
            sum(
                seed(f"critical_state_share without ip_push_pending_frames {s}")
                for s in fragmenting
            ),
            lambda: share("tx:IP Send:ip_fragment", x4, without_call=True),
            "%",
            "held out",
            1.5,
            seed_text="7.34% (3.60% + 3.74%)",
            note="the model's ip_fragment does the metadata copy the seed shows apart",
        ),
        Row(
            "udp",
            "table 6.2: netfilter's tables (`nf_iterate`, `ipt_do_table`, `_read_unlock_bh`)",
            sum(
                seed(f"critical_state_share without ip_push_pending_frames {s}")
                for s in ("nf_iterate", "ipt_do_table", "_read_unlock_bh")
            ),
            lambda: share("tx:IP Send:nf_hook", x4, without_call=True),
            "%",
            "held out",
            seed_text="10.73% (2.45% + 3.60% + 4.68%)",
            xfail="the model's nf_hook is one cpu.cost.netfilter (1500 cycles, a default, "
            "not fitted) per datagram: under 1% of the path",
        ),
        Row(
            "udp",
            "table 6.2: `dev_queue_xmit`",
            seed("critical_state_share without ip_push_pending_frames dev_queue_xmit"),
            lambda: share("tx:IP Send:dev_queue_xmit", x4, without_call=True),
            "%",
            "held out",
            xfail="the model's dev_queue_xmit costs nothing of its own: its time is the "
            "qdisc_restart and do_softirq it holds",
        ),
    ]
    for state, name, tol, why in (
        ("qdisc_restart", "tx:IP Send:qdisc_restart", 2.0, ""),
        ("do_softirq", "tx:IP Send:do_softirq", 1.0, ""),
        ("memcpy", "tx:IP Send:memcpy", 0.0, "0% against 9.80%"),
        ("ip_fragment", "tx:IP Send:ip_fragment", 0.0, "0% against 7.88%"),
        ("ip_defrag", "tx:IP Send:ip_defrag", 0.0, "0% against 9.98%"),
    ):
        if why:
            why += (
                ": IP Send's states are interrupted only by interrupts that come while "
                "they run, and the completions come in the copy and the transmits; with "
                "interrupts throttled to 8000/s the lent share is 2% in each (30 ms)"
            )
        rows.append(
            Row(
                "udp",
                f"table 6.2: `{state}` % waiting",
                seed(f"critical_state_waiting without ip_push_pending_frames {state}"),
                lambda name=name: lent(name, x4, without_call=True),
                "%",
                "held out",
                tol,
                xfail=why,
            )
        )
    return rows


def _tcp_rows() -> list[Row]:
    names = [name for name, _ in LADDER]
    rows = [
        Row(
            "tcp",
            "config 1: 1 Gb/s link",
            round(link_goodput_mbps(), 1),
            lambda: goodput("tcp-stream.toml", tcp(0), trace=True),
            "Mb/s",
            "held out",
            0.03,
            seed_text=f"≈1000 (the link: {link_goodput_mbps():.0f} Mb/s of TCP goodput)",
        ),
        Row(
            "tcp",
            "config 2: 10 Gb/s link",
            seed("simulated_bandwidth", names[1]),
            lambda: goodput("tcp-stream.toml", tcp(1), trace=True),
            "Mb/s",
            "held out",
            xfail="window-limited: the model keeps the seed's 113 KB in flight but its round "
            "trip is 0.84 ms against 0.70, its window bursts queueing behind the PCIe x1 DMA; "
            "not the DMA rate (as fast as the seed's at config 3: 1096 Mb/s), not TSO (954); "
            "2.6.18's buffer rules give no memory size with 113 KB in flight",
        ),
        Row(
            "tcp",
            "config 3: 4 MiB TCP buffers",
            seed("simulated_bandwidth", names[2]),
            lambda: goodput("tcp-stream.toml", tcp(2), trace=True),
            "Mb/s",
            "held out",
            0.06,
        ),
        Row(
            "tcp",
            "config 4: PCIe x4 on tx",
            seed("simulated_bandwidth", names[3]),
            lambda: goodput("tcp-stream.toml", tcp(3)),
            "Mb/s",
            "fitted",
            0.01,
            note="the sender's copy_per_byte, calibration/fit_seeds.py",
        ),
    ]
    preds = (
        (1, 0, "predicted_bandwidth_from_config1", ""),
        (2, 0, "predicted_bandwidth_from_config1", ""),
        (2, 1, "predicted_bandwidth_from_config2", ""),
        (3, 0, "predicted_bandwidth_from_config1", "config4"),
        (3, 1, "predicted_bandwidth_from_config2", "config4"),
        (3, 2, "predicted_bandwidth_from_config3", "config4"),
    )
    for index, source, quantity, why in preds:
        ref = seed(quantity, names[index])
        actual = seed("simulated_bandwidth", names[index])
        err = round(100 * (ref - actual) / actual, 1)
        if why == "config4":
            why = (
                "the seed over-predicts configuration 4 (+17/+15/+3% from configurations 1-3), "
                "the model under-predicts it: a saturated core lets NAPI serve more "
                "completions per interrupt (cycles per byte 11.49 at config 1, 10.72 at "
                "config 4), which no transform of an earlier graph shows.  The seed traced "
                "its error to ACKs flushed from the cache as the data rate grew ('ACK "
                "processing approximately 10x more expensive'): with cpu.cache.ack_footprint "
                "(gem5's 64 KiB L1 data cache, MP = 10, the copy refitted to 3.56 cycles/B) "
                "the errors from configurations 1 and 2 turn to the seed's sign (+9.8%, "
                "+10.5%), but from configuration 3, whose DMA-bound ring holds more data "
                "sent and unacknowledged than configuration 4's, to -10.8%; and ACK "
                "processing then outweighs the copy at configuration 4, not the seed's "
                "bottleneck, so the scenario does not ship it"
            )
        elif (index, source) == (2, 1):
            why = (
                "predicted from the configuration-2 trace, whose round trip is 0.84 ms "
                "against the seed's 0.70 (configuration 2's gap above), the DMA-bound "
                "configuration 3 comes out 2.8% under its re-simulation, where the seed's "
                "came out 1.2% over"
            )
        elif index == 1:
            why = (
                "the seed's prediction missed its re-simulation by -11% (its footnote: the "
                "window loop made the sender burstier, overlapping ACK delays and NIC work); "
                "the model's window-limited run keeps the same timing as predicted"
            )
        rows.append(
            Row(
                "tcp-ladder",
                f"config {index + 1} predicted from config {source + 1}",
                err,
                lambda index=index, source=source: prediction_error(index, source),
                "% error",
                "held out",
                0.0 if why else 3.0,
                xfail=why,
                seed_text=f"{ref:.0f} against {actual:.0f}: {err:+.1f}%",
            )
        )
    return rows


def _web_rows() -> list[Row]:
    system = "web server 1 core"
    third = seed("predicted_total_bandwidth", "web server 2 cores") / (
        1 + seed("prediction_error_total", "web server 3 cores (one for interrupts)") / 100
    )
    return [
        Row(
            "web",
            "1 core: total bandwidth",
            seed("total_bandwidth", system),
            lambda: goodput("webserver.toml", (), 1e9),
            "Gb/s",
            "fitted",
            0.03,
            note="the server's copy_per_byte",
        ),
        Row(
            "web",
            "1 core: slowest connection",
            seed("per_connection_min", system),
            lambda: web_connections()[0],
            "Mb/s",
            "held out",
            0.01,
            note="the four sum to the fitted total",
        ),
        Row(
            "web",
            "1 core: fastest connection",
            seed("per_connection_max", system),
            lambda: web_connections()[-1],
            "Mb/s",
            "held out",
            xfail="the model's four connections run at 1132-1439 Mb/s against the seed's "
            "1130-1267: the total is fitted, the spread is the model's own; with 40 files "
            "of 0.5-4 MB in the 100 ms measured, a connection's share moves with the sizes "
            "it drew, and the seed's order of requests ('the same order in each "
            "experiment') is not given",
            note="the four sum to the fitted total",
        ),
        Row(
            "web",
            "2 cores, 2 server processes",
            seed("simulated_total_bandwidth", "web server 2 cores"),
            lambda: goodput(
                "webserver.toml", ("hosts.tx.cpu.cores=2", "workload.processes=2"), 1e9
            ),
            "Gb/s",
            "held out",
            0.02,
        ),
        Row(
            "web",
            "3 cores, one only for interrupts, 2 server processes",
            round(third, 2),
            lambda: goodput("webserver.toml", THIRD_CORE, 1e9),
            "Gb/s",
            "held out",
            0.01,
            seed_text=f"≈{third:.2f} (6.2 predicted, 3% error)",
        ),
    ]


def _engine_rows() -> list[Row]:
    def gbps(name: str) -> Callable[[], float]:
        return lambda: goodput("rx-copy-engine.toml", engine(name), 1e9, trace=True)

    return [
        Row(
            "engine",
            "no engine (the CPU copies)",
            seed("received_bandwidth", "copy engine: none"),
            gbps("copy engine: none"),
            "Gb/s",
            "fitted",
            0.01,
            note="the receiver's copy_recv_per_byte and rx_packet, calibration/fit_copy_engine.py",
        ),
        Row(
            "engine",
            "engine on the I/O bus",
            seed("received_bandwidth", "copy engine on I/O bus"),
            gbps("copy engine on I/O bus"),
            "Gb/s",
            "held out",
            xfail="the seed's 2.6 Gb/s is 200 us per 64 KB read, the engine alone (the data's "
            "three crossings of an 8 Gb/s bus: 2.67 Gb/s) with the protocol work hidden; "
            "'while the kernel is processing incoming packets, the previously received "
            "packets can be copied ... asynchronously' (6.4.1).  The model's receiver is "
            "behind: every read finds a whole 64 KB queued (575 KB on average), so the "
            "softirq copies early only a few segments in 100 and, as Linux 2.6.18 holds the "
            "socket through the DMA wait, the engine's copies (about 200 us) and the "
            "backlog's protocol work (about 90 us) alternate.  Tried: 2.6.18's in-loop "
            "backlog processing before the DMA wait, with early copies (never triggered: "
            "each read is full from the queue); smaller buffers (128-512 KiB: 1.21-1.80 "
            "Gb/s, window-limited below 256 KiB); the backlog processed before the wait, "
            "not Linux's: 2.31 Gb/s (-11%)",
        ),
        Row(
            "engine",
            "engine and NIC on die",
            seed("received_bandwidth", "copy engine on-die"),
            gbps("copy engine on-die"),
            "Gb/s",
            "held out",
            0.02,
            note="the 768 KiB buffers were picked so that all three configurations run "
            "without losing a frame, the engine's figures in view; without the window "
            "limit the on-die receiver gives 5.5 Gb/s, +23%",
        ),
    ]


def _m5_rows() -> list[Row]:
    m5 = ("hosts.rx.bus.kind=m5",)
    return [
        Row(
            "m5",
            "rx-copy-engine on M5's bus: no engine",
            seed("received_bandwidth", "copy engine: none"),
            lambda: goodput("rx-copy-engine.toml", engine("copy engine: none", *m5), 1e9),
            "Gb/s",
            "fitted",
            0.01,
            note="the fit made on PCIe",
        ),
        Row(
            "m5",
            "rx-copy-engine on M5's bus: engine on the I/O bus",
            seed("received_bandwidth", "copy engine on I/O bus"),
            lambda: goodput(
                "rx-copy-engine.toml", engine("copy engine on I/O bus", *m5), 1e9, trace=True
            ),
            "Gb/s",
            "held out",
            xfail="on M5's bus gem5's engine takes about 4.2 us per 1448-byte descriptor "
            "(every write waits for the bridge's acknowledgements, every 64-byte block "
            "pays a header cycle) and the bus at three crossings with its header cycles "
            "bounds a bus-bound receiver at about 2.3 Gb/s; the reader spins on the "
            "engine with the socket locked",
        ),
        Row(
            "m5",
            "tcp-stream config 3 on M5's bus",
            seed("simulated_bandwidth", LADDER[2][0]),
            lambda: goodput("tcp-stream.toml", tcp(2, "bus.kind=m5")),
            "Mb/s",
            "held out",
            0.04,
        ),
        Row(
            "m5",
            "tcp-stream config 4 on M5's bus",
            seed("simulated_bandwidth", LADDER[3][0]),
            lambda: goodput("tcp-stream.toml", tcp(3, "bus.kind=m5")),
            "Mb/s",
            "fitted",
            0.025,
            note="the fit made on PCIe",
        ),
    ]


@cache
def rows() -> tuple[Row, ...]:
    """Every row of SEEDS.md's tables, in order."""
    return (*_tcp_rows(), *_udp_rows(), *_web_rows(), *_engine_rows(), *_m5_rows())


def row_id(row: Row) -> str:
    return f"{row.table}: {row.quantity}"
