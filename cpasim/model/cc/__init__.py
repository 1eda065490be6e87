"""TCP congestion-control algorithms as Linux has them (``net/ipv4/tcp_*.c``).

Each algorithm is an env-free rules object implementing
:class:`~cpasim.model.cc.base.CongestionOps`; the sender owns one per
connection, made by :func:`make`.
"""

from __future__ import annotations

from cpasim.model.cc.base import CongestionOps
from cpasim.model.cc.bbr import Bbr
from cpasim.model.cc.cubic import Cubic
from cpasim.model.cc.reno import NewReno, Reno

#: Name (as ``tcp.cc`` spells it, Linux's ``tcp_congestion_control``) -> class: the
#: parameter's choices (:mod:`cpasim.config.params`) are these names.
ALGORITHMS: dict[str, type[CongestionOps]] = {cls.name: cls for cls in (Reno, NewReno, Cubic, Bbr)}


def make(name: str, seed: int = 0) -> CongestionOps:
    """A fresh algorithm object for one connection.

    ``seed`` feeds the algorithms that draw random numbers (BBR's first
    PROBE_BW phase), so runs are reproducible; the others take none.
    """
    try:
        cls = ALGORITHMS[name]
    except KeyError:
        choices = ", ".join(sorted(ALGORITHMS))
        raise ValueError(
            f"unknown congestion control {name!r}: expected one of {choices}"
        ) from None
    return cls(seed=seed) if cls.takes_seed else cls()


__all__ = ["ALGORITHMS", "CongestionOps", "make"]
