"""Which device states hold the I/O bus, and how long a DMA read waits for its data.

Declared by the model, next to the bus it describes, and read by the
predictions (:mod:`cpasim.predict.transforms_table` scales these states with
the bus, :mod:`cpasim.predict.bounds` sums them into each channel's work), so
that a NIC state added or renamed here is one the predictions follow.

A DMA read (the device fetches from host memory) sends its requests up and
waits one round trip through the I/O bridge before the completions stream
down: it holds the host-to-device channel.  A DMA write is posted: it holds the
device-to-host channel and waits for nothing.
"""

from __future__ import annotations

READ, WRITE = "read", "write"

#: (SM, state, access) of every device state that holds the bus, in the engines'
#: order (:mod:`cpasim.model.nic`, :mod:`cpasim.model.desc_fetch` and
#: :mod:`cpasim.model.desc_writeback` with a TX descriptor cache,
#: :mod:`cpasim.model.copy_engine` on the I/O bus).
BUS_STATES: tuple[tuple[str, str, str], ...] = (
    ("NIC TX", "DMA descriptors", READ),
    ("TX Desc Fetch", "DMA descriptors", READ),
    ("TX Desc Writeback", "writeback", WRITE),
    ("NIC TX", "DMA packet", READ),
    ("NIC TX", "writeback", WRITE),
    ("NIC RX", "DMA descriptors", READ),
    ("NIC RX", "DMA packet", WRITE),
    ("Copy Engine", "DMA next address", READ),
    ("Copy Engine", "DMA descriptor", READ),
    ("Copy Engine", "read", READ),
    ("Copy Engine", "write", WRITE),
    ("Copy Engine", "DMA status", WRITE),
)


#: The copy engine's state names by where it sits: (next address, descriptor, read,
#: write, status).  On the I/O bus they are bus states (:data:`BUS_STATES`); on die
#: they cross another interconnect, so they are named apart
#: (:mod:`cpasim.model.copy_engine`).
COPY_ENGINE_STATES = {
    "io_bus": ("DMA next address", "DMA descriptor", "read", "write", "DMA status"),
    "on_die": ("next address", "descriptor", "copy read", "copy write", "status"),
}


#: The state of a software SM whose register write waits for the bus (M5's bridge,
#: :meth:`cpasim.model.m5bus.M5Bus.cpu_write`): its core stalls there, for as long as
#: the DMA traffic queued ahead of the write takes to cross, so it scales with the bus.
MMIO_WAIT = "mmio write"


def read_round_trip_ns(latency: float) -> float:
    """What a DMA read waits for its first completion beyond the transfers: a
    request to the bridge and its answer back, each ``latency`` (``pcie.latency``)."""
    return 2 * latency
