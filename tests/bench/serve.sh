#!/bin/bash
# tests/bench/serve.sh: on-demand loopback benchmark of bm:// (biomirror
# serve, TCP data connections) against rsync's daemon (rsync -a
# rsync://) and biomirror over HTTP from nginx.  Never part of `make
# check`.  Run from the worktree root (./biomirror, or BM=...):
#
#	tests/bench/serve.sh             # full: 5,000 files of 1-32 KiB and
#	                                 # 8 x 256 MiB, medians of 3
#	tests/bench/serve.sh --quick     # smoke test: 200 small files,
#	                                 # 2 x 4 MiB, 1 run
#	tests/bench/serve.sh --runs 5 --nobig   # tree A only
#	tests/bench/serve.sh --bigonly --baseline OLD   # tree B only, OLD's
#	                                 # server and client as tool "old"
#	tests/bench/serve.sh --dir /dev/shm   # every tree, copy and state on
#	                                 # tmpfs: the tools without the disk
#
# Cases (each tool, per round, the tools' order rotating from round to
# round): tree A cold (empty destination, fresh state) and no-change
# re-sync; tree B cold with verify = checksum (bm:// of the plain tree
# against HTTP, both hashing every byte) and with verify = size (bm:// of
# a served verify = checksum mirror of B, whose recorded digests go by
# sendfile, against HTTP); rsync -a for both.  biomirror runs with
# concurrency 64 for tree A and 4 connections throughout.  Then 4 bm://
# clients of tree A at once from the one server.  Prints `uptime`, a
# table of medians (seconds) with each tool's ratio to bm://, the CPU
# seconds of each run's client and server (tests/bench/serve_report.py),
# the bm:// server's CPU seconds per GiB served and its peak memory per
# session (the 4 clients), and keeps every raw run in $T/raw.csv while
# it runs.  A run's tree A and
# state are moved aside and removed after the last round (--rm: at once;
# tree B's copies always go at once):
# ext4 without a journal skips inodes freed in the last 30 s, scanning past
# each (recently_deleted()), so a cold run right after removing the last
# one's 5,000 files pays a scan per file that no real first sync does.
# On tmpfs (--dir /dev/shm) they are removed at once: kept, they hold
# memory, and each later run writes into pages this VM never touched
# (about 0.15 s of system time more per run of tree A after five rounds,
# for every tool alike), which a long-running mirror host does not pay.
. "$(dirname "$0")/../functional/lib.sh"

RUNS=3 NFILES=5000 NBIG=8 BIGMB=256 BIGONLY=0 BASE="" RMNOW=0
while [ $# -gt 0 ]; do
	case $1 in
	--quick) RUNS=1 NFILES=200 NBIG=2 BIGMB=4 ;;
	--runs) RUNS=$2; shift ;;
	--nobig) NBIG=0 ;;
	--bigonly) BIGONLY=1 NFILES=0 ;;
	--bigmb) BIGMB=$2; shift ;;
	--baseline) BASE=$(realpath "${2:?--baseline BIN}"); shift ;;
	--rm) RMNOW=1 ;;
	--dir) BMTEST_DIR=$(realpath "${2:?--dir DIR}"); export BMTEST_DIR
		shift ;;
	*) echo "usage: $0 [--quick] [--runs N] [--nobig | --bigonly]" \
	    "[--baseline BIN] [--bigmb MB] [--rm] [--dir DIR]" >&2; exit 2 ;;
	esac
	shift
done
[ -z "$BASE" ] || [ -x "$BASE" ] || { echo "$0: $BASE: not executable" >&2
    exit 2; }
bm_setup
[ "$(stat -f -c %T "$T")" != tmpfs ] || RMNOW=1
H=127.0.0.1
uptime | sed 's/^/# uptime at start: /'
df -h "$T" | sed -n 2p | sed "s/^/# filesystem of the trees: /"

echo "# trees: A $NFILES files of 1-32 KiB, B $NBIG x $BIGMB MiB"
python3 - "$T/src/A" "$NFILES" <<'EOF' || fail "tree A"
import os, random, sys
root, n = sys.argv[1], int(sys.argv[2])
rng = random.Random(5000)
for i in range(n):
    d = os.path.join(root, "d%02d" % (i % 50))
    os.makedirs(d, exist_ok=True)
    p = os.path.join(d, "f%05d.dat" % i)
    with open(p, "wb") as f:
        f.write(rng.randbytes(rng.randint(1024, 32768)))
    os.utime(p, (1600000000 + i, 1600000000 + i))
