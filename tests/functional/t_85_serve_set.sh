#!/bin/bash
# biomirror serve of a publish = set mirror (export mirror = NAME): a
# session serves the snapshot that was live when it started for its
# whole length, and the mirror's own sync does not remove a snapshot a
# session holds (a shared lock on it): the sync keeps it and says so, and
# a later sync, after the session ended, removes it.  The session is held
# open deterministically by the test client reading its stdin (a FIFO).
# End to end: a downstream mirror syncing from the export over bm:// is
# held mid-transfer (the server stops itself half-way through big.bin:
# BM_SERVE_TEST_STOP, agent/serve/serve_int.h) while the mirror publishes
# two new builds; released, it gets only files of the snapshot it started
# with (bytes and mtimes), exit 0 and nothing to say; its next run gets
# the new build; the held snapshot is kept, then removed by a later sync.
# One whose session is lost (stall_timeout) and reconnects to a newer
# build refuses the files that build changed (their mtime is not the
# listing's): exit 1, nothing of that build published.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup
CL="python3 $BM_TOOLS/bmclient.py"
H=127.0.0.1

mkdir -p "$T/up"
printf 'one\n' > "$T/up/a.dat"
printf 'fixed\n' > "$T/up/b.dat"
start_nginx "$T/up" "autoindex_format json;"
write_conf "$NGINX_URL"
PORT=$(free_port)
cat >> "$T/bm.conf" <<CONF
publish = set

[serve]
listen = $H:$PORT
idle_timeout = 60

[export pub]
mirror = up
CONF
SNAPS=$T/mirror.biomirror/snapshots
sha() { printf '%s' "$1" | sha256sum | cut -d' ' -f1; }
# version TEXT MTIME: upstream a.dat changes (content, size and mtime).
version() {
	printf '%s\n' "$1" > "$T/up/a.dat"
	touch -d "$2" "$T/up/a.dat"
}
version one '2024-01-01 00:00:00 UTC'
assert_exit 0 bm sync up
S1=$(basename "$(readlink "$T/mirror")")

BM_SERVE_TEST_STOP=big.bin "$BM" -c "$T/bm.conf" --state-dir "$T/state" \
    serve > "$T/serve.log" 2>&1 &
SPID=$!
BM_SERVERS="$BM_SERVERS serve:$SPID:$T/serve"
$CL wait $H "$PORT" || { cat "$T/serve.log"; fail "serve did not start"; }

echo "# a session pins snapshot $S1"
mkfifo "$T/hold.in" "$T/hold.out"
$CL hold $H "$PORT" pub a.dat < "$T/hold.in" > "$T/hold.out" 2> "$T/hold.err" &
HPID=$!
exec 7> "$T/hold.in" 8< "$T/hold.out"
read -r -t 20 line <&8 || fail "hold client: no answer"
assert_eq "$line" "ready $S1" "the session's snapshot"
grep -q "export pub: serving snapshot $S1" "$T/serve.log" ||
    fail "pinned snapshot not logged"
echo get >&7
read -r -t 20 line <&8 || fail "hold client: no answer"
assert_eq "$line" "got $(sha 'one
')" "a.dat of snapshot $S1"

echo "# the mirror publishes twice; the held snapshot stays"
version two '2024-02-01 00:00:00 UTC'
assert_exit 0 bm sync up
version three '2024-03-01 00:00:00 UTC'
assert_exit 0 bm sync up
S3=$(basename "$(readlink "$T/mirror")")
[ "$S3" != "$S1" ] || fail "no new snapshot published"
grep -q "up: kept 1 old snapshot that a serve session holds" "$LAST_ERR" ||
    fail "the sync did not say it kept the held snapshot"
[ -f "$SNAPS/$S1/a.dat" ] || fail "held snapshot $S1 was removed"
assert_eq "$(cat "$SNAPS/$S1/a.dat")" one "held snapshot's a.dat"
echo get >&7
read -r -t 20 line <&8 || fail "hold client: no answer"
assert_eq "$line" "got $(sha 'one
')" "the session still gets snapshot $S1's a.dat"
echo "# a new session gets the new snapshot"
$CL get $H "$PORT" pub "$T/new" a.dat > /dev/null || fail "new session"
assert_eq "$(cat "$T/new/a.dat")" three "a.dat of the published snapshot"

