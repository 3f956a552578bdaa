#!/bin/bash
# Config errors that spoil one mirror spoil only that mirror (issue 18
# item 10), --json says so on stdout (item 11), and --include on the
# command line replaces the config's includes (item 6):
#   check-config lists every error, each with FILE:LINE, exit 2;
#   sync of all runs the good mirrors, then exits 2 naming the bad one's
#   FILE:LINE; sync GOOD exits 0; status GOOD works, status BAD exits 2;
#   a malformed [section] header is an error of no mirror, and its keys
#   never fall into the section before it;
#   --json sync prints the runs and one error object per bad mirror;
#   an error in [global] stops every mirror, and --json sync prints the
#   one error object {"status": "error", "errors": [{path, op, reason}]};
#   sync --include GLOB fetches no file that only the config's include
#   matched.
# brk2 findings 1, 4, 12: a shared or nested dest makes both mirrors
#   unusable, each error naming the other (the earlier one no longer
#   runs into the later one's tree); --json ls/history of a bad mirror
#   give its config errors (path FILE:LINE, op config), of a damaged
#   manifest the manifest's path (op manifest) and the mirror; a
#   [global] error's list names the mirror of each mirror's error; an
#   unknown option has its reason in the error object; a missing config
#   file is named with its errno.
# bm:// paths the run refuses (a percent-escaped NUL, an empty segment,
#   also the one of EXPORT//):
#   -n refuses each, exit 2, with the message sync gives (exit 2).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup
mkdir -p "$T/up"
printf 'a\n' > "$T/up/a.txt"
printf 'b\n' > "$T/up/b.dat"
start_nginx "$T/up"
C=$T/bm.conf
cat > "$C" <<CONF
[global]
state_dir = $T/state

[good]
source = $NGINX_URL
dest = $T/good
include = *.txt

[bad]
source = $NGINX_URL
dest = $T/bad
concurrency = 0
bogus = yes

[other]
source = $NGINX_URL
dest = $T/other

[x y]
include = *.none
CONF
l1=$(grep -n '^concurrency = 0' "$C" | cut -d: -f1)
l2=$(grep -n '^bogus' "$C" | cut -d: -f1)
l3=$(grep -n '^\[x y\]' "$C" | cut -d: -f1)
e1="$C:$l1: concurrency = 0: expected an integer from 1 to 1024, or auto"
e2="$C:$l2: unknown key 'bogus' in section [bad]"
e3="$C:$l3: bad mirror name 'x y' (1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit)"

echo "# check-config: every error, each with FILE:LINE"
assert_exit 2 bm check-config
assert_eq "$(cat "$LAST_ERR")" "biomirror: $e1
biomirror: $e2
biomirror: $e3" "check-config lists every error"
assert_exit 2 bm check-config --json
python3 - "$LAST_OUT" "$C" "$l1" "$l2" "$l3" <<'PY' || fail "check-config --json"
import json, sys
o = json.load(open(sys.argv[1]))
c = sys.argv[2]
assert o["ok"] is False, o
assert [e["path"] for e in o["errors"]] == ["%s:%s" % (c, l) for l in sys.argv[3:]], o
assert all(e["op"] == "config" for e in o["errors"]), o
PY

echo "# sync of all: the good mirrors run, then exit 2 naming [bad]"
assert_exit 2 bm sync
[ -f "$T/good/a.txt" ] || fail "[good] did not run"
[ ! -e "$T/good/b.dat" ] || fail "[good] fetched a file its include does not match"
assert_trees_equal "$T/up" "$T/other"
[ ! -e "$T/bad" ] || fail "[bad] ran"
grep -q '^good: ok: ' "$LAST_OUT" || fail "no summary of [good]"
grep -q '^other: ok: ' "$LAST_OUT" || fail "no summary of [other] (after the bad one)"
assert_eq "$(tail -n 3 "$LAST_ERR")" "biomirror: bad: skipped, config error at $e1
biomirror: bad: skipped, config error at $e2
biomirror: $e3" "sync names the bad sections' lines, after the runs"

