#!/bin/bash
# The habits of an rsync/lftp/rclone user (issue 23 items 2, 3, 4, 6, 9):
#   2: global options (-c, --state-dir, --json, -v, -q) before or after the
#      command; an unknown option is one line with the --help hint.
#   3: [global] holds mirror defaults; a section key (and its include
#      lines) replaces them; check-config -v says where each came from.
#   4: --no-delete and --no-hook for one run; -q prints nothing on
#      success (the hook's output is an info log line); -v one line per
#      file acted on, -vv also the requests.
#   6: ad-hoc --name: shown and accepted by status and history, refused
#      when a configured mirror has it; the manifest stays keyed by dest.
#   9: plan NAME NAME; history marks a resync and what it adopted; status
#      durations and sizes; an include-only mirror makes no empty
#      directory; a directory as the config file gives its errno.
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
# item 9: an include-only mirror makes no directory its includes leave empty
[ ! -e "$T/g2/sub" ] || fail "g2 (include = *.dat) created the empty directory sub"
assert_exit 0 "$BM" check-config -c "$T/g.conf" -v
grep -qxF '  delete = yes  ([global], line 2)' "$LAST_OUT" ||
    fail "check-config -v: g1's delete from [global]"
grep -qxF '  delete = no  ([g2], line 15)' "$LAST_OUT" ||
    fail "check-config -v: g2's delete from its section"
grep -qxF '  streams = 4  (built-in default)' "$LAST_OUT" ||
    fail "check-config -v: a built-in default"
assert_eq "$(grep -c '^  include = ' "$LAST_OUT")" 3 \
    "check-config -v: include lines (g1: 2 from [global], g2: its 1)"

echo "# item 4: --no-KEY for one run; -q prints nothing; -v one line per file"
cat > "$T/h.conf" <<CONF
[global]
delete = yes
max_delete = 50%
post_sync = echo hook said hello

[h]
source = $NGINX_URL
dest = $T/h
CONF
assert_exit 0 "$BM" -c "$T/h.conf" --state-dir "$T/state" sync h -q
assert_eq "$(cat "$LAST_OUT")" "" "-q: no summary"
assert_eq "$(cat "$LAST_ERR")" "" "-q: no log lines (the hook's output is info)"
printf 'new\n' > "$T/up/new.txt"
assert_exit 0 "$BM" -c "$T/h.conf" --state-dir "$T/state" sync h
grep -qx 'biomirror: h: post_sync: hook said hello' "$LAST_ERR" ||
    fail "the hook's output is not logged as a line of its own"
rm "$T/up/new.txt"
printf 'more\n' > "$T/up/more.txt"
assert_exit 0 "$BM" -c "$T/h.conf" --state-dir "$T/state" sync h --no-delete \
    --no-hook -v
[ -f "$T/h/new.txt" ] || fail "--no-delete: new.txt deleted"
grep -q 'hook said hello' "$LAST_ERR" && fail "--no-hook: the hook ran"
grep -qx 'biomirror: fetched  more.txt  5 B' "$LAST_ERR" ||
    fail "-v: no line for the file fetched"
grep -q 'request: ' "$LAST_ERR" && fail "-v shows the requests (that is -vv)"
rm "$T/up/more.txt"
assert_exit 0 "$BM" -c "$T/h.conf" --state-dir "$T/state" sync h -vv
grep -qx 'biomirror: deleted  more.txt' "$LAST_ERR" ||
    fail "-vv: no line for the file deleted"
grep -qx 'biomirror: deleted  new.txt' "$LAST_ERR" ||
    fail "-vv: new.txt not deleted (delete = yes from [global])"
grep -q "^biomirror: request: ${NGINX_URL}\$" "$LAST_ERR" ||
    fail "-vv: the listing request is not shown"

echo "# item 6: ad-hoc mirrors take --name; a configured name is refused"
assert_exit 0 "$BM" -c "$T/bm.conf" --state-dir "$T/state" sync \
    --source "$NGINX_URL" --dest "$T/named" --name scratch -q
assert_exit 2 "$BM" -c "$T/bm.conf" --state-dir "$T/state" sync \
    --source "$NGINX_URL" --dest "$T/named2" --name up
