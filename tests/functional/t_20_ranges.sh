#!/bin/bash
# Ranged streams: a 200 MB file in 4 ranges from nginx is identical (4
# requests with Range, answered 206, then one GET of byte 0: the end check; none
# for one stream); a server that ignores Range, or
# answers with a wrong Content-Range, still yields an identical file
# (nothing appended or misplaced; one stream after the first try).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup
mkdir -p "$T/up"
make_big_file "$T/up/big.bin" 200
printf 'small\n' > "$T/up/small.txt"
start_nginx "$T/up"
write_conf "$NGINX_URL"
cat >> "$T/bm.conf" <<CONF
streams = 4
min_split = 16M
CONF

echo "# 200 MB in 4 ranges from nginx"
assert_exit 0 bm --json sync up
expect_counts 2 0 0 0
assert_trees_equal "$T/up" "$T/mirror"
ranges=$(grep '"GET /big.bin ' "$NGINX_ACCESS_LOG" | grep -v '"bytes=0-0"' | grep -c '" 206 [0-9]* "bytes=')
assert_eq "$ranges" 4 "ranged requests for big.bin"
grep '"GET /big.bin ' "$NGINX_ACCESS_LOG" | grep -q '" 200 ' &&
    fail "big.bin was also fetched whole"
# The four ranges cover the file exactly: 0-52428799, ... 157286400-209715199.
got=$(grep '"GET /big.bin ' "$NGINX_ACCESS_LOG" | grep -v '"bytes=0-0"' |
    sed 's/.*"bytes=\([0-9-]*\)".*/\1/' | LC_ALL=C sort -n | tr '\n' ' ')
assert_eq "$got" "0-52428799 52428800-104857599 104857600-157286399 157286400-209715199 " \
    "the ranges asked for"
assert_eq "$(grep '"GET /big.bin ' "$NGINX_ACCESS_LOG" | grep '"bytes=0-0"' |
    grep -c '" 206 1 ')" 1 "end checks of big.bin (byte 0, answered 206 with 1 byte)"

echo "# --streams 1 fetches it whole"
rm -rf "$T/mirror" "$T/state"
mark=$(wc -l < "$NGINX_ACCESS_LOG")
assert_exit 0 bm --json sync --streams 1 up
assert_trees_equal "$T/up" "$T/mirror"
assert_eq "$(tail -n +"$((mark + 1))" "$NGINX_ACCESS_LOG" | grep '"GET /big.bin ' |
    grep -c '" 200 ')" 1 "one whole GET with --streams 1"
assert_eq "$(tail -n +"$((mark + 1))" "$NGINX_ACCESS_LOG" | grep -c '"bytes=0-0"')" 0 \
    "end checks with --streams 1"

for mode in ignore-range wrong-range; do
	echo "# a server in mode $mode"
	stop_servers
	rm -rf "$T/mirror" "$T/state"
	start_faultserver "$T/up" "$mode"
	write_conf "$FAULT_URL"
	printf 'streams = 4\nmin_split = 16M\n' >> "$T/bm.conf"
	assert_exit 0 bm --json sync up
	expect_counts 2 0 0 0
	assert_trees_equal "$T/up" "$T/mirror"
	no_temps "$T/mirror"
	[ "$(fault_stat ranges)" -ge 1 ] || fail "$mode: no ranged request was made"
done
echo PASS
