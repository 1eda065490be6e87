"""The simulated world of one run: two hosts, the link (and any bottleneck) between
them, the workload.

:class:`System` builds everything from a :class:`~cpasim.config.Config` on a
given SimPy environment and tracer, and starts the application processes of
``workload.kind`` (:mod:`cpasim.model.workloads`, :mod:`cpasim.model.app`).  Running
it is the business of :func:`cpasim.simulate.simulate`.

With ``[[flows]]`` the flows of :mod:`cpasim.model.flows` replace the workload's
identical connections.  Every drop and retransmission is told to the run's
:class:`~cpasim.model.losses.LossLog`.

``topology.kind = "forward"`` puts the forwarding host ``fw``
(:mod:`cpasim.model.forwarder`) between tx and rx: a link tx–fw and a link
fw–rx, both of the ``link`` section, counted together in ``link_stats``.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from cpasim.config import FORWARDER
from cpasim.config import flow_tables as flow_config
from cpasim.config.params import TOPOLOGIES
from cpasim.model import app, bottleneck, flows
from cpasim.model.app import AppStats, WebServer
from cpasim.model.cc import ALGORITHMS
from cpasim.model.forwarder import INTERFACES, Forwarder
from cpasim.model.host import Host
from cpasim.model.ideal import make_host
from cpasim.model.link import Link, LinkStats
from cpasim.model.losses import LossLog
from cpasim.model.sockbuf import syn_window
from cpasim.model.workloads import workload_kind

HOSTS = ("tx", "rx")


def random_draws(cfg) -> list[str]:
    """What in ``cfg`` draws random numbers, so that ``sim.seed`` changes the run:
    frame loss on the link, the webserver's file sizes (the system's generator) and
    BBR's first probing phase (each TCP connection's own, seeded from ``sim.seed``).
    Empty when the run is the same whatever the seed."""
    out = []
    if cfg.link.loss > 0:
        out.append(f"link.loss = {cfg.link.loss:g}")
    wl = cfg.workload
    kind = workload_kind(wl.kind)
    if kind.random_files and wl.file_size_max > wl.file_size_min:
        out.append("the webserver's file sizes")
    if not kind.udp:
        ccs = {h: cfg.host(h).tcp.cc for h in HOSTS}
        out += [f"hosts.{h}.tcp.cc = {cc}" for h, cc in ccs.items() if ALGORITHMS[cc].takes_seed]
    return out


class System:
    def __init__(self, cfg, env, tracer) -> None:
        self.cfg = cfg
        self.env = env
        self.tracer = tracer
        self.rng = np.random.default_rng(cfg.sim.seed)
        if TOPOLOGIES[cfg.topology.kind].forwards:
            self._forwarding_hosts()
        else:
            self.link = Link(env, params=cfg.link, tracer=tracer, rng=self.rng)
            self.links = (self.link,)
            self.link_stats = self.link.stats
            # Before the hosts attach to the link: they are wired through it.
            self.bottlenecks = bottleneck.build(
                env, params=cfg.bottleneck, link=self.link, tracer=tracer
            )
            self.hosts = {h: make_host(env, h, cfg, tracer, self.link.port(h)) for h in HOSTS}
        # A sized run ends when its transfers do: the bytes of workload.bytes read, or,
        # with [[flows]], every bulk flow's (cpasim.config.flow_tables.sized).
        self.sized = (
            flow_config.sized(cfg.flat(), cfg.flows) if cfg.flows else cfg.workload.bytes > 0
        )
        # Busy time is counted over the measured interval only: from the warm-up to
        # sim.duration (a sized run's end is not known in advance: not clipped there).
        since = cfg.sim.warmup
        until = float("inf") if self.sized else cfg.sim.duration
        for link in self.links:
            link.measure_from = since
        for box in self.bottlenecks:
            box.measure_from, box.measure_until = since, until
        for host in self.hosts.values():
            host.cpu.start_measuring(since, until)
            if host.bus is not None:  # an ideal host (host.detail) has none
                host.bus.measure_from = since
        self.stats = AppStats(env, warmup=cfg.sim.warmup, target=cfg.workload.bytes)
        self.servers: list[WebServer] = []
        self._web_socks: dict = {}  # webserver: connection index -> server-side socket
        self._web_sizes: dict = {}  # connection index -> response lengths for the client
        self.flows: list[flows.Flow] = []  # with [[flows]]: each flow (cpasim.model.flows)
        if cfg.flows:
            self.flows = flows.build(self)
        else:
            self._start_workload()
        self.losses = LossLog()
        self._watch_losses()

    def _forwarding_hosts(self) -> None:
        """tx – fw – rx: a link on each side of the forwarding host, one set of counters."""
        env, cfg, tracer, fw = self.env, self.cfg, self.tracer, FORWARDER
        self.link_stats = LinkStats()
        sides = [
            Link(
                env,
                params=cfg.link,
                tracer=tracer,
                rng=self.rng,
                ends=ends,
                stats=self.link_stats,
            )
            for ends in (
                (("tx", "0"), (fw, INTERFACES[0])),
                ((fw, INTERFACES[1]), ("rx", "0")),
            )
        ]
        self.links = tuple(sides)
        self.link = sides[0]
        self.bottlenecks = []  # the configuration refuses one with a forwarding host
        self.hosts = {
            "tx": make_host(env, "tx", cfg, tracer, sides[0].port("tx")),
            "rx": make_host(env, "rx", cfg, tracer, sides[1].port("rx")),
            fw: Forwarder(env, cfg, tracer, (sides[0].port(fw), sides[1].port(fw))),
        }

    def _watch_losses(self) -> None:
        """Tell the loss log of every dropped frame and every retransmission."""
        log = self.losses
        for link in self.links:
            link.on_drop = lambda frame, port: log.dropped(
                frame, _sent_by(port.sys, port.peer), "link_loss"
            )
        for box in self.bottlenecks:
            box.on_drop = lambda frame, reason, src=box.src: log.dropped(frame, src, reason)
        for name, host in self.hosts.items():
            for dev in host.devices:
                nic = getattr(dev, "nic", None)
                if nic is not None:
                    src = _received_from(name, nic.port.peer)
                    nic.on_drop = lambda frame, reason, src=src: log.dropped(frame, src, reason)
            for conn in getattr(host, "tcp", ()):
                conn.losses = log

    def port(self, host: str):
        """End host ``host``'s port: its end of the link it is on."""
        return next(link.port(host) for link in self.links if host in link.ports)

    @property
    def tx(self) -> Host:
        return self.hosts["tx"]

    @property
    def rx(self) -> Host:
        return self.hosts["rx"]

    def _app_sm(self, host: str, i: int):
        return self.tracer.sm(host, "App", str(i))

    def _start_workload(self) -> None:
        """Every connection's sockets and applications (:mod:`cpasim.model.workloads`)."""
        kind = workload_kind(self.cfg.workload.kind)
        for i in range(self.cfg.workload.connections):
            kind.start(self, i)
        kind.serve(self)

    def tcp_pair(self, i: int):
        """Connection ``c<i>`` over TCP: tx's socket and rx's, each side starting with
        the window the other's handshake offered."""
        tx, rx, mtu = self.tx, self.rx, self.cfg.link.mtu
        a = tx.open_tcp(i, peer_window=syn_window(rx.hc.tcp, mtu), peer_sack=rx.hc.tcp.sack)
        b = rx.open_tcp(i, peer_window=syn_window(tx.hc.tcp, mtu), peer_sack=tx.hc.tcp.sack)
        return a, b

    def run_app(self, host: str, i: int | str, process, sock) -> None:
        """Start application ``process`` (:mod:`cpasim.model.app`) on ``host`` with
        socket ``sock``: state machine ``<host>:App#<i>`` of connection ``c<i>``, or of
        ``i`` itself when it is a name (``r0``, the way back of a duplex stream)."""
        conn = f"c{i}" if isinstance(i, int) else i
        sm = self.tracer.sm(host, "App", str(i))
        h = self.hosts[host]
        self.env.process(process(sm, h.cpu, sock, self.cfg.workload, self.stats, conn))

    def web_connection(self, i: int, server_sock, client_sock) -> None:
        """Connection ``c<i>`` of the web server: its client on rx starts now, its
        server side waits for :meth:`start_servers`."""
        sizes: deque = deque()
        self._web_socks[i] = server_sock
        self._web_sizes[i] = sizes
        wl, rx = self.cfg.workload, self.rx
        self.env.process(
            app.web_client(
                self._app_sm("rx", i), rx.cpu, client_sock, wl, self.stats, f"c{i}", sizes
            )
        )

    def start_servers(self) -> None:
        """The web server's event loops, the connections dealt among them."""
        wl = self.cfg.workload
        nproc = min(wl.processes, wl.connections)
        for k in range(nproc):
            socks = {i: s for i, s in self._web_socks.items() if i % nproc == k}
            sizes = {i: self._web_sizes[i] for i in socks}
            server = WebServer(self.env, self.tracer, k, socks, wl, self.rng, sizes)
            self.servers.append(server)
            self.env.process(server.run())

    def drops(self) -> dict[str, int]:
        """Dropped packets by reason over the hosts, plus frames lost on the links."""
        out: dict[str, int] = {}
        for host in self.hosts.values():
            for reason, n in host.drops().items():
                out[reason] = out.get(reason, 0) + n
        out["link_loss"] = sum(d.lost for d in self.link_stats.directions.values())
        for box in self.bottlenecks:  # none without a bottleneck: the keys stay absent
            for reason, n in box.stats.drops.items():
                out[reason] = out.get(reason, 0) + n
        return out

    def drops_by_place(self) -> dict[str, dict[str, int]]:
        """Dropped packets by where they were dropped (a host, ``link``, or the
        bottleneck's ``path``) and reason; places and reasons with none left out."""
        out: dict[str, dict[str, int]] = {}
        for name, host in self.hosts.items():
            out[name] = host.drops()
        out["link"] = {"link_loss": sum(d.lost for d in self.link_stats.directions.values())}
        for box in self.bottlenecks:
            place = out.setdefault("path", {})
            for reason, n in box.stats.drops.items():
                place[reason] = place.get(reason, 0) + n
        return {p: {r: n for r, n in d.items() if n} for p, d in out.items() if any(d.values())}

    def end_state(self) -> dict:
        """Where the run stands when it stops, for :mod:`cpasim.verdict`: every TCP
        connection's end (windows, flight, timer), the drops by place, and when the
        receiving side last read."""
        return {
            "tcp": {
                name: [c.end_state() for c in host.tcp]
                for name, host in self.hosts.items()
                if getattr(host, "tcp", None)
            },
            "drops": self.drops_by_place(),
            "last_read_ns": self.stats.last_ns,
        }

    def retransmits(self) -> int:
        return sum(h.retransmits() for h in self.hosts.values())


def _other(host: str) -> str:
    return "rx" if host == "tx" else "tx"


def _sent_by(sys: str, peer: str) -> str:
    """The end host whose frame ``sys`` put on the wire towards ``peer``: the
    forwarding host only passes on what the end host on the far side sent."""
    return sys if sys in HOSTS else _other(peer)


def _received_from(host: str, peer: str) -> str:
    """The end host whose frame ``host`` received from ``peer``."""
    return peer if peer in HOSTS else _other(host)
