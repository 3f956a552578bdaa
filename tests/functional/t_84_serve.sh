#!/bin/bash
# biomirror serve at the protocol level (docs/protocol.md), with the test
# client tests/tools/bmclient.py:
# - LIST of a tree (nested dirs, UTF-8 names, a zero-byte file, a
#   symlink) gives exact sizes, nanosecond mtimes, modes, link targets;
#   temp files of a running sync are not listed;
# - GET of 2,000 small files pipelined over 4 data connections and of a
#   range of a larger file: bytes identical, every digest checked
#   (SHA-256; HMAC-SHA-256 with the session key on an export with a
#   secret); a missing file is an item error, the batch goes on;
# - a client offering version 9 gets the server's 1;
# - every hostile request is refused (the exact ERROR code) and logged,
#   nothing served: a wrong secret, a forged token, a stranger's data
#   connection, oversized frames, path escapes (.., absolute, a symlink
#   out of the root), an address outside allow, too many clients, data
#   connections and TCP connections, an idle session;
# - caps before a byte is read: max_per_address, the total, an address
#   no export allows; max_queued_bytes refuses a GET over its budget;
# - SIGTERM drains: no new sessions, a running transfer finishes, exit 0;
#   idle or half-sent requests end at once (exit 0: nothing in flight);
#   a transfer still running at drain_timeout is cut, exit 1; SIGHUP
#   does not stop the server.
. "$(dirname "$0")/lib.sh"
bm_setup
CL="python3 $BM_TOOLS/bmclient.py"
H=127.0.0.1

mkdir -p "$T/up/sub/deeper" "$T/up/many" "$T/outside"
printf 'hello\n' > "$T/up/a.txt"
: > "$T/up/zero.dat"
printf 'caf\xc3\xa9\n' > "$T/up/sub/caf$(printf '\xc3\xa9').txt"
printf 'deep\n' > "$T/up/sub/deeper/d.bin"
ln -s a.txt "$T/up/link"
ln -s ../outside/secret.txt "$T/up/escape"
ln -s /etc "$T/up/etcdir"
printf 'do not serve\n' > "$T/outside/secret.txt"
printf 'partial' > "$T/up/.biomirror-tmp.abc123"
touch -d '2020-01-02 03:04:05.123456789 UTC' "$T/up/a.txt"
head -c 9000000 /dev/urandom > "$T/up/big.bin"
python3 - "$T/up/many" <<'EOF' || fail "many"
import os, sys
for i in range(2000):
    with open(os.path.join(sys.argv[1], "f%04d" % i), "wb") as f:
        f.write(b"%d\n" % i * (1 + i % 7))
EOF
umask 077
printf 's3cret\n' > "$T/secret"
printf 'wrong\n' > "$T/wrong"
umask 022

PORT=$(free_port)
cat > "$T/bm.conf" <<CONF
[serve]
listen = $H:$PORT
max_clients = 3
max_connections = 4
idle_timeout = 1
drain_timeout = 20
metrics_file = $T/serve.prom
max_queued_bytes = 1M

[export pub]
path = $T/up

[export sec]
path = $T/up
secret_file = $T/secret

[export local]
path = $T/up
allow = 127.0.0.1/32

[export mapped]
path = $T/up
allow = ::ffff:127.0.0.1/128
CONF
"$BM" -c "$T/bm.conf" serve > "$T/serve.log" 2>&1 &
SPID=$!
BM_SERVERS="$BM_SERVERS serve:$SPID:$T"
$CL wait $H "$PORT" || { cat "$T/serve.log"; fail "serve did not start"; }

echo "# LIST: exact sizes, nanosecond mtimes, modes, targets"
$CL list $H "$PORT" pub "" > "$T/list.out" || fail "list"
(cd "$T/up" && find . -mindepth 1 ! -name '.biomirror-tmp.*' \
    -printf '%y\t%s\t%T@\t%m\t%P\t%l\n') |
    python3 -c '
