#!/bin/bash
# One lock and one owner per destination, whatever the config file, state
# directory or publish mode (issue 18 item 2).  While a publish = set run
# of [slow] is held mid-transfer (the faultserver holds one file on a
# FIFO):
# - an ad-hoc run on its dest (another state directory, no config file)
#   and a run of a second config file with publish = file on that dest
#   are refused with exit 2 naming the owner (mirror, config file, state
#   directory, PID, running), as is an ad-hoc run into a directory inside
#   the snapshot; the published snapshot (names, inodes, sizes, mtimes)
#   and DEST's symlink are unchanged (before: exit 0, files added to the
#   published snapshot through the symlink);
# - a publish = set run of a third config on that dest is refused (exit 2,
#   the owner named: before, exit 75, and once the owner was idle it took
#   the tree over);
# - runs on trees around the set tree are refused with exit 2 naming the
#   owner, nothing changed (before: exit 0, DEST.biomirror's snapshots and
#   owner record rewritten): an ad-hoc run on DEST.biomirror, a second
#   config's on DEST.biomirror/snapshots, an ad-hoc run on DEST's parent
#   (which contains DEST.biomirror);
# - kill -9 of the held run: the ad-hoc run is still refused (the owner
#   not running now), nothing changed, and the owner's next run completes
#   (it continues the killed run's snapshot and publishes it);
# - the owner's next run rewrites the record beside its plain tree in
#   place, naming its pid (the same inode: before, a new file renamed
#   over it on every run);
# - a publish = set run of another mirror on a plain tree that a
#   publish = file mirror owns is refused (exit 2), the tree untouched;
#   once the record named in the message is removed, it converts it; an
#   ad-hoc run on a directory inside a plain tree another mirror owns is
#   refused, no record left inside that tree (before: exit 0);
# - a publish = set run of another mirror on an idle set tree is refused
#   (before: exit 0, the tree taken over); once the record is removed it
#   takes it over;
# - a publish = set mirror whose first run failed (DEST.biomirror and its
#   record, no DEST): ad-hoc and publish = file runs on DEST are refused
#   (before: exit 0, DEST made plain and the record overwritten, the set
#   mirror then locked out), and its own next run publishes.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup
slow=""
trap 'rc=$?; [ -n "$slow" ] && kill -9 "$slow" 2>/dev/null; (exit $rc); bm_cleanup' EXIT

mkdir -p "$T/up"
python3 - "$T/up" <<'EOF' || fail "upstream"
import os, sys
for i in (0, 2):
    with open(os.path.join(sys.argv[1], "vol.%02d" % i), "wb") as f:
        f.write(bytes((i * 13 + k) % 251 for k in range(200000)))
EOF
touch -d '2021-01-01 UTC' "$T/up"/vol.*
mkfifo "$T/hold" || fail "mkfifo"
# The first GET of vol.01 (not upstream yet) stops half-way until told.
# /pend/bad (made at the end) fails: a set mirror's first run unpublished.
start_faultserver "$T/up" normal --fault "/vol.01=hold,fifo=$T/hold,times=1" \
    --fault "/pend/bad=status,code=500"
D=$T/srv/slow/db
SNAPS=$D.biomirror/snapshots
# conf FILE NAME STATE DEST [KEY...]: a config of one mirror.
conf() {
	local f=$1 name=$2 state=$3 dest=$4
	shift 4
	{
		printf '[global]\nstate_dir = %s\n\n[%s]\n' "$state" "$name"
		printf 'source = %s\ndest = %s\nconcurrency = 1\n' "$FAULT_URL" "$dest"
		for k in "$@"; do echo "$k"; done
	} > "$f"
}
listing() { (cd "$1" && find . -printf '%P %y %i %s %T@\n' | LC_ALL=C sort); }
conf "$T/a.conf" slow "$T/state-a" "$D" "publish = set"
conf "$T/b.conf" other "$T/state-b" "$D"
conf "$T/c.conf" third "$T/state-c" "$D" "publish = set"

echo "# [slow] publishes its first snapshot"
assert_exit 0 "$BM" -c "$T/a.conf" --json sync slow
r1=$(jfield run)
assert_eq "$(readlink "$D")" "db.biomirror/snapshots/$r1" "DEST target"