EOF
mkdir -p "$T/src/A" "$T/src/B"	# A is empty with --bigonly
for i in $(seq 1 "$NBIG"); do
	make_big_file "$T/src/B/big$i.bin" "$BIGMB" "bench$i"
done

echo "# servers: biomirror serve, rsync --daemon, nginx"
SPORT=$(free_port)
mkdir -p "$T/tier"
cat > "$T/serve.conf" <<CONF
[serve]
listen = $H:$SPORT
max_connections = 8

[export src]
path = $T/src

[export tier]
mirror = tier

[tier]
source = bm://$H:$SPORT/src/B/
dest = $T/tier
verify = checksum
max_connections = 4
CONF
"$BM" -c "$T/serve.conf" --state-dir "$T/sst" serve > "$T/serve.log" 2>&1 &
SPID=$!
BM_SERVERS="$BM_SERVERS serve:$SPID:$T/.serve"
python3 "$BM_TOOLS/bmclient.py" wait $H "$SPORT" || fail "serve"
if [ -n "$BASE" ]; then
	# The baseline's server, its own state and served mirror of B.
	OPORT=$(free_port)
	sed -e "s/:$SPORT/:$OPORT/" -e "s|$T/tier|$T/otier|" "$T/serve.conf" \
	    > "$T/oserve.conf"
	mkdir -p "$T/otier"
	"$BASE" -c "$T/oserve.conf" --state-dir "$T/osst" serve \
	    > "$T/oserve.log" 2>&1 &
	OPID=$!
	BM_SERVERS="$BM_SERVERS oserve:$OPID:$T/.oserve"
	python3 "$BM_TOOLS/bmclient.py" wait $H "$OPORT" || fail "old serve"
fi
RPORT=$(free_port)
cat > "$T/rsyncd.conf" <<CONF
pid file = $T/rsyncd.pid
use chroot = no
[src]
path = $T/src
read only = yes
CONF
rsync --daemon --no-detach --address=$H --port="$RPORT" \
    --config="$T/rsyncd.conf" > "$T/rsyncd.log" 2>&1 &
RPID=$!
BM_SERVERS="$BM_SERVERS rsyncd:$RPID:$T/.rsyncd"
for _ in $(seq 1 50); do
	rsync "rsync://$H:$RPORT/" > /dev/null 2>&1 && break
	sleep 0.1
done
start_nginx "$T/src"
NPID=$(pgrep -P "$(cat "$NGINX_DIR/nginx.pid")" | head -1)
[ -n "$NPID" ] || fail "no nginx worker"

if [ "$NBIG" -gt 0 ]; then
	echo "# the served mirror of B (verify = checksum: digests recorded)"
	"$BM" -c "$T/serve.conf" --state-dir "$T/sst" sync tier \
	    > "$T/tier.log" 2>&1 || { cat "$T/tier.log"; fail "tier"; }
	[ -z "$BASE" ] || "$BASE" -c "$T/oserve.conf" --state-dir "$T/osst" \
	    sync tier > "$T/otier.log" 2>&1 ||
	    { cat "$T/otier.log"; fail "old tier"; }
fi

