#!/bin/bash
# publish = set: a BLAST-like set (nr.00..nr.09 + taxdb.btd) is published
# as a whole by renaming a symlink over DEST.
# - the first set run converts an existing real DEST into snapshot 0
#   (same directory inode, nothing copied) and, changing nothing, makes
#   no new snapshot;
# - a reader that resolves DEST once per pass and opens every volume, run
#   for the whole of a sync that changes every volume, never sees two
#   versions in one pass;
# - the old snapshot's files (inodes, bytes, mtimes) are never changed,
#   also by a touch-only (mtime) change, which gets its own copy;
# - a failed run (one volume 403) leaves the previous snapshot published
#   and unchanged; the next run continues its unpublished snapshot
#   (renamed to that run's id);
# - the snapshot replaced last is kept until the next publication;
# - plan (dry run) and a run without changes make no snapshot; a listing
#   failure publishes nothing; a fresh DEST gets its first snapshot.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup

VOL_BYTES=262144
# version TAG: upstream volumes nr.00..nr.09 carry "TAG" in their first
# line, all of the same size (a same-size content change); taxdb stays.
version() {
	python3 - "$T/up" "$1" "$VOL_BYTES" <<'EOF' || fail "version $1"
import os, sys
root, tag, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
os.makedirs(root, exist_ok=True)
for i in range(10):
    head = ("%s nr.%02d\n" % (tag, i)).encode()
    body = head + bytes((i * 7 + k) % 251 for k in range(size - len(head)))
    with open(os.path.join(root, "nr.%02d" % i), "wb") as f:
        f.write(body)
EOF
}

version v1
printf 'taxonomy\n' > "$T/up/taxdb.btd"
touch -d '2021-03-04 05:06:07 UTC' "$T/up/taxdb.btd"
start_nginx "$T/up" "autoindex_format json;"
write_conf "$NGINX_URL"
CONF_FILE=$(cat "$T/bm.conf")
# set_conf [EXTRA_KEY...]: the config with publish = set (and extras).
set_conf() {
	{
		echo "$CONF_FILE" | grep -v '^concurrency'
		echo "publish = set"
		for k in "$@"; do echo "$k"; done
	} > "$T/bm.conf"
}
D=$T/mirror
SNAPS=$T/mirror.biomirror/snapshots

snaps() { (cd "$SNAPS" && ls | LC_ALL=C sort -n | tr '\n' ' '); }
published() { readlink "$D"; }
# inodes DIR: "name inode mtime" of every file in DIR.
inodes() { (cd "$1" && find . -type f -printf '%P %i %T@\n' | LC_ALL=C sort); }

echo "# a plain (publish = file) mirror exists: DEST is a real directory"
assert_exit 0 bm --json sync up
expect_counts 11 0 0 0
[ -d "$D" ] && [ ! -L "$D" ] || fail "DEST is not a real directory"
ino0=$(stat -c %i "$D")
# The plain tree's owner record is beside it, not inside the mirror.
grep -qx "mirror up" "$T/.mirror.biomirror-owner" ||
	fail "no owner record beside the plain tree"
sum0=$(tree_sum "$D")

echo "# plan with publish = set: nothing converted, nothing made"
set_conf
assert_exit 0 bm --json plan up
[ -L "$D" ] && fail "plan converted DEST"
[ -e "$T/mirror.biomirror" ] && fail "plan made mirror.biomirror"

echo "# first set run, nothing changed upstream: DEST becomes snapshot 0"
assert_exit 0 bm --json sync up
expect_counts 0 0 0 0
[ -L "$D" ] || fail "DEST is not a symlink"
assert_eq "$(published)" "mirror.biomirror/snapshots/0" "DEST target"
assert_eq "$(stat -c %i "$SNAPS/0")" "$ino0" "snapshot 0 is the old directory"
assert_eq "$(tree_sum "$D/")" "$sum0" "content after conversion"
assert_eq "$(snaps)" "0 " "no new snapshot without a change"
grep -q 'no change: nothing to publish' "$LAST_ERR" ||
	fail "no 'nothing to publish' message"
# DEST.biomirror holds the snapshots and the owner record, nothing else;
# the record beside the plain tree went with the conversion.
ls -A "$T/mirror.biomirror" | grep -qvxE 'snapshots|owner' &&
	fail "leftovers in mirror.biomirror: $(ls -A "$T/mirror.biomirror")"
