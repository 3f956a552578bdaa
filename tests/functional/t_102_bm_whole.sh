#!/bin/bash
# bm:// big files (docs/protocol.md, "The client"; issue 21):
# - a file over 4 MiB listed without a digest (a `path =` export) is
#   fetched in ranges (items of 4 MiB, hashed by the server as read) when
#   it is the only big file, fewer than the data connections;
# - with at least as many big files as data connections, each is asked
#   for whole in ONE item (hashed by the server as read, once by the
#   client's digest workers); a byte flipped in one is caught at its end
#   and the file fetched again (alone by then: in ranges);
# - one listed with a digest (a `mirror =` export of a verify = checksum
#   mirror) is asked for whole in ONE item, which the server sends by
#   sendfile(2) (strace) with the recorded digest, with verify = checksum
#   (the digest recorded is the file's) and with verify = size;
# - a byte flipped by the server (BM_SERVE_TEST_CORRUPT) in such a whole
#   file is caught at its end: the bytes are discarded, the file fetched
#   again, exit 0, byte-identical, no temp file left;
# - such a file cut half-way (BM_SERVE_TEST_STOP, stall_timeout 1): its
#   unchecked bytes are kept for the next run only when a published digest
#   will check them (verify = checksum: kept, and the next run continues
#   and checks them), never with verify = size (dropped; refetched whole).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup
H=127.0.0.1
CL="python3 $BM_TOOLS/bmclient.py"
command -v strace > /dev/null || fail "strace is not installed"
SIZE=$((10 * 1048576))

mkdir -p "$T/up" "$T/t1" "$T/many"
for i in 1 2 3; do make_big_file "$T/many/m$i.bin" 5 "many$i"; done
touch -d 2024-01-01 "$T/many"/*.bin
make_big_file "$T/up/big.bin" 10 whole
printf 'small\n' > "$T/up/small.txt"
touch -d 2024-01-01 "$T/up/big.bin" "$T/up/small.txt"

PORT=$(free_port)
PORT2=$(free_port)
cat > "$T/bm.conf" <<CONF
[serve]
listen = $H:$PORT

[export pub]
path = $T/up

[export t1]
mirror = t1

[export many]
path = $T/many

[t1]
source = bm://$H:$PORT/pub/
dest = $T/t1
verify = checksum
timeout = 5

[t2]
source = bm://$H:$PORT/t1/
dest = $T/t2
verify = checksum
timeout = 5

[t3]
source = bm://$H:$PORT/t1/
dest = $T/t3
verify = size
timeout = 5

[t4]
source = bm://$H:$PORT2/t1/
dest = $T/t4
verify = checksum
timeout = 5

[t5]
source = bm://$H:$PORT2/t1/
dest = $T/t5
verify = size
retries = 0
timeout = 2
stall_timeout = 1

[t7]
source = bm://$H:$PORT/many/
dest = $T/t7
verify = checksum
max_connections = 2
timeout = 5

[t8]
source = bm://$H:$PORT2/many/
dest = $T/t8
verify = size
max_connections = 2
timeout = 5

[t6]
source = bm://$H:$PORT2/t1/
dest = $T/t6
verify = checksum
retries = 0
timeout = 2
stall_timeout = 1
CONF
sed "s/^listen = .*/listen = $H:$PORT2/" "$T/bm.conf" > "$T/bm2.conf"
strace -f -qq -e trace=sendfile -e signal=none -o "$T/strace.out" \
    "$BM" -c "$T/bm.conf" --state-dir "$T/state" serve \
    > "$T/serve.log" 2>&1 &
SPID=$!
BM_SERVERS="$BM_SERVERS strace:$SPID:$T"
$CL wait $H "$PORT" || { cat "$T/serve.log"; fail "serve did not start"; }
desc() { local p; for p in $(pgrep -P "$1"); do echo "$p"; desc "$p"; done; }
SERVE_PID=$(for p in $(desc "$SPID"); do
	case $(cat "/proc/$p/comm" 2>/dev/null) in strace|bash) ;; *) echo "$p" ;; esac
done | head -1)
[ -n "$SERVE_PID" ] || fail "no serve under strace"
BM_SERVERS="serve:$SERVE_PID:$T $BM_SERVERS"

