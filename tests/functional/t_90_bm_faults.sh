#!/bin/bash
# bm:// faults, held deterministically by biomirror serve's test-only hooks
# (agent/serve/serve_int.h):
# - BM_SERVE_TEST_STOP: the server stops itself (SIGSTOP) half-way
#   through a 24 MB file: with retries = 0 the run ends within the stall
#   timeout (exit 1, "no data for 2 s"), no partial file under a final
#   name; stopped again, a run that waits to retry is interrupted (TERM):
#   the temp file is kept, and with the server killed and started again
#   the next run resumes ("continuing with"), its first half never asked
#   for again;
# - BM_SERVE_TEST_CORRUPT: one byte of a served range flipped: the digest
#   catches it, nothing of it reaches the file, the range is fetched
#   again, the file ends byte-identical.
# - a hostile server (tests/tools/bmevilserver.py) whose listings are
#   inconsistent: a name listed twice, or as a file and as a directory,
#   keeps the first and is counted ("a name listed again"); entries
#   below a listed file or symlink are skipped and counted ("below a
#   file or a symlink"), never fetched: exit 0, no directory where the
#   listing has a file or a symlink, the same on the next run;
# - mtimes the file system cannot store (-2**63 ns: ext4 keeps 1901-12-13):
#   the manifest records the mtime the file kept, so the next run touches
#   nothing; a manifest that holds the unstorable one (written before)
#   is touched once, then not again.
# BM_SERVE (default BM) is the binary that serves; BM the client.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup
H=127.0.0.1
CL="python3 $BM_TOOLS/bmclient.py"

mkdir -p "$T/up"
make_big_file "$T/up/big.bin" 24 stop
make_big_file "$T/up/c.bin" 10 corrupt
printf 'small\n' > "$T/up/small.txt"
PORT=$(free_port)
printf '[serve]\nlisten = %s:%s\n\n[export pub]\npath = %s\n' $H "$PORT" \
    "$T/up" > "$T/serve.conf"

# serve LOG [VAR=VALUE]: start biomirror serve (with a test hook).
serve() {
	env ${2:+"$2"} "${BM_SERVE:-$BM}" -c "$T/serve.conf" serve > "$1" 2>&1 &
	SPID=$!
	BM_SERVERS="$BM_SERVERS serve:$SPID:$T"
	$CL wait $H "$PORT" || { cat "$1"; fail "serve did not start"; }
}

cat > "$T/bm.conf" <<CONF
[stall]
source = bm://$H:$PORT/pub/
dest = $T/stall
include = big.bin
max_connections = 1
retries = 0
timeout = 2
stall_timeout = 2

[corrupt]
source = bm://$H:$PORT/pub/
dest = $T/corrupt
; more connections than big files: c.bin goes in ranges (protocol.md)
max_connections = 3
retries = 2
CONF

echo "# the server stops half-way through big.bin: the run ends in time"
serve "$T/serve1.log" BM_SERVE_TEST_STOP=big.bin
t0=$(date +%s%N)
assert_exit 1 bm sync stall
t1=$(date +%s%N)
grep -q 'serve: test hook: stopped in big.bin' "$T/serve1.log" ||
    fail "the hook did not stop the server"
secs=$(((t1 - t0) / 1000000000))
[ "$secs" -lt 8 ] || fail "the run took $secs s (stall_timeout 2)"
grep -q "big.bin: fetch: bm://$H:$PORT/pub: no data for 2 s (stall_timeout)" \
    "$LAST_ERR" || fail "stall not named"
[ -e "$T/stall/big.bin" ] && fail "a partial file under its final name"
kill -KILL "$SPID"
wait "$SPID" 2>/dev/null

echo "# stopped again, the run interrupted while it waits to retry"
serve "$T/serve2.log" BM_SERVE_TEST_STOP=big.bin
sed -i 's/^retries = 0$/retries = 5/' "$T/bm.conf"
"$BM" -c "$T/bm.conf" --state-dir "$T/state" sync stall > "$T/run2.out" 2> "$T/run2.err" &
RPID=$!
for _ in $(seq 1 200); do
	grep -q 'big.bin: fetch: .*no data for 2 s.*(retry 1 of 5)' \
	    "$T/run2.err" && break
	sleep 0.05
done
grep -q '(retry 1 of 5)' "$T/run2.err" || { cat "$T/run2.err"; fail "no retry"; }
kill -TERM "$RPID"
wait "$RPID"
assert_eq "$?" 1 "exit of the interrupted run"
[ -e "$T/stall/big.bin" ] && fail "a partial file under its final name"
ls "$T"/stall/.biomirror-tmp.* > /dev/null 2>&1 || fail "no temp file kept"
kill -KILL "$SPID"
wait "$SPID" 2>/dev/null

echo "# the server started again: the next run resumes"
serve "$T/serve3.log"
assert_exit 0 bm sync stall
grep -q 'big.bin: continuing with [1-9][0-9]* of 25165824 bytes held' \
    "$LAST_ERR" || fail "not resumed"
cmp "$T/up/big.bin" "$T/stall/big.bin" || fail "big.bin differs"
no_temps "$T/stall"
grep -Eq 'big.bin \[(0|4194304)\+4194304\]' "$T/serve3.log" &&
    fail "bytes held asked for again"
grep -q 'big.bin \[' "$T/serve3.log" || fail "big.bin not served again"
kill -TERM "$SPID"
wait "$SPID" 2>/dev/null

