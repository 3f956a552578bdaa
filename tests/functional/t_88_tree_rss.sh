#!/bin/bash
# A tree of 100,000 files in 100 directories (issue 22, item 1): a run
# stages its listing in batches as the crawl hands them on and never
# holds it whole, so a no-change run's peak RSS stays near an empty
# run's.  nginx serves the tree as JSON autoindex (exact sizes, times to
# the second), the mirror is a copy of it adopted by resync --adopt (no
# 100,000 GETs), then a no-change sync lists every entry: its peak RSS
# (time(1), and --json peak_rss_kib) must be under EXTRA_KIB above that
# of a run listing an empty tree.  biomirror 7b342f1 (the listing held
# whole, then sorted and staged) was about 29 MB above.  Not asserted in
# a sanitizer build.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup

DIRS=100
PER=1000
EXTRA_KIB=$((16 * 1024))

SAN=0
if ldd "$BM" 2>/dev/null | grep -q 'libasan\|libubsan' ||
    nm "$BM" 2>/dev/null | grep -q '__asan_init\|__ubsan_handle'; then
	SAN=1
fi

mkdir -p "$T/up" "$T/mirror" || fail "mkdir"
mount -t tmpfs -o size=512m,nr_inodes=400k,mode=0755 bmt88 "$T/up" ||
    fail "mount tmpfs"
mkdir -p "$T/up/tree" "$T/up/empty" || fail "mkdir"
for d in $(seq -f 'd%03g' 0 $((DIRS - 1))); do
	mkdir "$T/up/tree/$d" && ( cd "$T/up/tree/$d" &&
	    seq -f 'f%04g' 0 $((PER - 1)) | xargs touch -d '2020-01-02 03:04' )
done || fail "touch"
touch -d '2020-01-02 03:04' "$T/up/tree"/d* "$T/up/tree"
start_nginx "$T/up" "autoindex_format json;"

mkdir -p "$T/mirror/empty" || fail "mkdir"
base=$(rss_baseline) || exit 1
echo "# empty tree, no change: max RSS $base KiB"

cp -a "$T/up/tree" "$T/mirror/tree" || fail "cp"
rss_run tree "${NGINX_URL}tree/" "$T/mirror/tree" resync --adopt > /dev/null ||
    exit 1
assert_eq "$(jfield listed)" $((DIRS * PER + DIRS)) "adopt: listed"
assert_eq "$(jfield fetched)" 0 "adopt: fetched"
peak=$(rss_run tree "${NGINX_URL}tree/" "$T/mirror/tree" sync) || exit 1
assert_eq "$(jfield listed)" $((DIRS * PER + DIRS)) "no change: listed"
assert_eq "$(jfield fetched)" 0 "no change: fetched"
assert_eq "$(jfield touched)" 0 "no change: touched"
echo "# tree $((DIRS * PER)) files, no change: max RSS $peak KiB," \
    "$((peak - base)) KiB above the empty run (at most $EXTRA_KIB)"
if [ "$SAN" = 1 ]; then
	echo "# peak not asserted: sanitizer build"
else
	[ $((peak - base)) -le "$EXTRA_KIB" ] ||
	    fail "no change: max RSS $peak KiB, $((peak - base)) KiB above" \
	    "the empty run's $base, want at most $EXTRA_KIB"
fi
echo "PASS"
