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
#   deleted after their figures are read; GRID=flows: none unless asked, and
#   first keeps the first repeat's at 1 BDP).
#
# GRID=flows runs the multi-flow grid instead (default OUTDIR calibration/flows):
# several transfers side by side through one tbf, ping running meanwhile; see
# flows_grid below.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
grid=${GRID:-single}
filter=${2:-}
repeats=${REPEATS:-3}
first=${FIRST_REPEAT:-1}
keep=${PCAP:-first}
RT="chrt -f 50"
tools="ip tc iperf3 tcpdump python3 chrt"
case $grid in
single)
    out=${1:-$here/grid}
    secs=${SECONDS_PER_RUN:-4}
    ;;
flows)
    out=${1:-$here/flows}
    secs=${SECONDS_PER_RUN:-6}
    tools="$tools ping"
    # No test reads the multi-flow captures: kept only when asked (PCAP=first|all).
    keep=${PCAP:-none}
    # The CUBIC senders must be created under a cubic default (testbed.sh).
    ROOT_CC=cubic
    ;;
*)
    echo "grid.sh: GRID=$grid: expected single or flows" >&2
    exit 2
    ;;
esac
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

single_grid() {
    [ -f "$out/manifest.csv" ] ||
        echo "name,cc,rate_bps,queue_bytes,delay_ns,window,repeat,seconds,goodput_bps,sender_bps,retransmits,min_rtt_us,mean_rtt_us,max_snd_cwnd,qdisc_sent,qdisc_dropped,delayline_forwarded,delayline_dropped,delayline_late_p50_us,delayline_late_p99_us,capture,kernel,iperf3" >"$out/manifest.csv"
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
}

# --- the multi-flow grid (GRID=flows) --------------------------------------------------
#
# Several iperf3 transfers at once through the same tbf, each its own client and
# server (port 5201 + i) with its own congestion control (-C), autotuned buffers,
# all started together; ping (-i 0.01) runs during the transfer, and for a second
# before it, unloaded.  Names read FLOWS_r50m_d10ms_qQUEUE, FLOWS the senders'
# congestion controls (cubic1, cubic2, cubic4: that many CUBIC flows; bbr2;
# cubic+bbr: one of each) and QUEUE the tbf limit in bandwidth-delay products
# (125 kB at 50 Mbit/s and 20 ms).  Every run gets a fresh delay line and tbf.
# manifest.csv: one line per run: each flow's receiver goodput and
# retransmits, their sum, the ping round trips during the transfer (p50, p90,
# p99, count) and unloaded (p50), the tbf's and the delay line's counters, the
# sending namespace's default congestion control (cubic: no CUBIC sender was
# paced), the load average when the run began, and the capture kept (with PCAP=first,
# the first repeat's sender-side capture of the 1 BDP configurations, headers only,
# gzipped; none by default).

