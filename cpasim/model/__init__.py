"""The simulated system, one module per component.

Host software stack: :mod:`~cpasim.model.packet`, :mod:`~cpasim.model.cpu`,
:mod:`~cpasim.model.app`, :mod:`~cpasim.model.socket_api`, :mod:`~cpasim.model.tcp`
(with the env-free rules in :mod:`~cpasim.model.tcp_rules`),
:mod:`~cpasim.model.udp`, :mod:`~cpasim.model.ip`, :mod:`~cpasim.model.host`;
device path: qdisc, driver, NIC, bus, link, device; a forwarding host between the
two: :mod:`~cpasim.model.forwarder`; the whole world: :mod:`~cpasim.model.system`;
the SimPy environment a run drives it on: :mod:`~cpasim.model.environment`.
"""
