#!/bin/bash
# FTP faults from our own server (tests/tools/ftpfaultserver.py, Debian's
# pyftpdlib, MLSD): a data connection dropped mid-way (426), or cut short
# under a "226 complete" reply, gives a retried, identical file, never a
# truncated one (a cut one whose SIZE and MDTM still match continues with
# REST at the cut); a server that refuses REST still yields an identical big
# file (one stream); 421 "too many connections" at login is retried;
# without max_connections at most 4 control connections are open at once;
# a file longer than listed (grew after the listing) is never published
# cut to the listed size, whether fetched in ranges or in one stream; a
# RETR answered "226" without a 150 after a refused MDTM (500) is retried
# (the 500 was to MDTM, not to RETR: no permanent refusal).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup
mkdir -p "$T/up/sub"
make_big_file "$T/up/sub/three.bin" 3 three
make_big_file "$T/up/big.bin" 40 big
for i in 1 2 3 4 5 6 7 8 9 10 11 12; do
	printf 'file %s\n' "$i" > "$T/up/sub/f$i.txt"
	touch -d "2023-01-0$((i % 9 + 1)) 10:00:0$((i % 10)) UTC" "$T/up/sub/f$i.txt"
done

for mode in drop short; do
	echo "# $mode: the first RETR of each file is cut in half"
	rm -rf "$T/mirror" "$T/state"
	start_ftpfault "$T/up" "$mode"
	write_conf "$FTPFAULT_URL"
	printf 'streams = 1\n' >> "$T/bm.conf"
	assert_exit 0 bm --json sync up
	expect_counts 14 0 0 0
	assert_trees_equal "$T/up" "$T/mirror"
	no_temps "$T/mirror"
	assert_eq "$(ftpfault_stat 's["retrs"]["sub/three.bin"]')" 2 "RETRs of three.bin"
	assert_eq "$(ftpfault_stat 's["retrs"]["big.bin"]')" 2 "RETRs of big.bin"
	grep -q 'sub/three.bin.*retry 1 of 5' "$T/last.err" ||
	    fail "$mode: the retry of three.bin was not logged"
	if [ "$mode" = short ]; then
		# A 226 before the end with SIZE and MDTM unchanged is a cut
		# transfer: the retry continues at the cut (REST), never at 0.
		assert_eq "$(ftpfault_stat 's["retr_at"]["big.bin"]')" \
		    "[0, 20971520]" "short: RETR offsets of big.bin"
		assert_eq "$(ftpfault_stat 's["retr_at"]["sub/three.bin"]')" \
		    "[0, 1572864]" "short: RETR offsets of three.bin"
		grep -q 'big.bin: fetch: cut short at 20971520 of 41943040 bytes' \
		    "$T/last.err" || fail "short: no cut message: $(grep big.bin "$T/last.err")"
	fi
	stop_servers
done

echo "# norest: ranges fall back to one stream"
rm -rf "$T/mirror" "$T/state"
start_ftpfault "$T/up" norest
write_conf "$FTPFAULT_URL"
printf 'streams = 4\nmin_split = 8M\n' >> "$T/bm.conf"
assert_exit 0 bm --json sync up
expect_counts 14 0 0 0
assert_trees_equal "$T/up" "$T/mirror"
no_temps "$T/mirror"
assert_eq "$(ftpfault_stat 's["rests"]')" 0 "REST accepted"
[ "$(ftpfault_stat 's["retrs"]["big.bin"]')" -ge 2 ] ||
    fail "big.bin: no ranged try before the single stream"
stop_servers

echo "# busy: the first 2 logins get 421; at most 4 connections by default"
rm -rf "$T/mirror" "$T/state"
start_ftpfault "$T/up" busy --busy 2
write_conf "$FTPFAULT_URL"
# One stream per file: a ranged RETR ends by closing its connection, and
# the server may count that one and its successor as open at once.
printf 'streams = 1\n' >> "$T/bm.conf"
assert_exit 0 bm --json sync up
expect_counts 14 0 0 0
assert_trees_equal "$T/up" "$T/mirror"
assert_eq "$(ftpfault_stat 's["busy"]')" 2 "421 replies sent"
mc=$(ftpfault_stat 's["max_concurrent"]')
[ "$mc" -ge 1 ] && [ "$mc" -le 4 ] || fail "max concurrent control connections $mc, want 1..4"

echo "# the same with max_connections = 2"
rm -rf "$T/mirror" "$T/state"
stop_servers
start_ftpfault "$T/up" normal
write_conf "$FTPFAULT_URL"
printf 'max_connections = 2\nstreams = 1\n' >> "$T/bm.conf"
assert_exit 0 bm --json sync up
assert_trees_equal "$T/up" "$T/mirror"
mc=$(ftpfault_stat 's["max_concurrent"]')
[ "$mc" -ge 1 ] && [ "$mc" -le 2 ] || fail "max concurrent control connections $mc, want 1..2"

echo "# listshort: big.bin is 10 bytes longer than listed (grew after the"
echo "# listing): never published cut to the listed size, in ranges or not"
for streams in 4 1; do
	rm -rf "$T/mirror" "$T/state"
	stop_servers
	start_ftpfault "$T/up" listshort
	write_conf "$FTPFAULT_URL"
	printf 'streams = %s\nmin_split = 4M\nretries = 1\n' "$streams" >> "$T/bm.conf"
	assert_exit 1 bm --json sync up
	[ -e "$T/mirror/big.bin" ] && fail "streams $streams: big.bin published"
	no_temps "$T/mirror"
	if [ "$streams" = 4 ]; then
		grep -q 'big.bin: fetch: upstream is longer than listed' "$T/last.err" ||
		    fail "no 'longer than listed' message: $(grep big.bin "$T/last.err" | head -3)"
	else
		grep -q 'big.bin: fetch: got 41943040 bytes, the listing says 41943030' "$T/last.err" ||
		    fail "no size message: $(grep big.bin "$T/last.err" | head -3)"
	fi
	# The other files are there and identical.
	cmp -s "$T/up/sub/three.bin" "$T/mirror/sub/three.bin" || fail "three.bin"
	assert_eq "$(manifest_sql "$T/state" up "select count(*) from files where path = 'big.bin'")" 0 \
	    "big.bin in the manifest"
done
echo "# no150: MDTM refused (500), the first RETR answered 226 at once"
rm -rf "$T/mirror" "$T/state"
mkdir -p "$T/up150"
make_big_file "$T/up150/one.bin" 2 one
start_ftpfault "$T/up150" no150
write_conf "$FTPFAULT_URL"
printf 'streams = 1\n' >> "$T/bm.conf"
assert_exit 0 bm --json sync up
expect_counts 1 0 0 0
assert_trees_equal "$T/up150" "$T/mirror"
grep -q "one.bin: fetch: .*(retry 1 of 5)" "$T/last.err" ||
    fail "no150: no retry: $(cat "$T/last.err")"
grep -q "MDTM" "$T/last.err" && fail "no150: MDTM's refusal reported: $(cat "$T/last.err")"
assert_eq "$(ftpfault_stat 's["retrs"]["one.bin"]')" 2 "no150: RETRs of one.bin"
stop_servers

echo "PASS"