assert_eq "$(cat "$LAST_ERR")" "biomirror: sync: --name up: a mirror in $T/bm.conf has that name" \
    "--name of a configured mirror"
[ ! -e "$T/named2" ] || fail "a refused --name still synced"
assert_exit 0 "$BM" -c "$T/bm.conf" --state-dir "$T/state" status scratch
key=$(sed -n 's/^\(adhoc-[0-9a-f]*\): ad-hoc mirror scratch: .*/\1/p' "$LAST_OUT")
[ -n "$key" ] || fail "status NAME: no ad-hoc line"
grep -qxF "$key: ad-hoc mirror scratch: $NGINX_URL -> $T/named" "$LAST_OUT" ||
    fail "status: the ad-hoc mirror's source and destination"
[ -f "$T/state/manifests/$key.db" ] || fail "the manifest is not keyed by the destination"
assert_exit 0 "$BM" -c "$T/bm.conf" --state-dir "$T/state" --json status
python3 - "$LAST_OUT" "$key" "$NGINX_URL" "$T/named" <<'PY' || fail "status --json: ad-hoc fields"
import json, sys
a = json.load(open(sys.argv[1]))
o = [x for x in a if x["mirror"] == sys.argv[2]][0]
assert (o["name"], o["source"], o["dest"]) == ("scratch", sys.argv[3], sys.argv[4]), o
PY
assert_exit 0 "$BM" -c "$T/bm.conf" --state-dir "$T/state" history scratch
head -1 "$LAST_OUT" | grep -qxF "$key: ad-hoc mirror scratch: $NGINX_URL -> $T/named" ||
    fail "history: the ad-hoc mirror's label"

echo "# item 9: plan takes several names; history says resync and adopted"
assert_exit 0 "$BM" -c "$T/g.conf" --state-dir "$T/state" plan g1 g2
grep -q '^g1: plan ok: ' "$LAST_OUT" && grep -q '^g2: plan ok: ' "$LAST_OUT" ||
    fail "plan g1 g2: both plans"
mkdir -p "$T/adopt"
cp -p "$T/up/a.txt" "$T/adopt/a.txt"
assert_exit 0 "$BM" --state-dir "$T/state" resync --source "$NGINX_URL" \
    --dest "$T/adopt" --adopt --name adopted -q
assert_exit 0 "$BM" --state-dir "$T/state" history adopted
grep -q ' ok  *resync, adopted 1 file: listed ' "$LAST_OUT" ||
    fail "history: the resync and what it adopted"
assert_exit 0 "$BM" --state-dir "$T/state" status adopted
grep -Eq ': ok in [0-9.]+s, fetched [0-9]+ files? \([0-9.]+ (B|KiB)' "$LAST_OUT" ||
    fail "status: duration and bytes"
grep -q 'fetched 1 files' "$LAST_OUT" && fail "status: fetched 1 files"

echo "# break-it 3: options by what was typed, not getopt's codes"
assert_exit 2 "$BM" --state-dir "$T/state" plan --source "$NGINX_URL" \
    --dest "$T/opt" --delete=yes
assert_eq "$(cat "$LAST_ERR")" "biomirror: plan: --delete=yes: takes no value (try --help)" \
    "--delete=yes"
assert_exit 2 "$BM" --state-dir "$T/state" sync --source "$NGINX_URL" \
    --dest "$T/opt" --no-ftp-active=1
assert_eq "$(cat "$LAST_ERR")" "biomirror: sync: --no-ftp-active=1: takes no value (try --help)" \
    "--no-ftp-active=1"
assert_exit 2 "$BM" --state-dir --json status
assert_eq "$(cat "$LAST_ERR")" "biomirror: option --state-dir needs a value, not the option --json (for a path that starts with '-': --state-dir=--json or ./--json)" \
    "--state-dir --json"
[ ! -e ./--json ] || fail "--json made a state directory"
assert_exit 2 "$BM" status -c -q
grep -q 'option -c needs a value, not the option -q' "$LAST_ERR" ||
    fail "-c -q took -q as the config file"

echo "# break-it 2: -q prints nothing for a resync or a verify that is ok"
assert_exit 0 "$BM" --state-dir "$T/state" -q resync --source "$NGINX_URL" \
    --dest "$T/adhoc"
