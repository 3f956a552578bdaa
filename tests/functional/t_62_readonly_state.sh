#!/bin/bash
# The read-only commands (status, ls, history) read a manifest they cannot
# write (nginx, real runs):
#  - as another user (nobody), with the state directory and manifest
#    root's 0755/0644: exit 0 and the same output as root's, no file left
#    in the state directory, the manifest byte-identical;
#  - on a full disk (a tmpfs filled up): status, ls and history exit 0
#    with the same output; a sync there fails (exit 2) saying the state
#    directory is full and what to do, and loses nothing; status then
#    shows the last recorded run (3 hours old) with its real time and age,
#    not the refused attempt, and warns that the state directory is full;
#    once space is freed, status shows the same runs and the next sync
#    succeeds;
#  - with one page left (the lock is taken, SQLite cannot grow its WAL
#    index: "disk I/O error"), the same message (exit 2), nothing fetched.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup

mkdir -p "$T/up/sub"
for f in a.txt b.txt sub/c.txt; do
	printf 'content of %s\n' "$f" > "$T/up/$f"
	touch -d '2021-02-03 04:05:06 UTC' "$T/up/$f"
done
chmod -R a+rX "$T/up"
start_nginx "$T/up"
write_conf "$NGINX_URL"

echo "# a run as root"
assert_exit 0 bm --json sync up
expect_counts 3 0 0 0
chmod 0755 "$T"
chmod -R a+rX "$T/state" "$T/bm.conf"

# reader CMD...: the read-only commands' output as the caller of reader
# runs them (stdout only), one file per command in $T/out.$1.
readers() {
	local who=$1
	shift
	"$@" -c "$T/bm.conf" --state-dir "$STATE" status > "$T/out.$who.status" 2> "$T/err.$who" ||
	    fail "$who: status exit $?: $(cat "$T/err.$who")"
	# Ages move on between two calls.
	sed -i -E 's/\(ended [0-9dhms ]+ ago\)/(ended AGE ago)/; s/last success [0-9dhms ]+ ago/last success AGE ago/' \
	    "$T/out.$who.status"
	"$@" -c "$T/bm.conf" --state-dir "$STATE" ls up > "$T/out.$who.ls" 2> "$T/err.$who" ||
	    fail "$who: ls exit $?: $(cat "$T/err.$who")"
	"$@" -c "$T/bm.conf" --state-dir "$STATE" history up > "$T/out.$who.history" 2> "$T/err.$who" ||
	    fail "$who: history exit $?: $(cat "$T/err.$who")"
	"$@" -c "$T/bm.conf" --state-dir "$STATE" --json status > "$T/out.$who.json" 2> "$T/err.$who" ||
	    fail "$who: status --json exit $?: $(cat "$T/err.$who")"
	json_ok "$T/out.$who.json"
}

echo "# another user: status, ls, history on root's manifest"
STATE=$T/state
db=$(manifest_db "$T/state" up)
sum=$(sha256sum < "$db")
before=$(ls -A "$T/state/manifests")
readers root "$BM"
readers nobody runuser -u nobody -- "$BM"
for k in status ls history; do
	diff -u "$T/out.root.$k" "$T/out.nobody.$k" >&2 || fail "nobody: $k differs from root's"
done
grep -q '^up: last run 1 at .*: ok in ' "$T/out.nobody.status" ||
    fail "nobody: status: $(cat "$T/out.nobody.status")"
assert_eq "$(grep -c 'content\|txt' "$T/out.nobody.ls")" 3 "nobody: files listed"
assert_eq "$(ls -A "$T/state/manifests")" "$before" "files in the state directory"
assert_eq "$(sha256sum < "$db")" "$sum" "the manifest"

echo "# a full disk"
mkdir -p "$T/fs"
mount -t tmpfs -o size=2m,mode=0755 bmtest "$T/fs" || fail "mount tmpfs (tests run as root)"
STATE=$T/fs/state
assert_exit 0 "$BM" -c "$T/bm.conf" --state-dir "$STATE" --json sync up
# The run ended 3 hours ago (its times moved back; the file is ours).
h3=$((3 * 3600 * 1000000000))
sqlite3 "$(manifest_db "$STATE" up)" \
    "update runs set start_ns = start_ns - $h3, end_ns = end_ns - $h3" ||
    fail "sqlite3: move the run back"