# scpu [PID]: a server's CPU seconds so far (utime + stime, and the
# children it waited for: rsync's daemon forks one per connection).
scpu() {
	awk -v hz="$(getconf CLK_TCK)" \
	    '{ printf "%.2f\n", ($14 + $15 + $16 + $17) / hz }' \
	    "/proc/${1:-$SPID}/stat"
}
# ccpu FILE: CPU seconds (user + system) of the children this shell
# waited for, from FILE, the output of times(1) run in the shell itself
# (a $(...) subshell would have waited for none).
ccpu() {
	awk 'NR == 2 { split($1 " " $2, a, /[ms ]+/)
		printf "%.3f\n", a[1] * 60 + a[2] + a[3] * 60 + a[4] }' "$1"
}
# trash DIR...: move DIRs out of the way, removed after the last round
# (--rm: now); see the opening comment.
NTRASH=0
trash() {
	local d
	for d in "$@"; do
		[ -e "$d" ] || continue
		if [ "$RMNOW" = 1 ]; then
			rm -rf "$d"
		else
			mkdir -p "$T/trash"
			NTRASH=$((NTRASH + 1))
			mv "$d" "$T/trash/$NTRASH" || fail "mv $d"
		fi
	done
}
# timed TOOL,CASE CMD...: run CMD, append "TOOL,CASE,ms,server CPU s,
# client CPU s" to raw.csv (the server: biomirror serve, the baseline's,
# rsync's daemon or nginx's worker; the client: every process CMD ran).
timed() {
	local key=$1 t0 t1 c0 c1 k0 k1 pid=$SPID
	shift
	case $key in
	old,*) pid=$OPID ;;
	rsync,*) pid=$RPID ;;
	http,*) pid=$NPID ;;
	esac
	c0=$(scpu "$pid")
	# Nothing forks between the two times(1): EPOCHREALTIME, not date.
	times > "$T/k0"
	t0=${EPOCHREALTIME/[.,]/}
	"$@" > "$T/cmd.out" 2>&1 || { cat "$T/cmd.out"; fail "$key: $*"; }
	t1=${EPOCHREALTIME/[.,]/}
	times > "$T/k1"
	# rsync's daemon: its child for this client counts once reaped.
	if [ "$pid" = "$RPID" ]; then
		for _ in $(seq 1 50); do
			[ -z "$(pgrep -P "$RPID")" ] && break
			sleep 0.02
		done
	fi
	c1=$(scpu "$pid")
	k0=$(ccpu "$T/k0") k1=$(ccpu "$T/k1")
	echo "$key,$(( (t1 - t0) / 1000 )),$(awk -v a="$c0" -v b="$c1" \
	    'BEGIN { printf "%.2f", b - a }'),$(awk -v a="$k0" -v b="$k1" \
	    'BEGIN { printf "%.3f", b - a }')" >> "$T/raw.csv"
}
# bmsync SRC DEST STATE [KEY=VALUE...]: biomirror with a one-mirror config
# (BMBIN: another binary).
bmsync() {
	local src=$1 dest=$2 st=$3 kv bin=${BMBIN:-$BM}
	shift 3
	mkdir -p "$st"
	{
		printf '[m]\nsource = %s\ndest = %s\n' "$src" "$dest"
		for kv in "$@"; do printf '%s\n' "$kv"; done
	} > "$st/m.conf"
	"$bin" -c "$st/m.conf" --state-dir "$st" sync m
}
oldsync() { BMBIN=$BASE bmsync "$@"; }