# sendfiles: sendfile calls so far that sent the whole big file at once.
sendfiles() { grep -Ec "sendfile\\(.*\\) = $SIZE\$" "$T/strace.out"; }
# items EXPORT LOG: big.bin's item lines of EXPORT in LOG ("whole" or the
# range), one a line.
items() {
	grep -E "export $1: big\\.bin(:| \\[)" "$2" | sed -E \
	    -e 's/.*big\.bin \[([0-9]+\+[0-9]+)\].*/\1/' \
	    -e 's/.*big\.bin: [0-9]+ bytes.*/whole/' -e "s/^0\\+$SIZE\$/whole/"
}
sha() { sha256sum < "$1" | cut -c1-64; }

echo "# no listed digest: ranges of 4 MiB, hashed as read"
assert_exit 0 bm --json sync t1
expect_counts 2 0 0 0
assert_trees_equal "$T/up" "$T/t1"
assert_eq "$(items pub "$T/serve.log" | sort | tr '\n' ' ')" \
    "0+4194304 4194304+4194304 8388608+2097152 " "big.bin in ranges"
assert_eq "$(sendfiles)" 0 "no sendfile for ranges"

echo "# no listed digest, 3 big files over 2 connections: one item each"
assert_exit 0 bm --json sync t7
expect_counts 3 0 0 0
assert_trees_equal "$T/many" "$T/t7"
for i in 1 2 3; do
	assert_eq "$(grep -c "export many: m$i\.bin" "$T/serve.log")" 1 \
	    "m$i.bin asked for in one item"
	grep -q "export many: m$i\.bin \[0+5242880\]" "$T/serve.log" ||
	    fail "m$i.bin was not asked for whole"
	assert_eq "$(manifest_sql "$T/state" t7 "SELECT checksum FROM files \
	    WHERE path = CAST('m$i.bin' AS BLOB)")" \
	    "sha256:$(sha "$T/many/m$i.bin")" "t7 records m$i.bin's digest"
done
assert_eq "$(sendfiles)" 0 "no sendfile without a recorded digest"

echo "# a listed digest: one item, by sendfile (verify = checksum)"
assert_exit 0 bm --json sync t2
expect_counts 2 0 0 0
assert_trees_equal "$T/up" "$T/t2"
assert_eq "$(items t1 "$T/serve.log" | tr '\n' ' ')" "whole " \
    "big.bin asked for in one item"
assert_eq "$(sendfiles)" 1 "big.bin by sendfile"
assert_eq "$(manifest_sql "$T/state" t2 "SELECT checksum FROM files \
    WHERE path = CAST('big.bin' AS BLOB)")" "sha256:$(sha "$T/up/big.bin")" \
    "t2 records big.bin's digest"

echo "# verify = size: one item too"
assert_exit 0 bm --json sync t3
expect_counts 2 0 0 0
assert_trees_equal "$T/up" "$T/t3"
assert_eq "$(items t1 "$T/serve.log" | tr '\n' ' ')" "whole whole " \
    "big.bin asked for in one item (verify = size)"
assert_eq "$(sendfiles)" 2 "big.bin by sendfile (verify = size)"

echo "# a flipped byte in a whole file: caught, discarded, fetched again"
BM_SERVE_TEST_CORRUPT=big.bin "$BM" -c "$T/bm2.conf" --state-dir \
    "$T/state" serve > "$T/serve2.log" 2>&1 &
S2PID=$!
BM_SERVERS="$BM_SERVERS serve:$S2PID:$T"
$CL wait $H "$PORT2" || { cat "$T/serve2.log"; fail "serve2 did not start"; }
assert_exit 0 bm --json sync t4
expect_counts 2 0 0 0
grep -q 'serve: test hook: one byte of big.bin flipped' "$T/serve2.log" ||
    fail "the hook did not fire"
grep -q "big.bin: bytes \\[0, $SIZE): the SHA-256 does not match the server's" \
    "$LAST_ERR" || fail "the flipped byte was not caught"
assert_eq "$(items t1 "$T/serve2.log" | tr '\n' ' ')" "whole whole " \
    "big.bin asked for whole twice"
grep -q 'export t1: big.bin asked for again: hashed as read' "$T/serve2.log" ||
    fail "the second ask trusted the digest known again"
cmp "$T/up/big.bin" "$T/t4/big.bin" || fail "t4's big.bin differs"
no_temps "$T/t4"
assert_eq "$(manifest_sql "$T/state" t4 "SELECT checksum FROM files \
    WHERE path = CAST('big.bin' AS BLOB)")" "sha256:$(sha "$T/up/big.bin")" \
    "t4 records big.bin's true digest"
