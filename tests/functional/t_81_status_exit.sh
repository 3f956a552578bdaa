#!/bin/bash
# status exit codes a monitor can trust (issue 18 item 11):
#   0 after an ok run; 1 when the last finished run is not ok (partial,
#   interrupted); a run in progress (its lock held) does not count, the
#   finished one before it does; status --max-age DURATION exits 1 when
#   the last success is older (its end time moved back in the manifest
#   with sqlite3) or there is none; bad durations are usage errors.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup
mkdir -p "$T/up"
printf 'a\n' > "$T/up/a.txt"
printf 'b\n' > "$T/up/b.txt"
start_nginx "$T/up"
write_conf "$NGINX_URL"
db=$(manifest_db "$T/state" up)

echo "# never run: 0; with --max-age: 1, no success"
assert_exit 0 bm status up
assert_exit 1 bm status up --max-age 7d
assert_eq "$(cat "$LAST_ERR")" "biomirror: up: no successful run (--max-age 604800 s)" "message"

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
grep -qx "biomirror: up: last success 72[0-9][0-9] s ago (run 1), more than --max-age 3600 s" \
    "$LAST_ERR" || fail "--max-age message: $(cat "$LAST_ERR")"
assert_exit 1 bm status --max-age 90m
assert_exit 1 bm --json status up --max-age 7199
json_ok "$LAST_OUT"
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
python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))[0]["last_run"]["status"] == "partial"' \
    "$LAST_OUT" || fail "status --json"

echo "# a run in progress does not count: the partial one before it does"
now=$(date +%s%N)
sqlite3 "$db" "INSERT INTO runs (command, start_ns, status) VALUES ('sync', $now, 'running')" ||
    fail "sqlite3"
assert_exit 1 flock "$T/state/locks/up.lock" "$BM" -c "$T/bm.conf" --state-dir "$T/state" status up
grep -q '^up: last run 3 at .*: running for ' "$LAST_OUT" || fail "not running: $(cat "$LAST_OUT")"
assert_eq "$(cat "$LAST_ERR")" "biomirror: up: the last finished run (2) is partial" "message"

echo "# its process gone (no lock): interrupted, 1"
assert_exit 1 bm status up
assert_eq "$(cat "$LAST_ERR")" "biomirror: up: the last finished run (3) is interrupted" "message"

echo "# repaired: an ok run, 0"
chmod 0644 "$T/up/c.txt"
assert_exit 0 bm sync up
assert_exit 0 bm status up
assert_exit 0 bm status up --max-age 60

stop_servers
echo "PASS"
