#!/bin/bash
# Politeness and faults with our own fault-injecting server: the
# per-host connection cap holds (counted at the server); 503 with
# Retry-After is retried and succeeds (also for index pages); a stalled
# transfer is abandoned after stall_timeout and retried; truncated and
# over-long bodies are never published; an HTML error page sent with 200
# for a ranged file is not taken for the file; bwlimit holds for the
# whole run.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup
make_tree "$T/up"

echo "# the connection cap"
start_faultserver "$T/up" normal
write_conf "$FAULT_URL"
assert_exit 0 bm --json sync --max-connections 2 --concurrency 8 up
assert_trees_equal "$T/up" "$T/mirror"
assert_eq "$(fault_stat max_concurrent)" 2 "most connections open at once"
[ "$(fault_stat total)" -le 4 ] ||
    fail "connections were not reused: $(fault_stat total) for 2 allowed"

echo "# 503 with Retry-After, for files and index pages"
stop_servers; rm -rf "$T/mirror" "$T/state"
start_faultserver "$T/up" retry-after --fail 2 --retry-after 1 --pages
write_conf "$FAULT_URL"
assert_exit 0 bm --json sync up
expect_counts 64 0 0 0
assert_trees_equal "$T/up" "$T/mirror"
grep -q 'README.txt: fetch: HTTP 503 (retry 2 of 5)' "$LAST_ERR" ||
    fail "no second retry of README.txt logged"
grep -q 'list: HTTP 503 (retry 1 of 5)' "$LAST_ERR" || fail "index page not retried"

echo "# ... and giving up after --retries"
stop_servers; rm -rf "$T/mirror" "$T/state"
start_faultserver "$T/up" retry-after --fail 2 --retry-after 1
write_conf "$FAULT_URL"
assert_exit 1 bm --json sync --retries 1 up
assert_eq "$(jfield fetched)" 0 "fetched with too few retries"
assert_eq "$(jfield failed)" 64 "failed with too few retries"
[ -z "$(find "$T/mirror" -type f)" ] || fail "files published after failing"

echo "# a stalled transfer is abandoned after stall_timeout and retried"
stop_servers; rm -rf "$T/mirror" "$T/state"
mkdir -p "$T/up2"; head -c 300000 /dev/urandom > "$T/up2/stall.bin"
touch -d '2023-03-03 03:03:03 UTC' "$T/up2/stall.bin"
start_faultserver "$T/up2" stall --stall-for 30
write_conf "$FAULT_URL"
assert_exit 0 bm --json sync --stall-timeout 2 up
assert_trees_equal "$T/up2" "$T/mirror"
grep -q 'stall.bin: fetch: .*(retry 1 of 5)' "$LAST_ERR" || fail "the stall was not retried"

echo "# a body cut short of Content-Length: retried, never published short"
stop_servers; rm -rf "$T/mirror" "$T/state"
start_faultserver "$T/up2" short-body
write_conf "$FAULT_URL"
assert_exit 0 bm --json sync up
assert_trees_equal "$T/up2" "$T/mirror"
grep -q 'stall.bin: fetch: .*(retry 1 of 5)' "$LAST_ERR" ||
    fail "short-body: the short body was not retried"

echo "# bytes past Content-Length belong to no response: the file is exact"
stop_servers; rm -rf "$T/mirror" "$T/state"
start_faultserver "$T/up2" long-body
write_conf "$FAULT_URL"
assert_exit 0 bm --json sync up
assert_trees_equal "$T/up2" "$T/mirror"

# A whole second response past a body's Content-Length, the connection
# kept open: the next request on it would read that response as its own
# (published as "EVIL!": whichever of a.txt and b.txt comes second).  It
# is retried on a new connection.
for conc in 1 2; do
	echo "# a response smuggled past Content-Length on a kept-alive connection (concurrency $conc)"
	stop_servers; rm -rf "$T/mirror" "$T/state" "$T/up5"
	mkdir -p "$T/up5"
	printf 'aaaaa\n' > "$T/up5/a.txt"
	printf 'bbbbb\n' > "$T/up5/b.txt"
	chmod -R a+rX "$T/up5"
	start_faultserver "$T/up5" normal --fault '/a.txt=smuggle,body=EVIL!\n,times=1' \
	    --fault '/b.txt=smuggle,body=EVIL!\n,times=1'
	write_conf "$FAULT_URL"
	printf 'max_connections = 1\n' >> "$T/bm.conf"
	assert_exit 0 bm --json sync --concurrency "$conc" up
	assert_eq "$(cat "$T/mirror/a.txt")$(cat "$T/mirror/b.txt")" aaaaabbbbb \
	    "a.txt and b.txt after a smuggled response"
	assert_trees_equal "$T/up5" "$T/mirror"
	grep -q '[ab].txt: fetch: bytes waited on the reused connection before the request' "$LAST_ERR" ||
	    fail "no message for the smuggled response: $(cat "$LAST_ERR")"
done

for streams in 1 4; do
	echo "# an HTML error page sent with 200 is never published ($streams stream(s))"
	stop_servers; rm -rf "$T/mirror" "$T/state"
	mkdir -p "$T/up4"
	[ -e "$T/up4/big.bin" ] || head -c 20000000 /dev/urandom > "$T/up4/big.bin"
	echo hello > "$T/up4/s.txt"
	start_faultserver "$T/up4" html-200
	write_conf "$FAULT_URL"
	assert_exit 0 bm --json sync --streams "$streams" --min-split 4M up
	assert_trees_equal "$T/up4" "$T/mirror"
	grep -q 's.txt: fetch: got 43 bytes, the listing says 6 (retry 1 of 5)' "$LAST_ERR" ||
	    fail "the error page for s.txt was not refused"
