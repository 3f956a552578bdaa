#!/bin/bash
# tests/bench/listing.sh: peak RSS of huge listings (issue 22, item 1).
# On demand only (not in make check); takes time and inodes.
#
#   tests/bench/listing.sh                    # the full figures
#   FLAT=200000 TREE=100000 DIRS=100 tests/bench/listing.sh   # scaled down
#   BASE=/path/old/biomirror RUNS=3 CASES=tree tests/bench/listing.sh
#                                             # old against new build
#
# 1. FLAT files (default 2,000,000) in one directory, served by nginx
#    (autoindex HTML): a cold sync and a no-change sync, each under
#    /usr/bin/time -v.  Goal: peak RSS under 256 MB both times.
# 2. TREE files (default 1,000,000) in DIRS directories (default 1,000):
#    an empty-tree run (the baseline), then a cold and a no-change sync.
#    Goal: the no-change run under 64 MB above the baseline.
# The trees are empty files on a tmpfs under the work directory, with
# mtimes in 2020 (a no-change run then asks nothing per file).  Prints
# one line per run: what, exit code, seconds, max RSS (KiB), --json
# peak_rss_kib, listed and fetched.  Run as root (tmpfs, nginx).
# CASES (default flat,tree) picks the cases.  With BASE (an older
# binary), both binaries run: each its own cold sync of the flat
# directory, the tree's cold sync by the new one only (the manifest is
# shared; the old one must read it), then RUNS (default 1) rounds of the
# empty baseline and the no-change syncs, old first in odd rounds, new
# first in even ones; each line names the binary.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
FLAT=${FLAT:-2000000}
TREE=${TREE:-1000000}
DIRS=${DIRS:-1000}
BM=${BM:-$ROOT/biomirror}
BASE=${BASE:-}
RUNS=${RUNS:-1}
CASES=${CASES:-flat,tree}
. "$ROOT/tests/functional/lib.sh"
bm_setup
mkdir -p "$T/up" || fail "mkdir"
mount -t tmpfs -o size=8g,nr_inodes=$((FLAT + TREE + DIRS + 1000)),mode=0755 \
    bmbench "$T/up" || fail "mount tmpfs"

# run WHAT SOURCE STATE DEST [BIN]: one sync, timed; its line to stdout.
run() {
	local what=$1 src=$2 st=$3 dest=$4 bin=${5:-$BM} t0 t1 rc
	[ -n "$BASE" ] && what="$what [$([ "$bin" = "$BASE" ] && echo old ||
	    echo new)]"
	t0=$(date +%s.%N)
	/usr/bin/time -v -o "$T/time.txt" "$bin" --state-dir "$st" --json \
	    sync --source "$src" --dest "$dest" > "$T/out.json" 2> "$T/err.txt"
	rc=$?
	t1=$(date +%s.%N)
	python3 - "$what" "$rc" "$t0" "$t1" "$T/time.txt" "$T/out.json" <<'PY'
import json, re, sys
what, rc, t0, t1, tf, jf = sys.argv[1:]
m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", open(tf).read())
try:
    j = json.load(open(jf))[0]
except Exception:
    j = {}
print("%-32s exit %s  %7.1f s  maxrss %7s KiB  peak_rss_kib %7s  listed %s  fetched %s"
      % (what, rc, float(t1) - float(t0), m.group(1) if m else "?",
         j.get("peak_rss_kib", "?"), j.get("listed", "?"), j.get("fetched", "?")))
PY
	[ "$rc" = 0 ] || tail -3 "$T/err.txt"
}

# bins ROUND: the binaries of a round, in the order they run.
bins() {
	if [ -z "$BASE" ]; then
		echo "$BM"
	elif [ $(($1 % 2)) = 1 ]; then
		echo "$BASE $BM"
	else
		echo "$BM $BASE"
	fi
}
has() { case ",$CASES," in *",$1,"*) return 0 ;; esac; return 1; }

echo "# biomirror $BM${BASE:+ against $BASE}; FLAT=$FLAT TREE=$TREE DIRS=$DIRS RUNS=$RUNS; $(uptime)"
mkdir -p "$T/up/flat/big" "$T/up/tree" "$T/up/empty" || fail "mkdir"
if has flat; then
	( cd "$T/up/flat/big" && seq -f 'f%07.0f' 0 $((FLAT - 1)) |
	    xargs touch -d '2020-01-02 03:04' ) || fail "touch flat"
fi
per=$((TREE / DIRS))
if has tree; then
	for d in $(seq -f 'd%04g' 0 $((DIRS - 1))); do
		mkdir "$T/up/tree/$d" && ( cd "$T/up/tree/$d" &&
		    seq -f 'f%06.0f' 0 $((per - 1)) |
		    xargs touch -d '2020-01-02 03:04' )
	done || fail "touch tree"
	touch -d '2020-01-02 03:04' "$T/up/tree"/d*
fi
touch -d '2020-01-02 03:04' "$T/up/flat/big"
start_nginx "$T/up"

mkdir -p "$T/dst" || fail "mkdir"
if has flat; then
	k=0
	for b in $(bins 1); do
		k=$((k + 1))
		run "flat $FLAT cold" "${NGINX_URL}flat/" "$T/s1.$k" \
		    "$T/dst/flat.$k" "$b"
	done
	for i in $(seq 1 "$RUNS"); do
		for b in $(bins "$i"); do
			k=$([ "$b" = "$(bins 1 | cut -d' ' -f1)" ] && echo 1 ||
			    echo 2)
			run "flat $FLAT no change" "${NGINX_URL}flat/" \
			    "$T/s1.$k" "$T/dst/flat.$k" "$b"
		done
	done
	rm -rf "$T/dst"/flat.* "$T"/s1.*
fi
if has tree; then
	run "tree $TREE/$DIRS cold" "${NGINX_URL}tree/" "$T/s2" "$T/dst/tree"
fi
for i in $(seq 1 "$RUNS"); do
	for b in $(bins "$i"); do
		run "empty tree (baseline)" "${NGINX_URL}empty/" "$T/s0.$i" \
		    "$T/dst/empty.$i" "$b"
		run "empty tree no change" "${NGINX_URL}empty/" "$T/s0.$i" \
		    "$T/dst/empty.$i" "$b"
		rm -rf "$T/s0.$i" "$T/dst/empty.$i"
		if has tree; then
			run "tree $TREE/$DIRS no change" "${NGINX_URL}tree/" \
			    "$T/s2" "$T/dst/tree" "$b"
		fi
	done
done
rm -rf "$T/dst"
