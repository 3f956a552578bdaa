#!/bin/bash
# A manifest whose files rows another program rewrote with TEXT paths
# (sqlite3: CAST(path AS TEXT)), nginx, real runs:
#  - sync (and status) exit 2 with the one message that says the file is
#    damaged and names the command that rebuilds it; the file is left
#    byte for byte; nothing is fetched;
#  - that command, run as printed (resync NAME --adopt), keeps the file
#    as NAME.db.corrupt-TIMESTAMP and rebuilds the files rows from the
#    mirror: every file adopted, none fetched, no TEXT path left; the
#    next sync exits 0 and fetches nothing (it used to fail the same way:
#    the open found nothing wrong, so resync --adopt did not rebuild,
#    and its own diff met the TEXT row again);
#  - the same with every row TEXT and a check stamp that vouches for the
#    damaged bytes (a copy put back with its xattr): the sync's deferred
#    check trusts the stamp and its diff finds the damage (the same
#    message; the failed run is recorded in the file, which the check
#    passed); the rebuild's open finds it all the same (the paths are
#    checked at every open, one b-tree descent);
#  - a copied row whose BLOB path holds a NUL byte (every sync fetched
#    f3.bin and deleted it, exit 0), and one of "../escape" under a
#    stamp (every sync failed "delete: unsafe path"): the same refusal
#    with its own reason, from the integrity check at the open or the
#    diff, and the same rebuild (resync --adopt scans every path).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup

mkdir -p "$T/up/sub"
for i in 1 2 3 4; do
	head -c $((i * 300)) /dev/urandom > "$T/up/f$i.bin"
done
printf 'text\n' > "$T/up/sub/t.txt"
find "$T/up" -exec touch -d '2022-03-04 05:06:07 UTC' {} +
chmod -R a+rX "$T/up"
start_nginx "$T/up"
cat > "$T/bm.conf" <<CONF
[global]
state_dir = $T/state

[up]
source = $NGINX_URL
dest = $T/mirror
CONF
# Not sync_lib's bm (--state-dir): the remedy the message prints is then
# the bare "biomirror -c FILE resync up --adopt" the test runs as printed.
bm() {
	"$BM" -c "$T/bm.conf" "$@"
}
db=$(manifest_db "$T/state" up)
why="damaged: a files row's path is not a BLOB (written by another program)"
want_of() {
	want="biomirror: up: $db: $why; the manifest is damaged: rebuild it from the files in the mirror, without fetching them again, with: biomirror -c $T/bm.conf resync up --adopt (the damaged file is kept as up.db.corrupt-TIMESTAMP)"
}
want_of

# gets_since N: the files (not directory pages) nginx served after line N.
gets_since() {
	log_since "$1" "$NGINX_ACCESS_LOG" | nginx_gets /dev/stdin | grep -vc '/$'
}

# refused CMD...: CMD exits 2 with exactly $want on stderr; the manifest
# is unchanged (unless $written is set); nothing was fetched.
written=
refused() {
	local sum mark
	sum=$(sha256sum < "$db")
	mark=$(wc -l < "$NGINX_ACCESS_LOG")
	assert_exit 2 "$@"
	assert_eq "$(cat "$LAST_ERR")" "$want" "$*: stderr"
	[ -n "$written" ] ||
	    assert_eq "$(sha256sum < "$db")" "$sum" "$*: the damaged manifest"
	assert_eq "$(gets_since "$mark")" 0 "$*: files fetched"
}