echo "# a new volume: the next [slow] run is held while fetching it"
cp "$T/up/vol.00" "$T/up/vol.01"
"$BM" -c "$T/a.conf" sync slow > "$T/slow.out" 2> "$T/slow.err" &
slow=$!
timeout 60 bash -c 'read -r line < "$1"' _ "$T/hold" ||
	fail "the run was not held: $(cat "$T/slow.err")"
kill -0 "$slow" || fail "the held run is gone"
before=$(listing "$SNAPS/$r1")
link=$(readlink "$D")
owner="mirror slow of $T/a.conf (state directory $T/state-a, pid $slow"
refusal="$D is a publish = set tree (a symlink to a snapshot in $D.biomirror) of $owner, running): a publish = file or ad-hoc run would write into its published snapshot: refused"

echo "# an ad-hoc run on that dest, another state directory: refused"
assert_exit 2 "$BM" --state-dir "$T/other" --json sync --source "$FAULT_URL" --dest "$D"
grep -qF "$refusal" "$LAST_ERR" || fail "no refusal naming the owner: $(cat "$LAST_ERR")"
assert_eq "$(jfield status)" failed "status"

echo "# a second config file, publish = file, same dest: refused"
assert_exit 2 "$BM" -c "$T/b.conf" sync other
grep -qF "$refusal" "$LAST_ERR" || fail "no refusal naming the owner: $(cat "$LAST_ERR")"

echo "# an ad-hoc run into a directory inside the snapshot: refused"
assert_exit 2 "$BM" --state-dir "$T/other" sync --source "$FAULT_URL" --dest "$D/sub"
grep -qF "$D/sub lies inside a snapshot of the publish = set tree $D of $owner, running): a run there would change a published snapshot: refused" "$LAST_ERR" ||
	fail "no refusal for a dest inside the snapshot: $(cat "$LAST_ERR")"

echo "# a third config file, publish = set too: refused, the owner named"
assert_exit 2 "$BM" -c "$T/c.conf" --json sync third
assert_eq "$(jfield status)" failed "status"
grep -qF "$D is a publish = set tree (a symlink to a snapshot in $D.biomirror) of $owner, running): a publish = set run of another mirror would take over its snapshots: refused (if that mirror no longer uses it, remove $D.biomirror/owner)" "$LAST_ERR" ||
	fail "no refusal naming the owner: $(cat "$LAST_ERR")"

echo "# runs on DEST.biomirror, inside it and around it: refused"
which="the snapshots and owner record of the publish = set tree $D of $owner, running): a run there would change them: refused"
assert_exit 2 "$BM" --state-dir "$T/other" sync --source "$FAULT_URL" --dest "$D.biomirror"
grep -qF "$D.biomirror holds $which" "$LAST_ERR" ||
	fail "DEST.biomirror as a dest: $(cat "$LAST_ERR")"
conf "$T/d.conf" snaps "$T/state-d" "$SNAPS"
assert_exit 2 "$BM" -c "$T/d.conf" sync snaps
grep -qF "$SNAPS lies inside $D.biomirror, which holds $which" "$LAST_ERR" ||
	fail "DEST.biomirror/snapshots as a dest: $(cat "$LAST_ERR")"
assert_exit 2 "$BM" --state-dir "$T/other" sync --source "$FAULT_URL" --dest "$T/srv/slow"
grep -qF "$T/srv/slow contains $D.biomirror, which holds $which" "$LAST_ERR" ||
	fail "DEST's parent as a dest: $(cat "$LAST_ERR")"
assert_eq "$(cd "$D.biomirror" && ls -A | LC_ALL=C sort | tr '\n' ' ')" "owner snapshots " \
	"DEST.biomirror after the refused runs"
assert_eq "$(cd "$T/srv/slow" && ls -A | LC_ALL=C sort | tr '\n' ' ')" "db db.biomirror " \
	"DEST's parent after the refused run"

assert_eq "$(readlink "$D")" "$link" "DEST target while held"
grep -qx "pid $slow" "$D.biomirror/owner" || fail "owner record: $(cat "$D.biomirror/owner")"
assert_eq "$(listing "$SNAPS/$r1")" "$before" "published snapshot while held"
[ -e "$D/sub" ] && fail "a refused run made $D/sub"

