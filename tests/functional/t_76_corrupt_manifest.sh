#!/bin/bash
# A damaged manifest (nginx, real runs), issue 18 item 3:
#  - one page in the middle overwritten with random bytes (the root page
#    of the events table, which ls and verify never read), the header
#    overwritten (all of it, and past its magic string: "unsupported
#    file format"), a file of 0 bytes: ls, verify, status (text and
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
#    stays the one published; a plan of adoptions alone records them);
#  - (break-it brk2) reading a damaged manifest makes no -wal or -shm
#    beside it; resync --adopt --dry-run shows the 11 adoptions and
#    changes nothing; the rebuilt manifest numbers its runs on from the
#    old one's and --json names the kept file (kept_manifest); a table
#    dropped and another program's database are damaged too (same
#    remedy, same rebuild); a directory, a symlink to nothing, a file
#    the user may not read are named with their errno (exit 2) and never
#    replaced; a -wal holding a commit whose header is overwritten is
#    warned about and left byte for byte by status/ls/history, and a
#    sync keeps a copy of it (NAME.db-wal.corrupt-TIMESTAMP); a file
#    adopted while its listed minute had not ended is asked for with its
#    mtime (a 304), not fetched again.
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
	local db=$1 why=$2 sum mark side=
	shift 2
	sum=$(sha256sum < "$db")
	mark=$(wc -l < "$NGINX_ACCESS_LOG")
	{ [ -e "$db-wal" ] || [ -e "$db-shm" ]; } && side=1
	assert_exit 2 "$@"
	[ -n "$side" ] || { [ ! -e "$db-wal" ] && [ ! -e "$db-shm" ]; } ||
	    fail "$*: made a -wal or -shm beside the damaged manifest"
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
	assert_eq "$(jf kept_manifest)" "$(ls "$db".corrupt-*[0-9]Z)" "$name: kept_manifest"
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
runs=$(sqlite3 -readonly "$db" "select rootpage from sqlite_master where name = 'runs'")
rm -f "$db-wal" "$db-shm"	# what the sqlite3 shell left (empty)
cp "$db" "$T/sound.db"
dd if=/dev/urandom of="$db" bs=4096 seek=$((page - 1)) count=1 conv=notrunc status=none
all_refused up "$db" "quick_check: "
# A sync checks the manifest beside the listing (manifest_open_run): its
# run record is written before the check's verdict, into the -wal only.
# With the runs table's root damaged, that first write meets the damage.
echo "# the runs table's root: the sync's first write meets the damage"
cp "$db" "$T/events.db"
cp "$T/sound.db" "$db"
dd if=/dev/urandom of="$db" bs=4096 seek=$((runs - 1)) count=1 conv=notrunc status=none
refused "$db" "quick_check: " bm --json sync up
assert_eq "$(jf status)" failed "sync --json status (runs root damaged)"
cp "$T/events.db" "$db"
echo "# resync --adopt --dry-run: what the rebuild would do, nothing done"
sum=$(sha256sum < "$db")
mark=$(wc -l < "$NGINX_ACCESS_LOG")
assert_exit 0 bm --json resync up --adopt --dry-run
python3 - "$LAST_OUT" <<'PY' || fail "resync --adopt --dry-run: $(cat "$LAST_OUT")"
import json, sys
r = json.load(open(sys.argv[1]))[0]
ops = sorted({a["op"] for a in r["actions"] if a["op"] != "mkdir"})
assert r["dry_run"] is True and ops == ["adopt"], r
assert len([a for a in r["actions"] if a["op"] == "adopt"]) == 11, r
PY
grep -qF "a dry run of the rebuild: what resync --adopt would adopt and fetch" "$LAST_ERR" ||
    fail "dry run: $(cat "$LAST_ERR")"
assert_eq "$(sha256sum < "$db")" "$sum" "the damaged manifest after a dry run"
assert_eq "$(ls "$T/state/manifests/")" "up.db" "files beside it after a dry run"
assert_eq "$(log_since "$mark" "$NGINX_ACCESS_LOG" | nginx_gets /dev/stdin | grep -vc '/$')" 0 \
    "files fetched by the dry run"
refused "$db" "quick_check: " bm status up	# the command to rebuild it
rebuild up "$db" 11
# Its runs (1, the first sync) could be read: the rebuild is run 2.
assert_eq "$(jf run)" 2 "the rebuild's run id"
grep -qF "with the history of runs 1 to 1; new runs are numbered from 2" "$LAST_ERR" ||
    fail "no word of the run history: $(cat "$LAST_ERR")"