echo "# the session ends; the next sync removes the old snapshot"
exec 7>&-
read -r -t 20 line <&8 && fail "hold client said more: $line"
exec 8<&-
wait "$HPID" || { cat "$T/hold.err"; fail "hold client failed"; }
# The server closes the snapshot's fd when it has logged the session end.
for _ in $(seq 1 100); do
	[ "$(grep -c 'export pub: session ended' "$T/serve.log")" -ge 2 ] && break
	sleep 0.05
done
[ "$(grep -c 'export pub: session ended' "$T/serve.log")" -ge 2 ] ||
    fail "session end not logged"
version four '2024-04-01 00:00:00 UTC'
assert_exit 0 bm sync up
grep -q "kept .* old snapshot" "$LAST_ERR" && fail "kept a snapshot no one holds"
[ -e "$SNAPS/$S1" ] && fail "snapshot $S1 not removed after the session"

echo "# end to end: a downstream held mid-transfer gets only its snapshot"
# sessions_done: every session of export pub the server started has ended
# (it logs the end once the snapshot's fd is closed).
sessions_done() {
	local i
	for i in $(seq 1 100); do
		[ "$(grep -c 'export pub: session started' "$T/serve.log")" = \
		    "$(grep -c 'export pub: session ended' "$T/serve.log")" ] &&
		    return 0
		sleep 0.05
	done
	fail "sessions not ended"
}
make_big_file "$T/up/big.bin" 8 build-p
printf 'old\n' > "$T/up/old.dat"
touch -d '2024-05-01 00:00:01 UTC' "$T/up/old.dat"
version five '2024-05-01 00:00:00 UTC'
assert_exit 0 bm sync up
P=$(basename "$(readlink "$T/mirror")")
cp -a "$T/up" "$T/want-p"
cat > "$T/down.conf" <<CONF
[down]
source = bm://$H:$PORT/pub/
dest = $T/down
delete = yes
max_connections = 1
retries = 0
timeout = 10
stall_timeout = 60
CONF
down() {
	"$BM" -c "$T/down.conf" --state-dir "$T/dstate" --json sync down
}
# counts OUT: "status listed/fetched/touched/deleted/failed" of a --json run.
counts() {
	python3 -c 'import json,sys; r = json.load(open(sys.argv[1]))[0]
print(r["status"], "/".join(str(r[k]) for k in
      ("listed", "fetched", "touched", "deleted", "failed")))' "$1"
}
down > "$T/down.out" 2> "$T/down.err" &
DPID=$!
# The server stops itself (SIGSTOP) with big.bin's first 4 MB item sent
# but not its digest.
for _ in $(seq 1 200); do
	[ "$(cut -d' ' -f3 "/proc/$SPID/stat")" = T ] && break
	sleep 0.05
done
[ "$(cut -d' ' -f3 "/proc/$SPID/stat")" = T ] ||
    { cat "$T/down.err"; fail "the server did not stop in big.bin"; }
grep -q 'serve: test hook: stopped in big.bin' "$T/serve.log" ||
    fail "stopped elsewhere"
grep -q "export pub: serving snapshot $P" "$T/serve.log" ||
    fail "the downstream's session is not on snapshot $P"
kill -0 "$DPID" || fail "the downstream's run did not wait"
# Meanwhile the mirror publishes two builds: big.bin (same size, new
# bytes and mtime), a.dat changed twice, old.dat gone, new.dat new.
make_big_file "$T/up/big.bin" 8 build-q
touch -d '2024-06-01 00:00:00 UTC' "$T/up/big.bin"
rm "$T/up/old.dat"
printf 'new\n' > "$T/up/new.dat"
version six '2024-06-01 00:00:00 UTC'
assert_exit 0 bm sync up
version seven '2024-07-01 00:00:00 UTC'
assert_exit 0 bm sync up
Q=$(basename "$(readlink "$T/mirror")")
[ "$Q" != "$P" ] || fail "no new snapshot published"
grep -q "up: kept 1 old snapshot that a serve session holds" "$LAST_ERR" ||
    fail "the sync did not keep the downstream's snapshot $P"
