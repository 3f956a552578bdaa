#!/bin/bash
# A cold run of 100,000 files in one directory (issue 22, item 1): the
# plan holds one action per file for the whole run, so a cold run's peak
# RSS grows with the file count; this bounds the bytes per file.  nginx
# serves the directory as JSON autoindex (empty files, times to the
# second); the cold sync's peak RSS (time(1), and --json peak_rss_kib)
# must be under PER_FILE bytes per file above that of a run listing an
# empty tree.  biomirror 5155293 (176-byte actions, 104-byte scheduler
# records for every file, a malloc per path) took about 414-436 bytes per
# file; with them packed about 368-375; with records only for files in
# flight and 88-byte actions (h22m) about 179; with 56-byte actions (the
# recorded states apart) about 148.  Not asserted in a sanitizer build.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup

N=100000
PER_FILE=180

SAN=0
if ldd "$BM" 2>/dev/null | grep -q 'libasan\|libubsan' ||
    nm "$BM" 2>/dev/null | grep -q '__asan_init\|__ubsan_handle'; then
	SAN=1
fi

mkdir -p "$T/up" "$T/mirror" || fail "mkdir"
mount -t tmpfs -o size=512m,nr_inodes=400k,mode=0755 bmt104 "$T/up" ||
    fail "mount tmpfs"
mkdir -p "$T/up/flat" "$T/up/empty" || fail "mkdir"
( cd "$T/up/flat" && seq -f 'f%06.0f' 0 $((N - 1)) |
    xargs touch -d '2020-01-02 03:04' ) || fail "touch"
touch -d '2020-01-02 03:04' "$T/up/flat"
start_nginx "$T/up" "autoindex_format json;"

# run WHAT SOURCE DEST ARGS...: one biomirror under time(1); its peak RSS
# (KiB) is echoed, after the --json peak_rss_kib was checked against it.
run() {
	local what=$1 src=$2 dest=$3 max kib
	shift 3
	/usr/bin/time -f %M -o "$T/maxrss" "$BM" --state-dir "$T/state.$what" \
	    --json "$@" --source "$src" --dest "$dest" > "$T/last.out" \
	    2> "$T/last.err" || fail "$what: exit $? ($(tail -3 "$T/last.err"))"
	max=$(tail -n 1 "$T/maxrss")
	kib=$(jfield peak_rss_kib) || fail "$what: no peak_rss_kib in --json"
	[ "$kib" -gt 0 ] && [ "$kib" -le "$max" ] ||
	    fail "$what: peak_rss_kib $kib, time(1) says $max"
	echo "$max"
}

mkdir -p "$T/mirror/empty" || fail "mkdir"
base=$(run empty "${NGINX_URL}empty/" "$T/mirror/empty" sync) || exit 1
base=$(run empty "${NGINX_URL}empty/" "$T/mirror/empty" sync) || exit 1
echo "# empty tree, no change: max RSS $base KiB"

peak=$(run flat "${NGINX_URL}flat/" "$T/mirror/flat" sync) || exit 1
assert_eq "$(jfield listed)" "$N" "cold: listed"
assert_eq "$(jfield fetched)" "$N" "cold: fetched"
assert_eq "$(ls "$T/mirror/flat" | wc -l)" "$N" "cold: files in the mirror"
per=$(((peak - base) * 1024 / N))
echo "# cold, $N files: max RSS $peak KiB, $((peak - base)) KiB above the" \
    "empty run: $per bytes per file (at most $PER_FILE)"
if [ "$SAN" = 1 ]; then
	echo "# peak not asserted: sanitizer build"
else
	[ "$per" -le "$PER_FILE" ] ||
	    fail "cold: max RSS $peak KiB, $per bytes per file above the" \
	    "empty run's $base KiB, want at most $PER_FILE"
fi
echo "PASS"
