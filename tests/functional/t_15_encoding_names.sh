#!/bin/bash
# (a) Content-Encoding: a .gz that Apache labels "Content-Encoding: gzip"
#     and a text file nginx would gzip on request are stored as the exact
#     bytes the server holds (biomirror sends no Accept-Encoding and does
#     not decode).
# (b) A name that is not UTF-8 is mirrored with the same bytes, and --json
#     (ls and sync) stays valid JSON with the bytes escaped as \xHH; names
#     with control characters are skipped: nothing written, no crash.
# (c) Names with ' ', '%', '#', '+', '?', '&', ';' round-trip.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup

# body_bytes PATH LOG: the body byte counts logged for GETs of PATH.
body_bytes() {
	log_since 0 "$2" | grep -F "\"GET $1 HTTP/1.1\" 200 " |
	    sed 's/^[^"]*"[^"]*" 200 \([0-9]*\) .*/\1/'
}

echo "# (a) Content-Encoding"
mkdir -p "$T/enc"
seq 1 30000 | gzip -9 -n > "$T/enc/data.txt.gz"
seq 1 30000 | sed 's/$/ ACGTACGTACGTACGT/' > "$T/enc/plain.txt"
touch -d '2021-05-06 07:08:09 UTC' "$T/enc/data.txt.gz"
touch -d '2021-05-06 07:08:10 UTC' "$T/enc/plain.txt"
gzsize=$(stat -c %s "$T/enc/data.txt.gz")
txtsize=$(stat -c %s "$T/enc/plain.txt")

start_apache "$T/enc" "AddEncoding gzip .gz"
curl -sI --noproxy '*' "${APACHE_URL}data.txt.gz" | tr -d '\r' |
    grep -qx 'Content-Encoding: gzip' ||
    fail "Apache does not send Content-Encoding: gzip for the .gz"
assert_exit 0 "$BM" --state-dir "$T/state" --json sync --source "$APACHE_URL" \
    --dest "$T/m-apache"
expect_counts 2 0 0 0
cmp "$T/enc/data.txt.gz" "$T/m-apache/data.txt.gz" ||
    fail "the .gz was not stored byte for byte (decoded?)"
assert_trees_equal "$T/enc" "$T/m-apache"
assert_eq "$(body_bytes /data.txt.gz "$APACHE_ACCESS_LOG")" "$gzsize" \
    "bytes Apache sent for the .gz"

BM_NGINX_HTTP_EXTRA='gzip on; gzip_types *; gzip_min_length 1; gzip_proxied any;'
start_nginx "$T/enc"
unset BM_NGINX_HTTP_EXTRA
# The server does compress for a client that asks ...
curl -s --noproxy '*' -H 'Accept-Encoding: gzip' -o "$T/probe.gz" \
    -D "$T/probe.hdr" "${NGINX_URL}plain.txt"
tr -d '\r' < "$T/probe.hdr" | grep -qx 'Content-Encoding: gzip' ||
    fail "nginx does not gzip plain.txt for a client asking for it"
[ "$(stat -c %s "$T/probe.gz")" -lt $((txtsize / 2)) ] ||
    fail "nginx's gzip output is not smaller"
mark=$(wc -l < "$NGINX_ACCESS_LOG")
# ... and biomirror does not ask.
assert_exit 0 "$BM" --state-dir "$T/state" --json sync --source "$NGINX_URL" \
    --dest "$T/m-nginx"
expect_counts 2 0 0 0
cmp "$T/enc/plain.txt" "$T/m-nginx/plain.txt" || fail "plain.txt differs"
cmp "$T/enc/data.txt.gz" "$T/m-nginx/data.txt.gz" || fail "data.txt.gz differs"
assert_trees_equal "$T/enc" "$T/m-nginx"
assert_eq "$(log_since "$mark" "$NGINX_ACCESS_LOG" | body_bytes /plain.txt /dev/stdin)" \
    "$txtsize" "bytes nginx sent for plain.txt (compressed on the wire?)"

