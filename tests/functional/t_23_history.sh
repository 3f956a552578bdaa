#!/bin/bash
# history NAME [--runs N | --run ID]: the runs of a mirror, and the files
# one run fetched, deleted or failed, with reasons (text and --json).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup
mkdir -p "$T/up/d"
echo one > "$T/up/a.txt"; echo two > "$T/up/d/b.txt"; echo three > "$T/up/c.txt"
start_nginx "$T/up"
write_conf "$NGINX_URL"
assert_exit 0 bm sync up
rm "$T/up/c.txt"; echo changed > "$T/up/a.txt"; touch -d '2024-01-01 UTC' "$T/up/a.txt"
assert_exit 0 bm sync up

assert_exit 0 bm history up
assert_eq "$(wc -l < "$LAST_OUT")" 2 "runs listed"
head -1 "$LAST_OUT" | grep -q '^ *2 .* ok .*fetched 1, touched 0, deleted 1, failed 0' ||
    fail "newest run first with its counts"
assert_exit 0 bm history up --runs 1
assert_eq "$(wc -l < "$LAST_OUT")" 1 "--runs 1"

assert_exit 0 bm history up --run 1
assert_eq "$(grep -c ' fetched ' "$LAST_OUT")" 3 "files fetched by run 1"
grep -q ' fetched *tcp d/b.txt$' "$LAST_OUT" || fail "d/b.txt not in run 1"
assert_exit 0 bm history up --run 2
grep -q ' fetched *tcp a.txt$' "$LAST_OUT" || fail "a.txt not fetched by run 2"
grep -q ' deleted *- *c.txt$' "$LAST_OUT" || fail "c.txt not deleted by run 2"
assert_exit 0 bm history up --run 2 --json
python3 - "$LAST_OUT" <<'PY' || fail "history --json"
import json, sys
ev = json.load(open(sys.argv[1]))
ops = sorted((e["op"], e["path"]) for e in ev)
assert ("deleted", "c.txt") in ops and ("fetched", "a.txt") in ops, ops
PY
assert_exit 0 bm --json history up
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert [x["run"] for x in r]==[2,1], r' \
    "$LAST_OUT" || fail "history --json runs"

# An unknown run is a bad argument (exit 2), named in the error.
assert_exit 2 bm history up --run 99
assert_eq "$(cat "$LAST_ERR")" "biomirror: up: run 99: no such run" "an unknown run says so"
assert_eq "$(cat "$LAST_OUT")" "" "nothing printed for an unknown run"
assert_exit 2 bm history up --runs 0
assert_exit 2 bm history nosuch
assert_exit 2 bm history
echo PASS