started=$(date -u -d @"$(manifest_sql "$STATE" up "select start_ns / 1000000000 from runs")" +%Y-%m-%dT%H:%M:%SZ)
readers before "$BM"
dd if=/dev/zero of="$T/fs/fill" bs=64k 2>/dev/null
[ "$(df --output=avail "$T/fs" | tail -1)" -eq 0 ] || fail "the tmpfs is not full"
readers full "$BM"
for k in status ls history; do
	diff -u "$T/out.before.$k" "$T/out.full.$k" >&2 || fail "full disk: $k differs"
done
echo "# a sync on the full disk: a clear error, nothing lost"
printf 'new\n' > "$T/up/new.txt"
chmod a+r "$T/up/new.txt"
assert_exit 2 "$BM" -c "$T/bm.conf" --state-dir "$STATE" --json sync up
assert_eq "$(cat "$LAST_ERR")" "biomirror: up: the state directory $STATE is full (locks/up.lock: No space left on device): nothing was synced or recorded; free space on its file system (it holds the manifests, locks and run history) and run again" \
    "full disk: the message"
assert_eq "$(jfield status)" failed "full disk: --json status"
echo "# status after it: the last recorded run, 3 hours old"
assert_exit 0 "$BM" -c "$T/bm.conf" --state-dir "$STATE" status up
assert_eq "$(head -2 "$LAST_OUT" | sed 's/ in [0-9.hms]*, .*//; s/, ended .*)$/)/')" \
    "up: last run 1 at $started (ended 3h00m ago): ok
up: last success 3h00m ago (run 1)" "full disk: status"
assert_eq "$(cat "$LAST_ERR")" "biomirror: $STATE: the state directory is full: no run can start or be recorded until space is freed (the runs shown are the last recorded)" \
    "full disk: status warns"
assert_exit 0 "$BM" -c "$T/bm.conf" --state-dir "$STATE" --json status up
python3 - "$LAST_OUT" <<'PY' || fail "full disk: status --json ages"
import json, sys
r = json.load(open(sys.argv[1]))[0]
assert r["last_run"]["run"] == 1 and r["last_run"]["status"] == "ok", r
assert 10800 <= r["last_run_age_seconds"] < 10900, r
assert 10800 <= r["last_success_age_seconds"] < 10900, r
PY
rm "$T/fs/fill"
readers after "$BM"
diff -u "$T/out.before.status" "$T/out.after.status" >&2 || fail "full disk: runs lost"
assert_exit 0 "$BM" -c "$T/bm.conf" --state-dir "$STATE" --json sync up
expect_counts 1 0 0 0

echo "# one page left: the lock is taken, the manifest's WAL index cannot grow"
dd if=/dev/zero of="$T/fs/fill" bs=4k 2>/dev/null
rm "$T/fs/fill"
pages=$(df -B4096 --output=avail "$T/fs" | tail -1)
dd if=/dev/zero of="$T/fs/fill" bs=4k count=$((pages - 1)) 2>/dev/null
printf 'newer\n' > "$T/up/newer.txt"
chmod a+r "$T/up/newer.txt"
assert_exit 2 "$BM" -c "$T/bm.conf" --state-dir "$STATE" sync up
assert_eq "$(cat "$LAST_ERR")" "biomirror: up: the state directory $STATE is full ($STATE/manifests/up.db: disk I/O error): nothing was synced or recorded; free space on its file system (it holds the manifests, locks and run history) and run again" \
    "one page left: the message"
[ -e "$T/mirror/newer.txt" ] && fail "one page left: a file was fetched"
rm "$T/fs/fill"
assert_exit 0 "$BM" -c "$T/bm.conf" --state-dir "$STATE" --json sync up
expect_counts 1 0 0 0
umount "$T/fs" || fail "umount $T/fs"

stop_servers
[ -z "$(bm_leftovers)" ] || fail "processes left: $(bm_leftovers)"
echo "PASS"
