#!/bin/bash
# delete = yes removes a file gone upstream only while it is still the
# file this mirror committed (nginx, real files):
#  - edited.txt, changed locally to another size: kept with the local
#    content, reported (exit 1, errors {path, op: delete}, the sizes in
#    the message), its manifest row released (no row; event "released");
#  - swapped.txt, replaced locally by a directory holding a file: kept;
#  - touched.txt, the same size with another mtime (an edit that keeps
#    the size, as far as biomirror can tell): kept and released too;
#  - plain.txt, untouched: deleted;
#  - the next run is clean (exit 0): released files are no longer
#    tracked, and stay.
# The same holds for a manifest copied from another mirror over a tree
# it never wrote: a local file of another size is never deleted.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup

mkdir -p "$T/up"
for f in keep.txt edited.txt swapped.txt touched.txt plain.txt; do
	printf 'upstream content of %s\n' "$f" > "$T/up/$f"
	touch -d '2021-05-06 07:08:09 UTC' "$T/up/$f"
done
chmod -R a+rX "$T/up"
start_nginx "$T/up"
write_conf "$NGINX_URL"
printf 'max_delete = 100%%\n' >> "$T/bm.conf"

echo "# first run: all five fetched"
assert_exit 0 bm --json sync up
expect_counts 5 0 0 0

echo "# local changes, then four files removed upstream"
printf 'edited by the admin, longer than before\n' > "$T/mirror/edited.txt"
cp -p "$T/mirror/edited.txt" "$T/edited.local"
rm "$T/mirror/swapped.txt"
mkdir "$T/mirror/swapped.txt"
printf 'local\n' > "$T/mirror/swapped.txt/inside"
touch -d '2022-01-01 00:00:00 UTC' "$T/mirror/touched.txt"
rm "$T/up/edited.txt" "$T/up/swapped.txt" "$T/up/touched.txt" "$T/up/plain.txt"

assert_exit 1 bm --json sync up
assert_eq "$(jfield status)" partial "status"
expect_counts 0 0 1 3
assert_eq "$(jerrors | tr '\n' ,)" "edited.txt delete,swapped.txt delete,touched.txt delete," "errors"
grep -qxF "biomirror: edited.txt: delete: gone upstream, but the local file is not the one committed (40 bytes, committed 31): kept, no longer tracked" \
    "$LAST_ERR" || fail "edited.txt: message: $(grep edited "$LAST_ERR")"
grep -qxF "biomirror: swapped.txt: delete: gone upstream, but the local path is no longer the file committed: kept, no longer tracked" \
    "$LAST_ERR" || fail "swapped.txt: message: $(grep swapped "$LAST_ERR")"
cmp -s "$T/edited.local" "$T/mirror/edited.txt" || fail "edited.txt changed"
[ -f "$T/mirror/swapped.txt/inside" ] || fail "swapped.txt/inside deleted"
grep -qxF "biomirror: touched.txt: delete: gone upstream, but the local file is not the one committed (its mtime changed since): kept, no longer tracked" \
    "$LAST_ERR" || fail "touched.txt: message: $(grep touched "$LAST_ERR")"
[ -f "$T/mirror/touched.txt" ] || fail "touched.txt deleted (its mtime changed)"
[ -e "$T/mirror/plain.txt" ] && fail "plain.txt kept"
[ -f "$T/mirror/keep.txt" ] || fail "keep.txt deleted"
assert_eq "$(manifest_sql "$T/state" up "select path from files where type = 102 order by path" | tr '\n' ,)" \
    "keep.txt," "files in the manifest"
assert_eq "$(manifest_sql "$T/state" up "select path || ' ' || op from events where run = 2 order by path" | tr '\n' ,)" \
    "edited.txt released,plain.txt deleted,swapped.txt released,touched.txt released," \
    "events of the run"

echo "# the next run: clean, the released files stay"
assert_exit 0 bm --json sync up
expect_counts 0 0 0 0
cmp -s "$T/edited.local" "$T/mirror/edited.txt" || fail "edited.txt changed later"
[ -f "$T/mirror/swapped.txt/inside" ] || fail "swapped.txt/inside deleted later"

echo "# a directory gone upstream whose file cannot be deleted this run"
# gone/f.txt is a mount point (unlink: EBUSY): its delete fails, and gone
# then holds a file that is still tracked, not one foreign to upstream:
# gone stays tracked too (a failure, retried), and the next run deletes
# both instead of leaving an untracked empty directory behind.
mkdir -p "$T/up/gone"
printf 'in gone\n' > "$T/up/gone/f.txt"
chmod -R a+rX "$T/up/gone"
assert_exit 0 bm --json sync up
expect_counts 1 0 0 0
rm -r "$T/up/gone"
mount --bind "$T/mirror/gone/f.txt" "$T/mirror/gone/f.txt"
assert_exit 1 bm --json sync up
umount "$T/mirror/gone/f.txt"
assert_eq "$(jerrors | tr '\n' ,)" "gone delete,gone/f.txt delete," "busy: errors"
assert_eq "$(manifest_sql "$T/state" up "select cast(path as text) from files where cast(path as text) like 'gone%' order by path" | tr '\n' ,)" \
    "gone,gone/f.txt," "busy: rows of gone kept for a retry"
assert_exit 0 bm --json sync up
expect_counts 0 0 1 0
[ -e "$T/mirror/gone" ] && fail "busy: gone left behind after its file was deleted"

echo "# a manifest copied from another mirror, over a tree it never wrote"
mkdir -p "$T/up2" "$T/mirror2"
for f in a.txt b.txt; do
	printf 'upstream %s\n' "$f" > "$T/up2/$f"
done
chmod -R a+rX "$T/up2"
cat >> "$T/bm.conf" <<CONF

[other]
source = ${NGINX_URL}
dest = $T/mirror2
delete = yes
max_delete = 100%
CONF
# [other] lists the same upstream ($T/up: keep.txt); its manifest is a
# copy of up's from a run that had a.txt (13 bytes) committed.
cp -p "$T/up2/a.txt" "$T/up/a.txt"
assert_exit 0 bm --json sync up
expect_counts 1 0 0 0
rm "$T/up/a.txt"
cp "$(manifest_db "$T/state" up)" "$(manifest_db "$T/state" up | sed 's#/up\.db$#/other.db#')"
printf 'a local file biomirror never wrote\n' > "$T/mirror2/a.txt"
assert_exit 1 bm --json sync other
expect_counts 1 0 0 1
assert_eq "$(jerrors | tr '\n' ,)" "a.txt delete," "copied manifest: errors"
assert_eq "$(cat "$T/mirror2/a.txt")" "a local file biomirror never wrote" \
    "copied manifest: the local file"

stop_servers
[ -z "$(bm_leftovers)" ] || fail "processes left: $(bm_leftovers)"
echo "PASS"
