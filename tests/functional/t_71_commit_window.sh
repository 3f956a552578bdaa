#!/bin/bash
# A run killed (SIGKILL) after a batch's renames and before its manifest
# transaction: strace kills it at the first fsync of a parent directory,
# which follows the renames.  The files it published are biomirror's: the
# batch wrote its intents to the manifest before the renames, and the
# next run records those files (adopted) instead of taking them for files
# it never committed.  Upstream then changes again (the changed file and
# the new one deleted, a file turned back into a directory): the next run
# converges to it exactly (before: exit 1 on every run, "the local file
# is not the one biomirror committed: it stays", the new file never
# deleted, C/again never fetched; break-it brk7 #1).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup
command -v strace > /dev/null || fail "strace is not installed (make deps)"

mkdir -p "$T/up/C"
echo v1 > "$T/up/chg.txt"
echo c0 > "$T/up/C/c0"
echo keep > "$T/up/keep.txt"
touch -d '2020-01-01 UTC' "$T/up/chg.txt" "$T/up/C/c0" "$T/up/keep.txt"
chmod -R a+rX "$T/up"
start_nginx "$T/up"
write_conf "$NGINX_URL"
printf 'max_delete = 100%%\n' >> "$T/bm.conf"
assert_exit 0 bm sync up

echo "# v2: a changed file, a new one, a directory that became a file"
echo "v2 changed" > "$T/up/chg.txt"
echo new > "$T/up/new.txt"
rm -rf "$T/up/C"
echo "C is a file" > "$T/up/C"
touch -d '2021-01-01 UTC' "$T/up/chg.txt" "$T/up/new.txt" "$T/up/C"
chmod -R a+rX "$T/up"
strace -f -qq -o /dev/null -e trace=fsync -e inject=fsync:signal=KILL:when=1 \
    "$BM" -c "$T/bm.conf" --state-dir "$T/state" sync up \
    > "$T/killed.out" 2> "$T/killed.err"
rc=$?
[ "$rc" -ne 0 ] || fail "the run was not killed (exit 0)"
# The kill came after the renames (else this test proves nothing).
assert_eq "$(cat "$T/mirror/chg.txt")" "v2 changed" "chg.txt renamed before the kill"
[ -f "$T/mirror/new.txt" ] || fail "new.txt was not renamed before the kill"
[ -f "$T/mirror/C" ] || fail "C was not published as a file before the kill"
assert_eq "$(manifest_sql "$T/state" up "SELECT count(*) FROM files WHERE path = CAST('new.txt' AS BLOB)")" 0 \
    "the killed batch's manifest transaction did not run"
assert_eq "$(manifest_sql "$T/state" up "SELECT count(*) FROM intents")" 3 \
    "intents left by the killed batch"

echo "# v3: chg.txt and new.txt gone, C a directory again"
rm -f "$T/up/chg.txt" "$T/up/new.txt" "$T/up/C"
mkdir -p "$T/up/C"
echo again > "$T/up/C/again"
chmod -R a+rX "$T/up"
assert_exit 0 bm --json sync up
grep -q 'up: 3 files published by an earlier run that was stopped before it recorded them: recorded now' "$LAST_ERR" ||
    fail "the killed run's files were not recorded: $(cat "$LAST_ERR")"
assert_trees_equal "$T/up" "$T/mirror"
no_temps "$T/mirror"
assert_eq "$(manifest_sql "$T/state" up "SELECT count(*) FROM intents")" 0 "intents after the run"
assert_exit 0 bm --json sync up
expect_counts 0 0 0 0
stop_servers
echo PASS
