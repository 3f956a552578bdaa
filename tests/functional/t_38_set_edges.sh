#!/bin/bash
# publish = set edge cases:
# - a failed first run leaves DEST absent; verify (and verify --repair)
#   never make DEST, check the unpublished snapshot the manifest describes
#   (and say so), and the next runs continue it, publishing only a
#   complete tree;
# - verify after a failed run on a published mirror reports no false
#   differences (it checks the unpublished snapshot);
# - set -> file: the file run is refused (exit 2, naming the owner and the
#   remedy), the published snapshot unchanged; the next set run continues
#   the unpublished snapshot; the way back to publish = file that
#   biomirror.conf(5) gives works, and so does set again;
# - a file at DEST, a tmpfs at DEST and a tmpfs at DEST.biomirror are
#   refused with their reason, leaving no DEST.biomirror/snapshots;
# - dest = .../sub//y//. works, dest = .../y/.. is refused (FILE:LINE);
# - status says when the published snapshot is missing.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup
MOUNTS=""
trap 'rc=$?; for m in $MOUNTS; do umount "$m" 2>/dev/null; done; (exit $rc); bm_cleanup' EXIT

mkdir -p "$T/up"
printf 'alpha\n' > "$T/up/a"
printf 'bravo\n' > "$T/up/b"
printf 'charlie\n' > "$T/up/c"
chmod 000 "$T/up/c"
start_nginx "$T/up" "autoindex_format json;"
D=$T/mirror
SNAPS=$T/mirror.biomirror/snapshots
# conf MODE [EXTRA...]: mirror "up" with publish = MODE.
conf() {
	local mode=$1
	shift
	{
		printf '[up]\nsource = %s\ndest = %s\npublish = %s\n' \
		    "$NGINX_URL" "$D" "$mode"
		echo "retries = 0"
		echo "delete = yes"
		for k in "$@"; do echo "$k"; done
	} > "$T/bm.conf"
}
snaps() { (cd "$SNAPS" && ls | LC_ALL=C sort -n | tr '\n' ' '); }
absent() { [ ! -e "$1" ] && [ ! -L "$1" ] || fail "$1 exists: $(ls -ld "$1")"; }

echo "# a failed first set run: DEST absent, snapshot unpublished"
conf set
assert_exit 1 bm --json sync up
expect_counts 2 0 0 1
r1=$(jfield run)
absent "$D"
assert_eq "$(snaps)" "$r1 " "snapshots after the failed first run"

echo "# verify checks the unpublished snapshot and makes nothing"
assert_exit 0 bm verify up
grep -qx "biomirror: up: verify: checking unpublished snapshot $r1, which the manifest describes ($D still shows nothing)" "$LAST_ERR" ||
	fail "verify does not say which tree it checks"
grep -qx "up: verify ok: checked 0 files against digests, 2 files have no recorded digest or sidecar (size and mtime only), 0 differ" "$LAST_OUT" ||
	fail "verify summary: $(cat "$LAST_OUT")"
absent "$D"

echo "# verify --repair (its resync fails on c): still no DEST"
printf 'bravo, longer\n' > "$SNAPS/$r1/b"
assert_exit 1 bm verify up --repair
grep -q '^differs b: size differs from what was committed$' "$LAST_OUT" ||
	fail "verify --repair did not find b"
absent "$D"
r2=$(manifest_sql "$T/state" up "select max(id) from runs")
assert_eq "$(snaps)" "$r2 " "the resync continued the snapshot"
cmp -s "$T/up/b" "$SNAPS/$r2/b" || fail "b not repaired in the snapshot"

echo "# the next failed run continues it; nothing published"
assert_exit 1 bm --json sync up
expect_counts 0 0 0 1
r3=$(jfield run)
absent "$D"
assert_eq "$(snaps)" "$r3 " "snapshots after the third failed run"
grep -q 'snapshot not published' "$LAST_ERR" || fail "no 'not published' warning"

echo "# c readable: the complete tree is published"
chmod 644 "$T/up/c"
assert_exit 0 bm --json sync up
expect_counts 1 0 0 0
r4=$(jfield run)
assert_eq "$(readlink "$D")" "mirror.biomirror/snapshots/$r4" "DEST target"
assert_trees_equal "$T/up" "$D/"

echo "# a failed run on a published mirror: verify checks the new snapshot"
printf 'alpha, version 2\n' > "$T/up/a"
printf 'zulu\n' > "$T/up/z"
chmod 000 "$T/up/c"
printf 'charlie 2\n' > "$T/up/c.new" && chmod 000 "$T/up/c.new"
assert_exit 1 bm --json sync up
expect_counts 2 0 0 1
r5=$(jfield run)
assert_eq "$(readlink "$D")" "mirror.biomirror/snapshots/$r4" "DEST after failure"
assert_exit 0 bm verify up
grep -qx "biomirror: up: verify: checking unpublished snapshot $r5, which the manifest describes ($D still shows the published one)" "$LAST_ERR" ||
	fail "verify does not name the unpublished snapshot"
grep -qx "up: verify ok: checked 0 files against digests, 4 files have no recorded digest or sidecar (size and mtime only), 0 differ" "$LAST_OUT" ||
	fail "false differences: $(cat "$LAST_OUT")"

echo "# set -> file: refused, nothing written into the published snapshot"
rm -f "$T/up/z" "$T/up/c.new"
chmod 644 "$T/up/c"
listing() { (cd "$1" && find . -printf '%P %y %i %s %T@\n' | LC_ALL=C sort); }
pub_list=$(listing "$SNAPS/$r4")
conf file
assert_exit 2 bm --json sync up
grep -qF "$D is a publish = set tree (a symlink to a snapshot in $D.biomirror) of mirror up of $T/bm.conf (state directory $T/state, pid " "$LAST_ERR" ||
	fail "the refusal does not name the owner: $(cat "$LAST_ERR")"
