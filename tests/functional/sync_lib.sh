# Helpers shared by the sync tests (sourced after lib.sh).

# write_conf URL: a config for mirror "up" into $T/bm.conf.
write_conf() {
	cat > "$T/bm.conf" <<CONF
[global]
state_dir = $T/state-from-config

[up]
source = $1
dest = $T/mirror
delete = yes
concurrency = 8
CONF
}

# bm ARGS...: biomirror with this test's config and state dir.
bm() {
	"$BM" -c "$T/bm.conf" --state-dir "$T/state" "$@"
}

# jfield KEY: KEY of the first object in the JSON array in $T/last.out.
jfield() {
	python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[0][sys.argv[2]])' \
	    "$T/last.out" "$1"
}

# expect_counts FETCHED TOUCHED DELETED FAILED: checks the last --json run.
expect_counts() {
	assert_eq "$(jfield fetched)" "$1" "fetched"
	assert_eq "$(jfield touched)" "$2" "touched"
	assert_eq "$(jfield deleted)" "$3" "deleted"
	assert_eq "$(jfield failed)" "$4" "failed"
}

# no_temps DIR: no temp file of ours is left in DIR.
no_temps() {
	local left
	left=$(find "$1" -name '.biomirror-tmp.*' | head -5)
	[ -z "$left" ] || fail "temp files left: $left"
}

# tree_sum DIR: a fingerprint of names, sizes, mtimes and bytes.
tree_sum() {
	(cd "$1" && find . -printf '%y %s %T@ %P\n' | LC_ALL=C sort &&
	    find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r cat) |
	    sha256sum | cut -d' ' -f1
}

# --- helpers for t_14..t_18 ---

# log_since N LOG: the lines of LOG after line N.
log_since() {
	tail -n +"$(($1 + 1))" "$2"
}

# log_requests N LOG: "METHOD STATUS PATH" of each request logged after
# line N (nginx and Apache test formats alike), in order.
log_requests() {
	log_since "$1" "$2" |
	    sed -n 's/^[^"]*"\([A-Z]*\) \([^ ]*\) HTTP[^"]*" \([0-9]*\) .*/\1 \3 \2/p'
}

# jerrors: "path op" of each error of the first object in $T/last.out,
# one a line, sorted.
jerrors() {
	python3 -c 'import json,sys
for e in json.load(open(sys.argv[1]))[0]["errors"]:
    print(e["path"], e["op"])' "$T/last.out" | LC_ALL=C sort
}

# json_ok FILE: FILE is one valid JSON document (strict: no NaN, valid
# UTF-8).
json_ok() {
	python3 -c 'import json,sys
raw = open(sys.argv[1], "rb").read()
json.loads(raw.decode("utf-8", errors="strict"),
           parse_constant=lambda c: sys.exit("bad constant " + c))' "$1" ||
	    fail "not valid JSON: $1"
}

# rss_run WHAT SOURCE DEST ARGS...: one ad-hoc biomirror run (--json) under
# time(1), with its own state dir; its peak RSS (KiB) is echoed, after
# the --json peak_rss_kib was checked against it.
rss_run() {
	local what=$1 src=$2 dest=$3 max kib
	shift 3
	/usr/bin/time -f %M -o "$T/maxrss" "$BM" --state-dir "$T/state.$what" \
	    --json "$@" --source "$src" --dest "$dest" > "$T/last.out" \
	    2> "$T/last.err" || fail "$what: exit $? ($(tail -3 "$T/last.err"))"
	max=$(tail -n 1 "$T/maxrss")
	kib=$(jfield peak_rss_kib) || fail "$what: no peak_rss_kib in --json"
	[ "$kib" -gt 0 ] && [ "$kib" -le "$max" ] ||
	    fail "$what: peak_rss_kib $kib, time(1) says $max"
	echo "$max"
}

# rss_baseline: the peak RSS (KiB) of a no-change run of ${NGINX_URL}empty/
# into $T/mirror/empty (the second of two runs: the first makes the state).
rss_baseline() {
	rss_run empty "${NGINX_URL}empty/" "$T/mirror/empty" sync > /dev/null &&
	    rss_run empty "${NGINX_URL}empty/" "$T/mirror/empty" sync
}
