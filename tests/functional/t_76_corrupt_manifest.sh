#!/bin/bash
# A damaged manifest (nginx, real runs), issue 18 item 3:
#  - one page in the middle overwritten with random bytes (the root page
#    of the events table, which ls and verify never read), the header
#    overwritten, a file of 0 bytes: ls, verify, status (text and
#    --json), history, plan and sync each exit 2 with one message that
#    names the file once and the command that rebuilds it; the file is
#    left byte for byte; nothing is fetched and a 0-byte file is never
#    started afresh;
#  - that command, run as printed (resync NAME --adopt), moves the file
#    aside with its -wal and -shm (NAME.db.corrupt-TIMESTAMP, unchanged)
#    and rebuilds the manifest from the mirror: 11 files adopted, none
#    fetched (nginx access log); the next sync fetches nothing;
#  - the same for an ad-hoc mirror (--source/--dest in the command) and
#    a publish = set mirror (its files in the published snapshot, which
#    stays the one published; a plan of adoptions alone records them).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup

mkdir -p "$T/up/sub"
for i in 1 2 3 4 5 6 7 8; do
	head -c $((i * 300)) /dev/urandom > "$T/up/f$i.bin"
done
for i in 1 2 3; do
	printf 'text %s\n' "$i" > "$T/up/sub/t$i.txt"
done
find "$T/up" -exec touch -d '2022-03-04 05:06:07 UTC' {} +
chmod -R a+rX "$T/up"
start_nginx "$T/up"
cat > "$T/bm.conf" <<CONF
[global]
state_dir = $T/state

[up]
source = $NGINX_URL
dest = $T/mirror

[set]
source = $NGINX_URL
dest = $T/setm/db
publish = set
exclude = sub/
CONF
bm() {
	"$BM" -c "$T/bm.conf" "$@"
}

# jf KEY...: those fields of the first object of the last --json output
# (one python3 start: it costs more than the runs).
jf() {
	python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))[0]
print(" ".join(str(r.get(k)) for k in sys.argv[2:]))' "$T/last.out" "$@"
}

# refused DB WHY CMD...: CMD exits 2; its stderr names DB once, with WHY,
# and the rebuild command; DB is unchanged; nothing was fetched.
refused() {
	local db=$1 why=$2 sum mark
	shift 2
	sum=$(sha256sum < "$db")
	mark=$(wc -l < "$NGINX_ACCESS_LOG")
	assert_exit 2 "$@"
	grep -qF "$db: $why" "$LAST_ERR" && grep -qF "; the manifest is damaged: rebuild it from the files in the mirror, without fetching them again, with: " \
	    "$LAST_ERR" || fail "$*: no damaged-manifest message: $(cat "$LAST_ERR")"
	grep -qF "resync" "$LAST_ERR" && grep -qF -- "--adopt (the damaged file is kept as " "$LAST_ERR" ||
	    fail "$*: no remedy: $(cat "$LAST_ERR")"
	assert_eq "$(grep -oF "$db" "$LAST_ERR" | wc -l)" 1 "$*: times the file is named"
	assert_eq "$(sha256sum < "$db")" "$sum" "$*: the damaged manifest"
	assert_eq "$(log_since "$mark" "$NGINX_ACCESS_LOG" | nginx_gets /dev/stdin | grep -vc '/$')" 0 \
	    "$*: files fetched"
}

# all_refused NAME DB WHY: every command that reads NAME's manifest.
all_refused() {
	local name=$1 db=$2 why=$3
	refused "$db" "$why" bm ls "$name"
	[ -s "$LAST_OUT" ] && fail "ls printed rows of a damaged manifest"
	refused "$db" "$why" bm verify "$name"
	refused "$db" "$why" bm status "$name"
	refused "$db" "$why" bm history "$name"
	refused "$db" "$why" bm plan "$name"
	refused "$db" "$why" bm --json sync "$name"
	assert_eq "$(jf status)" failed "sync --json status"
	refused "$db" "$why" bm --json status "$name"
	python3 - "$LAST_OUT" "$db: $why" <<'PY' || fail "status --json"
import json, sys
r = json.load(open(sys.argv[1]))[0]
assert r["last_run"] is None and r["error"].startswith(sys.argv[2]), r
assert "; the manifest is damaged: rebuild it" in r["error"], r
PY
}