echo "# sync GOOD: 0; status GOOD works; status BAD: 2"
assert_exit 0 bm sync good
assert_exit 0 bm sync other
assert_exit 0 bm status good
grep -q '^good: last run 2 at .*: ok in ' "$LAST_OUT" || fail "status good: $(cat "$LAST_OUT")"
assert_exit 2 bm status bad
grep -qxF "biomirror: bad: skipped, config error at $e2" "$LAST_ERR" || fail "status bad: why"
assert_exit 2 bm status
grep -q '^other: last run ' "$LAST_OUT" || fail "status of all: [other] not shown"

echo "# --json sync of all: the runs, then one error object for [bad]"
assert_exit 2 bm --json sync
json_ok "$LAST_OUT"
python3 - "$LAST_OUT" "$C:$l1" "$C:$l2" "$C:$l3" <<'PY' || fail "sync --json with a bad section"
import json, sys
a = json.load(open(sys.argv[1]))
assert [(o.get("mirror"), o["status"]) for o in a] == \
    [("good", "ok"), ("other", "ok"), ("bad", "error"), (None, "error")], a
assert [(e["path"], e["op"]) for e in a[2]["errors"]] == \
    [(sys.argv[2], "config"), (sys.argv[3], "config")], a[2]
assert set(a[2]) == {"mirror", "status", "errors"}, a[2]
assert [e["path"] for e in a[3]["errors"]] == [sys.argv[4]], a[3]
PY
assert_exit 2 bm --json sync bad
python3 -m json.tool "$LAST_OUT" > /dev/null || fail "sync bad --json: not JSON"

echo "# --json ls/history of a bad mirror: its config errors"
for cmd in ls history; do
	assert_exit 2 bm --json $cmd bad
	json_ok "$LAST_OUT"
	python3 - "$LAST_OUT" "$C:$l1" "$C:$l2" <<'PY' || fail "--json $cmd bad"
import json, sys
a = json.load(open(sys.argv[1]))
assert len(a) == 1 and (a[0]["mirror"], a[0]["status"]) == ("bad", "error"), a
assert [(e["path"], e["op"]) for e in a[0]["errors"]] == \
    [(sys.argv[2], "config"), (sys.argv[3], "config")], a
PY
done

echo "# --json ls/history of a damaged manifest: its path, op manifest"
cp -a "$T/state" "$T/state3"
db3=$(manifest_db "$T/state3" other)
rm -f "$db3-wal" "$db3-shm"
head -c 8192 /dev/urandom > "$db3"
for cmd in ls history status; do
	assert_exit 2 "$BM" -c "$C" --state-dir "$T/state3" --json $cmd other
	json_ok "$LAST_OUT"
	if [ $cmd = status ]; then
		python3 -c 'import json,sys; s = json.load(open(sys.argv[1]))[0]
assert (s["mirror"], s["exit"]) == ("other", 2) and "resync other --adopt" in s["reason"], s' \
		    "$LAST_OUT" || fail "--json status of a damaged manifest"
		continue
	fi
	python3 - "$LAST_OUT" "$db3" <<'PY' || fail "--json $cmd of a damaged manifest"
import json, sys
a = json.load(open(sys.argv[1]))
assert len(a) == 1 and (a[0]["mirror"], a[0]["status"]) == ("other", "error"), a
e = a[0]["errors"]
assert [(x["path"], x["op"]) for x in e] == [(sys.argv[2], "manifest")], a
assert "resync other --adopt" in e[0]["reason"], e
PY
done

echo "# an unknown option: its reason in the error object, one line on stderr"
assert_exit 2 bm --json plan good --bogus
json_ok "$LAST_OUT"
python3 -c 'import json,sys; e = json.load(open(sys.argv[1]))[0]["errors"]
assert [(x["op"], x["reason"]) for x in e] == [("usage", "plan: unknown option --bogus (try --help)")], e' \
    "$LAST_OUT" || fail "plan --bogus --json"
