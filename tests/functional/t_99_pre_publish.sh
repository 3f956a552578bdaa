#!/bin/bash
# pre_publish (publish = set, issue 23): a check command run in the staged
# snapshot before the swap.
# - exit 0 publishes; it runs in the staged snapshot's directory with
#   post_sync's BIOMIRROR_* variables and BIOMIRROR_SNAPSHOT;
# - exit 1 keeps the old snapshot published (the run exits 1, says why,
#   status shows it); the next run continues the staged one and, the
#   check passing, publishes it;
# - a staged file the check replaced (new inode) is linked again to the
#   published copy, one it changed in place (shared with the published
#   one) is removed and fetched again by the next run; each fails the
#   check (exit 1) and is said in the log; files and directories the
#   check made are removed, said in the log;
# - hook_timeout is its limit too (timed out: not published);
# - pre_publish without publish = set is a config error (exit 2).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup

mkdir -p "$T/up/sub"
printf 'a v1\n' > "$T/up/a.txt"
printf 'b v1\n' > "$T/up/b.txt"
printf 'c v1\n' > "$T/up/sub/c.txt"
start_nginx "$T/up"
cat > "$T/check.sh" <<'EOF'
#!/bin/sh
# The check: what $T/mode says.
mode=$(cat "$T_DIR/mode")
{ pwd; env | grep '^BIOMIRROR_' | sort; } > "$T_DIR/hook.env"
case $mode in
ok) exit 0 ;;
fail) echo "check: database incomplete" >&2; exit 1 ;;
replace) rm b.txt && printf 'tampered\n' > b.txt
	mkdir newdir && : > newdir/x && : > newfile ;;
inplace) printf 'tampered\n' >> a.txt ;;
create) : > made.log; mkdir -p sub/new && : > sub/new/y ;;
sleep) exec sleep 30 ;;
esac
exit 0
EOF
chmod +x "$T/check.sh"
cat > "$T/bm.conf" <<CONF
[set]
source = $NGINX_URL
dest = $T/mirror/db
publish = set
hook_timeout = 1
pre_publish = T_DIR=$T $T/check.sh
CONF
bm() { "$BM" -c "$T/bm.conf" --state-dir "$T/state" "$@"; }
D=$T/mirror/db
snap() { readlink "$D"; }
mode() { echo "$1" > "$T/mode"; }

echo "# exit 0 publishes, run in the staged snapshot with the variables"
mode ok
assert_exit 0 bm sync set
assert_eq "$(snap)" db.biomirror/snapshots/1 "first snapshot"
assert_trees_equal "$T/up" "$D/"
assert_eq "$(head -1 "$T/hook.env")" "$T/mirror/db.biomirror/snapshots/1" "the check's directory"
grep -qx "BIOMIRROR_SNAPSHOT=$T/mirror/db.biomirror/snapshots/1" "$T/hook.env" ||
    fail "BIOMIRROR_SNAPSHOT"
grep -qx 'BIOMIRROR_MIRROR=set' "$T/hook.env" || fail "BIOMIRROR_MIRROR"
grep -qx "BIOMIRROR_DEST=$D" "$T/hook.env" || fail "BIOMIRROR_DEST"
grep -qx 'BIOMIRROR_FILES_FETCHED=3' "$T/hook.env" || fail "BIOMIRROR_FILES_FETCHED"
grep -q "set: pre_publish: T_DIR=$T $T/check.sh (in $T/mirror/db.biomirror/snapshots/1)" \
    "$LAST_ERR" || fail "the check not logged"

echo "# exit 1: the old snapshot stays published; the next run publishes"
printf 'a version 2\n' > "$T/up/a.txt"
mode fail
assert_exit 1 bm sync set
assert_eq "$(snap)" db.biomirror/snapshots/1 "failed check: still snapshot 1"
assert_eq "$(cat "$D/a.txt")" "a v1" "failed check: the old a.txt"
grep -q 'check: database incomplete' "$LAST_ERR" || fail "the check's output not logged"
grep -q 'set: pre_publish: exited with status 1: snapshot not published' "$LAST_ERR" ||
    fail "failed check not said"
