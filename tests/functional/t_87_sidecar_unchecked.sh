#!/bin/bash
# Files committed without a check against their sidecar, and sidecars
# that cannot vouch (issue 18 items 1 and 9; break-it brk1 #1, #2, #4,
# #9), against real nginx, verify = sidecar, retries = 1:
# - R (publish = set): a.txt changes while MD5SUMS answers 403: exit 1,
#   a.txt recorded unchecked; with MD5SUMS back, a.txt is hashed, fetched
#   again and still fails: exit 1, the first snapshot stays published;
# - F (publish = file): a.txt already a recorded mismatch; one run with
#   MD5SUMS at 403 publishes its body unchecked; the next run fails it
#   again without a request (exit 1), and the run record (status,
#   history --runs) keeps both digests;
# - J (publish = set): conflicting digests appended to MD5SUMS (b.txt)
#   and to c.txt.md5: both fail, neither fetched, exit 1, unpublished,
#   again on the next run; put right: published without a data fetch;
# - S (publish = set): c.txt a recorded mismatch; a --verify size run
#   publishes it (exit 0); the next plain run fails it again without a
#   request (exit 1), nothing published;
# - V (publish = file): synced with verify = size, then verify = sidecar:
#   each covered file is hashed once (b.txt differs: fetched again, fails,
#   exit 1); b's line put right: ok without a fetch; a no-change run then
#   opens no data file; a line of MD5SUMS naming MD5SUMS is ignored by
#   verify.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup
command -v strace > /dev/null || fail "strace is not installed (make deps)"

U=$T/up
OLD='2022-03-04 05:06:07 UTC'
BAD=00112233445566778899aabbccddeeff
for m in R F J S V; do
	mkdir -p "$U/$m"
	for f in a b c; do printf '%s %s first\n' "$m" "$f" > "$U/$m/$f.txt"; done
done
(cd "$U/R" && md5sum a.txt b.txt) > "$U/R/MD5SUMS"
(cd "$U/F" && md5sum b.txt && echo "$BAD  a.txt") > "$U/F/MD5SUMS"
(cd "$U/J" && md5sum a.txt b.txt) > "$U/J/MD5SUMS"
(cd "$U/J" && md5sum c.txt) > "$U/J/c.txt.md5"
(cd "$U/S" && md5sum a.txt && echo "$BAD  c.txt") > "$U/S/MD5SUMS"
(cd "$U/V" && md5sum a.txt && echo "$BAD  b.txt" &&
    echo "$BAD  MD5SUMS") > "$U/V/MD5SUMS"
find "$U" -exec touch -d "$OLD" {} +
start_nginx "$U" "autoindex_format json;"
LOG=$NGINX_ACCESS_LOG
{
	printf '[global]\nstate_dir = %s\n' "$T/state-from-config"
	for m in R F J S V; do
		printf '[%s]\nsource = %s%s/\ndest = %s\nretries = 1\n' "$m" \
		    "$NGINX_URL" "$m" "$T/m/$m"
		case $m in R|J|S) echo "publish = set" ;; esac
		if [ "$m" = V ]; then echo "verify = size"; else echo "verify = sidecar"; fi
	done
} > "$T/bm.conf"

# reqs MARK: "METHOD STATUS PATH" of the file requests since MARK, sorted.
reqs() { log_requests "$1" "$LOG" | grep -v '/$' | LC_ALL=C sort; }
# col M PATH: files.sidecar of PATH in mirror M's manifest.
col() {
	manifest_sql "$T/state" "$1" "SELECT ifnull(sidecar, 'NULL') FROM files
	    WHERE CAST(path AS TEXT) = '$2'"
}

echo "# first runs (F and S: the line of a.txt / c.txt is wrong)"
assert_exit 0 bm sync R J V
assert_exit 1 bm sync F S
snapR=$(readlink "$T/m/R")
snapJ=$(readlink "$T/m/J")

