#!/bin/bash
# Faults with defined outcomes (issue 5), each with its exact exit code,
# files on disk, manifest state and message, using the per-path faults of
# tests/tools/faultserver.py:
#  - a connection reset mid-body of one range: only what is missing of
#    that range is fetched again (If-Range), the file is exact; a small
#    file is fetched again whole;
#  - 500 without Retry-After and 429 with it are retried; a 429 that
#    stays past --retries fails the file (exit 1), nothing published;
#  - 410 for a listed file: reported (vanished), the old copy kept, not
#    deleted; a later complete listing without it deletes it;
#  - a file that changes upstream during the transfer (ranges disagree;
#    If-Range answered 200) starts over and ends up as the new version;
#    ETags that differ per request (a load balancer) end in one stream;
#  - ENOSPC on a small tmpfs: stop, exit 1, what finished is committed,
#    no partial file under a final name, no temp file, a clear message;
#  - an empty (0-byte) manifest: status and sync exit 2 saying so and
#    what rebuilds it (resync --adopt, t_76), never starting it afresh;
#  - a corrupt or a locked manifest: exit 2, an error naming the file,
#    the file left as it was (never recreated);
#  - a destination directory the run may not write in: the file fails
#    with "Permission denied", not "I/O error".
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup
trap '_rc=$?; umount "$T/mnt" 2>/dev/null; (exit $_rc); bm_cleanup' EXIT

mkdir -p "$T/up"
make_big_file "$T/up/big.bin" 20 faults
head -c 5000 /dev/urandom > "$T/up/small.bin"
touch -d '2022-01-02 03:04:05 UTC' "$T/up/small.bin"
printf 'bye\n' > "$T/up/gone.txt"
touch -d '2022-01-02 03:04:06 UTC' "$T/up/gone.txt"
size=$((20 * 1048576))

# sent PATH: body bytes the fault server sent for PATH.
sent() {
	python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["sent"].get(sys.argv[2], 0))' \
	    "$FAULT_STATS" "$1"
}
gets() {
	python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["gets"].get(sys.argv[2], 0))' \
	    "$FAULT_STATS" "$1"
}
fresh() {
	stop_servers
	rm -rf "$T/mirror" "$T/state"
	start_faultserver "$T/up" normal "$@"
	write_conf "$FAULT_URL"
	printf 'streams = 4\nmin_split = 4M\n' >> "$T/bm.conf"
}

echo "# a connection reset mid-body: only the missing part is fetched again"
fresh --fault "/big.bin=reset,at=1000000,times=1,range=5242880" \
    --fault "/small.bin=reset,at=2000,times=1"
assert_exit 0 bm --json sync up
expect_counts 3 0 0 0
assert_trees_equal "$T/up" "$T/mirror"
no_temps "$T/mirror"
grep -q 'big.bin: fetch: .*(retry 1 of 5)' "$LAST_ERR" || fail "big.bin: the reset was not retried"
grep -q 'big.bin: continuing with [0-9]* of 20971520 bytes held: 1 range(s)' "$LAST_ERR" ||
    fail "big.bin: the retry did not continue the one broken range"
grep -q 'small.bin: fetch: .*(retry 1 of 5)' "$LAST_ERR" || fail "small.bin: the reset was not retried"
assert_eq "$(gets /big.bin)" 6 "GETs of big.bin (4 ranges + 1 retry + the end check)"
# What the reset range sent before the reset is kept (less what the RST
# made the kernel drop): far less than a whole range is sent again.
[ "$(sent /big.bin)" -lt $((size + 1048576)) ] ||
    fail "big.bin: $(sent /big.bin) bytes sent for $size"
assert_eq "$(fault_stat if_range)" 1 "requests with If-Range"
assert_eq "$(manifest_sql "$T/state" up "select count(*) from partials")" 0 "partial rows"

echo "# 500 without Retry-After and 429 with it: retried"
fresh --fault "/small.bin=status,code=500,times=2" \
    --fault "/gone.txt=status,code=429,retry-after=1,times=1"
assert_exit 0 bm --json sync up
expect_counts 3 0 0 0
assert_trees_equal "$T/up" "$T/mirror"
grep -q 'small.bin: fetch: HTTP 500 (retry 2 of 5)' "$LAST_ERR" || fail "500 not retried twice"
grep -q 'gone.txt: fetch: HTTP 429 (retry 1 of 5)' "$LAST_ERR" || fail "429 not retried"

echo "# a 429 past --retries: the file fails, nothing published"
fresh --fault "/gone.txt=status,code=429,retry-after=1"
assert_exit 1 bm --json sync --retries 1 up
expect_counts 2 0 0 1
assert_eq "$(jerrors)" "gone.txt fetch" "errors"
[ -e "$T/mirror/gone.txt" ] && fail "gone.txt published"
no_temps "$T/mirror"
assert_eq "$(manifest_sql "$T/state" up \
    "select count(*) from files where cast(path as text) = 'gone.txt'")" 0 "gone.txt row"
