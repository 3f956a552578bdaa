#!/bin/bash
# A listing that fails part-way (a subdirectory's index page answers 403
# or 500) exits 3 and deletes nothing, even with delete = yes: files of the
# failing subdirectory and files really gone upstream stay; the part that
# listed fine is still fetched.  A root that is 404 and a server that is
# down exit 3 and change nothing.  So does an index page cut short in
# transit (our fault server), at a line end or in the middle of one.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup

# page DIR ENTRY...: a hand-written index page for $T/up/DIR.
page() {
	local d=$1 f
	shift
	{
		echo '<html><body><h1>Index</h1><pre>'
		for f in "$@"; do
			echo "<a href=\"$f\">$f</a>"
		done
		echo '</pre></body></html>'
	} > "$T/up/$d/index.html"
}

mkdir -p "$T/up/sub" "$T/up/ok"
top="t1.txt t2.txt old.txt"
subs="s1.txt s2.txt s3.txt s4.txt s5.txt"
for f in $top; do printf 'top %s\n' "$f" > "$T/up/$f"; done
for f in $subs; do printf 'sub %s\n' "$f" > "$T/up/sub/$f"; done
printf 'ok\n' > "$T/up/ok/o1.txt"
# Settled mtimes, as on a real mirror: the page lists no dates, so a
# Last-Modified in the second of the fetch would be weak (RFC 7232
# 2.2.2) and refetched by the next run.
touch -d '2024-01-01 00:00:00' "$T"/up/*.txt "$T"/up/*/*.txt
# shellcheck disable=SC2086
page . $top sub/ ok/
# shellcheck disable=SC2086
# shellcheck disable=SC2086
page sub $subs
page ok o1.txt
start_nginx_static "$T/up"
write_conf "$NGINX_URL"
LOG=$NGINX_ACCESS_LOG

echo "# first run: all 9 files"
assert_exit 0 bm --json sync up
expect_counts 9 0 0 0
for f in $subs; do
	cmp -s "$T/up/sub/$f" "$T/mirror/sub/$f" || fail "sub/$f not mirrored"
done

# check_kept: every file of the first run is still in the mirror, unchanged.
check_kept() {
	local f
	for f in $top; do
		[ -f "$T/mirror/$f" ] || fail "$f deleted ($1)"
	done
	for f in $subs; do
		cmp -s "$T/mirror/sub/$f" <(printf 'sub %s\n' "$f") ||
		    fail "sub/$f deleted or changed ($1)"
	done
	cmp -s "$T/mirror/ok/o1.txt" <(printf 'ok\n') || fail "ok/o1.txt ($1)"
	no_temps "$T/mirror"
}

echo "# sub/ no longer lists (403), old.txt gone, new.txt added upstream"
rm "$T/up/sub/index.html" "$T/up/old.txt"
printf 'new\n' > "$T/up/new.txt"
touch -d '2024-01-01 00:00:00' "$T/up/new.txt"
page . t1.txt t2.txt new.txt sub/ ok/
code=$(curl -s --noproxy '*' -o /dev/null -w '%{http_code}' "${NGINX_URL}sub/")
assert_eq "$code" 403 "status of the sub/ page"
mark=$(wc -l < "$LOG")
assert_exit 3 bm --json sync --delete up
case $(jfield status) in
partial) ;;
*) fail "status $(jfield status), want partial (new.txt was fetched)" ;;
esac
assert_eq "$(jfield deleted)" 0 "deleted"
assert_eq "$(jfield fetched)" 1 "fetched (new.txt)"
cmp -s "$T/up/new.txt" "$T/mirror/new.txt" || fail "new.txt, listed fine, not fetched"
assert_eq "$(jerrors)" " list" "errors"
python3 -c 'import json,sys
e = json.load(open(sys.argv[1]))[0]["errors"][0]
sys.exit(0 if "sub/" in e["reason"] and "403" in e["reason"] else e["reason"])' \
    "$T/last.out" || fail "the list error does not name sub/ and 403"
grep -q 'sub/.*403' "$LAST_ERR" || fail "stderr does not name the failing page"
check_kept "partial listing, --delete"
assert_eq "$(manifest_sql "$T/state" up "select count(*) from files where type = 102")" \
    10 "files in the manifest (9 + new.txt, nothing removed)"
assert_eq "$(log_requests "$mark" "$LOG" | grep -c ' /sub/.')" 0 \
    "requests for files under the failing directory"

