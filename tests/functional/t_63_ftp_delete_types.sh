#!/bin/bash
# delete = yes with an FTP source (real vsftpd, LIST, symlinks kept as
# symlinks) and paths whose type changes:
#  - upstream type changes (x: file -> directory -> file, d: directory ->
#    file -> directory) are followed both ways, exit 0;
#  - a path gone upstream is deleted only while it is what was
#    committed there: e (a committed empty directory) replaced locally by
#    a file, and lnk (a committed symlink) replaced locally by a file,
#    are kept, reported (exit 1, errors op "delete") and released;
#  - sub, gone upstream with its file sub/kept.txt edited locally: the
#    file is released, and so is sub, which now holds it (reported once:
#    the next run is clean, exit 0, not a failure every run);
#  - a directory replaced upstream by a symlink (dl, two files in it):
#    with --no-delete a conflict that says why (exit 1, the directory and
#    its files kept); --max-delete 1 refuses the two deletes (exit 4,
#    nothing changed); then the directory and its files are deleted and
#    the symlink made (exit 0), and the next run changes nothing;
#  - a new upstream symlink over an untracked local file (al): a conflict
#    that says why, the file kept (exit 1); a committed file replaced
#    upstream by a symlink (cf): the file goes, the symlink is made;
#  - a directory vsftpd cannot read (mode 0711): its LIST is empty with
#    "226 Transfer done (but failed to open directory).": exit 3, its
#    files neither deleted nor released.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup

U=$T/srv/tree
mkdir -p "$U/d" "$U/e" "$U/sub"
printf 'file x\n' > "$U/x"
printf 'in d\n' > "$U/d/f"
printf 'keep\n' > "$U/k"
printf 'kept by the admin\n' > "$U/sub/kept.txt"
printf 'plain\n' > "$U/sub/plain.txt"
ln -s k "$U/lnk"
# Times of a finished minute: a file recorded before its listed minute
# (LIST shows minutes) ended is checked again (MDTM) on the next runs,
# which would add events this test does not look at.
age() { find "$U" -exec touch -h -d '2022-03-04 05:06:07 UTC' {} +; }
age
start_vsftpd "$T/srv/tree"
write_conf "$VSFTPD_URL"
printf 'max_delete = 100%%\n' >> "$T/bm.conf"

tree() {
	(cd "$T/mirror" && find . -mindepth 1 -printf '%y %p\n' | LC_ALL=C sort |
	    tr '\n' ,)
}

echo "# first run"
assert_exit 0 bm --json sync up
expect_counts 5 0 0 0
assert_eq "$(tree)" "d ./d,d ./e,d ./sub,f ./d/f,f ./k,f ./sub/kept.txt,f ./sub/plain.txt,f ./x,l ./lnk," \
    "first tree"

echo "# upstream: x becomes a directory, d a file"
rm "$U/x" && mkdir "$U/x" && printf 'new in x\n' > "$U/x/g"
rm -r "$U/d" && printf 'd is a file now\n' > "$U/d"
age
assert_exit 0 bm --json sync up
expect_counts 2 0 2 0
assert_eq "$(tree)" "d ./e,d ./sub,d ./x,f ./d,f ./k,f ./sub/kept.txt,f ./sub/plain.txt,f ./x/g,l ./lnk," \
    "swapped tree"
assert_eq "$(manifest_sql "$T/state" up "select type from files where cast(path as text) in ('d', 'x') order by path" | tr '\n' ,)" \
    "102,100," "d a file, x a directory in the manifest"

echo "# and back"
rm -r "$U/x" && printf 'file x again\n' > "$U/x"
rm "$U/d" && mkdir "$U/d" && printf 'in d\n' > "$U/d/f"
age
assert_exit 0 bm --json sync up
expect_counts 2 0 2 0
cmp -s "$U/x" "$T/mirror/x" || fail "x bytes"
cmp -s "$U/d/f" "$T/mirror/d/f" || fail "d/f bytes"

echo "# local changes; e, lnk and sub gone upstream"
rmdir "$T/mirror/e" && printf 'admin notes\n' > "$T/mirror/e"
rm "$T/mirror/lnk" && printf 'admin file\n' > "$T/mirror/lnk"
printf 'kept by the admin, and edited\n' > "$T/mirror/sub/kept.txt"
rm -r "$U/e" "$U/lnk" "$U/sub"
assert_exit 1 bm --json sync up
expect_counts 0 0 1 4
assert_eq "$(jerrors | tr '\n' ,)" "e delete,lnk delete,sub delete,sub/kept.txt delete," "errors"
for m in "e: delete: gone upstream, but the local path is no longer the directory committed: kept, no longer tracked" \
    "lnk: delete: gone upstream, but the local path is no longer the symlink committed: kept, no longer tracked" \
    "sub/kept.txt: delete: gone upstream, but the local file is not the one committed (30 bytes, committed 18): kept, no longer tracked" \
    "sub: delete: gone upstream, but the directory holds files that are not from upstream: kept, no longer tracked"; do
	grep -qxF "biomirror: $m" "$LAST_ERR" || fail "message: $m: $(cat "$LAST_ERR")"
done
assert_eq "$(cat "$T/mirror/e")" "admin notes" "e kept"
assert_eq "$(cat "$T/mirror/lnk")" "admin file" "lnk kept"
assert_eq "$(cat "$T/mirror/sub/kept.txt")" "kept by the admin, and edited" "sub/kept.txt kept"
[ -e "$T/mirror/sub/plain.txt" ] && fail "sub/plain.txt not deleted"
assert_eq "$(manifest_sql "$T/state" up "select path || ' ' || op from events where run = 4 order by path" | tr '\n' ,)" \
    "e released,lnk released,sub released,sub/kept.txt released,sub/plain.txt deleted," \
    "events of the run"
