"""TCP congestion-control algorithms as Linux has them (``net/ipv4/tcp_*.c``).

Each algorithm is an env-free rules object implementing
:class:`~cpasim.model.cc.base.CongestionOps`; the sender owns one per
connection, made by :func:`make`.
"""

from __future__ import annotations

from cpasim.model.cc.base import CongestionOps
from cpasim.model.cc.cubic import Cubic
from cpasim.model.cc.reno import NewReno, Reno

#: Name (as ``tcp.cc`` spells it, Linux's ``tcp_congestion_control``) -> class.
ALGORITHMS: dict[str, type[CongestionOps]] = {
    "reno": Reno,
    "newreno": NewReno,
    "cubic": Cubic,
}


def make(name: str) -> CongestionOps:
    """A fresh algorithm object for one connection."""
    try:
        cls = ALGORITHMS[name]
    except KeyError:
        choices = ", ".join(sorted(ALGORITHMS))
        raise ValueError(
            f"unknown congestion control {name!r}: expected one of {choices}"
        ) from None
    return cls()


__all__ = ["ALGORITHMS", "CongestionOps", "make"]
