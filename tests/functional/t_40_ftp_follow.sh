#!/bin/bash
# follow_symlinks = yes against real vsftpd (LIST shows symlinks as 'l'
# entries): a link to a file comes as a regular file with the target's
# bytes and mtime, a link to a directory as a directory with its contents,
# a loop (d/loop -> ..) is reported once and not entered, a dangling link
# is reported and skipped, a link leaving the source tree is fetched under
# its own name (what the server serves there); the run succeeds (exit 0)
# and a second run fetches nothing.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup

mkdir -p "$T/srv/tree/sub" "$T/srv/other"
printf 'file a\n' > "$T/srv/tree/a.txt"
printf 'file b in sub\n' > "$T/srv/tree/sub/b.txt"
printf 'outside the source tree\n' > "$T/srv/other/x.txt"
touch -d '2021-03-04 05:06:07 UTC' "$T/srv/tree/a.txt"
touch -d '2022-01-02 03:04:05 UTC' "$T/srv/tree/sub/b.txt" "$T/srv/other/x.txt"
ln -s a.txt "$T/srv/tree/flink"
ln -s sub "$T/srv/tree/dlink"
ln -s .. "$T/srv/tree/sub/loop"
ln -s nothere "$T/srv/tree/dang"
ln -s ../other/x.txt "$T/srv/tree/ext"
start_vsftpd "$T/srv"
write_conf "${VSFTPD_URL}tree/"
printf 'follow_symlinks = yes\n' >> "$T/bm.conf"

echo "# cold sync following symlinks"
assert_exit 0 bm --json sync up
expect_counts 5 0 0 0
for f in a.txt sub/b.txt flink dlink/b.txt ext; do
	[ -f "$T/mirror/$f" ] && [ ! -L "$T/mirror/$f" ] || fail "$f is not a regular file"
done
[ -d "$T/mirror/dlink" ] && [ ! -L "$T/mirror/dlink" ] || fail "dlink is not a directory"
cmp "$T/srv/tree/a.txt" "$T/mirror/flink" || fail "flink bytes"
cmp "$T/srv/tree/sub/b.txt" "$T/mirror/dlink/b.txt" || fail "dlink/b.txt bytes"
cmp "$T/srv/other/x.txt" "$T/mirror/ext" || fail "ext bytes"
assert_eq "$(stat -c %Y "$T/mirror/flink")" "$(stat -c %Y "$T/srv/tree/a.txt")" "flink mtime"
assert_eq "$(stat -c %Y "$T/mirror/ext")" "$(stat -c %Y "$T/srv/other/x.txt")" "ext mtime"
assert_eq "$(stat -c %Y "$T/mirror/dlink/b.txt")" "$(stat -c %Y "$T/srv/tree/sub/b.txt")" \
    "dlink/b.txt mtime"
for f in dang sub/loop dlink/loop; do
	[ -e "$T/mirror/$f" ] || [ -L "$T/mirror/$f" ] && fail "$f was created"
done
assert_eq "$(find "$T/mirror" -type l | wc -l)" 0 "no symlinks in the mirror"
assert_eq "$(grep -c 'directories not entered' "$T/last.err")" 1 "loop reported once"
grep -q 'up: list: 2 directories not entered: their entries repeat an ancestor.s (a server-side symlink loop)' \
    "$T/last.err" || fail "loop message"
grep -q 'up: list: 1 symlinks not followed: their target is not in the listing (dangling, or excluded)' \
    "$T/last.err" || fail "dangling message"
assert_eq "$(manifest_sql "$T/state" up "select count(*) from files where type = 108")" 0 \
    "no symlink rows"
assert_eq "$(manifest_sql "$T/state" up "select count(*) from files where type = 102")" 5 \
    "file rows"

echo "# second run: nothing changed (ext, of unknown size and time, is asked"
echo "# with MDTM and not replaced)"
assert_exit 0 bm --json sync up
expect_counts 0 0 0 0
cmp "$T/srv/other/x.txt" "$T/mirror/ext" || fail "ext bytes after the second run"

echo "# a retargeted link is fetched again with its new target"
rm "$T/srv/tree/flink"
ln -s sub/b.txt "$T/srv/tree/flink"
assert_exit 0 bm --json sync up
cmp "$T/srv/tree/sub/b.txt" "$T/mirror/flink" || fail "flink retargeted bytes"
assert_eq "$(jfield failed)" 0 "failed"
echo "PASS"
