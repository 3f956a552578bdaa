#!/bin/bash
# hook_timeout: a post_sync hook still running after hook_timeout seconds
# gets SIGTERM to its process group (and SIGKILL 10 s later if anything
# of it is still there); that is a post_sync error ("timed out after N s:
# ..."), the run stays ok and exits 0 (a failing hook), the lock is
# released and no process of the hook's group is left.  hook_timeout = 0
# is no limit; a bad value is a config error (exit 2).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup
mkdir -p "$T/up" "$T/hook"
echo one > "$T/up/a.txt"
start_nginx "$T/up"
H=$T/hook
export HOOK_DIR=$H
# Records its PID (the leader of the hook's process group: exec'd by the
# shell biomirror started) and its sleep's PID, then sleeps; "done" only
# if it runs to its end.
cat > "$T/hook.sh" <<'SH'
#!/bin/sh
echo $$ > "$HOOK_DIR/pid"
[ "$HOOK_IGNORE_TERM" = 1 ] && trap '' TERM
sleep "$HOOK_SLEEP" &
echo $! > "$HOOK_DIR/sleep.pid"
wait
echo done > "$HOOK_DIR/done"
SH
chmod 0755 "$T/hook.sh"
conf() {	# conf HOOK_TIMEOUT
	cat > "$T/bm.conf" <<CONF
[global]
state_dir = $T/state
[up]
source = $NGINX_URL
dest = $T/mirror
post_sync = exec $T/hook.sh
hook_timeout = $1
CONF
}
bm() { "$BM" -c "$T/bm.conf" "$@"; }
n=0
change() {	# a new upstream file, so that the next run runs the hook
	n=$((n + 1))
	echo "$n" > "$T/up/f$n.txt"
	rm -f "$H"/*
}
# group_gone PGID: no process of that group is left (SIGKILL has been
# sent: give the kernel a moment to reap what it killed).
group_gone() {
	for _ in $(seq 1 50); do
		pgrep -g "$1" > /dev/null || return 0
		sleep 0.1
	done
	pgrep -g "$1" >&2
	fail "a process of the hook's group $1 survived"
}
# reason: the reason of the only error of the last --json run.
reason() {
	python3 -c 'import json,sys
e = json.load(open(sys.argv[1]))[0]["errors"]
assert len(e) == 1 and e[0]["op"] == "post_sync" and e[0]["path"] == "", e
print(e[0]["reason"])' "$T/last.out"
}

echo "# bad values: config errors"
for v in -1 1x 86401; do
	conf "$v"
	assert_exit 2 bm check-config
	assert_eq "$(cat "$LAST_ERR")" "biomirror: $T/bm.conf:7: hook_timeout = $v: expected an integer from 0 to 86400" \
	    "check-config message for $v"
done

echo "# a hook that ends on SIGTERM, after hook_timeout = 1"
conf 1
change
export HOOK_SLEEP=30 HOOK_IGNORE_TERM=0
assert_exit 0 bm --json sync up
json_ok "$LAST_OUT"
assert_eq "$(jfield status)" ok "the run itself is complete"
assert_eq "$(jfield fetched)" 2 "fetched"
assert_eq "$(jfield post_sync)" 143 "post_sync status: killed by SIGTERM"
want="timed out after 1 s: SIGTERM sent to the hook; it was killed by signal 15"
assert_eq "$(reason)" "$want" "post_sync error"
grep -qxF "biomirror: up: post_sync: $want" "$LAST_ERR" ||
    fail "the timeout is not logged"
[ -e "$H/done" ] && fail "the hook ran to its end"
pgid=$(cat "$H/pid")
kill -0 "$(cat "$H/sleep.pid")" 2>/dev/null && fail "the hook's sleep survived"
group_gone "$pgid"
assert_eq "$(manifest_sql "$T/state" up "SELECT status || '|' || error FROM runs ORDER BY id DESC LIMIT 1")" \
    "ok|post_sync: $want" "run record"
assert_exit 0 bm status up
grep -qF "ok " "$LAST_OUT" && grep -qF "; post_sync: $want" "$LAST_OUT" ||
    fail "status does not show the timeout"
grep -q running "$LAST_OUT" && fail "status still says running"
echo "# the lock is released: the next sync runs (nothing changed)"
assert_exit 0 bm --json sync up
assert_eq "$(jfield post_sync)" None "no hook on a no-change run"

echo "# a hook that ignores SIGTERM: SIGKILL 10 s after the SIGTERM"
change
export HOOK_IGNORE_TERM=1
assert_exit 0 bm --json sync up
assert_eq "$(jfield status)" ok "the run itself is complete"
assert_eq "$(jfield post_sync)" 137 "post_sync status: killed by SIGKILL"
want="timed out after 1 s: SIGTERM sent to the hook, SIGKILL 10 s later; it was killed by signal 9"
assert_eq "$(reason)" "$want" "post_sync error"
[ -e "$H/done" ] && fail "the stubborn hook ran to its end"
group_gone "$(cat "$H/pid")"
assert_exit 0 bm sync up

echo "# hook_timeout = 0: no limit, a hook of 2 s runs to its end"
conf 0
change
export HOOK_SLEEP=2 HOOK_IGNORE_TERM=0
assert_exit 0 bm --json sync up
assert_eq "$(jfield post_sync)" 0 "post_sync exit status"
assert_eq "$(jerrors)" "" "no error"
[ -e "$H/done" ] || fail "the hook did not run to its end"
echo PASS
