#!/bin/bash
# What a refused run would do (issue 18 items 4 and 5), against nginx:
#  - 3 files gone with max_delete = 10% of 10: plan -v and plan --json list
#    every action with its bytes (the 3 deletes, the new file's fetch) and
#    the guard "would delete 3 files, max_delete allows 1", exit 4; sync is
#    refused with the same words and changes nothing;
#  - not enough free space (a 1 MiB tmpfs as dest): the plan shows the
#    fetches and their bytes and how many bytes are missing, exit 4;
#    also when dest is not there yet (plan and sync check its nearest
#    existing parent; with publish = set where the snapshots go, a tmpfs
#    on DEST.biomirror/snapshots here; break-it brk1 #8);
#  - an upstream left with only an empty directory is an empty listing
#    (exit 4 even with --max-delete 100%; break-it brk1 #7);
#  - an emptied upstream is refused (exit 4) naming --allow-empty; with
#    --allow-empty and delete = no the empty listing is recorded (exit 0,
#    nothing deleted); with --delete max_delete still applies (exit 4);
#    --allow-empty --delete --max-delete 100% deletes everything (exit 0).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup

mkdir -p "$T/www/up/d" "$T/www/big" "$T/mnt"
for i in $(seq 1 10); do
	head -c $((i * 1000)) /dev/urandom > "$T/www/up/d/f$i.bin"
