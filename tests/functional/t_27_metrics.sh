#!/bin/bash
# metrics_file: after each run (ok or failed, not a plan) the mirror's
# gauges are in the file, in valid Prometheus text format (checked line by
# line by tests/tools/promparse.py, and by promtool when installed); mirrors
# sharing the file keep each other's samples, also when they run at once;
# other programs' lines in the file are kept, samples of mirrors removed
# from the config are dropped; check-config refuses a directory, a path in
# a dest (or its snapshot directory) or in the state directory.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup
PARSE=$BM_TOOLS/promparse.py

# The checker itself must reject what the format forbids.
printf '# HELP a h\n# TYPE a gauge\na{m="x"} 1\na{m="x"} 2\n' > "$T/bad1.prom"
printf 'a 1\n' > "$T/bad2.prom"
printf '# HELP a h\n# TYPE a gauge\na{m="\\q"} 1\n' > "$T/bad3.prom"
printf '# HELP a h\n# TYPE a gauge\na 1' > "$T/bad4.prom"
for b in 1 2 3 4; do
	python3 "$PARSE" "$T/bad$b.prom" > /dev/null 2>&1 &&
	    fail "promparse accepted bad$b.prom"
done

mkdir -p "$T/up/d" "$T/metrics"
echo one > "$T/up/a.txt"; echo two > "$T/up/d/b.txt"; echo three > "$T/up/c.txt"
start_nginx "$T/up"
M=$T/metrics/biomirror.prom
dead=$(free_port)	# nothing listens there: the listing fails
conf() {	# conf SOURCE_OF_A
	{
		printf '[global]\nstate_dir = %s/state\n' "$T"
		printf '[a]\nsource = %s\ndest = %s/ma\nmetrics_file = %s\n' "$1" "$T" "$M"
		printf '[b]\nsource = %s\ndest = %s/mb\nmetrics_file = %s\n' "$NGINX_URL" "$T" "$M"
		for i in 1 2 3 4; do
			printf '[c%s]\nsource = %s\ndest = %s/mc%s\nmetrics_file = %s\n' \
			    "$i" "$NGINX_URL" "$T" "$i" "$M"
		done
	} > "$T/bm.conf"
}
bm() { "$BM" -c "$T/bm.conf" "$@"; }
# val NAME MIRROR: the value of one sample (after a strict parse).
val() {
	python3 "$PARSE" "$M" > "$T/parsed" || fail "metrics file is not valid"
	awk -v n="$1" -v l="mirror=$2" '$1 == n && $2 == l { print $3 }' "$T/parsed"
}
conf "$NGINX_URL"

echo "# a plan writes nothing"
assert_exit 0 bm plan a
[ -e "$M" ] && fail "a plan wrote the metrics file"

echo "# a first run of a"
assert_exit 0 bm --json sync a
assert_eq "$(val biomirror_last_run_fetched_files a)" 3 "a fetched"
assert_eq "$(val biomirror_last_run_fetched_bytes a)" "$(jfield bytes)" "a bytes"
assert_eq "$(val biomirror_last_run_listed_files a)" "$(jfield listed)" "a listed"
assert_eq "$(val biomirror_last_run_success a)" 1 "a success"
assert_eq "$(val biomirror_last_run_exit_code a)" 0 "a exit code"
assert_eq "$(val biomirror_last_run_failed_files a)" 0 "a failed"
assert_eq "$(val biomirror_last_run_touched_files a)" 0 "a touched"
assert_eq "$(val biomirror_last_run_deleted_files a)" 0 "a deleted"
ok1=$(val biomirror_last_success_timestamp_seconds a)
assert_eq "$(val biomirror_last_run_timestamp_seconds a)" "$ok1" \
    "an ok run is the last success"
# The run's end as the manifest records it, in seconds.
end=$(manifest_sql "$T/state" a "SELECT end_ns / 1000000000 FROM runs WHERE id = 1")
assert_eq "${ok1%.*}" "$end" "last run timestamp = the run's end"
[ -n "$(val biomirror_last_run_duration_seconds a)" ] || fail "no duration"
assert_eq "$(grep -c '^biomirror_' "$M")" 11 "11 samples for one mirror"
assert_eq "$(grep -c '^# HELP ' "$M")" 11 "one HELP per family"
assert_eq "$(grep -c '^# TYPE biomirror_[a-z_]* gauge$' "$M")" 11 "gauges"
assert_eq "$(stat -c %a "$M")" 644 "metrics file mode"
cp "$M" "$T/after-a"

echo "# b shares the file: a's samples are kept"
assert_exit 0 bm sync b
assert_eq "$(val biomirror_last_run_fetched_files b)" 3 "b fetched"
assert_eq "$(grep -c '^biomirror_' "$M")" 22 "22 samples for two mirrors"
diff <(grep 'mirror="a"' "$T/after-a") <(grep 'mirror="a"' "$M") ||
    fail "b's run changed a's samples"

echo "# a no-change run, then a failed run of a (listing fails: exit 3)"
assert_exit 0 bm sync a
assert_eq "$(val biomirror_last_run_fetched_files a)" 0 "nothing fetched"
ok2=$(val biomirror_last_success_timestamp_seconds a)
[ "$ok2" != "$ok1" ] || fail "last success did not move on an ok run"
cp "$M" "$T/before-fail"
conf "http://127.0.0.1:$dead/"
assert_exit 3 bm sync --retries 0 a
conf "$NGINX_URL"
assert_eq "$(val biomirror_last_run_success a)" 0 "failed run: success 0"
assert_eq "$(val biomirror_last_run_exit_code a)" 3 "failed run: exit code 3"
assert_eq "$(val biomirror_last_success_timestamp_seconds a)" "$ok2" \
    "a failed run keeps the last success"
