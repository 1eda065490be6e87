#!/usr/bin/env bash
# The capture grid: real Linux TCP over the test bed of testbed.sh, a grid of
# configurations (congestion control x iperf3 -w x one-way delay x tbf rate x
# tbf queue limit), each run REPEATS times.
#
# Every run gets a fresh delay line (its own statistics), a fresh tbf (its own
# drop counter) and a sender-side capture (tcpdump -s 96, cut to the
# headers and gzip-compressed by headers_only.py).
# The delay line, iperf3 and tcpdump run at real-time priority (chrt -f 50):
# the machine may be busy and a late user-space delay line lengthens the round
# trip.  One line per run goes to manifest.csv; calibration/report.py turns
# the repeats into medians and spreads.
#
# Usage: calibration/grid.sh [OUTDIR] [FILTER]   (default calibration/grid;
#   FILTER: only configurations whose name contains it)
#   SECONDS_PER_RUN (default 4), REPEATS (default 3), FIRST_REPEAT (default 1;
#   more repeats of a configuration whose spread is large are appended to the
#   manifest with FIRST_REPEAT=4 and a FILTER), PCAP=all|first
#   (default first: keep the capture of the first repeat only, the others are
#   deleted after their figures are read).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/grid}
filter=${2:-}
secs=${SECONDS_PER_RUN:-4}
repeats=${REPEATS:-3}
first=${FIRST_REPEAT:-1}
keep=${PCAP:-first}
RT="chrt -f 50"
tools="ip tc iperf3 tcpdump python3 chrt"
source "$here/testbed.sh"

# run NAME CC MBIT QUEUE DELAY_US WINDOW REPEAT
run() {
    local name=$1 cc=$2 mbit=$3 queue=$4 dus=$5 window=$6 rep=$7
    local base=${name}_r$rep
    local tmp
    tmp=$(mktemp -d)
    # The namespace default can only name an algorithm the host allows to
    # unprivileged sockets; iperf3 -C sets it on the socket in any case.  The
    # default matters all the same: a socket created under bbr stays paced after
    # -C switches it (pacing.sh), so a cubic run is paced when the previous run
    # left bbr as the default.  The evidence step reads it from the capture.
    ip netns exec "$tx" sysctl -qw net.ipv4.tcp_congestion_control="$cc" 2>/dev/null || true
    delay "$dus" "$tmp/delayline.json"
    ip netns exec "$router" tc qdisc del dev veth-rt1 root 2>/dev/null || true
    shaper "$mbit" "$queue"
    ip netns exec "$rx" timeout $((secs + 20)) $RT iperf3 -s -1 -B 10.200.1.2 >/dev/null 2>&1 &
    local server=$!
    pids+=("$server")
    ip netns exec "$tx" timeout $((secs + 20)) $RT tcpdump -i veth-tx -s 96 \
        --time-stamp-precision=nano -U -w "$tmp/tx.pcap" tcp port 5201 2>/dev/null &
    local dump=$!
    pids+=("$dump")
    sleep 1 # everyone listening
    local wflag=()
    [ "$window" != - ] && wflag=(-w "$window")
    ip netns exec "$tx" timeout $((secs + 15)) $RT iperf3 -c 10.200.1.2 -B 10.200.0.1 \
        -t "$secs" -C "$cc" "${wflag[@]}" --json >"$out/$base.iperf3.json" || true
    sleep 0.5
    kill -INT "$dump"
    wait "$dump" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
    local qstats
    qstats=$(qdisc_stats)
    delay 0
    local capture=-
    if [ "$keep" = all ] || [ "$rep" = 1 ]; then
        capture=$base.pcap.gz
        python3 "$here/headers_only.py" "$tmp/tx.pcap" "$out/$capture"
    fi
    python3 - "$out/$base.iperf3.json" "$tmp/delayline.json" "$qstats" >"$tmp/figures" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
end = doc.get("end", {})
stream = (end.get("streams") or [{}])[0].get("sender", {})
dl = json.load(open(sys.argv[2]))
q = (sys.argv[3].split() + ["", "", ""])[:3]
print(",".join(str(v) for v in (
    round(end.get("sum_received", {}).get("bits_per_second", 0)),
    round(end.get("sum_sent", {}).get("bits_per_second", 0)),
    end.get("sum_sent", {}).get("retransmits", ""),
    stream.get("min_rtt", ""), stream.get("mean_rtt", ""), stream.get("max_snd_cwnd", ""),
    q[0], q[1], dl["forwarded"], dl["dropped"],
    round(dl["late_us"]["p50"], 1), round(dl["late_us"]["p99"], 1),
)))
PY
    echo "$name,$cc,$((mbit * 1000000)),$queue,$((dus * 1000)),$window,$rep,$secs,$(cat "$tmp/figures"),$capture,$kernel,$iperf_version" >>"$out/manifest.csv"
    echo "$base: $(cut -d, -f1,3 "$tmp/figures")"
    rm -rf "$tmp"
}

[ -f "$out/manifest.csv" ] ||
    echo "name,cc,rate_bps,queue_bytes,delay_ns,window,repeat,seconds,goodput_bps,sender_bps,retransmits,min_rtt_us,mean_rtt_us,max_snd_cwnd,qdisc_sent,qdisc_dropped,delayline_forwarded,delayline_dropped,delayline_late_p50_us,delayline_late_p99_us,capture,kernel,iperf3" >"$out/manifest.csv"

# config CC MBIT QUEUE DELAY_MS WINDOW: all repeats of one configuration.
# QUEUE is "15k" (below the bandwidth-delay product) or "2bdp".
config() {
    local cc=$1 mbit=$2 queue=$3 dms=$4 window=$5
    local bytes=15000
    [ "$queue" = 2bdp ] && bytes=$((2 * mbit * 1000000 / 8 * 2 * dms / 1000))
    local w=${window,,}
    [ "$window" = - ] && w=auto
    local name=${cc}_r${mbit}m_d${dms}ms_q${queue}_w$w
    [ -n "$filter" ] && [[ $name != *"$filter"* ]] && return
    for rep in $(seq "$first" $((first + repeats - 1))); do run "$name" "$cc" "$mbit" "$bytes" $((dms * 1000)) "$window" "$rep"; done
}

# Autotuned buffers: every congestion control, both delays, both rates, a
# queue below and one above the bandwidth-delay product (drops in the first).
for cc in cubic bbr reno; do
    for dms in 5 10; do
        for mbit in 20 50; do
            for queue in 15k 2bdp; do config "$cc" "$mbit" "$queue" "$dms" -; done
        done
    done
done
# The window sweep: -w from far below to far above the bandwidth-delay
# product (125 kB at 50 Mbit/s and 20 ms), deep queue, so small windows are
# window-limited and large ones rate-limited.
for w in 16K 32K 64K 256K 1M 4M; do config cubic 50 2bdp 10 "$w"; done
for w in 16K 64K; do config cubic 20 2bdp 5 "$w"; done
for cc in bbr reno; do config "$cc" 50 2bdp 10 64K; done

# tcpdump drops privileges and leaves its files owned by its own user.
chown --reference="$here" "$out"/*
