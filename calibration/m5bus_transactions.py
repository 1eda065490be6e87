"""Check ``bus.kind = "m5"`` against M5's bus arbitrated one transaction at a time.

cpasim's M5 bus (:mod:`cpasim.model.m5bus`) replays each DMA's transactions alone and
holds the bus as a few runs per DMA.  What that leaves out is how M5's DMAs cross
each other: a port's next DMA starting as soon as the previous one's last block is
accepted, its blocks crossing between the previous one's responses, and the bridge's
16 places and in-order answers shared by every DMA.  This script swaps in a bus
that arbitrates every 64-byte transaction of all DMAs together by the same rules
(:class:`TransactionBus`: one process, ``M5Timing``'s transactions and back-off)
and re-measures the rows of calibration/SEEDS.md's "M5's I/O bus" section.  It is
a check, not a model option: it emits no wait on the ``I/O bus`` pool (the pool is
handed from SM to SM at each transaction), so the analyzer sees waiting for the bus
as time in the DMA states, as M5's own annotations did.  Usage::

    .venv/bin/python calibration/m5bus_transactions.py [--duration 30ms]
"""

from __future__ import annotations

import argparse
import heapq
import tempfile
from collections import deque
from pathlib import Path

from cpasim.config import load_scenario
from cpasim.errors import script_main
from cpasim.model import m5bus
from cpasim.model.bus_rules import MMIO_WAIT
from cpasim.model.m5bus import DmaPort, M5Bus, clock_edge
from cpasim.model.pcie import Occupancy
from cpasim.predict.runs import traced_run

ROOT = Path(__file__).resolve().parent.parent
#: The sender's TX descriptors handled as in the seed's simulator (M5's IGbE driven by
#: Linux 2.6.13's e1000; tests/test_seed_scenarios.py uses them too).
M5_TX = [
    "hosts.tx.nic.tx_fetch_request=call",
    "hosts.tx.nic.tx_fetch_threshold=0",
    "hosts.tx.nic.desc_fetch_batch=64",
    "hosts.tx.nic.tx_writeback=block",
    "hosts.tx.driver.tx_batch=1",
]
ENGINE = ["hosts.rx.copy_engine.enabled=true", "hosts.rx.copy_engine.location=io_bus"]
ROWS = (
    ("udp-stream x1", "udp-stream.toml", ["bus.kind=m5"]),
    ("udp-stream x1, M5_TX", "udp-stream.toml", ["bus.kind=m5", *M5_TX]),
    ("rx-copy-engine, no engine", "rx-copy-engine.toml", ["hosts.rx.bus.kind=m5"]),
    (
        "rx-copy-engine, engine on the I/O bus",
        "rx-copy-engine.toml",
        ["hosts.rx.bus.kind=m5", *ENGINE],
    ),
)
_NO_BYTES = Occupancy(0.0, 0.0, 0, 0, 0.0)


class _Dma:
    """One DMA in flight: its SM, port, transactions and responses still to come."""

    def __init__(self, sm, port, write: bool, req: list[int], resp: list[int], done):
        self.sm, self.port, self.write = sm, port, write
        self.req, self.resp = req, resp
        self.remaining = len(req)
        self.done = done


class _Write:
    """A CPU's register write crossing from the bridge: no SM holds the bus for it."""

    sm = None
    write = True

    def __init__(self, done):
        self.done = done


class _Port(DmaPort):
    """A device's DmaPort: its blocks in order, its back-off, when it asks next."""

    def __init__(self, bus: TransactionBus, name: str, order: int):
        super().__init__(bus, name)
        self.order = order
        self.pending: deque = deque()
        self.at = 0