import sys
for l in sys.stdin:
    y, s, t, m, p, tg = l.rstrip("\n").split("\t")
    sec, frac = t.split(".")
    ns = int(sec) * 10**9 + int(frac.ljust(9, "0")[:9])
    s = "0" if y == "d" else s
    print("\t".join([y, s, str(ns), m, p, tg]))' | LC_ALL=C sort > "$T/want.list"
LC_ALL=C sort "$T/list.out" > "$T/got.list"
diff "$T/want.list" "$T/got.list" || fail "listing differs from the tree"
grep -q "^f	6	1577934245123456789	644	a.txt	$" "$T/got.list" ||
    fail "a.txt's nanosecond mtime"
grep -q "^l	5	.*	link	a.txt$" "$T/got.list" || fail "symlink entry"
grep -q "^f	0	.*	zero.dat	$" "$T/got.list" || fail "zero-byte file"
grep -q "sub/café.txt" "$T/got.list" || fail "UTF-8 name"
grep -q "biomirror-tmp" "$T/got.list" && fail "a temp file was listed"
assert_eq "$(wc -l < "$T/got.list")" 2011 "entries"
$CL list $H "$PORT" pub sub > "$T/sub.list" || fail "list sub"
grep -q "^d	0	.*	deeper	$" "$T/sub.list" || fail "paths relative to LIST's"

echo "# LIST writes its entries as the walk goes, 32 KiB at a time"
# 2,011 entries, about 90 KB: one send after the whole walk before.
SPORT2=$(free_port)
sed "s/^listen = .*/listen = $H:$SPORT2/" "$T/bm.conf" > "$T/bm2.conf"
strace -f -e trace=sendto -o "$T/list.strace" \
    "$BM" -c "$T/bm2.conf" serve > "$T/servel.log" 2>&1 &
LPID=$!
BM_SERVERS="$BM_SERVERS serve:$LPID:$T"
$CL wait $H "$SPORT2" || { cat "$T/servel.log"; fail "serve (strace)"; }
$CL list $H "$SPORT2" pub "" > "$T/list2.out" || fail "list (strace)"
cmp -s "$T/list.out" "$T/list2.out" || fail "the listing differs"
kill -TERM "$LPID"
wait "$LPID"
chunks=$(python3 - "$T/list.strace" <<'PYEOF'
import re, sys
lens = [int(m.group(1)) for m in
        (re.search(r', (\d+), MSG_', l) for l in open(sys.argv[1])) if m]
print(sum(32768 <= n <= 32768 + 5 + 65536 for n in lens),
      sum(n > 32768 + 5 + 65536 for n in lens))
PYEOF
)
assert_eq "$chunks" "2 0" "sends of 32 KiB or a frame more, none larger"

echo "# GET: 2,000 small files over 4 data connections, a range, a miss"
(cd "$T/up" && ls many | sed 's|^|many/|') > "$T/many.txt"
# shellcheck disable=SC2046
$CL get $H "$PORT" pub "$T/got" --conns 4 $(cat "$T/many.txt") \
    > "$T/get.out" || fail "get many"
grep -q '^ok 2000 items ' "$T/get.out" || fail "2000 items"
diff -r "$T/up/many" "$T/got/many" || fail "small files differ"
$CL get $H "$PORT" pub "$T/got" --conns 2 big.bin@1000000+4000000 a.txt \
    nothere zero.dat > "$T/get2.out" || fail "get range"
cat "$T/get2.out"
grep -q '^error nothere 6 ' "$T/get2.out" || fail "missing file not an item error"
grep -q '^ok 3 items 4000006 bytes' "$T/get2.out" || fail "range and files"
cmp "$T/got/big.bin@1000000+4000000" <(tail -c +1000001 "$T/up/big.bin" |
    head -c 4000000) || fail "range bytes differ"
[ "$(stat -c %Y "$T/got/a.txt")" = 1577934245 ] || fail "FILE's mtime"
grep -q 'export pub: many/f0006: 14 bytes, ' "$T/serve.log" ||
    fail "no log line per file"
