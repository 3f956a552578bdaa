#!/bin/bash
# resync and verify of an ad-hoc mirror (--source URL --dest DIR, no
# config file), against real nginx:
#  - a tree copied by another tool (cp -a: same sizes and mtimes) is
#    adopted by "resync --source --dest --adopt": nothing fetched, every
#    file recorded in the ad-hoc manifest that sync --source --dest uses
#    (its next run fetches nothing);
#  - "verify --source --dest" checks it against the published MD5
#    sidecar: exit 0; a same-size edit of the data file: exit 1, "differs";
#    "verify --repair" fetches it again: identical, exit 0;
#  - verify of a mirror never synced: exit 2, "never synced";
#  - usage errors: --source without --dest, a name and --source together,
#    no name: exit 2 with the usage line; an ad-hoc --dest that is a
#    configured mirror's dest: exit 2.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup

mkdir -p "$T/up/sub"
make_big_file "$T/up/sub/data.bin" 1 adhoc
(cd "$T/up/sub" && md5sum data.bin > data.bin.md5)
printf 'notes\n' > "$T/up/notes.txt"
touch -d '2023-04-05 06:07:08 UTC' "$T/up/sub/data.bin" "$T/up/sub/data.bin.md5" \
    "$T/up/notes.txt" "$T/up/sub"
start_nginx "$T/up"
cp -a "$T/up" "$T/copy"
S=(--state-dir "$T/state")
ADHOC=(--source "$NGINX_URL" --dest "$T/copy")

echo "# resync --adopt of a tree another tool made"
assert_exit 0 "$BM" "${S[@]}" --json resync "${ADHOC[@]}" --adopt
python3 - "$LAST_OUT" <<'PY' || fail "resync --adopt: --json"
import json, sys
r = json.load(open(sys.argv[1]))[0]
assert r["mirror"].startswith("adhoc-") and r["fetched"] == 0, r
PY
db=$(ls "$T/state/manifests/"adhoc-*.db)
assert_eq "$(sqlite3 -readonly "$db" "select count(*) from files where type = 102")" 3 \
    "files adopted"
assert_exit 0 "$BM" "${S[@]}" --json sync "${ADHOC[@]}"
expect_counts 0 0 0 0
assert_trees_equal "$T/up" "$T/copy"

echo "# verify against the sidecar; a same-size edit differs; --repair"
assert_exit 0 "$BM" "${S[@]}" verify "${ADHOC[@]}"
printf 'X' | dd of="$T/copy/sub/data.bin" bs=1 seek=1000 conv=notrunc status=none
touch -d '2023-04-05 06:07:08 UTC' "$T/copy/sub/data.bin"
assert_exit 1 "$BM" "${S[@]}" verify "${ADHOC[@]}"
grep -q '^differs sub/data.bin' "$LAST_OUT" || fail "verify: the edited file is not reported"
assert_exit 0 "$BM" "${S[@]}" verify --repair "${ADHOC[@]}"
assert_trees_equal "$T/up" "$T/copy"
assert_exit 0 "$BM" "${S[@]}" verify "${ADHOC[@]}"

echo "# verify of a mirror never synced: exit 2, saying so"
assert_exit 2 "$BM" --state-dir "$T/state-new" verify --source "$NGINX_URL" --dest "$T/fresh"
grep -q ': never synced: no manifest .*/state-new/manifests/adhoc-.*\.db (run sync first)$' \
    "$LAST_ERR" || fail "verify of a mirror never synced: message"

echo "# usage errors"
for args in "verify --source $NGINX_URL" "verify name --source $NGINX_URL --dest $T/copy" \
    "verify" "resync --dest $T/copy --source $NGINX_URL name" "resync"; do
	# shellcheck disable=SC2086
	assert_exit 2 "$BM" "${S[@]}" $args
	grep -qE 'usage: biomirror (verify|resync) NAME\|--source URL --dest DIR|--source and --dest go together' \
	    "$LAST_ERR" || fail "no usage line for: $args"
done
# An unknown option or a missing argument: exit 2 at once (before, verify
# spun in getopt for good).
for args in "verify name --bogus" "verify --bogus name" "verify --source"; do
	# shellcheck disable=SC2086
	assert_exit 2 timeout 20 "$BM" "${S[@]}" $args
	grep -q 'usage: biomirror verify NAME|--source URL --dest DIR' "$LAST_ERR" ||
	    fail "no usage line for: $args"
done
write_conf "$NGINX_URL"
sed -i "s|^dest = .*|dest = $T/copy|" "$T/bm.conf"
assert_exit 2 "$BM" -c "$T/bm.conf" "${S[@]}" verify "${ADHOC[@]}"
grep -q "verify: --dest $T/copy is the same directory as dest $T/copy of \[up\]" \
    "$LAST_ERR" || fail "verify: no overlap message"
echo PASS
