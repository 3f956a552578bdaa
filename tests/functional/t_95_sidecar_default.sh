#!/bin/bash
# verify = sidecar is the default wherever the listing carries sidecars
# (issue 22 item 9), against real nginx:
# - plan names the sidecar each fetched file is checked against (its own
#   X.md5, or the nearest MD5SUMS above it);
# - a data file whose listed .md5 disagrees with it is not published under
#   the default (exit 1); an explicit verify = size still publishes it;
# - under the default a listed sidecar that answers 404 (a stale index
#   entry) is a warning: exit 0, status ok; with an explicit
#   verify = sidecar the same run fails (exit 1), as with verify = size
#   (there it is a listed file like any other).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup

U=$T/up
mkdir -p "$U/sub"
printf 'alpha\n' > "$U/a.txt"
printf 'beta\n' > "$U/b.txt"
printf 'gamma\n' > "$U/sub/c.txt"
(cd "$U" && md5sum a.txt > a.txt.md5 && md5sum b.txt > b.txt.md5)
(cd "$U/sub" && md5sum c.txt > MD5SUMS)
find "$U" -exec touch -d '2024-02-03 04:05:06 UTC' {} +
# b.txt.md5 is listed but answers 404 (NCBI's stale index entries).
BM_NGINX_SERVER_EXTRA='location = /b.txt.md5 { return 404; }' start_nginx "$U"

echo "# plan: each data file names its sidecar"
write_conf "$NGINX_URL"
assert_exit 0 bm plan up
grep -qx 'fetch  a.txt (new, 6 bytes; checked against a.txt.md5)' "$T/last.out" ||
    fail "plan: a.txt: $(grep a.txt "$T/last.out")"
grep -qx 'fetch  sub/c.txt (new, 6 bytes; checked against sub/MD5SUMS)' "$T/last.out" ||
    fail "plan: sub/c.txt: $(grep c.txt "$T/last.out")"
grep 'a.txt.md5 (' "$T/last.out" | grep -q 'checked against' &&
    fail "plan: a sidecar is said to be checked: $(cat "$T/last.out")"

echo "# default: the 404 sidecar is a warning, the run ok"
assert_exit 0 bm --json sync up
assert_eq "$(jfield status)" ok "status"
assert_eq "$(jfield failed)" 0 "failed"
grep -q 'b.txt.md5: fetch: .*a listed sidecar gone upstream' "$T/last.err" ||
    fail "no warning for b.txt.md5: $(cat "$T/last.err")"
cmp -s "$U/a.txt" "$T/mirror/a.txt" || fail "a.txt not published"
cmp -s "$U/b.txt" "$T/mirror/b.txt" || fail "b.txt not published"
[ -e "$T/mirror/b.txt.md5" ] && fail "b.txt.md5 published"

echo "# explicit verify = sidecar: the 404 sidecar fails the run"
rm -rf "$T/mirror" "$T/state"
printf 'verify = sidecar\n' >> "$T/bm.conf"
assert_exit 1 bm --json sync up
assert_eq "$(jfield failed)" 1 "failed (explicit sidecar)"

echo "# default: a.txt changed upstream beside a stale a.txt.md5: not published"
rm -rf "$T/mirror" "$T/state"
printf 'ALPHA\n' > "$U/a.txt"
touch -d '2024-02-03 04:05:06 UTC' "$U/a.txt"
write_conf "$NGINX_URL"
printf 'retries = 0\n' >> "$T/bm.conf"
assert_exit 1 bm --json sync up
[ -e "$T/mirror/a.txt" ] && fail "a.txt published beside a stale a.txt.md5"
jerrors | grep -qx 'a.txt fetch' || fail "no error for a.txt: $(jerrors)"
no_temps "$T/mirror"

echo "# explicit verify = size: a.txt published; the 404 file fails as any listed file"
rm -rf "$T/mirror" "$T/state"
printf 'verify = size\n' >> "$T/bm.conf"
assert_exit 1 bm --json sync up
cmp -s "$U/a.txt" "$T/mirror/a.txt" || fail "verify = size: a.txt not published"
assert_eq "$(jerrors)" "b.txt.md5 vanished" "verify = size: errors"
assert_eq "$(jfield failed)" 1 "verify = size: failed"
stop_servers
echo "PASS"
