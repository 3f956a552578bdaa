#!/bin/bash
# The shipped units: systemd-analyze verify accepts them without a warning
# (on copies whose ExecStart points at the built binary; PID 1 need not be
# systemd), a skipped overlapping run (exit 75) is a success, and
# systemd-analyze security --offline=true scores the service at most 2.5;
# biomirror-serve.service the same (verify clean, exposure at most 2.5,
# read-only but its own state directory, stopped by SIGTERM).
. "$(dirname "$0")/lib.sh"
bm_setup
command -v systemd-analyze >/dev/null || fail "systemd-analyze is missing (package systemd)"
d=$T/units
mkdir -p "$d"
sed "s|@BINDIR@|$(dirname "$BM")|" systemd/biomirror@.service > "$d/biomirror@.service"
cp systemd/biomirror@.timer "$d/"
ln -s biomirror@.service "$d/biomirror@blast.service"
ln -s biomirror@.timer "$d/biomirror@blast.timer"
grep -q "^ExecStart=$BM sync %i\$" "$d/biomirror@.service" || fail "ExecStart not substituted"
grep -q '^SuccessExitStatus=75$' "$d/biomirror@.service" || fail "exit 75 is not a success"
grep -q '^Persistent=yes$' "$d/biomirror@.timer" || fail "the timer is not persistent"

(cd "$d" && timeout 120 systemd-analyze verify --man=no \
    ./biomirror@blast.service ./biomirror@blast.timer) > "$T/verify.out" 2>&1
rc=$?
cat "$T/verify.out"
assert_eq "$rc" 0 "systemd-analyze verify"
[ -s "$T/verify.out" ] && fail "systemd-analyze verify warned"

# A broken copy is caught: the check can fail.
sed 's/^ProtectHome=yes/ProtectHome=bogus/' "$d/biomirror@.service" > "$d/bad@.service"
ln -s bad@.service "$d/bad@x.service"
(cd "$d" && timeout 120 systemd-analyze verify --man=no ./bad@x.service) \
    > "$T/bad.out" 2>&1
grep -q 'bogus' "$T/bad.out" || fail "verify did not notice a bad value"

(cd "$d" && timeout 120 systemd-analyze security --offline=true \
    ./biomirror@blast.service) > "$T/security.out" 2>&1 ||
    { cat "$T/security.out"; fail "systemd-analyze security"; }
score=$(sed -n 's/.*Overall exposure level for biomirror@blast.service: \([0-9.]*\).*/\1/p' \
    "$T/security.out")
echo "# systemd-analyze security score: $score"
[ -n "$score" ] || fail "no score"
python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) <= 2.5 else 1)' "$score" ||
    fail "exposure $score is above 2.5"

sed "s|@BINDIR@|$(dirname "$BM")|" systemd/biomirror-serve.service > "$d/biomirror-serve.service"
grep -q "^ExecStart=$BM serve\$" "$d/biomirror-serve.service" || fail "serve: ExecStart"
grep -q '^ProtectSystem=strict$' "$d/biomirror-serve.service" || fail "serve: not read-only"
grep -q '^ReadWritePaths=' "$d/biomirror-serve.service" && fail "serve: writes outside its state"
(cd "$d" && timeout 120 systemd-analyze verify --man=no ./biomirror-serve.service) \
    > "$T/verify-serve.out" 2>&1
rc=$?
cat "$T/verify-serve.out"
assert_eq "$rc" 0 "systemd-analyze verify biomirror-serve.service"
[ -s "$T/verify-serve.out" ] && fail "systemd-analyze verify warned (serve)"
(cd "$d" && timeout 120 systemd-analyze security --offline=true \
    ./biomirror-serve.service) > "$T/security-serve.out" 2>&1 ||
    { cat "$T/security-serve.out"; fail "systemd-analyze security (serve)"; }
score=$(sed -n 's/.*Overall exposure level for biomirror-serve.service: \([0-9.]*\).*/\1/p' \
    "$T/security-serve.out")
echo "# biomirror-serve.service score: $score"
[ -n "$score" ] || fail "no score (serve)"
python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) <= 2.5 else 1)' "$score" ||
    fail "serve: exposure $score is above 2.5"
echo PASS