assert_exit 0 bm --json sync up
assert_eq "$(jf fetched touched deleted failed)" "0 0 0 0" "sync after the rebuild"
assert_trees_equal "$T/up" "$T/mirror"

echo "# the header"
dd if=/dev/urandom of="$db" bs=100 count=1 conv=notrunc status=none
all_refused up "$db" "file is not a database"
rebuild up "$db" 11 wal

echo "# the header past its magic string (bytes 40-99: the schema format)"
# (brk19: SQLite says "unsupported file format", not "not a database".)
printf '\377\377\377\377\377' | dd of="$db" bs=1 seek=44 conv=notrunc status=none
all_refused up "$db" "unsupported file format"
rebuild up "$db" 11

echo "# 0 bytes: never started afresh"
: > "$db"
all_refused up "$db" "empty (0 bytes)"
assert_eq "$(stat -c %s "$db")" 0 "the 0-byte manifest"
rebuild up "$db" 11
assert_exit 0 bm --json sync up
assert_eq "$(jf fetched touched deleted failed)" "0 0 0 0" "sync after the rebuild"

echo "# a table dropped; another program's database"
# (A reader and a run: every command opens it the same way.)
sqlite3 "$db" 'drop table files'
refused "$db" "damaged schema: no such table: main.files" bm status up
refused "$db" "damaged schema: no such table: main.files" bm sync up
rebuild up "$db" 11
rm "$db"
sqlite3 "$db" 'create table x(a)'
refused "$db" "not a biomirror manifest (application_id 0x00000000)" bm ls up
refused "$db" "not a biomirror manifest (application_id 0x00000000)" bm sync up
rebuild up "$db" 11

echo "# no file to open: named with its errno, never replaced"
mv "$db" "$T/up.db.saved"
mkdir "$db"
for c in status ls sync; do
	assert_exit 2 bm "$c" up
	grep -qF "up: $db: Is a directory" "$LAST_ERR" || fail "$c: $(cat "$LAST_ERR")"
done
[ -d "$db" ] || fail "the directory was replaced"
rmdir "$db"
ln -s "$T/nowhere.db" "$db"
mark=$(wc -l < "$NGINX_ACCESS_LOG")
for c in status sync; do
	assert_exit 2 bm "$c" up
	grep -qF "up: $db: a symlink to $T/nowhere.db: No such file or directory" "$LAST_ERR" ||
	    fail "$c: $(cat "$LAST_ERR")"
done
[ -L "$db" ] && [ ! -e "$T/nowhere.db" ] || fail "the dangling symlink was replaced"
assert_eq "$(log_since "$mark" "$NGINX_ACCESS_LOG" | nginx_gets /dev/stdin | grep -vc '/$')" 0 \
    "files fetched with a dangling manifest symlink"
rm "$db"
mv "$T/up.db.saved" "$db"
chmod 0600 "$db"
assert_exit 2 runuser -u nobody -- "$BM" -c "$T/bm.conf" status up
grep -qF "up: $db: Permission denied" "$LAST_ERR" || fail "nobody: $(cat "$LAST_ERR")"
chmod 0644 "$db"

echo "# a -wal with a commit in it, its header overwritten"
python3 - "$db" <<'PY'
import os, sqlite3, sys
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("update runs set status = 'partial' where id = (select max(id) from runs)")
os._exit(0)	# no close: the commit stays in the -wal
PY
assert_exit 1 bm status up	# read with the -wal: the last run is partial
[ -s "$db-wal" ] || fail "status removed a -wal"
dd if=/dev/urandom of="$db-wal" bs=32 count=1 conv=notrunc status=none
wsum=$(sha256sum < "$db-wal")
for c in status ls history; do
	assert_exit 0 bm "$c" up
	grep -qF "up: $db-wal: a bad header: the commits in it, if any, cannot be read, and the manifest is read without them; it is left as it is" \
	    "$LAST_ERR" || fail "$c: $(cat "$LAST_ERR")"
	assert_eq "$(sha256sum < "$db-wal")" "$wsum" "$c: the -wal"
done
assert_exit 0 bm --json sync up
grep -qF "up: $db-wal: a bad header: " "$LAST_ERR" && grep -qF "; a copy is kept as $db-wal.corrupt-" "$LAST_ERR" ||
    fail "sync: $(cat "$LAST_ERR")"
assert_eq "$(sha256sum < "$(ls "$db"-wal.corrupt-*[0-9]Z)")" "$wsum" "the kept copy of the -wal"
rm -f "$db"-wal.corrupt-*

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

