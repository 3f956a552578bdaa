#!/bin/bash
# What a file that ran out of retries leaves for the next run (issue 21),
# against tests/tools/faultserver.py, retries = 1, one stream:
# - a body cut on both tries (a transient failure, ETag known): exit 1,
#   the bytes held stay in one temp file with a partials row naming it
#   and its ranges, and the message says so; the next run asks only for
#   the rest (If-Range) and publishes the file;
# - a file held in part that then changed upstream (If-Range answered
#   with the new, longer version): its bytes are dropped and it starts
#   over at once, which is not a retry (nothing transient happened): the
#   restart gets the file whole and publishes it; no temp file, no row;
# - a large file whose body fails its sidecar twice: no temp file, no
#   row; the next run does not ask for it (and exits 1 for it, t_73).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup

U=$T/up
mkdir -p "$U"
make_big_file "$U/big.bin" 8 cut
make_big_file "$U/chg.bin" 4 old
make_big_file "$T/chg-v2.bin" 5 new
touch -d '2023-05-06 07:08:09 UTC' "$T/chg-v2.bin"
make_big_file "$U/bad.bin" 2 bad
echo "0123456789abcdef0123456789abcdef  bad.bin" > "$U/bad.bin.md5"
touch -d '2022-03-04 05:06:07 UTC' "$U/bad.bin.md5"
size=$((8 * 1048576))

# sent PATH: body bytes the fault server sent for PATH so far.
sent() {
	python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["sent"].get(sys.argv[2], 0))' \
	    "$FAULT_STATS" "$1"
}
gets() {
	python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["gets"].get(sys.argv[2], 0))' \
	    "$FAULT_STATS" "$1"
}
# big.bin: both tries of run 1 cut after 3,000,000 body bytes.  chg.bin:
# the first try cut, the second (If-Range) finds version 2 (5 MB).
start_faultserver "$U" normal \
    --fault "/big.bin=truncate,at=3000000,times=2" \
    --fault "/chg.bin=truncate,at=2000000,times=1" \
    --fault "/chg.bin=change,after=1,times=1,with=$T/chg-v2.bin"
write_conf "$FAULT_URL"
printf 'streams = 1\nretries = 1\nverify = sidecar\n' >> "$T/bm.conf"
M=$T/mirror

echo "# run 1: big.bin and bad.bin fail their last try; chg.bin restarts free"
c0=$(gets /chg.bin)
assert_exit 1 bm --json sync up
expect_counts 2 0 0 2
assert_eq "$(jerrors | tr '\n' ' ')" "bad.bin fetch big.bin fetch " "errors"
grep -q "up: big.bin: fetch: transfer closed with 2388608 bytes remaining to read (6000000 of $size bytes kept for the next run to continue)$" \
    "$LAST_ERR" || fail "big.bin: the bytes kept not said"
grep -q "up: chg.bin: fetch: upstream changed since the bytes held were fetched (If-Range answered 200): starting over$" \
    "$LAST_ERR" || fail "chg.bin: the change not said"
grep -q "up: chg.bin: fetch: upstream changed .* (retry" "$LAST_ERR" &&
    fail "chg.bin: the restart counted as a retry"
assert_eq "$(gets /chg.bin)" 3 "GETs of chg.bin in run 1 (cut, If-Range 200, whole)"
cmp "$U/chg.bin" "$M/chg.bin" || fail "chg.bin differs after run 1"
grep -q "up: bad.bin: fetch: checksum mismatch: .* again (the same body twice" \
    "$LAST_ERR" || fail "bad.bin: not failed on its digest"
assert_eq "$(grep -c 'kept for the next run' "$LAST_ERR")" 1 \
    "files said to keep bytes"
for f in big.bin bad.bin; do
	[ -e "$M/$f" ] && fail "$f published"
done
tmps=$(cd "$M" && ls -A | grep '^\.biomirror-tmp\.')
assert_eq "$(echo "$tmps" | wc -w)" 1 "temp files left (big.bin's only): $tmps"
assert_eq "$(stat -c %s "$M/$tmps")" 6000000 "bytes in big.bin's temp file"
cmp -n 6000000 "$U/big.bin" "$M/$tmps" || fail "the temp file's bytes"
assert_eq "$(manifest_sql "$T/state" up "SELECT CAST(path AS TEXT) || ' ' ||
    tmpname || ' ' || ranges || ' ' || (etag IS NOT NULL) FROM partials")" \
    "big.bin $tmps 0-6000000 1" "partials rows"

echo "# run 2: big.bin continues, chg.bin is unchanged, bad.bin is not asked for"
b0=$(sent /big.bin) c0=$(gets /chg.bin) d0=$(gets /bad.bin) s0=$(sent /chg.bin)
assert_exit 1 bm --json sync up	# bad.bin's recorded mismatch (t_73)
expect_counts 1 0 0 1
assert_eq "$(jerrors)" "bad.bin fetch" "errors"
grep -q "up: big.bin: continuing with 6000000 of $size bytes held: 1 range(s)" \
    "$LAST_ERR" || fail "big.bin not continued"
grep -q 'chg.bin: continuing' "$LAST_ERR" && fail "chg.bin continued"
# The rest of big.bin and the one-byte end check; nothing held asked again.
assert_eq "$(($(sent /big.bin) - b0))" $((size - 6000000 + 1)) "big.bin bytes sent"
assert_eq "$(($(gets /chg.bin) - c0))" 0 "GETs of chg.bin"
assert_eq "$(($(sent /chg.bin) - s0))" 0 "chg.bin bytes sent"
assert_eq "$(($(gets /bad.bin) - d0))" 0 "GETs of bad.bin"
cmp "$U/big.bin" "$M/big.bin" || fail "big.bin differs"
cmp "$U/chg.bin" "$M/chg.bin" || fail "chg.bin differs"
no_temps "$M"
assert_eq "$(manifest_sql "$T/state" up "SELECT count(*) FROM partials")" 0 \
    "partials rows"
echo PASS
