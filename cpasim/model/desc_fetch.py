"""The NIC's TX descriptor fetch engine and the descriptor cache it fills.

As in the e1000-like NIC of Saidi 2009's simulator (M5's ``IGbE``: a
``DescCache`` per direction with a fetch state machine of its own), the
transmit engine (``NIC TX``, :mod:`cpasim.model.nic`) does not read
descriptors itself when ``nic.tx_desc_cache`` > 0: it takes them from an
on-NIC cache of that many entries, and asks this engine for more when the
cache holds ``nic.tx_fetch_threshold`` unused descriptors or fewer.

``TX Desc Fetch`` (``sys`` = the host)
    ``Wait`` — for a request from the transmit engine (``TX fetch request``);
    a request made while a fetch is outstanding is not repeated, as M5's
    ``fetchDescriptors`` returns while ``curFetching``;
    ``Wait`` on the ring — a request with no descriptor posted waits for the
    driver's doorbell (``TX ring``);
    ``DMA descriptors`` — reads in one DMA read as many of the posted
    descriptors as the cache has room for (entries neither unused nor waiting
    for their write-back), at most ``nic.desc_fetch_batch``, and puts them into
    the ``TX desc cache``, where the transmit engine waits for them when it
    ran dry (its ``Wait``).

How the engine is asked (``nic.tx_fetch_request``):

``queue`` (default)
    The request is a credit queue, so the analyzer sees who asked: the
    engine's idle time between fetches is waiting, and a transmit engine that
    waits for its cache depends on the fetch (its bus time, its round trip)
    and, through the request, on the transmit engine that asked.
``call``
    As M5's ``IGbE``: ``fetchDescriptors`` is a plain call, made by the
    transmit engine when its cache runs low and by the driver's doorbell (the
    ``TDT`` register write), and leaves no record.  The engine's ``Wait``
    after a fetch (M5: ``anBegin("Wait")`` in ``fetchComplete``) is then
    active time with no dependency to explain its end, so a path that reaches
    a fetch runs back through the whole ``Wait`` before it, as Saidi 2009's
    analysis did ("57% in the Wait state ... a state that waits for commands
    from the Transmit state machine").  The doorbell's call is what M5's
    register write did; with it the cache is topped up whenever the driver
    posts, without it only when the transmit engine asks.  ``cpasim predict``
    has no row for this ``Wait`` (idle time is no work a change of the bus or
    the clock scales): from such a trace it keeps the ``Wait`` as recorded, so
    predictions want ``queue``.
"""

from __future__ import annotations

from cpasim.tracing import TracedContainer


class TxDescFetch:
    """The ``TX Desc Fetch`` state machine and its cache (see the module docstring)."""

    def __init__(self, env, sys: str, tracer, *, params, bus, rings, inst: str = "0"):
        self.bus = bus
        self.rings = rings
        self.desc_size = params.desc_size
        self.batch = params.desc_fetch_batch
        self.size = params.tx_desc_cache
        self.threshold = params.tx_fetch_threshold
        self.sm = tracer.sm(sys, "TX Desc Fetch", inst)
        # Both carry descriptors of any connection: no connection ids.
        self.cache = TracedContainer(env, tracer, sys, "TX desc cache", inst, conn_flow=False)
        self.used = 0  # taken by the transmit engine, not written back yet
        self.asked = False  # a request is pending or a fetch outstanding
        self.fetching = 0  # descriptors of the fetch under way, taken off the ring
        if params.tx_fetch_request == "call":
            self.env = env
            self.wake = None  # the event the idle engine waits on, untraced
            self.ask = self._call
            rings.doorbell = self._call
            env.process(self._run_called())
        else:
            self.requests = TracedContainer(
                env, tracer, sys, "TX fetch request", inst, conn_flow=False
            )
            env.process(self._run())

    def low(self) -> bool:
        """The cache holds few enough unused descriptors to ask for more."""
        return not self.asked and self.cache.level <= self.threshold

    def ask(self, sm) -> None:
        """``sm`` (the transmit engine) asks for a fetch."""
        self.asked = True
        self.requests.give(1, sm)

    def _call(self, sm) -> None:
        """``ask`` with ``nic.tx_fetch_request = "call"``: a plain call, no record."""
        self.asked = True
        if self.wake is not None:
            self.wake.succeed()
            self.wake = None

    def _run(self):
        sm, requests = self.sm, self.requests
        sm.begin("Wait")
        while True:
            if requests.level:
                requests.grab(1, sm)
            else:
                yield requests.get(1, sm)
            yield from self._fetch()

    def _run_called(self):
        sm = self.sm
        sm.begin("Wait")
        while True:
            if not self.asked:
                # No wait record: the idle time stays this state's active time.
                self.wake = self.env.event()
                yield self.wake
            yield from self._fetch()

    def _fetch(self):
        """One request served: ``DMA descriptors`` into the cache, back to ``Wait``."""
        sm, ring, cache = self.sm, self.rings.tx_ring, self.cache
        room = min(self.batch, self.size - int(cache.level) - self.used)
        if room < 1:  # every entry in use: the next write-back frees some
            self.asked = False
            return
        if ring.level:
            k = ring.grab(room, sm)
        else:
            yield ring.get(1, sm)
            k = 1 + ring.grab(room - 1, sm)
        sm.begin("DMA descriptors")
        self.fetching = k
        yield from self.bus.dma_read(sm, k * self.desc_size)
        self.fetching = 0
        self.asked = False
        cache.give(k, sm)
        sm.begin("Wait")