grep -qF "not running now): a publish = file or ad-hoc run would write into its published snapshot: refused (set publish = set again; to go back to publish = file see publish in biomirror.conf(5))" "$LAST_ERR" ||
	fail "the refusal gives no remedy: $(cat "$LAST_ERR")"
assert_eq "$(readlink "$D")" "mirror.biomirror/snapshots/$r4" "the refused file run keeps the link"
assert_eq "$(listing "$SNAPS/$r4")" "$pub_list" "published snapshot after the refused run"
conf set
assert_exit 0 bm --json sync up
# The refused run recorded no run: this one continued r5's snapshot.
r6=$(jfield run)
assert_eq "$(readlink "$D")" "mirror.biomirror/snapshots/$r6" "DEST target"
absent "$D/z"
absent "$SNAPS/$r5"
assert_trees_equal "$T/up" "$D/"
assert_exit 0 bm verify up
grep -qx "up: verify ok: checked 0 files against digests, 3 files have no recorded digest or sidecar (size and mtime only), 0 differ" "$LAST_OUT" ||
	fail "verify after the set run: $(cat "$LAST_OUT")"

echo "# back to publish = file as biomirror.conf(5) says, then set again"
id=$(readlink "$D")
id=${id##*/}
rm "$D" && mv "$SNAPS/$id" "$D" && rm -r "$T/mirror.biomirror" ||
	fail "the switch back"
conf file
assert_exit 0 bm --json sync up
expect_counts 0 0 0 0
[ -d "$D" ] && [ ! -L "$D" ] || fail "DEST is not a directory"
assert_trees_equal "$T/up" "$D/"
grep -qx "mirror up" "$T/.mirror.biomirror-owner" ||
	fail "no owner record beside the plain tree"
conf set
assert_exit 0 bm --json sync up
assert_eq "$(readlink "$D")" "mirror.biomirror/snapshots/0" "DEST converted again"
assert_trees_equal "$T/up" "$D/"

echo "# status: a published snapshot that is gone is reported missing"
pub=$(readlink "$D")
assert_exit 0 bm status up
grep -qx "up: published snapshot $pub" "$LAST_OUT" || fail "status: $(cat "$LAST_OUT")"
mv "$T/$pub" "$T/moved"
assert_exit 0 bm status up
grep -qx "up: published snapshot $pub is missing ($D points at nothing)" "$LAST_OUT" ||
	fail "status on a dangling DEST: $(cat "$LAST_OUT")"
assert_exit 0 bm --json status up
python3 -c 'import json,sys; o=json.load(open(sys.argv[1]))[0]; sys.exit(0 if o["published_missing"] is True else 1)' \
	"$T/last.out" || fail "status --json lacks published_missing"
mv "$T/moved" "$T/$pub"

echo "# refused destinations leave no snapshot directory"
# refuse NAME DEST_DIR PATTERN: sync of a set mirror at DEST_DIR/db fails
# with exit 2 and PATTERN, and db.biomirror holds no snapshots.
refuse() {
	printf '[%s]\nsource = %s\ndest = %s/db\npublish = set\n' \
	    "$1" "$NGINX_URL" "$2" > "$T/bm.conf"
	assert_exit 2 bm sync "$1"
	grep -qF "$3" "$LAST_ERR" || fail "$1: message lacks: $3"
	absent "$2/db.biomirror/snapshots"
}
mkdir -p "$T/f1"
printf 'x\n' > "$T/f1/db"
refuse f1 "$T/f1" "$T/f1/db: not a directory nor a symlink made by publish = set"
absent "$T/f1/db.biomirror"
mkdir -p "$T/f2/db"
mount -t tmpfs -o size=1m bmtest "$T/f2/db" || fail "mount tmpfs (tests run as root)"
MOUNTS="$MOUNTS $T/f2/db"
refuse f2 "$T/f2" "$T/f2/db: is a mount point: publish = set needs it to be a directory on the file system of its parent"
absent "$T/f2/db.biomirror"
mkdir -p "$T/f3/db.biomirror" "$T/f3/db"
mount -t tmpfs -o size=1m bmtest "$T/f3/db.biomirror" || fail "mount tmpfs"
MOUNTS="$MOUNTS $T/f3/db.biomirror"
refuse f3 "$T/f3" "$T/f3/db.biomirror: is a mount point: publish = set needs it on the file system of the destination's parent"
assert_eq "$(ls -A "$T/f3/db.biomirror")" "" "tmpfs DEST.biomirror left empty"
[ -d "$T/f3/db" ] && [ ! -L "$T/f3/db" ] || fail "f3: DEST converted"
for m in $MOUNTS; do umount "$m" || fail "umount $m"; done
MOUNTS=""

echo "# dest spelled with '//' and a trailing '.'; '..' refused"
printf '[dots]\nsource = %s\ndest = %s/x/sub//y//.\npublish = set\n' \
    "$NGINX_URL" "$T" > "$T/bm.conf"
assert_exit 0 bm check-config
assert_exit 0 bm --json sync dots
assert_eq "$(readlink "$T/x/sub/y")" "y.biomirror/snapshots/$(jfield run)" "dots DEST target"
assert_trees_equal "$T/up" "$T/x/sub/y/"
printf '[dd]\nsource = %s\npublish = set\ndest = %s/x/y/..\n' \
    "$NGINX_URL" "$T" > "$T/bm.conf"
assert_exit 2 bm check-config
grep -qF "$T/bm.conf:4: dest = $T/x/y/..: '..' components are not allowed" "$LAST_ERR" ||
	fail "'..' not refused with FILE:LINE"
echo "PASS"
