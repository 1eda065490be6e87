#!/usr/bin/env bash
# Re-create the real Linux TCP captures in calibration/captures/.
#
# Three network namespaces in a line, tx -- router -- rx, joined by veth pairs
# (tx 10.200.0.1/24, router 10.200.0.254 and 10.200.1.254, rx 10.200.1.2/24).
# The router shapes its egress towards rx with a tc token bucket (tbf) at a
# known rate, so the bottleneck queue sits between the two capture points.
# Propagation delay (netem is not available here) comes from delayline.py: the
# router sends every packet that arrives on a veth into the TUN device dl0
# (policy routing on the input interface); the delay line holds it for the
# one-way delay and writes it back, and the kernel routes it on.  Data and ACKs
# both pass, so the round trip grows by twice the delay.
#
# tcpdump listens on tx's veth (sender side: data before the queue, ACKs after)
# and, for the runs without delay, also on rx's veth, keeping only headers
# (-s 128) at nanosecond precision.  No traffic leaves the machine: every
# address lives in namespaces this script creates and always deletes (trap on
# EXIT); every run is bounded by timeouts.
#
# Needs root, iproute2 (ip, tc), iperf3, tcpdump, ping and python3.
# Usage: calibration/capture.sh [OUTDIR]     (default: calibration/captures)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/captures}

for tool in ip tc iperf3 tcpdump ping python3; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "capture.sh: '$tool' not found; install it with:" \
            "apt-get install -y iproute2 iperf3 tcpdump iputils-ping python3" >&2
        exit 2
    fi
done
if [ "$(id -u)" -ne 0 ]; then
    echo "capture.sh: needs root (network namespaces, tc, TUN, tcpdump)" >&2
    exit 2
fi

tx=cpasim-cal-tx-$$
router=cpasim-cal-router-$$
rx=cpasim-cal-rx-$$
pids=()
delayline_pid=
cleanup() {
    for pid in "${pids[@]}" $delayline_pid; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    for ns in "$tx" "$router" "$rx"; do ip netns del "$ns" 2>/dev/null || true; done
}
trap cleanup EXIT INT TERM

for ns in "$tx" "$router" "$rx"; do
    ip netns add "$ns"
    ip -n "$ns" link set lo up
done
ip link add veth-tx netns "$tx" type veth peer name veth-rt0 netns "$router"
ip link add veth-rx netns "$rx" type veth peer name veth-rt1 netns "$router"
ip -n "$tx" addr add 10.200.0.1/24 dev veth-tx
ip -n "$router" addr add 10.200.0.254/24 dev veth-rt0
ip -n "$router" addr add 10.200.1.254/24 dev veth-rt1
ip -n "$rx" addr add 10.200.1.2/24 dev veth-rx
for pair in "$tx veth-tx" "$router veth-rt0" "$router veth-rt1" "$rx veth-rx"; do
    set -- $pair
    ip -n "$1" link set "$2" up
done
ip -n "$tx" route add default via 10.200.0.254
ip -n "$rx" route add default via 10.200.1.254
ip netns exec "$router" sysctl -qw net.ipv4.ip_forward=1
# Packets come back out of dl0 with tx's or rx's source address: no reverse-path check.
ip netns exec "$router" sysctl -qw net.ipv4.conf.all.rp_filter=0
ip netns exec "$router" sysctl -qw net.ipv4.conf.default.rp_filter=0
mkdir -p "$out"

kernel=$(uname -r)
iperf_version=$(iperf3 --version | head -1 | cut -d' ' -f2)
cc=$(ip netns exec "$tx" sysctl -n net.ipv4.tcp_congestion_control)

# delay US: (re)start the delay line with a one-way delay of US microseconds
# (0: no delay line, packets are forwarded straight).  Statistics of the
# previous delay line go to $out/delayline_<US>.json when it stops.
delay_us=0
delay() {
    if [ -n "$delayline_pid" ]; then
        kill "$delayline_pid"
        wait "$delayline_pid" 2>/dev/null || true
        delayline_pid=
        ip -n "$router" rule del iif veth-rt0 lookup 100 2>/dev/null || true
        ip -n "$router" rule del iif veth-rt1 lookup 100 2>/dev/null || true
    fi
    delay_us=$1
    [ "$delay_us" = 0 ] && return
    ip netns exec "$router" timeout 900 python3 "$here/delayline.py" --dev dl0 \
        --delay-us "$delay_us" --stats "$out/delayline_$delay_us.json" &
    delayline_pid=$!
    for _ in $(seq 100); do
        ip -n "$router" link show dl0 >/dev/null 2>&1 && break
        sleep 0.05
    done
    ip -n "$router" link set dl0 up
    ip netns exec "$router" sysctl -qw net.ipv4.conf.dl0.rp_filter=0
    ip -n "$router" route replace default dev dl0 table 100
    ip -n "$router" rule add iif veth-rt0 lookup 100
    ip -n "$router" rule add iif veth-rt1 lookup 100
}

# shaper MBIT: tbf at MBIT Mbit/s on the router's egress towards rx.
shaper() {
    # A 4 KiB bucket is smaller than a GSO super-packet, so tbf cuts those into
    # MTU frames and the bottleneck really sends one frame after the other at RATE.
    ip netns exec "$router" tc qdisc replace dev veth-rt1 root tbf rate "${1}mbit" burst 4kb latency 100ms
}

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
