#!/bin/bash
# biomirror serve of a publish = set mirror (export mirror = NAME): a
# session serves the snapshot that was live when it started for its
# whole length, and the mirror's own sync does not remove a snapshot a
# session holds (a shared lock on it): the sync keeps it and says so, and
# a later sync, after the session ended, removes it.  The session is held
# open deterministically by the test client reading its stdin (a FIFO).
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

"$BM" -c "$T/bm.conf" --state-dir "$T/state" serve > "$T/serve.log" 2>&1 &
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
kill -TERM "$SPID"
wait "$SPID"
assert_eq "$?" 0 "serve's exit"
echo PASS
