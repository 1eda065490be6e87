"""The kinds of flow of a ``[[flows]]`` table (its ``kind``), each declared once.

A :class:`FlowKind` holds what differs between them: the scenario keys a table of it
may set, the rules its table must keep, how its flows start, what they measure and
where their critical path runs.  Nothing else in the package compares a flow's kind
to a name: it asks :func:`flow_kind` and reads the fields.

* ``bulk``: ``tcp_stream``'s source on tx (``tx:App#i``) and sink on rx
  (``rx:App#i``), ``workload.bytes`` being this flow's own transfer;
* ``rpc``: a client on tx (``tx:App#i``) writes ``workload.request_size`` bytes,
  reads the ``workload.response_size``-byte response, records the round trip and
  thinks ``workload.think_time``; the server on rx (``rx:App#i``) answers.  Over
  TCP, so it survives the losses of a shared bottleneck;
* ``ping``: ``tx:Ping#i`` sends an ICMP echo request every ``workload.interval``
  (:mod:`cpasim.model.icmp`); rx's kernel answers.

The configuration reads this module to check the tables before anything is
simulated, so it loads none of the simulator: a flow's applications are imported
when they start.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cpasim.errors import CpasimError
from cpasim.model.sockbuf import syn_window
from cpasim.protocol import PING_HEADERS


def _run(system, flow, gen) -> None:
    """Start an application process, after the flow's start delay."""
    env = system.env
    env.process(_after(env, flow.start, gen) if flow.start else gen)


def _after(env, delay: float, gen):
    from cpasim.model.environment import timer  # SimPy: only once a run is built

    yield timer(env, delay)  # many flows may wait for their start: kept apart
    yield from gen


def _tcp_pair(system, flow):
    """The flow's connection: tx's socket and rx's, with the table's tcp sections.
    The ends that send data note their RTT samples: tx's, and rx's when the flow's
    data goes both ways."""
    fcfg, mtu, i = flow.cfg, system.cfg.link.mtu, flow.index
    tx, rx = system.tx, system.rx
    a = tx.open_tcp(
        i, peer_window=syn_window(fcfg.rx.tcp, mtu), peer_sack=fcfg.rx.tcp.sack, tcp=fcfg.tx.tcp
    )
    b = rx.open_tcp(
        i, peer_window=syn_window(fcfg.tx.tcp, mtu), peer_sack=fcfg.tx.tcp.sack, tcp=fcfg.rx.tcp
    )
    flow.tcp = [a.conn, b.conn]
    a.conn.rtt_log = []
    if flow_kind(flow.kind).two_way:
        b.conn.rtt_log = []
    return a, b


def _bulk(system, flow, group) -> None:
    from cpasim.model import app

    a, b = _tcp_pair(system, flow)
    wl, i, conn, stats = flow.cfg.workload, flow.index, flow.conn, flow.stats
    tx, rx = system.tx, system.rx
    _run(system, flow, app.tcp_source(system._app_sm("tx", i), tx.cpu, a, wl, stats, conn))
    _run(system, flow, app.tcp_sink(system._app_sm("rx", i), rx.cpu, b, wl, stats, conn))


def _rpc(system, flow, group) -> None:
    from cpasim.model import app

    a, b = _tcp_pair(system, flow)
    wl, i, conn, stats = flow.cfg.workload, flow.index, flow.conn, flow.stats
    tx, rx = system.tx, system.rx
    sizes = {"request": wl.request_size, "response": wl.response_size}
    client = app.request_client(
        system._app_sm("tx", i), tx.cpu, a, stats, conn, think=wl.think_time, count=True, **sizes
    )
    server = app.request_server(system._app_sm("rx", i), rx.cpu, b, stats, conn, **sizes)
    _run(system, flow, client)
    _run(system, flow, server)


def _ping(system, flow, group) -> None:
    from cpasim.model import app
    from cpasim.model.icmp import EchoResponder, PingSocket

    tx, rx, i = system.tx, system.rx, flow.index
    sock = PingSocket(
        system.env,
        "tx",
        i,
        size=group.ping_size,
        tracer=system.tracer,
        cpu=tx.cpu,
        ip=tx.ip,
        on_reply=flow.stats.reply,
    )
    EchoResponder(system.env, i, cpu=rx.cpu, ip=rx.ip)
    sm = system.tracer.sm("tx", "Ping", str(i))
    _run(system, flow, app.pinger(sm, tx.cpu, sock, group.interval, flow.stats, flow.conn))


def _no_rules(flat, group, where: str) -> None:
    pass


def _echo_fits(flat, group, where: str) -> None:
    if group.ping_size + PING_HEADERS > flat["link.mtu"]:
        raise CpasimError(
            f"{where}: workload.ping_size ({group.ping_size} B) and its {PING_HEADERS} B "
            f"of headers exceed link.mtu ({flat['link.mtu']} B): an echo request must "
            "fit one packet (fragmented ICMP is not modelled)"
        )


@dataclass(frozen=True)
class FlowKind:
    """One value of a ``[[flows]]`` table's ``kind`` and everything that depends on it."""

    name: str
    #: Its flows' applications, ``start(system, flow, group)``.
    start: Callable[[Any, Any, Any], None]
    #: The scenario keys its table may set beyond ``count``, ``start`` and ``kind``
    #: (``tcp`` standing for every ``tcp.*`` key) and of its own keys those it uses.
    uses: tuple[str, ...]
    #: Over a TCP connection: it has a congestion control, delivers bytes (a goodput)
    #: and retransmits; else an ICMP echo that delivers nothing.
    tcp: bool
    #: A bulk transfer: its flows read ``workload.bytes`` each (the run ends when all
    #: have, when all have a size) and are judged by their goodput, their fairness
    #: (Jain's index) over the run's bulk flows; else by their round trips' latency.
    bulk: bool
    #: Where its critical path starts and ends: (host, state machine) each, the flow's
    #: index the instance.
    ends: tuple[tuple[str, str], tuple[str, str]]
    #: What its ``latency_ns`` (or a bulk flow's ``rtt_ns``) is called.
    latency: str = "rtt"
    #: Data goes both ways (requests and responses): both ends' RTT samples count.
    two_way: bool = False
    #: The rules its table must keep: ``check(flat, group, where)`` raises.
    check: Callable[[Any, Any, str], None] = _no_rules


FLOW_KINDS: dict[str, FlowKind] = {
    kind.name: kind
    for kind in (
        FlowKind(
            "bulk",
            _bulk,
            ("tcp", "workload.bytes", "workload.write_size", "workload.read_size"),
            tcp=True,
            bulk=True,
            ends=(("tx", "App"), ("rx", "App")),
        ),
        FlowKind(
            "ping",
            _ping,
            ("workload.interval", "workload.ping_size"),
            tcp=False,
            bulk=False,
            ends=(("tx", "Ping"), ("tx", "Ping")),
            check=_echo_fits,
        ),
        FlowKind(
            "rpc",
            _rpc,
            ("tcp", "workload.request_size", "workload.response_size", "workload.think_time"),
            tcp=True,
            bulk=False,
            ends=(("tx", "App"), ("tx", "App")),
            latency="latency",
            two_way=True,
        ),
    )
}


def flow_kind(name: str) -> FlowKind:
    """The registered kind ``name`` (the configuration allows no other)."""
    return FLOW_KINDS[name]
