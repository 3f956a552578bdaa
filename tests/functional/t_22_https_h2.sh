#!/bin/bash
# HTTPS with our own CA (ca_file) and HTTP/2: nginx offers h2 by ALPN, and
# biomirror multiplexes its requests over it (every request is HTTP/2.0,
# over far fewer connections than requests); without ca_file the self-signed
# server is refused (exit 3, nothing written); a 200 MB file in ranges over
# h2 is identical; --ca-file does the same for an ad-hoc run.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup
make_tree "$T/up"
make_big_file "$T/up/big.bin" 200

openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=127.0.0.1 \
    -addext "subjectAltName=IP:127.0.0.1" -keyout "$T/key.pem" \
    -out "$T/cert.pem" 2>/dev/null || fail "openssl req"
chmod 0644 "$T/key.pem" "$T/cert.pem"
sport=$(free_port)
BM_NGINX_HTTP_EXTRA="log_format h2 '\$connection \$server_protocol \$status \$request_uri \$http_range';"
BM_NGINX_SERVER_EXTRA="listen 127.0.0.1:$sport ssl http2;
        ssl_certificate $T/cert.pem; ssl_certificate_key $T/key.pem;
        access_log $T/h2.log h2;"
start_nginx "$T/up"
unset BM_NGINX_HTTP_EXTRA BM_NGINX_SERVER_EXTRA
URL=https://127.0.0.1:$sport/
write_conf "$URL"

echo "# no ca_file: the self-signed server is refused"
assert_exit 3 bm --json sync up
grep -qi 'certificate' "$LAST_ERR" || fail "the refusal does not name the certificate"
[ -z "$(find "$T/mirror" -type f 2>/dev/null)" ] || fail "files written"

echo "# with ca_file: HTTP/2, multiplexed"
printf 'ca_file = %s\n' "$T/cert.pem" >> "$T/bm.conf"
# (the refused handshakes above may have left a line in the log)
mark=$(wc -l < "$T/h2.log")
assert_exit 0 bm --json sync up
assert_trees_equal "$T/up" "$T/mirror"
tail -n +"$((mark + 1))" "$T/h2.log" > "$T/h2.run"
nreq=$(wc -l < "$T/h2.run")
nh2=$(grep -c ' HTTP/2.0 ' "$T/h2.run")
assert_eq "$nh2" "$nreq" "requests over HTTP/2"
nconn=$(cut -d' ' -f1 "$T/h2.run" | sort -u | wc -l)
echo "# $nreq requests over $nconn connections"
[ "$nreq" -ge 60 ] || fail "too few requests logged ($nreq)"
[ "$nconn" -le 2 ] || fail "requests were not multiplexed: $nconn connections"
[ "$(grep ' 206 /big.bin ' "$T/h2.run" | grep -vc ' bytes=0-0$')" = 4 ] ||
    fail "big.bin not in 4 ranges"
[ "$(grep -c ' 206 /big.bin bytes=0-0$' "$T/h2.run")" = 1 ] ||
    fail "big.bin: not one end check (byte 0) after its ranges"

echo "# a no-change run over h2 fetches nothing"
assert_exit 0 bm --json sync up
expect_counts 0 0 0 0
echo "# an ad-hoc run: refused without --ca-file, identical with it"
assert_exit 3 "$BM" --state-dir "$T/state2" sync --source "$URL" \
    --dest "$T/adhoc"
assert_exit 0 "$BM" --state-dir "$T/state2" sync --source "$URL" \
    --dest "$T/adhoc" --ca-file "$T/cert.pem"
assert_trees_equal "$T/up" "$T/adhoc"
echo PASS
