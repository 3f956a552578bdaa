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

mkdir -p "$T/mirror/empty" || fail "mkdir"
base=$(rss_baseline) || exit 1
echo "# empty tree, no change: max RSS $base KiB"

peak=$(rss_run flat "${NGINX_URL}flat/" "$T/mirror/flat" sync) || exit 1
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
