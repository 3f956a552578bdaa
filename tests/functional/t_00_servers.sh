#!/bin/bash
# Self-test of lib.sh: the generated tree, nginx (html, json, static) and
# Apache on loopback, the assertion helpers, and a clean stop.
# shellcheck source=tests/functional/lib.sh
. "$(dirname "$0")/lib.sh"
bm_setup

make_tree "$T/up"
nfiles=$(find "$T/up" -type f | wc -l)
[ "$nfiles" -ge 50 ] || fail "make_tree made only $nfiles files"
{ [ -d "$T/up/empty" ] && [ -d "$T/up/a/b/c/empty3" ]; } || fail "no empty dirs"
[ -f "$T/up/a/b/c/deep.txt" ] || fail "no 3-level nesting"
[ "$(find "$T/up" -type f -size 0 | wc -l)" -ge 3 ] || fail "no zero-byte files"
find "$T/up" -name '????????????????????????????????????????????????????????????????????????????????*' |
    grep -q . || fail "no 80+ character name"
nt=$(find "$T/up" -type f -printf '%T@\n' | sort -u | wc -l)
assert_eq "$nt" "$nfiles" "every file has its own mtime"

# The tree is deterministic.
make_tree "$T/up2"
assert_trees_equal "$T/up" "$T/up2"
# ... and assert_trees_equal notices an mtime, a byte, an extra empty dir.
touch -d '2001-01-01' "$T/up2/a/b/c/deep.txt"
(assert_trees_equal "$T/up" "$T/up2") 2>/dev/null && fail "mtime change not seen"
rm -rf "$T/up2"; make_tree "$T/up2"
printf 'X' | dd of="$T/up2/data/file10.bin" bs=1 seek=5 conv=notrunc status=none
touch -r "$T/up/data/file10.bin" "$T/up2/data/file10.bin"
(assert_trees_equal "$T/up" "$T/up2") 2>/dev/null && fail "byte change not seen"
rm -rf "$T/up2"; make_tree "$T/up2"; mkdir "$T/up2/new-empty"
(assert_trees_equal "$T/up" "$T/up2") 2>/dev/null && fail "extra empty dir not seen"
rm -rf "$T/up2"

assert_exit 3 sh -c 'echo oops >&2; exit 3'
grep -q oops "$T/last.err" || fail "assert_exit did not keep stderr"
(assert_exit 0 false) >/dev/null 2>&1 && fail "assert_exit accepted a wrong status"
assert_eq "$(manifest_db /s blast)" /s/manifests/blast.db "manifest_db"

make_big_file "$T/big1" 3
make_big_file "$T/big2" 3
cmp -s "$T/big1" "$T/big2" || fail "make_big_file is not deterministic"
assert_eq "$(stat -c %s "$T/big1")" 3145728 "make_big_file size"
rm -f "$T/big1" "$T/big2"

# check_index URL: the listing names the tree's odd names, percent-encoded.
check_index() {
	local url=$1 page=$T/index.html
	curl -sf --noproxy '*' -o "$page" "$url" || fail "GET $url"
	for href in 'with%20space.txt' 'caf%C3%A9%20%C3%BCn%C3%AFcode.txt' \
	    'percent%2520literal.txt' 'hash%23tag.txt' 'dir%20with%20space/' \
	    'README.txt' 'empty/' 'zero.dat'; do
		grep -qi "href=\"$href\"" "$page" ||
		    fail "$url: no href=\"$href\" in the listing"
	done
	grep -qE 'href="plus(\+|%2[Bb])sign.txt"' "$page" || fail "$url: no plus+sign.txt"
	curl -sf --noproxy '*' -o "$T/got" "${url}caf%C3%A9%20%C3%BCn%C3%AFcode.txt" ||
	    fail "GET a UTF-8 name"
	cmp -s "$T/got" "$T/up/café ünïcode.txt" || fail "$url: bytes differ"
	curl -sf --noproxy '*' -o "$T/got" "${url}dir%20with%20space/sub%25dir/x%23y+z.txt" ||
	    fail "GET a nested odd name"
	cmp -s "$T/got" "$T/up/dir with space/sub%dir/x#y+z.txt" || fail "$url: bytes differ"
	curl -sf --noproxy '*' -o "$T/got" "${url}data/file25.bin" || fail "GET big"
	cmp -s "$T/got" "$T/up/data/file25.bin" || fail "$url: bytes differ (300 KB)"
	lm=$(curl -sfI --noproxy '*' "${url}data/file25.bin" |
	    sed -n 's/^[Ll]ast-[Mm]odified: *\(.*\)\r$/\1/p')
	assert_eq "$(date -u -d "$lm" +%s)" "$(stat -c %Y "$T/up/data/file25.bin")" \
	    "$url: Last-Modified"
	echo "# $url ok"
}

start_nginx "$T/up"
check_index "$NGINX_URL"
nginx_url1=$NGINX_URL
nginx_gets | grep -q '^/data/file25.bin$' || fail "nginx_gets: no GET logged"

start_nginx "$T/up" "autoindex_format json;"
[ "$NGINX_URL" != "$nginx_url1" ] || fail "two servers on one port"
curl -sf --noproxy '*' "${NGINX_URL}a/b/c/" | python3 -c '
import json, os, sys
got = sorted(e["name"] for e in json.load(sys.stdin))
want = sorted(os.listdir(sys.argv[1]))
sys.exit(0 if got == want else "json listing %r != %r" % (got, want))
' "$T/up/a/b/c" || fail "nginx json listing"

mkdir -p "$T/static/sub"
echo '<html><body><a href="sub/">sub/</a></body></html>' > "$T/static/index.html"
echo 'hello' > "$T/static/sub/f.txt"
start_nginx_static "$T/static"
curl -sf --noproxy '*' "$NGINX_URL" | grep -q 'href="sub/"' || fail "static index"
code=$(curl -s --noproxy '*' -o /dev/null -w '%{http_code}' "${NGINX_URL}sub/")
assert_eq "$code" 403 "static: no autoindex"

start_apache "$T/up"
check_index "$APACHE_URL"
grep -q 'GET /data/file25.bin' "$APACHE_ACCESS_LOG" || fail "apache access log"

[ -n "$(bm_leftovers)" ] || fail "bm_leftovers sees no server"
stop_servers
left=$(bm_leftovers)
[ -z "$left" ] || { ps -o pid,user,args -p "$left" >&2; fail "left behind: $left"; }
for p in $NGINX_PORT $APACHE_PORT; do
	ss -Hltn "sport = :$p" | grep -q . && fail "port $p still listening"
done
echo "PASS: t_00_servers"
