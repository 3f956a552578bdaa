#!/bin/bash
# A file rewritten in place upstream (same size, new mtime and ETag) while
# its ranges run: every range saw the old validators when it started, so
# only the end check can tell (a GET of byte 0 over HTTP, MDTM + SIZE over FTP,
# after the last range).  Exact outcomes, over HTTP (our fault server,
# fault "rewrite") and FTP (ftpfaultserver.py, mode rewrite):
#  - the check sees the new version: the try starts over, the file ends
#    up as the new version byte for byte (exit 0), the log says upstream
#    changed during the transfer, the server saw one check per try;
#  - with --retries 0: exit 1, nothing under the final name, no temp
#    file, no committed manifest row, the reason recorded;
#  - a check that fails transiently (503 to it) is retried, never
#    published unchecked; with --retries 0 it fails the file, its bytes
#    kept (recorded) for the next run;
#  - a server that refuses HEAD is no matter: the check is a GET;
#  - an unchanged file in ranges costs exactly one check; one stream (or
#    a file below min_split) none.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup
mkdir -p "$T/up" "$T/alt"
make_big_file "$T/up/big.bin" 4 version-a
make_big_file "$T/alt/big.bin" 4 version-b
touch -d '2023-04-05 06:07:08 UTC' "$T/alt/big.bin"
printf 'small\n' > "$T/up/small.txt"
cmp -s "$T/up/big.bin" "$T/alt/big.bin" && fail "versions A and B are equal"
# The fault server's ETag of version B: "<mtime hex>-<size hex>".
etag_b=$(printf '"%x-%x"' "$(stat -c %Y "$T/alt/big.bin")" $((4 * 1048576)))

count() {	# count KEY PATH: a per-path count of the HTTP fault server
	python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]].get(sys.argv[3], 0))' \
	    "$FAULT_STATS" "$1" "$2"
}
files_rows() {
	manifest_sql "$T/state" up \
	    "select count(*) from files where cast(path as text) = 'big.bin'"
}
http() {	# http [FAULTSERVER OPTION...]: a fresh mirror of $T/up in 4 ranges
	stop_servers
	rm -rf "$T/mirror" "$T/state"
	start_faultserver "$T/up" normal "$@"
	write_conf "$FAULT_URL"
	printf 'streams = 4\nmin_split = 1M\n' >> "$T/bm.conf"
}
ftp() {		# ftp MODE [OPTION...]: the same over FTP
	stop_servers
	rm -rf "$T/mirror" "$T/state"
	start_ftpfault "$T/up" "$@"
	write_conf "$FTPFAULT_URL"
	printf 'streams = 4\nmin_split = 1M\n' >> "$T/bm.conf"
}
ends_as_b() {	# ends_as_b: a sync succeeds with big.bin as version B
	assert_exit 0 bm --json sync up
	expect_counts 2 0 0 0
	cmp -s "$T/alt/big.bin" "$T/mirror/big.bin" || fail "big.bin is not version B"
	no_temps "$T/mirror"
}
not_published() {	# not_published: big.bin failed and left nothing
	[ -e "$T/mirror/big.bin" ] && fail "big.bin published"
	no_temps "$T/mirror"
	assert_eq "$(files_rows)" 0 "committed rows of big.bin"
	assert_eq "$(manifest_sql "$T/state" up "select count(*) from partials")" 0 \
	    "partial rows"
}

echo "# HTTP: rewritten during the transfer: start over, end as version B"
http --fault "/big.bin=rewrite,after=4,with=$T/alt/big.bin"
ends_as_b
grep -q 'big.bin: fetch: upstream changed during the transfer (ETag now .*, the ranges had .*): starting over (retry 1 of 5)' \
    "$LAST_ERR" || fail "the change during the transfer was not logged"
assert_eq "$(count gets /big.bin)" 10 "GETs of big.bin (two tries of 4 ranges and a check)"
assert_eq "$(count checks /big.bin)" 2 "checks of big.bin (one per try)"
assert_eq "$(count heads /big.bin)" 0 "HEADs of big.bin"
assert_eq "$(count checks /small.txt)" 0 "checks of small.txt"
assert_eq "$(manifest_sql "$T/state" up \
    "select etag from files where cast(path as text) = 'big.bin'")" "$etag_b" "recorded ETag"

echo "# HTTP: ... with --retries 0: failed, nothing published"
http --fault "/big.bin=rewrite,after=4,with=$T/alt/big.bin"
assert_exit 1 bm --json sync --retries 0 up
expect_counts 1 0 0 1
assert_eq "$(jerrors)" "big.bin fetch" "errors"
not_published
assert_eq "$(count checks /big.bin)" 1 "checks of big.bin"
grep -q 'big.bin: fetch: upstream changed during the transfer' "$LAST_ERR" ||
    fail "the failure was not logged"
manifest_sql "$T/state" up "select reason from events where \
    cast(path as text) = 'big.bin' and op = 'failed'" |
    grep -q '^upstream changed during the transfer' || fail "the reason was not recorded"