assert_eq "$(cat "$LAST_ERR")" "biomirror: plan: unknown option --bogus (try --help)" "plan --bogus: stderr"
assert_exit 2 bm --json sync good --concurrency
python3 -c 'import json,sys; e = json.load(open(sys.argv[1]))[0]["errors"]
assert e[0]["reason"] == "sync: option --concurrency needs a value (try --help)", e' \
    "$LAST_OUT" || fail "sync --concurrency --json"

echo "# --include replaces the config's include"
assert_exit 0 "$BM" -c "$C" --state-dir "$T/state2" sync good --include '*.dat'
[ -f "$T/good/b.dat" ] || fail "--include '*.dat': b.dat not fetched"
assert_eq "$(manifest_sql "$T/state2" good "SELECT path FROM files ORDER BY path" | tr '\n' ' ')" \
    "b.dat " "--include: only b.dat in the manifest (a.txt only matched the config's include)"

echo "# a nested dest: both mirrors unusable, each naming the other"
N=$T/nest.conf
cat > "$N" <<CONF
[global]
state_dir = $T/state

[newone]
source = $NGINX_URL
dest = $T/prod/extra

[prod]
source = $NGINX_URL
dest = $T/prod

[fine]
source = $NGINX_URL
dest = $T/fine
CONF
en="dest $T/prod/extra of [newone] is inside dest $T/prod of [prod] (section on line 8): mirrors must not share or nest destinations"
ep="dest $T/prod of [prod] contains dest $T/prod/extra of [newone] (section on line 4): mirrors must not share or nest destinations"
assert_exit 2 "$BM" -c "$N" sync
[ ! -e "$T/prod" ] || fail "a mirror of a nested pair ran: $(ls -AR "$T/prod")"
assert_trees_equal "$T/up" "$T/fine"
grep -qxF "biomirror: newone: skipped, config error at $N:6: $en" "$LAST_ERR" ||
    fail "[newone] not skipped: $(cat "$LAST_ERR")"
grep -qxF "biomirror: prod: skipped, config error at $N:10: $ep" "$LAST_ERR" ||
    fail "[prod] not skipped: $(cat "$LAST_ERR")"
assert_exit 2 "$BM" -c "$N" sync newone
assert_exit 0 "$BM" -c "$N" sync fine
assert_exit 2 "$BM" -c "$N" check-config
assert_eq "$(grep -c 'must not share or nest' "$LAST_ERR")" 2 "check-config: two errors"

echo "# a new section with the dest of a mirror that has run: neither runs"
cat >> "$C" <<CONF

[m0]
source = $NGINX_URL
dest = $T/other/
CONF
lo=$(grep -n "^dest = $T/other\$" "$C" | cut -d: -f1)
lm=$(grep -n '^\[m0\]' "$C" | cut -d: -f1)
eo="$C:$lo: dest $T/other of [other] is the same directory as dest $T/other/ of [m0] (section on line $lm): mirrors must not share or nest destinations"
before=$(tree_sum "$T/other")
owner_before=$(cat "$T/.other.biomirror-owner" 2>/dev/null)
assert_exit 2 bm sync m0
assert_exit 2 bm sync other
grep -qxF "biomirror: other: skipped, config error at $eo" "$LAST_ERR" ||
    fail "[other] not skipped: $(cat "$LAST_ERR")"
assert_exit 2 bm --json sync other m0
json_ok "$LAST_OUT"
python3 - "$LAST_OUT" <<'PY' || fail "--json sync with a shared dest"
import json, sys
a = json.load(open(sys.argv[1]))
assert [(o["mirror"], o["status"]) for o in a] == [("other", "error"), ("m0", "error")], a
assert all(e["op"] == "config" for o in a for e in o["errors"]), a
PY
assert_eq "$(tree_sum "$T/other")" "$before" "[other]'s tree changed"
assert_eq "$(cat "$T/.other.biomirror-owner" 2>/dev/null)" "$owner_before" "owner record changed"
sed -i '/^\[m0\]$/,$d' "$C"

