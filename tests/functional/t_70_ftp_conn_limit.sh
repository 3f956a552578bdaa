#!/bin/bash
# A server that takes one connection per address (real vsftpd,
# max_per_ip=1: it greets the next ones with "421 There are too many
# connections from your internet address." and closes; libcurl reports
# that as a timeout): biomirror, set for 4 connections, lowers its own
# limit by one per 421 (at least one connection) and queues the rest, so
# the run completes (exit 0, identical) with a handful of refusals, not
# one or more per file as before (about 130 for 106 entries); the log
# quotes the server's 421 and the new limit.  The same for a 530 at PASS
# that words a per-host limit (our FTP fault server); a 530 that is a
# wrong login is tried once, not retried.
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

# The same limit answered with 530 at PASS, in ProFTPD's words
# (MaxClientsPerHost: "530 Sorry, the maximum number of clients (2) from
# your host are already connected."): a limit, not a wrong login, so it
# is retried within fewer connections and the run completes.
echo "# a 530 per-host limit (our FTP fault server, at most 2 sessions)"
rm -rf "$T/mirror" "$T/state"
start_ftpfault "$T/up" users530 --busy 2
write_conf "$FTPFAULT_URL"
printf 'max_connections = 4\n' >> "$T/bm.conf"
assert_exit 0 bm --json sync up
expect_counts 60 0 0 0
assert_trees_equal "$T/up" "$T/mirror"
grep -q 'login refused: 530 Sorry, the maximum number of clients (2) from your host are already connected. (a limit: retried, at most [0-9]* connection' \
    "$LAST_ERR" || fail "the server's 530 limit is not quoted as a limit: $(grep 530 "$LAST_ERR" | head -3)"
r530=$(ftpfault_stat 's["refused530"]')
echo "# 530 refusals: $r530, most sessions at once: $(ftpfault_stat 's["max_logged_in"]')"
[ "$r530" -ge 1 ] || fail "the server never refused a login (is users530 on?)"
[ "$r530" -le 15 ] || fail "$r530 logins refused: the limit was not learnt"
stop_servers

# A wrong login (530 with another text, here Pure-FTPd's) is not a limit:
# one attempt, no retries (retries is at its default of 5), exit 3,
# nothing fetched or deleted, the server's words in the error.
echo "# a 530 wrong login is not retried"
start_ftpfault "$T/up" deny530
write_conf "$FTPFAULT_URL"
assert_exit 3 bm --json sync up
grep -q "up: list: ${FTPFAULT_URL}: login refused: 530 Login authentication failed." "$LAST_ERR" ||
    fail "wrong-login message: $(cat "$LAST_ERR")"
assert_eq "$(ftpfault_stat 's["refused530"]')" 1 "login attempts for a wrong login"
grep -q retry "$LAST_ERR" && fail "a wrong login was retried: $(grep retry "$LAST_ERR" | head -2)"
assert_trees_equal "$T/up" "$T/mirror"
stop_servers
echo PASS