kill -TERM "$S2PID"
wait "$S2PID" 2>/dev/null

echo "# a flipped byte in a whole file without a listed digest: caught"
BM_SERVE_TEST_CORRUPT=m2.bin "$BM" -c "$T/bm2.conf" --state-dir \
    "$T/state" serve > "$T/serve3.log" 2>&1 &
S2PID=$!
BM_SERVERS="$BM_SERVERS serve:$S2PID:$T"
$CL wait $H "$PORT2" || { cat "$T/serve3.log"; fail "serve3 did not start"; }
assert_exit 0 bm --json sync t8
expect_counts 3 0 0 0
grep -q 'serve: test hook: one byte of m2.bin flipped' "$T/serve3.log" ||
    fail "the hook did not fire (m2.bin)"
grep -q "m2.bin: bytes \\[0, 5242880): the SHA-256 does not match the server's" \
    "$LAST_ERR" || fail "the flipped byte in m2.bin was not caught"
assert_eq "$(grep -c 'export many: m2\.bin \[0+5242880\]' "$T/serve3.log")" \
    1 "m2.bin asked for whole once"
# The retry is the run's last file, alone: in ranges over both connections.
assert_eq "$(grep -c 'export many: m2\.bin \[0+4194304\]' "$T/serve3.log")" \
    1 "m2.bin's retry, alone, in ranges"
assert_trees_equal "$T/many" "$T/t8"
no_temps "$T/t8"
kill -TERM "$S2PID"
wait "$S2PID" 2>/dev/null

# cut_half MIRROR: the stopped server leaves MIRROR's big.bin half-way (exit 1).
cut_half() {
	BM_SERVE_TEST_STOP=big.bin "$BM" -c "$T/bm2.conf" --state-dir \
	    "$T/state" serve > "$T/serve-$1.log" 2>&1 &
	S2PID=$!
	BM_SERVERS="$BM_SERVERS serve:$S2PID:$T"
	$CL wait $H "$PORT2" || { cat "$T/serve-$1.log"; fail "serve-$1"; }
	assert_exit 1 bm sync "$1"
	grep -q 'serve: test hook: stopped in big.bin' "$T/serve-$1.log" ||
	    fail "$1: the hook did not stop the server"
	kill -KILL "$S2PID"
	wait "$S2PID" 2>/dev/null
	"$BM" -c "$T/bm2.conf" --state-dir "$T/state" serve \
	    > "$T/serve-$1b.log" 2>&1 &
	S2PID=$!
	BM_SERVERS="$BM_SERVERS serve:$S2PID:$T"
	$CL wait $H "$PORT2" || { cat "$T/serve-$1b.log"; fail "serve-$1b"; }
}
echo "# cut half-way, verify = size: the unchecked bytes are not kept"
cut_half t5
grep -q 'bytes kept for the next run' "$LAST_ERR" && fail "t5 kept bytes"
assert_eq "$(manifest_sql "$T/state" t5 "SELECT count(*) FROM partials")" 0 \
    "t5: no partial recorded"
assert_exit 0 bm --json sync t5
assert_eq "$(jfield failed)" 0 "t5: failed"
assert_trees_equal "$T/up" "$T/t5"
grep -q 'continuing with' "$LAST_ERR" && fail "t5 continued unchecked bytes"
cmp "$T/up/big.bin" "$T/t5/big.bin" || fail "t5's big.bin differs"
no_temps "$T/t5"
kill -TERM "$S2PID"
wait "$S2PID" 2>/dev/null

echo "# cut half-way, verify = checksum: kept, continued, checked"
cut_half t6
grep -q 'big.bin: .*bytes kept for the next run to continue' "$LAST_ERR" ||
    fail "t6 kept no bytes"
assert_exit 0 bm --json sync t6
assert_eq "$(jfield failed)" 0 "t6: failed"
assert_trees_equal "$T/up" "$T/t6"
cmp "$T/up/big.bin" "$T/t6/big.bin" || fail "t6's big.bin differs"
no_temps "$T/t6"
assert_eq "$(manifest_sql "$T/state" t6 "SELECT checksum FROM files \
    WHERE path = CAST('big.bin' AS BLOB)")" "sha256:$(sha "$T/up/big.bin")" \
    "t6 records big.bin's true digest"
kill -TERM "$S2PID"
wait "$S2PID" 2>/dev/null
echo PASS
