#!/bin/bash
# A file listed but 404 on GET ("vanished between listing and download")
# is reported (exit 1, errors {path, op: vanished}) and, when the mirror
# already holds it, not deleted even with delete = yes; a later complete
# listing without it deletes it.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup

# index FILE...: a hand-written plain index page (no sizes, no dates)
# listing FILE... in $T/up.
index() {
	local f
	{
		echo '<html><body><h1>Index of /</h1><ul>'
		for f in "$@"; do
			echo "<li><a href=\"$f\">$f</a></li>"
		done
		echo '</ul></body></html>'
	} > "$T/up/index.html"
}

mkdir -p "$T/up"
files="a.txt b.txt c.txt d.txt gone.txt"
for f in $files; do
	printf 'content of %s\n' "$f" > "$T/up/$f"
	touch -d "2020-01-0${#f} 00:00:00 UTC" "$T/up/$f"
done
touch -d '2020-02-03 04:05:06 UTC' "$T/up/gone.txt"
# shellcheck disable=SC2086
index $files
start_nginx_static "$T/up"
write_conf "$NGINX_URL"
LOG=$NGINX_ACCESS_LOG

echo "# first run: everything is there"
assert_exit 0 bm --json sync up
expect_counts 5 0 0 0
cp -p "$T/up/gone.txt" "$T/gone.orig"

echo "# gone.txt removed upstream but still listed; never.txt listed, never there"
rm "$T/up/gone.txt"
# shellcheck disable=SC2086
index $files never.txt
for round in 1 2; do
	mark=$(wc -l < "$LOG")
	assert_exit 1 bm --json sync --delete up
	assert_eq "$(jfield status)" partial "status (round $round)"
	expect_counts 0 0 0 2
	assert_eq "$(jerrors | tr '\n' ,)" "gone.txt vanished,never.txt vanished," \
	    "errors (round $round)"
	grep -q 'gone.txt.*gone upstream; not deleted' "$LAST_ERR" ||
	    fail "the vanished file is not reported on stderr"
	log_requests "$mark" "$LOG" | grep -qx 'GET 404 /gone.txt' ||
	    fail "gone.txt was not requested (404)"
	[ -f "$T/mirror/gone.txt" ] || fail "gone.txt deleted after a 404 (round $round)"
	cmp -s "$T/gone.orig" "$T/mirror/gone.txt" || fail "gone.txt changed"
	assert_eq "$(stat -c %Y "$T/mirror/gone.txt")" "$(stat -c %Y "$T/gone.orig")" \
	    "gone.txt mtime"
	[ -e "$T/mirror/never.txt" ] && fail "never.txt written"
	no_temps "$T/mirror"
	assert_eq "$(manifest_sql "$T/state" up \
	    "select count(*) from files where cast(path as text) = 'gone.txt'")" 1 \
	    "gone.txt in the manifest"
	assert_eq "$(manifest_sql "$T/state" up \
	    "select count(*) from files where cast(path as text) = 'never.txt'")" 0 \
	    "never.txt in the manifest"
	run=$(jfield run)
	assert_eq "$(manifest_sql "$T/state" up "select cast(path as text) || ' ' || op \
	    from events where run = $run and op in ('vanished', 'deleted') order by path")" \
	    "gone.txt vanished
never.txt vanished" "events of the run"
	assert_eq "$(manifest_sql "$T/state" up "select status from runs where id = $run")" \
	    partial "run record"
done
for f in a.txt b.txt c.txt d.txt; do
	cmp -s "$T/up/$f" "$T/mirror/$f" || fail "$f differs"
done

echo "# a later listing without gone.txt: now it is deleted"
index a.txt b.txt c.txt d.txt
mark=$(wc -l < "$LOG")
assert_exit 0 bm --json sync up
assert_eq "$(jfield status)" ok "status"
expect_counts 0 0 1 0
assert_eq "$(jerrors)" "" "errors"
[ -e "$T/mirror/gone.txt" ] && fail "gone.txt not deleted after a complete listing"
assert_eq "$(log_requests "$mark" "$LOG" | grep -c gone.txt)" 0 "requests for gone.txt"
assert_eq "$(manifest_sql "$T/state" up \
    "select count(*) from files where cast(path as text) = 'gone.txt'")" 0 \
    "gone.txt in the manifest"
rm "$T/up/index.html"
assert_trees_equal "$T/up" "$T/mirror"
echo PASS
