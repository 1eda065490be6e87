# The test bed shared by capture.sh and grid.sh (sourced, not run).
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
# No traffic leaves the machine: every address lives in namespaces created here
# and always deleted (trap on EXIT).  Needs root, iproute2 (ip, tc), iperf3,
# tcpdump, ping and python3.  The caller sets $here (the calibration directory)
# and $out (where results go) before sourcing, and may set $RT (a command
# prefix, e.g. "chrt -f 50", for the delay line, iperf3 and tcpdump),
# $tools (the programs it needs, default all of the above) and $ROOT_CC.
#
# $ROOT_CC: the root namespace's default congestion control while the test bed
# stands (the namespaces take it as their default when they are created; a
# namespace can name only an algorithm the host allows to unprivileged sockets,
# and a socket created under bbr stays paced after switching to cubic, so a
# CUBIC sender must be created under a cubic default).  The root's default is
# put back when the test bed goes, whatever happens (trap on EXIT).

for tool in ${tools:-ip tc iperf3 tcpdump ping python3}; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "testbed: '$tool' not found; install it with:" \
            "apt-get install -y iproute2 iperf3 tcpdump iputils-ping python3" >&2
        exit 2
    fi
done
if [ "$(id -u)" -ne 0 ]; then
    echo "testbed: needs root (network namespaces, tc, TUN, tcpdump)" >&2
    exit 2
fi

RT=${RT:-}
tx=cpasim-cal-tx-$$
router=cpasim-cal-router-$$
rx=cpasim-cal-rx-$$
pids=()
delayline_pid=
root_cc_was=
cleanup() {
    for pid in "${pids[@]}" $delayline_pid; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    for ns in "$tx" "$router" "$rx"; do ip netns del "$ns" 2>/dev/null || true; done
    if [ -n "$root_cc_was" ]; then
        sysctl -qw net.ipv4.tcp_congestion_control="$root_cc_was" || true
    fi
}
trap cleanup EXIT INT TERM

if [ -n "${ROOT_CC:-}" ]; then
    root_cc_was=$(sysctl -n net.ipv4.tcp_congestion_control)
    sysctl -qw net.ipv4.tcp_congestion_control="$ROOT_CC"
fi

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

# delay US [STATS]: (re)start the delay line with a one-way delay of US
# microseconds (0: no delay line, packets are forwarded straight).  The
# statistics of the delay line go to STATS (default $out/delayline_<US>.json)
# when it stops: at the next call of delay.
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
    local stats=${2:-$out/delayline_$delay_us.json}
    ip netns exec "$router" timeout 900 $RT python3 "$here/delayline.py" --dev dl0 \
        --delay-us "$delay_us" --stats "$stats" &
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

# shaper MBIT [LIMIT]: tbf at MBIT Mbit/s on the router's egress towards rx,
# holding at most LIMIT bytes (default: what 100 ms at MBIT take).
shaper() {
    # A 4 KiB bucket is smaller than a GSO super-packet, so tbf cuts those into
    # MTU frames and the bottleneck really sends one frame after the other at RATE.
    local size=(latency 100ms)
    [ -n "${2:-}" ] && size=(limit "$2")
    ip netns exec "$router" tc qdisc replace dev veth-rt1 root tbf rate "${1}mbit" burst 4kb "${size[@]}"
}

# qdisc_stats: "sent_packets dropped overlimits" of the shaper since it was set.
qdisc_stats() {
    ip netns exec "$router" tc -s qdisc show dev veth-rt1 |
        sed -n 's/.*Sent [0-9]* bytes \([0-9]*\) pkt (dropped \([0-9]*\), overlimits \([0-9]*\).*/\1 \2 \3/p' | head -1
}
