#!/bin/bash
# status exit codes a monitor can trust (issue 18 item 11):
#   0 after an ok run; 1 when the last finished run is not ok (partial,
#   interrupted); a run in progress (its lock held) does not count, the
#   finished one before it does; status --max-age DURATION exits 1 when
#   the last success is older (its end time moved back in the manifest
#   with sqlite3) or there is none; bad durations are usage errors.
# --json says why (brk2 findings 2, 3, 10, 12): each object has "exit",
#   "reason", "last_finished_run", "state_dir_full" and
#   "state_dir_read_only"; an unknown name, or no mirror at all, is an
#   error object (op usage); a run with no recorded end has "end" and
#   "seconds" null; a run's error is stored whole (a listing error over
#   255 bytes); a read-only state directory says what is wrong and what
#   to do (exit 2), and status marks it.
# An older manifest (schema 5: no zones; schema 1) is read as it is by
#   status, ls, history (while an older run holds the lock) and plan: its
#   bytes and user_version stay; the next sync migrates it (6).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup
mkdir -p "$T/up"
printf 'a\n' > "$T/up/a.txt"
printf 'b\n' > "$T/up/b.txt"
start_nginx "$T/up"
write_conf "$NGINX_URL"
db=$(manifest_db "$T/state" up)

# jstatus PYTHON [ARG...]: run PYTHON on the status object s (the first
# in $T/last.out; the array a; ARGs from sys.argv[2]) after checking that
# the output is one JSON array.
jstatus() {
	json_ok "$LAST_OUT"
	python3 -c 'import json, sys
a = json.load(open(sys.argv[1]))
assert isinstance(a, list), a
s = a[0]
'"$1" "$LAST_OUT" "${@:2}" || fail "status --json: $1: $(cat "$LAST_OUT")"
}

echo "# never run: 0; with --max-age: 1, no success"
assert_exit 0 bm status up
assert_exit 1 bm status up --max-age 7d
assert_eq "$(cat "$LAST_ERR")" "biomirror: up: no successful run (--max-age 7d)" "message"
assert_exit 1 bm --json status up --max-age 7d
jstatus 'assert (s["exit"], s["reason"]) == (1, "up: no successful run (--max-age 7d)"), s
assert s["last_run"] is None and s["last_finished_run"] is None, s
assert s["state_dir_full"] is False and s["state_dir_read_only"] is False, s'

echo "# unknown names and no mirrors: an error object, exit 2"
assert_exit 2 bm --json status nosuch
jstatus 'assert len(a) == 1 and s["mirror"] == "nosuch" and s["status"] == "error", a
assert [(e["op"], e["reason"]) for e in s["errors"]] == [("usage",
    "no such mirror (not in '"$T"'/bm.conf, and no manifest in '"$T"'/state/manifests)")], s'
assert_eq "$(cat "$LAST_ERR")" "biomirror: nosuch: no such mirror (not in $T/bm.conf, and no manifest in $T/state/manifests)" "no such mirror: message"
assert_exit 2 bm --json status up nosuch
jstatus 'assert [(o["mirror"], o.get("status")) for o in a] == [("up", None), ("nosuch", "error")], a'
printf '[global]\n' > "$T/none.conf"
assert_exit 2 "$BM" -c "$T/none.conf" --state-dir "$T/empty" --json status
jstatus 'assert len(a) == 1 and "mirror" not in s and s["status"] == "error", a
assert s["errors"][0]["op"] == "usage", s
assert s["errors"][0]["reason"].startswith("no mirrors: the config file has none"), s'

echo "# an ok run: 0, also within --max-age"
assert_exit 0 bm sync up
assert_exit 0 bm status up
assert_exit 0 bm status
assert_exit 0 bm status up --max-age 1h
assert_exit 0 bm --json status --max-age=3600 up
json_ok "$LAST_OUT"

echo "# the success two hours old (end time moved back in the manifest)"
sqlite3 "$db" "UPDATE runs SET start_ns = start_ns - 7200000000000,
    end_ns = end_ns - 7200000000000 WHERE id = 1" || fail "sqlite3"
assert_exit 1 bm status up --max-age 3600
grep -qx "biomirror: up: last success 2h\(00m0[0-9]s\)\? ago (run 1), more than --max-age 1h" \
    "$LAST_ERR" || fail "--max-age message: $(cat "$LAST_ERR")"
