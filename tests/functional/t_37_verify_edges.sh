#!/bin/bash
# verify, resync and the read commands on their edges, against real nginx.
# verify with nothing to hash says so and checks size and mtime (exit 0,
# exit 1 on an mtime drift); history --run of a run that does not exist,
# ls of "..", an absolute path: exit 2; check-config --json is a JSON
# object; resync --dry-run plans and changes nothing; a sidecar listing
# one file twice with two digests fails that file (old copy kept) and is
# warned about once; resync --checksum --adopt fetches a local file whose
# content contradicts its sidecar and records the SHA-256 of the adopted.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup

U=$T/up
mkdir -p "$U/plain/d" "$U/conf" "$U/ad"
printf 'one\n' > "$U/plain/a.txt"
printf 'two\n' > "$U/plain/d/b.txt"
printf 'three\n' > "$U/plain/d/c.txt"
printf 'good\n' > "$U/conf/ok.txt"
printf 'twice\n' > "$U/conf/dup.txt"
(cd "$U/conf" && md5sum ok.txt dup.txt &&
    echo "00000000000000000000000000000000  dup.txt" &&
    echo "not a checksum line") > "$U/conf/MD5SUMS"
printf 'adopt me\n' > "$U/ad/x.txt"
printf 'and me\n' > "$U/ad/y.txt"
(cd "$U/ad" && md5sum x.txt y.txt) > "$U/ad/MD5SUMS"
find "$U" -exec touch -d '2022-05-06 07:08:09 UTC' {} +
start_nginx "$U"
cat > "$T/bm.conf" <<CONF
[global]
state_dir = $T/state-from-config

[plain]
source = ${NGINX_URL%/}/plain/
dest = $T/plain
retries = 1

[conf]
source = ${NGINX_URL%/}/conf/
dest = $T/conf
verify = checksum
retries = 1

[ad]
source = ${NGINX_URL%/}/ad/
dest = $T/ad
verify = checksum
retries = 1
CONF

echo "# verify with no digest and no sidecar: size and mtime only"
assert_exit 0 bm --json sync plain
expect_counts 3 0 0 0
assert_exit 0 bm verify plain
assert_eq "$(cat "$T/last.out")" "plain: verify ok: checked 0 files against digests, \
3 files have no recorded digest or sidecar (size and mtime only), 0 differ" "verify text"
assert_exit 0 bm --json verify plain
assert_eq "$(jfield digest_checked) $(jfield size_only) $(jfield failed)" "0 3 0" "verify json"
touch -d '2001-01-01 00:00:00 UTC' "$T/plain/d/b.txt"
assert_exit 1 bm verify plain
assert_eq "$(cat "$T/last.out")" "differs d/b.txt: mtime differs from what was committed
plain: verify partial: checked 0 files against digests, \
3 files have no recorded digest or sidecar (size and mtime only), 1 differ" "verify mtime"

echo "# resync --dry-run plans and changes nothing"
runs=$(manifest_sql "$T/state" plain "SELECT count(*) FROM runs")
rm "$T/plain/a.txt"
assert_exit 0 bm resync plain --dry-run
grep -q '^fetch  a.txt (local missing' "$T/last.out" || fail "dry run plan: $(cat "$T/last.out")"
grep -q '^touch  d/b.txt (local mtime drifted' "$T/last.out" || fail "dry run touch"
[ ! -e "$T/plain/a.txt" ] || fail "resync --dry-run fetched a.txt"
assert_eq "$(stat -c %Y "$T/plain/d/b.txt")" "$(date -d '2001-01-01 00:00:00 UTC' +%s)" \
    "resync --dry-run touched b.txt"
assert_eq "$(manifest_sql "$T/state" plain "SELECT count(*) FROM runs")" "$runs" \
    "resync --dry-run recorded a run"
assert_exit 0 bm --json resync plain
expect_counts 1 1 0 0

