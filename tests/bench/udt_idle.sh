#!/bin/bash
# tests/bench/udt_idle.sh: CPU of biomirror's GridFTP engine while its UDT
# data connections are open but slow: a real globus-gridftp-server
# (-dc-whitelist udt,gsi,tcp) on 127.0.0.1 sends one 512 MiB file in MODE
# E over UDT (--streams, default 1) and is then
#	idle       frozen (SIGSTOP) for SECONDS: the sockets stay open, no
#	           byte comes (a stalled path, a server busy elsewhere)
#	throttled  stopped and continued in turn (90 ms stopped, 10 ms
#	           running) for SECONDS: a slow transfer
# and the client's CPU time (utime + stime from /proc, its main thread
# apart from libudt's) over those SECONDS is printed, per binary.  Never
# part of `make check`.  Run from the worktree root, as root:
#
#	tests/bench/udt_idle.sh [--runs N] [--seconds S] [--streams N]
#	    [--cases idle,throttled] [--baseline OLD]
#
# With --baseline, OLD (a biomirror binary with its libbiomirror-udt.so
# beside it) and ./biomirror run alternately, N rounds each; the table
# gives every raw figure and the medians.  Raw rows also go to
# tests/bench/out/udt_idle-DATE.csv.
set -u
export LC_ALL=C

RUNS=3
CASES="idle throttled"
STREAMS=1
SECS=10
OLD=""
while [ $# -gt 0 ]; do
	case $1 in
	--runs) RUNS=$2; shift 2 ;;
	--seconds) SECS=$2; shift 2 ;;
	--baseline) OLD=$2; shift 2 ;;
	--streams) STREAMS=$2; shift 2 ;;
	--cases) CASES=$(echo "$2" | tr , ' '); shift 2 ;;
	*) echo "usage: $0 [--runs N] [--seconds S] [--streams N] [--cases idle,throttled] [--baseline OLD]" >&2; exit 2 ;;
	esac
done
NEW=$PWD/biomirror
[ -x "$NEW" ] || { echo "no ./biomirror (make first)" >&2; exit 2; }
. "$(dirname "$0")/../functional/lib.sh"
bm_setup
HZ=$(getconf CLK_TCK)
OUT=$(cd "$(dirname "$0")" && pwd)/out
mkdir -p "$OUT"
CSV=$OUT/udt_idle-$(date -u +%Y%m%dT%H%M%SZ).csv
echo "binary,case,round,total_s,main_s,others_s" > "$CSV"

mkdir -p "$T/up"
head -c $((512 << 20)) /dev/zero > "$T/up/big.bin"
touch -d '2024-01-01 00:00:00 UTC' "$T/up/big.bin"
chmod -R a+rX "$T/up"
GRIDFTP_ARGS="-dc-whitelist udt,gsi,tcp" start_gridftp "$T/up" 50
kdir=$(dirname "$GRIDFTP_LOG")
kpid=$(echo "$BM_SERVERS" | tr ' ' '\n' | awk -F: -v d="$kdir" '$3 == d { print $2 }')

# ticks PID: "total main" clock ticks of PID (all threads; thread PID).
ticks() {
	local t m
	t=$(awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null) || return 1
	m=$(awk '{ print $14 + $15 }' "/proc/$1/task/$1/stat" 2>/dev/null) || return 1
	echo "$t $m"
}

# one BIN CASE ROUND: one sync, measured while the server is slowed.
one() {
	local bin=$1 kase=$2 round=$3 pid pids a b end
	rm -rf "$T/mirror" "$T/state"
	cat > "$T/bm.conf" <<EOF
[up]
source = $GRIDFTP_URL
dest = $T/mirror
ftp_mode = extended
transport = udt
streams = $STREAMS
retries = 0
stall_timeout = $((SECS + 30))
EOF
	"$bin" -c "$T/bm.conf" --state-dir "$T/state" -q sync up \
	    > /dev/null 2> "$T/err.log" &
	pid=$!
	for _ in $(seq 1 4000); do
		[ -n "$(find "$T/mirror" -name '.biomirror-tmp.*' -size +8M \
		    -print -quit 2>/dev/null)" ] && break
		sleep 0.005
	done
	pids=$(bm_server_pids gridftp "$kpid" "$kdir" | grep -vx "$kpid")
	# shellcheck disable=SC2086
	kill -STOP $pids
	sleep 1
	a=$(ticks "$pid") || { cat "$T/err.log" >&2; echo "run ended early" >&2; return 1; }
	if [ "$kase" = idle ]; then
		sleep "$SECS"
	else
		end=$(( $(date +%s) + SECS ))
		while [ "$(date +%s)" -lt "$end" ]; do
			# shellcheck disable=SC2086
			kill -CONT $pids; sleep 0.01; kill -STOP $pids; sleep 0.09
		done
	fi
	b=$(ticks "$pid") || { echo "run ended early" >&2; return 1; }
	# shellcheck disable=SC2086
	kill -CONT $pids
	wait "$pid" || { cat "$T/err.log" >&2; echo "sync failed" >&2; return 1; }
	set -- $a $b
	echo "$(basename "$(dirname "$bin")")/$(basename "$bin"),$kase,$round,$(
	    python3 -c "h=$HZ; print('%.2f,%.2f,%.2f' % (($3-$1)/h, ($4-$2)/h, ($3-$1-$4+$2)/h))")" |
	    tee -a "$CSV"
}

echo "# load before: $(uptime)"
for r in $(seq 1 "$RUNS"); do
	for kase in $CASES; do
		[ -n "$OLD" ] && one "$OLD" "$kase" "$r"
		one "$NEW" "$kase" "$r"
	done
done
echo "# load after: $(uptime)"
python3 - "$CSV" "$SECS" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
print("# CPU seconds over %s s (median of rounds; raw in %s)" % (sys.argv[2], sys.argv[1]))
print("| binary | case | total | main thread | libudt threads | raw totals |")
print("|---|---|---|---|---|---|")
keys = []
for r in rows:
    k = (r["binary"], r["case"])
    if k not in keys:
        keys.append(k)
for k in keys:
    rs = [r for r in rows if (r["binary"], r["case"]) == k]
    med = lambda f: statistics.median(float(r[f]) for r in rs)
    print("| %s | %s | %.2f | %.2f | %.2f | %s |" % (k[0], k[1], med("total_s"),
        med("main_s"), med("others_s"), " ".join(r["total_s"] for r in rs)))
PY
stop_servers
