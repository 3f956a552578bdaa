#!/bin/bash
# The habits of an rsync/lftp/rclone user (issue 23 items 2, 3, 4, 6, 9):
#   global options (-c, --state-dir, --json, -v, -q) before or after the
#   command; an unknown option is one line with the --help hint.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup
mkdir -p "$T/up/sub"
printf 'a\n' > "$T/up/a.txt"
printf 'bb\n' > "$T/up/sub/b.txt"
start_nginx "$T/up"
write_conf "$NGINX_URL"

echo "# item 2: global options after the command"
assert_exit 0 "$BM" sync --source "$NGINX_URL" --dest "$T/adhoc" \
    --state-dir "$T/state" -q
[ -f "$T/adhoc/sub/b.txt" ] || fail "ad-hoc sync with --state-dir after sync"
[ -d "$T/state/manifests" ] || fail "--state-dir after the command ignored"
assert_exit 0 "$BM" sync up -c "$T/bm.conf" --state-dir="$T/state" --json
assert_eq "$(jfield fetched)" 2 "sync up -c FILE --json: fetched"
assert_exit 0 "$BM" status -c "$T/bm.conf" up --state-dir "$T/state" --json
assert_eq "$(jfield mirror)" up "status -c FILE: mirror"
assert_exit 0 "$BM" --config="$T/bm.conf" ls up --state-dir "$T/state"
grep -q 'sub/b.txt' "$LAST_OUT" || fail "ls with --state-dir after ls"
echo "# item 2: an unknown option is one line and the hint"
assert_exit 2 "$BM" --bogus sync
assert_eq "$(cat "$LAST_ERR")" "biomirror: unknown option --bogus (try --help)" \
    "unknown global option"
assert_exit 2 "$BM" -c
assert_eq "$(cat "$LAST_ERR")" "biomirror: option -c needs a value (try --help)" \
    "-c without a value"
assert_exit 2 "$BM"
assert_eq "$(cat "$LAST_ERR")" "biomirror: no command given (try --help)" \
    "no command"

echo "# item 3: [global] holds the mirrors' defaults; a section key replaces"
printf 'x\n' > "$T/up/c.dat"
cat > "$T/g.conf" <<CONF
[global]
delete = yes
include = *.txt
include = sub/
concurrency = 2

[g1]
source = $NGINX_URL
dest = $T/g1

[g2]
source = $NGINX_URL
dest = $T/g2
include = *.dat
delete = no
CONF
printf 'old\n' > "$T/up/old.txt"
printf 'old\n' > "$T/up/old.dat"
assert_exit 0 "$BM" sync -c "$T/g.conf" --state-dir "$T/state" -q
rm "$T/up/old.txt" "$T/up/old.dat"
assert_exit 0 "$BM" sync -c "$T/g.conf" --state-dir "$T/state" --json
[ -f "$T/g1/a.txt" ] && [ -f "$T/g1/sub/b.txt" ] && [ ! -e "$T/g1/c.dat" ] ||
    fail "g1 did not take [global]'s includes: $(cd "$T/g1" && find . | sort)"
[ ! -e "$T/g1/old.txt" ] || fail "g1 did not take [global]'s delete = yes"
[ -f "$T/g2/c.dat" ] && [ ! -e "$T/g2/a.txt" ] ||
    fail "g2's include did not replace [global]'s: $(cd "$T/g2" && find . | sort)"
[ -f "$T/g2/old.dat" ] || fail "g2's delete = no did not replace [global]'s"
assert_exit 0 "$BM" check-config -c "$T/g.conf" -v
grep -qxF '  delete = yes  ([global], line 2)' "$LAST_OUT" ||
    fail "check-config -v: g1's delete from [global]"
grep -qxF '  delete = no  ([g2], line 15)' "$LAST_OUT" ||
    fail "check-config -v: g2's delete from its section"
grep -qxF '  streams = 4  (built-in default)' "$LAST_OUT" ||
    fail "check-config -v: a built-in default"
assert_eq "$(grep -c '^  include = ' "$LAST_OUT")" 3 \
    "check-config -v: include lines (g1: 2 from [global], g2: its 1)"

echo "PASS"