: > "$T/raw.csv"
order=(bm rsync http)
[ -z "$BASE" ] || order=(bm old http rsync)
[ "$BIGONLY" = 0 ] || [ -n "$BASE" ] || order=(bm http rsync)
for r in $(seq 1 "$RUNS"); do
	echo "# round $r: ${order[*]}"
	for tool in "${order[@]}"; do
		trash "$T/dst" "$T/st"
		mkdir -p "$T/dst"
		bs=()
		case $tool in
		old) a=(oldsync "bm://$H:$OPORT/src/A/" "$T/dst/A" "$T/st/a"
		    "concurrency = 64" "max_connections = 4")
		    bc=(oldsync "bm://$H:$OPORT/src/B/" "$T/dst/Bc"
		    "$T/st/c" "max_connections = 4" "verify = checksum")
		    bs=(oldsync "bm://$H:$OPORT/tier/" "$T/dst/Bs" "$T/st/s"
		    "max_connections = 4" "verify = size") ;;
		bm) a=(bmsync "bm://$H:$SPORT/src/A/" "$T/dst/A" "$T/st/a"
		    "concurrency = 64" "max_connections = 4")
		    bc=(bmsync "bm://$H:$SPORT/src/B/" "$T/dst/Bc" "$T/st/c"
		    "max_connections = 4" "verify = checksum")
		    bs=(bmsync "bm://$H:$SPORT/tier/" "$T/dst/Bs" "$T/st/s"
		    "max_connections = 4" "verify = size") ;;
		rsync) a=(rsync -a "rsync://$H:$RPORT/src/A/" "$T/dst/A/")
		    bc=(rsync -a "rsync://$H:$RPORT/src/B/" "$T/dst/Bc/") ;;
		http) a=(bmsync "${NGINX_URL}A/" "$T/dst/A" "$T/st/a"
		    "concurrency = 64" "max_connections = 4")
		    bc=(bmsync "${NGINX_URL}B/" "$T/dst/Bc" "$T/st/c"
		    "max_connections = 4" "verify = checksum")
		    bs=(bmsync "${NGINX_URL}B/" "$T/dst/Bs" "$T/st/s"
		    "max_connections = 4" "verify = size") ;;
		esac
		if [ "$BIGONLY" = 0 ]; then
			sync
			timed "$tool,A cold" "${a[@]}"
			timed "$tool,A cold flush" sync
			timed "$tool,A no change" "${a[@]}"
			diff -r "$T/src/A" "$T/dst/A" ||
			    fail "$tool: tree A differs"
			trash "$T/dst/A"
		fi
		[ "$NBIG" -gt 0 ] || continue
		sync
		timed "$tool,B cold checksum" "${bc[@]}"
		timed "$tool,B cold checksum flush" sync
		cmp "$T/src/B/big1.bin" "$T/dst/Bc/big1.bin" ||
		    fail "$tool: B differs"
		rm -rf "$T/dst/Bc"	# 2 GiB each: never kept
		[ ${#bs[@]} -gt 0 ] || continue
		sync
		timed "$tool,B cold size" "${bs[@]}"
		timed "$tool,B cold size flush" sync
		cmp "$T/src/B/big1.bin" "$T/dst/Bs/big1.bin" ||
		    fail "$tool: B differs"
		rm -rf "$T/dst/Bs"	# 2 GiB each: never kept
	done
	order=("${order[@]:1}" "${order[0]}")
done

if [ "$BIGONLY" = 1 ]; then
	uptime | sed 's/^/# uptime at end: /'
	python3 "$(dirname "$0")/serve_report.py" "$T/raw.csv" "$RUNS" \
	    "$(du -sb "$T/src/A" | cut -f1)" "$(du -sb "$T/src/B" | cut -f1)"
	stop_servers
	exit 0
fi
echo "# 4 bm:// clients of tree A at once"
trash "$T/dst" "$T/st"
mkdir -p "$T/dst"
# Peak memory from here on (clear_refs 5 resets VmHWM to VmRSS).
echo 5 > "/proc/$SPID/clear_refs" || fail "clear_refs"
rss0=$(awk '/^VmRSS/ { print $2 }' "/proc/$SPID/status")
c0=$(scpu)
t0=$(date +%s%N)
pids=""
for i in 1 2 3 4; do
	bmsync "bm://$H:$SPORT/src/A/" "$T/dst/A$i" "$T/st/$i" \
	    "concurrency = 64" "max_connections = 4" > "$T/four$i.log" 2>&1 &
	pids="$pids $!"
done
bad=0
for p in $pids; do wait "$p" || bad=1; done
t1=$(date +%s%N)
c1=$(scpu)
[ "$bad" = 0 ] || { cat "$T"/four*.log; fail "4 clients"; }
for i in 1 2 3 4; do
	diff -r "$T/src/A" "$T/dst/A$i" || fail "4 clients: A$i differs"
done
hwm=$(awk '/^VmHWM/ { print $2 }' "/proc/$SPID/status")
uptime | sed 's/^/# uptime at end: /'

python3 "$(dirname "$0")/serve_report.py" "$T/raw.csv" "$RUNS" \
    "$(du -sb "$T/src/A" | cut -f1)" "$(du -sb "$T/src/B" | cut -f1)"
awk -v t=$(( (t1 - t0) / 1000000 )) -v c0="$c0" -v c1="$c1" \
    -v r0="$rss0" -v h="$hwm" 'BEGIN {
	printf "4 clients of A at once: %.2f s, server CPU %.2f s; " \
	    "peak memory %.1f MiB per session (VmHWM %.1f MiB, %.1f MiB " \
	    "before)\n", t / 1000, c1 - c0, (h - r0) / 4 / 1024, h / 1024,
	    r0 / 1024 }'
stop_servers
