"""Every declared parameter does something.

MATTERS has one entry per parameter of :mod:`cpasim.config.params` (a parameter
without one fails :func:`test_every_parameter_has_an_entry`, so a new parameter
must be added here): a short scenario where the parameter should matter, and a
value within its range.  The run with the value must differ from the run
without it, in the result (goodput, utilisations, drops, events, ...).  A
parameter that can only matter in some set-ups names them in its doc; where
the case needs such a set-up (``bus.kind = "pci"`` for the PCI keys) the table
gives it in ``base``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import pytest

from cpasim.config import load_scenario
from cpasim.config.params import SPECS
from cpasim.simulate import simulate

SHORT = ("sim.duration=3ms", "sim.warmup=1ms")
UDP = ("workload.kind=udp_stream",)
PINGPONG = ("workload.kind=pingpong", "workload.message_size=1KiB")
WEB = (
    "workload.kind=webserver",
    "workload.connections=2",
    "workload.file_size_min=20kB",
    "workload.file_size_max=100kB",
)
LOSSY = ("link.loss=0.02",)
LOSSY_LONG = (*LOSSY, "sim.duration=10ms", "sim.seed=3")
SHAPED = ("bottleneck.rate=500Mbps",)
PCI = ("bus.kind=pci",)
ON_DIE = ("bus.kind=on_die",)
M5 = ("bus.kind=m5",)
NO_CSUM = ("nic.csum_offload=false",)
SLOW_CPU = ("cpu.freq=1GHz",)
RPC = ("workload.kind=rpc",)
SEND_2613 = (*UDP, "ip.send_path=2.6.13", "ip.netfilter=true")
COPY_ENGINE = ("copy_engine.enabled=true",)
CACHE = ("cpu.cache.size=512KiB",)
POLL = (*UDP, "workload.receive=poll")
GBN = ("workload.kind=udp_gbn",)
FORWARD = ("topology.kind=forward",)


@dataclass(frozen=True)
class Case:
    value: str  # as written after ``--set key=``
    base: tuple[str, ...] = ()  # the set-up where the key matters (beyond SHORT)
    doc: str = ""  # where the key matters only in that set-up, what its doc says of it


MATTERS: dict[str, Case] = {
    # sim
    "sim.duration": Case("2ms"),
    "sim.warmup": Case("2ms"),
    "sim.seed": Case("7", LOSSY),
    # topology: a forwarding host between tx and rx
    "topology.kind": Case("forward"),
    "cpu.cost.forward": Case("20000", FORWARD, "forwarding host"),
    # workload
    "workload.kind": Case("udp_stream"),
    "workload.bytes": Case("100kB"),
    "workload.write_size": Case("1KiB"),
    "workload.read_size": Case("1KiB"),
    "workload.message_size": Case("4KiB", UDP),
    "workload.connections": Case("3"),
    "workload.processes": Case("2", (*WEB, "hosts.tx.cpu.cores=2")),
    "workload.file_size_min": Case("50kB", WEB, "webserver"),
    "workload.file_size_max": Case("300kB", WEB, "webserver"),
    "workload.request_size": Case("64KiB", WEB, "webserver"),
    "workload.think_time": Case("500us", WEB, "webserver"),
    "workload.file_copy": Case("true", UDP, "udp_stream"),
    # link
    "link.rate": Case("100Mbps"),
    "link.delay": Case("200us"),
    "link.mtu": Case("9000B"),
    "link.loss": Case("0.02"),
    # bottleneck
    "bottleneck.rate": Case("500Mbps"),
    "bottleneck.reverse_rate": Case("1Mbps"),
    "bottleneck.queue": Case("5kB", SHAPED),
    "bottleneck.overhead": Case("500B", SHAPED),
    "bottleneck.burst": Case("64kB", SHAPED),
    # CoDel drops only after a 100 ms interval above its target.
    "bottleneck.aqm": Case(
        "codel", ("bottleneck.rate=50Mbps", "link.delay=1ms", "sim.duration=300ms")
    ),
    # host
    "host.detail": Case("ideal"),
    # tcp: socket buffers
    "tcp.sndbuf": Case("8KiB"),
    "tcp.rcvbuf": Case("8KiB"),
    "tcp.core_wmem_max": Case("8KiB", ("tcp.sndbuf=1MiB",), "SO_SNDBUF"),
    "tcp.core_rmem_max": Case("8KiB", ("tcp.rcvbuf=1MiB",), "SO_RCVBUF"),
    "tcp.core_rmem_default": Case("4KiB", (*UDP, "hosts.rx.cpu.cost.user=2000000"), "UDP"),
    "tcp.wmem_default": Case("1MiB", ("link.delay=200us",), "tcp.init_cwnd"),
    "tcp.wmem_max": Case("32KiB", ("link.delay=200us",)),
    "tcp.rmem_default": Case("8KiB"),
    "tcp.rmem_max": Case("64KiB", ("link.delay=500us", "sim.duration=20ms")),
    "tcp.moderate_rcvbuf": Case("false", ("link.delay=500us", "sim.duration=20ms")),
    "tcp.rx_truesize": Case("8KiB"),
    "tcp.wmem": Case("16KiB"),
    "tcp.rmem": Case("16KiB"),
    # tcp: sender and receiver
    "tcp.init_cwnd": Case("2", ("link.delay=200us",)),
    "tcp.delayed_ack": Case("false"),
    "tcp.delack_timeout": Case("1ms", PINGPONG),
    "tcp.nagle": Case("false", ("workload.write_size=100B",)),
    "tcp.csum_copy": Case("false", (*NO_CSUM, "memory.bandwidth=2Gbps"), "memory.bandwidth"),
    "tcp.cc": Case("bbr"),
    "tcp.sack": Case("false", LOSSY),
    "tcp.recovery": Case("dupack", LOSSY_LONG),
    "tcp.pacing": Case("on"),
    "tcp.timestamps": Case("false"),
    "tcp.rto_min": Case("1ms", ("link.loss=0.1", "sim.duration=10ms")),
    "tcp.dupack_threshold": Case("8", LOSSY_LONG),
    # ip, qdisc, driver
    "ip.netfilter": Case("true"),
    "qdisc.len": Case("2", UDP),
    "driver.napi_budget": Case("1"),
    "driver.tx_clean_batch": Case("1"),
    "driver.tx_batch": Case("1", UDP),
    # nic
    "nic.tx_ring": Case("4"),
    "nic.rx_ring": Case("4"),
    "nic.desc_size": Case("256B"),
    "nic.desc_fetch_batch": Case("1"),
    "nic.tx_fifo": Case("2KiB"),
    "nic.rx_fifo": Case("2KiB", ("link.rate=10Gbps", *UDP)),
    "nic.coalesce_usecs": Case(
        "100us", ("nic.itr=off", "nic.coalesce_frames=16"), "nic.coalesce_frames above 1"
    ),
    "nic.coalesce_frames": Case("16", ("nic.itr=off", "nic.coalesce_usecs=100us")),
    "nic.itr": Case("off"),
    "nic.throttle_usecs": Case("200us", ("nic.itr=fixed",), "nic.itr=fixed"),
    "nic.tso": Case("true"),
    "nic.csum_offload": Case("false"),
    # pcie (the default bus)
    "pcie.gen": Case("3"),
    "pcie.lanes": Case("4"),
    "pcie.max_payload": Case("128B"),
    "pcie.max_read_request": Case("128B"),
    "pcie.tlp_overhead": Case("128B"),
    "pcie.latency": Case("2us"),
    "pcie.mmio_latency": Case("2us"),
    # legacy PCI
    "bus.kind": Case("pci"),
    "bus.pci_width": Case("32", PCI, "bus.kind = pci"),
    "bus.pci_clock": Case("66MHz", PCI, "bus.kind = pci"),
    "bus.pci_burst": Case("64B", PCI, "bus.kind = pci"),
    "bus.pci_burst_overhead": Case("5", PCI, "bus.kind = pci"),
    "bus.pci_read_wait": Case("5", PCI, "bus.kind = pci"),
    "bus.on_die_width": Case("1B", ON_DIE, "bus.kind = on_die"),
    "bus.on_die_clock": Case("10MHz", ON_DIE, "bus.kind = on_die"),
    "bus.m5_header_cycles": Case("8", M5, "bus.kind = m5"),
    "bus.m5_memory_latency": Case("2us", M5, "bus.kind = m5"),
    "bus.m5_bridge_buffer": Case("64", M5, "bus.kind = m5"),
    "bus.m5_nack_delay": Case("500ns", M5, "bus.kind = m5"),
    "bus.m5_backoff_min": Case("1us", M5, "bus.kind = m5"),
    "bus.m5_backoff_max": Case("8ns", M5, "bus.kind = m5"),
    # cpu
    "cpu.cores": Case("2", ("workload.connections=2", *SLOW_CPU)),
    "cpu.irq_cores": Case("1", ("cpu.cores=2",)),
    "cpu.freq": Case("1GHz"),
    "cpu.cost.syscall": Case("20000"),
    "cpu.cost.copy": Case("20000"),
    "cpu.cost.copy_per_byte": Case("4"),
    "cpu.cost.csum_per_byte": Case("4", NO_CSUM, "nic.csum_offload = false"),
    "cpu.cost.tx_packet": Case("8000"),
    "cpu.cost.rx_packet": Case("8000"),
    "cpu.cost.ack": Case("8000"),
    "cpu.cost.interrupt": Case("8000"),
    "cpu.cost.descriptor": Case("2000"),
    "cpu.cost.context_switch": Case("20000"),
    "cpu.cost.skb_alloc": Case("4000"),
    "cpu.cost.skb_free": Case("4000"),
    "cpu.cost.netfilter": Case("8000", ("ip.netfilter=true",), "ip.netfilter"),
    "cpu.cost.fragment": Case("8000", UDP),
    "cpu.cost.reassemble": Case("8000", UDP),
    "cpu.cost.user": Case("20000"),
    # the data cache: its keys act only with cpu.cache.size
    "cpu.cache.size": Case("512KiB"),
    "cpu.cache.line": Case("64B", CACHE, "cpu.cache.size"),
    "cpu.cache.word": Case("4B", CACHE, "cpu.cache.size"),
    "cpu.cache.miss_penalty": Case("50", CACHE, "cpu.cache.size"),
    "cpu.cache.working_set": Case("1MiB", CACHE, "cpu.cache.size"),
    "cpu.cache.ack_footprint": Case("true", ("cpu.cache.size=8KiB",), "cpu.cache.size"),
    "cpu.cost.copy_send_per_byte": Case("5"),
    "cpu.cost.copy_recv_per_byte": Case("5"),
    "cpu.cost.send_call": Case("20000"),
    "cpu.cost.udp_send": Case("20000", UDP),
    "cpu.cost.memcpy_per_byte": Case("20", SEND_2613, "ip.send_path=2.6.13"),
    "cpu.cost.xmit_frame": Case("3000", SEND_2613, "ip.send_path = 2.6.13"),
    "cpu.irq_preempt": Case("true", SEND_2613, "ip.send_path = 2.6.13"),
    # ip
    "ip.send_path": Case("2.6.13", UDP, "UDP"),
    # nic: the controller's own time, the TX descriptor cache
    "nic.tx_latency": Case("5us"),
    "nic.rx_latency": Case("5us"),
    "nic.tx_desc_cache": Case("64"),
    "nic.tx_fetch_threshold": Case("56", ("nic.tx_desc_cache=64",), "tx_desc_cache"),
    "nic.tx_fetch_request": Case("call", ("nic.tx_desc_cache=64",), "tx_desc_cache"),
    "nic.tx_writeback": Case("block", ("nic.tx_desc_cache=64",), "tx_desc_cache"),
    # workload: request/response over UDP
    "workload.response_size": Case("4KiB", RPC, "rpc"),
    # workload: Directed Point's polled receive, its reliable layer, two-way streams
    "workload.receive": Case("poll", UDP, "udp_stream"),
    "workload.duplex": Case("true", UDP, "udp_stream"),
    "workload.window": Case("1", (*GBN, "workload.ack_every=1"), "udp_gbn"),
    "workload.ack_every": Case("1", GBN, "udp_gbn"),
    "workload.retransmit_timeout": Case("50us", (*GBN, "link.loss=0.02"), "udp_gbn"),
    "cpu.cost.poll": Case("20000", POLL, "workload.receive = poll"),
    "cpu.cost.poll_per_byte": Case("5", (*POLL, "workload.copy_out=true"), "workload.copy_out"),
    "workload.copy_out": Case(
        "true", (*POLL, "cpu.cost.poll_per_byte=5"), "workload.receive = poll"
    ),
    "cpu.cost.reliable": Case("20000", GBN, "workload.kind = udp_gbn"),
    # memory
    "memory.bandwidth": Case("1Gbps"),
    "memory.latency": Case("1us", ("memory.bandwidth=100Gbps",), "memory.bandwidth"),
    "memory.load_window": Case(
        "100us", ("memory.bandwidth=4Gbps", "memory.latency=1us"), "memory.bandwidth"
    ),
    "memory.dma_holds": Case("true", ("memory.bandwidth=10Gbps",), "memory.bandwidth"),
    # the DMA copy engine: its keys act only with copy_engine.enabled
    "copy_engine.enabled": Case("true"),
    "copy_engine.location": Case("io_bus", COPY_ENGINE),
    "copy_engine.latency": Case("5us", COPY_ENGINE),
    "copy_engine.completion_latency": Case("5us", COPY_ENGINE),
    "copy_engine.rate": Case("1Gbps", COPY_ENGINE),
    "copy_engine.batch": Case("2", COPY_ENGINE),
    "copy_engine.copy_size": Case("256B", COPY_ENGINE),
    "copy_engine.page_size": Case("1KiB", COPY_ENGINE),
    "copy_engine.desc_size": Case("2KiB", (*COPY_ENGINE, "copy_engine.location=io_bus")),
    "copy_engine.mmio_latency": Case("5us", COPY_ENGINE),
    "copy_engine.ring": Case("2", COPY_ENGINE),
    "copy_engine.wait": Case("sleep", COPY_ENGINE),
}


@functools.cache
def _observed(sets: tuple[str, ...]) -> dict:
    """The run's result; runs are deterministic, so each set-up's is simulated once."""
    out = simulate(load_scenario(None, sets=[*SHORT, *sets])).to_json()
    for key in ("wall_s", "config_digest"):
        out.pop(key)
    return out


def _check(key: str, case: Case) -> None:
    spec = SPECS[key]
    full = key if not spec.per_host else f"hosts.{spec.hosts[0]}.{key}"
    changed = load_scenario(None, sets=[*SHORT, *case.base, f"{key}={case.value}"]).value(full)
    before = load_scenario(None, sets=[*SHORT, *case.base]).value(full)
    assert changed != before, f"{key}={case.value} is the set-up's own value"
    assert case.doc in spec.doc, f"{key}: its doc should say it needs {case.doc!r}"
    assert _observed((*case.base, f"{key}={case.value}")) != _observed(case.base), (
        f"{key}={case.value} changed nothing on {case.base or 'the defaults'}"
    )


def test_every_parameter_has_an_entry():
    listed = set(MATTERS)
    assert not set(SPECS) - listed, f"parameters without an entry: {sorted(set(SPECS) - listed)}"
    assert not listed - set(SPECS), f"entries for no parameter: {sorted(listed - set(SPECS))}"


#: Cases that cost a quarter of a second or more (a CoDel interval, 20 ms of window
#: growth, a go-back-N retransmitting every 50 us): the whole suite runs them.
LONG = {"bottleneck.aqm", "tcp.moderate_rcvbuf", "tcp.rmem_max", "workload.retransmit_timeout"}


@pytest.mark.parametrize(
    "key", [pytest.param(k, marks=pytest.mark.slow) if k in LONG else k for k in sorted(MATTERS)]
)
def test_parameter_changes_the_run(key):
    _check(key, MATTERS[key])
