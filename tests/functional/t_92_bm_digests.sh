#!/bin/bash
# bm:// and a served mirror's recorded digests (docs/protocol.md, "LIST"
# and "GET"):
# - an export `mirror = t1` of a verify = checksum mirror: LIST carries
#   each file's SHA-256 from t1's manifest (a plain `path =` export: none);
# - a downstream records them (its manifest's sidecar column) and gets
#   byte-identical files;
# - the server sends a whole file whose digest it holds with sendfile(2)
#   (strace), never a range (hashed as read);
# - a file changed behind the manifest's back (same size, mtime put
#   back) is listed without a digest and served with its true one: a new
#   downstream gets the new bytes, exit 0, never the stale digest;
# - a served mirror without a manifest yet is logged once, not per session;
# - such a changed file never gets its stale recorded digest back after a
#   later run of the mirror (the guard is the end of the run that fetched
#   the file, not of the newest run): once served whole it is listed with
#   the digest hashed then, its true one; a new downstream gets the new
#   bytes, exit 0;
# - a plain export's files over 256 KiB, once served whole, are listed
#   with the digest hashed as they were read (the server's hashed table),
#   smaller ones never, nor one changed under a second before it was
#   served; a file rewritten in place (mtime put back: its ctime moved)
#   loses it, and a file only fetched in ranges gets none;
# - a downstream's kept partial (the serve stopped half-way by
#   BM_SERVE_TEST_STOP, stall_timeout 1) of a file then rewritten in
#   place (same size and mtime, its listed digest gone) is not continued:
#   the next run starts over, the file is the new one, exit 0.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup
H=127.0.0.1
CL="python3 $BM_TOOLS/bmclient.py"
command -v strace > /dev/null || fail "strace is not installed"

mkdir -p "$T/up/d" "$T/t1" "$T/up2" "$T/m1"
make_big_file "$T/up2/big2.bin" 12 v1
printf 'small one\n' > "$T/up/small.txt"
for i in $(seq 1 20); do printf 'file %d\n' "$i" > "$T/up/d/f$i"; done
make_big_file "$T/up/big.bin" 2
touch -d '2022-03-04 05:06:07.123456789 UTC' "$T/up/small.txt" "$T/up/d/"*

PORT=$(free_port)
PORT2=$(free_port)
cat > "$T/bm.conf" <<CONF
[serve]
listen = $H:$PORT

[export pub]
path = $T/up

[export t1]
mirror = t1

[export pub2]
path = $T/up2

[export m1]
mirror = m1

[t1]
source = bm://$H:$PORT/pub/
dest = $T/t1
verify = checksum
timeout = 5
stall_timeout = 10

[t2]
source = bm://$H:$PORT/t1/
dest = $T/t2
verify = checksum
timeout = 5
stall_timeout = 10

[t3]
source = bm://$H:$PORT/t1/
dest = $T/t3
verify = checksum
timeout = 5
stall_timeout = 10

[t4]
source = bm://$H:$PORT/t1/
dest = $T/t4
verify = checksum
timeout = 5
stall_timeout = 10

[m1]
source = bm://$H:$PORT/pub2/
dest = $T/m1
verify = checksum
timeout = 5

[m2]
source = bm://$H:$PORT2/m1/
dest = $T/m2
verify = checksum
max_connections = 1
retries = 0
timeout = 2
stall_timeout = 1
CONF
sed "s/^listen = .*/listen = $H:$PORT2/" "$T/bm.conf" > "$T/bm2.conf"
strace -f -qq -e trace=sendfile -e signal=none -o "$T/strace.out" \
    "${BM_SERVE:-$BM}" -c "$T/bm.conf" --state-dir "$T/state" serve \
    > "$T/serve.log" 2>&1 &
SPID=$!
BM_SERVERS="$BM_SERVERS strace:$SPID:$T"
$CL wait $H "$PORT" || { cat "$T/serve.log"; fail "serve did not start"; }
# TERM goes to serve itself (under strace, under this shell's subshell).
desc() { local p; for p in $(pgrep -P "$1"); do echo "$p"; desc "$p"; done; }
SERVE_PID=$(for p in $(desc "$SPID"); do
	case $(cat "/proc/$p/comm" 2>/dev/null) in strace|bash) ;; *) echo "$p" ;; esac
