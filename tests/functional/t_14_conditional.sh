#!/bin/bash
# A plain <ul> index (Apache, no sizes, no dates): the cold sync takes the
# mtimes from Last-Modified; the next run asks for every file with a
# conditional GET (never a HEAD) and downloads nothing (all 304); a file
# changed upstream is the only one downloaded again.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup

mkdir -p "$T/up/sub/deeper" "$T/up/dir with space"
n=0
for f in README.txt a.bin b.bin "c d.txt" sub/x.fa sub/y.fa sub/deeper/z.dat \
    "dir with space/one.txt" "dir with space/two+2.txt" empty.dat; do
	n=$((n + 1))
	if [ "$f" = empty.dat ]; then
		: > "$T/up/$f"
	else
		head -c $((n * 1111)) /dev/urandom > "$T/up/$f"
	fi
	touch -d "@$((1600000000 + n * 86400 + n * 17))" "$T/up/$f"
done
nfiles=$(find "$T/up" -type f | wc -l)
assert_eq "$nfiles" 10 "files in the test tree"

# FancyIndexing is set unprefixed by start_apache; an <If> section merges
# after it, so "-FancyIndexing" there gives the plain <ul> list.
start_apache "$T/up" '<If "true">' 'IndexOptions -FancyIndexing' '</If>'
LOG=$APACHE_ACCESS_LOG
page=$(curl -s --noproxy '*' "${APACHE_URL}sub/")
case $page in
*'<ul>'*'<a href="x.fa">'*) ;;
*) echo "$page" >&2; fail "the index is not a plain <ul> list" ;;
esac
case $page in
*'<pre>'* | *'<table'* | *'Last modified'* | *2020-* | *[0-9][0-9]:[0-9][0-9]* | \
    *"$(stat -c %s "$T/up/sub/x.fa")"*)
	echo "$page" >&2
	fail "the plain index still shows sizes or dates"
	;;
esac
write_conf "$APACHE_URL"

# file_requests N: "METHOD STATUS PATH" of the requests for files (not
# directory pages) after log line N, sorted.
file_requests() {
	log_requests "$1" "$LOG" | grep -v ' [^ ]*/$' | LC_ALL=C sort
}

echo "# cold sync: every file fetched, mtimes from Last-Modified"
assert_exit 0 bm --json sync up
expect_counts "$nfiles" 0 0 0
assert_eq "$(jfield status)" ok "status"
assert_trees_equal "$T/up" "$T/mirror"
no_temps "$T/mirror"
n=$(manifest_sql "$T/state" up "select count(*) from files where type = 102 and etag is not null and etag <> ''")
assert_eq "$n" "$nfiles" "files with an ETag in the manifest"
n=$(manifest_sql "$T/state" up "select count(*) from files where type = 102 and list_size >= 0")
assert_eq "$n" 0 "files with a listed size (the listing has none)"

echo "# second run: one conditional GET per file, all 304, no HEAD"
mark=$(wc -l < "$LOG")
before=$(tree_sum "$T/mirror")
sleep 1.1	# a directory touched by this run would get a new mtime
assert_exit 0 bm --json sync up
# Nothing on disk changes, directory mtimes included (no temp file is
# created and removed for an answer that has no body).
assert_eq "$(tree_sum "$T/mirror")" "$before" "mirror after an all-304 run"
expect_counts 0 0 0 0
assert_eq "$(jfield status)" ok "status"
assert_eq "$(jfield bytes)" 0 "bytes"
reqs=$(file_requests "$mark")
echo "$reqs" | sed 's/^/  req: /'
assert_eq "$(echo "$reqs" | grep -c '^GET 304 ')" "$nfiles" "304 answers"
assert_eq "$(echo "$reqs" | grep -vc '^GET 304 ')" 0 "other file requests"
assert_eq "$(log_since "$mark" "$LOG" | grep -c '"HEAD ')" 0 "HEAD requests"
# Every file GET carried If-Modified-Since or If-None-Match (the last
# three fields of the log line are those two and the User-Agent).
bad=$(log_since "$mark" "$LOG" | grep '"GET [^ ]*[^/] HTTP' |
    grep '"-" "-" "[^"]*"$')