assert_eq "$(manifest_sql "$T/state" up "select reason from events where \
    cast(path as text) = 'gone.txt' and op = 'failed'")" "HTTP 429" "failure recorded"

echo "# 410 for a listed file: reported, kept; deleted after a complete listing without it"
fresh
assert_exit 0 bm --json sync up
stop_servers
start_faultserver "$T/up" normal --fault "/gone.txt=status,code=410"
write_conf "$FAULT_URL"
printf 'streams = 4\nmin_split = 4M\n' >> "$T/bm.conf"
touch -d '2022-02-02 02:02:02 UTC' "$T/up/gone.txt"	# listed as changed
assert_exit 1 bm --json sync up
expect_counts 0 0 0 1
assert_eq "$(jerrors)" "gone.txt vanished" "errors"
grep -q 'gone.txt: fetch: HTTP 410 (listed, but gone upstream; not deleted)' "$LAST_ERR" ||
    fail "410 not reported"
assert_eq "$(cat "$T/mirror/gone.txt")" bye "old gone.txt kept"
assert_eq "$(manifest_sql "$T/state" up \
    "select count(*) from files where cast(path as text) = 'gone.txt'")" 1 "gone.txt row kept"
mv "$T/up/gone.txt" "$T/gone.txt"
assert_exit 0 bm --json sync up
expect_counts 0 0 1 0
[ -e "$T/mirror/gone.txt" ] && fail "gone.txt not deleted after a complete listing"
mv "$T/gone.txt" "$T/up/gone.txt"
touch -d '2022-01-02 03:04:06 UTC' "$T/up/gone.txt"

echo "# upstream changes during the transfer: ranges disagree, start over"
mkdir -p "$T/alt"
make_big_file "$T/alt/big.bin" 20 other
touch -d '2023-04-05 06:07:08 UTC' "$T/alt/big.bin"
fresh --fault "/big.bin=change,after=2,with=$T/alt/big.bin"
assert_exit 0 bm --json sync up
expect_counts 3 0 0 0
cmp -s "$T/alt/big.bin" "$T/mirror/big.bin" || fail "big.bin is not the new version"
grep -q 'big.bin: fetch: upstream changed between ranges' "$LAST_ERR" ||
    fail "the change between ranges was not reported"
no_temps "$T/mirror"

# A load balancer whose backends each give the file their own ETag: the
# ranges never agree, so every try in ranges started over and the file
# never completed.  After one disagreement the next try is one stream.
echo "# ETags that differ per request (load balancer): one stream completes it"
fresh --fault "/big.bin=lbetag"
assert_exit 0 bm --json sync up
expect_counts 3 0 0 0
cmp -s "$T/up/big.bin" "$T/mirror/big.bin" || fail "lbetag: big.bin differs"
assert_eq "$(grep -c 'big.bin: fetch: upstream changed between ranges.*starting over' "$LAST_ERR")" 1 \
    "lbetag: tries started over"
no_temps "$T/mirror"

echo "# ... and when a range is continued: If-Range answered 200, start over"
fresh --fault "/big.bin=reset,at=1000000,times=1,range=5242880" \
    --fault "/big.bin=change,after=4,with=$T/alt/big.bin"
assert_exit 0 bm --json sync up
cmp -s "$T/alt/big.bin" "$T/mirror/big.bin" || fail "big.bin is not the new version"
grep -q 'big.bin: fetch: upstream changed since the bytes held were fetched (If-Range answered 200)' \
    "$LAST_ERR" || fail "If-Range 200 not reported"
[ "$(fault_stat if_range)" -ge 1 ] || fail "no If-Range sent"
no_temps "$T/mirror"

echo "# ENOSPC on a small tmpfs"
stop_servers
rm -rf "$T/state"
mkdir -p "$T/up2" "$T/mnt"
mount -t tmpfs -o size=3m,mode=0755 tmpfs "$T/mnt" || fail "mount tmpfs"
head -c 3000 /dev/urandom > "$T/up2/a.txt"
head -c 2000000 /dev/urandom > "$T/up2/b.bin"
head -c 2000000 /dev/urandom > "$T/up2/c.bin"
# No sizes in the listing, so the free-space guard cannot refuse first.
printf '<html><body><ul><li><a href="a.txt">a.txt</a></li><li><a href="b.bin">b.bin</a></li><li><a href="c.bin">c.bin</a></li></ul></body></html>\n' \
    > "$T/up2/index.html"