done | head -1)
[ -n "$SERVE_PID" ] || fail "no serve under strace"
BM_SERVERS="serve:$SERVE_PID:$T $BM_SERVERS"

# sendfiles N: sendfile calls so far that sent N bytes in one go.
sendfiles() {
	grep -Ec "sendfile\\(.*\\) = $1\$" "$T/strace.out"
}
# settle FILE: wait (at most 2 s) until FILE's ctime is 1.2 s old: the
# server notes the digest of a file it hashed only when its ctime was a
# second old (digests.c, SV_HASHED_SETTLE_NS).
settle() {
	local i
	for i in $(seq 1 20); do
		awk -v c="$(stat -c '%.9Z' "$1")" -v n="$(date +%s.%N)" \
		    'BEGIN { exit !(n - c >= 1.2) }' && return 0
		sleep 0.1
	done
	fail "settle $1: its ctime did not age"
}
# want_digests EXPORT DIR: LIST of EXPORT with digests, against sha256sum.
want_digests() {
	(cd "$2" && find . -type f -printf '%P\n' | LC_ALL=C sort |
	    while IFS= read -r f; do
		printf '%s\tsha256:%s\n' "$f" "$(sha256sum < "$f" | cut -c1-64)"
	done) > "$T/want.dg"
	$CL list $H "$PORT" "$1" "" --digests | awk -F'\t' '$1 == "f" {
	    print $5 "\t" $7 }' | LC_ALL=C sort > "$T/got.dg" ||
	    fail "list $1"
}

echo "# t1 not synced yet: no manifest, said once, not per session"
$CL list $H "$PORT" t1 "" > /dev/null || fail "list t1 before its sync"
$CL list $H "$PORT" t1 "" > /dev/null || fail "list t1 before its sync"
assert_eq "$(grep -c 't1.db: no recorded digests' "$T/serve.log")" 1 \
    "a missing manifest logged once"

echo "# tier 1: t1 from a plain export (no digests listed there)"
want_digests pub "$T/up"
assert_eq "$(cut -f2 "$T/got.dg" | sort -u)" "-" "digests of a path export"
settle "$T/up/big.bin"
assert_exit 0 bm --json sync t1
expect_counts 22 0 0 0
assert_trees_equal "$T/up" "$T/t1"
assert_eq "$(manifest_sql "$T/state" t1 \
    "SELECT count(*) FROM files WHERE checksum LIKE 'sha256:%'")" 22 \
    "t1's recorded digests"

echo "# the plain export, served whole once, lists big.bin's digest hashed then"
want_digests pub "$T/up"
assert_eq "$(grep '^big.bin	' "$T/got.dg")" "$(grep '^big.bin	' "$T/want.dg")" \
    "LIST digest of pub's big.bin after t1's sync"
assert_eq "$(grep -vc '^big.bin	' "$T/got.dg")" 21 "pub's small files listed"
assert_eq "$(grep -v '^big.bin	' "$T/got.dg" | cut -f2 | sort -u)" "-" \
    "pub's small files listed with a digest"

echo "# LIST of the served mirror carries its recorded digests"
want_digests t1 "$T/t1"
diff "$T/want.dg" "$T/got.dg" || fail "LIST digests of t1"

echo "# tier 2: records them; whole files by sendfile"
before=$(sendfiles 2097152)
assert_exit 0 bm --json sync t2
expect_counts 22 0 0 0
assert_trees_equal "$T/t1" "$T/t2"
assert_eq "$(sendfiles 2097152)" $((before + 1)) "big.bin by sendfile"
assert_eq "$(manifest_sql "$T/state" t2 "SELECT sidecar FROM files \
    WHERE path = CAST('big.bin' AS BLOB)")" \
    "$(grep '^big.bin	' "$T/want.dg" | cut -f2)" "t2 records the listed digest"
assert_eq "$(manifest_sql "$T/state" t2 "SELECT count(*) FROM files \
    WHERE sidecar LIKE 'sha256:%'")" 22 "t2: listed digests recorded"

