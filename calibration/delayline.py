"""A user-space propagation delay for IP packets, on a TUN device.

netem is not available on the machine the captures are made on, so the router
namespace of ``capture.sh`` sends every forwarded packet into a TUN device
(policy routing on the input interface); this program reads each packet, holds
it for a fixed delay and writes it back into the same TUN device, from where the
kernel routes it on by its destination.  A fixed delay keeps packets in FIFO
order, so a deque is the whole schedule.

Only IPv4/IPv6 packets pass (``IFF_TUN | IFF_NO_PI``: no extra header).  The queue
is bounded (``--limit`` packets; beyond that packets are dropped and counted,
like a full router queue).  A Python loop wakes up late by tens of microseconds
and sustains a bounded packet rate; ``capture.sh`` measures both (``--stats``)
and ``calibration/README.md`` states them.

Usage (as root, inside the namespace that owns the routes)::

    python3 delayline.py --dev dl0 --delay-us 1000 [--seconds 60] [--stats FILE]

It creates the TUN device (``ip link set dl0 up`` and routing are left to the
caller), runs until ``--seconds`` pass or SIGTERM/SIGINT, and removes the device
on exit (a non-persistent TUN device disappears with its file descriptor).
Standard library only, so it runs under any python3.
"""

from __future__ import annotations

import argparse
import collections
import ctypes
import fcntl
import json
import os
import select
import signal
import struct
import sys
import time

TUNSETIFF = 0x400454CA
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000
MAX_PACKET = 65536
PR_SET_TIMERSLACK = 29


def open_tun(name: str) -> int:
    """Create TUN device ``name`` and return its non-blocking file descriptor."""
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
    ifr = struct.pack("16sH22x", name.encode(), IFF_TUN | IFF_NO_PI)
    fcntl.ioctl(fd, TUNSETIFF, ifr)
    return fd


class Stats:
    """Counts and the lateness of each release (actual minus due time)."""

    def __init__(self) -> None:
        self.forwarded = 0
        self.dropped = 0
        self.max_queue = 0
        self.late_ns: list[int] = []
        self.first_ns = None
        self.last_ns = None

    def to_json(self, delay_ns: int) -> dict:
        late = sorted(self.late_ns)

        def q(p: float) -> float:
            return late[min(len(late) - 1, int(p * len(late)))] / 1e3 if late else 0.0

        span = (self.last_ns - self.first_ns) / 1e9 if self.first_ns and self.last_ns else 0.0
        return {
            "delay_us": delay_ns / 1e3,
            "forwarded": self.forwarded,
            "dropped": self.dropped,
            "max_queue": self.max_queue,
            "late_us": {"p50": q(0.5), "p90": q(0.9), "p99": q(0.99), "max": q(1.0)},
            "active_seconds": span,
        }


def run(fd: int, delay_ns: int, seconds: float, limit: int, stats: Stats) -> None:
    queue: collections.deque[tuple[int, bytes]] = collections.deque()
    clock = time.monotonic_ns
    stop_at = clock() + int(seconds * 1e9)
    stopping = []
    previous = {
        sig: signal.signal(sig, lambda *_: stopping.append(True))
        for sig in (signal.SIGTERM, signal.SIGINT)
    }
    try:
        _loop(fd, queue, delay_ns, stop_at, limit, stats, stopping)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _loop(fd, queue, delay_ns, stop_at, limit, stats, stopping) -> None:
    clock = time.monotonic_ns
    while not stopping:
        now = clock()
        if now >= stop_at:
            break
        # Sleep until the head packet is due (or a new one arrives); select's
        # timeout has microsecond resolution, poll's only milliseconds.
        timeout = (queue[0][0] - now) / 1e9 if queue else min(0.1, (stop_at - now) / 1e9)
        if timeout > 0:
            try:
                readable, _, _ = select.select([fd], [], [], timeout)
            except InterruptedError:
                continue
            if readable:
                arrived = clock()
                while len(queue) < limit:
                    try:
                        packet = os.read(fd, MAX_PACKET)
                    except BlockingIOError:
                        break
                    queue.append((arrived + delay_ns, packet))
                else:
                    stats.dropped += _drain(fd)
                stats.max_queue = max(stats.max_queue, len(queue))
                if stats.first_ns is None:
                    stats.first_ns = arrived
        now = clock()
        while queue and queue[0][0] <= now:
            due, packet = queue.popleft()
            try:
                os.write(fd, packet)
            except OSError:
                stats.dropped += 1
                continue
            stats.forwarded += 1
            stats.late_ns.append(now - due)
            stats.last_ns = now


def _drain(fd: int) -> int:
    """Read and discard what the kernel holds for us: the queue is full."""
    n = 0
    while True:
        try:
            os.read(fd, MAX_PACKET)
        except BlockingIOError:
            return n
        n += 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Fixed-delay line on a TUN device.")
    ap.add_argument("--dev", required=True, help="TUN device to create (at most 15 characters)")
    ap.add_argument("--delay-us", type=float, required=True, help="delay per packet, microseconds")
    ap.add_argument("--seconds", type=float, default=600.0, help="stop after this long")
    ap.add_argument("--limit", type=int, default=20000, help="largest queue, packets")
    ap.add_argument("--stats", help="write forwarding statistics (JSON) here on exit")
    args = ap.parse_args(argv)
    if args.delay_us < 0 or args.limit < 1 or len(args.dev) > 15:
        ap.error("--delay-us must be >= 0, --limit >= 1, --dev at most 15 characters")
    try:
        fd = open_tun(args.dev)
    except OSError as exc:
        print(f"delayline: cannot create TUN device {args.dev}: {exc}", file=sys.stderr)
        return 2
    # The kernel may defer a sleeping process's wake-up by its timer slack
    # (50 us by default); ask for none, so packets leave when they are due.
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0)
    stats = Stats()
    try:
        run(fd, int(args.delay_us * 1e3), args.seconds, args.limit, stats)
    finally:
        os.close(fd)
        if args.stats:
            with open(args.stats, "w") as f:
                json.dump(stats.to_json(int(args.delay_us * 1e3)), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
