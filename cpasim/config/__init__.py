"""Scenario configuration: parameter declarations, loading, overrides, digest.

>>> from cpasim.config import load_scenario
>>> cfg = load_scenario(None, sets=["link.rate=10Gbps"])
>>> cfg.link.rate, cfg.tx.tcp.rmem_default
(10000000000.0, 131072)
"""

from cpasim.config.load import load_scenario, parse_set, scenario_config
from cpasim.config.params import ALL_HOSTS, FORWARDER, HOSTS, HostParams, ParamSpec, parameters
from cpasim.config.resolve import spec_of
from cpasim.config.resolved import Config

__all__ = [
    "ALL_HOSTS",
    "FORWARDER",
    "HOSTS",
    "Config",
    "HostParams",
    "ParamSpec",
    "load_scenario",
    "parameters",
    "parse_set",
    "scenario_config",
    "spec_of",
]
