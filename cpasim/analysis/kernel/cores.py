"""Cores lent: an SM that runs on another SM's core (``run``) holds that core,
and the time the core's owner has it lent is charged to the owner's next edge
(:meth:`cpasim.analysis.criticalpath.CriticalPathPass._run`)."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(inline="always")
def lent_since_last(sms, sm, t):
    """The time the SM had its core lent between its last record and ``t``, taken
    out of its running total (0 before its first record: no edge to charge)."""
    s = sms[sm]
    lent = s.lent
    s.lent = 0.0
    since = s.lent_from
    has_last = s.has_last != 0
    if since == since:  # lent now
        last = s.last_t
        lent += t - (since if not has_last or since > last else last)
    if not has_last:
        return 0.0
    return lent


@njit
def run_on(sms, sm, a, t):
    """``run(to)``: from ``t`` on, SM ``sm`` runs on the core SM ``a`` holds
    (``a == sm``: on its own again)."""
    host = sms[sm].host
    new = a if a != sm else -1
    if host == new:
        return
    if host >= 0:
        sms[host].guests -= 1
        if sms[host].guests == 0:
            sms[host].lent = lent_since_last(sms, host, t)
            sms[host].lent_from = np.nan
    sms[sm].host = new
    if new >= 0:
        sms[new].guests += 1
        if sms[new].guests == 1:
            sms[new].lent_from = t