# rebuild: run the command the last message gave: the damaged file kept,
# the 5 files adopted, none fetched, no TEXT path; then a sync that
# fetches nothing.
rebuild() {
	local cmd sum mark kept
	cmd=$(sed -n 's/.* again, with: biomirror \(.*\) (the damaged file is kept as .*/\1/p' "$LAST_ERR")
	assert_eq "$cmd" "-c $T/bm.conf resync up --adopt" "the command"
	sum=$(sha256sum < "$db")
	mark=$(wc -l < "$NGINX_ACCESS_LOG")
	eval "assert_exit 0 \"\$BM\" --json $cmd"
	assert_eq "$(jfield fetched) $(jfield adopted) $(jfield failed)" "0 5 0" "rebuilt"
	grep -qF "biomirror: up: $db: $why: moving the damaged manifest aside and rebuilding it from the files in $T/mirror" \
	    "$LAST_ERR" || fail "rebuild: $(cat "$LAST_ERR")"
	kept=$(ls "$db".corrupt-*[0-9]Z) || fail "no $db.corrupt-TIMESTAMP"
	assert_eq "$(jfield kept_manifest)" "$kept" "kept_manifest"
	assert_eq "$(sha256sum < "$kept")" "$sum" "the kept damaged file"
	rm -f "$kept" "$kept-wal" "$kept-shm"
	assert_eq "$(gets_since "$mark")" 0 "files fetched by the rebuild"
	assert_eq "$(manifest_sql "$T/state" up "SELECT count(*) FROM files WHERE type = 102 AND typeof(path) = 'blob'") $(manifest_sql "$T/state" up "SELECT count(*) FROM files WHERE typeof(path) != 'blob'")" \
	    "5 0" "files rows after the rebuild (BLOB, not BLOB)"
	mark=$(wc -l < "$NGINX_ACCESS_LOG")
	assert_exit 0 bm --json sync up
	expect_counts 0 0 0 0
	assert_eq "$(gets_since "$mark")" 0 "files fetched by the sync after the rebuild"
	assert_trees_equal "$T/up" "$T/mirror"
}

assert_exit 0 bm --json sync up
expect_counts 5 0 0 0

echo "# one row's path rewritten as TEXT"
sqlite3 "$db" "UPDATE files SET path = CAST(path AS TEXT) WHERE path = CAST('f2.bin' AS BLOB)"
rm -f "$db-wal" "$db-shm"	# what the sqlite3 shell left (empty)
assert_eq "$(manifest_sql "$T/state" up "SELECT count(*) FROM files WHERE typeof(path) = 'text'")" 1 \
    "TEXT rows"
refused bm sync up
refused bm status up
rebuild

echo "# every row TEXT, under a check stamp that vouches for those bytes"
# user.biomirror.check = "sha256:HEX UNIX" (manifest.c): this file's
# digest, checked now.  A run that fails removes it: set it again.
stamp() {
	python3 - "$db" <<'PY'
import hashlib, os, sys, time
db = sys.argv[1]
d = hashlib.sha256(open(db, "rb").read()).hexdigest()
os.setxattr(db, "user.biomirror.check", ("sha256:%s %d" % (d, int(time.time()))).encode())
PY
}
sqlite3 "$db" "UPDATE files SET path = CAST(path AS TEXT)"
rm -f "$db-wal" "$db-shm"
stamp
written=1 refused bm sync up
stamp
rebuild

# copy_row HEX: a copy of f3.bin's files row whose path is X'HEX'.
copy_row() {
	sqlite3 "$db" "CREATE TEMP TABLE t AS SELECT * FROM files WHERE path = CAST('f3.bin' AS BLOB);
	    UPDATE t SET path = X'$1'; INSERT INTO files SELECT * FROM t;"
	rm -f "$db-wal" "$db-shm"
}
why="damaged: a files row's path is not a safe relative path (a NUL byte, '..', an absolute or empty path: written by another program)"
want_of
echo "# a BLOB path with a NUL byte (\"f3.bin\\0x\"): every sync fetched and deleted f3.bin"
copy_row 66332E62696E0078
refused bm sync up
[ -f "$T/mirror/f3.bin" ] || fail "f3.bin gone"
rebuild
echo "# a BLOB path that escapes (\"../escape\"), under a stamp: the diff finds it"
copy_row 2E2E2F657363617065
stamp
written=1 refused bm sync up
stamp
rebuild
echo PASS