assert_exit 1 bm status set
grep -q 'pre_publish: exited with status 1' "$LAST_OUT" || fail "status: the reason"
mode ok
assert_exit 0 bm sync set
assert_eq "$(snap)" db.biomirror/snapshots/3 "the staged snapshot published"
assert_trees_equal "$T/up" "$D/"

echo "# a replaced staged file is restored, made files removed: exit 1"
printf 'c version 2\n' > "$T/up/sub/c.txt"
mode replace
assert_exit 1 bm sync set
assert_eq "$(snap)" db.biomirror/snapshots/3 "replace: not published"
w=$T/mirror/db.biomirror/snapshots/4
[ -d "$w" ] || fail "no staged snapshot 4"
assert_eq "$(stat -c %i "$w/b.txt")" "$(stat -c %i "$D/b.txt")" "b.txt linked again"
assert_eq "$(cat "$w/b.txt")" "b v1" "b.txt restored"
[ -e "$w/newfile" ] || [ -e "$w/newdir" ] && fail "made by the check: not removed"
grep -q 'set: pre_publish: b.txt: changed by the check: restored from the published copy' \
    "$LAST_ERR" || fail "restore not said"
grep -q 'set: pre_publish: newdir/x: made by the check: removed' "$LAST_ERR" ||
    fail "newdir/x removal not said"
grep -q 'set: pre_publish: newfile: made by the check: removed' "$LAST_ERR" ||
    fail "newfile removal not said"
grep -q 'the check changed 1 staged file (restored 1 from the published snapshot, removed 0' \
    "$LAST_ERR" || fail "the failure not said"

echo "# a staged file changed in place (its inode is the published one's): fetched again"
mode inplace
assert_exit 1 bm sync set
assert_eq "$(snap)" db.biomirror/snapshots/3 "inplace: not published"
w=$T/mirror/db.biomirror/snapshots/5
[ -e "$w/a.txt" ] && fail "a.txt changed in place: still staged"
grep -q 'set: pre_publish: a.txt: changed by the check (no unchanged published copy): pre_publish changed it: removed from the staged snapshot, fetched again by the next run' \
    "$LAST_ERR" || fail "refetch not said"
mode ok
assert_exit 0 bm --json sync set
assert_eq "$(jfield fetched)" 1 "a.txt fetched again"
assert_eq "$(snap)" db.biomirror/snapshots/6 "published after the refetch"
assert_trees_equal "$T/up" "$D/"

echo "# files the check made are removed; exit 0 still publishes"
printf 'b version 2!\n' > "$T/up/b.txt"
mode create
assert_exit 0 bm sync set
assert_eq "$(snap)" db.biomirror/snapshots/7 "create: published"
assert_trees_equal "$T/up" "$D/"
grep -q 'set: pre_publish: made.log: made by the check: removed' "$LAST_ERR" ||
    fail "made.log removal not said"
grep -q 'removed 3 entries the check made in the staged snapshot' "$LAST_ERR" ||
    fail "count of made entries"

echo "# hook_timeout: a check past it is stopped, nothing published"
printf 'b version 3!!\n' > "$T/up/b.txt"
mode sleep
assert_exit 1 bm sync set
assert_eq "$(snap)" db.biomirror/snapshots/7 "timed out: not published"
grep -q 'set: pre_publish: timed out after 1 s: SIGTERM sent to the hook: snapshot not published' \
    "$LAST_ERR" || fail "timeout not said"

echo "# pre_publish needs publish = set"
sed 's/^publish = set$/publish = file/' "$T/bm.conf" > "$T/file.conf"
assert_exit 2 "$BM" -c "$T/file.conf" check-config
grep -q 'pre_publish needs publish = set' "$LAST_ERR" "$LAST_OUT" ||
    fail "pre_publish with publish = file accepted"
echo PASS
