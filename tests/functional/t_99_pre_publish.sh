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
# - changed in place with its size and mtime put back, or chmod: its ctime
#   says so; the published copy is the same file: removed from the staged
#   snapshot, fetched again by the next run, the log says the published
#   snapshot serves the changed file until then;
# - a staged directory made a file or a symlink: that is removed (never
#   followed), the directory made again, its files linked again;
# - BIOMIRROR_STATE_DIR is absolute; BIOMIRROR_MIRROR is an ad-hoc
#   mirror's --name;
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
sametime) m=$(stat -c %Y sub/c.txt)
	printf Z | dd of=sub/c.txt conv=notrunc status=none
	touch -d "@$m" sub/c.txt; chmod 600 a.txt ;;
dirfile) rm -rf sub && echo x > sub ;;
dirlink) rm -rf sub && ln -s "$T_DIR/outside" sub ;;
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
grep -q 'set: pre_publish: a.txt: changed in place by the check: pre_publish changed it: removed from the staged snapshot, fetched again by the next run; the published snapshot shares the file' \
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

echo "# changed in place, size and mtime put back; chmod: the ctime says so"
printf 'b version 4!!!\n' > "$T/up/b.txt"
mode ok
assert_exit 0 bm sync set
assert_trees_equal "$T/up" "$D/"
pub=$(snap)
amode=$(stat -c %a "$D/a.txt")
printf 'b version 5\n' > "$T/up/b.txt"
mode sametime
assert_exit 1 bm sync set
assert_eq "$(snap)" "$pub" "sametime: not published"
w=$T/mirror/db.biomirror/snapshots/$(ls "$T/mirror/db.biomirror/snapshots" | sort -n | tail -1)
[ -e "$w/sub/c.txt" ] && fail "sub/c.txt changed in place: still staged"
[ -e "$w/a.txt" ] && fail "a.txt chmod: still staged"
grep -q 'set: pre_publish: sub/c.txt: changed in place by the check: pre_publish changed it: removed from the staged snapshot, fetched again by the next run; the published snapshot shares the file and serves the changed one until then' \
    "$LAST_ERR" || fail "in-place change not said"
grep -q 'set: pre_publish: a.txt: changed in place by the check' "$LAST_ERR" ||
    fail "chmod not said"
assert_eq "$(cat "$D/sub/c.txt")" "Z$(tail -c +2 "$T/up/sub/c.txt")" \
    "the published copy: the changed file, as said"
grep -q 'restored 0 from the published snapshot, removed 2' "$LAST_ERR" ||
    fail "the failure not said"
mode ok
assert_exit 0 bm --json sync set
assert_eq "$(jfield fetched)" 2 "a.txt and sub/c.txt fetched again"
assert_trees_equal "$T/up" "$D/"
assert_eq "$(stat -c %a "$D/a.txt")" "$amode" "a.txt's mode"

echo "# a staged directory made a file, then a symlink: made again"
mkdir -p "$T/outside"
printf 'outside\n' > "$T/outside/c.txt"
for m in dirfile dirlink; do
	printf 'b %s\n' "$m" >> "$T/up/b.txt"
	pub=$(snap)
	mode $m
	assert_exit 1 bm sync set
	assert_eq "$(snap)" "$pub" "$m: not published"
	grep -q 'set: pre_publish: sub: made by the check: removed' "$LAST_ERR" ||
	    fail "$m: sub's removal not said"
	grep -q 'set: pre_publish: sub: directory removed or replaced by the check: made again' \
	    "$LAST_ERR" || fail "$m: sub made again not said"
	grep -q 'set: pre_publish: sub/c.txt: changed by the check: restored from the published copy' \
	    "$LAST_ERR" || fail "$m: sub/c.txt restore not said"
	assert_eq "$(cat "$T/outside/c.txt")" "outside" "$m: the symlink's target"
	mode ok
	assert_exit 0 bm sync set
	[ "$(snap)" != "$pub" ] || fail "$m: the next run did not publish"
	assert_trees_equal "$T/up" "$D/"
done

echo "# relative --state-dir, --name: BIOMIRROR_STATE_DIR absolute, BIOMIRROR_MIRROR the name"
cat > "$T/adhoc.conf" <<CONF
[global]
publish = set
pre_publish = T_DIR=$T $T/check.sh
CONF
assert_exit 0 sh -c 'cd "$1" && "$2" -c adhoc.conf --state-dir rel-state sync \
    --source "$3" --dest adhoc/db --name lbl' sh "$T" "$BM" "$NGINX_URL"
assert_trees_equal "$T/up" "$T/adhoc/db/"
grep -qx "BIOMIRROR_STATE_DIR=$T/rel-state" "$T/hook.env" ||
    fail "BIOMIRROR_STATE_DIR not absolute: $(grep STATE_DIR "$T/hook.env")"
grep -qx 'BIOMIRROR_MIRROR=lbl' "$T/hook.env" ||
    fail "BIOMIRROR_MIRROR: $(grep _MIRROR= "$T/hook.env")"
grep -qx "BIOMIRROR_DEST=$T/adhoc/db" "$T/hook.env" || fail "ad-hoc BIOMIRROR_DEST"

echo "# pre_publish needs publish = set"
sed 's/^publish = set$/publish = file/' "$T/bm.conf" > "$T/file.conf"
assert_exit 2 "$BM" -c "$T/file.conf" check-config
grep -q 'pre_publish needs publish = set' "$LAST_ERR" "$LAST_OUT" ||
    fail "pre_publish with publish = file accepted"
echo PASS