echo "# ranges are hashed as read, never sendfile"
n=$(grep -c sendfile "$T/strace.out")
$CL get $H "$PORT" t1 "$T/got" big.bin@0+1048576 big.bin@1048576+1048576 \
    > /dev/null || fail "get ranges"
cat "$T/got/big.bin@0+1048576" "$T/got/big.bin@1048576+1048576" |
    cmp -s - "$T/t1/big.bin" || fail "ranges differ"
assert_eq "$(grep -c sendfile "$T/strace.out")" "$n" "sendfile for a range"
$CL get $H "$PORT" t1 "$T/got" big.bin > /dev/null || fail "get whole"
cmp -s "$T/got/big.bin" "$T/t1/big.bin" || fail "whole big.bin differs"
assert_eq "$(sendfiles 2097152)" $((before + 2)) "whole file by sendfile"

echo "# changed behind the manifest's back: true digest, never the stale one"
ms=$(stat -c '%.9Y' "$T/t1/small.txt")
printf 'SMALL ONE\n' > "$T/t1/small.txt"
touch -d "@$ms" "$T/t1/small.txt"
mt=$(stat -c '%.9Y' "$T/t1/big.bin")
printf 'X' | dd of="$T/t1/big.bin" bs=1 seek=1000 conv=notrunc status=none
touch -d "@$mt" "$T/t1/big.bin"
assert_eq "$(stat -c '%.9Y' "$T/t1/big.bin")" "$mt" "big.bin's mtime put back"
assert_eq "$(stat -c '%.9Y' "$T/t1/small.txt")" "$ms" "small's mtime put back"
want_digests t1 "$T/t1"
assert_eq "$(grep -E '^(small.txt|big.bin)	' "$T/got.dg" | cut -f2 | sort -u)" \
    "-" "changed files listed without a digest"
assert_eq "$(grep -c '	sha256:' "$T/got.dg")" 20 "unchanged files keep theirs"
before=$(sendfiles 2097152)
settle "$T/t1/big.bin"	# so that t3's whole read of it is noted
assert_exit 0 bm --json sync t3
expect_counts 22 0 0 0
assert_trees_equal "$T/t1" "$T/t3"
assert_eq "$(cat "$T/t3/small.txt")" "SMALL ONE" "t3 has the new bytes"
assert_eq "$(sendfiles 2097152)" "$before" "a changed file went by sendfile"
assert_eq "$(manifest_sql "$T/state" t3 "SELECT checksum FROM files \
    WHERE path = CAST('big.bin' AS BLOB)")" \
    "sha256:$(sha256sum < "$T/t1/big.bin" | cut -c1-64)" "t3's big.bin digest"

echo "# a later run of t1 (nothing upstream changed): never the stale digest"
assert_exit 0 bm --json sync t1
expect_counts 0 0 0 0
want_digests t1 "$T/t1"
# t3 had big.bin whole, so the server hashed it: its true digest.
assert_eq "$(grep '^small.txt	' "$T/got.dg" | cut -f2)" "-" \
    "small.txt listed with a digest after a later run"
assert_eq "$(grep '^big.bin	' "$T/got.dg")" "$(grep '^big.bin	' "$T/want.dg")" \
    "big.bin not listed with its true digest after a later run"
assert_exit 0 bm --json sync t4
expect_counts 22 0 0 0
assert_trees_equal "$T/t1" "$T/t4"
assert_eq "$(cat "$T/t4/small.txt")" "SMALL ONE" "t4 has the new bytes"

echo "# a kept partial of a file rewritten in place is not continued"
assert_exit 0 bm sync m1
# serve2 LOG [VAR=VALUE]: m1 served on PORT2 (with a test hook).
serve2() {
	env ${2:+"$2"} "${BM_SERVE:-$BM}" -c "$T/bm2.conf" --state-dir \
	    "$T/state" serve > "$1" 2>&1 &
	S2PID=$!
	BM_SERVERS="$BM_SERVERS serve:$S2PID:$T"
	$CL wait $H "$PORT2" || { cat "$1"; fail "serve2 did not start"; }
}
serve2 "$T/serve2a.log" BM_SERVE_TEST_STOP=big2.bin
assert_exit 1 bm sync m2
grep -q 'serve: test hook: stopped in big2.bin' "$T/serve2a.log" ||
    fail "the hook did not stop the server"