grep -q 'export pub: big.bin \[1000000+4000000\]: 4000000 bytes' \
    "$T/serve.log" || fail "no log line for the range"
echo "# with a secret: authenticated, HMAC-SHA-256 digests"
$CL get $H "$PORT" sec "$T/gots" --secret "$T/secret" --conns 2 a.txt \
    big.bin > "$T/get3.out" || fail "get with secret"
cmp "$T/gots/big.bin" "$T/up/big.bin" || fail "big.bin over sec"
grep -q 'export sec: session started (version 1, authenticated)' \
    "$T/serve.log" || fail "authenticated session not logged"

echo "# version negotiation"
assert_eq "$($CL version $H "$PORT" pub 9)" "version 1" "offer 9"
assert_eq "$($CL version $H "$PORT" pub 1)" "version 1" "offer 1"

echo "# hostile requests: refused, logged, nothing served"
# hostile CASE WANT LOGTEXT [EXPORT [ARGS...]]
hostile() {
	local case=$1 want=$2 logtext=$3 exp=${4:-pub} out
	shift 4 2>/dev/null || shift $#
	out=$($CL hostile $H "$PORT" "$exp" "$case" "$@")
	echo "  $case -> $out"
	case $out in
	"$want"*) ;;
	*) fail "$case: got '$out', want '$want'" ;;
	esac
	grep -q -- "refused: .*$logtext" "$T/serve.log" ||
	    fail "$case: no log line 'refused: ...$logtext'"
}
hostile wrong-secret "ERROR 4" "export sec: wrong secret" sec --secret "$T/wrong"
hostile forged-token "ERROR 4" "unknown session token"
hostile stranger "ERROR 4" "another address than its session's, $H:"
hostile oversized "ERROR 5" "frame over 65536 bytes"
hostile oversized-first "ERROR 5" "first frame is not HELLO or ATTACH (too large"
hostile get:../outside/secret.txt "ERROR 7" "unsafe path '../outside/secret.txt'"
hostile get:/etc/passwd "ERROR 7" "unsafe path '/etc/passwd'"
hostile get:escape "ERROR 7" "GET of escape: leaves the export"
hostile get:etcdir/passwd "ERROR 7" "GET of etcdir/passwd: leaves the export"
hostile list:.. "ERROR 7" "LIST of an unsafe path"
hostile list:etcdir "ERROR 7" "LIST of an unsafe path"
hostile get:a.txt "ok got 6 bytes" "" local
hostile get:a.txt "ERROR 4" "export local: address not in its allow list" local --src 127.0.0.3
hostile too-many-conns "ERROR 5" "too many data connections for one session"
hostile too-many-clients "ERROR 5" "too many clients (max_clients 3)"
hostile get:a.txt "ok got 6 bytes" "" mapped
hostile get:a.txt "ERROR 4" "export mapped: address not in its allow list" mapped --src 127.0.0.3
hostile list:a.txt "ERROR 8 not a directory" ""
hostile list:link "ERROR 8 not a directory" ""
hostile list:nothere "ERROR 6" ""
hostile unknown-type "ERROR 1 unknown frame type" "export pub: unknown frame type 16"
hostile noexport-raw "ERROR 3 no such export" "no export '.xff.x00bad'"
hostile slow-frame "ERROR 5 frame too large or too slow" "frame over 65536 bytes or too slow"
# max_queued_bytes = 1M: a GET costs its bytes plus 64 an item (65,558
# here), so 15 stay queued and the 16th and 17th are refused.
hostile queue-bytes:17 "refused 16,17 (ERROR 5 too much queued)" \
    "GET 16: too many bytes queued (65536 items, max_queued_bytes 1048576"
hostile idle "ERROR 11" "" pub
grep -q 'export pub: idle timeout (1 s): session closed' "$T/serve.log" ||
    fail "idle timeout not logged"