assert_exit 1 bm status --max-age 90m
assert_exit 1 bm --json status up --max-age 7199
jstatus 'assert s["exit"] == 1 and "more than --max-age 1h59m59s" in s["reason"], s
assert s["reason"].startswith("up: last success 2h"), s'
assert_exit 0 bm status up --max-age 3h
assert_exit 0 bm status up
for bad in 5w -1 1.5h ''; do
	assert_exit 2 bm status up --max-age "$bad"
done
assert_exit 2 bm status up --max-age

echo "# a partial run: 1"
printf 'c\n' > "$T/up/c.txt"
chmod 000 "$T/up/c.txt"
assert_exit 1 bm sync up
st=$(manifest_sql "$T/state" up "SELECT status FROM runs WHERE id = 2")
assert_eq "$st" partial "run 2"
assert_exit 1 bm status up
assert_eq "$(cat "$LAST_ERR")" "biomirror: up: the last finished run (2) is partial" "message"
assert_exit 1 bm status
assert_exit 1 bm --json status up
jstatus 'assert s["last_run"]["status"] == "partial", s
assert s["last_finished_run"] == s["last_run"], s
assert (s["exit"], s["reason"]) == (1, "up: the last finished run (2) is partial"), s'

echo "# a run in progress does not count: the partial one before it does"
now=$(date +%s%N)
sqlite3 "$db" "INSERT INTO runs (command, start_ns, status) VALUES ('sync', $now, 'running')" ||
    fail "sqlite3"
assert_exit 1 flock "$T/state/locks/up.lock" "$BM" -c "$T/bm.conf" --state-dir "$T/state" status up
grep -q '^up: last run 3 at .*: running for ' "$LAST_OUT" || fail "not running: $(cat "$LAST_OUT")"
assert_eq "$(cat "$LAST_ERR")" "biomirror: up: the last finished run (2) is partial" "message"
assert_exit 1 flock "$T/state/locks/up.lock" "$BM" -c "$T/bm.conf" --state-dir "$T/state" --json status up
jstatus 'r = s["last_run"]
assert (r["run"], r["status"], r["end"], r["seconds"]) == (3, "running", None, None), r
assert r["start"] is not None, r
assert (s["last_finished_run"]["run"], s["last_finished_run"]["status"]) == (2, "partial"), s
assert (s["exit"], s["reason"]) == (1, "up: the last finished run (2) is partial"), s'

echo "# its process gone (no lock): interrupted, 1"
assert_exit 1 bm status up
assert_eq "$(cat "$LAST_ERR")" "biomirror: up: the last finished run (3) is interrupted" "message"
assert_exit 0 bm --json history up
json_ok "$LAST_OUT"
python3 -c 'import json,sys; r = json.load(open(sys.argv[1]))[0]
assert (r["run"], r["status"], r["end"], r["seconds"]) == (3, "interrupted", None, None), r' \
    "$LAST_OUT" || fail "history --json: an interrupted run's end"

echo "# repaired: an ok run, 0"
chmod 0644 "$T/up/c.txt"
assert_exit 0 bm sync up
assert_exit 0 bm status up
assert_exit 0 bm status up --max-age 60
assert_exit 0 bm --json status up
jstatus 'assert (s["exit"], s["reason"], s["last_finished_run"]["status"]) == (0, None, "ok"), s
assert s["last_run"]["end"] is not None and s["last_run"]["seconds"] >= 0, s'

