"""What the device path costs per frame.

    python bench/bench_device.py [--repeat N]

Two NetDevices on a Link, driven by a sender that keeps the tx qdisc full and a
receiver that drains rx_out (no stack, no CPU cost in either), tracing off.
Prints per configuration: frames delivered, SimPy events per frame, frames per
CPU-second and events per CPU-second, next to bare SimPy's event rate (a
process ping-ponging timeouts) on this machine.  The issue's budget is about 15
events per TCP segment end to end, ACK path included, and an event rate of at
least half of bare SimPy's.

Times are process CPU time, best of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import simpy

from cpasim.config import load_scenario
from cpasim.model.cpu import Cpu
from cpasim.model.device import NetDevice
from cpasim.model.link import Link
from cpasim.model.packet import Packet
from cpasim.tracing import NULL_TRACER

CASES = {
    "1G link, PCIe x1": ["link.rate=1Gbps", "link.delay=10us"],
    "10G link, PCIe x1 (bus-bound)": ["link.rate=10Gbps", "link.delay=10us"],
    "10G link, gen3 x8": ["link.rate=10Gbps", "link.delay=10us", "pcie.gen=3", "pcie.lanes=8"],
    "10G, gen3 x8, throttle 50us": [
        "link.rate=10Gbps",
        "link.delay=10us",
        "pcie.gen=3",
        "pcie.lanes=8",
        "nic.itr=fixed",
        "nic.throttle_usecs=50us",
    ],
    "10G, gen3 x8, no throttling": [
        "link.rate=10Gbps",
        "link.delay=10us",
        "pcie.gen=3",
        "pcie.lanes=8",
        "nic.itr=off",
    ],
}
SIM_NS = 20e6


class Counting(simpy.Environment):
    events = 0

    def step(self):
        self.events += 1
        super().step()


def device_run(sets: list[str]) -> tuple[int, int]:
    cfg = load_scenario(None, sets=sets)
    env = Counting()
    link = Link(env, params=cfg.link, tracer=NULL_TRACER, rng=np.random.default_rng(1))
    dev = {}
    for h in ("tx", "rx"):
        hc = cfg.host(h)
        dev[h] = NetDevice(
            env,
            h,
            NULL_TRACER,
            nic=hc.nic,
            driver=hc.driver,
            qdisc=hc.qdisc,
            pcie=hc.pcie,
            bus=hc.bus,
            cpu=Cpu(env, h, params=hc.cpu, tracer=NULL_TRACER),
            port=link.port(h),
        )
    got = [0]

    def sender():
        q, i = dev["tx"].qdisc, 0
        while True:
            yield q.put(Packet("c0", "udp", 1500, 1472, 28, 1472, seq=i), None)
            i += 1

    def sink():
        q = dev["rx"].rx_out
        while True:
            if q.items:
                q.take_now(1, NULL_TRACER.sm("rx", "App"))
            else:
                yield q.get(None)
            got[0] += 1

    env.process(sender())
    env.process(sink())
    env.run(until=SIM_NS)
    return got[0], env.events


def bare_simpy(n: int = 200_000) -> int:
    env = Counting()

    def ping():
        for _ in range(n):
            yield env.timeout(1)

    env.process(ping())
    env.run()
    return env.events


def best_of(repeat: int, fn):
    best, result = float("inf"), None
    for _ in range(repeat):
        started = time.process_time()
        result = fn()
        best = min(best, time.process_time() - started)
    return best, result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    secs, events = best_of(args.repeat, bare_simpy)
    bare_rate = events / secs
    print(f"bare SimPy: {bare_rate:,.0f} events/s")
    print(
        f"{'case':34} {'frames':>7} {'ev/frame':>9} {'frames/s':>10} {'events/s':>10} {'x bare':>7}"
    )
    for name, sets in CASES.items():
        secs, (frames, events) = best_of(args.repeat, lambda s=sets: device_run(s))
        rate = events / secs
        print(
            f"{name:34} {frames:7d} {events / frames:9.2f} {frames / secs:10,.0f} "
            f"{rate:10,.0f} {rate / bare_rate:7.2f}"
        )


if __name__ == "__main__":
    from cpasim.errors import script_main

    raise SystemExit(script_main("bench_device", main))
