#!/bin/bash
# verify and resync against real nginx.  verify NAME re-hashes the local
# files: a corrupted file (same size, same mtime) is reported (exit 1,
# text and --json), verify --repair fetches it again (exit 0, identical).
# resync NAME finds local drift (a file grown, a file deleted, an mtime
# changed, a stale temp file) and repairs it.  resync --adopt over an
# `rsync -a` copy of the tree with no manifest fetches no file (nginx access
# log) and records every file; the next sync fetches nothing.  With
# verify = checksum set afterwards, resync --checksum records the SHA-256
# of those files (a corrupt copy, same size and mtime, that its sidecar
# tells apart is fetched again instead), and the next one records nothing.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup

U=$T/up
mkdir -p "$U/db" "$U/doc"
for f in db/a.gz db/b.gz doc/c.txt doc/d.txt; do
	head -c $((RANDOM * 7 + 1000)) /dev/urandom > "$U/$f"
done
(cd "$U/db" && md5sum a.gz b.gz) > "$U/db/MD5SUMS"
find "$U" -exec touch -d '2022-05-06 07:08:09 UTC' {} +
start_nginx "$U"
write_conf "$NGINX_URL"
printf 'verify = checksum\nretries = 1\n' >> "$T/bm.conf"
assert_exit 0 bm --json sync up
expect_counts 5 0 0 0

echo "# verify: all good"
assert_exit 0 bm verify up
assert_eq "$(cat "$T/last.out")" "up: verify ok: checked 5 files against digests, 0 differ" "verify output"

echo "# verify: a corrupted file (same size and mtime) is found"
printf 'XXXX' | dd of="$T/mirror/doc/c.txt" bs=1 seek=10 conv=notrunc status=none
touch -d '2022-05-06 07:08:09 UTC' "$T/mirror/doc/c.txt"
printf 'YYYY' | dd of="$T/mirror/db/a.gz" bs=1 seek=10 conv=notrunc status=none
touch -d '2022-05-06 07:08:09 UTC' "$T/mirror/db/a.gz"
assert_exit 1 bm verify up
assert_eq "$(cat "$T/last.out")" "differs db/a.gz: differs from its recorded checksum
differs doc/c.txt: differs from its recorded checksum
up: verify partial: checked 5 files against digests, 2 differ" "verify output"
assert_exit 1 bm --json verify up
assert_eq "$(jerrors)" "$(printf 'db/a.gz verify\ndoc/c.txt verify')" "json errors"
assert_eq "$(jfield failed)" 2 "json failed"
# A plain sync trusts size and mtime: it does not see it.
assert_exit 0 bm --json sync up
expect_counts 0 0 0 0

echo "# verify --repair fetches them again"
mark=$(wc -l < "$NGINX_ACCESS_LOG")
assert_exit 0 bm verify up --repair
assert_trees_equal "$U" "$T/mirror"
assert_eq "$(log_since "$mark" "$NGINX_ACCESS_LOG" > "$T/log.new";
    nginx_gets "$T/log.new" | grep -v '/$' | LC_ALL=C sort | tr '\n' ' ')" \
    "/db/a.gz /doc/c.txt " "only the two corrupted files were fetched"
assert_exit 0 bm verify up

echo "# resync: local drift is found and repaired"
printf 'more' >> "$T/mirror/db/b.gz"
rm "$T/mirror/doc/d.txt"
touch -d '2001-01-01 00:00:00 UTC' "$T/mirror/doc/c.txt"
printf 'junk' > "$T/mirror/doc/.biomirror-tmp.deadbeef"
assert_exit 0 bm resync up
grep -q '^fetch  db/b.gz (local size differs' "$T/last.out" || fail "b.gz drift not reported"
grep -q '^fetch  doc/d.txt (local missing' "$T/last.out" || fail "d.txt drift not reported"
grep -q '^touch  doc/c.txt (local mtime drifted' "$T/last.out" || fail "c.txt drift not reported"
grep -q '^up: ok: listed 7, fetched 2, touched 1, deleted 0, failed 0' "$T/last.out" ||
    fail "resync summary"
assert_trees_equal "$U" "$T/mirror"
no_temps "$T/mirror"
assert_eq "$(manifest_sql "$T/state" up "SELECT command FROM runs ORDER BY id DESC LIMIT 1")" \
    resync "run recorded as resync"

echo "# resync --checksum finds content drift that size and mtime hide"
printf 'ZZZZ' | dd of="$T/mirror/doc/d.txt" bs=1 seek=5 conv=notrunc status=none
touch -d '2022-05-06 07:08:09 UTC' "$T/mirror/doc/d.txt"
assert_exit 0 bm --json resync up --checksum
expect_counts 1 0 0 0
assert_trees_equal "$U" "$T/mirror"

echo "# option checks"
assert_exit 2 bm sync up --adopt
assert_exit 2 bm resync
assert_exit 2 bm verify
assert_exit 2 bm verify nosuch

echo "# resync --adopt over an rsync -a copy without a manifest"
rsync -a "$U/" "$T/copy/" || fail "rsync -a"

