#!/bin/bash
# A sidecar that changes upstream while its data file stays (issue 18
# item 1), against real nginx, verify = sidecar:
# - publish = set, only nt.03.tar.gz.md5 rewritten with a digest the
#   unchanged volume does not have: the volume is hashed and fetched
#   again (twice, its sidecar asked for again once), still fails: exit 1,
#   the published snapshot unchanged, post_sync not run; the next run
#   asks upstream for nothing of it and fails again; once the sidecar is
#   put right the local copy is found to match: no fetch, published;
# - an MD5SUMS covering a, b, c whose line for b changes (b rewritten
#   upstream with its size and mtime kept, so the listing shows no
#   change): b alone is fetched again and published, md5sum -c passes;
#   a and c, whose lines are as before, are neither hashed nor fetched
#   (rows without a recorded digest, as a manifest before schema 4 has);
# - publish = file: a line of MD5SUMS that no longer matches c: c is
#   fetched again, still fails: exit 1, the old c kept, the failure
#   recorded (event, mismatches row).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup

U=$T/up
OLD='2022-03-04 05:06:07 UTC'
mkdir -p "$U/set/list" "$U/pf"
for i in 00 01 02 03; do
	head -c 20000 /dev/urandom > "$U/set/nt.$i.tar.gz"
	(cd "$U/set" && md5sum "nt.$i.tar.gz") > "$U/set/nt.$i.tar.gz.md5"
done
for f in a b c; do
	printf '%s first\n' "$f" > "$U/set/list/$f.txt"
	printf '%s first\n' "$f" > "$U/pf/$f.txt"
done
(cd "$U/set/list" && md5sum a.txt b.txt c.txt) > "$U/set/list/MD5SUMS"
(cd "$U/pf" && md5sum a.txt b.txt c.txt) > "$U/pf/MD5SUMS"
find "$U" -exec touch -d "$OLD" {} +
start_nginx "$U" "autoindex_format json;"
LOG=$NGINX_ACCESS_LOG
cat > "$T/bm.conf" <<CONF
[global]
state_dir = $T/state-from-config

[set]
source = ${NGINX_URL}set/
dest = $T/set
verify = sidecar
retries = 2
publish = set
post_sync = touch $T/hook.ran

[pf]
source = ${NGINX_URL}pf/
dest = $T/pf
verify = sidecar
retries = 2
CONF
D=$T/set

# reqs MARK: "METHOD STATUS PATH" of the file requests since MARK, sorted.
reqs() { log_requests "$1" "$LOG" | grep -v '/$' | LC_ALL=C sort; }

echo "# first runs: everything fetched, published"
assert_exit 0 bm sync set pf
rm -f "$T/hook.ran"
(cd "$D" && md5sum --quiet -c nt.0[0-3].tar.gz.md5 && cd list &&
    md5sum --quiet -c MD5SUMS) || fail "first snapshot does not check"
snap1=$(readlink "$D")
sum1=$(tree_sum "$D/")

echo "# only nt.03.tar.gz.md5 changes, to a digest the volume does not have"
good3=$(cut -d' ' -f1 "$U/set/nt.03.tar.gz.md5")
real3=$(md5sum < "$U/set/nt.03.tar.gz" | cut -d' ' -f1)
echo "00112233445566778899aabbccddeeff  nt.03.tar.gz" > "$U/set/nt.03.tar.gz.md5"
touch -d '2023-01-01 00:00:00 UTC' "$U/set/nt.03.tar.gz.md5"
mark=$(wc -l < "$LOG")
assert_exit 1 bm --json sync set
expect_counts 1 0 0 1
assert_eq "$(jfield status)" partial "status"
assert_eq "$(jerrors)" "nt.03.tar.gz fetch" "errors"
assert_eq "$(reqs "$mark")" "$(printf '%s\n' \
    'GET 200 /set/nt.03.tar.gz' 'GET 200 /set/nt.03.tar.gz' \
    'GET 200 /set/nt.03.tar.gz.md5' 'GET 304 /set/nt.03.tar.gz.md5')" \
    "requests: the sidecar, the volume twice, the sidecar once more"
grep -q "nt.03.tar.gz: its sidecar's digest changed: local content differs from its sidecar checksum: fetching it again" \
    "$LAST_ERR" || fail "no re-check message"
grep -q "nt.03.tar.gz: fetch: checksum mismatch: nt.03.tar.gz.md5 says md5:00112233445566778899aabbccddeeff, got md5:$real3 again" \
    "$LAST_ERR" || fail "no mismatch message with both digests"
assert_eq "$(readlink "$D")" "$snap1" "the published snapshot"
assert_eq "$(tree_sum "$D/")" "$sum1" "the published snapshot's content"
[ -e "$T/hook.ran" ] && fail "post_sync ran"
(cd "$D" && md5sum --quiet -c nt.03.tar.gz.md5) || fail "published set does not check"

