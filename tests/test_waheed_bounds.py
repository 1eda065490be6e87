"""Seed 001 (Waheed 2003): the HTTP and RTP peak-throughput bounds with a memory bus.

Waheed's latency model charges each transfer of a transaction's S bytes in series:
a memory-to-memory copy 2S/Bi, a pass of the CPU over the data S/Bi, the
memory-network transfer S/Be (Bi the internal, memory bandwidth; Be the I/O
bus's).  As CPU time → 0 the throughput is S over the sum:

* HTTP proxy ≤ Bi·Be / (5·Be + Bi): 5S/Bi, read here as the document's retrieval
  into the server's buffer (a copy, 2S), its copy into the socket (2S) and the
  TCP checksum's own pass over the segment (S), slide 22;
* RTP ≤ Bi·Be / (4·Be + Bi): 4S/Bi, the media read into the server's buffer (2S)
  and its copy into the socket with the UDP checksum computed on the way (2S),
  slide 24.

In cpasim these are the webserver and the udp_stream source with
``workload.file_copy`` (the read from the file), software checksums
(``nic.csum_offload = false``; for HTTP a pass of their own,
``tcp.csum_copy = false``), the sender's memory at Bi (``memory.bandwidth``) and
its DMA in series with the rest (``memory.dma_holds``, the model's "transfers in
series"), on an ideal legacy PCI bus of Be = width × clock (no burst overhead or
read wait, as the forms assume).  The bounds are computed from those parameters.
Figures: the seed's Bi = 3200 MB/s (the measured router's internal bus) and
Be = 1066 MB/s (PCI-X 133 MHz × 64 bit), from calibration/seeds/waheed_bounds.csv.
Achieved: at 100 GHz, HTTP 94.5% and RTP 96.0% of their bounds (headers,
descriptors and the client's requests and ACKs take the rest of the memory); at
4 GHz 92.3% and 81.7%.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cpasim.calibrate.reference import read_reference
from cpasim.config import load_scenario
from cpasim.simulate import simulate

ROOT = Path(__file__).resolve().parent.parent


WAHEED = {f.quantity: f.value for f in read_reference(ROOT / "calibration/seeds/waheed_bounds.csv")}


def seed(quantity: str) -> float:
    return WAHEED[quantity]


BI_MBPS = seed("internal_bus_bandwidth Bi")
BE_MBPS = seed("io_bus_bandwidth Be")
SERIAL_HOST = [
    "bus.kind=pci",
    "bus.pci_width=64",
    f"bus.pci_clock={BE_MBPS / 8}MHz",  # 8 bytes per cycle: Be
    "bus.pci_burst=4KiB",
    "bus.pci_burst_overhead=0",
    "bus.pci_read_wait=0",
    f"hosts.tx.memory.bandwidth={BI_MBPS * 8}Mbps",
    "hosts.tx.memory.dma_holds=true",
    "nic.csum_offload=false",
    "nic.itr=off",
    "workload.file_copy=true",
    "link.rate=10Gbps",
    "link.delay=5us",
    "tcp.wmem=1MiB",
    "tcp.rmem=1MiB",
    "sim.duration=20ms",
    "sim.warmup=4ms",
]
HTTP = [
    "workload.kind=webserver",
    "workload.connections=4",
    "workload.file_size_min=50kB",
    "workload.file_size_max=200kB",
    "tcp.csum_copy=false",
]
RTP = ["workload.kind=udp_stream", "workload.message_size=1472B"]
#: Memory passes per byte: Waheed's 5S/Bi and 4S/Bi.
CROSSINGS = {"http": 5, "rtp": 4}
WORKLOADS = {"http": HTTP, "rtp": RTP}


def waheed_bound(cfg, crossings: int) -> float:
    """Bi·Be / (k·Be + Bi), bytes/s, from the sender's memory and bus parameters."""
    bi = cfg.tx.memory.bandwidth / 8
    be = cfg.tx.bus.pci_width / 8 * cfg.tx.bus.pci_clock
    return bi * be / (crossings * be + bi)


def share_of_bound(kind: str, *sets: str) -> tuple[float, object]:
    cfg = load_scenario(None, sets=[*SERIAL_HOST, *WORKLOADS[kind], *sets])
    r = simulate(cfg)
    return r.goodput_bps / 8 / waheed_bound(cfg, CROSSINGS[kind]), cfg


def test_the_seed_figures_give_the_seed_bus():
    cfg = load_scenario(None, sets=SERIAL_HOST)
    assert cfg.tx.bus.pci_width / 8 * cfg.tx.bus.pci_clock == pytest.approx(BE_MBPS * 1e6)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["http", "rtp"])
def test_rate_stays_below_the_bound_and_approaches_it_as_cpu_costs_vanish(kind):
    slow, _ = share_of_bound(kind, "cpu.freq=4GHz")
    fast, _ = share_of_bound(kind, "cpu.freq=100GHz")
    assert 0 < slow <= fast <= 1.0
    assert fast >= 0.93  # achieved 0.945 (http), 0.960 (rtp)


@pytest.mark.slow
def test_a_buffering_bridge_is_not_bound_by_transfers_in_series():
    # Without memory.dma_holds the DMA takes only its bytes' share of the memory
    # and overlaps the copies: the serial bound no longer holds, the pipelined one
    # does, min(Bi / (k + 1), Be), the DMA being one more pass over the memory.
    # Achieved: RTP 1.35 times its serial bound.  (The web server, 1.003 times,
    # is held by its request-response turns before the memory binds.)
    kind = "rtp"
    share, cfg = share_of_bound(kind, "cpu.freq=100GHz", "hosts.tx.memory.dma_holds=false")
    assert share > 1.0
    bi = cfg.tx.memory.bandwidth / 8
    be = cfg.tx.bus.pci_width / 8 * cfg.tx.bus.pci_clock
    pipelined = min(bi / (CROSSINGS[kind] + 1), be)
    assert share * waheed_bound(cfg, CROSSINGS[kind]) <= pipelined


@pytest.mark.slow
def test_a_checksum_in_the_copy_saves_a_pass():
    # tcp.csum_copy (Linux's csum_and_copy_from_user) leaves the HTTP server four
    # passes: it then runs above the five-pass bound.
    share, _ = share_of_bound("http", "cpu.freq=100GHz", "tcp.csum_copy=true")
    assert share > 1.0


@pytest.mark.slow
def test_shipped_scenario_respects_its_bound():
    # scenarios/waheed-http.toml: the seed's hardware with cpasim's default CPU
    # costs (2 GHz).  Achieved: 68% of the bound at 2 GHz (the CPU binds), 94%
    # with the CPU's time taken away.
    shares = []
    for freq in ("2GHz", "100GHz"):
        cfg = load_scenario(ROOT / "scenarios" / "waheed-http.toml", sets=[f"cpu.freq={freq}"])
        assert cfg.tx.memory.bandwidth == pytest.approx(BI_MBPS * 8e6)
        assert cfg.tx.bus.pci_width / 8 * cfg.tx.bus.pci_clock == pytest.approx(BE_MBPS * 1e6)
        shares.append(simulate(cfg).goodput_bps / 8 / waheed_bound(cfg, CROSSINGS["http"]))
    assert 0 < shares[0] < shares[1] <= 1.0
    assert shares[1] >= 0.9