cat >> "$T/bm.conf" <<CONF

[cp]
source = $NGINX_URL
dest = $T/copy
CONF
mark=$(wc -l < "$NGINX_ACCESS_LOG")
assert_exit 0 bm --json resync cp --adopt
assert_eq "$(jfield fetched)" 0 "fetched"
assert_eq "$(jfield adopted)" 5 "adopted"
assert_eq "$(jfield failed)" 0 "failed"
log_since "$mark" "$NGINX_ACCESS_LOG" > "$T/log.new"
assert_eq "$(nginx_gets "$T/log.new" | grep -vc '/$')" 0 "no file was fetched"
assert_eq "$(manifest_sql "$T/state" cp "SELECT count(*) FROM files WHERE type = 102
    AND local_size IS NOT NULL")" 5 "every file recorded"
assert_eq "$(manifest_sql "$T/state" cp "SELECT count(*) FROM events
    WHERE op = 'adopted'")" 5 "adopted events"
assert_trees_equal "$U" "$T/copy"
mark=$(wc -l < "$NGINX_ACCESS_LOG")
assert_exit 0 bm --json sync cp
expect_counts 0 0 0 0
log_since "$mark" "$NGINX_ACCESS_LOG" > "$T/log.new"
assert_eq "$(nginx_gets "$T/log.new" | grep -vc '/$')" 0 "the next sync fetches nothing"

echo "# resync --checksum with verify = checksum records the digests the"
echo "# adoption (verify = size) did not; a corrupt copy is fetched instead"
digests() {	# digests MIRROR: "path checksum" of every file row
	manifest_sql "$T/state" "$1" "SELECT CAST(path AS TEXT) || ' ' ||
	    coalesce(checksum, 'NULL') FROM files WHERE type = 102 ORDER BY path"
}
assert_eq "$(manifest_sql "$T/state" cp "SELECT count(*) FROM files
    WHERE checksum IS NOT NULL")" 0 "no digest recorded by the adoption"
printf 'verify = checksum\n' >> "$T/bm.conf"	# [cp] is the last section
# db/a.gz: other bytes, same size and mtime; its sidecar (MD5SUMS) tells.
printf 'QQQQ' | dd of="$T/copy/db/a.gz" bs=1 seek=20 conv=notrunc status=none
touch -d '2022-05-06 07:08:09 UTC' "$T/copy/db/a.gz"
mark=$(wc -l < "$NGINX_ACCESS_LOG")
assert_exit 0 bm --json resync cp --checksum
expect_counts 1 0 0 0
assert_eq "$(jfield digest_recorded)" 4 "digests recorded"
grep -q "^biomirror: cp: recorded the SHA-256 of 4 files that had no recorded digest$" \
    "$LAST_ERR" || fail "the recorded digests are not logged"
grep -q '^biomirror: db/a.gz: local content differs from its sidecar checksum: fetching it again$' \
    "$LAST_ERR" || fail "the corrupt copy is not reported"
log_since "$mark" "$NGINX_ACCESS_LOG" > "$T/log.new"
assert_eq "$(nginx_gets "$T/log.new" | grep -v '/$' | tr '\n' ' ')" "/db/a.gz " \
    "only the corrupt copy was fetched"
assert_trees_equal "$U" "$T/copy"
want=$(cd "$U" && for f in db/MD5SUMS db/a.gz db/b.gz doc/c.txt doc/d.txt; do
	echo "$f sha256:$(sha256sum < "$f" | cut -d' ' -f1)"
done)
assert_eq "$(digests cp)" "$want" "every file's SHA-256 recorded, the upstream one"
run=$(manifest_sql "$T/state" cp "SELECT max(id) FROM runs")
assert_eq "$(manifest_sql "$T/state" cp "SELECT group_concat(CAST(path AS TEXT), ' ')
    FROM (SELECT path FROM events WHERE run = $run AND op = 'digest' ORDER BY path)")" \
    "db/MD5SUMS db/b.gz doc/c.txt doc/d.txt" "digest events"
echo "# a second resync --checksum finds nothing to record or fetch"
mark=$(wc -l < "$NGINX_ACCESS_LOG")
assert_exit 0 bm --json resync cp --checksum
expect_counts 0 0 0 0
python3 -c 'import json,sys
assert "digest_recorded" not in json.load(open(sys.argv[1]))[0]' "$LAST_OUT" ||
    fail "digest_recorded reported with nothing recorded"
assert_exit 0 bm resync cp --checksum
grep -q '^cp: ok: listed 7, fetched 0, touched 0, deleted 0, failed 0, 0 B in .*s)$' \
    "$LAST_OUT" || fail "summary of a resync with nothing to record"
log_since "$mark" "$NGINX_ACCESS_LOG" > "$T/log.new"
assert_eq "$(nginx_gets "$T/log.new" | grep -vc '/$')" 0 "nothing fetched"
assert_eq "$(digests cp)" "$want" "digests unchanged"
echo PASS
