# shellcheck shell=bash
# tests/bench/wan/netns.sh: an emulated wide-area link between two network
# namespaces, for the WAN benchmark (tests/bench/wan.sh) and its self-check
# (tests/bench/wan/selfcheck.sh).  Sourced, not run.  Needs root.
#
#	wan_init                 create the namespaces $WAN_C (client) and
#	                         $WAN_S (server), loopback up, pick the link
#	                         backend (netem if the kernel has it, else the
#	                         wanlink forwarder, built here with cc)
#	wan_link RTT_MS RATE_MBIT LOSS_PCT [GE]
#	                         (re)build the link: client 10.77.0.1, server
#	                         10.77.0.2 (/24, inside the namespaces only);
#	                         RTT_MS split evenly between the directions,
#	                         RATE_MBIT 0 = no bottleneck, loss in the
#	                         server->client (data) direction only unless
#	                         WAN_LOSS_DIR=both; GE "P,R" (percent) selects
#	                         Gilbert-Elliott bursts instead of LOSS_PCT
#	                         (wanlink backend only); queue bound
#	                         WAN_LIMIT bytes (default one BDP)
#	wan_set_cc CC            sender congestion control on the server
#	                         namespace's route (ip route ... congctl CC)
#	wan_unlink               remove the link (namespaces stay)
#	wan_fini                 end every process left in the namespaces,
#	                         delete them (idempotent; call from a trap)
#	in_c CMD... / in_s CMD...  run a command in the client / server ns
#
# The host's own interfaces, addresses and routes are never touched: the
# TUN devices (or the veth pair) are created directly inside the
# namespaces, and the only addresses are 10.77.0.1 and 10.77.0.2 there.

WAN_TAG=${WAN_TAG:-$$}
WAN_C=bmwan-c-$WAN_TAG
WAN_S=bmwan-s-$WAN_TAG
WAN_DEV=bmwan0
WAN_CIP=10.77.0.1
WAN_SIP=10.77.0.2
WAN_MTU=${WAN_MTU:-1500}
WAN_LOSS_DIR=${WAN_LOSS_DIR:-ba}
WAN_BACKEND=${WAN_BACKEND:-}
WAN_PID=""
WAN_LOG=${WAN_LOG:-/dev/null}
WAN_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

in_c() { ip netns exec "$WAN_C" "$@"; }
in_s() { ip netns exec "$WAN_S" "$@"; }

wan_die() { echo "netns.sh: $*" >&2; exit 1; }

# wan_build_bin: compile wanlink (and the tcpcc preload library) into
# $WAN_BIN (default $WAN_DIR/../out/bin) if missing or older than the source.
wan_build_bin() {
	WAN_BIN=${WAN_BIN:-$WAN_DIR/../out/bin}
	mkdir -p "$WAN_BIN" || wan_die "mkdir $WAN_BIN"
	if [ ! -x "$WAN_BIN/wanlink" ] ||
	    [ "$WAN_DIR/wanlink.c" -nt "$WAN_BIN/wanlink" ] ||
	    [ "$WAN_DIR/wanmodel.h" -nt "$WAN_BIN/wanlink" ]; then
		cc -O2 -Wall -Wextra -D_GNU_SOURCE -o "$WAN_BIN/wanlink" \
		    "$WAN_DIR/wanlink.c" || wan_die "cc wanlink.c"
	fi
	if [ ! -e "$WAN_BIN/tcpcc.so" ] ||
	    [ "$WAN_DIR/../tcpcc.c" -nt "$WAN_BIN/tcpcc.so" ]; then
		cc -O2 -Wall -Wextra -D_GNU_SOURCE -shared -fPIC \
		    -o "$WAN_BIN/tcpcc.so" "$WAN_DIR/../tcpcc.c" -ldl ||
		    wan_die "cc tcpcc.c"
	fi
}

wan_init() {
	[ "$(id -u)" = 0 ] || wan_die "needs root (ip netns, TUN)"
	command -v ip >/dev/null || wan_die "no ip (iproute2)"
	wan_build_bin
	ip netns add "$WAN_C" || wan_die "ip netns add $WAN_C"
	ip netns add "$WAN_S" || wan_die "ip netns add $WAN_S"
	in_c ip link set lo up
	in_s ip link set lo up
	if [ -z "$WAN_BACKEND" ]; then
		if in_c tc qdisc add dev lo root netem delay 1ms 2>/dev/null
		then
			in_c tc qdisc del dev lo root
			WAN_BACKEND=netem
		else
			WAN_BACKEND=wanlink
		fi
	fi
}

# wan_addr NS ADDR: address, MTU, queue length, up.
wan_addr() {
	ip netns exec "$1" ip addr add "$2/24" dev "$WAN_DEV" &&
	ip netns exec "$1" ip link set dev "$WAN_DEV" mtu "$WAN_MTU" \
	    txqueuelen 1000 up
}

# wan_set_cc CC: congestion control of every TCP connection of the server
# namespace over the link, through the route's congctl attribute (it
# overrides the per-socket choice, and needs no privilege in the server
# process); kept across wan_link.  Empty CC: the kernel default.
wan_set_cc() {
	WAN_CC=$1
	[ -n "$WAN_CC" ] || return 0
	in_s ip link show "$WAN_DEV" >/dev/null 2>&1 || return 0
	in_s ip route replace 10.77.0.0/24 dev "$WAN_DEV" proto kernel \
	    scope link src "$WAN_SIP" congctl "$WAN_CC"
}