echo "# an error in [global] stops every mirror"
sed -i 's|^\[global\]$|[global]\nlog_level = loud|' "$C"
eg="$C:2: log_level = loud: expected error, warning, info, verbose or debug"
runs=$(manifest_sql "$T/state" good "SELECT count(*) FROM runs")
assert_exit 2 bm sync good
grep -qxF "biomirror: $eg" "$LAST_ERR" || fail "[global] error not named"
assert_exit 2 bm status good
assert_eq "$(manifest_sql "$T/state" good "SELECT count(*) FROM runs")" "$runs" "a run despite a [global] error"
assert_exit 2 bm --json sync good
python3 -m json.tool "$LAST_OUT" > /dev/null || fail "sync --json: not JSON"
python3 - "$LAST_OUT" "$C:2" <<'PY' || fail "sync --json with a [global] error"
import json, sys
a = json.load(open(sys.argv[1]))
assert len(a) == 1 and set(a[0]) == {"status", "errors"}, a
assert a[0]["status"] == "error", a
e = a[0]["errors"][0]
assert (e["path"], e["op"]) == (sys.argv[2], "config"), e
assert e["reason"].startswith("log_level = loud: "), e
assert "mirror" not in e, e
# The sections' errors in the same list say whose they are.
assert [x.get("mirror") for x in a[0]["errors"][1:]] == ["bad", "bad", None], a
PY
assert_exit 2 bm --json status
json_ok "$LAST_OUT"
assert_exit 2 "$BM" -c "$T/none.conf" --json sync
python3 -c 'import json,sys; a=json.load(open(sys.argv[1])); assert a[0]["status"]=="error" and a[0]["errors"][0]["op"]=="config", a
assert a[0]["errors"][0]["reason"] == "cannot open config file: No such file or directory", a' \
    "$LAST_OUT" || fail "no config file: --json"
assert_eq "$(cat "$LAST_ERR")" "biomirror: $T/none.conf: cannot open config file: No such file or directory" \
    "no config file: the message"
assert_exit 2 "$BM" -c "$T/none.conf" --json check-config
python3 -c 'import json,sys; o=json.load(open(sys.argv[1]))
assert o["error"] == "cannot open config file: No such file or directory", o' \
    "$LAST_OUT" || fail "no config file: check-config --json"

echo "# bm:// paths the run refuses: -n names every one, as sync does"
B=$T/bmpath.conf
cat > "$B" <<CONF
[nul]
source = bm://127.0.0.1:9/up/a%00b/
dest = $T/nul

[empty]
source = bm://127.0.0.1:9/up//x/
dest = $T/empty

[root2]
source = bm://127.0.0.1:9/up//
dest = $T/root2
CONF
en="$B:2: source = bm://127.0.0.1:9/up/a%00b/: bad URL (Bad path: a percent-escape that is not %XX, or %00)"
ee="$B:6: source = bm://127.0.0.1:9/up//x/: bad URL (Bad path: an empty segment)"
er="$B:10: source = bm://127.0.0.1:9/up//: bad URL (Bad path: an empty segment)"
assert_exit 2 "$BM" -c "$B" --state-dir "$T/state" -n
assert_eq "$(cat "$LAST_ERR")" "biomirror: $en
biomirror: $ee
biomirror: $er" "-n: every bm:// path refused"
assert_exit 2 "$BM" -c "$B" --state-dir "$T/state" sync root2
assert_eq "$(cat "$LAST_ERR")" "biomirror: root2: skipped, config error at $er" \
    "sync root2: the message of -n"
for m in nul empty; do
	assert_exit 2 "$BM" -c "$B" --state-dir "$T/state" sync "$m"
done
assert_eq "$(cat "$LAST_ERR")" "biomirror: empty: skipped, config error at $ee" \
    "sync: the message of -n"
[ -e "$T/nul" ] || [ -e "$T/empty" ] || [ -e "$T/root2" ] &&
    fail "a dest made for a refused source"

stop_servers
echo "PASS"
