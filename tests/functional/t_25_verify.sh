#!/bin/bash
# verify = sidecar | checksum against real nginx: files with correct
# sidecars (NCBI "X.md5", a binary-mode MD5SUMS with CRLF, a SHA256SUMS)
# are fetched and published (a 40 MB file in 4 ranges too, hashed as its
# prefix grows); a file whose content no longer matches its sidecar is
# never published: the old file stays byte for byte, the file is
# reported (exit 1, op fetch, "checksum mismatch"), no temp file is left;
# fixing the sidecar upstream lets the next run publish it; verify =
# checksum records "sha256:HEX" of every fetched file in the manifest.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup

U=$T/up
mkdir -p "$U/db" "$U/other"
make_big_file "$U/db/big.bin" 40 big1
head -c 300000 /dev/urandom > "$U/db/nr.00.tar.gz"
printf 'plain text\n' > "$U/db/c.txt"
printf 'no sidecar covers me\n' > "$U/other/free.txt"
printf 'sha covered\n' > "$U/other/s.txt"
# ncbi_md5 FILE: NCBI's FILE.md5 ("digest  name").
ncbi_md5() {
	(cd "$(dirname "$1")" && md5sum "$(basename "$1")") > "$1.md5"
}
ncbi_md5 "$U/db/nr.00.tar.gz"
ncbi_md5 "$U/db/big.bin"
# A list in binary mode with CRLF line ends and a hostile line.
(cd "$U/db" && md5sum -b c.txt | sed 's/$/\r/';
    echo "d41d8cd98f00b204e9800998ecf8427e  ../../etc/passwd") > "$U/db/MD5SUMS"
(cd "$U/other" && sha256sum s.txt) > "$U/other/SHA256SUMS"
find "$U" -exec touch -d '2022-03-04 05:06:07 UTC' {} +
start_nginx "$U"
write_conf "$NGINX_URL"
cat >> "$T/bm.conf" <<CONF
verify = sidecar
streams = 4
min_split = 8M
retries = 1
CONF

echo "# correct sidecars: everything fetched and published"
assert_exit 0 bm --json sync up
expect_counts 9 0 0 0
assert_trees_equal "$U" "$T/mirror"
ranges=$(grep '"GET /db/big.bin ' "$NGINX_ACCESS_LOG" | grep -v '"bytes=0-0"' | grep -c '" 206 ')
assert_eq "$ranges" 4 "big.bin came in 4 ranges"
# Sidecars are fetched before the files they cover.
first_data=$(nginx_gets | grep -n '^/db/nr.00.tar.gz$' | head -1 | cut -d: -f1)
first_side=$(nginx_gets | grep -n '^/db/nr.00.tar.gz.md5$' | head -1 | cut -d: -f1)
[ "$first_side" -lt "$first_data" ] || fail "the sidecar came after its file"
assert_eq "$(manifest_sql "$T/state" up \
    "SELECT count(*) FROM files WHERE checksum IS NOT NULL")" 0 \
    "verify = sidecar records no digests"

echo "# content changed upstream, sidecar not: the old file stays"
cp "$T/mirror/db/nr.00.tar.gz" "$T/good.gz"
cp "$T/mirror/db/big.bin" "$T/good.bin"
head -c 300000 /dev/urandom > "$U/db/nr.00.tar.gz"
# One byte in the last range of big.bin.
printf 'X' | dd of="$U/db/big.bin" bs=1 seek=$((39 * 1048576)) conv=notrunc status=none
touch -d '2023-01-01 00:00:00 UTC' "$U/db/nr.00.tar.gz" "$U/db/big.bin"
assert_exit 1 bm --json sync up
expect_counts 0 0 0 2
assert_eq "$(jfield status)" partial "status"
assert_eq "$(jerrors)" "$(printf 'db/big.bin fetch\ndb/nr.00.tar.gz fetch')" "errors"
grep -q 'db/nr.00.tar.gz: fetch: checksum mismatch: db/nr.00.tar.gz.md5 says md5:' \
    "$T/last.err" || fail "no mismatch message for nr.00.tar.gz"
grep -q 'db/big.bin: fetch: checksum mismatch: db/big.bin.md5 says md5:' \
    "$T/last.err" || fail "no mismatch message for big.bin"
cmp "$T/good.gz" "$T/mirror/db/nr.00.tar.gz" || fail "nr.00.tar.gz was replaced"
cmp "$T/good.bin" "$T/mirror/db/big.bin" || fail "big.bin was replaced"
assert_eq "$(stat -c %Y "$T/mirror/db/nr.00.tar.gz")" \
    "$(date -d '2022-03-04 05:06:07 UTC' +%s)" "old mtime kept"
no_temps "$T/mirror"
# Tried twice (retries = 1), each time refused.
assert_eq "$(manifest_sql "$T/state" up "SELECT count(*) FROM events
    WHERE run = (SELECT max(id) FROM runs) AND op = 'failed'")" 2 "failed events"

echo "# upstream fixes the sidecars: published"
ncbi_md5 "$U/db/nr.00.tar.gz"
ncbi_md5 "$U/db/big.bin"
touch -d '2023-01-01 00:00:00 UTC' "$U/db/nr.00.tar.gz.md5" "$U/db/big.bin.md5"
assert_exit 0 bm --json sync up
expect_counts 4 0 0 0
assert_trees_equal "$U" "$T/mirror"

echo "# a wrong hostile list entry is ignored, not obeyed"
[ -e "$T/etc/passwd" ] && fail "traversal name created something"

echo "# verify = checksum records every fetched file's SHA-256"
rm -rf "$T/mirror" "$T/state"
sed -i 's/^verify = sidecar/verify = checksum/' "$T/bm.conf"
assert_exit 0 bm --json sync up
expect_counts 9 0 0 0
assert_trees_equal "$U" "$T/mirror"
manifest_sql "$T/state" up "SELECT CAST(path AS TEXT) || ' ' || checksum
    FROM files WHERE type = 102 ORDER BY path" > "$T/recorded"
(cd "$U" && find . -type f -printf '%P\n' | LC_ALL=C sort | while read -r f; do
	printf '%s sha256:%s\n' "$f" "$(sha256sum < "$f" | cut -d' ' -f1)"
done) > "$T/expected"
diff -u "$T/expected" "$T/recorded" || fail "recorded digests differ from sha256sum"
echo PASS