assert_eq "$(cat "$LAST_OUT")" "" "-q resync: no plan lines"
assert_exit 0 "$BM" --state-dir "$T/state" -q verify --source "$NGINX_URL" \
    --dest "$T/adhoc"
assert_eq "$(cat "$LAST_OUT")" "" "-q verify: no summary"
printf 'x\n' > "$T/adhoc/a.txt"
touch -r "$T/up/a.txt" "$T/adhoc/a.txt"
assert_exit 1 "$BM" --state-dir "$T/state" -q verify --source "$NGINX_URL" \
    --dest "$T/adhoc"
grep -q '^differs a.txt: ' "$LAST_OUT" && grep -q ': verify partial: .* 1 differ$' "$LAST_OUT" ||
    fail "-q verify: what differs and the summary are still printed"

echo "# break-it 1: an ad-hoc dest is recorded absolute; a new source said"
mkdir -p "$T/cwd1"
(cd "$T/cwd1" && "$BM" --state-dir "$T/state" sync --source "$NGINX_URL" \
    --dest rel -q) || fail "relative --dest from cwd1"
(cd "$T" && "$BM" --state-dir "$T/state" sync \
    --source "${NGINX_URL}sub/" --dest cwd1/./rel/) 2> "$T/src.err" ||
    fail "the same dest from another directory, with another source"
assert_exit 0 "$BM" --state-dir "$T/state" status
assert_eq "$(grep -c " -> $T/cwd1/rel\$" "$LAST_OUT")" 1 \
    "status: one ad-hoc mirror, its dest absolute"
grep -q ' -> rel$' "$LAST_OUT" && fail "status: a relative dest"
rkey=$(sed -n "s|^\(adhoc-[0-9a-f]*\): ad-hoc mirror: .* -> $T/cwd1/rel\$|\1|p" "$LAST_OUT")
grep -qxF "biomirror: $rkey: $T/cwd1/rel: its source was $NGINX_URL, now ${NGINX_URL}sub/" \
    "$T/src.err" || fail "the source change is not logged: $(cat "$T/src.err")"
python3 - "$T/state/manifests/$rkey.adhoc" "$T/cwd1/rel" <<'PY' || fail "the .adhoc record's dest"
import json, sys
assert json.load(open(sys.argv[1]))["dest"] == sys.argv[2]
PY
# Another run of the same: the record says nothing new and is not
# written again (same inode; a rewrite renames a new file over it).
ino=$(stat -c %i "$T/state/manifests/$rkey.adhoc")
(cd "$T" && "$BM" --state-dir "$T/state" sync \
    --source "${NGINX_URL}sub/" --dest cwd1/./rel/) ||
    fail "the same ad-hoc mirror again"
assert_eq "$(stat -c %i "$T/state/manifests/$rkey.adhoc")" "$ino" \
    "the .adhoc record rewritten by a run that changed nothing in it"

echo "# break-it 5, 4: list errors once; --max-entries for list and sync"
assert_exit 3 "$BM" list "${NGINX_URL}nonexist/"
assert_eq "$(cat "$LAST_ERR")" "biomirror: ${NGINX_URL}nonexist/: list: HTTP 404" \
    "list: one line for a 404"
assert_exit 3 "$BM" list --max-entries 1 "$NGINX_URL"
assert_eq "$(grep -c 'max_entries' "$LAST_ERR")" 1 "list --max-entries 1"
assert_exit 0 "$BM" list --max-entries 100 "$NGINX_URL"
assert_exit 3 "$BM" --state-dir "$T/state" sync --source "$NGINX_URL" \
    --dest "$T/maxent" --max-entries 1
grep -q 'max_entries' "$LAST_ERR" || fail "sync --max-entries 1"
[ ! -e "$T/maxent/a.txt" ] || fail "sync --max-entries 1 fetched"

echo "# item 9: cannot open config file gives the errno"
assert_exit 2 "$BM" -c "$T" check-config
assert_eq "$(cat "$LAST_ERR")" "biomirror: $T: cannot open config file: Is a directory" \
    "a directory as the config file"

echo "PASS"
