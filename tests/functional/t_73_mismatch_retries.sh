#!/bin/bash
# A file whose upstream body never matches its sidecar (issue 18 item 9),
# against real nginx, verify = sidecar, retries = 3: one run fetches the
# body at most twice and asks for the sidecar once more (a 304), then
# stops: exit 1, both digests in the message, the other files published;
# the next run with nothing changed upstream makes no request for the
# file (exit 1 again, the recorded mismatch named, both digests kept in
# the run record: status, status --json, history); a changed sidecar,
# then a changed file, each get it fetched again; once they agree it is
# published (exit 0) and the mismatch is forgotten.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup

U=$T/up
mkdir -p "$U"
head -c 50000 /dev/urandom > "$U/bad.bin"
head -c 3000 /dev/urandom > "$U/good.bin"
(cd "$U" && md5sum good.bin) > "$U/good.bin.md5"
echo "0123456789abcdef0123456789abcdef  bad.bin" > "$U/bad.bin.md5"
find "$U" -exec touch -d '2022-03-04 05:06:07 UTC' {} +
real=$(md5sum < "$U/bad.bin" | cut -d' ' -f1)
start_nginx "$U" "autoindex_format json;"
LOG=$NGINX_ACCESS_LOG
write_conf "$NGINX_URL"
cat >> "$T/bm.conf" <<CONF
verify = sidecar
retries = 3
CONF

# gets MARK PATH: requests (any status) of PATH since MARK.
gets() { log_requests "$1" "$LOG" | awk -v p="$2" '$3 == p' | wc -l; }
# gets_ok MARK PATH: 200 answers to requests of PATH since MARK.
gets_ok() { log_requests "$1" "$LOG" | awk -v p="$2" '$2 == 200 && $3 == p' | wc -l; }

echo "# the body never matches: fetched twice, the sidecar asked for once more"
mark=$(wc -l < "$LOG")
assert_exit 1 bm --json sync up
expect_counts 3 0 0 1
assert_eq "$(jerrors)" "bad.bin fetch" "errors"
assert_eq "$(gets "$mark" /bad.bin)" 2 "requests of bad.bin"
assert_eq "$(gets "$mark" /bad.bin.md5)" 2 "requests of bad.bin.md5"
assert_eq "$(gets_ok "$mark" /bad.bin.md5)" 1 "bodies of bad.bin.md5"
grep -q "up: bad.bin: fetch: checksum mismatch: bad.bin.md5 says md5:0123456789abcdef0123456789abcdef, got md5:$real again (the same body twice" \
    "$LAST_ERR" || fail "no message with both digests"
[ -e "$T/mirror/bad.bin" ] && fail "bad.bin was published"
cmp "$U/good.bin" "$T/mirror/good.bin" || fail "good.bin"
assert_eq "$(manifest_sql "$T/state" up "SELECT want || ' ' || got FROM
    mismatches WHERE CAST(path AS TEXT) = 'bad.bin'")" \
    "md5:0123456789abcdef0123456789abcdef md5:$real" "mismatch recorded"
no_temps "$T/mirror"

echo "# nothing changed upstream: no request for bad.bin, exit 1"
mark=$(wc -l < "$LOG")
assert_exit 1 bm --json sync up
expect_counts 0 0 0 1
assert_eq "$(gets "$mark" /bad.bin)" 0 "requests of bad.bin"
grep -q "up: bad.bin: checksum mismatch: upstream's copy still fails its sidecar (it says md5:0123456789abcdef0123456789abcdef, run 1 got md5:$real): not fetched again" \
    "$LAST_ERR" || fail "no still-fails message"
# The run record keeps the whole reason, both digests (status, --json, history).
why="bad.bin: fetch: checksum mismatch: upstream's copy still fails its sidecar (it says md5:0123456789abcdef0123456789abcdef, run 1 got md5:$real): not fetched again until upstream's file or sidecar changes"
assert_exit 1 bm status up
grep -qF "$why" "$LAST_OUT" || fail "status: the reason is cut: $(cat "$LAST_OUT")"
assert_exit 1 bm --json status up
python3 -c 'import json,sys
m = json.load(open(sys.argv[1]))[0]
sys.exit(0 if json.dumps(m).find(sys.argv[2]) >= 0 else 1)' "$LAST_OUT" "md5:$real): not fetched again" ||
    fail "status --json: the reason is cut: $(cat "$LAST_OUT")"
assert_exit 0 bm history up --runs 1
grep -qF "$why" "$LAST_OUT" || fail "history --runs: the reason is cut"

echo "# the sidecar changes (still wrong): fetched again, twice"
echo "fedcba9876543210fedcba9876543210  bad.bin" > "$U/bad.bin.md5"
touch -d '2023-01-01 00:00:00 UTC' "$U/bad.bin.md5"
mark=$(wc -l < "$LOG")
assert_exit 1 bm --json sync up
expect_counts 1 0 0 1
assert_eq "$(gets "$mark" /bad.bin)" 2 "requests of bad.bin"
grep -q "bad.bin.md5 says md5:fedcba9876543210fedcba9876543210, got md5:$real again" \
    "$LAST_ERR" || fail "no message for the new sidecar"

echo "# the file changes (the sidecar still wrong): fetched again, twice"
head -c 50000 /dev/urandom > "$U/bad.bin"
touch -d '2023-01-02 00:00:00 UTC' "$U/bad.bin"
real=$(md5sum < "$U/bad.bin" | cut -d' ' -f1)
mark=$(wc -l < "$LOG")
assert_exit 1 bm --json sync up
expect_counts 0 0 0 1
assert_eq "$(gets "$mark" /bad.bin)" 2 "requests of bad.bin"
grep -q "got md5:$real again" "$LAST_ERR" || fail "no message for the new body"

echo "# upstream puts the sidecar right: published, the mismatch forgotten"
(cd "$U" && md5sum bad.bin) > "$U/bad.bin.md5"
touch -d '2023-01-03 00:00:00 UTC' "$U/bad.bin.md5"
mark=$(wc -l < "$LOG")
assert_exit 0 bm --json sync up
expect_counts 2 0 0 0
assert_eq "$(gets "$mark" /bad.bin)" 1 "requests of bad.bin"
assert_trees_equal "$U" "$T/mirror"
assert_eq "$(manifest_sql "$T/state" up "SELECT count(*) FROM mismatches")" 0 \
    "mismatch rows"
echo PASS
