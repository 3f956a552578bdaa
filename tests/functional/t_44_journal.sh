#!/bin/bash
# Logging for the journal: with JOURNAL_STREAM set (systemd sets it for a
# service whose stderr goes to the journal) every stderr line starts with
# its syslog priority (<3> error, <4> warning, <6> info, <7> debug) instead
# of "biomirror: ", and no progress line is drawn even on a terminal
# (where one is drawn without JOURNAL_STREAM), and no escape sequence.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup
make_tree "$T/up"
# A file nginx refuses (403): a warning per try, then an error for the run.
echo secret > "$T/up/locked.txt"
chmod 000 "$T/up/locked.txt"
start_nginx "$T/up"
write_conf "$NGINX_URL"

echo "# the journal's priorities"
# A temp file a killed run left: removed, with an info line.
mkdir -p "$T/mirror"
echo partial > "$T/mirror/.biomirror-tmp.0badf00d"
JOURNAL_STREAM=8:12345 assert_exit 1 bm -vv sync --retries 0 up
bad=$(grep -cv '^<[3467]>' "$LAST_ERR")
assert_eq "$bad" 0 "stderr lines without a priority prefix"
grep -q '^<4>up: locked.txt: fetch: HTTP 403' "$LAST_ERR" ||
	fail "no <4> warning for the refused file: $(head -5 "$LAST_ERR")"
grep -q '^<7>.*: fetched [0-9]* bytes' "$LAST_ERR" || fail "no <7> debug line"
grep -qx '<6>up: removed 1 temp files of an earlier run' "$LAST_ERR" ||
	fail "no <6> info line"
grep -q 'biomirror: ' "$LAST_ERR" && fail "plain-stderr prefix in journal mode"
grep -q $'\033' "$LAST_ERR" && fail "escape sequence in journal mode"

JOURNAL_STREAM=8:12345 assert_exit 2 bm sync nosuch
grep -q '^<3>' "$LAST_ERR" || fail "no <3> error line: $(cat "$LAST_ERR")"
assert_eq "$(grep -cv '^<3>' "$LAST_ERR")" 0 "other lines for an unknown mirror"

echo "# without JOURNAL_STREAM: the plain prefix"
rm -rf "$T/mirror" "$T/state"
assert_exit 1 env -u JOURNAL_STREAM "$BM" -c "$T/bm.conf" --state-dir "$T/state" \
    sync --retries 0 up
grep -q '^biomirror: up: locked.txt: fetch: HTTP 403' "$LAST_ERR" ||
	fail "no plain warning: $(head -5 "$LAST_ERR")"
grep -q '^<[0-9]>' "$LAST_ERR" && fail "priority prefix without JOURNAL_STREAM"

echo "# on a terminal: a progress line, but none in journal mode"
rm -rf "$T/mirror" "$T/state"
env -u JOURNAL_STREAM script -qec "$BM -c $T/bm.conf --state-dir $T/state \
    sync --retries 0 --bwlimit 8M up" /dev/null > "$T/tty.out" 2>&1
grep -q 'files, .*MB/s, ETA' "$T/tty.out" || fail "no progress line on a terminal"
rm -rf "$T/mirror" "$T/state"
JOURNAL_STREAM=8:12345 script -qec "$BM -c $T/bm.conf --state-dir $T/state \
    sync --retries 0 --bwlimit 8M up" /dev/null > "$T/tty.out" 2>&1
grep -q 'files, .*MB/s, ETA' "$T/tty.out" && fail "progress line in journal mode"
grep -q $'\033' "$T/tty.out" && fail "escape sequence in journal mode on a tty"
grep -q '^<4>up: locked.txt: fetch: HTTP 403' "$T/tty.out" ||
	fail "no <4> warning on the tty: $(head -5 "$T/tty.out")"
echo PASS