echo "# R: a.txt changes while MD5SUMS answers 403"
echo "R a CHANGED" > "$U/R/a.txt"
touch -d '2023-01-01 UTC' "$U/R/a.txt"
touch -d '2024-01-01 UTC' "$U/R/MD5SUMS"
chmod 000 "$U/R/MD5SUMS"
assert_exit 1 bm --json sync R
assert_eq "$(jerrors)" "MD5SUMS fetch" "errors"
assert_eq "$(col R a.txt)" unchecked "a.txt recorded as unchecked"
assert_eq "$(readlink "$T/m/R")" "$snapR" "published snapshot"
chmod 644 "$U/R/MD5SUMS"
mark=$(wc -l < "$LOG")
assert_exit 1 bm --json sync R
assert_eq "$(jerrors)" "a.txt fetch" "errors once MD5SUMS is back"
assert_eq "$(reqs "$mark")" "$(printf '%s\n' 'GET 200 /R/MD5SUMS' \
    'GET 200 /R/a.txt' 'GET 200 /R/a.txt' 'GET 304 /R/MD5SUMS')" \
    "requests: MD5SUMS, a.txt twice, MD5SUMS once more"
grep -q "R: a.txt: committed without a sidecar check: local content differs from its sidecar checksum: fetching it again" \
    "$LAST_ERR" || fail "a.txt was not checked"
assert_eq "$(readlink "$T/m/R")" "$snapR" "still the first snapshot"
(cd "$T/m/R" && md5sum --quiet -c MD5SUMS) || fail "published R does not check"

echo "# F: a.txt a recorded mismatch; one run with MD5SUMS at 403"
realFa=$(md5sum < "$U/F/a.txt" | cut -d' ' -f1)
touch -d '2024-01-01 UTC' "$U/F/MD5SUMS"
chmod 000 "$U/F/MD5SUMS"
assert_exit 1 bm --json sync F
assert_eq "$(jerrors)" "MD5SUMS fetch" "errors"
assert_eq "$(col F a.txt)" unchecked "a.txt recorded as unchecked"
assert_eq "$(manifest_sql "$T/state" F "SELECT count(*) FROM mismatches")" 1 \
    "the mismatch is kept"
chmod 644 "$U/F/MD5SUMS"
mark=$(wc -l < "$LOG")
assert_exit 1 bm --json sync F
assert_eq "$(jerrors)" "a.txt fetch" "errors once MD5SUMS is back"
assert_eq "$(reqs "$mark")" "GET 200 /F/MD5SUMS" "requests: MD5SUMS only"
why="checksum mismatch: upstream's copy still fails its sidecar (it says md5:$BAD, run 1 got md5:$realFa): not fetched again until upstream's file or sidecar changes"
grep -qF "F: a.txt: $why" "$LAST_ERR" || fail "no still-fails message"
assert_exit 1 bm status F
grep -qF "a.txt: fetch: $why" "$LAST_OUT" || fail "status: the reason is cut"
assert_exit 0 bm history F --runs 1
grep -qF "a.txt: fetch: $why" "$LAST_OUT" || fail "history: the reason is cut"
mark=$(wc -l < "$LOG")
assert_exit 1 bm sync F
assert_eq "$(reqs "$mark")" "" "requests of the next run"

echo "# J: conflicting digests appended to MD5SUMS (b.txt) and c.txt.md5"
echo "$BAD  b.txt" >> "$U/J/MD5SUMS"
echo "$BAD  c.txt" >> "$U/J/c.txt.md5"
touch -d '2023-01-01 UTC' "$U/J/MD5SUMS" "$U/J/c.txt.md5"
mark=$(wc -l < "$LOG")
assert_exit 1 bm --json sync J
assert_eq "$(jerrors)" "$(printf '%s\n' 'b.txt fetch' 'c.txt fetch')" "errors"
assert_eq "$(reqs "$mark")" "$(printf '%s\n' 'GET 200 /J/MD5SUMS' \
    'GET 200 /J/c.txt.md5')" "requests: the sidecars only"
grep -q "J: b.txt: checksum mismatch: MD5SUMS gives conflicting md5 digests: the local copy cannot be checked" \
    "$LAST_ERR" || fail "no conflict message for b.txt"
assert_eq "$(readlink "$T/m/J")" "$snapJ" "J's published snapshot"
assert_exit 1 bm --json sync J
assert_eq "$(jerrors)" "$(printf '%s\n' 'b.txt fetch' 'c.txt fetch')" \
    "errors of the next run"