diff -r "$T/want-p" "$SNAPS/$P" || fail "held snapshot $P changed"
kill -CONT "$SPID"
wait "$DPID"
assert_eq "$?" 0 "the held downstream run's exit"
assert_eq "$(counts "$T/down.out")" "ok 4/4/0/0/0" "the held run's counts"
[ -s "$T/down.err" ] && { cat "$T/down.err"; fail "the held run warned"; }
assert_trees_equal "$T/want-p" "$T/down"
cmp -s "$T/up/big.bin" "$T/down/big.bin" && fail "big.bin of the new build"
sessions_done

echo "# the downstream's next run gets the new build"
assert_exit 0 down
assert_eq "$(counts "$T/last.out")" "ok 4/3/0/1/0" "the next run's counts"
assert_trees_equal "$T/up" "$T/down"
sessions_done

echo "# no session holds $P: the next sync removes it"
version eight '2024-08-01 00:00:00 UTC'
assert_exit 0 bm sync up
grep -q "kept .* old snapshot" "$LAST_ERR" && fail "kept a snapshot no one holds"
[ -e "$SNAPS/$P" ] && fail "snapshot $P not removed after the session"

echo "# a downstream whose session is lost reconnects to a newer build: no mix"
# Its stall_timeout ends the stopped session; the build published then is
# what the new session serves: z.bin (same size, new bytes and mtime) is
# upstream changed since the listing, never that build's bytes.
kill -TERM "$SPID"
wait "$SPID"
assert_eq "$?" 0 "serve's exit"
BM_SERVE_TEST_STOP=big.bin "$BM" -c "$T/bm.conf" --state-dir "$T/state" \
    serve > "$T/serve2.log" 2>&1 &
SPID=$!
BM_SERVERS="$BM_SERVERS serve:$SPID:$T/serve"
$CL wait $H "$PORT" || { cat "$T/serve2.log"; fail "serve did not start"; }
make_big_file "$T/up/big.bin" 8 build-r
touch -d '2024-09-01 00:00:00 UTC' "$T/up/big.bin"
printf 'r\n' > "$T/up/z.bin"
touch -d '2024-09-01 00:00:00 UTC' "$T/up/z.bin"
assert_exit 0 bm sync up
cp -a "$T/up" "$T/want-r"
sed -i -e 's/^stall_timeout = 60$/stall_timeout = 2/' \
    -e 's/^retries = 0$/retries = 1\nconcurrency = 1/' "$T/down.conf"
down > "$T/down.out" 2> "$T/down.err" &
DPID=$!
for _ in $(seq 1 200); do
	grep -q 'big.bin: fetch: .*no data for 2 s.*(retry 1 of 1)' \
	    "$T/down.err" && break
	sleep 0.05
done
grep -q '(retry 1 of 1)' "$T/down.err" ||
    { cat "$T/down.err"; fail "the downstream's session did not stall"; }
printf 's\n' > "$T/up/z.bin"
touch -d '2024-10-01 00:00:00 UTC' "$T/up/z.bin"
assert_exit 0 bm sync up
kill -CONT "$SPID"
wait "$DPID"
assert_eq "$?" 1 "the reconnected downstream run's exit"
assert_eq "$(counts "$T/down.out")" "partial 5/2/0/0/1" \
    "the reconnected run's counts"
grep -q "down: z.bin: fetch: upstream changed since the listing (its mtime differs)$" \
    "$T/down.err" || fail "z.bin of the newer build not refused"
[ -e "$T/down/z.bin" ] && fail "z.bin of the newer build published"
(cd "$T/down" && find . -type f -printf '%P\n') | while read -r f; do
	cmp -s "$T/down/$f" "$T/want-r/$f" || fail "$f: not of the listed build"
	[ "$(stat -c %Y "$T/down/$f")" = "$(stat -c %Y "$T/want-r/$f")" ] ||
	    fail "$f: mtime not of the listed build"
done || exit 1
kill -TERM "$SPID"
wait "$SPID"
assert_eq "$?" 0 "serve's exit"
echo PASS
