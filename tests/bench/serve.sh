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
#
# Cases (each tool, per round): tree A cold (empty destination, fresh
# state) and no-change re-sync; tree B cold.  biomirror runs with
# concurrency 64 for tree A (bm:// and HTTP alike) and 4 connections;
# bm:// also with verify = checksum off (size), HTTP with verify = size
# and verify = checksum for tree B.  Prints a table of medians (seconds)
# and keeps every raw run in $T/raw.csv while it runs.
. "$(dirname "$0")/../functional/lib.sh"

RUNS=3 NFILES=5000 NBIG=8 BIGMB=256
while [ $# -gt 0 ]; do
	case $1 in
	--quick) RUNS=1 NFILES=200 NBIG=2 BIGMB=4 ;;
	--runs) RUNS=$2; shift ;;
	*) echo "usage: $0 [--quick] [--runs N]" >&2; exit 2 ;;
	esac
	shift
done
bm_setup
H=127.0.0.1

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
for i in $(seq 1 "$NBIG"); do
	make_big_file "$T/src/B/big$i.bin" "$BIGMB" "bench$i"
done

echo "# servers: biomirror serve, rsync --daemon, nginx"
SPORT=$(free_port)
printf '[serve]\nlisten = %s:%s\n\n[export src]\npath = %s\n' $H "$SPORT" \
    "$T/src" > "$T/serve.conf"
"$BM" -c "$T/serve.conf" serve > "$T/serve.log" 2>&1 &
BM_SERVERS="$BM_SERVERS serve:$!:$T/.serve"
python3 "$BM_TOOLS/bmclient.py" wait $H "$SPORT" || fail "serve"
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
BM_SERVERS="$BM_SERVERS rsyncd:$!:$T/.rsyncd"
for _ in $(seq 1 50); do
	rsync "rsync://$H:$RPORT/" > /dev/null 2>&1 && break
	sleep 0.1
done
start_nginx "$T/src"

# timed CSVKEY CMD...: run CMD, append "key,seconds" to raw.csv.
timed() {
	local key=$1 t0 t1
	shift
	t0=$(date +%s%N)
	"$@" > "$T/cmd.out" 2>&1 || { cat "$T/cmd.out"; fail "$key: $*"; }
	t1=$(date +%s%N)
	echo "$key,$(( (t1 - t0) / 1000000 ))" >> "$T/raw.csv"
}
# bmsync SRC DEST STATE [KEY=VALUE...]: biomirror with a one-mirror config.
bmsync() {
	local src=$1 dest=$2 st=$3 kv
	shift 3
	{
		printf '[m]\nsource = %s\ndest = %s\n' "$src" "$dest"
		for kv in "$@"; do printf '%s\n' "$kv"; done
	} > "$T/m.conf"
	"$BM" -c "$T/m.conf" --state-dir "$st" sync m
}

: > "$T/raw.csv"
for r in $(seq 1 "$RUNS"); do
	echo "# round $r"
	for tool in bm rsync http; do
		rm -rf "$T/dst" "$T/st"
		mkdir -p "$T/dst"
		case $tool in
		bm) a=(bmsync "bm://$H:$SPORT/src/A/" "$T/dst/A" "$T/st"
		    "concurrency = 64" "max_connections = 4")
		    b=(bmsync "bm://$H:$SPORT/src/B/" "$T/dst/B" "$T/st"
		    "max_connections = 4" "verify = size") ;;
		rsync) a=(rsync -a "rsync://$H:$RPORT/src/A/" "$T/dst/A/")
		    b=(rsync -a "rsync://$H:$RPORT/src/B/" "$T/dst/B/") ;;
		http) a=(bmsync "$NGINX_URL/A/" "$T/dst/A" "$T/st"
		    "concurrency = 64" "max_connections = 4")
		    b=(bmsync "$NGINX_URL/B/" "$T/dst/B" "$T/st"
		    "max_connections = 4" "verify = checksum") ;;
		esac
		timed "$tool,A cold" "${a[@]}"
		timed "$tool,A no change" "${a[@]}"
		diff -r "$T/src/A" "$T/dst/A" || fail "$tool: tree A differs"
		timed "$tool,B cold" "${b[@]}"
		cmp "$T/src/B/big1.bin" "$T/dst/B/big1.bin" || fail "$tool: B differs"
	done
done

echo "# medians of $RUNS (seconds)"
python3 - "$T/raw.csv" <<'EOF'
import csv, statistics, sys
runs = {}
for tool, case, ms in csv.reader(open(sys.argv[1])):
    runs.setdefault(case, {}).setdefault(tool, []).append(int(ms) / 1000)
tools = ["bm", "rsync", "http"]
print("| case | bm:// | rsync -a rsync:// | biomirror over HTTP |")
print("|---|---|---|---|")
for case, t in runs.items():
    print("| %s | %s |" % (case, " | ".join(
        "%.2f" % statistics.median(t[k]) if k in t else "-" for k in tools)))
EOF
stop_servers
