#!/bin/bash
# A server that takes one connection per address (real vsftpd,
# max_per_ip=1: it greets the next ones with "421 There are too many
# connections from your internet address." and closes; libcurl reports
# that as a timeout): biomirror, set for 4 connections, lowers its own
# limit by one per 421 (at least one connection) and queues the rest, so
# the run completes (exit 0, identical) with a handful of refusals, not
# one or more per file as before (about 130 for 106 entries); the log
# quotes the server's 421 and the new limit.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup

mkdir -p "$T/up"
for d in a b c d e; do
	mkdir -p "$T/up/$d"
	for i in $(seq 1 12); do printf '%s%s\n' "$d" "$i" > "$T/up/$d/f$i.txt"; done
done
touch -d '2022-03-04 05:06:07 UTC' "$T/up"/*/*.txt
chmod -R a+rX "$T/up"
BM_VSFTPD_EXTRA="max_per_ip=1" start_vsftpd "$T/up"
write_conf "$VSFTPD_URL"
printf 'max_connections = 4\n' >> "$T/bm.conf"
assert_exit 0 bm --json sync up
expect_counts 60 0 0 0
assert_trees_equal "$T/up" "$T/mirror"
grep -q '421 There are too many connections from your internet address. (now at most [0-9]* connection' \
    "$LAST_ERR" || fail "the server's 421 is not quoted"
grep -q 'Timeout was reached' "$LAST_ERR" && fail "a 421 reported as a timeout"
refused=$(cat "$T"/vsftpd/*/vsftpd.log | grep -c 'too many connections' || true)
echo "# refusals: $refused"
[ "$refused" -ge 1 ] || fail "the server never refused a connection (is max_per_ip on?)"
[ "$refused" -le 15 ] || fail "$refused connections refused: the limit was not learnt"
assert_exit 0 bm --json sync up
expect_counts 0 0 0 0
stop_servers
echo PASS
