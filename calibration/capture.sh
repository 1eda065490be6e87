#!/usr/bin/env bash
# Re-create the real Linux TCP captures in calibration/captures/.
#
# The test bed (tx -- router -- rx namespaces, tbf on the router, the delay line)
# is set up by testbed.sh.
#
# tcpdump listens on tx's veth (sender side: data before the queue, ACKs after)
# and, for the runs without delay, also on rx's veth, keeping only headers
# (-s 128) at nanosecond precision.  Every run is bounded by timeouts.
#
# Needs root, iproute2 (ip, tc), iperf3, tcpdump, ping and python3.
# Usage: calibration/capture.sh [OUTDIR]     (default: calibration/captures)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/captures}

source "$here/testbed.sh"
cc=$(ip netns exec "$tx" sysctl -n net.ipv4.tcp_congestion_control)

# probe: ping round trips through the current delay line, unshaped (one line of delayline.csv).
probe() {
    ip netns exec "$router" tc qdisc del dev veth-rt1 root 2>/dev/null || true
    local stats
    stats=$(ip netns exec "$tx" timeout 30 ping -c 500 -i 0.005 -s 56 -q 10.200.1.2 | tail -1)
    # rtt min/avg/max/mdev = a/b/c/d ms
    stats=${stats#*= }
    stats=${stats% ms*}
    echo "ping,$delay_us,${stats//\//,},,," >>"$out/delayline.csv"
}

# flood RATE: iperf3 UDP at RATE (1400-byte datagrams, 2 s) through the current
# delay line, unshaped: how many packets per second it forwards.
flood() {
    ip netns exec "$router" tc qdisc del dev veth-rt1 root 2>/dev/null || true
    ip netns exec "$rx" timeout 20 iperf3 -s -1 -B 10.200.1.2 >/dev/null 2>&1 &
    local server=$!
    sleep 0.5
    local doc
    doc=$(ip netns exec "$tx" timeout 20 iperf3 -c 10.200.1.2 -B 10.200.0.1 -u -b "$1" -l 1400 -t 2 --json)
    wait "$server" 2>/dev/null || true
    DOC=$doc python3 -c '
import json, os, sys
rate, delay, csv = sys.argv[1:]
s = json.loads(os.environ["DOC"])["end"]["sum"]
sent, lost, secs = s["packets"], s["lost_packets"], s["seconds"]
with open(csv, "a") as f:
    f.write(f"udp {rate},{delay},,,,,{sent / secs:.0f},{(sent - lost) / secs:.0f},"
            f"{100 * lost / max(sent, 1):.2f}\n")
' "$1" "$delay_us" "$out/delayline.csv"
}

# capture NAME MBIT WINDOW SECONDS SIDES
#   MBIT: tbf rate in Mbit/s; WINDOW: iperf3 -w value or "-" for the kernel
#   default; SIDES: "tx" or "tx rx".  Writes NAME_<side>.pcap, NAME.iperf3.json
#   and a line per capture in manifest.csv.
capture() {
    local name=$1 mbit=$2 window=$3 secs=$4 sides=$5
    shaper "$mbit"
    ip netns exec "$rx" timeout $((secs + 20)) iperf3 -s -1 -B 10.200.1.2 >/dev/null 2>&1 &
    local server=$!
    pids+=("$server")
    local dumps=()
    for side in $sides; do
        local ns=$tx
        [ "$side" = rx ] && ns=$rx
        ip netns exec "$ns" timeout $((secs + 20)) tcpdump -i "veth-$side" -s 128 \
            --time-stamp-precision=nano -U -w "$out/${name}_$side.pcap" tcp port 5201 2>/dev/null &
        dumps+=($!)
        pids+=($!)
    done
    sleep 1 # everyone listening

    local wflag=()
    [ "$window" != - ] && wflag=(-w "$window")
    ip netns exec "$tx" timeout $((secs + 15)) iperf3 -c 10.200.1.2 -B 10.200.0.1 -t "$secs" \
        "${wflag[@]}" --json >"$out/$name.iperf3.json"
    sleep 0.5
    kill -INT "${dumps[@]}"
    wait "${dumps[@]}" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
    for side in $sides; do
        echo "${name}_$side.pcap,$side,$((mbit * 1000000)),$window,$((delay_us * 1000)),$secs,$kernel,$iperf_version,$cc" >>"$out/manifest.csv"
        echo "$name: tbf $mbit Mbit/s, window $window, delay $delay_us us: $(stat -c %s "$out/${name}_$side.pcap") bytes ($side)"
    done
}

echo "name,side,tbf_rate_bps,window,delay_ns,seconds,kernel,iperf3,cc" >"$out/manifest.csv"
echo "test,delay_us,rtt_min_ms,rtt_avg_ms,rtt_max_ms,rtt_mdev_ms,sent_pps,received_pps,lost_percent" >"$out/delayline.csv"

# The straight path: what a ping and a capture see with no delay line.
delay 0
probe
capture tbf20m 20 - 2 "tx rx"
capture tbf50m_w32k 50 32K 1 "tx rx"
capture tbf100m 100 - 1 "tx rx"

# With propagation delay: windows from below to above the bandwidth-delay
# product, so some runs are window-limited and some rate-limited.
for d in 1000 5000; do
    delay "$d"
    probe
    for mbit in 20 50 100; do
        for w in 32K 64K 256K; do
            secs=2
            [ "$mbit" = 100 ] && secs=1
            capture "d$((d / 1000))ms_tbf${mbit}m_w${w,,}" "$mbit" "$w" "$secs" tx
        done
    done
done

# What the delay line sustains: UDP floods at rising rates, 1 ms delay.
delay 1000
for rate in 50M 100M 200M 400M; do flood "$rate"; done
probe
delay 0
# tcpdump drops privileges and leaves its files owned by its own user.
chown --reference="$here" "$out"/*