echo "# (b) non-UTF-8 and control-character names, (c) URL-special names"
mkdir -p "$T/up/d" "$T/up/$(printf 'dir\xfe')"
printf 'cafe latin-1\n' > "$T/up/$(printf 'caf\xe9.txt')"
printf 'inner\n' > "$T/up/$(printf 'dir\xfe')/inner.txt"
printf 'utf8\n' > "$T/up/$(printf '\xe6\x97\xa5\xe6\x9c\xac.txt')"
printf 'ctl\n' > "$T/up/$(printf 'ctl\x01name.txt')"
printf 'ctl2\n' > "$T/up/$(printf 'bad\x1f\xff.txt')"
printf 'tab\n' > "$T/up/d/$(printf 'tab\tname.txt')"
specials=('sp ace.txt' '50%.txt' '%41.txt' 'h#sh.txt' 'p+us.txt' 'q?mark.txt'
    'a&b.txt' 'semi;colon.txt' 'all %#+?&;= x.txt' '?start' '#start' '%')
for n in "${specials[@]}"; do
	printf '%s\n' "$n" > "$T/up/d/$n"
done
i=0
while IFS= read -r -d '' f; do
	i=$((i + 1))
	touch -d "@$((1500000000 + i * 3600))" "$T/up/$f"
done < <(cd "$T/up" && find . -type f -printf '%P\0')
start_nginx "$T/up"
write_conf "$NGINX_URL"
mark=$(wc -l < "$NGINX_ACCESS_LOG")
assert_exit 0 bm --json sync up
json_ok "$T/last.out"
# Listed: caf\xe9, dir\xfe, dir\xfe/inner, the UTF-8 name, d and the
# specials; fetched: the 3 files among the first five and the specials.
expect_counts $((3 + ${#specials[@]})) 0 0 0
assert_eq "$(jfield listed)" $((5 + ${#specials[@]})) "listed"
cat "$T/last.err"
gets=$(log_requests "$mark" "$NGINX_ACCESS_LOG" | grep -v '/$')
echo "$gets" | sed 's/^/  req: /'
assert_eq "$(echo "$gets" | grep -c "^GET 200 ")" $((3 + ${#specials[@]})) \
    "files downloaded"
assert_eq "$(echo "$gets" | grep -vc '^GET 200 ')" 0 "other file requests"
echo "$gets" | grep -qx 'GET 200 /caf%E9.txt' ||
    fail "caf\\xe9.txt not requested with the listed bytes (%E9)"
echo "$gets" | grep -qix 'GET 200 /dir%FE/inner.txt' ||
    fail "dir\\xfe/inner.txt not requested as /dir%FE/inner.txt"

# The mirror holds exactly these names, byte for byte.
python3 - "$T/mirror" <<'EOF' || fail "names in the mirror"
import os, sys
root = os.fsencode(sys.argv[1])
want_top = {b"caf\xe9.txt", b"dir\xfe", "日本.txt".encode(), b"d"}
got_top = set(os.listdir(root))
if got_top != want_top:
    sys.exit("top level: got %r, want %r" % (sorted(got_top), sorted(want_top)))
got = set(os.listdir(os.path.join(root, b"dir\xfe")))
if got != {b"inner.txt"}:
    sys.exit("dir\\xfe: got %r" % sorted(got))
with open(os.path.join(root, b"caf\xe9.txt"), "rb") as f:
    if f.read() != b"cafe latin-1\n":
        sys.exit("caf\\xe9.txt: wrong bytes")
EOF
for n in "${specials[@]}"; do
	cmp -s "$T/up/d/$n" "$T/mirror/d/$n" || fail "d/$n did not round-trip"
	[ "$(stat -c %Y "$T/up/d/$n")" = "$(stat -c %Y "$T/mirror/d/$n")" ] ||
	    fail "d/$n: mtime differs"
done
assert_eq "$(find "$T/mirror/d" -mindepth 1 -maxdepth 1 -printf x | wc -c)" "${#specials[@]}" \
    "entries in d (the tab name must be skipped)"
cmp -s "$T/up/$(printf 'dir\xfe')/inner.txt" "$T/mirror/$(printf 'dir\xfe')/inner.txt" ||
    fail "dir\\xfe/inner.txt differs"
no_temps "$T/mirror"

echo "# the manifest round-trips the names: a second run fetches nothing"
mark=$(wc -l < "$NGINX_ACCESS_LOG")
assert_exit 0 bm --json sync up
json_ok "$T/last.out"
expect_counts 0 0 0 0
assert_eq "$(log_requests "$mark" "$NGINX_ACCESS_LOG" | grep -vc '/$')" 0 \
    "file requests in the second run"

echo "# ls --json: valid, ASCII-only JSON, non-UTF-8 bytes as \\xHH"
assert_exit 0 bm --json ls up
json_ok "$T/last.out"
LC_ALL=C grep -q '[^ -~]' "$T/last.out" && fail "ls --json output is not ASCII"
python3 - "$T/last.out" "${specials[@]}" <<'EOF' || fail "ls --json paths"
import json, sys
got = sorted((e["path"], e["type"]) for e in json.load(open(sys.argv[1])))
want = [("caf\\xE9.txt", "f"), ("dir\\xFE", "d"), ("dir\\xFE/inner.txt", "f"),
        ("日本.txt", "f"), ("d", "d")]
want += [("d/" + n, "f") for n in sys.argv[2:]]
want.sort()
if got != want:
    sys.exit("got  %r\nwant %r" % (got, want))
EOF
# Escaped in the JSON text as "caf\\xE9.txt" (the backslash itself escaped).
grep -qF '"path": "caf\\xE9.txt"' "$T/last.out" ||
    fail "caf\\xe9.txt not escaped as caf\\\\xE9.txt in the JSON text"

echo "# sync --json with a non-UTF-8 name in an error"
mkdir -p "$T/st"
printf 'here\n' > "$T/st/$(printf 'caf\xe9.txt')"
cat > "$T/st/index.html" <<'HTML'
<html><body><h1>Index of /</h1><pre>
<a href="caf%E9.txt">caf&#233;.txt</a>
<a href="gone%FF%20x.txt">gone.txt</a>
</pre></body></html>
HTML
start_nginx_static "$T/st"
assert_exit 1 "$BM" --state-dir "$T/state" --json sync --source "$NGINX_URL" \
    --dest "$T/m-static"
json_ok "$T/last.out"
LC_ALL=C grep -q '[^ -~]' "$T/last.out" && fail "sync --json output is not ASCII"
assert_eq "$(jfield status)" partial "status"
expect_counts 1 0 0 1
assert_eq "$(jerrors)" 'gone\xFF x.txt vanished' "errors"
grep -qF '"path": "gone\\xFF x.txt"' "$T/last.out" ||
    fail "the error path is not escaped as gone\\\\xFF x.txt"
cmp -s "$T/st/$(printf 'caf\xe9.txt')" "$T/m-static/$(printf 'caf\xe9.txt')" ||
    fail "caf\\xe9.txt not mirrored from the static index"
assert_eq "$(find "$T/m-static" -mindepth 1 -maxdepth 1 -printf x | wc -c)" 1 "entries in the static mirror"
# ... and its log line (stderr, a terminal or the journal) escapes the
# byte too.
LC_ALL=C grep -qF ': gone\xFF x.txt: fetch: HTTP 404 (listed, but gone upstream; not deleted)' \
    "$T/last.err" || fail "log line: the name is not escaped"
LC_ALL=C grep -q $'gone\xff' "$T/last.err" && fail "log line: a raw 0xFF byte"

echo "# a name with a bidirectional override (U+202E, valid UTF-8) is kept"
echo "# as a name, and escaped in log lines (never reorders the terminal)"
stop_servers
mkdir -p "$T/bidi"
printf 'b\n' > "$T/bidi/$(printf 'evil\xe2\x80\xaetxt.exe')"
chmod -R a+rX "$T/bidi"
start_nginx "$T/bidi"
assert_exit 0 "$BM" -vv --state-dir "$T/state" sync --source "$NGINX_URL" \
    --dest "$T/m-bidi"
assert_trees_equal "$T/bidi" "$T/m-bidi"
LC_ALL=C grep -q 'evil\\xE2\\x80\\xAEtxt.exe: ' "$T/last.err" ||
    fail "log line: the override is not escaped"
LC_ALL=C grep -q $'\xe2\x80\xae' "$T/last.err" && fail "log line: a raw U+202E"
echo PASS
