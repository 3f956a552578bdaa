#!/bin/bash
# tests/bench/local.sh: on-demand loopback benchmark of biomirror against
# rclone (http backend), lftp mirror, wget -m and a local cp -a (the floor),
# and over FTP against lftp mirror, wget -m (vsftpd) and globus-url-copy
# (globus-gridftp-server).
# Never part of `make check`.  Run from anywhere, as root (it may apt-get
# install the tools it needs and drops the page cache between runs):
#
#	tests/bench/local.sh               # full run: --runs 3, about 4 minutes on 2 cores
#	tests/bench/local.sh --quick       # smoke test: tree B of 2 files, 1 run
#	tests/bench/local.sh --baseline OLD  # OLD vs ./biomirror, trees A and B,
#	                                   # alternately, medians of 5, ratio new/old
#
# Trees (deterministic, generated under --workdir, default /var/tmp, served
# by one nginx instance on 127.0.0.1, removed at exit):
#	A  5,000 files of 1-32 KiB in 50 directories
#	B  8 files of 256 MiB (AES-CTR keystream; 2 files with --quick)
#	C  100,000 zero-byte files in 100 directories (biomirror peak RSS only)
#	FA, FB  trees A and B over FTP: biomirror vs lftp mirror --parallel=8
#	   and wget -m against vsftpd (LIST), and biomirror vs globus-url-copy
#	   -r -sync -cc 8 -p 4 against globus-gridftp-server (MLSD; vsftpd
#	   refuses globus-url-copy's MODE E), biomirror both in stream mode
#	   and with --ftp-mode extended (MODE E).  Each tool at 8 connections
#	   (wget has one).  globus-url-copy does not keep mtimes; wget and lftp
#	   take them from LIST (minute or day precision).
#
# For A and B, every round times each tool's cold sync (fresh, empty
# destination and, for biomirror, a fresh state dir) and then a no-change
# re-sync into the same destination; the table shows medians over --runs
# rounds.  Results: a table per tree on stdout, every raw run in
# tests/bench/out/local-DATE.csv, and (full runs only, unless --no-doc) the
# measured section of docs/performance.md replaced.  With --baseline the
# peer tools are skipped (unless --peers) and the doc is never touched.
# See tests/bench/README.md.

set -u
export LC_ALL=C

usage() {
	cat <<'EOF'
usage: tests/bench/local.sh [options]
  --runs N            rounds per tree (default 3); the table shows medians
  --quick             smoke test: tree B with 2 files, 1 run, docs untouched
  --trees LIST        which parts to run, comma-separated: A,B,C,FA,FB
                      (default A,B,C,FA,FB)
  --workdir DIR       where the trees and destinations go (default /var/tmp;
                      must be on a real disk, not tmpfs)
  --no-drop-caches    do not drop the page cache between runs
  --no-install        never apt-get install missing tools
  --doc / --no-doc    replace the measured section of docs/performance.md
                      (default: yes for full runs, no for --quick)
  --keep              keep the work directory (trees, logs) at exit
  --baseline BIN      compare the biomirror binary BIN (old) with ./biomirror
                      (new): both run alternately, per round, on trees A and B
                      (default --trees A,B, --runs 5), cold and no-change; a
                      table gives both medians and new/old per case; implies
                      --no-doc
  --peers             with --baseline, also run the peer tools (rclone, lftp,
                      wget, cp, ...) and print their usual tables and targets
EOF
}

ARGS="$*"
RUNS=3 QUICK=0 TREES=A,B,C,FA,FB WORKDIR=/var/tmp DROP=1 INSTALL=1 DOC="" KEEP=0
GRIDFTP_COLD_END=0	# when the last stream-mode cold run against gridftp ended
RUNS_SET=0 TREES_SET=0 BASE="" PEERS=0
while [ $# -gt 0 ]; do
	case $1 in
	--runs) RUNS=${2:?--runs N}; RUNS_SET=1; shift ;;
	--runs=*) RUNS=${1#*=}; RUNS_SET=1 ;;
	--quick) QUICK=1 ;;
	--trees) TREES=${2:?--trees LIST}; TREES_SET=1; shift ;;
	--trees=*) TREES=${1#*=}; TREES_SET=1 ;;
	--workdir) WORKDIR=${2:?--workdir DIR}; shift ;;
	--workdir=*) WORKDIR=${1#*=} ;;
	--no-drop-caches) DROP=0 ;;
	--no-install) INSTALL=0 ;;
	--doc) DOC=1 ;;
	--no-doc) DOC=0 ;;
	--keep) KEEP=1 ;;
	--baseline) BASE=${2:?--baseline BIN}; shift ;;
	--baseline=*) BASE=${1#*=} ;;
	--peers) PEERS=1 ;;
	-h|--help) usage; exit 0 ;;
	*) echo "local.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
	esac
	shift
