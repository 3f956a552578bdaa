#!/bin/bash
# Ad-hoc runs and a user's odd spellings, against real nginx:
# (a) sync --source --dest where DEST is the dest of a configured mirror,
#     inside it, around it or inside its DEST.biomirror (also through
#     symlinks), or has a '..' component, is a usage error (exit 2) that names the mirror; nothing
#     is fetched and no ad-hoc manifest is made (the two runs would hold
#     different locks over one tree, and one's temp clean-up would remove
#     the other's resumable files);
# (b) "/x/", "/x//." and a relative "x" name one ad-hoc mirror: one
#     manifest, one lock, and the second spelling fetches nothing;
# (c) a source URL with user:password@ is refused without the password in
#     the message, and one with a '..' segment is refused (before: exit 3,
#     "redirected outside the source");
# (d) verify of a mirror whose lock is held exits 75 and prints no
#     "differs" line for the lock (before: "differs : another run holds
#     the lock");
# (e) a --state-dir inside the dest, or inside DEST.biomirror (kept for
#     publish = set, as the config file keeps it), is exit 2;
# (f) status without a config file shows every manifest in the state
#     directory, and exits 2 (saying so) when there is none.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup

make_tree "$T/up" > /dev/null
start_nginx "$T/up"
write_conf "$NGINX_URL"

echo "# the configured mirror"
assert_exit 0 bm sync up
listed_files=$(manifest_sql "$T/state" up "SELECT count(*) FROM files")

echo "# (a) ad-hoc dests that overlap [up]"
adhoc() {
	assert_exit "$1" bm sync --source "$NGINX_URL" --dest "$2"
}
for d in "$T/mirror" "$T/mirror/" "$T//mirror/." "$T/mirror/sub" "$T" \
    "$T/mirror.biomirror/x"; do
	adhoc 2 "$d"
	grep -q "of \[up\]: mirrors must not share or nest destinations" \
	    "$T/last.err" || fail "no overlap message for $d"
done
(cd "$T" && adhoc 2 mirror)
grep -q "^biomirror: sync: --dest mirror is the same directory as dest $T/mirror of \[up\]" \
    "$T/last.err" || fail "relative dest: wrong message"
adhoc 2 "$T/other/../mirror"
grep -q "'..' components are not allowed" "$T/last.err" ||
    fail "no '..' message"
# The same tree through symlinks: an alias of the dest, a path inside it
# through an alias, and a new directory under an alias of its parent
# (a sibling of the dest: allowed, planned only).
ln -s "$T/mirror" "$T/alias"
ln -s "$T" "$T/top"
adhoc 2 "$T/alias"
grep -qxF "biomirror: sync: --dest $T/alias is the same directory as dest $T/mirror of [up] through symlinks ($T/mirror and $T/mirror): mirrors must not share or nest destinations" \
    "$T/last.err" || fail "alias of the dest: wrong message"
adhoc 2 "$T/alias/sub/new"
grep -q "is inside dest $T/mirror of \[up\] through symlinks" "$T/last.err" ||
    fail "a path inside the dest through an alias: wrong message"
adhoc 2 "$T/top/mirror"
assert_exit 0 "$BM" -c "$T/bm.conf" --state-dir "$T/state-sibling" plan \
    --source "$NGINX_URL" --dest "$T/top/sibling"
rm "$T/alias" "$T/top"
left=$(ls "$T/state/manifests" | grep -c '^adhoc-')
assert_eq "$left" 0 "ad-hoc manifests after refused runs"
assert_eq "$(manifest_sql "$T/state" up "SELECT count(*) FROM files")" \
    "$listed_files" "files of [up]"

echo "# (b) one ad-hoc mirror under three spellings"
assert_exit 0 "$BM" --state-dir "$T/st2" --json sync --source "$NGINX_URL" \
    --dest "$T/adhoc/"
fetched=$(jfield fetched)
[ "$fetched" -gt 0 ] || fail "first ad-hoc run fetched nothing"
assert_exit 0 "$BM" --state-dir "$T/st2" --json sync --source "$NGINX_URL" \
    --dest "$T//adhoc/."