class TransactionBus(M5Bus):
    """M5's bus, bridge and DMA ports, one transaction at a time across all DMAs."""

    def __init__(self, env, sys: str, timing, tracer):
        super().__init__(env, sys, timing, tracer)
        self.bus_free = 0
        self.bridge: list = []  # (ready, order, nack, dma, block)
        self.bridge_at = -1
        self.outstanding = self.order = 0
        self.holder = None
        self.kick = None
        env.process(self._arbitrate())

    def port(self, name: str) -> _Port:
        p = self._ports.get(name)
        if p is None:
            p = self._ports[name] = _Port(self, name, len(self._ports))
        return p

    def _dma(self, port: _Port, sm, nbytes: int, write: bool):
        req, resp = self.timing.transactions(nbytes, write)
        d = _Dma(sm, port, write, req, resp, self.env.event())
        if not port.pending:
            port.at = max(port.at, round(self.env.now * 1000))
        port.pending.extend((d, i) for i in range(len(req)))
        if self.kick is not None and not self.kick.triggered:
            self.kick.succeed()
        yield d.done
        if self.holder is sm:
            self.up.release(sm)
            self.holder = None
        self._count(Occupancy(0.0, 0.0, nbytes, 0, 0.0), write, 0.0)

    def cpu_write(self, sm, cpu):
        """As :meth:`M5Bus.cpu_write`, the write arbitrated with the DMA transactions: it
        enters the bridge's queue toward the bus after crossing the bridge, in order
        with the DMA responses there, and takes its transaction, the device's answer
        and the answer's header on the bus."""
        env = self.env
        sm.begin(MMIO_WAIT)
        start = env._now
        w = _Write(env.event())
        ready = round((env.now + self._bridge_ns) * 1000)
        heapq.heappush(self.bridge, (ready, self.order, False, w, 0))
        self.order += 1
        if self.kick is not None and not self.kick.triggered:
            self.kick.succeed()
        yield w.done
        yield env.timeout(self._bridge_ns)
        cpu.stalled("driver", start)

    def _next(self):
        """(asked at, order, port or None for the bridge) of who goes next."""
        best = (max(self.bridge[0][0], self.bridge_at), -1, None) if self.bridge else None
        for p in self._ports.values():
            if p.pending and (best is None or (p.at, p.order) < best[:2]):
                best = (p.at, p.order, p)
        return best

    def _arbitrate(self):
        env, t = self.env, self.timing
        while True:
            best = self._next()
            if best is None:
                self.kick = env.event()
                yield self.kick
                continue
            start = clock_edge(max(best[0], self.bus_free), t.cycle_ps)
            now = round(env.now * 1000)
            if start > now:  # wait for it, unless a new DMA changes who goes next
                self.kick = env.event()
                yield env.timeout((start - now) / 1000) | self.kick
                self.kick = None
                if round(env.now * 1000) < start or self._next()[:2] != best[:2]:
                    continue
            d, dur = self._send(best[2], start)
            self.bus_free = start + dur
            if d.sm is not None and self.holder is not d.sm:  # the pool goes with it
                if self.holder is not None:
                    self.up.release(self.holder)
                self.up.acquire_now(d.sm)
                self.holder = d.sm
            self._count(_NO_BYTES, d.write, dur / 1000)

    def _send(self, port, start: int):
        """Put the chosen transaction on the bus at ``start``; its DMA and duration."""
        t = self.timing
        if port is None:  # the bridge: a response or a NACK
            _, _, nack, d, i = heapq.heappop(self.bridge)
            self.bridge_at = start + 1
            if isinstance(d, _Write):
                dur = t.register_write_ps()
                self.env.timeout(dur / 1000).callbacks.append(lambda _e: d.done.succeed())
                return d, dur
            p = d.port
            if nack:
                p.backoff = t.nacked(p.backoff)
                p.pending.appendleft((d, i))
                p.at = start + p.backoff
                return d, t.block_ps(0)
            self.outstanding -= 1
            p.backoff >>= 2
            d.remaining -= 1
            if not d.remaining:
                self.env.timeout(d.resp[i] / 1000).callbacks.append(lambda _e: d.done.succeed())
            return d, d.resp[i]
        d, i = port.pending.popleft()
        if self.outstanding >= t.bridge_buffer:
            entry = (start + t.nack_ps, self.order, True, d, i)
        else:
            self.outstanding += 1
            entry = (start + t.round_trip_ps, self.order, False, d, i)
        heapq.heappush(self.bridge, entry)
        self.order += 1
        port.at = start + port.backoff
        return d, d.req[i]


def _share(run, prefix) -> float:
    return sum(m["share"] for m in run.path.most_critical if m["name"].startswith(prefix))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", default="60ms", help="simulated time (warm-up 10 ms)")
    args = ap.parse_args()
    m5bus.M5Bus = TransactionBus  # what make_bus builds for bus.kind = "m5"
    sets = [f"sim.duration={args.duration}", "sim.warmup=10ms"]
    print("| configuration | Gb/s (link for UDP) | path: first states |")
    print("|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for k, (name, scenario, change) in enumerate(ROWS):
            cfg = load_scenario(ROOT / "scenarios" / scenario, sets=[*sets, *change])
            run = traced_run(cfg, Path(tmp) / f"r{k}.cpt")
            if scenario.startswith("udp"):
                gbps = run.result["link_utilization"]["tx_to_rx"] * cfg.link.rate / 1e9
            else:
                gbps = run.result["goodput_bps"] / 1e9
            top = ", ".join(f"{m['name']} {m['share']:.1%}" for m in run.path.most_critical[:4])
            print(f"| {name} | {gbps:.3f} | {top} |")


if __name__ == "__main__":
    raise SystemExit(script_main("m5bus_transactions", main))
