#!/bin/bash
# A run killed with -9 recorded no end: while it runs, status says
# running (with its PID); once its process (and so its lock) is gone,
# status and history show it as interrupted, never running forever (and
# status exits 1: the last finished run is not ok); the next run records
# it as interrupted in the manifest.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup
mkdir -p "$T/up"
printf 'small\n' > "$T/up/small.txt"
make_big_file "$T/up/big.bin" 64 k
start_nginx "$T/up"
write_conf "$NGINX_URL"

"$BM" -c "$T/bm.conf" --state-dir "$T/state" sync --bwlimit 2M up \
    > "$T/slow.out" 2> "$T/slow.err" &
slow=$!
for _ in $(seq 1 100); do
	tmp=$(find "$T/mirror" -name '.biomirror-tmp.*' -size +100k 2>/dev/null | head -1)
	[ -n "$tmp" ] && break
	sleep 0.1
done
[ -n "$tmp" ] || { cat "$T/slow.err"; fail "the slow run did not start fetching"; }

echo "# while it runs: running, with its PID"
assert_exit 0 bm status up --json
python3 - "$LAST_OUT" "$slow" <<'PY' || fail "status --json while running"
import json, sys
s = json.load(open(sys.argv[1]))[0]
assert s["last_run"]["status"] == "running", s
assert s["pid"] == int(sys.argv[2]), s
PY
assert_exit 0 bm status up
grep -q "^up: running now (pid $slow)$" "$LAST_OUT" || fail "status text while running"
grep -q "^up: last run 1 at .*: running for [0-9.hms]*$" "$LAST_OUT" ||
    fail "status text of the running run: $(cat "$LAST_OUT")"

kill -9 "$slow"
wait "$slow" 2>/dev/null

echo "# after kill -9: interrupted (a last finished run not ok: exit 1)"
assert_exit 1 bm status up --json
python3 - "$LAST_OUT" <<'PY' || fail "status --json after kill -9"
import json, sys
s = json.load(open(sys.argv[1]))[0]
r = s["last_run"]
assert r["status"] == "interrupted", r
assert r["end"] is None and r["seconds"] is None, r
assert "without recording its end" in r["error"], r
assert "pid" not in s, s
assert s["last_success"] is None, s
PY
assert_exit 1 bm status up
grep -q "^up: last run 1 at .*: interrupted; the run ended without recording its end" "$LAST_OUT" ||
    fail "status text: $(cat "$LAST_OUT")"
grep -q "interrupted in 0s" "$LAST_OUT" && fail "an interrupted run shown with a time"
grep -q "running" "$LAST_OUT" && fail "status still says running"
assert_exit 0 bm history up
grep -q "^ *1 .* interrupted " "$LAST_OUT" || fail "history text"
# The manifest itself still says running: only the display knows better.
assert_eq "$(manifest_sql "$T/state" up "SELECT status FROM runs WHERE id = 1")" \
    running "manifest before the next run"

echo "# the next run records the dead one as interrupted"
assert_exit 0 bm sync up
assert_eq "$(manifest_sql "$T/state" up "SELECT status FROM runs ORDER BY id")" \
    "interrupted
ok" "runs after the next run"
assert_exit 0 bm --json history up
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert [x["status"] for x in r]==["ok","interrupted"], r' \
    "$LAST_OUT" || fail "history --json"
echo PASS
