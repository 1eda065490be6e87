"""The kinds of workload (``workload.kind``), each declared once with all it decides.

A scenario without ``[[flows]]`` runs ``workload.connections`` identical connections
of one kind (:mod:`cpasim.model.app` has their applications).  A
:class:`WorkloadKind` holds what differs between the kinds: the sockets and
applications of a connection, the rules the scenario must keep with it, the figure
a run of it is judged by, and what the predictions and the run's size estimate
need to know of it.  Nothing else in the package compares ``workload.kind`` to a
name: it asks :func:`workload_kind` and reads the fields.

The configuration reads this module to list the kinds and check a scenario before
anything is simulated, so it loads none of the simulator: a kind's applications
are imported when they start.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cpasim.model.detail import LEVELS
from cpasim.protocol import MAX_UDP_PAYLOAD

#: The applications a connection's sockets run, as ``start(system, i)`` starts them.
Start = Callable[[Any, int], None]


def _no_rules(v) -> None:
    pass


def _nothing(system) -> None:
    pass


# -- starting a connection's applications ---------------------------------------------------
def _tcp_stream(system, i: int) -> None:
    from cpasim.model import app

    a, b = system.tcp_pair(i)
    system.run_app("tx", i, app.tcp_source, a)
    system.run_app("rx", i, app.tcp_sink, b)


def _pingpong(system, i: int) -> None:
    from cpasim.model import app

    a, b = system.tcp_pair(i)
    system.run_app("tx", i, app.ping_client, a)
    system.run_app("rx", i, app.ping_server, b)


def _webserver(system, i: int) -> None:
    a, b = system.tcp_pair(i)
    system.web_connection(i, a, b)


def _udp_pair(system, i: int, send, recv, *, poll: bool, duplex: bool) -> None:
    """Connection ``i`` over UDP: ``send`` on tx, ``recv`` on rx, their sockets polled
    with ``poll``; with ``workload.duplex`` (and a kind that has it) each host also
    streams to the other, as connection ``r<i>``."""
    a, b = system.tx.open_udp(i, poll=poll), system.rx.open_udp(i, poll=poll)
    system.run_app("tx", i, send, a)
    system.run_app("rx", i, recv, b)
    if duplex and system.cfg.workload.duplex:  # the stream the other way: rx to tx
        back = f"r{i}"
        c = system.rx.open_udp(i, poll=poll, name=back)
        d = system.tx.open_udp(i, poll=poll, name=back)
        system.run_app("rx", back, send, c)
        system.run_app("tx", back, recv, d)


def _udp_stream(system, i: int) -> None:
    from cpasim.model import app

    poll = system.cfg.workload.receive == "poll"
    recv = app.poll_sink if poll else app.udp_sink
    _udp_pair(system, i, app.udp_source, recv, poll=poll, duplex=True)


def _rpc(system, i: int) -> None:
    from cpasim.model import app

    poll = system.cfg.workload.receive == "poll"
    _udp_pair(system, i, app.rpc_client, app.rpc_server, poll=poll, duplex=False)


def _udp_gbn(system, i: int) -> None:
    from cpasim.model import app

    # Directed Point's reliable layer reads the sequence numbers from the pool.
    _udp_pair(system, i, app.gbn_source, app.gbn_sink, poll=True, duplex=True)


# -- the rules each kind adds -----------------------------------------------------------------
def _datagram_fits(v, key: str = "workload.message_size") -> None:
    if v[key] > MAX_UDP_PAYLOAD:
        v.refuse(
            f"{key} ({v[key]} B) exceeds the largest UDP datagram ({MAX_UDP_PAYLOAD} B) "
            f"for workload.kind = {v['workload.kind']}"
        )


def _webserver_rules(v) -> None:
    # The event loops share the server's cores; an ideal host has none to share.
    cores = v["hosts.tx.cpu.cores"]
    if v["workload.processes"] > cores and LEVELS[v["hosts.tx.host.detail"]].hardware:
        v.refuse(
            f"workload.processes ({v['workload.processes']}) must not exceed "
            f"hosts.tx.cpu.cores ({cores})"
        )


def _gbn_rules(v) -> None:
    _datagram_fits(v)
    if v["workload.ack_every"] > v["workload.window"]:
        # Each window would end in a retransmission timeout: its last datagrams are
        # never acknowledged.
        v.refuse(
            f"workload.ack_every ({v['workload.ack_every']}) must not exceed "
            f"workload.window ({v['workload.window']})"
        )


def _rpc_rules(v) -> None:
    _datagram_fits(v, "workload.request_size")
    _datagram_fits(v, "workload.response_size")
    if v["link.loss"]:
        # A call waits for its reply forever: rpc has no retransmission.
        v.refuse(
            f"workload.kind = rpc needs a lossless link (link.loss = {v['link.loss']}): "
            "a lost request or reply is never sent again"
        )


@dataclass(frozen=True)
class WorkloadKind:
    """One value of ``workload.kind`` and everything that depends on it."""

    name: str
    #: Connection ``i``'s sockets and applications, ``start(system, i)``.
    start: Start
    #: Its connections are UDP sockets: no TCP, so no congestion control and no handshake.
    udp: bool
    #: Judged by its goodput, data streaming one way; else by the mean latency of its
    #: requests (``latency_ns``), and a verdict looks at their round trip.
    stream: bool
    #: The rules a scenario of this kind must keep (:mod:`cpasim.config.rules`).
    check: Callable[[Any], None] = _no_rules
    #: What runs once every connection is open (the web server's event loops).
    serve: Callable[[Any], None] = _nothing
    #: Where its critical path starts and ends by default: (host, state machine) each.
    ends: tuple[tuple[str, str], tuple[str, str]] = (("tx", "App"), ("rx", "App"))
    #: Its senders write as much as TCP's buffers take: they bound its rate over a
    #: round trip (the run's size estimate).
    bulk: bool = False
    #: A TCP connection's next message waits for the answer to the last: one exchange
    #: per round trip at most (the run's size estimate).
    lockstep: bool = False
    #: A timed run is a steady stream whose predictions analyse the tail of the trace
    #: (:func:`cpasim.predict.runs.window_span`); else the whole measured interval.
    steady: bool = False
    #: Its data crosses a bottleneck in full-size packets only (a TCP stream's
    #: segments; a what-if of ``bottleneck.overhead`` is exact for it).
    full_size: bool = False
    #: ``[[flows]]`` tables may describe its connections (a bulk flow is one of its).
    flows: bool = False
    #: Its server draws each file's size from the run's generator.
    random_files: bool = False

    @property
    def metric(self) -> str:
        """The run's figure of merit: ``goodput_bps`` or ``latency_ns``."""
        return "goodput_bps" if self.stream else "latency_ns"


WORKLOADS: dict[str, WorkloadKind] = {
    kind.name: kind
    for kind in (
        WorkloadKind(
            "tcp_stream",
            _tcp_stream,
            udp=False,
            stream=True,
            bulk=True,
            steady=True,
            full_size=True,
            flows=True,
        ),
        WorkloadKind(
            "udp_stream",
            _udp_stream,
            udp=True,
            stream=True,
            check=_datagram_fits,
            steady=True,
        ),
        WorkloadKind("pingpong", _pingpong, udp=False, stream=False, lockstep=True),
        WorkloadKind("rpc", _rpc, udp=True, stream=False, check=_rpc_rules),
        WorkloadKind(
            "webserver",
            _webserver,
            udp=False,
            stream=False,
            check=_webserver_rules,
            serve=lambda system: system.start_servers(),
            ends=(("rx", "App"), ("rx", "App")),
            bulk=True,
            random_files=True,
        ),
        WorkloadKind(
            "udp_gbn",
            _udp_gbn,
            udp=True,
            stream=True,
            check=_gbn_rules,
        ),
    )
}


def workload_kind(name: str) -> WorkloadKind:
    """The registered kind ``name`` (the configuration allows no other)."""
    return WORKLOADS[name]
