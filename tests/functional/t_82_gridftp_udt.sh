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
#     only after ~47 s), exit 1, nothing under the file's final name, the
#     bytes kept; a new server on the same tree, and the next run
#     continues the file over UDT in MODE E (ERET P from each gap, no
#     RETR or REST of it; the server sent only the missing bytes) and
#     completes the mirror; the same in MODE E over TCP (transport = tcp);
#  4. transport = udt without ftp_mode = extended: a config error;
#  5. which transport carried each file: the run's --json "transports"
#     (files, bytes, seconds, rate per transport), history --run (per
#     file, text and --json), history and status (per run, text and
#     --json), udt for the UDT runs, tcp for the fallback; the summary
#     line and the progress line on a terminal name udt (the rerun);
#  6. the UDT transport that cannot start (epoll_create fails, strace):
#     exit 1, "SOURCE: open the udt transport: REASON", nothing fetched;
#  7. without the UDT module (BM_UDT_MODULE names a missing file): the
#     same clean failure, "UDT module PATH: dlerror's text"; libudt is
#     never loaded by a run that does not use UDT (no 100 ms sleep).
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

# check_nets NET FILES: the last --json sync (in $T/last.out) and what
# history and status recorded of it say NET carried all its FILES files
# (and only NET carried any).
check_nets() {
	local run
	python3 - "$T/last.out" "$1" "$2" <<'PY' || fail "--json transports: $(cat "$T/last.out")"
import json, sys
r = json.load(open(sys.argv[1]))[0]
net, files = sys.argv[2], int(sys.argv[3])
t = r["transports"]
assert list(t) == [net], t
u = t[net]
assert u["files"] == files == r["fetched"], (u, r["fetched"])
assert u["bytes"] == r["bytes"] and u["bytes"] > 0, (u, r["bytes"])
assert 0 < u["seconds"] <= r["seconds"], (u, r["seconds"])
assert abs(u["rate"] - u["bytes"] / u["seconds"]) <= 0.01 * u["rate"] + 1, u
PY
	run=$(jfield run)
	assert_exit 0 bm --json history up --run "$run"
	python3 - "$LAST_OUT" "$1" "$2" <<'PY' || fail "history --run --json: $(cat "$LAST_OUT")"
import json, sys
ev = [e for e in json.load(open(sys.argv[1])) if e["op"] == "fetched"]
assert len(ev) == int(sys.argv[3]), ev
assert all(e["transport"] == sys.argv[2] for e in ev), ev
PY
	assert_exit 0 bm history up --run "$run"
	assert_eq "$(grep -c " fetched  *$1 " "$LAST_OUT")" "$2" "history --run: files over $1"
	assert_exit 0 bm history up --runs 1
	grep -q "B; $1 $2 files at [0-9.]* [KM]\?B/s" "$LAST_OUT" ||
	    fail "history: no $1 rate: $(cat "$LAST_OUT")"
	assert_exit 0 bm status up
	grep -q "B/s; $1 $2 files at [0-9.]* [KM]\?B/s)" "$LAST_OUT" ||
	    fail "status: no $1 rate: $(cat "$LAST_OUT")"
	assert_exit 0 bm --json status up
	python3 - "$LAST_OUT" "$1" "$2" <<'PY' || fail "status --json: $(cat "$LAST_OUT")"
import json, sys
t = json.load(open(sys.argv[1]))[0]["last_run"]["transports"]
assert list(t) == [sys.argv[2]] and t[sys.argv[2]]["files"] == int(sys.argv[3]), t
assert t[sys.argv[2]]["rate"] > 0, t
PY
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
	echo "# every file over udt: --json, history, status"
	check_nets udt 7
	echo "# no change: nothing fetched"
	assert_exit 0 bm --json sync up
	expect_counts 0 0 0 0
	python3 -c 'import json,sys; t=json.load(open(sys.argv[1]))[0]["transports"]; sys.exit(t != {})' \
	    "$T/last.out" || fail "transports of a run that fetched nothing"
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
echo "# every file over tcp on fallback: --json, history, status"
check_nets tcp 7

# cut_and_continue NET: the server frozen in the middle of big.bin with
# data over NET (udt; tcp: MODE E over TCP), then killed: the run ends
# within the stall timeout, exit 1, nothing under the final name, and
# big.bin's bytes kept (a partials row).  A new server on the same tree:
# the next run (on a terminal) continues big.bin in MODE E over NET with
# ERET P from the gaps only (the server's transfer log: ERET, no RETR of
# it, the bytes it sent = those missing) and completes the mirror.
cut_and_continue() {
	local net=$1 kdir kpid kids="" bmpid pids t0 t1 rc held ranges wl=""
	rm -rf "$T/mirror" "$T/state"
	rm -f "$T/up/a/new.bin"
	[ "$net" = udt ] && wl="-dc-whitelist udt,gsi,tcp"
	GRIDFTP_ARGS=$wl start_gridftp "$T/up" 50
	kdir=$(dirname "$GRIDFTP_LOG")
	kpid=$(echo "$BM_SERVERS" | tr ' ' '\n' | awk -F: -v d="$kdir" '$3 == d { print $2 }')
	conf "$GRIDFTP_URL" 4
	[ "$net" = tcp ] && sed -i 's/^transport = udt$/transport = tcp/' "$T/bm.conf"
	# The client stops itself (SIGSTOP) once big.bin has 2 MiB in
	# (BM_GRIDFTP_TEST_STOP): held mid-file however fast loopback is.
	BM_GRIDFTP_TEST_STOP=2097152 "$BM" -c "$T/bm.conf" --state-dir "$T/state" \
	    --json sync up > "$T/last.out" 2> "$T/last.err" &
	bmpid=$!
	for _ in $(seq 1 4000); do
		[ "$(cut -d' ' -f3 "/proc/$bmpid/stat" 2>/dev/null)" = T ] && break
		kill -0 "$bmpid" 2>/dev/null || break
		sleep 0.005
	done
	[ "$(cut -d' ' -f3 "/proc/$bmpid/stat" 2>/dev/null)" = T ] ||
	    fail "the client did not stop itself mid-file ($net): $(cat "$T/last.err")"
	# Freeze the server (the control connection stays open, the data
	# peers go silent: what a dead host or a cut path looks like), then
	# let the client go on, then kill the server.  Its session processes
	# first, without a fork.
	kill -STOP "$kpid"
	read -r kids < "/proc/$kpid/task/$kpid/children"
	# shellcheck disable=SC2086
	[ -n "$kids" ] && kill -STOP $kids
	pids=$(bm_server_pids gridftp "$kpid" "$kdir")
	# shellcheck disable=SC2086
	kill -STOP $pids
	kill -CONT "$bmpid"
	t0=$(date +%s.%N)
	wait "$bmpid"
	rc=$?
	t1=$(date +%s.%N)
	# shellcheck disable=SC2086
	kill -KILL $pids
	wait "$kpid" 2>/dev/null
	echo "# ended $(python3 -c "print('%.1f' % ($t1 - $t0))") s after the freeze"
	assert_eq "$rc" 1 "exit after the server froze ($net)"
	python3 -c "import sys; sys.exit(0 if $t1 - $t0 < 3 + 5 else 1)" ||
	    fail "the run took $(python3 -c "print($t1 - $t0)") s after the freeze (stall_timeout 3)"
	grep -q 'big.bin: fetch: stalled: no data for 3 s' "$T/last.err" ||
	    fail "no stall for big.bin: $(grep big.bin "$T/last.err")"
	[ ! -e "$T/mirror/a/b/big.bin" ] || fail "big.bin published although cut"
	ranges=$(manifest_sql "$T/state" up \
	    "SELECT ranges FROM partials WHERE path = CAST('a/b/big.bin' AS BLOB)")
	[ -n "$ranges" ] || fail "big.bin's bytes not kept after the stall ($net)"
	held=$(python3 -c 'import sys; print(sum(int(b) - int(a) for a, b in (r.split("-") for r in sys.argv[1].split())))' "$ranges")
	echo "# big.bin: $held bytes kept in ranges $ranges"
	echo "# a new server on the same tree: the next run continues big.bin ($net)"
	# A file new upstream, so that the rerun also moves one whole file
	# whatever the first run finished before the freeze.
	head -c 300000 /dev/urandom > "$T/up/a/new.bin"
	touch -d '2024-03-04 05:06:07 UTC' "$T/up/a/new.bin"
	GRIDFTP_ARGS=$wl start_gridftp "$T/up" 50
	sed -i "s#^source = .*#source = $GRIDFTP_URL#" "$T/bm.conf"
	script -qec "$BM -c $T/bm.conf --state-dir $T/state sync up" /dev/null \
	    > "$T/tty.out" 2>&1 || { cat "$T/tty.out" >&2; fail "the rerun under a pty ($net)"; }
	assert_trees_equal "$T/up" "$T/mirror"
	no_temps "$T/mirror"
	grep -q "big.bin: continuing with $held of 67108864 bytes held" "$T/tty.out" ||
	    fail "big.bin not continued from its $held bytes: $(tr '\r' '\n' < "$T/tty.out" | grep big.bin)"
	grep -q "files, .*MB/s, ETA [-0-9:]*, over $net" "$T/tty.out" ||
	    fail "no transport on the progress line: $(tr '\r' '\n' < "$T/tty.out")"
	# Every file over NET, the continued big.bin too (no stream mode).
	grep -q "up: ok: listed [0-9]*, fetched [1-7], .*B/s); $net [1-7] files\?, [0-9.]* [KMG]\?i\?B in [0-9.hms]* ([0-9.]* [KM]\?B/s)$" \
	    <(tr '\r' '\n' < "$T/tty.out") ||
	    fail "not every file over $net in the summary: $(tr '\r' '\n' < "$T/tty.out" | grep 'up: ok')"
	[ "$net" = udt ] && { grep -q '\[CLIENT\]: SITE SETNETSTACK udt' "$GRIDFTP_LOG" ||
	    fail "the rerun sent no SITE SETNETSTACK udt"; }
	grep -q "\[CLIENT\]: RETR .*/a/b/big.bin" "$GRIDFTP_LOG" &&
	    fail "big.bin fetched whole by the rerun: $(grep -a 'big.bin' "$GRIDFTP_LOG")"
	grep -q '\[CLIENT\]: REST [1-9]' "$GRIDFTP_LOG" &&
	    fail "REST sent (stream mode): $(grep -a 'REST\|big.bin' "$GRIDFTP_LOG")"
	python3 - "$GRIDFTP_LOG" "$T/up/a/b/big.bin" "$ranges" <<'PY' || fail "ERET P of big.bin's gaps"
import re, sys
log = open(sys.argv[1], errors="replace").read()
path, size = sys.argv[2], 64 << 20
held = sorted(tuple(map(int, r.split("-"))) for r in sys.argv[3].split())
gaps, at = [], 0
for a, b in held + [(size, size)]:
    if a > at:
        gaps.append([at, a])
    at = max(at, b)
# ERET P OFFSET LENGTH: the one to the end asks one byte more (a file
# grown since SIZE would show); together they tile the gaps.
asked = sorted((int(o), int(o) + int(n)) for o, n in re.findall(
    r"\[CLIENT\]: ERET P (\d+) (\d+) " + re.escape(path) + r"\r?$", log, re.M))
assert asked, "no ERET P of big.bin"
tiles = []
for o, e in asked:
    e = size if e == size + 1 else e
    assert not tiles or o >= tiles[-1][1], ("ranges overlap", asked)
    if tiles and o == tiles[-1][1]:
        tiles[-1][1] = e
    else:
        tiles.append([o, e])
assert tiles == gaps, ("ERET P asked", asked, "gaps", gaps)
stats = [(int(n), t) for f, n, t in re.findall(
    r"FILE=(\S+) .*?NBYTES=(\d+) .*?TYPE=(\w+) CODE=226", log) if f == path]
assert stats and {t for n, t in stats} == {"ERET"}, stats
sent = sum(n for n, t in stats)
assert sent == size - sum(b - a for a, b in held), (sent, held)
print("# ERET P", asked, "sent", sent, "of", size, "bytes")
PY
}

echo "# the server frozen in the middle of big.bin, over UDT"
stop_servers
cut_and_continue udt
echo "# the same in MODE E over TCP (transport = tcp)"
stop_servers
cut_and_continue tcp

echo "# the UDT transport cannot start (strace: epoll_create fails)"
rm -rf "$T/mirror" "$T/state"
conf "$GRIDFTP_URL" 1
strace -f -qq -o /dev/null -e trace=epoll_create,epoll_create1 \
    -e inject=epoll_create,epoll_create1:error=EMFILE \
    "$BM" -c "$T/bm.conf" --state-dir "$T/state" sync up > "$T/last.out" 2> "$T/last.err"
rc=$?
assert_eq "$rc" 1 "exit when the UDT transport cannot start"
grep -qx "biomirror: up: $GRIDFTP_URL: open the udt transport: UDT epoll_create: .*" \
    "$T/last.err" || fail "no message for the transport: $(cat "$T/last.err")"
[ -z "$(find "$T/mirror" -type f 2>/dev/null)" ] || fail "files fetched without a transport"

echo "# no UDT module: the run fails cleanly and says which file"
BM_UDT_MODULE=$T/none/libbiomirror-udt.so "$BM" -c "$T/bm.conf" \
    --state-dir "$T/state" sync up > "$T/last.out" 2> "$T/last.err"
assert_eq "$?" 1 "exit without the UDT module"
grep -qx "biomirror: up: $GRIDFTP_URL: open the udt transport: UDT module $T/none/libbiomirror-udt.so: .*No such file or directory" \
    "$T/last.err" || fail "no message for the module: $(cat "$T/last.err")"
[ -z "$(find "$T/mirror" -type f 2>/dev/null)" ] || fail "files fetched without the module"
strace -f -qq -o "$T/st.status" -e trace=clock_nanosleep,openat \
    "$BM" -c "$T/bm.conf" --state-dir "$T/state" status > /dev/null 2>&1
grep -q 'libudt\|tv_nsec=100000000' "$T/st.status" &&
    fail "libudt loaded by status: $(grep 'libudt\|nanosleep' "$T/st.status")"

echo "# transport = udt needs ftp_mode = extended"
write_conf "$GRIDFTP_URL"
echo "transport = udt" >> "$T/bm.conf"
assert_exit 2 bm sync up
grep -qF "transport = udt needs an ftp:// source with ftp_mode = extended" \
    "$T/last.err" || fail "config error: $(cat "$T/last.err")"
stop_servers
echo "PASS"