last=$(val biomirror_last_run_timestamp_seconds a)
python3 -c "import sys; sys.exit(not float(sys.argv[1]) > float(sys.argv[2]))" \
    "$last" "$ok2" || fail "last run timestamp did not move: $last <= $ok2"
diff <(grep 'mirror="b"' "$T/before-fail") <(grep 'mirror="b"' "$M") ||
    fail "a's run changed b's samples"

echo "# four mirrors finishing at once: none loses the others' samples"
pids=""
for i in 1 2 3 4; do
	bm sync "c$i" > "$T/c$i.out" 2> "$T/c$i.err" &
	pids="$pids $!"
done
for p in $pids; do
	wait "$p" || fail "a concurrent run failed: $(cat "$T"/c*.err)"
done
for x in a b c1 c2 c3 c4; do
	[ -n "$(val biomirror_last_run_success "$x")" ] ||
	    fail "mirror $x missing from the metrics file"
done
assert_eq "$(grep -c '^biomirror_' "$M")" 66 "66 samples for six mirrors"
assert_eq "$(ls -A "$T/metrics" | LC_ALL=C sort | tr '\n' ' ')" \
    "biomirror.prom biomirror.prom.lock " "only the file and its lock (no temp files)"

echo "# a metrics directory that is gone: logged, the sync still succeeds"
conf "$NGINX_URL"
sed -i "s|^metrics_file = .*|metrics_file = $T/gone/bm.prom|" "$T/bm.conf"
echo four > "$T/up/e.txt"
assert_exit 0 bm sync a
grep -q "^biomirror: a: metrics_file: $T/gone/bm.prom: open lock file: No such file or directory" \
    "$LAST_ERR" || fail "missing metrics directory not logged"

echo "# a shared file: other programs' lines are kept, first and in order"
conf "$NGINX_URL"
{
	printf '# written by the backup job\n'
	printf '# HELP backup_last_success_seconds Last backup.\n'
	printf '# TYPE backup_last_success_seconds gauge\n'
	printf 'backup_last_success_seconds{host="x"} 1.7e+09\n'
	cat "$M"
} > "$T/shared.prom"
mv "$T/shared.prom" "$M"
assert_exit 0 bm sync b
assert_eq "$(head -4 "$M")" "# written by the backup job
# HELP backup_last_success_seconds Last backup.
# TYPE backup_last_success_seconds gauge
backup_last_success_seconds{host=\"x\"} 1.7e+09" "foreign lines kept"
python3 "$PARSE" "$M" > /dev/null || fail "shared metrics file is not valid"
assert_eq "$(grep -c '^biomirror_' "$M")" 66 "66 samples for six mirrors"
assert_eq "$(grep -c '^# HELP biomirror_' "$M")" 11 "one HELP per family"

echo "# mirrors removed from the config: their samples go at the next write"
{
	printf '[global]\nstate_dir = %s/state\n' "$T"
	printf '[b]\nsource = %s\ndest = %s/mb\nmetrics_file = %s\n' "$NGINX_URL" "$T" "$M"
	printf '[c1]\nsource = %s\ndest = %s/mc1\nmetrics_file = %s\n' "$NGINX_URL" "$T" "$M"
} > "$T/bm.conf"
assert_exit 0 bm sync b
assert_eq "$(grep '^biomirror_last_run_success{' "$M" | tr '\n' ' ')" \
    'biomirror_last_run_success{mirror="b"} 1 biomirror_last_run_success{mirror="c1"} 1 ' \
    "only configured mirrors' samples"
assert_eq "$(grep -c '^biomirror_' "$M")" 22 "22 samples for two mirrors"
grep -q '^backup_last_success_seconds{host="x"} 1.7e+09$' "$M" ||
    fail "foreign sample lost"
python3 "$PARSE" "$M" > /dev/null || fail "metrics file is not valid"

echo "# check-config refuses a directory, a path in a dest or in state_dir"
mkdir -p "$T/mb"
for bad in "$T/metrics:an existing directory, not a file name" \
    "$T/mb/bm.prom:is inside dest $T/mb of [b]: a sync would delete it or leave it behind" \
    "$T/mb.biomirror/bm.prom:is inside dest $T/mb of [b] (its snapshot directory): a sync would delete it or leave it behind" \
    "$T/state/bm.prom:is inside state_dir $T/state: the state directory holds only biomirror's manifests and locks"; do
	path=${bad%%:*}
	why=${bad#*:}
	printf '[global]\nstate_dir = %s/state\n[b]\nsource = %s\ndest = %s/mb\nmetrics_file = %s\n' \
	    "$T" "$NGINX_URL" "$T" "$path" > "$T/bad.conf"
	assert_exit 2 "$BM" -c "$T/bad.conf" check-config
	case $why in
	an\ *) want="biomirror: $T/bad.conf:6: metrics_file = $path: $why" ;;
	*) want="biomirror: $T/bad.conf:6: metrics_file $path of [b] $why" ;;
	esac
	assert_eq "$(cat "$LAST_ERR")" "$want" "check-config message"
done

if command -v promtool > /dev/null 2>&1; then
	promtool check metrics < "$M" || fail "promtool check metrics"
	echo "# promtool check metrics: ok"
else
	echo "# promtool not installed: the strict parser is the check"
fi
echo PASS
