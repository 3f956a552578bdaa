#!/bin/bash
# SIGTERM during a large transfer: exit 1 (status interrupted, the reason
# "stopped by SIGTERM" in --json, the run record and history; the log says
# the file in flight is kept for the next run), the small files
# that finished are committed (manifest and disk), nothing partial under a
# final name, the big file's temp file kept with its finished ranges
# recorded, and the next run continues it and completes.  Then the same while a new version of the big file is
# being fetched: the old complete copy stays under the final name.  And
# SIGTERM while a listing page waits for its retry: the reason recorded is
# the signal, not the page.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup

mkdir -p "$T/up/big" "$T/up/small/sub"
make_big_file "$T/up/big/big.bin" 200 first
smalls="small/a.txt small/b.txt small/c.bin small/sub/d.txt small/sub/e.bin s.txt"
i=0
for f in $smalls; do
	i=$((i + 1))
	head -c $((i * 3000)) /dev/urandom > "$T/up/$f"
	touch -d "2022-0$i-01 12:00:00 UTC" "$T/up/$f"
done
nsmall=$(echo "$smalls" | wc -w)
start_nginx "$T/up"
write_conf "$NGINX_URL"

# slow_run_and_term TAG: start a sync with --bwlimit 20M, wait until the
# big file's temp file holds 20+ MiB, send SIGTERM to biomirror itself and
# wait for it.  Sets RC, and TERM_SECS (seconds from the signal to exit).
slow_run_and_term() {
	local pid tmp t0
	"$BM" -c "$T/bm.conf" --state-dir "$T/state" --json sync \
	    --bwlimit 20M up > "$T/$1.out" 2> "$T/$1.err" &
	pid=$!
	tmp=""
	for _ in $(seq 1 200); do
		# Ranges are written with pwrite, so the temp file is sparse:
		# count the bytes it holds (blocks), not its length.
		tmp=$(find "$T/mirror/big" -name '.biomirror-tmp.*' \
		    -printf '%b %p\n' 2>/dev/null |
		    awk '$1 * 512 > 20 * 1048576 { print $2; exit }')
		[ -n "$tmp" ] && break
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if [ -z "$tmp" ]; then
		cat "$T/$1.out" "$T/$1.err" >&2
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
		fail "$1: no growing temp file of big.bin"
	fi
	t0=$(date +%s%N)
	kill -TERM "$pid"
	wait "$pid"
	RC=$?
	TERM_SECS=$((($(date +%s%N) - t0) / 1000000000))
	cat "$T/$1.out"
	sed 's/^/  stderr: /' "$T/$1.err"
	cp "$T/$1.out" "$T/last.out"
}

echo "# cold sync, SIGTERM while big.bin is in flight"
slow_run_and_term cold
assert_eq "$RC" 1 "exit status after SIGTERM"
[ "$TERM_SECS" -le 5 ] || fail "took $TERM_SECS s to stop after SIGTERM"
json_ok "$T/last.out"
assert_eq "$(jfield status)" interrupted "status"
assert_eq "$(jfield fetched)" "$nsmall" "fetched (the small files)"
assert_eq "$(jfield deleted)" 0 "deleted"
assert_eq "$(jfield failed)" 0 "failed"
python3 - "$T/last.out" <<'PY' || fail "the interruption is not a reported error"
import json, sys
assert json.load(open(sys.argv[1]))[0]["errors"] == [
    {"path": "", "op": "run", "reason": "stopped by SIGTERM"}], "errors"
PY
grep -q '^biomirror: up: stopped by SIGTERM$' "$T/cold.err" ||
    fail "the interruption is not logged"
# What becomes of the file in flight: kept for the next run, not abandoned.
grep -qxF 'biomirror: up: interrupted: finished files committed; 1 partly fetched files kept for the next run to continue' \
    "$T/cold.err" || fail "the interrupt message does not say the in-flight file is kept"
[ -e "$T/mirror/big/big.bin" ] && fail "partial big.bin under its final name"
for f in $smalls; do
	cmp -s "$T/up/$f" "$T/mirror/$f" || fail "$f not committed"
	assert_eq "$(stat -c %Y "$T/mirror/$f")" "$(stat -c %Y "$T/up/$f")" "$f mtime"
done
assert_eq "$(manifest_sql "$T/state" up \
    "select group_concat(cast(path as text), ' ') from (select path from files where type = 102 order by path)")" \
    "s.txt small/a.txt small/b.txt small/c.bin small/sub/d.txt small/sub/e.bin" \
    "files in the manifest"
run=$(jfield run)
assert_eq "$(manifest_sql "$T/state" up "select status || '|' || error from runs where id = $run")" \
    "interrupted|stopped by SIGTERM" "run record"
# Only finished files are under final names: every regular file in the
# mirror is a small one or a temp file.
others=$(cd "$T/mirror" && find . -type f ! -name '.biomirror-tmp.*' -printf '%P\n' |
    LC_ALL=C sort | tr '\n' ' ')
assert_eq "$others" "s.txt small/a.txt small/b.txt small/c.bin small/sub/d.txt small/sub/e.bin " \
    "files under final names"
