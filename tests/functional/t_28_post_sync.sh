#!/bin/bash
# post_sync: runs after an ok run that changed something, with the
# BIOMIRROR_* environment, stdin /dev/null, stdout kept out of --json and
# no inherited descriptor (no lock); not after a no-change, dry or failed
# run; a failing hook is logged and reported, the exit status stays 0;
# a post_sync line that inih would cut at ' ;' is a config error.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup
mkdir -p "$T/up/d"
echo one > "$T/up/a.txt"; echo two > "$T/up/d/b.txt"; echo three > "$T/up/c.txt"
start_nginx "$T/up"
dead=$(free_port)
H=$T/hook
mkdir -p "$H"
# The command line records the descriptors a command inherits; the script
# records its environment and its stdin, and
# prints to stdout (which must not reach --json).
cat > "$T/hook.sh" <<'SH'
#!/bin/sh
n=$(cat "$HOOK_DIR/count" 2>/dev/null || echo 0)
n=$((n + 1))
echo "$n" > "$HOOK_DIR/count"
env | grep '^BIOMIRROR_' | LC_ALL=C sort > "$HOOK_DIR/env.$n"
cat > "$HOOK_DIR/stdin.$n"
echo "hook stdout line"
exit "${HOOK_EXIT:-0}"
SH
chmod 0755 "$T/hook.sh"
# The descriptors a program started by the hook's shell inherits (fstat
# opens nothing, so what it finds was there at exec).
cat > "$T/fds.py" <<'PY'
import os, sys
fds = []
for fd in range(0, 4096):
    try:
        os.fstat(fd)
        fds.append(str(fd))
    except OSError:
        pass
open(sys.argv[1], "w").write(" ".join(fds) + "\n")
PY
export HOOK_DIR=$H
conf() {	# conf SOURCE
	cat > "$T/bm.conf" <<CONF
[global]
state_dir = $T/state
[up]
source = $1
dest = $T/mirror
delete = yes
post_sync = python3 "$T/fds.py" "\$HOOK_DIR/fds" && BIOMIRROR_FAKE=x "$T/hook.sh" extra
CONF
}
bm() { "$BM" -c "$T/bm.conf" "$@"; }
hooks() { cat "$H/count" 2>/dev/null || echo 0; }
conf "$NGINX_URL"
export BIOMIRROR_STALE=from-outside	# must not reach the hook

echo "# a plan: no hook"
assert_exit 0 bm plan up
assert_eq "$(hooks)" 0 "hook ran on a plan"

echo "# first run fetches 3 files: the hook runs once"
assert_exit 0 bm --json sync up
assert_eq "$(hooks)" 1 "hook runs"
json_ok "$LAST_OUT"
assert_eq "$(jfield post_sync)" 0 "post_sync exit status in --json"
grep -q 'hook stdout line' "$LAST_OUT" && fail "the hook's stdout reached --json"
grep -q 'hook stdout line' "$LAST_ERR" || fail "the hook's stdout is not in the log"
grep -q '^biomirror: up: post_sync: exited with status 0$' "$LAST_ERR" ||
    fail "hook status not logged"
bytes=$(jfield bytes)
secs=$(grep '^BIOMIRROR_SECONDS=' "$H/env.1" | cut -d= -f2)
start=$(manifest_sql "$T/state" up "SELECT start_ns / 1000000000 FROM runs WHERE id = 1")
end=$(manifest_sql "$T/state" up "SELECT end_ns / 1000000000 FROM runs WHERE id = 1")
cat > "$T/want.env" <<ENV
BIOMIRROR_BYTES_FETCHED=$bytes
BIOMIRROR_DEST=$T/mirror
BIOMIRROR_END=$end
BIOMIRROR_FILES_DELETED=0
BIOMIRROR_FILES_FETCHED=3
BIOMIRROR_FILES_LISTED=4
BIOMIRROR_FILES_TOUCHED=0
BIOMIRROR_MIRROR=up
BIOMIRROR_RUN_ID=1
BIOMIRROR_SECONDS=$secs
BIOMIRROR_SOURCE=$NGINX_URL
BIOMIRROR_START=$start
BIOMIRROR_STATE_DIR=$T/state
BIOMIRROR_STATUS=ok
ENV
# BIOMIRROR_FAKE is set by the command line itself: the shell ran it.
echo "BIOMIRROR_FAKE=x" >> "$T/want.env"
LC_ALL=C sort -o "$T/want.env" "$T/want.env"
diff -u "$T/want.env" "$H/env.1" || fail "hook environment"
[[ $secs =~ ^[0-9]+\.[0-9]{3}$ ]] || fail "BIOMIRROR_SECONDS=$secs"
# The test's shell passes descriptors above 2 to biomirror (bash's saved
# ones): none of them, nor any of biomirror's, reaches the hook.
assert_eq "$(cat "$H/fds")" "0 1 2" "the hook inherits only 0, 1, 2"
[ -s "$H/stdin.1" ] && fail "the hook's stdin is not empty"
[ -e "$H/stdin.1" ] || fail "the hook did not run to the end"