start_nginx_static "$T/up2"
cat > "$T/bm.conf" <<CONF
[up]
source = $NGINX_URL
dest = $T/mnt/mirror
concurrency = 1
CONF
assert_exit 1 bm --json sync up
assert_eq "$(jfield status)" failed "status"
grep -q "$T/mnt/mirror: no space left on device: stopped" "$LAST_ERR" ||
    fail "no clear ENOSPC message"
cmp -s "$T/up2/a.txt" "$T/mnt/mirror/a.txt" || fail "a.txt not committed"
cmp -s "$T/up2/b.bin" "$T/mnt/mirror/b.bin" || fail "b.bin not committed"
[ -e "$T/mnt/mirror/c.bin" ] && fail "c.bin under its final name"
no_temps "$T/mnt/mirror"
assert_eq "$(manifest_sql "$T/state" up \
    "select group_concat(cast(path as text), ' ') from (select path from files where type = 102 order by path)")" \
    "a.txt b.bin" "committed files in the manifest"
umount "$T/mnt" || fail "umount"
stop_servers

echo "# a corrupt manifest: exit 2, named, left alone"
db=$(manifest_db "$T/state" up)
head -c 8192 /dev/urandom > "$T/garbage.db"
cp "$T/garbage.db" "$db"
rm -f "$db-wal" "$db-shm"
rm -rf "$T/mirror"
start_faultserver "$T/up" normal
write_conf "$FAULT_URL"
assert_exit 2 bm --json sync up
grep -q "$db: file is not a database" "$LAST_ERR" || fail "the corrupt manifest is not named"
cmp -s "$T/garbage.db" "$db" || fail "the corrupt manifest was changed"
[ -e "$T/mirror/big.bin" ] && fail "a file was fetched with a corrupt manifest"

echo "# a manifest of 0 bytes: status and sync say so and how to rebuild it"
echo "# (exit 2); never started afresh"
rm -f "$db" "$db-wal" "$db-shm"
: > "$db"
want="$db: empty (0 bytes); the manifest is damaged: rebuild it from the files in the mirror, without fetching them again, with: biomirror -c $T/bm.conf --state-dir $T/state resync up --adopt (the damaged file is kept as up.db.corrupt-TIMESTAMP)"
assert_exit 2 bm status up
grep -qxF "biomirror: up: $want" "$LAST_ERR" || fail "status: no message for the empty manifest"
assert_exit 2 bm --json status up
python3 - "$LAST_OUT" "$want" <<'PY' || fail "status --json: no error for the empty manifest"
import json, sys
r = json.load(open(sys.argv[1]))[0]
assert r["last_run"] is None and r["error"] == sys.argv[2], r
PY
assert_exit 2 bm --json sync up
grep -qxF "biomirror: up: $want" "$LAST_ERR" || fail "sync: no message for the empty manifest"
[ -s "$db" ] && fail "the empty manifest was started afresh"
[ -e "$T/mirror/big.bin" ] && fail "a file was fetched with an empty manifest"
rm "$db"
assert_exit 0 bm --json sync up
assert_trees_equal "$T/up" "$T/mirror"

echo "# a locked manifest: exit 2 after the busy timeout, named"
python3 - "$db" "$T/locked" <<'PY' &
import sqlite3, sys, time, os
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("BEGIN EXCLUSIVE")
open(sys.argv[2], "w").close()
time.sleep(12)
PY
holder=$!
for _ in $(seq 1 50); do [ -e "$T/locked" ] && break; sleep 0.1; done
[ -e "$T/locked" ] || fail "could not lock the manifest"
cp "$db" "$T/before.db"
assert_exit 2 bm --json sync up
grep -q "$db: database is locked" "$LAST_ERR" || fail "the locked manifest is not named"
kill "$holder" 2>/dev/null
wait "$holder" 2>/dev/null
cmp -s "$T/before.db" "$db" || fail "the locked manifest was changed"

# A destination directory the run may not write in (here: owned by root,
# the run as nobody): the file fails with the system's reason, not a bare
# "I/O error" that sends an admin looking for a disk fault.
echo "# a directory that cannot be written: the reason is named (EACCES)"
stop_servers
mkdir -p "$T/up7/d"
printf 'a\n' > "$T/up7/d/a.txt"
chmod -R a+rX "$T/up7"
start_nginx "$T/up7"
mkdir -p "$T/m7/d" "$T/st7"
chown nobody "$T/m7" "$T/st7"
chmod 0755 "$T/m7/d"	# root's: nobody may not create files in it
assert_exit 1 runuser -u nobody -- "$BM" --state-dir "$T/st7" sync \
    --source "$NGINX_URL" --dest "$T/m7"
grep -q 'd/a.txt: fetch: write temp file: Permission denied' "$LAST_ERR" ||
    fail "unwritable directory: message: $(cat "$LAST_ERR")"
grep -q 'I/O error' "$LAST_ERR" && fail "EACCES shown as an I/O error"
stop_servers
echo PASS