# flows_run NAME CCS MBIT QUEUE DELAY_US REPEAT KEEP: one run; CCS comma-separated.
flows_run() {
    local name=$1 ccs=$2 mbit=$3 queue=$4 dus=$5 rep=$6 keep_capture=$7
    local base=${name}_r$rep
    local load
    load=$(cut -d' ' -f1 /proc/loadavg)
    local tmp
    tmp=$(mktemp -d)
    delay "$dus" "$tmp/delayline.json"
    ip netns exec "$router" tc qdisc del dev veth-rt1 root 2>/dev/null || true
    shaper "$mbit" "$queue"
    IFS=, read -r -a algs <<<"$ccs"
    local i servers=() clients=()
    for i in "${!algs[@]}"; do
        ip netns exec "$rx" timeout $((secs + 25)) iperf3 -s -1 -B 10.200.1.2 \
            -p $((5201 + i)) >/dev/null 2>&1 &
        servers+=($!)
        pids+=($!)
    done
    ip netns exec "$tx" timeout $((secs + 25)) $RT tcpdump -i veth-tx -s 96 \
        --time-stamp-precision=nano -U -w "$tmp/tx.pcap" \
        "icmp or (tcp portrange 5201-$((5200 + ${#algs[@]})))" 2>/dev/null &
    local dump=$!
    pids+=("$dump")
    sleep 1 # everyone listening
    # The unloaded round trip first, then the transfers with ping beside them.
    ip netns exec "$tx" timeout 10 ping -i 0.01 -c 100 10.200.1.2 >"$tmp/ping_idle.txt" || true
    for i in "${!algs[@]}"; do
        # Not at real-time priority, unlike the one sender of the single-flow grid:
        # two busy senders at the delay line's priority starve it on two cores.
        ip netns exec "$tx" timeout $((secs + 15)) iperf3 -c 10.200.1.2 -B 10.200.0.1 \
            -p $((5201 + i)) -t "$secs" -C "${algs[$i]}" --json >"$tmp/flow$i.json" &
        clients+=($!)
    done
    ip netns exec "$tx" timeout $((secs + 10)) ping -i 0.01 -w "$secs" 10.200.1.2 \
        >"$tmp/ping.txt" || true
    wait "${clients[@]}" || true
    sleep 0.5
    kill -INT "$dump"
    wait "$dump" 2>/dev/null || true
    wait "${servers[@]}" 2>/dev/null || true
    local qstats
    qstats=$(qdisc_stats)
    delay 0
    local capture=-
    if [ "$keep" = all ] || { [ "$keep" = first ] && [ "$keep_capture" = 1 ]; }; then
        capture=$base.pcap.gz
        python3 "$here/headers_only.py" "$tmp/tx.pcap" "$out/$capture"
    fi
    if ! python3 - "$tmp" "${#algs[@]}" "$qstats" >"$tmp/figures" <<'PY'
import json, re, statistics, sys
tmp, n, q = sys.argv[1], int(sys.argv[2]), (sys.argv[3].split() + ["", "", ""])[:3]
goodputs, retrans = [], []
for i in range(n):
    doc = json.load(open(f"{tmp}/flow{i}.json"))
    end = doc.get("end", {})
    received = end.get("sum_received", {}).get("bytes", 0)
    if doc.get("error") or not received:
        sys.exit(f"flow {i}: {doc.get('error') or 'nothing received'}")
    goodputs.append(round(end["sum_received"]["bits_per_second"]))
    retrans.append(end.get("sum_sent", {}).get("retransmits", 0))
def rtts(path):
    return sorted(float(x) * 1e3 for x in re.findall(r"time=([0-9.]+) ms", open(path).read()))
def pct(xs, p):
    return round(xs[min(len(xs) - 1, int(p * len(xs)))]) if xs else ""
loaded, idle = rtts(f"{tmp}/ping.txt"), rtts(f"{tmp}/ping_idle.txt")
dl = json.load(open(f"{tmp}/delayline.json"))
print(",".join(str(v) for v in (
    sum(goodputs), ";".join(map(str, goodputs)), ";".join(map(str, retrans)),
    pct(loaded, 0.5), pct(loaded, 0.9), pct(loaded, 0.99), len(loaded), pct(idle, 0.5),
    q[0], q[1], dl["forwarded"], dl["dropped"],
    round(dl["late_us"]["p50"], 1), round(dl["late_us"]["p99"], 1),
)))
PY
    then
        echo "$base: failed, not recorded (load $load)"
        rm -f "$out/$capture"
        rm -rf "$tmp"
        return
    fi
    for i in "${!algs[@]}"; do cp "$tmp/flow$i.json" "$out/${base}_flow$i.iperf3.json"; done
    local default
    default=$(ip netns exec "$tx" sysctl -n net.ipv4.tcp_congestion_control)
    echo "$name,${ccs//,/+},$((mbit * 1000000)),$queue,$((dus * 1000)),$rep,$secs,$(cat "$tmp/figures"),$default,$load,$capture,$kernel,$iperf_version" >>"$out/manifest.csv"
    echo "$base: $(cut -d, -f1-3,4 "$tmp/figures") (load $load)"
    rm -rf "$tmp"
}

flows_grid() {
    [ -f "$out/manifest.csv" ] ||
        echo "name,ccs,rate_bps,queue_bytes,delay_ns,repeat,seconds,goodput_bps,flow_goodput_bps,flow_retransmits,ping_p50_us,ping_p90_us,ping_p99_us,ping_count,ping_idle_p50_us,qdisc_sent,qdisc_dropped,delayline_forwarded,delayline_dropped,delayline_late_p50_us,delayline_late_p99_us,default_cc,load1,capture,kernel,iperf3" >"$out/manifest.csv"
    local bdp=125000 # 50 Mbit/s x 20 ms
    local mix ccs qname factor bytes name rep
    for mix in cubic1:cubic cubic2:cubic,cubic cubic4:cubic,cubic,cubic,cubic bbr2:bbr,bbr \
        cubic+bbr:cubic,bbr; do
        ccs=${mix#*:}
        for qname in 0.25 0.5 1 2; do
            bytes=$(python3 -c "print(round($qname * $bdp))")
            name=${mix%%:*}_r50m_d10ms_q${qname}bdp
            [ -n "$filter" ] && [[ $name != *"$filter"* ]] && continue
            for rep in $(seq "$first" $((first + repeats - 1))); do
                factor=0
                [ "$rep" = 1 ] && [ "$qname" = 1 ] && factor=1
                flows_run "$name" "$ccs" 50 "$bytes" 10000 "$rep" "$factor"
            done
        done
    done
}

case $grid in
single) single_grid ;;
flows) flows_grid ;;
esac

# tcpdump drops privileges and leaves its files owned by its own user.
chown --reference="$here" "$out"/*
