"""tcp_sendmsg's hand-off of a write to TCP, as Linux 2.6.18's."""

from pathlib import Path

import pytest

from cpasim.config import load_scenario
from cpasim.simulate import simulate

STREAM = Path(__file__).resolve().parent.parent / "scenarios" / "tcp-stream.toml"


@pytest.mark.slow
def test_tso_keeps_a_small_send_buffer_flowing():
    """tcp-stream.toml's 1 Gb/s configuration (128 KiB send buffer, 64 KiB writes):
    Linux 2.6.18's tcp_sendmsg sends the buffer being filled as soon as it holds an
    MSS and nothing is queued before it (tcp_push_one), so with TSO the first
    segments of a write leave while the rest is still being copied; goodput with
    TSO stays within 5 % of goodput without it."""
    sets = ["sim.duration=60ms"]
    off = simulate(load_scenario(STREAM, sets=sets)).goodput_bps
    on = simulate(load_scenario(STREAM, sets=[*sets, "nic.tso=true"])).goodput_bps
    assert on >= 0.95 * off, (on / 1e6, off / 1e6)