done
case $RUNS in ''|*[!0-9]*|0) echo "local.sh: --runs needs a positive integer" >&2; exit 2 ;; esac
if [ -n "$BASE" ]; then
	[ "$DOC" = 1 ] && { echo "local.sh: --baseline never rewrites docs/performance.md (no --doc)" >&2; exit 2; }
	DOC=0
	[ "$TREES_SET" = 1 ] || TREES=A,B
	[ "$RUNS_SET" = 1 ] || [ "$QUICK" = 1 ] || RUNS=5
	# Relative to the caller's directory, before the cd below.
	case $BASE in /*) ;; *) BASE=$PWD/$BASE ;; esac
elif [ "$PEERS" = 1 ]; then
	echo "local.sh: --peers goes with --baseline" >&2; exit 2
fi
# RUN_PEERS: the other tools run (always without --baseline).
RUN_PEERS=1
[ -n "$BASE" ] && [ "$PEERS" = 0 ] && RUN_PEERS=0
NB=8
if [ "$QUICK" = 1 ]; then
	NB=2
	[ "$RUNS_SET" = 1 ] || RUNS=1
	[ -n "$DOC" ] || DOC=0
fi
[ -n "$DOC" ] || DOC=1
has_tree() { case ",$TREES," in *",$1,"*) return 0 ;; esac; return 1; }
# The FTP trees are trees A and B served over FTP.
case ",$TREES," in *,FA,*) case ",$TREES," in *,A,*) ;; *) TREES="$TREES,A" SKIP_HTTP_A=1 ;; esac ;; esac
case ",$TREES," in *,FB,*) case ",$TREES," in *,B,*) ;; *) TREES="$TREES,B" SKIP_HTTP_B=1 ;; esac ;; esac
has_ftp() { has_tree FA || has_tree FB; }
src_of() { echo "${1#F}"; }

ROOT=$(cd "$(dirname "$0")/../.." && pwd) || exit 2
cd "$ROOT" || exit 2
# shellcheck source=tests/functional/lib.sh
. tests/functional/lib.sh

say() { printf '%s %s\n' "$(date -u +%H:%M:%S)" "$*"; }

# ---------------------------------------------------------------- tools
need=""
if [ "$RUN_PEERS" = 1 ]; then
	command -v rclone >/dev/null || need="$need rclone"
	command -v lftp >/dev/null || need="$need lftp"
	command -v wget >/dev/null || need="$need wget"
	command -v rsync >/dev/null || need="$need rsync"
fi
[ -x /usr/bin/time ] || need="$need time"
[ -x /usr/sbin/nginx ] || need="$need nginx-light"
command -v openssl >/dev/null || need="$need openssl"
command -v python3 >/dev/null || need="$need python3"
command -v curl >/dev/null || need="$need curl"
if has_ftp; then
	command -v vsftpd >/dev/null || need="$need vsftpd"
	if [ "$RUN_PEERS" = 1 ]; then
		command -v globus-gridftp-server >/dev/null || need="$need globus-gridftp-server-progs"
		command -v globus-url-copy >/dev/null || need="$need globus-gass-copy-progs"
	fi
fi
if [ -n "$need" ]; then
	[ "$INSTALL" = 1 ] && [ "$(id -u)" = 0 ] ||
	    fail "missing:$need (install them, or run as root without --no-install)"
	say "installing:$need"
	# shellcheck disable=SC2086
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q $need >/dev/null ||
	    { apt-get update -q >/dev/null &&
	      DEBIAN_FRONTEND=noninteractive apt-get install -y -q $need >/dev/null; } ||
	    fail "apt-get install$need"
fi
if [ ! -x ./biomirror ]; then
	say "building ./biomirror"
	make >/dev/null || fail "make"
fi
BM=${BM:-$ROOT/biomirror}
[ -x "$BM" ] || fail "no biomirror binary $BM"
[ -z "$BASE" ] || [ -x "$BASE" ] || fail "--baseline $BASE: not an executable file"

# ---------------------------------------------------------------- work dir
umask 022
mkdir -p "$WORKDIR" || fail "mkdir $WORKDIR"
T=$(mktemp -d "$WORKDIR/bmbench.XXXXXX") || fail "mktemp in $WORKDIR"
chmod 0755 "$T"
# Run a snapshot of the binary: a rebuild during the benchmark (other work
# in the same tree) must not change what is measured half-way.
BM_ORIG=$BM
BM_INFO="$("$BM" --version 2>&1 | head -n 1), binary built $(date -u -r "$BM" '+%Y-%m-%d %H:%M:%S UTC'), sha256 $(sha256sum < "$BM" | cut -c1-12)"
cp "$BM" "$T/biomirror" || fail "cp $BM"
# Its modules too: they are looked for beside the binary (module.c).
for m in libbiomirror-curl.so libbiomirror-udt.so; do
	[ ! -f "$(dirname "$BM")/$m" ] || cp "$(dirname "$BM")/$m" "$T/" ||
	    fail "cp $m"
done
BM=$T/biomirror
BM_BASE=""
if [ -n "$BASE" ]; then
	BASE_INFO="$("$BASE" --version 2>&1 | head -n 1), binary built $(date -u -r "$BASE" '+%Y-%m-%d %H:%M:%S UTC'), sha256 $(sha256sum < "$BASE" | cut -c1-12)"
	cp "$BASE" "$T/biomirror-base" || fail "cp $BASE"
	BM_BASE=$T/biomirror-base
	cmp -s "$BM" "$BM_BASE" &&
	    echo "local.sh: warning: --baseline $BASE is the same file as $BM_ORIG" >&2
fi
export T BM
unset http_proxy https_proxy ftp_proxy all_proxy \
    HTTP_PROXY HTTPS_PROXY FTP_PROXY ALL_PROXY
export no_proxy='*' NO_PROXY='*'
bench_cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	stop_servers
	if [ "$KEEP" = 1 ]; then
		echo "# kept $T" >&2
	elif [ -n "${T:-}" ] && [ -d "$T" ]; then
		rm -rf -- "$T"
	fi
	exit "$rc"
}
trap bench_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

FSTYPE=$(findmnt -n -o FSTYPE -T "$T" 2>/dev/null || stat -f -c %T "$T")
[ "$FSTYPE" = tmpfs ] && fail "$WORKDIR is tmpfs: use --workdir on a real disk"
nb_space=0
has_tree B && nb_space=$NB
need_kb=$(( nb_space * 256 * 1024 * 2 + 1024 * 1024 ))
avail_kb=$(df -Pk "$T" | awk 'NR == 2 { print $4 }')
[ "$avail_kb" -ge "$need_kb" ] ||
    fail "$T: ${avail_kb} KiB free, need ${need_kb} KiB"

SRC=$T/src
mkdir -p "$SRC" "$T/logs" "$T/lists" "$T/run"
OUTDIR=$ROOT/tests/bench/out
mkdir -p "$OUTDIR"
STAMP=$(date -u +%Y-%m-%dT%H%M%SZ)
CSV=$OUTDIR/local-$STAMP.csv
echo "date,tree,tool,run,phase,seconds,max_rss_kb,user_s,sys_s,exit,requests,get,head,not_modified,bytes_served,flush_s,files,bytes,complete,mtime_mismatch" > "$CSV"

# ---------------------------------------------------------------- trees
gen_tree_a() {
	python3 - "$1" <<'EOF' || fail "tree A"
import os, random, sys
root = sys.argv[1]
rng = random.Random(5000)
base = 1650000000
for d in range(50):
    dd = os.path.join(root, "d%02d" % d)
    os.makedirs(dd, exist_ok=True)
    for f in range(100):
        n = d * 100 + f
        size = rng.randint(1024, 32768)
        p = os.path.join(dd, "f%03d.dat" % f)
        with open(p, "wb") as fh:
            fh.write(rng.randbytes(size))
        t = base + n * 613
        os.utime(p, (t, t))
for d in range(50):
    t = base - 86400 * (d + 1)
    os.utime(os.path.join(root, "d%02d" % d), (t, t))
EOF
}

gen_tree_c() {
	python3 - "$1" <<'EOF' || fail "tree C"
import os, sys
root = sys.argv[1]
base = 1660000000
for d in range(100):
    dd = os.path.join(root, "d%03d" % d)
    os.makedirs(dd, exist_ok=True)
    for f in range(1000):
        p = os.path.join(dd, "f%05d.dat" % (d * 1000 + f))
        open(p, "wb").close()
        t = base + d * 1000 + f
        os.utime(p, (t, t))
EOF
}

# tree_list DIR: "path<TAB>size<TAB>mtime" of every regular file, sorted.
tree_list() {
	(cd "$1" && find . -type f -printf '%P\t%s\t%T@\n') |
	    sed 's/\.[0-9]*$//' | sort
}

TREE_DESC_A="5,000 files of 1-32 KiB in 50 directories"
TREE_DESC_B="$NB files of 256 MiB, each with an MD5 sidecar (NCBI's X.md5 form)"
say "work dir $T ($FSTYPE, $(df -Ph "$T" | awk 'NR == 2 { print $4 }') free)"
if has_tree A; then
	say "generating tree A ($TREE_DESC_A)"
	gen_tree_a "$SRC/A"
	tree_list "$SRC/A" > "$T/lists/A"
fi
if has_tree B; then
	say "generating tree B ($TREE_DESC_B)"
	for i in $(seq 1 "$NB"); do
		make_big_file "$SRC/B/big$i.bin" 256 "bench-$i"
		(cd "$SRC/B" && md5sum "big$i.bin" > "big$i.bin.md5")
		touch -d "2021-01-0$i 03:04:05 UTC" "$SRC/B/big$i.bin" \
		    "$SRC/B/big$i.bin.md5"
	done
	tree_list "$SRC/B" > "$T/lists/B"
fi
if has_tree C; then
	say "generating tree C (100,000 zero-byte files in 100 directories)"
	gen_tree_c "$SRC/C"
fi
start_nginx "$SRC" > "$T/logs/nginx-start.log" || fail "start_nginx"
URL=$NGINX_URL
say "nginx on $URL"
if has_ftp; then
	start_vsftpd "$SRC" > "$T/logs/vsftpd-start.log" || fail "start_vsftpd"
	# Stream mode (biomirror, lftp, wget) takes a passive data port per
	# file, and gridftp does not reuse one for a minute (TIME_WAIT): a
	# cold run of tree FA takes 5,000 of these 12,000 (a wider range is
	# seldom free below the ephemeral ports), so one_run waits until a
	# minute has passed since the last such run (with no wait, the third
	# cold run took 36 s instead of 2 at 19:25 UTC on 2026-11-30).
	if [ "$RUN_PEERS" = 1 ]; then
		start_gridftp "$SRC" 12000 > "$T/logs/gridftp-start.log" || fail "start_gridftp"
		say "vsftpd on $VSFTPD_URL, gridftp on $GRIDFTP_URL"
	else
		say "vsftpd on $VSFTPD_URL"
	fi
	for t in A B; do
		[ -f "$T/lists/$t" ] && cp "$T/lists/$t" "$T/lists/F$t"
	done
fi

# ---------------------------------------------------------------- helpers
DROP_NOTE="page cache dropped (sync; echo 3 > /proc/sys/vm/drop_caches) before every timed run, then the source tree and the tools' binaries and libraries re-read, so the server side is warm and the destination side is cold"
if [ "$DROP" = 1 ] && ! { sync && echo 3 > /proc/sys/vm/drop_caches; } 2>/dev/null; then
	DROP=0
	say "cannot drop the page cache: runs start with a warm cache"
fi
[ "$DROP" = 1 ] || DROP_NOTE="page cache not dropped; 'sync' before every timed run"

warm_bins() {
	local b
	for b in "$BM" ${BM_BASE:+"$BM_BASE"} "$(command -v rclone)" "$(command -v lftp)" \
	    "$(command -v wget)" "$(command -v rsync)" /bin/cp /usr/bin/time \
	    $(command -v globus-url-copy); do
		# shellcheck disable=SC2046 # one word per library path
		cat "$b" $(ldd "$b" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $3 }') \
		    > /dev/null 2>&1
	done
}

# prep TREE: flush (timed into FLUSH_S: the dirty data the previous run left),
# drop caches, warm the source and the binaries.
prep() {
	local t0 t1
	t0=$(date +%s.%N)
	sync
	t1=$(date +%s.%N)
	FLUSH_S=$(echo "$t0 $t1" | awk '{ printf "%.3f", $2 - $1 }')
	if [ "$DROP" = 1 ]; then
		echo 3 > /proc/sys/vm/drop_caches
		find "$SRC/$(src_of "$1")" -type f -exec cat {} + > /dev/null
		warm_bins
	fi
}

# run_tool TOOL TREE DEST STATE PHASE: the command line of one run, into
# CMDLINE.  biomirror-base is biomirror's command with the --baseline binary.
run_tool() {
	local tool=$1 tree=$2 d=$3 s=$4 phase=$5 src bin=$BM
	[ "$tool" = biomirror-base ] && { tool=biomirror; bin=$BM_BASE; }
	case $tree in
	F*)
		src=$(src_of "$tree")
		case $tool in
		biomirror)
			CMDLINE=("$bin" --state-dir "$s" sync --max-connections 8 \
			    --concurrency 8 --source "$VSFTPD_URL$src/" --dest "$d") ;;
		lftp)
			CMDLINE=(lftp -c "set ftp:use-mlsd yes; mirror --parallel=8 $VSFTPD_URL$src/ $d") ;;
		wget)
			CMDLINE=(wget -m -np -nH --cut-dirs=1 -nv --no-remove-listing -P "$d" "$VSFTPD_URL$src/") ;;
		biomirror-gridftp)
			CMDLINE=("$BM" --state-dir "$s" sync --max-connections 8 \
			    --concurrency 8 --source "$GRIDFTP_URL$src/" --dest "$d") ;;
		biomirror-gridftp-e)
			# GridFTP's extended block mode, as globus-url-copy uses.
			CMDLINE=("$BM" --state-dir "$s" sync --max-connections 8 \
			    --concurrency 8 --ftp-mode extended \
			    --source "$GRIDFTP_URL$src/" --dest "$d") ;;
		globus-url-copy)
			CMDLINE=(globus-url-copy -r -sync -cc 8 -p 4 "$GRIDFTP_URL$src/" "file://$d/") ;;
		esac
		return ;;
	esac
	case $tool in
	biomirror)
		# With --baseline both binaries do the same work: verify = size
		# (the old one's default; verify = sidecar is today's, which
		# hashes tree B's 2 GiB once more).
		CMDLINE=("$bin" --state-dir "$s" sync ${BASE:+--verify size} \
		    --source "$URL$tree/" --dest "$d") ;;
	biomirror-size)
		# The same with verify = size: no file checked against its MD5
		# sidecar (the default, verify = sidecar, checks them).
		CMDLINE=("$BM" --state-dir "$s" sync --verify size --source "$URL$tree/" --dest "$d") ;;
	rclone)
		CMDLINE=(rclone --config /dev/null sync --http-url "$URL$tree/" :http: "$d" --transfers 8) ;;
	lftp)
		CMDLINE=(lftp -c "mirror --parallel=8 $URL$tree/ $d") ;;
	wget)
		CMDLINE=(wget -m -np -nH --cut-dirs=1 -nv -P "$d" "$URL$tree/") ;;
	cp)
		if [ "$phase" = cold ]; then
			CMDLINE=(cp -a "$SRC/$tree" "$d")
		else
			CMDLINE=(rsync -a "$SRC/$tree/" "$d/")
		fi ;;
	esac
}

# access-log statistics since line $1: "requests get head 304s bytes".
log_stats() {
	tail -n +"$(($1 + 1))" "$NGINX_ACCESS_LOG" | awk -F'"' '
	    { n++; split($2, r, " "); split($3, s, " ")
	      if (r[1] == "GET") g++; else if (r[1] == "HEAD") h++
	      if (s[1] == 304) nm++; b += s[2] }
	    END { printf "%d %d %d %d %.0f\n", n, g, h, nm, b }'
}

# verify TREE DEST TOOL: sets V_FILES, V_BYTES, V_COMPLETE (yes/no),
# V_MTIME (files whose mtime differs from the source, whole seconds).
# wget keeps the listing pages it crawled as index.html: those are dropped.
verify() {
	local tree=$1 d=$2 tool=$3 got=$T/lists/got
	tree_list "$d" > "$got"
	if [ "$tool" = wget ]; then
		# index.html of HTTP crawls, .listing of FTP ones
		awk -F'\t' '$1 != "index.html" && $1 !~ /\/index\.html$/ &&
		    $1 != ".listing" && $1 !~ /\/\.listing$/' "$got" > "$got.f"
		mv "$got.f" "$got"
	fi
	V_FILES=$(wc -l < "$got")
	V_BYTES=$(awk -F'\t' '{ s += $2 } END { printf "%.0f", s }' "$got")
	if cmp -s <(cut -f1,2 "$T/lists/$tree") <(cut -f1,2 "$got"); then
		V_COMPLETE=yes
	else
		V_COMPLETE=no
	fi
	V_MTIME=$(join -t "$(printf '\t')" -j1 -o 1.3,2.3 "$T/lists/$tree" "$got" |
	    awk -F'\t' '$1 != $2 { n++ } END { print n + 0 }')
}

# bm_check TREE DEST: biomirror's result must be byte-identical (sample) and
# carry the upstream mtimes.
bm_check() {
	local tree=$1 d=$2 f n=0
	[ "$V_COMPLETE" = yes ] || { BM_PROBLEMS="$BM_PROBLEMS; $tree: incomplete result"; return; }
	[ "$V_MTIME" = 0 ] || BM_PROBLEMS="$BM_PROBLEMS; $tree: $V_MTIME mtimes differ"
	while IFS= read -r f; do
		cmp -s "$SRC/$(src_of "$tree")/$f" "$d/$f" ||
		    BM_PROBLEMS="$BM_PROBLEMS; $tree: content differs: $f"
		n=$((n + 1))
	done < <(cut -f1 "$T/lists/$tree" | awk 'NR % 250 == 1 || NR == 2')
	CMP_SAMPLE=$n
}

# one_run TREE TOOL RUN PHASE DEST STATE
one_run() {
	local tree=$1 tool=$2 run=$3 phase=$4 d=$5 s=$6 before rc stats
	local el rss usr sys t0 t1 log=$T/logs/$tree-$tool-$run-$phase.log
	local wait_s
	if [ "$tree" = FA ] && [ "$tool" = biomirror-gridftp ] &&
	    [ "$phase" = cold ] && [ "$GRIDFTP_COLD_END" != 0 ]; then
		wait_s=$(( GRIDFTP_COLD_END + 61 - $(date +%s) ))
		if [ "$wait_s" -gt 0 ]; then
			say "waiting ${wait_s}s for gridftp's passive ports (TIME_WAIT)"
			sleep "$wait_s"
		fi
	fi
	prep "$tree"
	run_tool "$tool" "$tree" "$d" "$s" "$phase"
	CMDS["$tree $tool $phase"]=$(show_cmd "${CMDLINE[@]}")
	before=$(wc -l < "$NGINX_ACCESS_LOG")
	t0=$(date +%s.%N)
	/usr/bin/time -f '%e %M %U %S' -o "$T/run/time" "${CMDLINE[@]}" > "$log" 2>&1
	rc=$?
	t1=$(date +%s.%N)
	read -r el rss usr sys < <(tail -n 1 "$T/run/time")
	# Wall time from date(1) (ms resolution; time(1) has 10 ms).
	el=$(echo "$t0 $t1" | awk '{ printf "%.3f", $2 - $1 }')
	[ "$tree $tool $phase" = "FA biomirror-gridftp cold" ] &&
	    GRIDFTP_COLD_END=$(date +%s)
	stats=$(log_stats "$before")
	case $tree in F*) stats="0 0 0 0 0" ;; esac	# no nginx log for FTP
	prep_flush_only
	verify "$tree" "$d" "$tool"
	case $tool in biomirror*) bm_check "$tree" "$d" ;; esac
	[ "$rc" = 0 ] || say "  $tool exited $rc (log: $log)"
	# shellcheck disable=SC2086 # five numbers
	set -- $stats
	echo "$STAMP,$tree,$tool,$run,$phase,$el,$rss,$usr,$sys,$rc,$1,$2,$3,$4,$5,$FLUSH_S,$V_FILES,$V_BYTES,$V_COMPLETE,$V_MTIME" >> "$CSV"
	say "  $tree $tool run $run $phase: ${el}s rss ${rss}KiB exit $rc, $1 requests ($2 GET, $3 HEAD, $4 304), flush ${FLUSH_S}s, $V_FILES files $V_BYTES bytes complete=$V_COMPLETE mtime-mismatch=$V_MTIME"
	case $tool in
	biomirror*) [ "$rc" = 0 ] || BM_PROBLEMS="$BM_PROBLEMS; $tree run $run $phase: $tool exit $rc" ;;
	esac
}

# The flush after a run is timed separately (FLUSH_S): biomirror syncs
# before it publishes, the other tools leave their dirty pages behind.
prep_flush_only() {
	local t0 t1
	t0=$(date +%s.%N)
	sync
	t1=$(date +%s.%N)
	FLUSH_S=$(echo "$t0 $t1" | awk '{ printf "%.3f", $2 - $1 }')
}

declare -A CMDS
show_cmd() {	# ARG... -> one line, arguments with blanks in double quotes
	local a out=""
	for a in "$@"; do
		case $a in *" "*) a="\"$a\"" ;; esac
		out="$out${out:+ }$a"
	done
	printf '%s' "$out"
}
BM_PROBLEMS=""
CMP_SAMPLE=0
# tools_of TREE [ROUND]: the tools of one round, in the order they run.
# With --baseline, biomirror-base (the old binary) and biomirror (the new)
# come first, the old one first in odd rounds and second in even ones, so
# a drift of the machine over the rounds falls on both alike.
PEER_TOOLS="rclone lftp wget cp"
# Tree B also measures verify = size against the default, verify =
# sidecar (issue 5: sidecar at most 15% slower).
FTP_PEER_TOOLS="lftp wget biomirror-gridftp biomirror-gridftp-e globus-url-copy"
tools_of() {
	local bms=biomirror peers
	if [ -n "$BASE" ]; then
		if [ $(( ${2:-1} % 2 )) = 1 ]; then
			bms="biomirror-base biomirror"
		else
			bms="biomirror biomirror-base"
		fi
	fi
	case $1 in
	F*) peers=$FTP_PEER_TOOLS ;;
	B) peers="$PEER_TOOLS biomirror-size" ;;
	*) peers=$PEER_TOOLS ;;
	esac
	[ "$RUN_PEERS" = 1 ] || peers=""
	echo "$bms${peers:+ $peers}"
}

bench_tree() {
	local tree=$1 r tool d s
	for r in $(seq 1 "$RUNS"); do
		say "tree $tree round $r/$RUNS"
		for tool in $(tools_of "$tree" "$r"); do
			d=$T/dest/$tool
			s=$T/state/$tool
			rm -rf -- "$d" "$s"
			mkdir -p "$(dirname "$d")" "$(dirname "$s")"
			# cp -a SRC D creates D; the network tools get an empty D.
			[ "$tool" = cp ] || mkdir -p "$d"
			one_run "$tree" "$tool" "$r" cold "$d" "$s"
			one_run "$tree" "$tool" "$r" resync "$d" "$s"
			# Thousands of inodes freed just before the next tool's
			# cold run would slow its file creation (ext4 skips
			# recently deleted inodes for a minute): set the tree
			# aside and delete every such tree at the end.
			if [ "$tree" = A ] || [ "$tree" = FA ]; then
				mkdir -p "$T/trash"
				mv -- "$d" "$T/trash/$tree-$tool-$r"
				rm -rf -- "$s"
			else
				rm -rf -- "$d" "$s"
			fi
		done
	done
}

# ---------------------------------------------------------------- tables
median_of() {	# CSV field values on stdin -> median
	sort -g | awk '{ v[NR] = $1 } END {
	    if (NR == 0) { print "-"; exit }
	    if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

field() {	# TREE TOOL PHASE COLUMN -> values
	awk -F, -v t="$1" -v o="$2" -v p="$3" -v c="$4" \
	    '$2 == t && $3 == o && $5 == p { print $c }' "$CSV"
}

# durable TREE TOOL: median of cold run + the sync after it (data on disk).
durable() {
	awk -F, -v t="$1" -v o="$2" '$2 == t && $3 == o && $5 == "cold" { printf "%.3f\n", $6 + $16 }' "$CSV" | median_of
}

TABLES=""
table_tree() {
	local tree=$1 desc=$2 dur rd bmd tool bmc bmr c r rc rr mbs rss req_c req_r comp mt total out
	total=$(awk -F'\t' '{ s += $2 } END { printf "%.0f", s }' "$T/lists/$tree")
	bmc=$(field "$tree" biomirror cold 6 | median_of)
	bmr=$(field "$tree" biomirror resync 6 | median_of)
	bmd=$(durable "$tree" biomirror)
	out="Tree $tree: $desc, $(awk -v b="$total" 'BEGIN { printf "%.1f", b / 1e6 }') MB; median of $RUNS run(s)

| tool | cold s | re-sync s | cold / biomirror | re-sync / biomirror | cold MB/s | cold + flush s | cold + flush / biomirror | peak RSS MiB (cold) | requests cold / re-sync | complete | mtimes kept |
|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|
"
	for tool in $(tools_of "$tree"); do
		c=$(field "$tree" "$tool" cold 6 | median_of)
		r=$(field "$tree" "$tool" resync 6 | median_of)
		rc=$(awk -v a="$c" -v b="$bmc" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }')
		rr=$(awk -v a="$r" -v b="$bmr" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }')
		mbs=$(awk -v b="$total" -v s="$c" 'BEGIN { if (s > 0) printf "%.0f", b / s / 1e6; else print "-" }')
		dur=$(durable "$tree" "$tool")
		rd=$(awk -v a="$dur" -v b="$bmd" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }')
		rss=$(field "$tree" "$tool" cold 7 | median_of | awk '{ printf "%.0f", $1 / 1024 }')
		req_c=$(field "$tree" "$tool" cold 11 | median_of)
		req_r=$(field "$tree" "$tool" resync 11 | median_of)
		comp=$(awk -F, -v t="$tree" -v o="$tool" '$2 == t && $3 == o && ($19 != "yes" || $10 != 0) { bad++ }
		    END { print bad ? "NO (" bad " runs)" : "yes" }' "$CSV")
		mt=$(awk -F, -v t="$tree" -v o="$tool" '$2 == t && $3 == o && $19 == "yes" && $20 != 0 { bad++; m = $20 > m ? $20 : m }
		    END { print bad ? "no (up to " m " files differ)" : "yes" }' "$CSV")
		[ "$tool" = cp ] && { req_c=0; req_r=0; }
		out="$out| $tool | $c | $r | $rc | $rr | $mbs | $dur | $rd | $rss | $req_c / $req_r | $comp | $mt |
"
	done
	TABLES="$TABLES$out
"
	printf '\n%s\n' "$out"
}

# target NAME OK: one line of the targets list.
TARGETS=""
target() { TARGETS="$TARGETS- $1: **$2**
"; }

ratio_ok() {	# A B MIN -> "met (x2.31)" or "NOT met (x1.20)"
	awk -v a="$1" -v b="$2" -v m="$3" 'BEGIN {
	    if (b <= 0) { print "not measured"; exit }
	    r = a / b; printf "%s (%.2fx)", (r >= m ? "met" : "NOT met"), r }'
}

# cpu TREE TOOL PHASE -> user + sys seconds of each run
cpu() {
	awk -F, -v t="$1" -v o="$2" -v p="$3" \
	    '$2 == t && $3 == o && $5 == p { printf "%.2f\n", $8 + $9 }' "$CSV"
}

fmt3() { awk '{ if ($1 == "-") print; else printf "%.3f\n", $1 }'; }

# table_baseline: --baseline's table (BASE_TABLE), its raw wall times
# (BASE_RUNS) and the one-line verdict (BASE_VERDICT), from the CSV.
# A case holds when the new median is at most 1.05 x the old one.
BASE_TABLE="" BASE_RUNS="" BASE_VERDICT=""
table_baseline() {
	local tree phase name oc nc r ocpu ncpu rcpu orss nrss bad ok slow="" failed=0
	BASE_TABLE="| case | old s | new s | new / old | old CPU s | new CPU s | CPU new / old | old peak RSS MiB | new peak RSS MiB | new at most 5% slower |
|---|---:|---:|---:|---:|---:|---:|---:|---:|---|
"
	for tree in A B FA FB; do
		has_tree "$tree" || continue
		[ "$tree" = A ] && [ -n "${SKIP_HTTP_A:-}" ] && continue
		[ "$tree" = B ] && [ -n "${SKIP_HTTP_B:-}" ] && continue
		for phase in cold resync; do
			name="$tree ${phase/resync/no-change}"
			oc=$(field "$tree" biomirror-base "$phase" 6 | median_of | fmt3)
			nc=$(field "$tree" biomirror "$phase" 6 | median_of | fmt3)
			ocpu=$(cpu "$tree" biomirror-base "$phase" | median_of | fmt3)
			ncpu=$(cpu "$tree" biomirror "$phase" | median_of | fmt3)
			orss=$(field "$tree" biomirror-base "$phase" 7 | median_of | awk '{ printf "%.1f", $1 / 1024 }')
			nrss=$(field "$tree" biomirror "$phase" 7 | median_of | awk '{ printf "%.1f", $1 / 1024 }')
			r=$(awk -v a="$nc" -v b="$oc" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print "-" }')
			rcpu=$(awk -v a="$ncpu" -v b="$ocpu" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print "-" }')
			bad=$(awk -F, -v t="$tree" -v p="$phase" '$2 == t && $5 == p &&
			    ($3 == "biomirror" || $3 == "biomirror-base") &&
			    ($19 != "yes" || $10 != 0) { n++ } END { print n + 0 }' "$CSV")
			if [ "$bad" != 0 ]; then
				ok="not measured ($bad failed runs)"
				failed=1
			elif awk -v r="$r" 'BEGIN { exit !(r != "-" && r <= 1.05) }'; then
				ok=yes
			else
				ok=NO
				slow="$slow, $name ($r)"
			fi
			BASE_TABLE="$BASE_TABLE| $name | $oc | $nc | $r | $ocpu | $ncpu | $rcpu | $orss | $nrss | $ok |
"
			BASE_RUNS="$BASE_RUNS    $name: old $(field "$tree" biomirror-base "$phase" 6 | paste -sd ' ') | new $(field "$tree" biomirror "$phase" 6 | paste -sd ' ')
"
		done
	done
	if [ -n "$slow" ]; then
		BASE_VERDICT="NO: new/old above 1.05 in ${slow#, }"
	elif [ "$failed" = 1 ]; then
		BASE_VERDICT="not established: some runs failed (see the table)"
	else
		BASE_VERDICT="yes, in every case"
	fi
	BASE_VERDICT="new build at most 5% slower than the old (wall-time medians, new / old <= 1.05): $BASE_VERDICT"
}

# ---------------------------------------------------------------- run
T_START=$(date +%s)
if has_tree A && [ -z "${SKIP_HTTP_A:-}" ]; then
	say "== tree A: $TREE_DESC_A"
	bench_tree A
fi
if has_tree B && [ -z "${SKIP_HTTP_B:-}" ]; then
	say "== tree B: $TREE_DESC_B"
	bench_tree B
fi
if has_tree FA; then
	say "== tree FA: $TREE_DESC_A over FTP"
	bench_tree FA
fi
if has_tree FB; then
	say "== tree FB: $TREE_DESC_B over FTP"
	bench_tree FB
fi

RSS_LINES=""
if has_tree C; then
	say "== tree C: biomirror peak RSS on a 100,000-entry listing"
	d=$T/dest/C s=$T/state/C
	rm -rf -- "$d" "$s"
	mkdir -p "$d"
	for phase in plan cold resync; do
		prep C
		before=$(wc -l < "$NGINX_ACCESS_LOG")
		if [ "$phase" = plan ]; then
			cmd=("$BM" --state-dir "$s" sync --dry-run --source "${URL}C/" --dest "$d")
		else
			cmd=("$BM" --state-dir "$s" sync --source "${URL}C/" --dest "$d")
		fi
		CMDS["C biomirror $phase"]=$(show_cmd "${cmd[@]}")
		/usr/bin/time -v -o "$T/run/timev" "${cmd[@]}" > "$T/logs/C-$phase.log" 2>&1
		rc=$?
		rss=$(awk -F': ' '/Maximum resident set size/ { print $2 }' "$T/run/timev")
		el=$(awk -F': ' '/Elapsed \(wall clock\)/ { print $2 }' "$T/run/timev" |
		    awk -F: '{ s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; print s }')
		usr=$(awk -F': ' '/User time/ { print $2 }' "$T/run/timev")
		sys=$(awk -F': ' '/System time/ { print $2 }' "$T/run/timev")
		# shellcheck disable=SC2046 # five numbers
		set -- $(log_stats "$before")
		files=$(find "$d" -type f | wc -l)
		echo "$STAMP,C,biomirror,1,$phase,$el,$rss,$usr,$sys,$rc,$1,$2,$3,$4,$5,,$files,0,,"  >> "$CSV"
		say "  C biomirror $phase: ${el}s max RSS ${rss} KiB exit $rc, $1 requests, $files files in dest"
		[ "$rc" = 0 ] || BM_PROBLEMS="$BM_PROBLEMS; C $phase: exit $rc"
		RSS_LINES="$RSS_LINES| \`${phase/cold/sync (cold)}\` | $el | $(awk -v k="$rss" 'BEGIN { printf "%.1f", k / 1024 }') | $1 | $files | $rc |
"
	done
	RSS_LINES=${RSS_LINES//\`resync\`/\`sync (no change)\`}
	[ "$(find "$d" -type f | wc -l)" = 100000 ] ||
	    BM_PROBLEMS="$BM_PROBLEMS; C: $(find "$d" -type f | wc -l) of 100000 files"
	rm -rf -- "$d" "$s"
fi
T_END=$(date +%s)

# ---------------------------------------------------------------- report
echo
echo "== results ($(( (T_END - T_START) / 60 )) min), raw runs: $CSV"
if [ "$RUN_PEERS" = 1 ]; then
has_tree A && [ -z "${SKIP_HTTP_A:-}" ] && table_tree A "$TREE_DESC_A"
has_tree B && [ -z "${SKIP_HTTP_B:-}" ] && table_tree B "$TREE_DESC_B"
has_tree FA && table_tree FA "$TREE_DESC_A over FTP (vsftpd; gridftp for the last three rows)"
has_tree FB && table_tree FB "$TREE_DESC_B over FTP (vsftpd; gridftp for the last three rows)"
fi
if [ "$RUN_PEERS" = 1 ] && has_tree FA; then
	for tool in lftp wget; do
		for phase in cold resync; do
			target "FA $phase: biomirror faster than $tool (vsftpd)" \
			    "$(ratio_ok "$(field FA "$tool" "$phase" 6 | median_of)" \
			    "$(field FA biomirror "$phase" 6 | median_of)" 1)"
		done
	done
	for phase in cold resync; do
		target "FA $phase: biomirror, stream mode, faster than globus-url-copy (gridftp)" \
		    "$(ratio_ok "$(field FA globus-url-copy "$phase" 6 | median_of)" \
		    "$(field FA biomirror-gridftp "$phase" 6 | median_of)" 1)"
		target "FA $phase: biomirror, ftp_mode = extended, faster than globus-url-copy (gridftp)" \
		    "$(ratio_ok "$(field FA globus-url-copy "$phase" 6 | median_of)" \
		    "$(field FA biomirror-gridftp-e "$phase" 6 | median_of)" 1)"
	done
fi
if [ "$RUN_PEERS" = 1 ] && has_tree FB; then
	for phase in cold resync; do
		best=$( { field FB lftp "$phase" 6 | median_of; field FB wget "$phase" 6 | median_of; } | sort -g | head -1)
		target "FB $phase: biomirror no slower than the faster of lftp and wget ($best s, vsftpd)" \
		    "$(ratio_ok "$best" "$(field FB biomirror "$phase" 6 | median_of)" 1)"
		target "FB $phase: biomirror no slower than globus-url-copy (gridftp)" \
		    "$(ratio_ok "$(field FB globus-url-copy "$phase" 6 | median_of)" \
		    "$(field FB biomirror-gridftp "$phase" 6 | median_of)" 1)"
		target "FB $phase: biomirror, ftp_mode = extended, no slower than globus-url-copy (gridftp)" \
		    "$(ratio_ok "$(field FB globus-url-copy "$phase" 6 | median_of)" \
		    "$(field FB biomirror-gridftp-e "$phase" 6 | median_of)" 1)"
	done
fi
if [ "$RUN_PEERS" = 1 ] && has_tree A && [ -z "${SKIP_HTTP_A:-}" ]; then
	for tool in rclone lftp; do
		for phase in cold resync; do
			target "A $phase: biomirror at least 2x faster than $tool" \
			    "$(ratio_ok "$(field A "$tool" "$phase" 6 | median_of)" \
			    "$(field A biomirror "$phase" 6 | median_of)" 2)"
		done
		target "A cold + flush (data on disk): biomirror at least 2x faster than $tool" \
		    "$(ratio_ok "$(durable A "$tool")" "$(durable A biomirror)" 2)"
	done
fi
if [ "$RUN_PEERS" = 1 ] && has_tree B && [ -z "${SKIP_HTTP_B:-}" ]; then
	for phase in cold resync; do
		best=$( { field B rclone "$phase" 6 | median_of; field B lftp "$phase" 6 | median_of; } | sort -g | head -1)
		target "B $phase: biomirror no slower than the faster of rclone and lftp ($best s)" \
		    "$(ratio_ok "$best" "$(field B biomirror "$phase" 6 | median_of)" 1)"
	done
	best=$( { durable B rclone; durable B lftp; } | sort -g | head -1)
	target "B cold + flush (data on disk): biomirror no slower than the faster of rclone and lftp ($best s)" \
	    "$(ratio_ok "$best" "$(durable B biomirror)" 1)"
	# Throughput with sidecars >= 85% of without: time ratio >= 0.85.
	target "B cold: verify = sidecar (MD5) costs at most 15% of throughput against verify = size" \
	    "$(ratio_ok "$(field B biomirror-size cold 6 | median_of)" \
	    "$(field B biomirror cold 6 | median_of)" 0.85)"
fi
RSS_TABLE=""
if has_tree C; then
	RSS_TABLE="| biomirror run | seconds | max RSS MiB | requests | files in dest | exit |
|---|---:|---:|---:|---:|---:|
$RSS_LINES"
	printf '\nTree C: 100,000 zero-byte files in 100 directories\n\n%s' "$RSS_TABLE"
	worst=$(field C biomirror plan 7; field C biomirror cold 7; field C biomirror resync 7)
	worst=$(echo "$worst" | sort -g | tail -1)
	target "C: peak RSS below 64 MB (64,000,000 bytes) with a 100,000-entry listing, plan and sync" \
	    "$(awk -v k="$worst" 'BEGIN { printf "%s (worst %.1f MB = %.1f MiB)", (k * 1024 < 64e6 ? "met" : "NOT met"), k * 1024 / 1e6, k / 1024 }')"
fi
[ -n "$TARGETS" ] &&
    printf '\nTargets (ratios are the other tool'"'"'s median / biomirror'"'"'s; 1 or more is biomirror as fast or faster):\n%s' "$TARGETS"
BASE_HEAD=""
if [ -n "$BASE" ]; then
	table_baseline
	BASE_HEAD="biomirror new against old (\`--baseline\`): median of $RUNS run(s) each, the two
binaries alternately in every round (old first in odd rounds); wall seconds,
CPU = user + sys$(has_tree A && printf '\n- tree A: %s' "$TREE_DESC_A")$(has_tree B && printf '\n- tree B: %s' "$TREE_DESC_B")
- new: $BM_INFO (\`$BM_ORIG\`)
- old: $BASE_INFO (\`$BASE\`)"
	printf '\n%s\n\n%s\nRaw wall seconds, in run order:\n%s\n%s\n' \
	    "$BASE_HEAD" "$BASE_TABLE" "$BASE_RUNS" "$BASE_VERDICT"
fi
if [ -n "$BM_PROBLEMS" ]; then
	echo "biomirror PROBLEMS:${BM_PROBLEMS#;}"
else
	echo "biomirror results verified: complete (paths and sizes), all mtimes equal to the source, cmp on $CMP_SAMPLE sampled files per check"
fi

# ---------------------------------------------------------------- docs
ver() { "$@" 2>&1 | head -n 1; }
CPU=$(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)
MEM=$(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)
MACHINE="- machine: $(nproc) CPUs ($CPU), $MEM RAM, kernel $(uname -r), $(. /etc/os-release && echo "$PRETTY_NAME")
- disk: $FSTYPE on $(df -P "$T" | awk 'NR == 2 { print $1 }'); $DROP_NOTE
- server: $(ver /usr/sbin/nginx -v | sed 's/^nginx version: //'), one worker, autoindex (exact sizes), sendfile, on 127.0.0.1"
# Without the peers the two biomirror builds are listed in BASE_HEAD.
[ "$RUN_PEERS" = 1 ] && MACHINE="$MACHINE
- $BM_INFO (\`$BM_ORIG\`, copied before the first run); rclone $(rclone version 2>/dev/null | awk 'NR == 1 { print $2 }'); $(lftp --version | awk 'NR == 1 { print "lftp " $4 }'); $(ver wget --version | awk '{ print "wget " $3 }'); $(ver cp --version | sed 's/^cp (GNU coreutils) /coreutils /'); $(ver rsync --version | awk '{ print "rsync " $3 }')"
cmd_of() { printf '%s' "${CMDS["$1"]:-}" | sed "s#$URL#http://127.0.0.1:PORT/#g; s#$T/biomirror#biomirror#g; s#$T#\$W#g"; }
COMMANDS=""
CT=A
has_tree A || CT=B
for k in "$CT biomirror cold" "$CT biomirror-base cold" "$CT rclone cold" "$CT lftp cold" "$CT wget cold" "$CT cp cold" \
    "$CT cp resync" "C biomirror plan"; do
	c=$(cmd_of "$k")
	[ -n "$c" ] && COMMANDS="$COMMANDS    ${k#* }: $c
"
done
if [ -n "$BASE" ]; then
	SHOWN=" $ARGS"
else
	SHOWN="$( [ "$QUICK" = 1 ] && echo ' --quick')$( [ "$RUNS_SET" = 1 ] && echo " --runs $RUNS")"
fi
SECTION="## Measured: $(date -u +%Y-%m-%d) (\`tests/bench/local.sh$SHOWN\`)

$MACHINE

Commands (\$W is the work directory; the re-sync repeats the same command into
the same destination$( [ "$RUN_PEERS" = 1 ] && echo ", except cp, whose re-sync is \`rsync -a\`"); the trees
differ only in the URL, ending in \`A/\` or \`B/\`):

\`\`\`
$COMMANDS\`\`\`

$TABLES"
[ -n "$BASE" ] && SECTION="$SECTION
$BASE_HEAD

$BASE_TABLE
Raw wall seconds, in run order:

\`\`\`
$BASE_RUNS\`\`\`

$BASE_VERDICT
"
[ -n "$RSS_TABLE" ] && SECTION="$SECTION
Tree C: biomirror on 100,000 zero-byte files in 100 directories
(\`/usr/bin/time -v\`, Maximum resident set size; \`plan\` is \`sync --dry-run\`
with an empty manifest, then a cold sync, then a no-change sync)

$RSS_TABLE"
[ -n "$TARGETS" ] && SECTION="$SECTION
Targets (ratio = other tool's median / biomirror's):

$TARGETS"
[ -n "$BM_PROBLEMS" ] && SECTION="$SECTION
biomirror problems seen in this run:${BM_PROBLEMS#;}
"
printf '%s' "$SECTION" > "$OUTDIR/local-$STAMP.md"
if [ -n "$BASE" ]; then
	echo "tables (markdown; docs/performance.md untouched): $OUTDIR/local-$STAMP.md"
else
	echo "section for docs/performance.md: $OUTDIR/local-$STAMP.md"
fi
if [ "$DOC" = 1 ]; then
	python3 - "$ROOT/docs/performance.md" "$OUTDIR/local-$STAMP.md" <<'EOF' || fail "updating docs/performance.md"
import sys
doc, sec = sys.argv[1], sys.argv[2]
begin, end = "<!-- bench-local:begin -->", "<!-- bench-local:end -->"
new = open(sec, encoding="utf-8").read().rstrip("\n")
try:
    text = open(doc, encoding="utf-8").read()
except FileNotFoundError:
    text = "# Performance\n\n" + begin + "\n" + end + "\n"
if begin not in text or end not in text:
    text = text.rstrip("\n") + "\n\n" + begin + "\n" + end + "\n"
head, rest = text.split(begin, 1)
_, tail = rest.split(end, 1)
open(doc, "w", encoding="utf-8").write(head + begin + "\n" + new + "\n" + end + tail)
EOF
	echo "docs/performance.md updated"
fi
exit 0