echo "# the same with a 500 on sub/"
stop_servers
BM_NGINX_SERVER_EXTRA='location = /sub/ { return 500; }'
# shellcheck disable=SC2086
page sub $subs
start_nginx_static "$T/up"
unset BM_NGINX_SERVER_EXTRA
write_conf "$NGINX_URL"
assert_eq "$(curl -s --noproxy '*' -o /dev/null -w '%{http_code}' "${NGINX_URL}sub/")" \
    500 "status of the sub/ page"
before=$(tree_sum "$T/mirror")
# A 500 is retryable: one retry, then the listing fails.
assert_exit 3 bm --json sync --delete --retries 1 up
grep -q 'sub/: list: HTTP 500 (retry 1 of 1)' "$LAST_ERR" ||
    fail "the failing index page was not retried"
assert_eq "$(jfield status)" failed "status (nothing fetched)"
expect_counts 0 0 0 0
assert_eq "$(jerrors)" " list" "errors"
grep -q 'sub/.*500' "$LAST_ERR" || fail "stderr does not name the 500"
assert_eq "$(tree_sum "$T/mirror")" "$before" "mirror after a partial listing"
check_kept "500 on sub/"

echo "# a root that is 404: exit 3, nothing changed"
stop_servers
BM_NGINX_SERVER_EXTRA='location = / { return 404; }'
start_nginx_static "$T/up"
unset BM_NGINX_SERVER_EXTRA
write_conf "$NGINX_URL"
before=$(tree_sum "$T/mirror")
runs=$(manifest_sql "$T/state" up "select count(*) from files")
assert_exit 3 bm --json sync --delete up
assert_eq "$(jfield status)" failed "status"
expect_counts 0 0 0 0
assert_eq "$(jfield listed)" 0 "listed"
grep -q '404' "$LAST_ERR" || fail "stderr does not name the 404"
assert_eq "$(tree_sum "$T/mirror")" "$before" "mirror after a 404 root"
assert_eq "$(manifest_sql "$T/state" up "select count(*) from files")" "$runs" \
    "manifest rows after a 404 root"
check_kept "404 root"

echo "# the server is down: exit 3 with a clear error"
stop_servers
port=$(free_port)
write_conf "http://127.0.0.1:$port/"
t0=$(date +%s)
assert_exit 3 bm --json sync --delete --retries 1 up
assert_eq "$(jfield status)" failed "status"
expect_counts 0 0 0 0
grep -qi "127.0.0.1.*$port.*\(refused\|connect\)" "$LAST_ERR" ||
    fail "stderr does not say the connection to 127.0.0.1:$port failed"
assert_eq "$(tree_sum "$T/mirror")" "$before" "mirror after a failed connection"
check_kept "server down"
[ $(($(date +%s) - t0)) -lt 120 ] || fail "took too long against a closed port"

echo "# back to normal: the next complete listing applies the delete"
# shellcheck disable=SC2086
page sub $subs
start_nginx_static "$T/up"
write_conf "$NGINX_URL"
assert_exit 0 bm --json sync up
expect_counts 0 0 1 0
[ -e "$T/mirror/old.txt" ] && fail "old.txt not deleted by a complete listing"
for d in . sub ok; do rm "$T/up/$d/index.html"; done
assert_trees_equal "$T/up" "$T/mirror"
stop_servers

# An index page cut short in transit (no Content-Length, then the
# connection closes; complete chunked framing around half a page looks
# the same to a client) parses as a shorter listing: its missing files
# were deleted as gone upstream (break-it brk6 #1).  It is an incomplete
# listing now: exit 3, nothing deleted.
mkdir -p "$T/up6/d"
for i in $(seq -w 1 50); do printf 'f%s\n' "$i" > "$T/up6/d/f$i.txt"; done
chmod -R a+rX "$T/up6"
for how in "" ",midline=1"; do
	echo "# an index page cut at 90%${how:+ (mid-line)}: exit 3, nothing deleted"
	rm -rf "$T/mirror" "$T/state"
	start_faultserver "$T/up6" normal
	write_conf "$FAULT_URL"
	assert_exit 0 bm --json sync up
	stop_servers
	start_faultserver "$T/up6" normal --fault "/d/=cutpage$how"
	write_conf "$FAULT_URL"
	assert_exit 3 bm --json sync up
	expect_counts 0 0 0 0
	grep -q "list: ${FAULT_URL}d/: incomplete index page: the HTML ends before its </html>" "$LAST_ERR" ||
	    fail "cut page: message: $(grep list "$LAST_ERR")"
	assert_trees_equal "$T/up6" "$T/mirror"
	stop_servers
done
echo PASS