grep -qx "mirror up" "$T/mirror.biomirror/owner" ||
	fail "owner record: $(cat "$T/mirror.biomirror/owner")"
[ -e "$T/.mirror.biomirror-owner" ] &&
	fail "the plain tree's owner record is still beside DEST"

echo "# a sync changing every volume, read all along"
version v2
old_inodes=$(inodes "$SNAPS/0")
old_sum=$(tree_sum "$SNAPS/0")
cat > "$T/reader.py" <<'EOF'
import os, sys, time
dest, stop = sys.argv[1], sys.argv[2]
passes = mixed = missing = 0
seen = set()
while True:
    last = os.path.exists(stop)
    d = os.path.realpath(dest)          # resolve DEST once per pass
    tags = set()
    try:
        for i in range(10):
            with open(os.path.join(d, "nr.%02d" % i), "rb") as f:
                tags.add(f.readline().split()[0].decode())
    except FileNotFoundError:
        missing += 1
        continue
    passes += 1
    if passes == 1:
        open(stop + ".ready", "w").close()
    seen |= tags
    if len(tags) != 1:
        mixed += 1
        print("mixed pass in %s: %s" % (d, sorted(tags)), file=sys.stderr)
    if last:
        break
print(passes, mixed, missing, ",".join(sorted(seen)))
EOF
rm -f "$T/stop"
python3 "$T/reader.py" "$D" "$T/stop" > "$T/reader.out" 2> "$T/reader.err" &
reader=$!
# Wait (at most ~10 s) until the reader has made a pass over the old set.
for _ in $(seq 1 200); do
	[ -e "$T/stop.ready" ] && break
	sleep 0.05
done
[ -e "$T/stop.ready" ] || fail "the reader made no pass"
# One file at a time at 400K/s: the sync (~6.5 s) spans more than one batch
# commit (5 s), so a publication that is not atomic shows the reader a mix
# (with publish = file this reader does see mixed passes).
set_conf "bwlimit = 400K" "concurrency = 1"
assert_exit 0 bm --json sync up
touch "$T/stop"
wait "$reader" || fail "reader failed: $(cat "$T/reader.err")"
cat "$T/reader.err" >&2
read -r passes mixed missing seen < "$T/reader.out"
echo "# reader: $passes passes, $mixed mixed, $missing missing, saw $seen"
assert_eq "$mixed" 0 "passes that saw two versions"
assert_eq "$missing" 0 "passes that missed a volume"
assert_eq "$seen" "v1,v2" "versions seen by the reader"
[ "$passes" -gt 20 ] || fail "only $passes reader passes during the sync"
expect_counts 10 0 0 0
run2=$(jfield run)
assert_eq "$(published)" "mirror.biomirror/snapshots/$run2" "DEST target"
assert_eq "$(snaps)" "0 $run2 " "snapshots: previous kept"
assert_eq "$(inodes "$SNAPS/0")" "$old_inodes" "old snapshot inodes and mtimes"
assert_eq "$(tree_sum "$SNAPS/0")" "$old_sum" "old snapshot content"
assert_trees_equal "$T/up" "$D/"
assert_eq "$(stat -c %i "$SNAPS/0/taxdb.btd")" "$(stat -c %i "$D/taxdb.btd")" \
	"unchanged taxdb is a hard link"
no_temps "$T/mirror.biomirror"

echo "# a failed run (nr.05 403): the previous snapshot stays published"
version v3
chmod 000 "$T/up/nr.05"
set_conf "retries = 0"
pub_sum=$(tree_sum "$D/")
pub_inodes=$(inodes "$D/")
assert_exit 1 bm --json sync up
expect_counts 9 0 0 1
run3=$(jfield run)
assert_eq "$(published)" "mirror.biomirror/snapshots/$run2" "DEST after failure"
assert_eq "$(tree_sum "$D/")" "$pub_sum" "published content after failure"
assert_eq "$(inodes "$D/")" "$pub_inodes" "published inodes after failure"
assert_eq "$(snaps)" "0 $run2 $run3 " "snapshots after failure"
grep -q 'snapshot not published' "$LAST_ERR" || fail "no 'not published' warning"
# status names the snapshot still published after the failed run (and
# exits 1: the last finished run is partial).
assert_exit 1 bm --json status up
assert_eq "$(jfield published)" "mirror.biomirror/snapshots/$run2" "status --json published"
assert_exit 1 bm status up
grep -qx "up: published snapshot mirror.biomirror/snapshots/$run2" "$LAST_OUT" ||
    fail "status text lacks the published snapshot: $(cat "$LAST_OUT")"