done

echo "# index pages: redirects are followed only to add a trailing slash"
stop_servers; rm -rf "$T/mirror" "$T/state"
mkdir -p "$T/up5/real" "$T/up5/alias" "$T/up5/out" "$T/up5/loop" "$T/up5/dir"
echo r > "$T/up5/real/r.txt"; echo d > "$T/up5/dir/d.txt"
port=$(free_port)
start_faultserver "$T/up5" normal --redirect /alias/=/real/ \
    --redirect "/out/=http://localhost:$FAULT_PORT/elsewhere/" \
    --redirect /loop/=/loop/ --redirect /dir/=/dir2/
write_conf "$FAULT_URL"
assert_exit 3 bm --json sync up
grep -q 'alias/: list: .*another directory of the source' "$LAST_ERR" ||
    grep -q 'another directory of the source' "$LAST_ERR" || fail "the alias is not named"
cmp -s "$T/up5/real/r.txt" "$T/mirror/real/r.txt" || fail "real/r.txt not fetched"
python3 - "$FAULT_STATS" <<'PY' || fail "a redirect outside the source was followed"
import json, sys
gets = json.load(open(sys.argv[1]))["gets"]
sys.exit(1 if "/elsewhere/" in gets else 0)
PY

echo "# bwlimit holds for the whole run, not per file"
stop_servers; rm -rf "$T/mirror" "$T/state"
mkdir -p "$T/up3"
for i in 1 2 3 4; do head -c 3000000 /dev/urandom > "$T/up3/f$i.bin"; done
start_nginx "$T/up3"
write_conf "$NGINX_URL"
assert_exit 0 bm --json sync --bwlimit 2M up
assert_trees_equal "$T/up3" "$T/mirror"
python3 - "$T/last.out" <<'PY' || fail "bwlimit exceeded"
import json, sys
r = json.load(open(sys.argv[1]))[0]
rate = r["bytes"] / r["seconds"]
print("# %d bytes in %.2f s: %.0f B/s" % (r["bytes"], r["seconds"], rate))
sys.exit(0 if rate <= 2 * 1048576 * 1.15 else 1)
PY

echo "# the progress line: none when stderr is not a terminal, one on a tty"
rm -rf "$T/mirror" "$T/state"
assert_exit 0 bm sync --bwlimit 8M up
grep -q $'\r' "$LAST_ERR" && fail "progress line written to a non-terminal"
rm -rf "$T/mirror" "$T/state"
script -qec "$BM -c $T/bm.conf --state-dir $T/state sync --bwlimit 8M up" \
    /dev/null > "$T/tty.out" 2>&1 || fail "sync under a pty"
grep -q 'files, .*MB/s, ETA' "$T/tty.out" || fail "no progress line on a terminal"

# The line counts what the plan counts (issue 23): 6 files (3 sidecars
# fetched first, then 3 data files) and their bytes, one total over both
# passes; a file counts once it is complete, so while the large file is
# still coming (bwlimit: about 3 s) the line says 5/6.
echo "# the progress line: one total across the sidecar and data passes"
stop_servers; rm -rf "$T/mirror" "$T/state" "$T/up3"
mkdir -p "$T/up6"
head -c 1000 /dev/urandom > "$T/up6/s1.dat"
head -c 2000 /dev/urandom > "$T/up6/s2.dat"
head -c 3000000 /dev/urandom > "$T/up6/big.dat"
for f in s1 s2 big; do
	(cd "$T/up6" && md5sum "$f.dat" > "$f.dat.md5")
done
total=$(find "$T/up6" -type f -printf '%s\n' | awk '{ t += $1 } END { print t }')
start_nginx "$T/up6"
write_conf "$NGINX_URL"
echo "verify = sidecar" >> "$T/bm.conf"
script -qec "$BM -c $T/bm.conf --state-dir $T/state sync --bwlimit 1M up" \
    /dev/null > "$T/tty.out" 2>&1 || { cat "$T/tty.out"; fail "sync under a pty"; }
assert_trees_equal "$T/up6" "$T/mirror"
tr '\r' '\n' < "$T/tty.out" | grep -a ' files, .*, ETA ' | sed 's/^\x1b\[K//' > "$T/lines"
cat "$T/lines"
python3 - "$T/lines" "$total" <<'PY' || fail "progress line: not the plan's totals"
import re, sys
lines = open(sys.argv[1]).read().splitlines()
total = int(sys.argv[2])
def human(b):
    for i, u in enumerate(["B", "KiB", "MiB", "GiB"]):
        if b < 1024 ** (i + 1) or u == "GiB":
            return "%d B" % b if i == 0 else "%.1f %s" % (b / 1024 ** i, u)
assert len(lines) >= 3, lines
done = []
for l in lines:
    m = re.match(r"up: (\d+)/(\d+) files, (.*?)/(.*?), ", l)
    assert m, l
    assert m.group(2) == "6", l
    assert m.group(4) == human(total), (l, human(total))
    done.append(int(m.group(1)))
assert done == sorted(done), done
assert 5 in done, done
PY
echo PASS