echo "# HTTP: a check that fails transiently is retried, never skipped"
http --fault "/big.bin=status,code=503,range=0-0,times=1"
assert_exit 0 bm --json sync up
expect_counts 2 0 0 0
assert_trees_equal "$T/up" "$T/mirror"
grep -q 'big.bin: fetch: checking upstream after the ranges: HTTP 503 (retry 1 of 5)' \
    "$LAST_ERR" || fail "the failed check was not retried"
assert_eq "$(count checks /big.bin)" 2 "checks of big.bin"
http --fault "/big.bin=status,code=503,range=0-0"
assert_exit 1 bm --json sync --retries 0 up
# Transient: the bytes stay, recorded, for the next run (t_91); never
# under the final name, never a committed row.
grep -q 'big.bin: fetch: checking upstream after the ranges: HTTP 503 (4194304 of 4194304 bytes kept for the next run to continue)$' \
    "$LAST_ERR" || fail "the failed check: not said"
[ -e "$T/mirror/big.bin" ] && fail "big.bin published"
assert_eq "$(files_rows)" 0 "committed rows of big.bin"
assert_eq "$(manifest_sql "$T/state" up "select cast(path as text) || ' ' ||
    ranges from partials")" "big.bin 0-4194304" "partial rows"

echo "# HTTP: a server that refuses HEAD: no matter, the check is a GET"
http --fault "/big.bin=status,code=405,method=HEAD"
assert_exit 0 bm --json sync up
expect_counts 2 0 0 0
assert_trees_equal "$T/up" "$T/mirror"
assert_eq "$(count heads /big.bin)" 0 "HEADs of big.bin"
assert_eq "$(count checks /big.bin)" 1 "checks of big.bin"

echo "# HTTP: unchanged in ranges: one check; one stream or below min_split: none"
http
assert_exit 0 bm --json sync up
assert_trees_equal "$T/up" "$T/mirror"
assert_eq "$(count gets /big.bin)" 5 "GETs of big.bin (4 ranges and the check)"
assert_eq "$(count checks /big.bin)" 1 "checks of big.bin in ranges"
grep -q 'changed during the transfer' "$LAST_ERR" && fail "a change was seen"
for opt in "--streams 1" "--min-split 8M"; do
	http
	# shellcheck disable=SC2086
	assert_exit 0 bm --json sync $opt up
	assert_trees_equal "$T/up" "$T/mirror"
	assert_eq "$(count gets /big.bin)" 1 "GETs of big.bin with $opt"
	assert_eq "$(count checks /big.bin)" 0 "checks of big.bin with $opt"
done

echo "# FTP: rewritten during the transfer: start over, end as version B"
ftp rewrite --rewrite-with "$T/alt" --rewrite-after 4
ends_as_b
grep -q 'big.bin: fetch: upstream changed during the transfer (mtime now 2023-04-05T06:07:08Z, the ranges had 2021-01-02T03:04:05Z): starting over (retry 1 of 5)' \
    "$LAST_ERR" || fail "the change during the transfer was not logged"
assert_eq "$(ftpfault_stat 's["retrs"]["big.bin"]')" 8 "RETRs of big.bin"
# Each range sends MDTM before its RETR; the check one MDTM + SIZE more.
assert_eq "$(ftpfault_stat 's["mdtms"]["big.bin"]')" 10 "MDTMs of big.bin"
assert_eq "$(ftpfault_stat 's["sizes"]["big.bin"]')" 10 "SIZEs of big.bin"
assert_eq "$(stat -c %Y "$T/mirror/big.bin")" "$(stat -c %Y "$T/alt/big.bin")" "mtime of big.bin"

echo "# FTP: ... with --retries 0: failed, nothing published"
ftp rewrite --rewrite-with "$T/alt" --rewrite-after 4
assert_exit 1 bm --json sync --retries 0 up
expect_counts 1 0 0 1
assert_eq "$(jerrors)" "big.bin fetch" "errors"
not_published
assert_eq "$(ftpfault_stat 's["mdtms"]["big.bin"]')" 5 "MDTMs of big.bin"

echo "# FTP: unchanged in ranges: one MDTM more than RETRs; one stream: none"
ftp normal
assert_exit 0 bm --json sync up
assert_trees_equal "$T/up" "$T/mirror"
assert_eq "$(ftpfault_stat 's["retrs"]["big.bin"]')" 4 "RETRs of big.bin"
assert_eq "$(ftpfault_stat 's["mdtms"]["big.bin"]')" 5 "MDTMs of big.bin in ranges"
for opt in "--streams 1" "--min-split 8M"; do
	ftp normal
	# shellcheck disable=SC2086
	assert_exit 0 bm --json sync $opt up
	assert_trees_equal "$T/up" "$T/mirror"
	assert_eq "$(ftpfault_stat 's["retrs"]["big.bin"]')" 1 "RETRs of big.bin with $opt"
	assert_eq "$(ftpfault_stat 's["mdtms"]["big.bin"]')" 1 "MDTMs of big.bin with $opt"
	assert_eq "$(ftpfault_stat 's["sizes"].get("big.bin", 0)')" 0 "SIZEs of big.bin with $opt"
done
echo PASS
