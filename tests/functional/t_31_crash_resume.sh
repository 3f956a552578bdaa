#!/bin/bash
# Crash test (resume across runs): a sync of 4 x 64 MiB files from nginx
# (limit_rate per connection, so that a run lasts several seconds) is
# killed with SIGKILL at 20 random moments, and rerun after each.  After
# every kill no file under a final name differs from upstream; a final
# run completes with an identical tree, no temp file and no partial row;
# the bytes nginx sent for the big files over all runs (its access log,
# $body_bytes_sent, also for the killed requests) stay below 1.5 x the
# tree's size, because each run continues from the ranges the killed one
# recorded; the final run counts only the bytes it received.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup

KILLS=${BM_CRASH_KILLS:-20}
mkdir -p "$T/up/sub"
for i in 1 2 3 4; do
	make_big_file "$T/up/sub/big$i.bin" 64 "crash$i"
done
printf 'small\n' > "$T/up/small.txt"
touch -d '2022-05-06 07:08:09 UTC' "$T/up/small.txt"
tree_bytes=$((4 * 64 * 1048576))
# 3 MB/s per request (nginx counts what it hands the socket, so the
# rate is set at the server: a client-side limit would let kernel
# buffers fill with bytes a killed run never wrote).
# sendfile_max_chunk keeps nginx from sending 2 MiB bursts.
start_nginx "$T/up" "limit_rate 3m;" "sendfile_max_chunk 128k;"
write_conf "$NGINX_URL"
cat >> "$T/bm.conf" <<CONF
streams = 4
min_split = 8M
max_connections = 8
CONF

# check_final_names: every file under a final name is upstream's.
check_final_names() {
	local f
	while IFS= read -r -d '' f; do
		cmp -s "$T/up/$f" "$T/mirror/$f" ||
		    fail "after kill $1: $f differs from upstream"
	done < <(cd "$T/mirror" 2>/dev/null &&
	    find . -type f ! -name '.biomirror-tmp.*' -printf '%P\0')
}

seed=${BM_CRASH_SEED:-$RANDOM}
echo "# seed $seed"
RANDOM=$seed
for k in $(seq 1 "$KILLS"); do
	"$BM" -c "$T/bm.conf" --state-dir "$T/state" sync up \
	    > "$T/run$k.out" 2> "$T/run$k.err" &
	pid=$!
	# 0.3 .. 1.0 s after the start
	sleep "0.$((3 + RANDOM % 8))"
	kill -KILL "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	check_final_names "$k"
	held=$(manifest_sql "$T/state" up \
	    "select coalesce(group_concat(cast(path as text), ' '), '-') from partials")
	echo "# kill $k: partial rows: $held"
done

echo "# a final run completes"
held=$(manifest_sql "$T/state" up "select count(*) from partials")
# Big files still to fetch (any under its final name is upstream's).
tofetch=0
for i in 1 2 3 4; do [ -f "$T/mirror/sub/big$i.bin" ] || tofetch=$((tofetch + 1)); done
assert_exit 0 bm --json sync up
assert_trees_equal "$T/up" "$T/mirror"
# Its bytes are what it received, not the whole of the files it continued
# (the held ranges are at least min_split = 8 MiB each).
echo "# final run: $(jfield bytes) bytes for $tofetch big files, $held held in part before"
if [ "$held" -gt 0 ]; then
	[ "$(jfield bytes)" -lt $((tofetch * 67108864)) ] ||
	    fail "the final run counts the bytes held from earlier runs: $(jfield bytes)"
fi
no_temps "$T/mirror"
assert_eq "$(manifest_sql "$T/state" up "select count(*) from partials")" 0 \
    "partial rows after the final run"
assert_eq "$(manifest_sql "$T/state" up \
    "select count(*) from files where type = 102")" 5 "files in the manifest"

# nginx logs a killed request when it notices the closed connection.
sleep 1
sent=$(awk '$5 ~ /^\/sub\/big[0-9]\.bin$/ { s += $8 } END { printf "%d", s }' \
    "$NGINX_ACCESS_LOG")
echo "# bytes sent for the big files over $((KILLS + 1)) runs: $sent" \
    "(tree: $tree_bytes, ratio $(awk -v a="$sent" -v b="$tree_bytes" \
    'BEGIN { printf "%.3f", a / b }'))"
[ "$sent" -ge "$tree_bytes" ] || fail "fewer bytes sent ($sent) than the tree holds"
[ "$sent" -lt $((tree_bytes * 3 / 2)) ] ||
    fail "resume did not work: $sent bytes sent for a $tree_bytes-byte tree"

# verify = checksum hashes each file from its temp file: a continued one
# was reopened write-only, its digest failed ("digest: I/O error") and it
# was fetched again from byte 0 (break-it brk7 #2).
echo "# verify = checksum: a continued file is hashed, not fetched again"
make_big_file "$T/up/sub/cs.bin" 64 checksum
printf 'verify = checksum\n' >> "$T/bm.conf"
"$BM" -c "$T/bm.conf" --state-dir "$T/state" sync up > "$T/cs1.out" 2> "$T/cs1.err" &
pid=$!
for _ in $(seq 1 100); do
	n=$(manifest_sql "$T/state" up "select count(*) from partials where path = cast('sub/cs.bin' as blob)")
	[ "$n" = 1 ] && break
	sleep 0.1
done
kill -KILL "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
[ "$n" = 1 ] || fail "no ranges of sub/cs.bin recorded before the kill"
assert_exit 0 bm --json sync up
grep -q 'sub/cs.bin: continuing with' "$LAST_ERR" || fail "sub/cs.bin was not continued"
grep -q 'digest' "$LAST_ERR" && fail "the continued file's digest failed: $(grep digest "$LAST_ERR")"
assert_trees_equal "$T/up" "$T/mirror"
echo PASS