grep -q 'big2.bin: .*bytes kept for the next run to continue' "$LAST_ERR" ||
    fail "no partial kept"
assert_eq "$(manifest_sql "$T/state" m2 "SELECT etag FROM partials")" \
    "\"bm-12582912-$(stat -c '%.9Y' "$T/m1/big2.bin" | tr -d .)-sha256:$(
    sha256sum < "$T/m1/big2.bin" | cut -c1-64)\"" \
    "the partial's validator names the listed digest"
kill -KILL "$S2PID"
wait "$S2PID" 2>/dev/null
mt=$(stat -c '%.9Y' "$T/m1/big2.bin")
printf 'Z' | dd of="$T/m1/big2.bin" bs=1 seek=1048576 conv=notrunc status=none
printf 'Y' | dd of="$T/m1/big2.bin" bs=1 seek=10485760 conv=notrunc status=none
touch -d "@$mt" "$T/m1/big2.bin"
serve2 "$T/serve2b.log"
assert_exit 0 bm --json sync m2
expect_counts 1 0 0 0
grep -q 'big2.bin: the listed digest is not that of the bytes an earlier run kept: starting over' \
    "$LAST_ERR" || fail "the partial was not dropped"
grep -q 'continuing with' "$LAST_ERR" && fail "a stale partial continued"
cmp "$T/m1/big2.bin" "$T/m2/big2.bin" || fail "m2's big2.bin is not m1's"
no_temps "$T/m2"
assert_eq "$(manifest_sql "$T/state" m2 "SELECT checksum FROM files \
    WHERE path = CAST('big2.bin' AS BLOB)")" \
    "sha256:$(sha256sum < "$T/m1/big2.bin" | cut -c1-64)" "m2's big2.bin digest"
kill -TERM "$S2PID"
wait "$S2PID" 2>/dev/null

echo "# the plain export: rewritten in place, a file loses its hashed digest"
mt=$(stat -c '%.9Y' "$T/up/big.bin")
printf 'W' | dd of="$T/up/big.bin" bs=1 seek=4096 conv=notrunc status=none
touch -d "@$mt" "$T/up/big.bin"
want_digests pub "$T/up"
assert_eq "$(grep '^big.bin	' "$T/got.dg" | cut -f2)" "-" \
    "a file rewritten in place listed with its old digest"
$CL get $H "$PORT" pub "$T/got" big.bin > /dev/null || fail "get big.bin"
cmp -s "$T/got/big.bin" "$T/up/big.bin" || fail "pub's new big.bin differs"
want_digests pub "$T/up"
assert_eq "$(grep '^big.bin	' "$T/got.dg" | cut -f2)" "-" \
    "a file changed under a second before it was served whole was noted"
settle "$T/up/big.bin"
$CL get $H "$PORT" pub "$T/got" big.bin > /dev/null || fail "get big.bin"
cmp -s "$T/got/big.bin" "$T/up/big.bin" || fail "pub's new big.bin differs"
want_digests pub "$T/up"
assert_eq "$(grep '^big.bin	' "$T/got.dg")" "$(grep '^big.bin	' "$T/want.dg")" \
    "big.bin served whole: not listed with its new digest"

echo "# the plain export: a file fetched only in ranges is listed without"
make_big_file "$T/up/new.bin" 2 new
settle "$T/up/new.bin"
$CL get $H "$PORT" pub "$T/got" new.bin@0+1048576 new.bin@1048576+1048576 \
    > /dev/null || fail "get ranges of new.bin"
want_digests pub "$T/up"
assert_eq "$(grep '^new.bin	' "$T/got.dg" | cut -f2)" "-" \
    "ranges noted as a whole file's digest"
