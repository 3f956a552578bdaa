#!/bin/bash
# concurrency = auto, streams = auto: a sync from nginx on loopback with
# --streams auto --concurrency auto completes with identical trees, logs
# the choice once ("up: auto: RTT ... ms, ...: streams S, concurrency C")
# and reports the same values in --json ("auto" object); over HTTP/1.1
# concurrency is exactly max_connections (no multiplexing, never fewer);
# over HTTPS with h2 and small files only it exceeds it (one receive
# window of files).  Without auto there is neither the line nor the
# object.  Timing is not asserted.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup
make_tree "$T/up"
make_big_file "$T/up/big/a.bin" 24 a
make_big_file "$T/up/big/b.bin" 24 b
# 300 small files, served over HTTPS + h2 for the last part.
mkdir -p "$T/small/s"
for i in $(seq 1 300); do
	head -c $((1000 + i * 10)) /dev/urandom > "$T/small/s/f$i"
done
chmod -R a+rX "$T/small"
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=127.0.0.1 \
    -addext "subjectAltName=IP:127.0.0.1" -keyout "$T/key.pem" \
    -out "$T/cert.pem" 2>/dev/null || fail "openssl req"
chmod 0644 "$T/key.pem" "$T/cert.pem"
sport=$(free_port)
BM_NGINX_SERVER_EXTRA="listen 127.0.0.1:$sport ssl http2;
        ssl_certificate $T/cert.pem; ssl_certificate_key $T/key.pem;
        location /small/ { alias $T/small/; autoindex on;
            autoindex_exact_size on; }"
start_nginx "$T/up"
unset BM_NGINX_SERVER_EXTRA
write_conf "$NGINX_URL"
printf 'min_split = 4M\n' >> "$T/bm.conf"

# auto_check MAXCONN: the last run logged one choice, equal to its JSON.
auto_check() {
	local line s c
	[ "$(grep -c ': auto: ' "$T/last.err")" = 1 ] ||
	    fail "want exactly one auto line in the log"
	line=$(grep ': auto: ' "$T/last.err")
	echo "$line" | grep -Eq 'up: auto: (RTT [0-9]+\.[0-9] ms|RTT unknown), ([0-9]+\.[0-9] MB/s per connection|rate per connection unknown): streams [0-9]+, concurrency [0-9]+' ||
	    fail "auto line malformed: $line"
	s=$(echo "$line" | sed -E 's/.*streams ([0-9]+), concurrency ([0-9]+).*/\1/')
	c=$(echo "$line" | sed -E 's/.*streams ([0-9]+), concurrency ([0-9]+).*/\2/')
	assert_eq "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[0]["auto"]["streams"])' "$T/last.out")" "$s" "JSON auto.streams"
	assert_eq "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[0]["auto"]["concurrency"])' "$T/last.out")" "$c" "JSON auto.concurrency"
	[ "$s" -ge 1 ] && [ "$s" -le "$1" ] || fail "streams $s not in 1..$1"
	# HTTP/1.1: a request holds a connection, and fewer files than
	# connections would leave some idle: exactly max_connections.
	assert_eq "$c" "$1" "concurrency over HTTP/1.1"
	python3 -c 'import json,sys; a=json.load(open(sys.argv[1]))[0]["auto"]; assert a["rtt_ms"] is None or a["rtt_ms"] >= 0; assert a["rate_per_connection"] is None or a["rate_per_connection"] > 0' "$T/last.out" ||
	    fail "JSON auto rtt_ms/rate_per_connection"
}

echo "# --streams auto --concurrency auto"
assert_exit 0 bm --json sync --streams auto --concurrency auto up
expect_counts "$(find "$T/up" -type f | wc -l)" 0 0 0
assert_trees_equal "$T/up" "$T/mirror"
no_temps "$T/mirror"
auto_check 8
# Two large files of 24 MB: each was fetched in ranges (4 to start).
[ "$(grep -c '"GET /big/a.bin .* 206 ' "$NGINX_ACCESS_LOG")" -ge 2 ] ||
    fail "big/a.bin not fetched in ranges"

echo "# the config keys, within max_connections = 2"
rm -rf "$T/mirror" "$T/state"
sed -i 's/^concurrency = 8$/concurrency = auto/' "$T/bm.conf"
printf 'streams = auto\nmax_connections = 2\n' >> "$T/bm.conf"
mark=$(wc -l < "$NGINX_ACCESS_LOG")
assert_exit 0 bm --json sync up
assert_trees_equal "$T/up" "$T/mirror"
auto_check 2
# streams <= share of 2 connections among 2 large files: 1 (whole GETs).
assert_eq "$(tail -n +"$((mark + 1))" "$NGINX_ACCESS_LOG" | grep -c '"GET /big/a.bin .* 206 ')" 0 \
    "no ranges when two large files share two connections"

echo "# HTTP/2, small files only: more files in flight than connections"
assert_exit 0 "$BM" --state-dir "$T/state-h2" -v --json sync \
    --source "https://127.0.0.1:$sport/small/" --dest "$T/m-h2" \
    --ca-file "$T/cert.pem" --concurrency auto
assert_trees_equal "$T/small" "$T/m-h2"
line=$(grep ': auto: ' "$T/last.err") || fail "no auto line over h2"
c=$(echo "$line" | sed -E 's/.*concurrency ([0-9]+).*/\1/')
echo "# $line"
# One receive window (tcp_rmem max) of ~2.5 KB files: far more than 8, at
# most 100 per connection.
[ "$c" -gt 8 ] && [ "$c" -le 800 ] || fail "concurrency $c over h2 not in 9..800"

echo "# fixed values: no auto line, no auto object"
rm -rf "$T/mirror" "$T/state"
assert_exit 0 bm --json sync --streams 4 --concurrency 8 up
assert_trees_equal "$T/up" "$T/mirror"
grep -q ': auto: ' "$T/last.err" && fail "auto line without auto"
python3 -c 'import json,sys; sys.exit("auto" in json.load(open(sys.argv[1]))[0])' "$T/last.out" ||
    fail "auto object without auto"
echo PASS
