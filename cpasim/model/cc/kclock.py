"""Linux's clocks and wrapping u32 arithmetic, for algorithms ported from the kernel.

cpasim keeps time in ns; the kernel's congestion-control modules keep µs
(``tcp_mstamp``, ``delivered_mstamp``) and jiffies (``tcp_jiffies32``) in u32
fields compared with ``after()``.  These convert at the edge so each module's
arithmetic stays the kernel's.
"""

from __future__ import annotations

#: ``CONFIG_HZ`` of distribution kernels: jiffies per second.  It sets the
#: resolution of CUBIC's curve clock and BBR's min_rtt/PROBE_RTT clocks.
HZ = 1000
USEC_PER_SEC = 1_000_000
USEC_PER_MSEC = 1000

U32 = 0xFFFFFFFF
U64 = 0xFFFFFFFFFFFFFFFF


def s32(x: int) -> int:
    """``(s32)x``: a u32 difference read as signed."""
    x &= U32
    return x - (1 << 32) if x & 0x80000000 else x


def after(a: int, b: int) -> bool:
    """``after(a, b)``: ``a`` is later than ``b`` on a wrapping u32 counter."""
    return s32(b - a) < 0


def jiffies(now_ns: float) -> int:
    """``tcp_jiffies32`` at ``now_ns``."""
    return int(now_ns * HZ // 1_000_000_000) & U32


def usecs(ns: float) -> int:
    """µs (``tcp_mstamp`` and friends) from ns, truncated as the kernel's clock is."""
    return int(ns // 1000)


def usecs_to_jiffies(us: int) -> int:
    """``usecs_to_jiffies``: rounds up."""
    return -(-us * HZ // USEC_PER_SEC)