temps=$(find "$T/mirror" -name '.biomirror-tmp.*' | wc -l)
echo "# temp files left by the interrupted run: $temps"

# SIGTERM records the last finished ranges: the temp file is kept for
# the next run, which continues it.
assert_eq "$temps" 1 "temp files kept for resume"
assert_eq "$(manifest_sql "$T/state" up \
    "select cast(path as text) from partials")" big/big.bin "partial rows"

echo "# the next run continues the kept temp file and completes"
assert_exit 0 bm --json sync up
expect_counts 1 0 0 0
grep -q "1 partly fetched files of an earlier run to continue" "$LAST_ERR" ||
    fail "the kept temp file was not continued"
assert_trees_equal "$T/up" "$T/mirror"
no_temps "$T/mirror"

echo "# a new big.bin upstream, SIGTERM mid-transfer: the old copy stays"
cp -p "$T/mirror/big/big.bin" "$T/old-big.bin"
make_big_file "$T/up/big/big.bin" 200 second
touch -d '2023-03-04 05:06:07 UTC' "$T/up/big/big.bin"
printf 'also new\n' > "$T/up/s.txt"
touch -d '2023-03-04 05:06:08 UTC' "$T/up/s.txt"
slow_run_and_term update
assert_eq "$RC" 1 "exit status after SIGTERM"
assert_eq "$(jfield status)" interrupted "status"
assert_eq "$(jfield fetched)" 1 "fetched (s.txt)"
cmp -s "$T/old-big.bin" "$T/mirror/big/big.bin" ||
    fail "the final name does not hold the old complete big.bin"
assert_eq "$(stat -c %Y "$T/mirror/big/big.bin")" "$(stat -c %Y "$T/old-big.bin")" \
    "old big.bin mtime"
cmp -s "$T/up/s.txt" "$T/mirror/s.txt" || fail "s.txt not committed"
assert_eq "$(manifest_sql "$T/state" up \
    "select local_mtime / 1000000000 from files where cast(path as text) = 'big/big.bin'")" \
    "$(stat -c %Y "$T/old-big.bin")" "manifest still records the old big.bin"
temps=$(find "$T/mirror" -name '.biomirror-tmp.*' | wc -l)
assert_eq "$temps" 1 "temp files kept for resume"
assert_exit 0 bm --json sync up
expect_counts 1 0 0 0
grep -q "1 partly fetched files of an earlier run to continue" "$LAST_ERR" ||
    fail "the kept temp file was not continued"
assert_trees_equal "$T/up" "$T/mirror"
no_temps "$T/mirror"

echo "# history: the status column fits the longest word, interrupted"
assert_exit 0 bm history up
assert_eq "$(awk '{ print $3 }' "$LAST_OUT" | tr '\n' ' ')" \
    "ok interrupted ok interrupted " "history statuses"
grep -q '^ *[0-9]* [-0-9T:Z]* interrupted listed [0-9]*, ' "$LAST_OUT" ||
    fail "history: interrupted run line"
grep -q '^ *[0-9]* [-0-9T:Z]* ok          listed [0-9]*, ' "$LAST_OUT" ||
    fail "history: ok run line"
assert_eq "$(awk '{ print index($0, " listed ") }' "$LAST_OUT" | sort -u | wc -l)" 1 \
    "history: 'listed' in the same column on every line"
grep -q '; stopped by SIGTERM$' "$LAST_OUT" || fail "history: the reason"
assert_exit 0 bm --json history up
python3 - "$LAST_OUT" <<'PY' || fail "history --json"
import json, sys
r = json.load(open(sys.argv[1]))
assert [x["status"] for x in r] == ["ok", "interrupted", "ok", "interrupted"], r
assert r[1]["error"] == "stopped by SIGTERM", r[1]
PY

echo "# SIGTERM while a listing page is being retried (503, Retry-After: 30):"
echo "# interrupted, and the reason is the signal, not the page"
stop_servers
start_faultserver "$T/up" retry-after --pages --fail 100 --retry-after 30
write_conf "$FAULT_URL"
"$BM" -c "$T/bm.conf" --state-dir "$T/state-list" --json sync up \
    > "$T/list.out" 2> "$T/list.err" &
pid=$!
for _ in $(seq 1 100); do
	[ "$(fault_stat requests 2>/dev/null || echo 0)" -ge 1 ] && break
	sleep 0.05
done
[ "$(fault_stat requests)" -ge 1 ] || fail "the listing did not start"
kill -TERM "$pid"
wait "$pid"
assert_eq "$?" 1 "exit status after SIGTERM in the listing"
python3 - "$T/list.out" <<'PY' || { cat "$T/list.out" "$T/list.err" >&2; fail "SIGTERM in the listing: --json"; }
import json, sys
r = json.load(open(sys.argv[1]))[0]
assert r["status"] == "interrupted", r
assert [(e["op"], e["reason"]) for e in r["errors"]] == [("run", "stopped by SIGTERM")], r["errors"]
PY
echo PASS
