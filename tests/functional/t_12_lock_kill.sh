#!/bin/bash
# A concurrent second run exits 75 and names the holder's PID (also one
# with another state directory on the same destination: the destination
# is locked too, and the running run's temp files stay; through a symlink
# to the destination it names the real tree's holder); kill -9
# during a large transfer leaves no partial file under a final name, and
# the next run continues the temp file from its recorded ranges (or
# removes it when none were recorded yet) and completes.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup

mkdir -p "$T/up/big"
printf 'small\n' > "$T/up/small.txt"
make_big_file "$T/up/big/big.bin" 200 first
start_nginx "$T/up"
write_conf "$NGINX_URL"
assert_exit 0 bm sync up
assert_trees_equal "$T/up" "$T/mirror"
cp -p "$T/mirror/big/big.bin" "$T/old-big.bin"

# Upstream replaces the big file; a slow run (bwlimit) starts fetching it.
make_big_file "$T/up/big/big.bin" 200 second
touch -d '2022-02-03 04:05:06 UTC' "$T/up/big/big.bin"
"$BM" -c "$T/bm.conf" --state-dir "$T/state" sync --bwlimit 10M up \
    > "$T/slow.out" 2> "$T/slow.err" &
slow=$!
for _ in $(seq 1 100); do
	tmp=$(find "$T/mirror/big" -name '.biomirror-tmp.*' -size +1M | head -1)
	[ -n "$tmp" ] && break
	sleep 0.1
done
[ -n "$tmp" ] || { cat "$T/slow.out" "$T/slow.err"; ls -la "$T/mirror/big"; fail "no temp file appeared during the slow run"; }

echo "# a second run while the first holds the lock"
assert_exit 75 bm --json sync up
assert_eq "$(jfield status)" locked "status"
grep -q "pid $slow" "$T/last.err" || fail "the holder's PID ($slow) is not named"

# Another state directory (an ad-hoc run, or a second config) on the same
# destination: before, it removed the first run's temp files as left over
# (the first then failed with "commit: I/O error").  The destination
# itself is locked now.
echo "# a run with another state directory on the same destination"
assert_exit 75 "$BM" --state-dir "$T/other-state" --json sync \
    --source "$NGINX_URL" --dest "$T/mirror"
grep -q "the destination $T/mirror is in use by another run: mirror up of $T/bm.conf (state directory $T/state, pid $slow, running)" "$LAST_ERR" ||
    fail "no destination-lock message naming the holder: $(cat "$LAST_ERR")"
[ -e "$tmp" ] || fail "the running run's temp file was removed by the other run"
# Through a symlink to the destination: the real tree's lock and record
# (before: "an owner biomirror has no record of (no $T/.alias...)").
ln -s mirror "$T/alias"
assert_exit 75 "$BM" --state-dir "$T/other-state" sync \
    --source "$NGINX_URL" --dest "$T/alias"
grep -qF ": the destination $T/alias is in use by another run: mirror up of $T/bm.conf (state directory $T/state, pid $slow, running)" "$LAST_ERR" ||
    fail "a symlinked dest does not name the real tree's holder: $(cat "$LAST_ERR")"
[ -e "$T/.alias.biomirror-owner" ] && fail "a record beside the symlink"

echo "# kill -9 mid-transfer"
kill -9 "$slow"
wait "$slow" 2>/dev/null
cmp -s "$T/mirror/big/big.bin" "$T/old-big.bin" ||
    fail "the final name holds something other than the old complete file"
find "$T/mirror/big" -name '.biomirror-tmp.*' | grep -q . ||
    fail "expected the killed run's temp file"

echo "# the next run continues (or cleans up) and completes"
recorded=$(manifest_sql "$T/state" up "select count(*) from partials")
assert_exit 0 bm sync up
if [ "$recorded" = 1 ]; then
	grep -q '1 partly fetched files of an earlier run to continue' "$T/last.err" ||
	    fail "the recorded temp file was not continued"
	grep -q 'big/big.bin: continuing with [0-9]* of 209715200 bytes held' "$T/last.err" ||
	    fail "no 'continuing' message for big.bin"
else
	grep -q 'removed 1 temp file' "$T/last.err" || fail "temp file not reported as removed"
fi
assert_eq "$(manifest_sql "$T/state" up "select count(*) from partials")" 0 \
    "partial rows after the run"
assert_trees_equal "$T/up" "$T/mirror"
no_temps "$T/mirror"
echo PASS