echo "# the next run, nothing changed: nothing of nt.03 asked for, exit 1"
mark=$(wc -l < "$LOG")
assert_exit 1 bm --json sync set
expect_counts 0 0 0 1
assert_eq "$(reqs "$mark" | grep -c nt.03)" 0 "requests of nt.03"
grep -q "nt.03.tar.gz: checksum mismatch: upstream's copy still fails its sidecar (it says md5:00112233445566778899aabbccddeeff, run 2 got md5:$real3)" \
    "$LAST_ERR" || fail "no still-fails message"
assert_eq "$(readlink "$D")" "$snap1" "still the first snapshot"
[ -e "$T/hook.ran" ] && fail "post_sync ran"

echo "# the sidecar is put right: the local copy matches, no fetch, published"
echo "$good3  nt.03.tar.gz" > "$U/set/nt.03.tar.gz.md5"
touch -d '2023-01-02 00:00:00 UTC' "$U/set/nt.03.tar.gz.md5"
mark=$(wc -l < "$LOG")
assert_exit 0 bm sync set
assert_eq "$(reqs "$mark")" "GET 200 /set/nt.03.tar.gz.md5" "requests"
grep -q "nt.03.tar.gz: its sidecar's digest changed: the local copy matches" \
    "$LAST_ERR" || fail "no match message"
[ "$(readlink "$D")" != "$snap1" ] || fail "not published"
[ -e "$T/hook.ran" ] || fail "post_sync did not run"
rm -f "$T/hook.ran"
assert_eq "$(manifest_sql "$T/state" set "SELECT count(*) FROM mismatches")" 0 \
    "mismatch rows left"
assert_trees_equal "$U/set" "$D/"

echo "# MD5SUMS: b rewritten with its size and mtime kept, its line changed"
# As a manifest of before schema 4 has it: no digest recorded per file (the
# sidecars' lines before this run stand for them).
sqlite3 "$(manifest_db "$T/state" set)" "UPDATE files SET sidecar = NULL" ||
    fail "sqlite3"
printf 'b other\n' > "$U/set/list/b.txt"
touch -d "$OLD" "$U/set/list/b.txt"
(cd "$U/set/list" && md5sum a.txt b.txt c.txt) > "$U/set/list/MD5SUMS"
touch -d '2023-01-03 00:00:00 UTC' "$U/set/list/MD5SUMS"
mark=$(wc -l < "$LOG")
assert_exit 0 bm --json sync set
expect_counts 2 0 0 0
assert_eq "$(reqs "$mark")" "$(printf '%s\n' 'GET 200 /set/list/MD5SUMS' \
    'GET 200 /set/list/b.txt')" "requests: MD5SUMS and b"
assert_eq "$(grep -c "its sidecar's digest changed" "$LAST_ERR")" 1 \
    "files re-checked (b only)"
grep -q "list/b.txt: its sidecar's digest changed: local content differs" \
    "$LAST_ERR" || fail "b was not re-checked"
(cd "$D/list" && md5sum --quiet -c MD5SUMS) || fail "MD5SUMS does not check"
assert_trees_equal "$U/set" "$D/"

echo "# publish = file: MD5SUMS's line for c no longer matches c"
cp "$T/pf/c.txt" "$T/c.good"
sed -i 's/^[0-9a-f]*  c.txt$/ffeeddccbbaa99887766554433221100  c.txt/' "$U/pf/MD5SUMS"
touch -d '2023-01-01 00:00:00 UTC' "$U/pf/MD5SUMS"
mark=$(wc -l < "$LOG")
assert_exit 1 bm --json sync pf
expect_counts 1 0 0 1
assert_eq "$(jerrors)" "c.txt fetch" "errors"
assert_eq "$(reqs "$mark")" "$(printf '%s\n' 'GET 200 /pf/MD5SUMS' \
    'GET 200 /pf/c.txt' 'GET 200 /pf/c.txt' 'GET 304 /pf/MD5SUMS')" \
    "requests: MD5SUMS, c twice, MD5SUMS once more"
cmp "$T/c.good" "$T/pf/c.txt" || fail "c.txt was replaced"
assert_eq "$(manifest_sql "$T/state" pf "SELECT CAST(path AS TEXT) || ' ' ||
    want FROM mismatches")" "c.txt md5:ffeeddccbbaa99887766554433221100" \
    "mismatch recorded"
assert_eq "$(manifest_sql "$T/state" pf "SELECT count(*) FROM events
    WHERE run = (SELECT max(id) FROM runs) AND op = 'failed'
    AND CAST(path AS TEXT) = 'c.txt'")" 1 "failed event"
no_temps "$T/pf"
no_temps "$T/set.biomirror"
echo PASS