echo "# history --run of a run that does not exist"
assert_exit 2 bm history plain --run 999
assert_eq "$(cat "$T/last.err")" "biomirror: plain: run 999: no such run" "history error"
assert_eq "$(cat "$T/last.out")" "" "history output"
assert_exit 0 bm history plain --run 1
assert_eq "$(grep -c ' fetched ' "$T/last.out")" 3 "history of run 1"

echo "# ls rejects paths outside the mirror"
for p in ../ .. /etc d/../d d//b.txt; do
	assert_exit 2 bm ls plain "$p"
	grep -q "ls: $p: not a relative path inside the mirror" "$T/last.err" ||
	    fail "ls $p: $(cat "$T/last.err")"
done
assert_exit 0 bm ls plain d/
assert_eq "$(awk '{print $NF}' "$T/last.out" | tr '\n' ' ')" "d d/b.txt d/c.txt " "ls d/"

echo "# check-config --json"
assert_exit 0 bm check-config --json
assert_eq "$(python3 -c 'import json,sys; o=json.load(open(sys.argv[1]));
print(o["config"], o["ok"], o["mirrors"])' "$T/last.out")" "$T/bm.conf True 3" "json"
printf '[bad\n' > "$T/bad.conf"
assert_exit 2 "$BM" -c "$T/bad.conf" check-config --json
assert_eq "$(python3 -c 'import json,sys; o=json.load(open(sys.argv[1]));
print(o["config"], o["ok"], "error" in o)' "$T/last.out")" "$T/bad.conf False True" "json error"

echo "# a sidecar giving one file two digests: that file fails"
assert_exit 1 bm --json sync conf
assert_eq "$(jerrors)" "dup.txt fetch" "conflict errors"
assert_eq "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[0]["errors"][0]["reason"])' \
    "$T/last.out")" "checksum mismatch: MD5SUMS gives conflicting md5 digests" "reason"
[ ! -e "$T/conf/dup.txt" ] || fail "dup.txt was published"
cmp "$U/conf/ok.txt" "$T/conf/ok.txt" || fail "ok.txt"
assert_eq "$(grep -c 'MD5SUMS: sidecar: conflicting digests for dup.txt: treated as a mismatch' \
    "$T/last.err")" 1 "conflict warned once"
assert_eq "$(grep -c 'MD5SUMS: sidecar: 1 lines ignored' "$T/last.err")" 1 "ignored lines logged once"
assert_exit 0 bm verify conf
assert_eq "$(grep -c 'sidecar: 1 lines ignored' "$T/last.err")" 1 "verify: logged once"

echo "# resync --checksum --adopt: content that contradicts the sidecar is fetched"
cp -a "$U/ad/." "$T/ad/"
printf 'adopt mX\n' > "$T/ad/x.txt"
touch -d '2022-05-06 07:08:09 UTC' "$T/ad/x.txt"
mark=$(wc -l < "$NGINX_ACCESS_LOG")
assert_exit 0 bm --json resync ad --checksum --adopt
assert_eq "$(jfield fetched) $(jfield adopted) $(jfield failed)" "1 2 0" "adopt counts"
log_since "$mark" "$NGINX_ACCESS_LOG" > "$T/log.new"
assert_eq "$(nginx_gets "$T/log.new" | grep -v '/$' | tr '\n' ' ')" "/ad/x.txt " "only x.txt fetched"
grep -q 'x.txt: local content differs from its sidecar checksum' "$T/last.err" ||
    fail "no warning for x.txt"
assert_trees_equal "$U/ad" "$T/ad"
assert_eq "$(manifest_sql "$T/state" ad "SELECT path || ' ' || checksum FROM files
    WHERE type = 102 ORDER BY path" | tr '\n' ' ')" \
    "MD5SUMS sha256:$(sha256sum < "$U/ad/MD5SUMS" | cut -c1-64) \
x.txt sha256:$(sha256sum < "$U/ad/x.txt" | cut -c1-64) \
y.txt sha256:$(sha256sum < "$U/ad/y.txt" | cut -c1-64) " "recorded digests"
assert_exit 0 bm verify ad
assert_eq "$(cat "$T/last.out")" "ad: verify ok: checked 3 files against digests, 0 differ" \
    "verify after adopt"
echo PASS