echo "# nothing changed: no hook"
assert_exit 0 bm --json sync up
assert_eq "$(hooks)" 1 "hook ran on a no-change run"
assert_eq "$(jfield post_sync)" None "post_sync null when not run"

echo "# a delete and a fetch: the hook runs with those counts"
rm "$T/up/c.txt"
echo changed > "$T/up/a.txt"; touch -d '2024-01-01 UTC' "$T/up/a.txt"
assert_exit 0 bm sync up
assert_eq "$(hooks)" 2 "hook runs after deletes"
grep -qx 'BIOMIRROR_FILES_DELETED=1' "$H/env.2" || fail "deleted count"
grep -qx 'BIOMIRROR_FILES_FETCHED=1' "$H/env.2" || fail "fetched count"
grep -qx 'BIOMIRROR_RUN_ID=3' "$H/env.2" || fail "run id"

echo "# a failed run (listing fails): no hook"
echo new > "$T/up/new.txt"
conf "http://127.0.0.1:$dead/"
assert_exit 3 bm sync --retries 0 up
assert_eq "$(hooks)" 2 "hook ran after a failed run"

echo "# a partial run (a file fails): no hook"
conf "$NGINX_URL"
chmod 0600 "$T/up/new.txt"	# nginx (www-data) answers 403
assert_exit 1 bm sync --retries 0 up
assert_eq "$(hooks)" 2 "hook ran after a partial run"
chmod 0644 "$T/up/new.txt"

echo "# a failing hook: logged, in --json and status, exit status still 0"
export HOOK_EXIT=7
assert_exit 0 bm --json sync up
assert_eq "$(hooks)" 3 "failing hook ran"
assert_eq "$(jfield post_sync)" 7 "post_sync exit status 7 in --json"
assert_eq "$(jfield status)" ok "the run is still ok"
assert_eq "$(jerrors)" " post_sync" "the hook's failure is a reported error"
grep -q '^biomirror: up: post_sync: exited with status 7$' "$LAST_ERR" ||
    fail "failing hook not logged"
assert_exit 0 bm status up
grep -q 'ok .*; post_sync: exited with status 7$' "$LAST_OUT" ||
    fail "status does not show the hook failure"
unset HOOK_EXIT

echo "# a hook that cannot be found: exit 127 from the shell, logged"
sed -i 's|^post_sync = .*|post_sync = /nonexistent/hook|' "$T/bm.conf"
echo newer > "$T/up/newer.txt"
assert_exit 0 bm --json sync up
assert_eq "$(jfield post_sync)" 127 "missing hook: 127"
grep -q '^biomirror: up: post_sync: exited with status 127$' "$LAST_ERR" ||
    fail "missing hook not logged"

echo "# ' ;' in post_sync would start an inih comment: a config error"
sed -i 's|^post_sync = .*|post_sync = echo first ; echo second|' "$T/bm.conf"
line=$(grep -n '^post_sync' "$T/bm.conf" | cut -d: -f1)
assert_exit 2 bm check-config
assert_eq "$(cat "$LAST_ERR")" "biomirror: $T/bm.conf:$line: post_sync: ' ;' starts a comment in this file, so the command would be cut to 'echo first': put the command in a script and name the script here (a comment goes on a line of its own)" \
    "check-config message"
n=$(hooks)
assert_exit 2 bm sync up
assert_eq "$(hooks)" "$n" "a hook ran from a refused config"
echo PASS
