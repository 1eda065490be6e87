#!/usr/bin/env bash
# Does Linux pace a CUBIC or Reno socket?  It depends on the socket's history:
# internal pacing (sk_pacing_status) is switched on by BBR's init and never
# reset, so a socket created while BBR is the namespace's default congestion
# control stays paced after iperf3 -C switches it to another algorithm.
#
# Four 2 s transfers over the test bed of testbed.sh (50 Mbit/s tbf with a
# 15 kB queue, 10 ms one way): -C cubic and -C reno, each with the sending
# namespace's default set to bbr and to reno.  Sender-side captures (headers
# only, gzipped) and iperf3 reports go to OUTDIR; the evidence step of
# `cpasim calibrate fit` tells the paced captures from the others
# (tests/test_calibrate_evidence.py).
#
# Usage: calibration/pacing.sh [OUTDIR]   (default calibration/pacing; needs root)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/pacing}
RT="chrt -f 50"
tools="ip tc iperf3 tcpdump python3 chrt"
source "$here/testbed.sh"

# one NAME DEFAULT CC: a transfer with -C CC from a namespace whose default is DEFAULT.
one() {
    local name=$1 default=$2 cc=$3
    local tmp
    tmp=$(mktemp -d)
    ip netns exec "$tx" sysctl -qw net.ipv4.tcp_congestion_control="$default"
    delay 10000 "$tmp/delayline.json"
    ip netns exec "$router" tc qdisc del dev veth-rt1 root 2>/dev/null || true
    shaper 50 15000
    ip netns exec "$rx" timeout 20 $RT iperf3 -s -1 -B 10.200.1.2 >/dev/null 2>&1 &
    local server=$!
    pids+=("$server")
    ip netns exec "$tx" timeout 20 $RT tcpdump -i veth-tx -s 96 --time-stamp-precision=nano \
        -U -w "$tmp/tx.pcap" tcp port 5201 2>/dev/null &
    local dump=$!
    pids+=("$dump")
    sleep 1 # everyone listening
    ip netns exec "$tx" timeout 15 $RT iperf3 -c 10.200.1.2 -B 10.200.0.1 -t 2 -C "$cc" \
        --json >"$out/$name.iperf3.json" || true
    sleep 0.5
    kill -INT "$dump"
    wait "$dump" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
    delay 0
    python3 "$here/headers_only.py" "$tmp/tx.pcap" "$out/$name.pcap.gz"
    echo "$name: namespace default $default, -C $cc"
    rm -rf "$tmp"
}

one cubic_defbbr bbr cubic
one cubic_defreno reno cubic
one reno_defbbr bbr reno
one reno_defreno reno reno
chown --reference="$here" "$out"/*
