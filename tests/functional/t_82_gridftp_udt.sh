#!/bin/bash
# GridFTP extended block mode over UDT (transport = udt) against a real
# globus-gridftp-server with its UDT driver whitelisted
# (-dc-whitelist udt,gsi,tcp; Debian's libglobus-xio-udt-driver):
#  1. a tree (nested dirs, a zero-byte file, a 64 MB file) with 1 and
#     with 4 streams: byte-identical, mtimes equal; the server saw SITE
#     SETNETSTACK udt (250) and OPTS RETR Parallelism=N,N,N; the client
#     made UDP sockets and accepted no TCP data connection (strace);
#     a second run fetches nothing;
#  2. a server without the whitelist: one log line, data over TCP (the
#     client accepts TCP data connections, makes no UDP socket), exit 0;
#  3. the server frozen in the middle of the 64 MB file, then killed: the
#     run ends within the stall timeout (UDT itself notices a dead peer
#     only after ~47 s), exit 1, nothing under the file's final name; a
#     new server on the same tree, and the next run completes the mirror;
#  4. transport = udt without ftp_mode = extended: a config error.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup
command -v strace >/dev/null || fail "strace is not installed (make deps)"
[ -e /usr/lib/x86_64-linux-gnu/libglobus_xio_udt_driver.so ] ||
    fail "libglobus-xio-udt-driver is not installed (make deps)"

mkdir -p "$T/up/a/b/c" "$T/up/d e" || fail "mkdir"
python3 - "$T/up" <<'EOF' || fail "tree"
import os, random, sys
root = sys.argv[1]
rng = random.Random(82)
files = [("zero.dat", 0), ("README", 1234), ("a/one.txt", 10),
         ("a/b/two.bin", 70000), ("a/b/c/three.bin", 300001),
         ("d e/four.txt", 44), ("a/b/big.bin", 64 << 20)]
for n, (rel, size) in enumerate(files):
    p = os.path.join(root, rel)
    with open(p, "wb") as f:
        f.write(rng.randbytes(size))
    t = 1650000000 + n * 3600 + 7
    os.utime(p, (t, t))
EOF
chmod -R a+rX "$T/up"

# conf URL STREAMS: the mirror over UDT with STREAMS streams.
conf() {
	write_conf "$1"
	printf 'ftp_mode = extended\ntransport = udt\nstreams = %s\nretries = 0\nstall_timeout = 3\nudt_buffer = 2M\n' \
	    "$2" >> "$T/bm.conf"
}

# traced OUT ARGS...: biomirror under strace (socket and accept4 only).
traced() {
	local out=$1
	shift
	strace -f -qq -e trace=socket,accept4 -o "$out" "$BM" -c "$T/bm.conf" \
	    --state-dir "$T/state" "$@"
}

GRIDFTP_ARGS="-dc-whitelist udt,gsi,tcp" start_gridftp "$T/up" 50
for n in 1 4; do
	echo "# UDT, $n stream(s)"
	rm -rf "$T/mirror" "$T/state"
	conf "$GRIDFTP_URL" "$n"
	mark=$(wc -l < "$GRIDFTP_LOG")
	traced "$T/st.$n" --json sync up > "$T/last.out" 2> "$T/last.err"
	rc=$?
	[ "$rc" = 0 ] || { cat "$T/last.err" >&2; fail "exit $rc over UDT, $n streams"; }
	expect_counts 7 0 0 0
	assert_trees_equal "$T/up" "$T/mirror"
	no_temps "$T/mirror"
	tail -n +"$mark" "$GRIDFTP_LOG" > "$T/log.$n"
	grep -q '\[CLIENT\]: SITE SETNETSTACK udt' "$T/log.$n" ||
	    fail "no SITE SETNETSTACK udt in the server's log"
	grep -q '\[SERVER\]: 250 OK' "$T/log.$n" ||
	    fail "SITE SETNETSTACK udt not accepted"
	grep -q "\[CLIENT\]: OPTS RETR Parallelism=$n,$n,$n;" "$T/log.$n" ||
	    fail "no OPTS RETR Parallelism=$n,$n,$n;"
	grep -q "FILE=$T/up/a/b/big.bin .*STREAMS=$n " "$T/log.$n" ||
	    fail "big.bin not sent on $n streams"
	udp=$(grep -c 'socket(AF_INET, SOCK_DGRAM' "$T/st.$n")
	[ "$udp" -ge 1 ] || fail "no UDP socket made by the client"
	assert_eq "$(grep -c 'accept4(.*= [0-9]' "$T/st.$n")" 0 \
	    "TCP data connections accepted over UDT"
	grep -q 'SETNETSTACK' "$T/last.err" && fail "a fallback logged: $(cat "$T/last.err")"
	echo "# no change: nothing fetched"
	assert_exit 0 bm --json sync up
	expect_counts 0 0 0 0