echo "# adopted before its listed minute ended: asked for with its mtime"
# A time in the future keeps the listed minute from ending during the test.
mkdir "$T/up/min"
printf 'minute\n' > "$T/up/min/m.txt"
touch -d "@$(($(date +%s) + 600))" "$T/up/min/m.txt"
chmod -R a+rX "$T/up/min"
printf '\n[min]\nsource = %smin/\ndest = %s\n' "$NGINX_URL" "$T/minm" >> "$T/bm.conf"
assert_exit 0 bm --json sync min
assert_eq "$(jf fetched)" 1 "min: first sync"
mdb=$(manifest_db "$T/state" min)
dd if=/dev/urandom of="$mdb" bs=100 count=1 conv=notrunc status=none
assert_exit 0 bm --json resync min --adopt
assert_eq "$(jf fetched adopted)" "0 1" "min: rebuilt"
rm -f "$mdb".corrupt-*
mark=$(wc -l < "$NGINX_ACCESS_LOG")
assert_exit 0 bm --json sync min
assert_eq "$(jf fetched failed)" "0 0" "min: sync after the rebuild"
assert_eq "$(log_since "$mark" "$NGINX_ACCESS_LOG" | grep -c '"GET /min/m.txt HTTP/1.1" 304 ')" 1 \
    "min: a 304 for the adopted file"

echo "# the check stamp: what a sync's close left, trusted for 7 days"
# user.biomirror.check = "sha256:HEX UNIX": the file's digest as the last
# close left it and when quick_check last read it whole (manifest.c).
stamp() {
	python3 - "$@" <<'PY'
import hashlib, os, sys, time
db, op = sys.argv[1], sys.argv[2]
if op == "get":
	print(os.getxattr(db, "user.biomirror.check").decode())
elif op == "want":
	print("sha256:" + hashlib.sha256(open(db, "rb").read()).hexdigest())
else:	# set AGE_S: this file's digest, its check AGE_S seconds ago
	d = hashlib.sha256(open(db, "rb").read()).hexdigest()
	v = "sha256:%s %d" % (d, int(time.time()) - int(sys.argv[3]))
	os.setxattr(db, "user.biomirror.check", v.encode())
PY
}
assert_exit 0 bm --json sync min
st=$(stamp "$mdb" get) || fail "min: no check stamp after a sync"
assert_eq "${st% *}" "$(stamp "$mdb" want)" "min: the stamp's digest"
[ "$((${st#* } - $(date +%s)))" -le 0 ] && [ "$((${st#* } - $(date +%s)))" -gt -600 ] ||
    fail "min: the stamp's check time: $st"
# Damaged after the close: the digest differs, the check runs.
cp "$mdb" "$T/min-sound.db"
page=$(($(stat -c %s "$mdb") / 4096 / 2 + 1))
dd if=/dev/urandom of="$mdb" bs=4096 seek=$((page - 1)) count=1 conv=notrunc status=none
python3 -c 'import os, sys; os.setxattr(sys.argv[1], "user.biomirror.check", sys.argv[2].encode())' "$mdb" "$st"
refused "$mdb" "quick_check: " bm --json sync min
# A stamp naming the damaged bytes themselves, but from a check 8 days
# ago: not trusted, the check runs.
stamp "$mdb" set $((8 * 86400))
refused "$mdb" "quick_check: " bm --json sync min
cat "$T/min-sound.db" > "$mdb"
assert_exit 0 bm --json sync min
assert_eq "$(jf fetched failed)" "0 0" "min: sync after the stamp cases"

echo "# damaged while a run holds it open: the close does not vouch for it (brk19)"
# The run's post_sync hook runs before its close; it damages the zones
# table's root, a page a no-change run never reads.
cat > "$T/damage.sh" <<SH
#!/bin/sh
dd if=/dev/urandom of="$mdb" bs=4096 seek=\$(($(sqlite3 -readonly "$mdb" "select rootpage from sqlite_master where name = 'zones'") - 1)) count=1 conv=notrunc status=none
SH
rm -f "$mdb-wal" "$mdb-shm"	# what the sqlite3 shell left (empty)
chmod +x "$T/damage.sh"
printf 'post_sync = %s\n' "$T/damage.sh" >> "$T/bm.conf"
printf 'hooked\n' > "$T/up/min/h.txt"	# post_sync runs when something changed
chmod a+r "$T/up/min/h.txt"
assert_exit 0 bm --json sync min
assert_eq "$(jf fetched)" 1 "min: the hooked sync"
refused "$mdb" "quick_check: " bm status min
refused "$mdb" "quick_check: " bm ls min

stop_servers
[ -z "$(bm_leftovers)" ] || fail "processes left: $(bm_leftovers)"
echo "PASS"
