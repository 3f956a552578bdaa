#!/bin/bash
# FTPS: vsftpd that requires explicit TLS (AUTH TLS) for anonymous logins
# and data.  source = ftps:// (and ftp:// with ftp_tls = require) mirrors
# the tree, trusting the server's certificate through ca_file; ftp:// with
# ftp_tls = no is turned away at login (exit 3, nothing listed, nothing
# deleted).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup
mkdir -p "$T/up/sub dir" "$T/tls"
printf 'secret data\n' > "$T/up/sub dir/a.txt"
make_big_file "$T/up/b.bin" 2 ftps
touch -d '2023-05-06 07:08:09 UTC' "$T/up/sub dir/a.txt"
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=127.0.0.1 \
    -addext subjectAltName=IP:127.0.0.1 -keyout "$T/tls/key.pem" \
    -out "$T/tls/cert.pem" 2>/dev/null || fail "openssl req"
BM_VSFTPD_EXTRA="ssl_enable=YES
allow_anon_ssl=YES
force_anon_logins_ssl=YES
force_anon_data_ssl=YES
ssl_tlsv1=NO
ssl_sslv2=NO
ssl_sslv3=NO
rsa_cert_file=$T/tls/cert.pem
rsa_private_key_file=$T/tls/key.pem" start_vsftpd "$T/up"
ftps_url=ftps://127.0.0.1:$VSFTPD_PORT/

# no_ftp: the last run's log and --json never name the source as the
# ftp:// URL libcurl is given for an ftps:// source (explicit TLS).
no_ftp() {
	grep -n 'ftp://' "$LAST_OUT" "$LAST_ERR" &&
	    fail "a line names ftp:// for an ftps:// mirror"
	return 0
}

echo "# ftps:// with ca_file"
write_conf "$ftps_url"
printf 'ca_file = %s\n' "$T/tls/cert.pem" >> "$T/bm.conf"
assert_exit 0 bm --json -v -v sync up
expect_counts 2 0 0 0
assert_trees_equal "$T/up" "$T/mirror"
grep -q '"AUTH TLS"' "$VSFTPD_LOG" || fail "no AUTH TLS in the server log"
no_ftp

echo "# ftp:// with ftp_tls = require: the same, no change"
write_conf "$VSFTPD_URL"
printf 'ca_file = %s\nftp_tls = require\n' "$T/tls/cert.pem" >> "$T/bm.conf"
assert_exit 0 bm --json sync up
expect_counts 0 0 0 0

echo "# without the certificate trusted: refused, nothing deleted"
rm -rf "$T/state"
write_conf "$ftps_url"
assert_exit 3 bm --json sync up
assert_eq "$(jfield deleted)" 0 "deleted"
assert_trees_equal "$T/up" "$T/mirror"
python3 - "$LAST_OUT" "$ftps_url" <<'PY' || fail "listing error reason"
import json, sys
e = json.load(open(sys.argv[1]))[0]["errors"]
want = sys.argv[2] + ": SSL certificate problem: self-signed certificate"
assert [x["reason"] for x in e] == [want], e
PY
grep -qxF "biomirror: up: list: $ftps_url: SSL certificate problem: self-signed certificate" \
    "$LAST_ERR" || fail "the listing error is not logged with ftps://"
no_ftp

echo "# ftp_tls = no against a server that requires TLS: refused at login"
write_conf "$VSFTPD_URL"
printf 'ftp_tls = no\n' >> "$T/bm.conf"
assert_exit 3 bm --json sync up
assert_eq "$(jfield listed)" 0 "listed"
assert_trees_equal "$T/up" "$T/mirror"
echo "PASS"