echo "# a flipped byte: caught by the digest, fetched again"
serve "$T/serve4.log" BM_SERVE_TEST_CORRUPT=c.bin
assert_exit 0 bm sync corrupt
grep -q 'serve: test hook: one byte of c.bin flipped' "$T/serve4.log" ||
    fail "the hook did not flip a byte"
grep -q 'c.bin: bytes \[0, 4194304): the SHA-256 does not match the server.s: discarded' \
    "$LAST_ERR" || fail "mismatch not logged"
grep -q 'c.bin: .*does not match.*fetched again (retry 1 of 2)' "$LAST_ERR" ||
    fail "no retry of the range"
assert_eq "$(grep -c 'export pub: c.bin \[0+4194304\]: 4194304 bytes' \
    "$T/serve4.log")" 2 "the range served twice"
cmp "$T/up/c.bin" "$T/corrupt/c.bin" || fail "c.bin differs"
diff -r "$T/up" "$T/corrupt" || fail "trees differ"
no_temps "$T/corrupt"
kill -TERM "$SPID"
wait "$SPID" 2>/dev/null

echo "# a hostile server: inconsistent listings"
EPORT=$(free_port)
python3 "$BM_TOOLS/bmevilserver.py" --port "$EPORT" > "$T/evil.log" 2>&1 &
EPID=$!
BM_SERVERS="$BM_SERVERS evil:$EPID:$T"
$CL wait $H "$EPORT" || { cat "$T/evil.log"; fail "evil server did not start"; }
for sc in dup filedir dirfile linkesc linkin linkin2 linkup mtimes; do
	printf '[%s]\nsource = bm://%s:%s/pub/%s/\ndest = %s/ev/%s\nretries = 0\ntimeout = 5\n\n' \
	    "$sc" $H "$EPORT" "$sc" "$T" "$sc"
done > "$T/evil.conf"
# evil SCENARIO DUPS BENEATH: two runs, each exit 0 with those counts.
evil() {
	local run
	for run in 1 2; do
		assert_exit 0 "$BM" -c "$T/evil.conf" --state-dir "$T/evstate" \
		    sync "$1"
		assert_eq "$(grep -c "^biomirror: $1: list: $2 entries skipped: a name listed again (or as a file and as a directory): the first kept\$" "$LAST_ERR")" \
		    "$(($2 > 0))" "$1 run $run: $2 duplicates counted"
		assert_eq "$(grep -c "^biomirror: $1: list: $3 entries skipped: below a file or a symlink of the listing\$" "$LAST_ERR")" \
		    "$(($3 > 0))" "$1 run $run: $3 below a non-directory counted"
	done
}
evil dup 1 0
assert_eq "$(cat "$T/ev/dup/a")" AAAA "dup: a"
evil filedir 1 1
[ -f "$T/ev/filedir/a" ] && [ ! -L "$T/ev/filedir/a" ] ||
    fail "filedir: a is not the file listed first"
evil dirfile 1 0
[ -d "$T/ev/dirfile/a" ] && [ -f "$T/ev/dirfile/a/x" ] ||
    fail "dirfile: not the directory listed first"
evil linkesc 0 2
[ -e "$T/ev/linkesc/esc" ] || [ -L "$T/ev/linkesc/esc" ] &&
    fail "linkesc: something made where the listing has esc -> /etc"
[ -e "$T/ev/linkesc/up" ] && fail "linkesc: something made for up -> .."
evil linkin 0 1
evil linkin2 0 1
for sc in linkin linkin2; do
	assert_eq "$(readlink "$T/ev/$sc/esc")" d "$sc: esc is the link"
	[ -e "$T/ev/$sc/d/x" ] && fail "$sc: x written through the link"
done
evil linkup 0 2
assert_eq "$(readlink "$T/ev/linkup/s/t/l")" .. "linkup: s/t/l"
assert_eq "$(find "$T/ev/linkup" -name pwn | wc -l)" 0 "linkup: pwn written"
grep -E '^GET (linkesc/esc/|linkesc/up/|linkin2?/esc/|linkup/s/t/l/|filedir/a/)' \
    "$T/evil.log" && fail "an entry below a file or a symlink was fetched"
[ -e "$T/ev/pwned" ] && fail "up/pwned written outside its mirror"

echo "# mtimes out of the file system's range: not touched on every run"
# evm TOUCHED: a --json run of mtimes, exit 0, nothing fetched.
evm() {
	assert_exit 0 "$BM" -c "$T/evil.conf" --state-dir "$T/evstate" --json \
	    sync mtimes
	assert_eq "$(jfield fetched)/$(jfield touched)" "0/$1" "fetched/touched"
}
assert_exit 0 "$BM" -c "$T/evil.conf" --state-dir "$T/evstate" sync mtimes
evm 0
evm 0
sql() { sqlite3 "$(manifest_db "$T/evstate" mtimes)" "$1"; }
for f in a b c ok.txt; do
	want=$(python3 -c 'import os, sys; print(os.lstat(sys.argv[1]).st_mtime_ns)' \
	    "$T/ev/mtimes/$f")
	got=$(sql "SELECT COALESCE(local_mtime, list_mtime) FROM files WHERE path = CAST('$f' AS BLOB)")
	assert_eq "$((got))" "$((want))" "$f: the mtime recorded is the file's"
done
assert_eq "$(sql "SELECT list_mtime FROM files WHERE path = CAST('a' AS BLOB)")" \
    -9223372036854775808 "a: the listed mtime kept as listed"
sql "UPDATE files SET local_mtime = list_mtime WHERE path = CAST('a' AS BLOB)"
evm 1
evm 0
echo PASS