assert_eq "$(readlink "$T/m/J")" "$snapJ" "still J's first snapshot"
(cd "$U/J" && md5sum a.txt b.txt) > "$U/J/MD5SUMS"
(cd "$U/J" && md5sum c.txt) > "$U/J/c.txt.md5"
touch -d '2023-01-02 UTC' "$U/J/MD5SUMS" "$U/J/c.txt.md5"
mark=$(wc -l < "$LOG")
assert_exit 0 bm sync J
assert_eq "$(reqs "$mark")" "$(printf '%s\n' 'GET 200 /J/MD5SUMS' \
    'GET 200 /J/c.txt.md5')" "requests once put right"
[ "$(readlink "$T/m/J")" != "$snapJ" ] || fail "J not published"
assert_trees_equal "$U/J" "$T/m/J/"

echo "# S: a --verify size run publishes c.txt; the next run fails it again"
assert_exit 0 bm sync S --verify size
snapS=$(readlink "$T/m/S")
assert_eq "$(col S c.txt)" unchecked "c.txt recorded as unchecked"
mark=$(wc -l < "$LOG")
assert_exit 1 bm --json sync S
assert_eq "$(jerrors)" "c.txt fetch" "errors"
assert_eq "$(reqs "$mark")" "" "requests"
grep -q "S: c.txt: checksum mismatch: upstream's copy still fails its sidecar" \
    "$LAST_ERR" || fail "c.txt: no still-fails message"
assert_eq "$(readlink "$T/m/S")" "$snapS" "S's snapshot"
mark=$(wc -l < "$LOG")
assert_exit 1 bm --json sync S
assert_eq "$(jerrors)" "c.txt fetch" "errors of the next run"
assert_eq "$(reqs "$mark")" "" "requests of the next run"
grep -q "committed without a sidecar check" "$LAST_ERR" &&
    fail "c.txt hashed again"
assert_eq "$(readlink "$T/m/S")" "$snapS" "S's snapshot after the next run"

echo "# V: synced with verify = size; verify = sidecar switched on"
sed -i 's/^verify = size$/verify = sidecar/' "$T/bm.conf"
mark=$(wc -l < "$LOG")
assert_exit 1 bm --json sync V
assert_eq "$(jerrors)" "b.txt fetch" "errors"
assert_eq "$(reqs "$mark")" "$(printf '%s\n' 'GET 200 /V/b.txt' \
    'GET 200 /V/b.txt' 'GET 304 /V/MD5SUMS')" "requests: b twice, MD5SUMS"
assert_eq "$(grep -c "committed without a sidecar check" "$LAST_ERR")" 2 \
    "files hashed (a and b)"
assert_eq "$(col V c.txt)" "" "c.txt (no line) recorded as checked"
(cd "$U/V" && md5sum a.txt b.txt && echo "$BAD  MD5SUMS") > "$U/V/MD5SUMS"
touch -d '2023-01-01 UTC' "$U/V/MD5SUMS"
# opened N: the data files run N opened (strace), sorted.
opened() { grep -oE '"[abc]\.txt"' "$T/strace.$1" | LC_ALL=C sort | tr -d '"'; }
mark=$(wc -l < "$LOG")
strace -f -qq -e trace=openat,open -o "$T/strace.1" \
    "$BM" -c "$T/bm.conf" --state-dir "$T/state" sync V \
    > "$T/fixed.out" 2> "$T/fixed.err" || fail "the run after b's line was put right failed"
assert_eq "$(reqs "$mark")" "GET 200 /V/MD5SUMS" "requests once b's line is right"
grep -q "V: b.txt: its sidecar's digest changed: the local copy matches" \
    "$T/fixed.err" || fail "b.txt was not checked"
assert_eq "$(opened 1)" b.txt "data files opened (hashed) once b's line is right"
strace -f -qq -e trace=openat,open -o "$T/strace.2" \
    "$BM" -c "$T/bm.conf" --state-dir "$T/state" sync V \
    > "$T/nochange.out" 2> "$T/nochange.err" || fail "the no-change run failed"
assert_eq "$(opened 2)" "" "data files opened by a no-change run"
assert_exit 0 bm verify V
(cd "$T/m/V" && grep -v ' MD5SUMS$' MD5SUMS | md5sum --quiet -c) ||
    fail "V does not check"
no_temps "$T/m"
echo PASS