[ -z "$bad" ] || fail "unconditional file GETs: $bad"
n=$(log_since "$mark" "$LOG" | grep -c '"GET [^ ]*[^/] HTTP.*" "[A-Z][a-z][a-z], [0-9]* [A-Z][a-z]* 20[0-9]* [0-9:]* GMT" ')
assert_eq "$n" "$nfiles" "GETs with an If-Modified-Since date"
# ... and exactly the values the cold sync recorded: the file's
# Last-Modified as If-Modified-Since, its ETag as If-None-Match.
while IFS= read -r -d '' f; do
	url=$(python3 -c 'import sys, urllib.parse
print(urllib.parse.quote(sys.argv[1], safe="/"))' "$f")
	ims=$(LC_ALL=C date -u -d "@$(stat -c %Y "$T/up/$f")" '+%a, %d %b %Y %H:%M:%S GMT')
	etag=$(curl -sI --noproxy '*' "$APACHE_URL$url" |
	    sed -n 's/^ETag: \(.*\)\r$/\1/p')
	[ -n "$etag" ] || fail "no ETag from Apache for $f"
	want="\"GET /$url HTTP/1.1\" 304 0 \"-\" \"$ims\" \"${etag//\"/\\\"}\" "
	log_since "$mark" "$LOG" | grep -qF -- "$want" ||
	    fail "no conditional GET for $f like: $want"
done < <(cd "$T/up" && find . -type f -printf '%P\0')
assert_trees_equal "$T/up" "$T/mirror"

echo "# two files changed upstream: only they are downloaded"
# x.fa: new bytes and mtime; empty.dat: still empty, new mtime (a 200
# with an empty body).
printf 'changed upstream\n' >> "$T/up/sub/x.fa"
touch -d '2024-03-04 05:06:07 UTC' "$T/up/sub/x.fa"
touch -d '2024-03-04 05:06:08 UTC' "$T/up/empty.dat"
mark=$(wc -l < "$LOG")
assert_exit 0 bm --json sync up
expect_counts 2 0 0 0
assert_eq "$(jfield bytes)" "$(stat -c %s "$T/up/sub/x.fa")" "bytes"
reqs=$(file_requests "$mark")
assert_eq "$(echo "$reqs" | grep '^GET 200 ' | tr '\n' ' ')" \
    "GET 200 /empty.dat GET 200 /sub/x.fa " "downloads"
assert_eq "$(echo "$reqs" | grep -c '^GET 304 ')" "$((nfiles - 2))" "304 answers"
assert_eq "$(echo "$reqs" | wc -l)" "$nfiles" "file requests"
assert_eq "$(log_since "$mark" "$LOG" | grep -c '"HEAD ')" 0 "HEAD requests"
assert_trees_equal "$T/up" "$T/mirror"
no_temps "$T/mirror"

echo "# and the run after that downloads nothing again"
mark=$(wc -l < "$LOG")
assert_exit 0 bm --json sync up
expect_counts 0 0 0 0
assert_eq "$(file_requests "$mark" | grep -c '^GET 304 ')" "$nfiles" "304 answers"
stop_servers

# nginx's HTML autoindex lists times to the minute.  A file recorded
# before its listed minute ended, then rewritten with the same size later
# in that minute, shows the same listing: it was never fetched (break-it
# brk7 #4).  Such a file is asked for once more, conditionally.
echo "# a same-size rewrite within the listed minute of the last fetch"
mkdir -p "$T/upm"
[ "$(date +%-S)" -lt 45 ] || sleep $((61 - $(date +%-S)))
printf 'version 1\n' > "$T/upm/m.txt"
chmod -R a+rX "$T/upm"
start_nginx "$T/upm"
assert_exit 0 "$BM" --state-dir "$T/state-m" --json sync --source "$NGINX_URL" --dest "$T/mirror-m"
expect_counts 1 0 0 0
now=$(date +%s)
printf 'version 2\n' > "$T/upm/m.txt"	# same size, same minute, a later second
touch -d "@$((now + 1))" "$T/upm/m.txt"
assert_exit 0 "$BM" --state-dir "$T/state-m" --json sync --source "$NGINX_URL" --dest "$T/mirror-m"
expect_counts 1 0 0 0
assert_eq "$(cat "$T/mirror-m/m.txt")" "version 2" "m.txt after a rewrite within its minute"
stop_servers
echo PASS
