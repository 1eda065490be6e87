"""The device queue (qdisc) between IP and the driver.

A FIFO of packets, ``qdisc.len`` packets long.  The IP layer puts into it and
blocks while it is full (``wait_full`` on ``qdisc``), so a slow device path
shows up as waiting in IP send; the driver's ``Driver TX`` takes from it.
"""

from __future__ import annotations

from cpasim.tracing import TracedStore


def make_qdisc(env, sys: str, params, tracer, inst: str = "0") -> TracedStore:
    """The ``qdisc`` queue of host ``sys``'s interface ``inst``; ``params`` is ``hc.qdisc``."""
    return TracedStore(env, tracer, sys, "qdisc", inst, capacity=params.len)