head -c 2 "$SNAPS/$run3/nr.00" | grep -q v3 || fail "partial snapshot lacks v3"

echo "# the next run continues the unpublished snapshot and publishes it"
chmod 644 "$T/up/nr.05"
assert_exit 0 bm --json sync up
expect_counts 1 0 0 0
# Continued, the snapshot is renamed to the id of the run that continued
# it: only the run right after that one may continue it again.
run3=$(jfield run)
assert_eq "$(published)" "mirror.biomirror/snapshots/$run3" "DEST target"
assert_eq "$(snaps)" "$run2 $run3 " "older snapshot removed, previous kept"
assert_trees_equal "$T/up" "$D/"
assert_eq "$(tree_sum "$SNAPS/$run2")" "$pub_sum" "previous snapshot unchanged"

echo "# no change: no snapshot"
assert_exit 0 bm --json sync up
expect_counts 0 0 0 0
assert_eq "$(snaps)" "$run2 $run3 " "snapshots after a run without change"
assert_eq "$(published)" "mirror.biomirror/snapshots/$run3" "DEST target"

echo "# a touch-only change gets its own copy; the old inode keeps its mtime"
old_ino=$(stat -c %i "$D/taxdb.btd")
old_mt=$(stat -c %Y "$D/taxdb.btd")
new_ns=1600000000000000000
sqlite3 "$(manifest_db "$T/state" up)" \
	"update files set local_mtime = $new_ns where cast(path as text) = 'taxdb.btd'" ||
	fail "sqlite3 update"
prev_inodes=$(inodes "$SNAPS/$run3")
assert_exit 0 bm --json sync up
expect_counts 0 1 0 0
run5=$(jfield run)
assert_eq "$(published)" "mirror.biomirror/snapshots/$run5" "DEST target"
assert_eq "$(snaps)" "$run3 $run5 " "snapshots after the touch"
assert_eq "$(stat -c %Y "$D/taxdb.btd")" 1600000000 "new mtime"
[ "$(stat -c %i "$D/taxdb.btd")" != "$old_ino" ] || fail "touch changed a shared inode"
assert_eq "$(stat -c %Y "$SNAPS/$run3/taxdb.btd")" "$old_mt" "old snapshot's mtime"
assert_eq "$(inodes "$SNAPS/$run3")" "$prev_inodes" "old snapshot inodes and mtimes"
cmp -s "$T/up/taxdb.btd" "$D/taxdb.btd" || fail "taxdb content after the touch"

echo "# a listing failure publishes nothing"
version v4
assert_exit 0 bm --json plan up
assert_eq "$(snaps)" "$run3 $run5 " "plan made no snapshot"
stop_servers
assert_exit 3 bm --json sync up
assert_eq "$(published)" "mirror.biomirror/snapshots/$run5" "DEST after a listing failure"
assert_eq "$(snaps)" "$run3 $run5 " "snapshots after a listing failure"

echo "# a fresh DEST with publish = set"
start_nginx "$T/up" "autoindex_format json;"
cat > "$T/bm.conf" <<CONF
[fresh]
source = $NGINX_URL
dest = $T/fresh/db
publish = set
CONF
assert_exit 0 bm --json sync fresh
expect_counts 11 0 0 0
runf=$(jfield run)
assert_eq "$(readlink "$T/fresh/db")" "db.biomirror/snapshots/$runf" "fresh DEST target"
assert_trees_equal "$T/up" "$T/fresh/db/"

# DEST is a symlink into DEST.biomirror now: a state directory there is
# still refused (it was named after the resolved DEST, a snapshot).
echo "# a --state-dir inside DEST.biomirror once DEST is a symlink"
sd=$T/fresh/db.biomirror/state
mkdir -p "$sd"
assert_exit 2 "$BM" -c "$T/bm.conf" --state-dir "$sd" sync fresh
grep -q "the state directory $sd is inside the snapshot directory $T/fresh/db.biomirror" \
    "$T/last.err" || fail "no state directory message: $(cat "$T/last.err")"
assert_eq "$(ls -A "$sd")" "" "what the refused run left in $sd"
rmdir "$sd"
echo "PASS"