grep -q 'do not serve' "$T"/got*/* 2>/dev/null && fail "outside file served"
grep -Eq ': (escape|etcdir/passwd|\.\./outside/secret.txt|/etc/passwd): [0-9]+ bytes' \
    "$T/serve.log" && fail "an escaping path was served"
# Connections beyond max_per_address (2 * (max_connections + 1) = 10) from
# one address, or max_clients * (max_connections + 1) = 15 in all, are cut
# before a byte is read.
python3 - $H "$PORT" <<'EOF' > "$T/tcp.out" || fail "tcp flood"
import socket, struct, sys
h, p = sys.argv[1], int(sys.argv[2])
def conn(src):
    s = socket.socket()
    s.settimeout(10)
    s.bind((src, 0))
    s.connect((h, p))
    return s
def answer(s):
    d = s.recv(64)
    return "ERROR %d" % struct.unpack(">IHHH", d[5:15])[2] if d else "CLOSED"
keep = [conn("127.0.0.4") for _ in range(10)]
print(answer(conn("127.0.0.4")))
keep += [conn("127.0.0.5") for _ in range(5)]
print(answer(conn("127.0.0.6")))
EOF
assert_eq "$(cat "$T/tcp.out")" "ERROR 5
ERROR 5" "the 11th connection from one address, the 16th in all"
grep -q '127.0.0.4:[0-9]*: refused: too many connections from one address (max_per_address 10)' \
    "$T/serve.log" || fail "per-address cap not logged"
grep -q '127.0.0.6:[0-9]*: refused: too many connections (15 open)' "$T/serve.log" ||
    fail "connection cap not logged"
grep -q '^biomirror_serve_refused_total [1-9]' "$T/serve.prom" ||
    fail "metrics file: refused_total"

echo "# SIGTERM drains: a running transfer finishes, new sessions refused"
mkfifo "$T/drain.in"
cat > "$T/drain.py" <<'EOF'
import hashlib, sys
sys.path.insert(0, sys.argv[3])
import bmclient
s = bmclient.Session(sys.argv[1], int(sys.argv[2]), "pub")
d = s.attach(rcvbuf=65536)     # the transfer stays running until read
rid = s.get_send([("big.bin", 0, 0)])
while len(d.buf) < 5:         # it is running: bytes came
    d.buf += d.sock.recv(5)
print("ready", flush=True)
sys.stdin.readline()          # the server has begun to drain
g, errs, end = s.get_recv(rid)
print("got", hashlib.sha256(g[0][0]).hexdigest(), flush=True)
EOF
python3 "$T/drain.py" $H "$PORT" "$BM_TOOLS" < "$T/drain.in" > "$T/drain.out" 2>&1 &
CPID=$!
exec 7> "$T/drain.in"
for _ in $(seq 1 100); do grep -q ready "$T/drain.out" && break; sleep 0.05; done
grep -q ready "$T/drain.out" || fail "drain client did not start"
kill -TERM "$SPID"
for _ in $(seq 1 100); do grep -q 'draining 1 session' "$T/serve.log" && break; sleep 0.05; done
grep -q 'draining 1 session' "$T/serve.log" || fail "no drain logged"
$CL version $H "$PORT" pub 1 > "$T/late.out" 2>&1 && fail "a new session during the drain"
echo go >&7
exec 7>&-
wait "$CPID" || { cat "$T/drain.out"; fail "drain client"; }
assert_eq "$(cat "$T/drain.out")" "ready
got $(sha256sum < "$T/up/big.bin" | cut -d' ' -f1)" "the drained transfer"
wait "$SPID"
assert_eq "$?" 0 "serve's exit after a drain"
grep -q 'serve: stopped$' "$T/serve.log" || fail "stop not logged"

echo "# SIGHUP does not stop serve; a drain ends idle and half-sent requests at once"
sed -i 's/^drain_timeout = 20/drain_timeout = 1/; s/^idle_timeout = 1/idle_timeout = 30/' "$T/bm.conf"
"$BM" -c "$T/bm.conf" serve > "$T/serve3.log" 2>&1 &
SPID=$!
BM_SERVERS="$BM_SERVERS serve:$SPID:$T"
$CL wait $H "$PORT" || fail "serve did not start again"
kill -HUP "$SPID"
assert_eq "$($CL version $H "$PORT" pub 1)" "version 1" "a session after SIGHUP"
kill -0 "$SPID" 2>/dev/null || fail "SIGHUP stopped serve"
grep -q 'Hangup' "$T/serve3.log" && fail "SIGHUP began a drain"
mkfifo "$T/half.in"
cat > "$T/half.py" <<'EOF'
import socket, struct, sys
sys.path.insert(0, sys.argv[3])
import bmclient
s = bmclient.Session(sys.argv[1], int(sys.argv[2]), "pub")
s.c.sock.sendall(struct.pack(">IB", 6, bmclient.LIST) + b"\0")  # half a LIST
x = socket.create_connection((sys.argv[1], int(sys.argv[2])))
x.sendall(b"\0\0")                                  # 2 bytes, no HELLO
print("held", flush=True)
sys.stdin.readline()
EOF
python3 "$T/half.py" $H "$PORT" "$BM_TOOLS" < "$T/half.in" > "$T/half.out" 2>&1 &
CPID=$!
exec 7> "$T/half.in"
for _ in $(seq 1 100); do grep -q held "$T/half.out" && grep -q 'session started' "$T/serve3.log" && break; sleep 0.05; done
grep -q held "$T/half.out" || fail "half-request client did not start"
kill -TERM "$SPID"
wait "$SPID"
assert_eq "$?" 0 "serve's exit: nothing was in flight"
grep -q 'drain timeout' "$T/serve3.log" && fail "the drain waited for idle reads"
grep -q 'serve: stopped$' "$T/serve3.log" || fail "stop not logged"
exec 7>&-
wait "$CPID"

echo "# drain_timeout: a transfer that does not finish is cut, exit 1"
"$BM" -c "$T/bm.conf" serve > "$T/serve2.log" 2>&1 &
SPID=$!
BM_SERVERS="$BM_SERVERS serve:$SPID:$T"
$CL wait $H "$PORT" || fail "serve did not start again"
python3 - $H "$PORT" "$BM_TOOLS" > "$T/stuck.out" 2>&1 <<'EOF' &
import struct, sys, time
sys.path.insert(0, sys.argv[3])
import bmclient
s = bmclient.Session(sys.argv[1], int(sys.argv[2]), "pub")
d = s.attach()
s.c.send(bmclient.GET, struct.pack(">IH", 1, 1) + bmclient.s16(b"big.bin") +
         struct.pack(">QQ", 0, 0))
print("stuck", flush=True)
try:
    s.c.sock.recv(1)          # never reads the data connection
except OSError:
    pass
EOF
CPID=$!
for _ in $(seq 1 100); do grep -q stuck "$T/stuck.out" && grep -q 'session started' "$T/serve2.log" && break; sleep 0.05; done
kill -TERM "$SPID"
wait "$SPID"
assert_eq "$?" 1 "serve's exit after cutting"
grep -q 'drain timeout: cutting' "$T/serve2.log" || fail "cut not logged"
wait "$CPID"

echo "# every export has an allow list: other addresses refused at accept"
cat > "$T/allow.conf" <<CONF
[serve]
listen = $H:$PORT

[export only]
path = $T/up
allow = 127.0.0.1/32
CONF
"$BM" -c "$T/allow.conf" serve > "$T/serve4.log" 2>&1 &
SPID=$!
BM_SERVERS="$BM_SERVERS serve:$SPID:$T"
$CL wait $H "$PORT" || fail "serve did not start (allow)"
out=$($CL hostile $H "$PORT" only prehello --src 127.0.0.3)
assert_eq "$out" "ERROR 4 address not allowed" "a connection no export allows"
grep -q "127.0.0.3:[0-9]*: refused: address not in any export's allow list" \
    "$T/serve4.log" || fail "accept-time allow refusal not logged"
kill -TERM "$SPID"
wait "$SPID"
echo PASS
