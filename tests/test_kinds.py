"""Kinds are registered once: a parameter that chooses one takes its choices from the
registry, nothing else compares it to a name, and each kind's rules refuse what
cannot work with it in one line (:mod:`cpasim.config.rules`)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from cpasim.config import load_scenario
from cpasim.config.params import FLOW_SPECS, SPECS, TOPOLOGIES
from cpasim.config.rules import unread
from cpasim.errors import CpasimError
from cpasim.model.buses import BUSES
from cpasim.model.cc import ALGORITHMS
from cpasim.model.detail import LEVELS
from cpasim.model.flow_kinds import FLOW_KINDS
from cpasim.model.workloads import WORKLOADS

PACKAGE = Path(__file__).resolve().parent.parent / "cpasim"

#: Parameter -> its kinds' registry, and the modules that declare them.
REGISTRIES = {
    "workload.kind": (WORKLOADS, ("model/workloads.py",)),
    "bus.kind": (BUSES, ("model/buses.py",)),
    "tcp.cc": (ALGORITHMS, ("model/cc/",)),
    "host.detail": (LEVELS, ("model/detail.py",)),
    "topology.kind": (TOPOLOGIES, ("config/params.py",)),
    "flows kind": (FLOW_KINDS, ("model/flow_kinds.py",)),
}


def _choices(key: str) -> tuple:
    return FLOW_SPECS["kind"].choices if key == "flows kind" else SPECS[key].choices


@pytest.mark.parametrize("key", REGISTRIES)
def test_a_kind_parameter_offers_its_registry(key):
    kinds, _ = REGISTRIES[key]
    assert _choices(key) == tuple(kinds)
    assert all(getattr(kind, "name", None) == name for name, kind in kinds.items())


def _compared_strings(tree: ast.AST):
    """(line, text) of every string a comparison or membership test holds."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                items = side.elts if isinstance(side, ast.Tuple | ast.List | ast.Set) else [side]
                for item in items:
                    if isinstance(item, ast.Constant) and isinstance(item.value, str):
                        yield node.lineno, item.value


def test_no_kind_is_compared_to_a_name_outside_its_registry():
    names = {f"{q}{name}{q}" for kinds, _ in REGISTRIES.values() for name in kinds for q in "\"'"}
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        where = str(path.relative_to(PACKAGE))
        text = path.read_text()
        if not any(name in text for name in names):
            continue  # no kind's name in quotes: nothing to parse
        strings = list(_compared_strings(ast.parse(text)))
        for key, (kinds, homes) in REGISTRIES.items():
            if where.startswith(homes):
                continue
            found += [f"{where}:{n}: {text!r} ({key})" for n, text in strings if text in kinds]
    assert found == []


# The rules no other test names, each with the one line it refuses with.
RULES = [
    (
        ["bus.kind=m5", "memory.bandwidth=10Gbps"],
        "hosts.tx.bus.kind = m5 times memory by bus.m5_memory_latency: "
        "expected hosts.tx.memory.bandwidth = 0",
    ),
    (
        ["hosts.rx.host.detail=ideal", "copy_engine.enabled=true"],
        'hosts.rx.copy_engine.enabled is hardware, and hosts.rx.host.detail = "ideal" has '
        'none; expected copy_engine.enabled = false or host.detail = "full"',
    ),
    (
        ["topology.kind=forward", "bottleneck.reverse_rate=10Mbps"],
        'bottleneck.reverse_rate (10Mbps) cannot be used with topology.kind = "forward": the '
        "forwarding host is the router between the hosts; set one of them",
    ),
    (
        ["bottleneck.rate=10Mbps", "bottleneck.queue=1000B"],
        "bottleneck.queue (1000B) cannot hold one full-size packet (1538 B from "
        "link.mtu = 1500 B and bottleneck.overhead = 38 B)",
    ),
    (
        ["bottleneck.rate=10Mbps", "bottleneck.burst=1000B"],
        "bottleneck.burst (1000B) must be 0 or hold one full-size packet (1538 B)",
    ),
    (
        ["topology.kind=forward", "hosts.fw.bus.kind=m5", "hosts.fw.bus.m5_backoff_max=2ns"],
        "hosts.fw.bus.m5_backoff_max (2ns) must be at least hosts.fw.bus.m5_backoff_min (4ns)",
    ),
]


@pytest.mark.parametrize(("sets", "message"), RULES)
def test_each_rule_refuses_in_one_line(sets, message):
    with pytest.raises(CpasimError) as info:
        load_scenario(None, sets=sets)
    assert str(info.value) == f"--set: {message}"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            'kind = "ping"\nworkload.ping_size = "1500B"',
            "workload.ping_size (1500 B) and its 28 B of headers exceed link.mtu (1500 B): an "
            "echo request must fit one packet (fragmented ICMP is not modelled)",
        ),
        ('kind = "rpc"\nworkload.interval = "5ms"', "workload.interval is for flows of kind "),
    ],
)
def test_a_flow_kind_refuses_what_it_cannot_run(tmp_path, text, message):
    path = tmp_path / "flows.toml"
    path.write_text(f"[[flows]]\n{text}\n")
    with pytest.raises(CpasimError) as info:
        load_scenario(path)
    assert str(info.value).startswith(f"{path}: flows[0]: {message}")


def test_a_bus_key_of_another_kind_is_taken_and_named_as_changing_nothing():
    """A sweep or what-if may switch bus.kind under a value, and a resolved scenario
    must load back: the key is taken, and a run says it changes nothing."""
    cfg = load_scenario(None, sets=["hosts.rx.bus.kind=pci", "bus.pci_clock=66MHz"])
    assert unread(cfg.flat()) == [
        'bus.pci_clock = 66MHz changes nothing on tx (bus.kind = "pcie"): it is for '
        'bus.kind = "pci"'
    ]

    def said(*sets: str) -> list[str]:
        return unread(load_scenario(None, sets=list(sets)).flat())

    assert said("bus.on_die_clock=2GHz") != []
    assert said("bus.on_die_clock=2GHz", "copy_engine.enabled=true") == []  # its interconnect
    assert said("host.detail=ideal", "bus.m5_nack_delay=8ns") == []  # no bus at all
