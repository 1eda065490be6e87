"""ns-3's tcp-stream: the shipped scenario's network, simulated by ns-3, timed.

Run by ``bench/bench_detail.py`` with an interpreter that has ns-3's Python bindings
(``pip install ns3``, the registry's wheel), never by cpasim's own: it imports no
cpasim.  Two nodes on a point-to-point link (``--rate``, 350 us one-way, MTU 1500),
TCP NewReno without SACK, timestamps on, delayed ACKs every second segment, Nagle on,
an initial window of 10 segments, 128 KiB send and 174760 B receive buffers, a
BulkSend into a PacketSink: ``scenarios/tcp-stream.toml`` as ns-3 builds it.  The
default traffic control (``pfifo_fast``, 1000 packets) is the qdisc.  BulkSend writes
16 KiB blocks, not the scenario's 64 KiB: ns-3's socket takes a write whole or not at
all, so 64 KiB blocks into a 128 KiB buffer leave it half empty and the run
window-limited (720 Mb/s), where cpasim's writer, as Linux's, copies what fits.

Prints one JSON object per run: segments delivered, events, and the CPU and wall time
of ``Simulator::Run`` alone (the bindings' start-up, about 20 s of compiling headers,
is not counted).  With ``--serve`` it runs once per line read from stdin, so that a
benchmark can interleave its runs with others' and pay the start-up once.

    VENV/bin/python bench/ns3_tcp_stream.py [--duration 40ms] [--rate 1Gbps] [--serve]
"""

from __future__ import annotations

import argparse
import json
import sys
import time

MSS = 1448  # 1500 B IP packets with the timestamp option, as cpasim's segments
PORT = 5000


def simulate(duration_s: float, rate: str) -> dict:
    from ns import ns  # loads and compiles the bindings on first use

    uint, boolean = ns.UintegerValue, ns.BooleanValue
    ns.Config.SetDefault("ns3::TcpL4Protocol::SocketType", ns.StringValue("ns3::TcpNewReno"))
    ns.Config.SetDefault("ns3::TcpSocket::SegmentSize", uint(MSS))
    ns.Config.SetDefault("ns3::TcpSocket::SndBufSize", uint(128 * 1024))
    ns.Config.SetDefault("ns3::TcpSocket::RcvBufSize", uint(174760))
    ns.Config.SetDefault("ns3::TcpSocket::DelAckCount", uint(2))
    ns.Config.SetDefault("ns3::TcpSocket::InitialCwnd", uint(10))
    ns.Config.SetDefault("ns3::TcpSocket::TcpNoDelay", boolean(False))  # Nagle on
    ns.Config.SetDefault("ns3::TcpSocketBase::Sack", boolean(False))
    ns.Config.SetDefault("ns3::TcpSocketBase::Timestamp", boolean(True))

    nodes = ns.NodeContainer()
    nodes.Create(2)
    link = ns.PointToPointHelper()
    link.SetDeviceAttribute("DataRate", ns.StringValue(rate))
    link.SetDeviceAttribute("Mtu", uint(1500))
    link.SetChannelAttribute("Delay", ns.StringValue("350us"))
    devices = link.Install(nodes)
    ns.InternetStackHelper().Install(nodes)
    addresses = ns.Ipv4AddressHelper()
    addresses.SetBase(ns.Ipv4Address("10.1.1.0"), ns.Ipv4Mask("255.255.255.0"))
    interfaces = addresses.Assign(devices)

    anywhere = ns.InetSocketAddress(ns.Ipv4Address.GetAny(), PORT).ConvertTo()
    sink_apps = ns.PacketSinkHelper("ns3::TcpSocketFactory", anywhere).Install(nodes.Get(1))
    peer = ns.InetSocketAddress(interfaces.GetAddress(1), PORT).ConvertTo()
    bulk = ns.BulkSendHelper("ns3::TcpSocketFactory", peer)
    bulk.SetAttribute("MaxBytes", uint(0))
    bulk.SetAttribute("SendSize", uint(16 * 1024))
    send_apps = bulk.Install(nodes.Get(0))
    for apps in (sink_apps, send_apps):
        apps.Start(ns.Seconds(0.0))

    ns.Simulator.Stop(ns.Seconds(duration_s))
    cpu0, wall0 = time.process_time(), time.perf_counter()
    ns.Simulator.Run()
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    sink = sink_apps.Get(0).GetObject[ns.PacketSink]()
    delivered = int(sink.GetTotalRx())
    events = int(ns.Simulator.GetEventCount())
    ns.Simulator.Destroy()
    segments = delivered // MSS
    return {
        "goodput_Mbps": delivered * 8 / duration_s / 1e6,
        "segments": segments,
        "events": events,
        "cpu_s": cpu,
        "wall_s": wall,
        "segments_per_s": segments / cpu,
        "segments_per_wall_s": segments / wall,
        "events_per_segment": events / max(segments, 1),
    }


def seconds(text: str) -> float:
    for unit, scale in (("ms", 1e-3), ("us", 1e-6), ("s", 1.0)):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * scale
    return float(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", default="40ms", help="simulated time")
    parser.add_argument("--rate", default="1Gbps", help="link rate (ns-3's syntax)")
    parser.add_argument("--serve", action="store_true", help="one run per line of stdin")
    args = parser.parse_args()
    duration = seconds(args.duration)
    if not args.serve:
        print(json.dumps(simulate(duration, args.rate)))
        return
    try:
        from ns import ns  # noqa: F401  (the bindings' start-up, before any run is timed)
    except ImportError as exc:
        print(json.dumps({"error": f"ns-3's bindings do not import: {exc}"}), flush=True)
        return
    print(json.dumps({"ready": True}), flush=True)
    for _ in sys.stdin:
        print(json.dumps(simulate(duration, args.rate)), flush=True)


if __name__ == "__main__":
    main()