# rebuild NAME DB N [wal]: run the command the last message gave; it
# keeps the damaged file (with "wal": and a -wal, -shm beside it) and
# adopts the mirror's N files.
rebuild() {
	local name=$1 db=$2 n=$3 wal=${4:-} cmd mark sum kept
	cmd=$(sed -n 's/.* again, with: biomirror \(.*\) (the damaged file is kept as .*/\1/p' "$LAST_ERR" | head -1)
	[ -n "$cmd" ] || fail "no command in: $(cat "$LAST_ERR")"
	sum=$(sha256sum < "$db")
	if [ -n "$wal" ]; then
		printf 'wal\n' > "$db-wal"
		printf 'shm\n' > "$db-shm"
	fi
	mark=$(wc -l < "$NGINX_ACCESS_LOG")
	eval "assert_exit 0 \"\$BM\" --json $cmd"
	assert_eq "$(jf fetched adopted failed)" "0 $n 0" "$name: rebuilt"
	assert_eq "$(log_since "$mark" "$NGINX_ACCESS_LOG" | nginx_gets /dev/stdin | grep -vc '/$')" 0 \
	    "$name: files fetched by the rebuild"
	kept=$(ls "$db".corrupt-*[0-9]Z) || fail "$name: no $db.corrupt-TIMESTAMP"
	assert_eq "$(sha256sum < "$kept")" "$sum" "$name: the kept damaged file"
	if [ -n "$wal" ]; then
		# SQLite rewrites the -shm (an index of the WAL), never the -wal.
		assert_eq "$(cat "$kept-wal")" wal "$name: the -wal kept beside it"
		[ -f "$kept-shm" ] || fail "$name: no -shm beside the kept file"
		[ -e "$db-wal" ] && [ "$(cat "$db-wal")" = wal ] && fail "$name: the old -wal is beside the new manifest"
	fi
	rm -f "$kept" "$kept-wal" "$kept-shm"
	assert_eq "$(sqlite3 -readonly "$db" "select count(*) from files where type = 102")" "$n" \
	    "$name: files in the new manifest"
}

echo "# a page in the middle: the events table's root"
assert_exit 0 bm --json sync up
assert_eq "$(jf fetched touched deleted failed)" "11 0 0 0" "first sync"
db=$(manifest_db "$T/state" up)
page=$(sqlite3 -readonly "$db" "select rootpage from sqlite_master where name = 'events'")
[ "$page" -gt 1 ] && [ "$page" -lt "$(($(stat -c %s "$db") / 4096))" ] ||
    fail "events root page $page is not in the middle"
dd if=/dev/urandom of="$db" bs=4096 seek=$((page - 1)) count=1 conv=notrunc status=none
all_refused up "$db" "quick_check: "
rebuild up "$db" 11
assert_exit 0 bm --json sync up
assert_eq "$(jf fetched touched deleted failed)" "0 0 0 0" "sync after the rebuild"
assert_trees_equal "$T/up" "$T/mirror"

echo "# the header"
dd if=/dev/urandom of="$db" bs=100 count=1 conv=notrunc status=none
all_refused up "$db" "file is not a database"
rebuild up "$db" 11 wal

echo "# 0 bytes: never started afresh"
: > "$db"
all_refused up "$db" "empty (0 bytes)"
assert_eq "$(stat -c %s "$db")" 0 "the 0-byte manifest"
rebuild up "$db" 11
assert_exit 0 bm --json sync up
assert_eq "$(jf fetched touched deleted failed)" "0 0 0 0" "sync after the rebuild"

echo "# an ad-hoc mirror"
A=(--state-dir "$T/state" sync --source "$NGINX_URL" --dest "$T/adhoc")
assert_exit 0 "$BM" --json "${A[@]}"
assert_eq "$(jf fetched touched deleted failed)" "11 0 0 0" "first sync"
adb=$(ls "$T/state/manifests/"adhoc-*.db)
dd if=/dev/urandom of="$adb" bs=100 count=1 conv=notrunc status=none
refused "$adb" "file is not a database" "$BM" --json "${A[@]}"
grep -qF "resync --source $NGINX_URL --dest $T/adhoc --adopt" "$LAST_ERR" ||
    fail "ad-hoc: the command does not name --source and --dest"
rebuild adhoc "$adb" 11
assert_exit 0 "$BM" --json "${A[@]}"
assert_eq "$(jf fetched touched deleted failed)" "0 0 0 0" "sync after the rebuild"
assert_trees_equal "$T/up" "$T/adhoc"

echo "# publish = set: the files are in the published snapshot"
echo "# (no directory: the plan adopts, and has nothing else to do)"
assert_exit 0 bm --json sync set
assert_eq "$(jf fetched touched deleted failed)" "8 0 0 0" "first sync"
snap=$(readlink "$T/setm/db")
sdb=$(manifest_db "$T/state" set)
dd if=/dev/urandom of="$sdb" bs=100 count=1 conv=notrunc status=none
refused "$sdb" "file is not a database" bm sync set
rebuild set "$sdb" 8
assert_exit 0 bm --json sync set
assert_eq "$(jf fetched touched deleted failed)" "0 0 0 0" "sync after the rebuild"
assert_eq "$(readlink "$T/setm/db")" "$snap" "the published snapshot"
diff -r -x sub "$T/up" "$T/setm/db/" || fail "the published snapshot differs"

stop_servers
[ -z "$(bm_leftovers)" ] || fail "processes left: $(bm_leftovers)"
echo "PASS"
