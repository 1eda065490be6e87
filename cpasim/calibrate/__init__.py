"""Calibration: read what real systems measured, and bring the model in line with it.

Readers turn user data into plain dataclasses: packet captures (:mod:`.pcap`),
iperf3 ``--json`` reports (:mod:`.iperf`) and microbenchmark CSV tables
(:mod:`.microbench`).  :mod:`.inspect` derives the figures a capture can tell
about the path (bottleneck rate, RTT, MSS, ACK policy, windows, losses).
:mod:`.reference` reads the seed texts' published figures; :mod:`.fit` fits
scenario parameters to measurements by re-simulating.
"""

from cpasim.calibrate.inspection import FlowReport, inspect_capture
from cpasim.calibrate.iperf import IperfRun, read_iperf
from cpasim.calibrate.microbench import MicrobenchTable, read_microbench
from cpasim.calibrate.pcap import Capture, PacketRecord, read_capture

__all__ = [
    "Capture",
    "FlowReport",
    "IperfRun",
    "MicrobenchTable",
    "PacketRecord",
    "inspect_capture",
    "read_capture",
    "read_iperf",
    "read_microbench",
]