expect_counts 0 0 0 0
(cd "$T" && assert_exit 0 "$BM" --state-dir "$T/st2" --json sync \
    --source "$NGINX_URL" --dest adhoc)
expect_counts 0 0 0 0
assert_eq "$(ls "$T/st2/manifests" | grep -c '\.db$')" 1 "ad-hoc manifests"
assert_trees_equal "$T/up" "$T/adhoc"

echo "# (c) source URLs"
adhoc_src() {
	assert_exit 2 "$BM" --state-dir "$T/st3" sync --source "$1" \
	    --dest "$T/m3"
}
url_pw=$(echo "$NGINX_URL" | sed 's|http://|http://u:s3cret@|')
adhoc_src "$url_pw"
grep -q "takes no user or password" "$T/last.err" ||
    fail "no user/password message"
if grep -q s3cret "$T/last.err" "$T/last.out"; then
	fail "the password is in the message"
fi
adhoc_src "${NGINX_URL}sub/../"
grep -q "'.' and '..' path segments are not allowed" "$T/last.err" ||
    fail "no dot-segment message"
[ ! -e "$T/m3" ] || fail "a refused source made its dest"

echo "# (d) verify while another process holds the lock"
exec 9> "$T/state/locks/up.lock"
flock -x 9 || fail "flock"
assert_exit 75 bm verify up
if grep -q '^differs' "$T/last.out"; then
	fail "a lock reported as a differing file"
fi
grep -q "^up: verify locked:" "$T/last.out" || fail "no verify summary"
grep -q "another run holds the lock" "$T/last.err" ||
    fail "the lock is not named on stderr"
exec 9>&-
assert_exit 0 bm verify up

echo "# (e) a --state-dir inside the dest, or inside DEST.biomirror"
for sd in "$T/mirror/state" "$T/mirror.biomirror/state"; do
	mkdir -p "$sd"
	assert_exit 2 "$BM" -c "$T/bm.conf" --state-dir "$sd" sync up
	grep -qE "the state directory $sd (and the destination $T/mirror overlap|is inside the snapshot directory $T/mirror.biomirror)" \
	    "$T/last.err" || fail "no state directory message for $sd: $(cat "$T/last.err")"
	assert_eq "$(ls -A "$sd")" "" "what the refused run left in $sd"
	rm -rf "$sd"
done
rmdir "$T/mirror.biomirror"

echo "# (e2) a --dest that is a file: exit 2, no manifest made"
printf 'x\n' > "$T/afile"
assert_exit 2 "$BM" --state-dir "$T/st-file" sync --source "$NGINX_URL" --dest "$T/afile"
grep -q "$T/afile: Not a directory" "$T/last.err" || fail "no message for a file dest: $(cat "$T/last.err")"
[ -z "$(ls -A "$T/st-file/manifests" 2>/dev/null)" ] ||
    fail "a manifest made for a refused run: $(ls "$T/st-file/manifests")"
assert_eq "$(cat "$T/afile")" x "the file given as --dest"

echo "# (f) status without a config file: every manifest of the state"
echo "# directory (a configured mirror's too), and exit 2 when there is none"
if [ -e /etc/biomirror/biomirror.conf ]; then
	echo "# not run: /etc/biomirror/biomirror.conf exists on this machine"
else
	assert_exit 0 "$BM" --state-dir "$T/state" status
	grep -q '^up: last run ' "$LAST_OUT" || fail "status: [up]'s manifest not shown"
	assert_exit 2 "$BM" --state-dir "$T/no-such-state" status
	grep -qxF "biomirror: status: no mirrors: no config file was read, and no manifest in $T/no-such-state/manifests" \
	    "$LAST_ERR" || fail "status: no message when there is nothing to show"
fi

stop_servers
[ -z "$(bm_leftovers)" ] || fail "processes left: $(bm_leftovers)"
echo "PASS"