echo "# kill -9 of the held run; the ad-hoc run is still refused"
kill -9 "$slow"
wait "$slow" 2>/dev/null
echo go > "$T/hold"	# lets the server's held request end
assert_exit 2 "$BM" --state-dir "$T/other" sync --source "$FAULT_URL" --dest "$D"
grep -qF "$D is a publish = set tree (a symlink to a snapshot in $D.biomirror) of $owner, not running now): a publish = file or ad-hoc run would write into its published snapshot: refused" "$LAST_ERR" ||
	fail "no refusal naming the stopped owner: $(cat "$LAST_ERR")"
assert_eq "$(readlink "$D")" "$link" "DEST target after the kill"
assert_eq "$(listing "$SNAPS/$r1")" "$before" "published snapshot after the kill"

echo "# the owner's next run completes and publishes"
assert_exit 0 "$BM" -c "$T/a.conf" --json sync slow
r3=$(jfield run)
assert_eq "$(readlink "$D")" "db.biomirror/snapshots/$r3" "DEST target"
assert_trees_equal "$T/up" "$D/"
assert_eq "$(listing "$SNAPS/$r1")" "$before" "the previous snapshot"
assert_eq "$(cd "$SNAPS" && ls | LC_ALL=C sort -n | tr '\n' ' ')" "$r1 $r3 " \
	"snapshots (the killed run's, continued and renamed, and the previous)"
no_temps "$D.biomirror"

echo "# a publish = set run of another mirror on a plain tree: refused"
P=$T/srv/plain
conf "$T/p.conf" plain "$T/state-p" "$P"
conf "$T/q.conf" conv "$T/state-q" "$P" "publish = set"
assert_exit 0 "$BM" -c "$T/p.conf" sync plain
rec=$T/srv/.plain.biomirror-owner
echo "# the owner's next runs rewrite its record in place (the same inode)"
rest="mirror plain
config $T/p.conf
state_dir $T/state-p
publish file"
assert_eq "$(tail -n +2 "$rec")" "$rest" "the record after the first run"
# A longer and a shorter pid than this run's (pid_max is at most 2^22).
for old in 12345678 1; do
	printf 'pid %s\n%s\n' "$old" "$rest" > "$rec"	# same inode
	ino=$(stat -c %i "$rec")
	assert_exit 0 bash -c 'echo $$ > "$1"; exec "$2" -c "$3" sync plain' _ "$T/pid2" "$BM" "$T/p.conf"
	pid2=$(cat "$T/pid2")
	assert_eq "$(cat "$rec"; echo x)" "pid $pid2
$rest
x" "the record after pid $old (all of it, nothing after its last line)"
	assert_eq "$(stat -c %i "$rec")" "$ino" "the record's inode after pid $old"
done
[ -e "$rec.tmp" ] && fail "a temporary record left"
plain=$(listing "$P")
assert_exit 2 "$BM" -c "$T/q.conf" sync conv
grep -qF "$P is a plain tree of mirror plain of $T/p.conf (state directory $T/state-p, pid " "$LAST_ERR" ||
	fail "no refusal naming the plain tree's owner: $(cat "$LAST_ERR")"
grep -qF "not running now): a publish = set run of another mirror would move it into its snapshots: refused (if that mirror no longer uses it, remove $T/srv/.plain.biomirror-owner)" "$LAST_ERR" ||
	fail "no remedy in the refusal: $(cat "$LAST_ERR")"
[ -d "$P" ] && [ ! -L "$P" ] || fail "the plain tree was converted"
[ -e "$P.biomirror" ] && fail "the refused run made $P.biomirror"
assert_eq "$(listing "$P")" "$plain" "the plain tree after the refusal"

echo "# an ad-hoc run inside the plain tree another mirror owns: refused"
assert_exit 2 "$BM" --state-dir "$T/other" sync --source "$FAULT_URL" --dest "$P/big"
grep -qF "$P/big lies inside $P, the plain tree of mirror plain of $T/p.conf (state directory $T/state-p, pid " "$LAST_ERR" ||
	fail "no refusal for a dest inside a plain tree: $(cat "$LAST_ERR")"
