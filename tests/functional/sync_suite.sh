# The core sync scenario against one server (sourced by t_10 and t_11 with
# SERVER=nginx or SERVER=apache): cold mirror byte-identical with upstream
# mtimes; a second run fetches nothing; 3 modified + 2 added + 2 removed are
# exactly what is fetched and deleted; --dry-run changes nothing; an empty
# upstream is refused with exit 4 and nothing deleted.

make_tree "$T/up"
mkdir -p "$T/up/big"
make_big_file "$T/up/big/big.bin" "${BIG_MB:-200}"
nfiles=$(find "$T/up" -type f | wc -l)

if [ "$SERVER" = nginx ]; then
	start_nginx "$T/up"
	URL=$NGINX_URL
	LOG=$NGINX_ACCESS_LOG
else
	start_apache "$T/up"
	URL=$APACHE_URL
	LOG=$APACHE_ACCESS_LOG
fi

# file_gets_since N: the file (non-directory) GETs logged after line N.
file_gets_since() {
	tail -n +"$(($1 + 1))" "$LOG" | nginx_gets /dev/stdin | grep -v '/$' |
	    LC_ALL=C sort
}
write_conf "$URL"

echo "# cold sync of $nfiles files from $SERVER"
assert_exit 0 bm --json sync up
expect_counts "$nfiles" 0 0 0
assert_trees_equal "$T/up" "$T/mirror"
no_temps "$T/mirror"
n=$(manifest_sql "$T/state" up "select count(*) from files where type = 102")
assert_eq "$n" "$nfiles" "files in the manifest"

echo "# second run: nothing changed upstream"
mark=$(wc -l < "$LOG")
assert_exit 0 bm --json sync up
assert_eq "$(file_gets_since "$mark")" "" "files downloaded by the second run"
expect_counts 0 0 0 0
assert_eq "$(jfield listed)" "$(find "$T/up" -mindepth 1 | wc -l)" "listed"
assert_trees_equal "$T/up" "$T/mirror"

echo "# upstream changes: 3 modified, 2 added, 2 removed"
printf 'changed one\n' >> "$T/up/README.txt"
touch -d '2024-05-06 07:08:09 UTC' "$T/up/README.txt"
printf 'X' | dd of="$T/up/data/file10.bin" bs=1 seek=3 conv=notrunc status=none
touch -d '2024-05-06 08:00:01 UTC' "$T/up/data/file10.bin"
printf 'now different\n' > "$T/up/with space.txt"
touch -d '2024-05-07 01:02:03 UTC' "$T/up/with space.txt"
printf 'new file\n' > "$T/up/added one.txt"
touch -d '2024-06-01 00:00:01 UTC' "$T/up/added one.txt"
mkdir -p "$T/up/newdir"
printf 'new nested\n' > "$T/up/newdir/added-two.txt"
touch -d '2024-06-01 00:00:02 UTC' "$T/up/newdir/added-two.txt"
rm -f "$T/up/zero.dat" "$T/up/data/file11.bin"
mark=$(wc -l < "$LOG")
assert_exit 0 bm --json sync up
expect_counts 5 0 2 0
assert_eq "$(file_gets_since "$mark" | tr '\n' ' ')" \
    "/README.txt /added%20one.txt /data/file10.bin /newdir/added-two.txt /with%20space.txt " \
    "exactly the changed files are downloaded"
assert_trees_equal "$T/up" "$T/mirror"
[ -e "$T/mirror/zero.dat" ] && fail "removed file still in the mirror"

echo "# local drift: a changed mtime is set back, a removed file refetched"
touch -d '2000-01-01' "$T/mirror/README.txt"
rm -f "$T/mirror/data/file12.bin"
assert_exit 0 bm --json sync up
expect_counts 1 1 0 0
assert_trees_equal "$T/up" "$T/mirror"

echo "# --dry-run changes nothing"
printf 'dry\n' > "$T/up/dry.txt"
rm -f "$T/up/data/file13.bin"
before=$(tree_sum "$T/mirror")
assert_exit 0 bm --json sync --dry-run up
assert_eq "$(jfield fetched)" 1 "dry run plans one fetch"
assert_eq "$(jfield deleted)" 1 "dry run plans one delete"
assert_exit 0 bm plan up
grep -q '^fetch  *dry.txt (new' "$T/last.out" || fail "plan does not show dry.txt"
grep -q '^delete  *data/file13.bin' "$T/last.out" || fail "plan does not show the delete"
assert_eq "$(tree_sum "$T/mirror")" "$before" "mirror after --dry-run"
[ -e "$T/mirror/dry.txt" ] && fail "dry run fetched"
assert_exit 0 bm sync up
assert_trees_equal "$T/up" "$T/mirror"

echo "# a dry run counts deleted files as the sync does (not directories)"
mkdir -p "$T/up/gonedir"
printf 'g\n' > "$T/up/gonedir/g.txt"
chmod -R a+rX "$T/up/gonedir"
assert_exit 0 bm sync up
rm -rf "$T/up/gonedir"
assert_exit 0 bm --json sync --dry-run up
assert_eq "$(jfield deleted)" 1 "dry run: deleted files"
assert_exit 0 bm --json sync up
assert_eq "$(jfield deleted)" 1 "sync: deleted files"
[ -e "$T/mirror/gonedir" ] && fail "gonedir not deleted"

echo "# an empty upstream is refused and nothing is deleted"
mkdir "$T/hold"
mv "$T/up"/* "$T/up"/.[!.]* "$T/hold"/ 2>/dev/null || mv "$T/up"/* "$T/hold"/
before=$(tree_sum "$T/mirror")
assert_exit 4 bm --json sync up
assert_eq "$(jfield status)" refused "status"
grep -q 'listing is empty' "$T/last.err" || fail "no reason given for the refusal"
assert_eq "$(tree_sum "$T/mirror")" "$before" "mirror after a refused run"

echo "# max_delete: a listing that shrank past it is refused"
mv "$T/hold"/* "$T/up"/
rm -rf "$T/up/data"
assert_exit 4 bm --json sync up
grep -q 'max_delete' "$T/last.err" || fail "no max_delete reason"
assert_eq "$(tree_sum "$T/mirror")" "$before" "mirror after max_delete refusal"