wan_link() {
	local rtt=$1 rate=$2 loss=$3 ge=${4:-} one
	wan_unlink
	one=$(awk -v r="$rtt" 'BEGIN { printf "%.3f", r / 2 }')
	if [ "$WAN_BACKEND" = netem ]; then
		wan_link_netem "$one" "$rate" "$loss" || return 1
	else
		local args=(-a "$WAN_C" -b "$WAN_S" -d "$WAN_DEV"
		    --delay "$one" --rate "$rate" --mtu "$WAN_MTU"
		    --loss-dir "$WAN_LOSS_DIR" --seed "${WAN_SEED:-1}")
		if [ -n "$ge" ]; then
			args+=(--ge "$ge")
		else
			args+=(--loss "$loss")
		fi
		[ -n "${WAN_LIMIT:-}" ] && args+=(--limit "$WAN_LIMIT")
		"$WAN_BIN/wanlink" "${args[@]}" >>"$WAN_LOG" 2>&1 &
		WAN_PID=$!
		for _ in $(seq 100); do
			in_c ip link show "$WAN_DEV" >/dev/null 2>&1 &&
			    in_s ip link show "$WAN_DEV" >/dev/null 2>&1 && break
			kill -0 "$WAN_PID" 2>/dev/null || break
			sleep 0.05
		done
		kill -0 "$WAN_PID" 2>/dev/null ||
		    { WAN_PID=""; echo "netns.sh: wanlink failed" >&2; return 1; }
	fi
	wan_addr "$WAN_C" "$WAN_CIP" && wan_addr "$WAN_S" "$WAN_SIP" &&
	    wan_set_cc "${WAN_CC:-}"
}

# wan_link_netem ONEWAY_MS RATE_MBIT LOSS_PCT: a veth pair created inside
# the namespaces, netem on each end (delay, rate, limit in packets, loss on
# the server end, i.e. the data direction, unless WAN_LOSS_DIR=both).
wan_link_netem() {
	local one=$1 rate=$2 loss=$3 lim q end l
	# gso_max_segs 1: one frame per packet, as wanlink and a real path
	# see them (netem would otherwise drop whole GSO super-packets).
	ip link add "$WAN_DEV" netns "$WAN_C" gso_max_segs 1 type veth \
	    peer name "$WAN_DEV" netns "$WAN_S" gso_max_segs 1 || return 1
	lim=${WAN_LIMIT:-}
	if [ -z "$lim" ]; then
		lim=$(awk -v r="$rate" -v o="$one" \
		    'BEGIN { b = r * 1e6 / 8 * 2 * o / 1000; if (b < 65536) b = 65536; printf "%d", b }')
	fi
	# netem's limit counts packets; its queue also holds the delayed
	# ones, so add the packets in flight over the one-way delay.
	q=$(awk -v b="$lim" -v r="$rate" -v o="$one" -v m="$WAN_MTU" \
	    'BEGIN { f = (r > 0 ? r : 10000) * 1e6 / 8 * o / 1000; printf "%d", (b + f) / m + 100 }')
	for end in "$WAN_C" "$WAN_S"; do
		l=0
		if [ "$end" = "$WAN_S" ] || [ "$WAN_LOSS_DIR" = both ]; then
			l=$loss
		fi
		# shellcheck disable=SC2046
		ip netns exec "$end" tc qdisc add dev "$WAN_DEV" root netem \
		    delay "${one}ms" limit "$q" loss "${l}%" \
		    $( [ "$rate" != 0 ] && echo rate "${rate}mbit" ) || return 1
	done
}

wan_unlink() {
	if [ -n "$WAN_PID" ]; then
		kill -TERM "$WAN_PID" 2>/dev/null
		wait "$WAN_PID" 2>/dev/null
		WAN_PID=""
	fi
	if [ "$WAN_BACKEND" = netem ]; then
		in_c ip link del "$WAN_DEV" 2>/dev/null
	fi
	return 0
}

# wan_kill_ns NS: end the processes this run started in namespace NS.
wan_kill_ns() {
	local pids
	for _ in 1 2 3 4 5 6 7 8 9 10; do
		pids=$(ip netns pids "$1" 2>/dev/null)
		[ -z "$pids" ] && return 0
		# shellcheck disable=SC2086
		kill -TERM $pids 2>/dev/null
		sleep 0.2
	done
	pids=$(ip netns pids "$1" 2>/dev/null)
	# shellcheck disable=SC2086
	[ -n "$pids" ] && kill -KILL $pids 2>/dev/null
	return 0
}

wan_fini() {
	wan_unlink
	local ns
	for ns in "$WAN_C" "$WAN_S"; do
		[ -e "/run/netns/$ns" ] || continue
		wan_kill_ns "$ns"
		ip netns del "$ns" 2>/dev/null
	done
	return 0
}

# wan_describe: one line for table headers.
wan_describe() {
	if [ "$WAN_BACKEND" = netem ]; then
		echo "veth + netem ($(uname -r))"
	else
		echo "TUN forwarder tests/bench/wan/wanlink.c, MTU $WAN_MTU, loss in ${WAN_LOSS_DIR/ba/server->client} direction(s)"
	fi
}
