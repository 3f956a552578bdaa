#!/bin/bash
# bm:// sources (the client of docs/protocol.md) against biomirror serve:
# - a tree with nested dirs, UTF-8 names, a zero-byte file, a symlink,
#   2,000 small files and a 64 MB file mirrored with 1 and with 4 data
#   connections: byte-identical (diff -r), every mtime equal to the
#   nanosecond (directories and the symlink too);
# - a run that changes nothing makes exactly one LIST request and fetches
#   nothing (the server's log), and attaches no data connection (the
#   client's -v -v log);
# - an export with a secret: the right secret_file works (an
#   authenticated session), a wrong one fails the run (exit 3) with a
#   clear message and nothing fetched; without one the run says the
#   export needs it.
# BM_SERVE (default BM) is the binary that serves; BM the client.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup
H=127.0.0.1

mkdir -p "$T/up/sub/deeper" "$T/up/many"
printf 'hello\n' > "$T/up/a.txt"
: > "$T/up/zero.dat"
printf 'caf\xc3\xa9\n' > "$T/up/sub/caf$(printf '\xc3\xa9').txt"
printf 'deep\n' > "$T/up/sub/deeper/d.bin"
ln -s a.txt "$T/up/link"
make_big_file "$T/up/big.bin" 64
python3 - "$T/up" <<'EOF' || fail "tree"
import os, sys
root = sys.argv[1]
for i in range(2000):
    p = os.path.join(root, "many", "f%04d" % i)
    with open(p, "wb") as f:
        f.write(b"%d\n" % i * (1 + i % 7))
    t = 1600000000 * 10**9 + i * 1000003 + 123456789
    os.utime(p, ns=(t, t))
EOF
touch -d '2020-01-02 03:04:05.123456789 UTC' "$T/up/a.txt"
touch -h -d '2019-05-06 07:08:09.987654321 UTC' "$T/up/link"
touch -d '2018-01-01 00:00:00.5 UTC' "$T/up/sub/deeper" "$T/up/many" "$T/up/sub"
umask 077
printf 's3cret\n' > "$T/secret"
printf 'wrong\n' > "$T/wrong"
umask 022

PORT=$(free_port)
cat > "$T/serve.conf" <<CONF
[serve]
listen = $H:$PORT
max_connections = 8

[export pub]
path = $T/up

[export sec]
path = $T/up
secret_file = $T/secret
CONF
"${BM_SERVE:-$BM}" -c "$T/serve.conf" serve > "$T/serve.log" 2>&1 &
SPID=$!
BM_SERVERS="$BM_SERVERS serve:$SPID:$T"
python3 "$BM_TOOLS/bmclient.py" wait $H "$PORT" ||
    { cat "$T/serve.log"; fail "serve did not start"; }

# conf NAME EXPORT CONNS [KEY = VALUE ...]: a mirror section to $T/bm.conf.
: > "$T/bm.conf"
conf() {
	local name=$1 exp=$2 conns=$3
	shift 3
	{
		printf '[%s]\nsource = bm://%s:%s/%s/\ndest = %s\n' "$name" \
		    $H "$PORT" "$exp" "$T/$name"
		printf 'max_connections = %s\nconcurrency = 64\n' "$conns"
		printf 'retries = 1\ntimeout = 5\nstall_timeout = 10\n'
		for kv in "$@"; do printf '%s\n' "$kv"; done
	} >> "$T/bm.conf"
}
conf one pub 1
conf four pub 4
conf secok sec 2 "secret_file = $T/secret"
conf secbad sec 2 "secret_file = $T/wrong"
conf secnone sec 2

# ns_list DIR: type, size (files), mtime to the nanosecond, path, target.
ns_list() {
	(cd "$1" && find . -mindepth 1 -printf '%y %s %TY-%Tm-%Td %TT %P %l\n') |
	    sed 's/^d [0-9]* /d - /' | LC_ALL=C sort -k5
}
ns_list "$T/up" > "$T/want.ns"
grep -q '^f 6 2020-01-02 03:04:05.1234567890 a.txt $' "$T/want.ns" ||
    { head -3 "$T/want.ns"; fail "the test's own listing lacks nanoseconds"; }

