#!/bin/bash
# Upstream changes a path's type (file -> directory, directory -> file):
# with delete = yes the local entry is replaced and the mirror converges;
# a local path of another type that biomirror did not commit there (an
# admin's file in place of a directory, an untracked file where upstream
# adds a directory) is never replaced: a conflict, kept, in history;
# excluded paths are never deleted, even with --delete and a generous
# max_delete (as rsync keeps excluded files without --delete-excluded).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup
mkdir -p "$T/up/y" "$T/up/keep" "$T/up/logs"
echo a > "$T/up/x"; echo b > "$T/up/y/inner"; echo k > "$T/up/keep/k.txt"
echo z > "$T/up/logs/excl.log"; echo w > "$T/up/logs/w.txt"
start_nginx "$T/up"
write_conf "$NGINX_URL"
assert_exit 0 bm sync up
assert_trees_equal "$T/up" "$T/mirror"

echo "# x becomes a directory, y becomes a file"
rm "$T/up/x"; mkdir "$T/up/x"; echo f > "$T/up/x/f"
rm -r "$T/up/y"; echo yy > "$T/up/y"
assert_exit 0 bm plan up
grep -q '^delete x (type changed upstream, 2 bytes)$' "$T/last.out" || fail "x not cleared first"
assert_exit 0 bm --json sync up
assert_eq "$(jfield failed)" 0 "failed"
assert_trees_equal "$T/up" "$T/mirror"
assert_exit 0 bm --json sync up
expect_counts 0 0 0 0

echo "# without delete the type change fails with a reason and keeps the file"
rm -r "$T/up/x"; echo xx > "$T/up/x"
sed -i 's/^delete = yes$/delete = no/' "$T/bm.conf"
assert_exit 1 bm --json sync up
[ -d "$T/mirror/x" ] || fail "x was replaced without delete"
grep -q '^x conflict$' <(jerrors) || fail "the conflict is not reported for x"
grep -q 'x: upstream has a file here; the local directory stays' "$LAST_ERR" ||
    fail "the conflict does not say why"
sed -i 's/^delete = no$/delete = yes/' "$T/bm.conf"

echo "# children of a conflict are not tried: the conflict says why"
rm "$T/up/x"; mkdir -p "$T/up/x/deeper"; echo 1 > "$T/up/x/in"; echo 2 > "$T/up/x/deeper/in2"
rm -rf "$T/mirror/x"; echo local > "$T/mirror/x"
sed -i 's/^delete = yes$/delete = no/' "$T/bm.conf"
assert_exit 1 bm --json sync up
assert_eq "$(jerrors | grep -c '^x')" 1 "errors for x and beneath it"
assert_eq "$(jfield failed)" 1 "failed"
grep -q 'x/in' "$LAST_ERR" && fail "a file beneath the conflict was tried"

echo "# ... and with delete = yes: the local file x is not what biomirror"
echo "# committed there (a directory): kept, never replaced, in history"
sed -i 's/^delete = no$/delete = yes/' "$T/bm.conf"
assert_exit 1 bm --json sync up
assert_eq "$(cat "$T/mirror/x")" local "the admin's file x"
grep -qxF 'biomirror: x: upstream has a directory here; the local file is not the one biomirror committed: it stays, not replaced' \
    "$LAST_ERR" || fail "no conflict for the admin's file x"
run=$(jfield run)
assert_exit 0 bm history up --run "$run"
grep -q 'x.*upstream has a directory here' "$T/last.out" ||
    fail "the conflict is not in the run's history"
rm "$T/mirror/x"
assert_exit 0 bm --json sync up
assert_trees_equal "$T/up" "$T/mirror"

echo "# an untracked local file where upstream adds a directory: kept"
mkdir "$T/up/newdir"; echo n > "$T/up/newdir/n.txt"
echo mine > "$T/mirror/newdir"
touch -d '2019-05-05 05:05:05 UTC' "$T/mirror/newdir"
assert_exit 1 bm --json sync up
assert_eq "$(cat "$T/mirror/newdir")" mine "the admin's file newdir"
# Directory mtimes are set last, to directories only: not to the file of
# the admin's where upstream has the directory.
assert_eq "$(stat -c %Y "$T/mirror/newdir")" "$(date -d '2019-05-05 05:05:05 UTC' +%s)" \
    "the mtime of the admin's file newdir"
assert_eq "$(jerrors | tr '\n' ,)" "newdir conflict," "errors"
rm "$T/mirror/newdir"
assert_exit 0 bm --json sync up
assert_trees_equal "$T/up" "$T/mirror"

echo "# excluded paths are kept"
assert_exit 0 bm sync --exclude '*.log' --exclude 'keep/' --max-delete 100% up
[ -e "$T/mirror/logs/excl.log" ] || fail "an excluded file was deleted"
[ -e "$T/mirror/keep/k.txt" ] || fail "an excluded directory was deleted"
assert_exit 0 bm plan --exclude '*.log' --max-delete 100% up
grep -q 'excl.log' "$T/last.out" && fail "the excluded file is planned"
# ... and a path gone upstream is still deleted under the same filter.
rm "$T/up/logs/w.txt"
assert_exit 0 bm --json sync --exclude '*.log' --max-delete 100% up
expect_counts 0 0 1 0
[ -e "$T/mirror/logs/w.txt" ] && fail "a gone file was kept"
[ -e "$T/mirror/logs/excl.log" ] || fail "the excluded file was deleted"
echo "# a directory linked without a trailing '/' is never published as a file"
stop_servers
mkdir -p "$T/st/sub"
echo b > "$T/st/sub/b.txt"
printf '<html><body><ul><li><a href="sub">sub</a></li><li><a href="a.txt">a.txt</a></li></ul></body></html>\n' \
    > "$T/st/index.html"
printf '<html><body><ul><li><a href="b.txt">b.txt</a></li></ul></body></html>\n' \
    > "$T/st/sub/index.html"
echo a > "$T/st/a.txt"
start_nginx_static "$T/st"
write_conf "$NGINX_URL"
sed -i "s|^dest = .*|dest = $T/mirror2|" "$T/bm.conf"
rm -rf "$T/state"	# another upstream: a new manifest
assert_exit 1 bm --json sync up
[ -f "$T/mirror2/sub" ] && fail "the directory's index page was published as a file"
cmp -s "$T/st/a.txt" "$T/mirror2/a.txt" || fail "a.txt not mirrored"
grep -q "sub: fetch: a directory upstream" "$LAST_ERR" || fail "no reason given for sub"
echo PASS
