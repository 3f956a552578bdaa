#!/bin/bash
# SIGTERM while the post_sync hook runs: the hook's process group gets
# SIGTERM (and SIGKILL 10 s later if it ignores it), biomirror exits 1
# (interrupted) with the run itself still ok and the hook's end reported
# as a post_sync error.  While the hook runs (the lock is held), status
# shows the mirror as running with biomirror's PID, and a second sync
# exits 75 naming it.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup
mkdir -p "$T/up" "$T/hook"
echo one > "$T/up/a.txt"
start_nginx "$T/up"
H=$T/hook
export HOOK_DIR=$H
# The hook records its shell's PID and its sleep's PID; on SIGTERM it
# notes it and exits 3; "done" is written only if it runs to its end.
cat > "$T/hook.sh" <<'SH'
#!/bin/sh
echo $$ > "$HOOK_DIR/pid"
trap 'echo term > "$HOOK_DIR/got-term"; exit 3' TERM
sleep 20 &
echo $! > "$HOOK_DIR/sleep.pid"
wait
echo done > "$HOOK_DIR/done"
SH
# Ignores SIGTERM (so does its sleep, which inherits the ignored signal).
cat > "$T/stubborn.sh" <<'SH'
#!/bin/sh
trap '' TERM
echo $$ > "$HOOK_DIR/pid"
sleep 30
echo done > "$HOOK_DIR/done"
SH
chmod 0755 "$T/hook.sh" "$T/stubborn.sh"
conf() {	# conf HOOK
	cat > "$T/bm.conf" <<CONF
[global]
state_dir = $T/state
[up]
source = $NGINX_URL
dest = $T/mirror
post_sync = $1
CONF
}

# sync_and_stop TAG: start a --json sync, wait until the hook runs, run
# the checks of "while the hook runs", SIGTERM biomirror, wait for it.
sync_and_stop() {
	local pid
	rm -f "$H"/*
	"$BM" -c "$T/bm.conf" --json sync up > "$T/$1.out" 2> "$T/$1.err" &
	pid=$!
	for _ in $(seq 1 100); do
		[ -s "$H/pid" ] && break
		sleep 0.1
	done
	[ -s "$H/pid" ] || { cat "$T/$1.err"; fail "$1: the hook did not start"; }
	HOOK_PID=$(cat "$H/pid")
	# The hook runs in a process group of its own, led by the shell
	# biomirror started.
	HOOK_PGID=$(ps -o pgid= -p "$HOOK_PID" | tr -d ' ')
	[ "$HOOK_PGID" != "$(ps -o pgid= -p "$pid" | tr -d ' ')" ] ||
	    fail "the hook shares biomirror's process group"
	assert_eq "$(ps -o ppid= -p "$HOOK_PGID" | tr -d ' ')" "$pid" \
	    "the hook's process group leader is biomirror's child"

	echo "# while the hook runs: status says running, with the PID"
	assert_exit 0 "$BM" -c "$T/bm.conf" status up
	grep -q "^up: last run [0-9]* at .*: ok in " "$LAST_OUT" ||
	    fail "status: the finished run"
	grep -q "^up: running now (pid $pid): run [0-9]* has ended, its post_sync hook or a new run is going on$" \
	    "$LAST_OUT" || fail "status text while the hook runs"
	assert_exit 0 "$BM" -c "$T/bm.conf" --json status up
	python3 - "$LAST_OUT" "$pid" <<'PY' || fail "status --json while the hook runs"
import json, sys
s = json.load(open(sys.argv[1]))[0]
assert s["pid"] == int(sys.argv[2]), s
assert s["last_run"]["status"] == "ok", s
PY
	assert_exit 75 "$BM" -c "$T/bm.conf" sync up
	grep -q "another run holds the lock (pid $pid)" "$LAST_ERR" ||
	    fail "second sync does not name the holder"

	kill -TERM "$pid"
	wait "$pid"
	RC=$?
	cat "$T/$1.out"
	sed 's/^/  stderr: /' "$T/$1.err"
	cp "$T/$1.out" "$T/last.out"
}

echo "# a hook that ends on SIGTERM"
conf "exec $T/hook.sh"	# exec: the hook is the shell biomirror started
sync_and_stop term
assert_eq "$RC" 1 "exit status (interrupted)"
json_ok "$T/last.out"
assert_eq "$(jfield status)" ok "the run itself is complete"
assert_eq "$(jfield fetched)" 1 "fetched"
assert_eq "$(jfield post_sync)" 3 "post_sync status in --json"
assert_eq "$(jerrors)" " post_sync" "the hook's stop is a reported error"
python3 - "$T/last.out" <<'PY' || fail "post_sync error reason"
import json, sys
e = json.load(open(sys.argv[1]))[0]["errors"][0]
want = "stopped by SIGTERM: SIGTERM sent to the hook; it exited with status 3"
assert e["reason"] == want, e
PY
[ -e "$H/got-term" ] || fail "the hook did not get SIGTERM"
[ -e "$H/done" ] && fail "the hook ran to its end"
# The hook's child (same process group) got SIGTERM too.
spid=$(cat "$H/sleep.pid")
for _ in $(seq 1 50); do
	kill -0 "$spid" 2>/dev/null || break
	sleep 0.1
done
kill -0 "$spid" 2>/dev/null && fail "the hook's sleep $spid survived"
grep -q '^biomirror: up: post_sync: stopped by SIGTERM: SIGTERM sent to the hook; it exited with status 3$' \
    "$T/term.err" || fail "the hook's stop is not logged"
assert_eq "$(manifest_sql "$T/state" up "SELECT status || '|' || error FROM runs WHERE id = 1")" \
    "ok|post_sync: stopped by SIGTERM: SIGTERM sent to the hook; it exited with status 3" \
    "run record"
echo "# status after: ok, with the hook's error, not running"
assert_exit 0 "$BM" -c "$T/bm.conf" status up
grep -q 'ok .*; post_sync: stopped by SIGTERM' "$LAST_OUT" ||
    fail "status does not show the hook's stop"
grep -q running "$LAST_OUT" && fail "status still says running"

echo "# a hook that ignores SIGTERM: SIGKILL 10 s later"
conf "exec $T/stubborn.sh"
echo two > "$T/up/b.txt"
sync_and_stop kill
assert_eq "$RC" 1 "exit status (interrupted)"
assert_eq "$(jfield status)" ok "the run itself is complete"
assert_eq "$(jfield post_sync)" 137 "post_sync status: killed by SIGKILL"
python3 - "$T/last.out" <<'PY' || fail "post_sync error reason"
import json, sys
e = json.load(open(sys.argv[1]))[0]["errors"][0]
want = ("stopped by SIGTERM: SIGTERM sent to the hook, SIGKILL 10 s later; "
        "it was killed by signal 9")
assert e == {"path": "", "op": "post_sync", "reason": want}, e
PY
[ -e "$H/done" ] && fail "the stubborn hook ran to its end"
kill -0 "$HOOK_PID" 2>/dev/null && fail "the stubborn hook survived"
# SIGKILL has been sent: give init a moment to reap what it killed.
for _ in $(seq 1 50); do
	pgrep -g "$HOOK_PGID" > /dev/null || break
	sleep 0.1
done
pgrep -g "$HOOK_PGID" > /dev/null && fail "a process of the hook's group survived"
echo PASS