for m in one four; do
	echo "# $m: the whole tree"
	assert_exit 0 bm -v -v --json sync "$m"
	expect_counts 2005 0 0 0
	grep -Eq "session up: $( [ $m = one ] && echo 1 || echo 4) data connection" \
	    "$LAST_ERR" || fail "$m: not the data connections asked for"
	diff -r --no-dereference "$T/up" "$T/$m" || fail "$m: trees differ"
	ns_list "$T/$m" > "$T/$m.ns"
	diff "$T/want.ns" "$T/$m.ns" || fail "$m: mtimes differ (to the ns)"
	assert_eq "$(stat -c %y "$T/$m/many/f1999")" \
	    "$(stat -c %y "$T/up/many/f1999")" "$m: stat -c %y"
	assert_eq "$(readlink "$T/$m/link")" a.txt "$m: symlink"
	no_temps "$T/$m"
done
# The 64 MB file came as ranges over the four connections (items of 4 MB).
grep -Eq 'export pub: big.bin \[[0-9]+\+4194304\]: 4194304 bytes' \
    "$T/serve.log" || fail "big.bin not in 4 MB items"

echo "# no change: one LIST, nothing fetched"
lists=$(grep -c ': listed /: ' "$T/serve.log")
items=$(grep -Ec ': [0-9]+ bytes, [0-9.]+ s$' "$T/serve.log")
assert_exit 0 bm -v -v --json sync four
expect_counts 0 0 0 0
assert_eq "$(grep -c ': listed /: ' "$T/serve.log")" $((lists + 1)) \
    "LIST requests of a no-change run"
# The LIST goes over the control connection: nothing to fetch, no data
# connection attached.
grep -q "session up: " "$LAST_ERR" &&
    fail "a no-change run attached data connections: $(grep "session up: " "$LAST_ERR")"
grep -q ': listed /: 2009 entries$' "$T/serve.log" || fail "entries listed"
assert_eq "$(grep -Ec ': [0-9]+ bytes, [0-9.]+ s$' "$T/serve.log")" \
    "$items" "items served in a no-change run"

echo "# a secret: right, wrong, none"
assert_exit 0 bm --json sync secok
expect_counts 2005 0 0 0
diff -r --no-dereference "$T/up" "$T/secok" || fail "secok: trees differ"
grep -q 'export sec: session started (version 1, authenticated)' \
    "$T/serve.log" || fail "no authenticated session"
assert_exit 3 bm sync secbad
grep -q "secbad: list: .*bm://$H:$PORT/sec: the server refused: access denied (authentication failed)" \
    "$LAST_ERR" || fail "wrong secret: no clear message"
grep -q 'refused: export sec: wrong secret' "$T/serve.log" ||
    fail "wrong secret not logged by the server"
[ -z "$(ls -A "$T/secbad" 2>/dev/null)" ] || fail "secbad: files fetched"
assert_exit 3 bm sync secnone
grep -q "the export needs a secret (the mirror's secret_file)" "$LAST_ERR" ||
    fail "no secret: no clear message"

# list URL (issue 23): a bm:// export's listing, exact sizes and times to
# the nanosecond, symlinks with their targets; -r the whole tree.
echo "# list"
assert_exit 0 "$BM" list "bm://$H:$PORT/pub/"
grep -qx 'f            6 2020-01-02T03:04:05.123456789Z a.txt' "$LAST_OUT" ||
    fail "list: bm a.txt"
grep -qx 'l            - 2019-05-06T07:08:09.987654321Z link -> a.txt' "$LAST_OUT" ||
    fail "list: bm link"
grep -qx 'd            - 2018-01-01T00:00:00.500000000Z sub' "$LAST_OUT" ||
    fail "list: bm sub"
grep -q ' sub/' "$LAST_OUT" && fail "list without -r entered sub"
assert_exit 0 "$BM" list -r --json "bm://$H:$PORT/pub/sub/"
python3 - "$LAST_OUT" <<'PY' || fail "list -r --json: bm"
import json, sys
a = json.load(open(sys.argv[1]))
got = [(e["path"], e["type"], e["size"], e["size_exact"],
        e["mtime_precision"]) for e in a]
want = [("caf\u00e9.txt", "file", 6, True, "nanosecond"),
        ("deeper", "dir", None, False, "nanosecond"),
        ("deeper/d.bin", "file", 5, True, "nanosecond")]
assert got == want, got
PY
# A refusal says its reason once, and list prints a failed page once.
assert_exit 3 "$BM" list "bm://$H:$PORT/nope/"
assert_eq "$(cat "$LAST_ERR")" "biomirror: bm://$H:$PORT/nope/: list: bm://$H:$PORT/nope: the server refused: no such export" \
    "list of no such export"
assert_exit 3 "$BM" list "bm://$H:$PORT/pub/a.txt"
assert_eq "$(cat "$LAST_ERR")" "biomirror: bm://$H:$PORT/pub/a.txt/: list: LIST: the server: not a directory" \
    "list of a file"
echo PASS
