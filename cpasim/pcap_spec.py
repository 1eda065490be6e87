"""What a packet capture is asked for: ``--pcap FILE``, ``--pcap-side`` and ``--snaplen``.

Apart from the capture's writer (:mod:`cpasim.capture`), which needs the model's
packets and link: the command line and the API declare their options from these
and check them before any run, and only a run that writes a capture imports the
writer.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cpasim.errors import CpasimError
from cpasim.protocol import MAC_HEADER

#: Bytes kept per frame: Ethernet, IPv4 and TCP headers with 40 bytes of options fit.
DEFAULT_SNAPLEN = 96
MIN_SNAPLEN, MAX_SNAPLEN = MAC_HEADER, 262144
#: The hosts a capture can sit beside.
SIDES = ("tx", "rx")


@dataclass(frozen=True)
class PcapSpec:
    """What ``--pcap``, ``--pcap-side`` and ``--snaplen`` ask for."""

    path: Path
    side: str = "tx"
    snaplen: int = DEFAULT_SNAPLEN

    def __post_init__(self) -> None:
        if self.side not in SIDES:
            raise CpasimError(f"--pcap-side {self.side}: expected one of {', '.join(SIDES)}")
        if not MIN_SNAPLEN <= self.snaplen <= MAX_SNAPLEN:
            raise CpasimError(
                f"--snaplen {self.snaplen}: expected {MIN_SNAPLEN} to {MAX_SNAPLEN} bytes"
            )