n=$(sendfiles 2097152)
$CL get $H "$PORT" pub "$T/got" new.bin > /dev/null || fail "get new.bin"
cmp -s "$T/got/new.bin" "$T/up/new.bin" || fail "new.bin differs"
assert_eq "$(sendfiles 2097152)" "$n" "new.bin by sendfile before its digest was known"
$CL get $H "$PORT" pub "$T/got" new.bin > /dev/null || fail "get new.bin again"
cmp -s "$T/got/new.bin" "$T/up/new.bin" || fail "new.bin differs the second time"
assert_eq "$(sendfiles 2097152)" $((n + 1)) "new.bin, hashed once, then by sendfile"
want_digests pub "$T/up"
assert_eq "$(grep '^new.bin	' "$T/got.dg")" "$(grep '^new.bin	' "$T/want.dg")" \
    "new.bin served whole: not listed with its digest"

echo "# a write the kernel does not stamp (tmpfs, a shared mmap, a dirty page)"
# The hashed digest goes stale; a downstream asks for the file again
# after its DIGEST did not match, gets it hashed as read, and the table
# forgets it: at the latest the next run has it right, never wrong bytes.
SHM=$(mktemp -d /dev/shm/bmt92.XXXXXX) || fail "mktemp /dev/shm"
chmod 0755 "$SHM"
head -c 1000000 /dev/urandom > "$SHM/big.bin"
PORT3=$(free_port)
printf '[serve]\nlisten = %s:%s\n[export shm]\npath = %s\n' $H "$PORT3" \
    "$SHM" > "$T/bm3.conf"
"$BM" -c "$T/bm3.conf" --state-dir "$T/state3" serve > "$T/serve3.log" 2>&1 &
S3PID=$!
BM_SERVERS="$BM_SERVERS serve:$S3PID:$T"
$CL wait $H "$PORT3" || { cat "$T/serve3.log"; fail "serve3 did not start"; }
python3 - "$SHM/big.bin" > "$T/mmap.log" 2>&1 <<'PY' &
import mmap, os, sys, time
p = sys.argv[1]
m = mmap.mmap(os.open(p, os.O_RDWR), 0)
m[100:104] = b"AAAA"
open(p + ".go1", "w").close()
while not os.path.exists(p + ".go2"):
    time.sleep(0.05)
m[200:204] = b"BBBB"            # the same page, still dirty
open(p + ".go3", "w").close()
time.sleep(60)
PY
MPID=$!
BM_SERVERS="$BM_SERVERS mmap:$MPID:$T"
for _ in $(seq 1 100); do [ -e "$SHM/big.bin.go1" ] && break; sleep 0.05; done
settle "$SHM/big.bin"
shmsync() { "$BM" --state-dir "$T/st.$1" sync --source "bm://$H:$PORT3/shm/" \
    --dest "$T/shm.$1" --include big.bin > "$T/shm.$1.log" 2>&1; }
shmsync 1 || { cat "$T/shm.$1.log"; fail "shm run 1"; }
st1=$(stat -c '%s %.9Y %.9Z' "$SHM/big.bin")
touch "$SHM/big.bin.go2"
for _ in $(seq 1 100); do [ -e "$SHM/big.bin.go3" ] && break; sleep 0.05; done
[ -e "$SHM/big.bin.go3" ] || fail "the second mmap write did not happen"
st2=$(stat -c '%s %.9Y %.9Z' "$SHM/big.bin")
shmsync 2
rc2=$?
shmsync 3 || { cat "$T/shm.3.log"; fail "a stale hashed digest outlived a run"; }
cmp -s "$SHM/big.bin" "$T/shm.3/big.bin" || fail "shm run 3: wrong bytes"
[ "$rc2" != 0 ] || cmp -s "$SHM/big.bin" "$T/shm.2/big.bin" ||
    fail "shm run 2 published wrong bytes"
echo "# stat unchanged by the unstamped write: $([ "$st1" = "$st2" ] &&
    echo yes || echo no); run 2 exit $rc2"
if [ "$st1" = "$st2" ]; then
	grep -q 'serve: .*: export shm: big.bin asked for again: hashed as read' \
	    "$T/serve3.log" || fail "the unstamped write went unnoticed"
fi
kill "$MPID" "$S3PID" 2>/dev/null
wait "$MPID" "$S3PID" 2>/dev/null
rm -rf "$SHM"
echo PASS
