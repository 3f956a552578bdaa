#!/bin/bash
# FTP sync against real gridftp, listed with MLSD (globus-gridftp-server, anonymous): see ftp_suite.sh.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup
SERVER=gridftp
. "$(dirname "$0")/ftp_suite.sh"

# This server drops non-ASCII bytes from command arguments, so "MLSD" of
# "日本語/" lists the parent: the cdir unique= of the reply differs from the
# one the parent gave, and that directory is reported, never filled with
# the parent's entries (the listing is incomplete: exit 3, nothing deleted).
echo "# a directory the server cannot enter is reported, not misfilled"
mkdir -p "$T/up/日本語"
printf 'x\n' > "$T/up/日本語/x.txt"
assert_exit 3 bm --json sync up
grep -qF '/%E6%97%A5%E6%9C%AC%E8%AA%9E/: the server listed another directory' \
    "$T/last.err" ||
    fail "the misdirected listing was not reported"
[ -z "$(ls -A "$T/mirror/日本語")" ] || fail "日本語/ got entries: $(ls "$T/mirror/日本語")"
assert_eq "$(jfield deleted)" 0 "deleted after an incomplete listing"
# Stream mode fetches a file by its whole path on this server: after a
# CWD, "RETR  lead.txt" loses the leading space and "RETR ~t" names a
# home directory.
echo "# names with a leading space and a leading '~'"
rm -rf "$T/up/日本語"
printf 'lead\n' > "$T/up/ lead space.txt"
printf 'tilde\n' > "$T/up/~tilde.txt"
mkdir -p "$T/up/sub dir"
printf 'inner\n' > "$T/up/sub dir/ inner.txt"
chmod -R a+rX "$T/up"
assert_exit 0 bm --json sync up
expect_counts 3 0 0 0
assert_trees_equal "$T/up" "$T/mirror"
# A RETR the server refuses with 5xx (it runs as nobody: a file of mode
# 000) is a permanent refusal (RFC 959 4.2): reported with the server's
# reply, exit 1, and not retried (one RETR), never published.
echo "# a file the server cannot open: refused once, not retried"
printf 'secret\n' > "$T/up/locked.txt"
chmod 000 "$T/up/locked.txt"
mark=$(wc -l < "$GRIDFTP_LOG")
assert_exit 1 bm --json sync up
expect_counts 0 0 0 1
grep -qE '^biomirror: up: locked.txt: fetch: RETR: 500-Command failed\. .*Permission denied' "$T/last.err" ||
    fail "no RETR refusal: $(grep locked "$T/last.err")"
grep -q 'retry' "$T/last.err" && fail "a 5xx RETR was retried: $(grep retry "$T/last.err")"
sleep 0.5
assert_eq "$(tail -n +"$((mark + 1))" "$GRIDFTP_LOG" | grep -ac '\[CLIENT\]: RETR .*locked.txt')" 1 \
    "RETRs of locked.txt"
[ -e "$T/mirror/locked.txt" ] && fail "locked.txt published"
rm -f "$T/up/locked.txt"
echo "PASS"