assert_eq "$(manifest_sql "$T/state" up "select path from files order by path" | tr '\n' ,)" \
    "d,d/f,k,x," "manifest rows"

echo "# the next run is clean; what was kept stays"
assert_exit 0 bm --json sync up
expect_counts 0 0 0 0
assert_eq "$(tree)" "d ./d,d ./sub,f ./d/f,f ./e,f ./k,f ./lnk,f ./sub/kept.txt,f ./x," "last tree"

echo "# upstream: directory dl becomes a symlink"
mkdir "$U/dl"
printf 'one in dl\n' > "$U/dl/one"
printf 'two in dl\n' > "$U/dl/two"
age
assert_exit 0 bm --json sync up
expect_counts 2 0 0 0
rm -r "$U/dl" && ln -s d "$U/dl"
age
assert_exit 1 bm --json sync up --no-delete
expect_counts 0 0 0 1
assert_eq "$(jerrors | tr '\n' ,)" "dl conflict," "--no-delete: errors"
grep -qxF "biomirror: dl: upstream has a symlink here; the local directory stays (delete = yes replaces it)" \
    "$LAST_ERR" || fail "--no-delete: no reason: $(cat "$LAST_ERR")"
[ -f "$T/mirror/dl/one" ] && [ -f "$T/mirror/dl/two" ] ||
    fail "--no-delete: files of dl deleted"
assert_exit 4 bm --json sync up --max-delete 1
grep -qF "max_delete: would delete 2 files, max_delete allows 1" "$LAST_ERR" ||
    fail "--max-delete 1: no guard: $(cat "$LAST_ERR")"
[ -d "$T/mirror/dl" ] && [ -f "$T/mirror/dl/one" ] && [ -f "$T/mirror/dl/two" ] ||
    fail "--max-delete 1: dl changed"
assert_exit 0 bm --json sync up
expect_counts 0 0 2 0
[ -L "$T/mirror/dl" ] || fail "dl is no symlink: $(tree)"
assert_eq "$(readlink "$T/mirror/dl")" d "dl target"
assert_eq "$(manifest_sql "$T/state" up "select type || ' ' || cast(target as text) from files where cast(path as text) = 'dl'")" \
    "108 d" "dl a symlink in the manifest"
assert_eq "$(manifest_sql "$T/state" up "select count(*) from files where cast(path as text) like 'dl/%'")" 0 \
    "rows beneath dl"
assert_exit 0 bm --json sync up
expect_counts 0 0 0 0
[ -L "$T/mirror/dl" ] || fail "dl is no symlink after the next run"
rm "$U/dl"
age
assert_exit 0 bm --json sync up

echo "# a file in a new symlink's way: the admin's is kept, a committed one replaced"
printf 'the admin wrote this\n' > "$T/mirror/al"
printf 'committed\n' > "$U/cf"
age
assert_exit 0 bm --json sync up
expect_counts 1 0 0 0
ln -s d "$U/al"
rm "$U/cf" && ln -s k "$U/cf"
age
assert_exit 1 bm --json sync up
assert_eq "$(jerrors | tr '\n' ,)" "al conflict," "a new symlink over an untracked file: errors"
grep -qxF "biomirror: al: upstream has a symlink here; the local file is not the one biomirror committed: it stays, not replaced" \
    "$LAST_ERR" || fail "untracked al: no reason: $(cat "$LAST_ERR")"
assert_eq "$(cat "$T/mirror/al")" "the admin wrote this" "the admin's al"
[ -L "$T/mirror/cf" ] || fail "the committed cf is no symlink: $(tree)"
assert_eq "$(readlink "$T/mirror/cf")" k "cf target"
rm "$U/al" "$U/cf" "$T/mirror/al"
age
assert_exit 0 bm --json sync up

echo "# a directory vsftpd cannot read (mode 0711: CWD works, LIST does not)"
# vsftpd answers its LIST with no lines and "226 Transfer done (but failed
# to open directory).": an incomplete listing (exit 3), nothing deleted,
# never an empty directory.
mkdir "$U/locked"
printf 'one\n' > "$U/locked/one.txt"
printf 'two\n' > "$U/locked/two.txt"
chmod -R a+rX "$U/locked"
assert_exit 0 bm --json sync up
[ -f "$T/mirror/locked/two.txt" ] || fail "locked/two.txt not mirrored"
chmod 0711 "$U/locked"
assert_exit 3 bm --json sync up
assert_eq "$(jfield status)" failed "status"
grep -qF 'locked/: LIST: the server could not read the directory: 226 Transfer done (but failed to open directory).' \
    "$LAST_ERR" || fail "no reason for the unreadable directory"
[ -f "$T/mirror/locked/one.txt" ] && [ -f "$T/mirror/locked/two.txt" ] ||
    fail "files of the unreadable directory deleted"
assert_eq "$(manifest_sql "$T/state" up "select count(*) from files where cast(path as text) like 'locked/%'")" 2 \
    "rows of the unreadable directory"
chmod 0755 "$U/locked"
assert_exit 0 bm --json sync up
expect_counts 0 0 0 0

stop_servers
[ -z "$(bm_leftovers)" ] || fail "processes left: $(bm_leftovers)"
echo "PASS"
