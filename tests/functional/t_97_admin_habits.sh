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

echo "PASS"