grep -qF "not running now): a run there would change that mirror's tree: refused (if that mirror no longer uses it, remove $T/srv/.plain.biomirror-owner)" "$LAST_ERR" ||
	fail "no remedy for a dest inside a plain tree: $(cat "$LAST_ERR")"
assert_eq "$(listing "$P")" "$plain" "the plain tree after the refused ad-hoc run"

rm "$T/srv/.plain.biomirror-owner"
assert_exit 0 "$BM" -c "$T/q.conf" sync conv
[ -L "$P" ] || fail "not converted once the record was removed"
assert_trees_equal "$T/up" "$P/"

echo "# a publish = set run of another mirror on an idle set tree: refused"
conf "$T/r.conf" taker "$T/state-r" "$P" "publish = set"
conv_link=$(readlink "$P")
conv_snap=$(listing "$P/")
assert_exit 2 "$BM" -c "$T/r.conf" sync taker
grep -qF "$P is a publish = set tree (a symlink to a snapshot in $P.biomirror) of mirror conv of $T/q.conf (state directory $T/state-q, pid " "$LAST_ERR" ||
	fail "no refusal naming the set tree's owner: $(cat "$LAST_ERR")"
grep -qF "not running now): a publish = set run of another mirror would take over its snapshots: refused (if that mirror no longer uses it, remove $P.biomirror/owner)" "$LAST_ERR" ||
	fail "no remedy in the refusal: $(cat "$LAST_ERR")"
assert_eq "$(readlink "$P")" "$conv_link" "the set tree's link after the refusal"
assert_eq "$(listing "$P/")" "$conv_snap" "the published snapshot after the refusal"
grep -qx "mirror conv" "$P.biomirror/owner" || fail "owner record: $(cat "$P.biomirror/owner")"
rm "$P.biomirror/owner"
assert_exit 0 "$BM" -c "$T/r.conf" sync taker
grep -qx "mirror taker" "$P.biomirror/owner" || fail "not handed over: $(cat "$P.biomirror/owner")"

echo "# a publish = set mirror whose first run failed: its DEST is not taken"
mkdir "$T/up/pend"
echo ok > "$T/up/pend/ok"
echo bad > "$T/up/pend/bad"
F=$T/srv/pend
conf "$T/f.conf" pend "$T/state-f" "$F" "publish = set" "retries = 0"
conf "$T/g.conf" grab "$T/state-g" "$F"
sed -i "s|^source = .*|source = ${FAULT_URL}pend/|" "$T/f.conf" "$T/g.conf"
assert_exit 1 "$BM" -c "$T/f.conf" sync pend
[ -e "$F" ] && fail "the failed first run published $F"
grep -qx "publish set" "$F.biomirror/owner" || fail "no set record: $(ls -A "$F.biomirror")"
pend_rec=$(cat "$F.biomirror/owner")
pending="$F is the destination of the publish = set tree $F.biomirror of mirror pend of $T/f.conf (state directory $T/state-f, pid "
assert_exit 2 "$BM" --state-dir "$T/other" sync --source "${FAULT_URL}pend/" --dest "$F"
grep -qF "$pending" "$LAST_ERR" || fail "ad-hoc run on a pending set tree: $(cat "$LAST_ERR")"
grep -qF "not running now), not published or not converted yet: a publish = file or ad-hoc run would take it over: refused (sync that mirror instead; to go back to publish = file see publish in biomirror.conf(5))" "$LAST_ERR" ||
	fail "no remedy for a pending set tree: $(cat "$LAST_ERR")"
assert_exit 2 "$BM" -c "$T/g.conf" sync grab
grep -qF "$pending" "$LAST_ERR" || fail "file run on a pending set tree: $(cat "$LAST_ERR")"
[ -e "$F" ] && fail "a refused run made $F"
assert_eq "$(cat "$F.biomirror/owner")" "$pend_rec" "the set mirror's record after the refusals"
rm "$T/up/pend/bad"
assert_exit 0 "$BM" -c "$T/f.conf" sync pend
[ -L "$F" ] || fail "the set mirror did not publish"
assert_eq "$(cat "$F/ok")" ok "published file"
echo PASS