# as_is VERSION LAST: status, ls, history (under the lock, as an older run
# holding it) and plan read the manifest downgraded to schema VERSION as
# it is (LAST: its last run, ok): its bytes and user_version stay, the
# output as of schema 6; then a sync migrates it.
as_is() {
	local sum lock=$T/state/locks/up.lock
	sum=$(sha256sum < "$db")
	assert_exit 0 flock "$lock" "$BM" -c "$T/bm.conf" --state-dir "$T/state" status up
	grep -q "^up: last run $2 at .*: ok in " "$LAST_OUT" || fail "schema $1: status: $(cat "$LAST_OUT")"
	assert_eq "$(cat "$LAST_ERR")" "" "schema $1: status stderr"
	assert_exit 0 flock "$lock" "$BM" -c "$T/bm.conf" --state-dir "$T/state" ls up
	assert_eq "$(awk '{print $NF}' "$LAST_OUT" | tr '\n' ' ')" "a.txt b.txt c.txt " "schema $1: ls"
	assert_exit 0 flock "$lock" "$BM" -c "$T/bm.conf" --state-dir "$T/state" --json history up
	python3 -c 'import json,sys; a = json.load(open(sys.argv[1]))
assert [(r["run"], r["status"]) for r in a][-4:] == [(4, "ok"), (3, "interrupted"), (2, "partial"), (1, "ok")], a
assert (len(a), a[0]["run"], a[0]["status"]) == (int(sys.argv[2]), int(sys.argv[2]), "ok"), a' \
	    "$LAST_OUT" "$2" || fail "schema $1: history --json"
	assert_exit 0 flock "$lock" "$BM" -c "$T/bm.conf" --state-dir "$T/state" history up --run 4
	grep -q 'c\.txt' "$LAST_OUT" || fail "schema $1: history --run 4: $(cat "$LAST_OUT")"
	assert_exit 0 bm plan up
	# "check N" only when a file listed to the minute was recorded in it.
	grep -qx 'up: plan ok: listed 3, would fetch 0 (0 B), \(check [1-3] (fetched if changed), \)\?touch 0, delete 0' \
	    "$LAST_OUT" || fail "schema $1: plan: $(cat "$LAST_OUT")"
	[ -e "$db-wal" ] && fail "schema $1: a -wal left beside the manifest"
	assert_eq "$(sha256sum < "$db")" "$sum" "schema $1: the manifest's bytes"
	assert_eq "$(manifest_sql "$T/state" up "PRAGMA user_version")" "$1" "schema $1: user_version"
	assert_exit 0 bm sync up
	assert_eq "$(manifest_sql "$T/state" up "PRAGMA user_version")" 6 "schema $1: sync migrates"
	assert_eq "$(manifest_sql "$T/state" up "SELECT count(*) FROM zones")" 0 "schema $1: zones"
}

echo "# an older manifest is read as it is: only a sync migrates it"
sqlite3 "$db" "DROP TABLE zones; PRAGMA user_version = 5" || fail "sqlite3"
as_is 5 4
sqlite3 "$db" "DROP TABLE zones; DROP TABLE runs_net; ALTER TABLE events DROP COLUMN net;
    DROP TABLE mismatches; ALTER TABLE files DROP COLUMN sidecar; DROP TABLE intents;
    DROP TABLE partials; PRAGMA user_version = 1" || fail "sqlite3"
as_is 1 5

echo "# a run error over 255 bytes is stored whole"
long=$(printf 'd%.0s' $(seq 1 250))
assert_exit 3 bm --json sync --source "$NGINX_URL$long/" --dest "$T/long"
json_ok "$LAST_OUT"
adhoc=$(jfield mirror)
logged=$(sed -n "s/^biomirror: $adhoc: list: //p" "$LAST_ERR")
[ "${#logged}" -gt 255 ] || fail "the listing error is short: $logged"
assert_eq "$(manifest_sql "$T/state" "$adhoc" "SELECT error FROM runs WHERE id = 1")" "$logged" \
    "the run error in the manifest"
assert_exit 1 bm --json status "$adhoc"
jstatus 'assert s["last_run"]["error"] == sys.argv[2], s' "$logged"

echo "# a read-only state directory: what is wrong and what to do"
mkdir -p "$T/ro"
mount -t tmpfs -o size=1m,mode=0755 bmtest "$T/ro" || fail "mount tmpfs (tests run as root)"
assert_exit 0 bm --state-dir "$T/ro/state" sync up
mount -o remount,ro "$T/ro" || fail "remount ro"
printf 'd\n' > "$T/up/d.txt"
assert_exit 2 bm --state-dir "$T/ro/state" sync up
assert_eq "$(cat "$LAST_ERR")" "biomirror: up: the state directory $T/ro/state is on a read-only file system (locks/up.lock: Read-only file system): nothing was synced or recorded; remount it read-write, or set state_dir (or --state-dir) to a writable directory, and run again" \
    "read-only state: the message"
[ -e "$T/mirror/d.txt" ] && fail "read-only state: a file was fetched"
assert_exit 0 bm --state-dir "$T/ro/state" --json status up
jstatus 'assert s["state_dir_read_only"] is True and s["state_dir_full"] is False, s
assert s["last_run"]["run"] == 1, s'
grep -qF "the state directory is on a read-only file system: no run can start or be recorded" \
    "$LAST_ERR" || fail "read-only state: status does not warn"
umount "$T/ro" || fail "umount $T/ro"

stop_servers
echo "PASS"
