"""The NIC's TX descriptor write-back engine (``nic.tx_writeback`` = ``each`` or ``block``).

As M5's ``IGbE`` (Saidi 2009's simulator): the transmit engine hands every
descriptor it has processed to a write-back engine of the descriptor cache's
own and goes on with the next packet, where with ``nic.tx_writeback = "batch"``
it writes a batch back itself.  The entries stay taken in the cache
(``TxDescFetch.used``: M5's ``usedCache``, counted against the room of a
fetch) until their write-back completes.  When a write-back is due follows
``TXDCTL``:

``each``
    ``WTHRESH`` = 0: after every packet, every processed descriptor;
``block``
    ``WTHRESH`` ≥ 1 with ``GRAN`` (what the e1000 driver of Linux 2.6.13 sets
    on every controller after the 82544: ``E1000_TXDCTL_FULL_TX_DESC_WB``):
    only whole cache blocks of descriptors (``CACHE_BLOCK`` bytes, 4 of 16
    bytes), the rest staying in the cache until more are done or the
    transmit engine finds nothing left to send (then all: M5's
    ``writeback(0)`` when ``descLeft() == 0``).

``TX Desc Writeback`` (``sys`` = the host)
    ``Wait`` — for a write-back to be due (``TX writeback due``, given by
    ``NIC TX``);
    ``writeback`` — writes back in one DMA every processed descriptor due (the
    processed ones are the units of ``TX used desc``): one write-back is
    outstanding at a time, and those due meanwhile go together in the next
    (M5's ``wbOut`` / ``moreToWb``); then the entries are free, the
    descriptors are the driver's (``TX done``), the completions go to the
    interrupt logic, and the fetch engine is asked, as M5's ``wbComplete``
    calls ``fetchAfterWb``, which fetches whenever the transmit engine is not
    ticking (from its packet DMA's start to its end, or dry).
"""

from __future__ import annotations

from cpasim.tracing import TracedContainer

#: Bytes per block of M5's DMA port (the host's cache line): with ``GRAN`` the
#: write-back threshold counts whole blocks of descriptors.
CACHE_BLOCK = 64


class TxDescWriteback:
    """The ``TX Desc Writeback`` state machine (see the module docstring)."""

    def __init__(self, env, sys: str, tracer, *, params, write_back, fetch, inst: str = "0"):
        """``write_back``: the NIC's generator that writes descriptors back and reports
        their completions (``NIC._tx_writeback``), run in this state machine."""
        self.write_back = write_back
        self.fetch = fetch
        blocks = params.tx_writeback == "block"
        self.block = max(1, CACHE_BLOCK // params.desc_size) if blocks else 1
        self.sm = tracer.sm(sys, "TX Desc Writeback", inst)
        # Descriptors of any connection: no connection ids.
        self.used = TracedContainer(env, tracer, sys, "TX used desc", inst, conn_flow=False)
        self.due = TracedContainer(env, tracer, sys, "TX writeback due", inst, conn_flow=False)
        self.flushing = False  # the next write-back takes every processed descriptor
        self.segs: list[int] = []  # frames of each processed descriptor not written back
        self.nbytes: list[int] = []  # and their bytes (MAC headers on), for the ITR
        env.process(self._run())

    def done(self, sm, segs: int, nbytes: int) -> None:
        """``sm`` (the transmit engine) has processed one descriptor: ``segs`` frames
        of ``nbytes`` bytes in all."""
        self.segs.append(segs)
        self.nbytes.append(nbytes)
        self.used.give(1, sm)
        if len(self.segs) % self.block == 0:
            self.due.give(1, sm)

    def flush(self, sm) -> None:
        """``sm`` (the transmit engine) found nothing left to send: everything processed
        is due."""
        if len(self.segs) % self.block:
            self.flushing = True
            self.due.give(1, sm)

    def _run(self):
        sm, used, due, fetch = self.sm, self.used, self.due, self.fetch
        sm.begin("Wait")
        while True:
            if due.level:
                due.grab(int(due.level), sm)
            else:
                yield due.get(1, sm)
                due.grab(int(due.level), sm)
            level = int(used.level)
            n = level if self.flushing else level - level % self.block
            self.flushing = False
            if not n:  # taken by the write-back before
                continue
            used.grab(n, sm)
            segs, nbytes = sum(self.segs[:n]), sum(self.nbytes[:n])
            del self.segs[:n], self.nbytes[:n]
            yield from self.write_back(sm, n, segs, nbytes)
            fetch.used -= n
            if not fetch.asked:
                fetch.ask(sm)
            sm.begin("Wait")