done
head -c 1572864 /dev/urandom > "$T/www/big/a.bin"
head -c 1572864 /dev/urandom > "$T/www/big/b.bin"
touch -d '2024-01-02 03:04:05 UTC' "$T/www/up/d"/* "$T/www/big"/*
chmod -R a+rX "$T/www"
start_nginx "$T/www"
mount -t tmpfs -o size=1m,mode=0755 bmtest "$T/mnt" ||
    fail "mount tmpfs (tests run as root)"
mkdir "$T/mnt/mirror"
cat > "$T/bm.conf" <<CONF
[up]
source = ${NGINX_URL}up/
dest = $T/mirror
delete = yes

[big]
source = ${NGINX_URL}big/
dest = $T/mnt/mirror

[new]
source = ${NGINX_URL}big/
dest = $T/mnt/new/db

[newset]
source = ${NGINX_URL}big/
dest = $T/mnt/set/db
publish = set

[setmnt]
source = ${NGINX_URL}big/
dest = $T/sm/db
publish = set
CONF
assert_exit 0 bm sync up

echo "# 3 files gone, max_delete = 10% of 10: the plan lists them all, exit 4"
rm "$T/www/up/d/f1.bin" "$T/www/up/d/f2.bin" "$T/www/up/d/f3.bin"
printf 'new\n' > "$T/www/up/n.txt"
touch -d '2024-01-02 03:04:05 UTC' "$T/www/up/n.txt"
chmod a+r "$T/www/up/n.txt"
before=$(tree_sum "$T/mirror")
guard="max_delete: would delete 3 files, max_delete allows 1 (10% of 10 files): refusing (--max-delete raises it for one run)"
assert_exit 4 bm -v plan up
assert_eq "$(cat "$LAST_OUT")" "fetch  n.txt (new, 4 bytes)
delete d/f3.bin (gone upstream, 3000 bytes)
delete d/f2.bin (gone upstream, 2000 bytes)
delete d/f1.bin (gone upstream, 1000 bytes)
$guard
up: plan refused: listed 9, would fetch 1 (4 B), touch 0, delete 3" "plan -v output"
grep -qxF "biomirror: up: $guard" "$LAST_ERR" || fail "plan: the guard is not logged"

assert_exit 4 bm --json plan up
json_ok "$LAST_OUT"
python3 - "$LAST_OUT" "$guard" <<'PY' || fail "plan --json"
import json, sys
r = json.load(open(sys.argv[1]))[0]
assert r["status"] == "refused" and r["dry_run"] is True, r
assert (r["fetched"], r["deleted"], r["bytes"]) == (1, 3, 4), r
acts = [(a["path"], a["op"], a["bytes"], a["reason"]) for a in r["actions"]]
assert acts == [("n.txt", "fetch", 4, "new"),
                ("d/f3.bin", "delete", 3000, "gone upstream"),
                ("d/f2.bin", "delete", 2000, "gone upstream"),
                ("d/f1.bin", "delete", 1000, "gone upstream")], acts
assert r["errors"] == [{"path": "", "op": "guard", "reason": sys.argv[2]}], r["errors"]
PY

assert_exit 4 bm --json sync up
assert_eq "$(jfield status)" refused "sync status"
grep -qxF "biomirror: up: $guard" "$LAST_ERR" || fail "sync: the guard is not named"
assert_eq "$(tree_sum "$T/mirror")" "$before" "mirror after the refused sync"

echo "# 3 MiB to fetch into a 1 MiB tmpfs: the fetches and what is missing"
free=$(($(stat -f -c '%a' "$T/mnt/mirror") * $(stat -f -c '%S' "$T/mnt/mirror")))
[ "$free" -gt 0 ] && [ "$free" -lt 3145728 ] || fail "tmpfs free: $free"
assert_exit 4 bm plan big
assert_eq "$(sed -n 1,2p "$LAST_OUT")" "fetch  a.bin (new, 1572864 bytes)
fetch  b.bin (new, 1572864 bytes)" "the fetches and their bytes"
line=$(sed -n 3p "$LAST_OUT")
case $line in
"free space: would fetch 2 files, 3.0 MiB (3145728 bytes); "*" ($free bytes) free on $T/mnt/mirror: "*" ($((3145728 - free)) bytes) missing: refusing (free at least that much on its file system, or fetch less with include/exclude, and run again)") ;;
*) fail "free space guard line: $line" ;;
esac
assert_eq "$(sed -n 4p "$LAST_OUT")" \
    "big: plan refused: listed 2, would fetch 2 (3.0 MiB), touch 0, delete 0" \
    "free space: summary"
assert_exit 4 bm --json plan big
python3 - "$LAST_OUT" <<'PY' || fail "free space: plan --json"
import json, sys
r = json.load(open(sys.argv[1]))[0]
acts = [(a["path"], a["op"], a["bytes"]) for a in r["actions"]]
assert acts == [("a.bin", "fetch", 1572864), ("b.bin", "fetch", 1572864)], acts
assert r["errors"][0]["op"] == "guard" and "missing" in r["errors"][0]["reason"], r
PY
assert_exit 4 bm sync big
assert_eq "$(ls -A "$T/mnt/mirror")" "" "files fetched into the small disk"

echo "# a dest not there yet: the free space of its nearest existing parent,"
echo "# for plan (which creates nothing) and sync alike"
free=$(($(stat -f -c '%a' "$T/mnt") * $(stat -f -c '%S' "$T/mnt")))
assert_exit 4 bm plan new
line=$(sed -n 3p "$LAST_OUT")
case $line in
"free space: would fetch 2 files, 3.0 MiB (3145728 bytes); "*" ($free bytes) free on $T/mnt/new/db: "*" ($((3145728 - free)) bytes) missing: refusing (free at least that much on its file system, or fetch less with include/exclude, and run again)") ;;
*) fail "missing dest: free space guard line: $line" ;;
esac
[ -e "$T/mnt/new" ] && fail "plan of a missing dest made $T/mnt/new"
assert_exit 4 bm sync new
grep -qF "biomirror: new: free space: would fetch 2 files, 3.0 MiB (3145728 bytes); " \
    "$LAST_ERR" || fail "sync of a missing dest: not refused for free space"
assert_eq "$(find "$T/mnt/new" -name "*.bin" | wc -l)" 0 "files fetched into the small disk (new)"
assert_exit 4 bm plan newset
grep -qF "free space: would fetch 2 files, 3.0 MiB (3145728 bytes); " "$LAST_OUT" ||
    fail "publish = set, missing dest: plan not refused for free space"
[ -e "$T/mnt/set" ] && fail "plan of a missing set dest made $T/mnt/set"

echo "# publish = set: the space where the snapshots go (a 1 MiB tmpfs on"
echo "# DEST.biomirror/snapshots), not that of DEST's parent"
mkdir -p "$T/sm/db.biomirror/snapshots"
mount -t tmpfs -o size=1m,mode=0755 bmtest "$T/sm/db.biomirror/snapshots" ||
    fail "mount tmpfs on db.biomirror/snapshots"
free=$(($(stat -f -c '%a' "$T/sm/db.biomirror/snapshots") *
    $(stat -f -c '%S' "$T/sm/db.biomirror/snapshots")))
assert_exit 4 bm plan setmnt
line=$(sed -n 3p "$LAST_OUT")
case $line in
"free space: would fetch 2 files, 3.0 MiB (3145728 bytes); "*" ($free bytes) free on $T/sm/db: "*" ($((3145728 - free)) bytes) missing: refusing (free at least that much on its file system, or fetch less with include/exclude, and run again)") ;;
*) fail "set on a small DEST.biomirror: free space guard line: $line" ;;
esac
assert_exit 4 bm sync setmnt
[ -e "$T/sm/db" ] && fail "set on a small DEST.biomirror: a snapshot was published"
assert_eq "$(find "$T/sm/db.biomirror" -type f -name '*.bin' | wc -l)" 0 \
    "files fetched into the small snapshots directory"

echo "# upstream left with an empty directory only: an empty listing too,"
echo "# refused also with --max-delete 100% (only --allow-empty passes it)"
rm -f "$T/www/up/d"/* "$T/www/up/n.txt"
empty_dirs="upstream listing is empty (no files, 1 directories or links) but the manifest holds 10 files: refusing (if upstream really was emptied, run with --allow-empty)"
assert_exit 4 bm sync --max-delete 100% up
grep -qxF "biomirror: up: $empty_dirs" "$LAST_ERR" ||
    fail "directories only: not refused as an empty listing"
assert_eq "$(tree_sum "$T/mirror")" "$before" "mirror after the directories-only refusal"
assert_exit 4 bm plan --max-delete 100% up
grep -qxF "$empty_dirs" "$LAST_OUT" || fail "plan: directories only not refused"

echo "# an emptied upstream: refused, the message names --allow-empty"
rm -rf "$T/www/up/d"
assert_exit 4 bm --json sync up
grep -qxF "biomirror: up: upstream listing is empty but the manifest holds 10 files: refusing (if upstream really was emptied, run with --allow-empty)" \
    "$LAST_ERR" || fail "the empty-listing refusal does not name --allow-empty"
assert_eq "$(tree_sum "$T/mirror")" "$before" "mirror after the empty refusal"

echo "# --allow-empty, delete = no: the empty listing is recorded, exit 0"
sed 's/^delete = yes$/delete = no/' "$T/bm.conf" > "$T/bm-nodel.conf"
assert_exit 0 "$BM" -c "$T/bm-nodel.conf" --state-dir "$T/state" --json \
    sync --allow-empty up
expect_counts 0 0 0 0
assert_eq "$(jfield status)" ok "--allow-empty without delete: status"
assert_eq "$(tree_sum "$T/mirror")" "$before" "mirror after --allow-empty (delete = no)"

echo "# --allow-empty with delete: max_delete still applies"
assert_exit 4 bm sync --allow-empty up
grep -qF "max_delete: would delete 10 files, max_delete allows 1 (10% of 10 files)" \
    "$LAST_ERR" || fail "--allow-empty: max_delete not applied"
assert_eq "$(tree_sum "$T/mirror")" "$before" "mirror after --allow-empty (max_delete)"

echo "# --allow-empty --delete --max-delete 100%: the mirror is emptied"
assert_exit 0 bm --json sync --allow-empty --delete --max-delete 100% up
expect_counts 0 0 10 0
assert_eq "$(find "$T/mirror" -type f | wc -l)" 0 "files left in the mirror"
assert_eq "$(manifest_sql "$T/state" up "select count(*) from files where type = 102")" \
    0 "files in the manifest"
echo PASS