done

echo "# a server without the UDT whitelist: TCP, said once"
stop_servers
rm -rf "$T/mirror" "$T/state"
start_gridftp "$T/up" 50
conf "$GRIDFTP_URL" 2
traced "$T/st.tcp" --json sync up > "$T/last.out" 2> "$T/last.err"
rc=$?
[ "$rc" = 0 ] || { cat "$T/last.err" >&2; fail "exit $rc on fallback"; }
expect_counts 7 0 0 0
assert_trees_equal "$T/up" "$T/mirror"
assert_eq "$(grep -c 'SITE SETNETSTACK udt refused' "$T/last.err")" 1 \
    "fallback log lines"
grep -q "^biomirror: 127.0.0.1:$GRIDFTP_PORT: SITE SETNETSTACK udt refused (500-.*udt driver not whitelisted.*): data over TCP$" \
    "$T/last.err" || fail "fallback line: $(cat "$T/last.err")"
assert_eq "$(grep -c 'socket(AF_INET, SOCK_DGRAM' "$T/st.tcp")" 0 \
    "UDP sockets on fallback"
[ "$(grep -c 'accept4(.*= [0-9]' "$T/st.tcp")" -ge 1 ] ||
    fail "no TCP data connection on fallback"

echo "# the server frozen in the middle of big.bin"
stop_servers
rm -rf "$T/mirror" "$T/state"
GRIDFTP_ARGS="-dc-whitelist udt,gsi,tcp" start_gridftp "$T/up" 50
kdir=$(dirname "$GRIDFTP_LOG")
kpid=$(echo "$BM_SERVERS" | tr ' ' '\n' | awk -F: -v d="$kdir" '$3 == d { print $2 }')
conf "$GRIDFTP_URL" 4
bm --json sync up > "$T/last.out" 2> "$T/last.err" &
bmpid=$!
# Wait for the big file's temp file to hold data, then kill the server.
for _ in $(seq 1 4000); do
	[ -n "$(find "$T/mirror/a/b" -name '.biomirror-tmp.*' -size +1M -print -quit 2>/dev/null)" ] && break
	kill -0 "$bmpid" 2>/dev/null || break
	sleep 0.005
done
# Freeze it (the control connection stays open, the UDT peers go
# silent: what a dead host or a cut path looks like), then kill it.
kill -STOP "$kpid"
pids=$(bm_server_pids gridftp "$kpid" "$kdir")
# shellcheck disable=SC2086
kill -STOP $pids
t0=$(date +%s.%N)
wait "$bmpid"
rc=$?
t1=$(date +%s.%N)
# shellcheck disable=SC2086
kill -KILL $pids
wait "$kpid" 2>/dev/null
echo "# ended $(python3 -c "print('%.1f' % ($t1 - $t0))") s after the freeze"
assert_eq "$rc" 1 "exit after the server froze"
python3 -c "import sys; sys.exit(0 if $t1 - $t0 < 3 + 5 else 1)" ||
    fail "the run took $(python3 -c "print($t1 - $t0)") s after the freeze (stall_timeout 3)"
grep -q 'big.bin: fetch: stalled: no data for 3 s' "$T/last.err" ||
    fail "no stall for big.bin: $(grep big.bin "$T/last.err")"
[ ! -e "$T/mirror/a/b/big.bin" ] || fail "big.bin published although cut"
echo "# a new server on the same tree: the next run completes"
GRIDFTP_ARGS="-dc-whitelist udt,gsi,tcp" start_gridftp "$T/up" 50
sed -i "s#^source = .*#source = $GRIDFTP_URL#" "$T/bm.conf"
assert_exit 0 bm --json sync up
assert_eq "$(jfield failed)" 0 "failed in the rerun"
assert_trees_equal "$T/up" "$T/mirror"
no_temps "$T/mirror"

echo "# transport = udt needs ftp_mode = extended"
write_conf "$GRIDFTP_URL"
echo "transport = udt" >> "$T/bm.conf"
assert_exit 2 bm sync up
grep -qF "transport = udt needs an ftp:// source with ftp_mode = extended" \
    "$T/last.err" || fail "config error: $(cat "$T/last.err")"
stop_servers
echo "PASS"
