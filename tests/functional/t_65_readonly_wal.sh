#!/bin/bash
# status, ls and history (manifest_open_read) of a manifest whose WAL
# holds commits not yet in the file (nginx, real runs):
#  - while a run is in progress, as nobody: exit 0, the run shown running
#    and the files of the run before;
#  - after that run is killed with -9 (its WAL and WAL index left behind),
#    as nobody and as root through a read-only bind mount of the state
#    directory: exit 0, the run shown interrupted; nothing written;
#  - with that WAL left but its index (-shm) gone, a reader that may not
#    write the state directory cannot apply the commits: exit 2 and a
#    message that says why (the WAL's path), never the older content of
#    the file alone; once a command runs as the owner, nobody reads it
#    again.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup
mkdir -p "$T/up"
for f in a b c; do printf 'content %s\n' "$f" > "$T/up/$f.txt"; done
chmod -R a+rX "$T/up"
start_nginx "$T/up"
write_conf "$NGINX_URL"

assert_exit 0 bm --json sync up
expect_counts 3 0 0 0
make_big_file "$T/up/big.bin" 64 k
chmod a+r "$T/up/big.bin"
chmod 0755 "$T"
chmod -R a+rX "$T/state" "$T/bm.conf"
M=$T/state/manifests

# nobody_bm CMD...: biomirror as nobody on this test's state directory.
nobody_bm() {
	runuser -u nobody -- "$BM" -c "$T/bm.conf" --state-dir "$T/state" "$@"
}

"$BM" -c "$T/bm.conf" --state-dir "$T/state" sync --bwlimit 2M up \
    > "$T/slow.out" 2> "$T/slow.err" &
slow=$!
for _ in $(seq 1 100); do
	tmp=$(find "$T/mirror" -name '.biomirror-tmp.*' -size +100k 2>/dev/null | head -1)
	[ -n "$tmp" ] && break
	sleep 0.1
done
[ -n "$tmp" ] || { cat "$T/slow.err"; fail "the slow run did not start fetching"; }
[ -s "$M/up.db-wal" ] || fail "no WAL while the run is in progress"

echo "# a run in progress, status and ls as nobody"
assert_exit 0 nobody_bm status up
grep -qx "up: running now (pid $slow)" "$LAST_OUT" || fail "status as nobody: $(cat "$LAST_OUT")"
assert_exit 0 nobody_bm ls up
assert_eq "$(awk '{ print $NF }' "$LAST_OUT" | tr '\n' ,)" "a.txt,b.txt,c.txt," "ls as nobody"

kill -9 "$slow"
wait "$slow" 2>/dev/null
[ -s "$M/up.db-wal" ] && [ -e "$M/up.db-shm" ] || fail "kill -9 left no WAL"
sum0=$(cat "$M"/up.db* | sha256sum)

echo "# after kill -9: nobody, and root through a read-only bind mount"
echo "# (exit 1: the last finished run, interrupted, is not ok)"
assert_exit 1 nobody_bm status up
grep -q "^up: last run 2 at .*: interrupted; the run ended without recording its end" \
    "$LAST_OUT" || fail "status as nobody after kill -9: $(cat "$LAST_OUT")"
assert_exit 0 nobody_bm history up
grep -q "^ *2 .* interrupted " "$LAST_OUT" || fail "history as nobody: $(cat "$LAST_OUT")"
mkdir "$T/ro"
mount --bind -o ro "$T/state" "$T/ro" || fail "bind mount"
assert_exit 1 "$BM" -c "$T/bm.conf" --state-dir "$T/ro" status up
grep -q "^up: last run 2 at .*: interrupted; " "$LAST_OUT" ||
    fail "status on a read-only mount: $(cat "$LAST_OUT")"
umount "$T/ro"
assert_eq "$(cat "$M"/up.db* | sha256sum)" "$sum0" "manifest files unchanged"

echo "# the WAL left without its index: nobody cannot apply it"
rm "$M/up.db-shm"
assert_exit 2 nobody_bm status up
grep -qxF "biomirror: up: $M/up.db: unable to open database file ($M/up.db-wal holds commits not yet in the file, which only a process that may write the state directory can apply: any biomirror command run as the manifest's owner does)" \
    "$LAST_ERR" || fail "message: $(cat "$LAST_ERR")"
[ -s "$LAST_OUT" ] && fail "output without the WAL's commits: $(cat "$LAST_OUT")"
assert_exit 1 bm status up
grep -q "^up: last run 2 at .*: interrupted; " "$LAST_OUT" || fail "status as root"
assert_exit 1 nobody_bm status up
grep -q "^up: last run 2 at .*: interrupted; " "$LAST_OUT" || fail "status as nobody at last"

stop_servers
[ -z "$(bm_leftovers)" ] || fail "processes left: $(bm_leftovers)"
echo "PASS"
