#!/bin/bash
# The README's quick start works as written (issue 23), run from the
# README itself: its first sh block, each command with its paths moved
# under $T (/usr/local, /etc/biomirror, /var/lib/biomirror under DESTDIR,
# /srv/mirror under $T) and the service user biomirror standing for a
# throwaway system user made here (removed at the end):
# - make install DESTDIR: an /etc config with no active mirror (a bare
#   sync exits 2: "no mirrors configured: nothing to sync"), the NCBI
#   preset under share/;
# - the state directory made by the tmpfiles.d file, owned by the user;
# - the first sync, run with runuser -u as that user, of the NCBI preset
#   against a loopback nginx: the volumes, their .md5 sidecars and the
#   *-metadata.json files, not the rest; dest a snapshot symlink; every
#   file in the state directory the user's, so a second run as the user
#   (the timer's) works;
# - the drop-in of the second sh block, and systemd-analyze verify of the
#   installed units with it (skipped, not passed, without systemd-analyze).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup
d=$T/root
U=bmt98$$
useradd --system --user-group --no-create-home --home-dir /nonexistent \
    --shell /usr/sbin/nologin "$U" || fail "useradd $U"
trap 'rc=$?; userdel "$U" > /dev/null 2>&1; (exit $rc); bm_cleanup' EXIT

# The upstream: an NCBI-shaped tree.
mkdir -p "$T/up"
head -c 300000 /dev/urandom > "$T/up/nr.00.tar.gz"
head -c 200000 /dev/urandom > "$T/up/nr.01.tar.gz"
(cd "$T/up" && md5sum nr.00.tar.gz > nr.00.tar.gz.md5 &&
    md5sum nr.01.tar.gz > nr.01.tar.gz.md5)
printf '{"dbname": "nr", "files": ["nr.00.tar.gz", "nr.01.tar.gz"]}\n' \
    > "$T/up/nr-prot-metadata.json"
printf 'not taken\n' > "$T/up/README"
start_nginx "$T/up"

# The README's commands, moved under $T.
blocks() {
	sed -n '/^## Quick start for a real mirror/,/^## /p' README.md |
	    awk -v want="$1" '/^```sh/ { n++; on = n == want; next }
		/^```/ { on = 0 } on'
}
blocks 1 > "$T/quick.sh"
blocks 2 > "$T/dropin.sh"
[ -s "$T/quick.sh" ] && [ -s "$T/dropin.sh" ] || fail "README: no quick start blocks"
BIN="$d/usr/local/bin/biomirror -c $d/etc/biomirror/biomirror.conf"
move() {
	sed -e 's/  *# .*$//' \
	    -e "s|-- biomirror |-- @BIN@ |" \
	    -e "s|-u biomirror |-u $U |; s|-o biomirror -g biomirror |-o $U -g $U |" \
	    -e "s|/usr/local|$d/usr/local|g; s|/etc/biomirror|$d/etc/biomirror|g" \
	    -e "s|/etc/systemd|$d/etc/systemd|g" \
	    -e "s|/var/lib/biomirror|$d/var/lib/biomirror|g; s|/srv/mirror|$T/srv/mirror|g" \
	    -e "s|@BIN@|$BIN|"
}
step=0
while IFS= read -r line; do
	step=$((step + 1))
	cmd=$(printf '%s\n' "$line" | move)
	case $line in
	"make && make install"*)
		cmd="make -s install DESTDIR=$d"
		;;
	systemd-sysusers*)
		# The real user is $U (made above); the file works in $d.
		cmd="systemd-sysusers --root=$d"
		;;
	"systemd-tmpfiles --create biomirror.conf"*)
		awk -v u="$U" 'BEGIN { FS = OFS = "\t" } /^d / {
			if ($3 == "biomirror") $3 = u
			if ($4 == "biomirror") $4 = u
		} { print }' "$d/usr/local/lib/tmpfiles.d/biomirror.conf" |
		    move > "$T/tmpfiles.conf"
		grep -q "$U" "$T/tmpfiles.conf" || fail "tmpfiles: no user column"
		cmd="systemd-tmpfiles --create $T/tmpfiles.conf"
		;;
	esac
	echo "+ [$step] $line"
	echo "  as: $cmd"
	case $line in
	cp*)
		# Before the preset replaces it: the installed config.
		assert_exit 2 runuser -u "$U" -- $BIN --state-dir "$T/bare" sync
		assert_eq "$(cat "$LAST_ERR")" "biomirror: $d/etc/biomirror/biomirror.conf: no mirrors configured: nothing to sync (add a [NAME] section with source and dest: biomirror.conf(5))" \
		    "a bare sync with the installed config"
		[ -e "$T/bare" ] && fail "a bare sync made a state directory"
		;;
	esac
	eval "$cmd" > "$T/step.out" 2>&1 || { cat "$T/step.out"; fail "README step $step: $line"; }
	cat "$T/step.out"
	case $line in
	"make && make install"*)
		# The binary under test (BM; by default the one just installed).
		install -m 0755 "$BM" "$d/usr/local/bin/biomirror" || fail "install BM"
		;;
	cp*)
		# The one edit: the upstream is the loopback nginx (and the
		# preset's paths move with the rest).
		c=$d/etc/biomirror/biomirror.conf
		move < "$c" | sed "s|^source = .*|source = $NGINX_URL|" > "$T/c" &&
		    cat "$T/c" > "$c" || fail "edit the config"
		;;
	esac
done < "$T/quick.sh"
assert_eq "$step" 9 "README quick start steps"
grep -q -- '-u biomirror -- biomirror sync blast' "$T/quick.sh" ||
    fail "README: the first sync is not the service user's"

# What the first sync made.
db=$T/srv/mirror/blast/db
[ -L "$db" ] || fail "dest is not the snapshot symlink"
case $(readlink "$db") in
*db.biomirror/snapshots/*) ;;
*) fail "dest points at $(readlink "$db")" ;;
esac
for f in nr.00.tar.gz nr.00.tar.gz.md5 nr.01.tar.gz nr.01.tar.gz.md5 \
    nr-prot-metadata.json; do
	cmp -s "$T/up/$f" "$db/$f" || fail "$f not mirrored"
	assert_eq "$(stat -c %U "$db/$f")" "$U" "$f owner"
done
[ -e "$db/README" ] && fail "README taken: the preset's includes"
bad=$(find "$d/var/lib/biomirror" ! -user "$U" -printf '%p\n')
[ -z "$bad" ] || fail "state files not the service user's: $bad"
[ -f "$d/var/lib/biomirror/manifests/blast.db" ] || fail "no manifest"
[ -f "$d/var/lib/biomirror/locks/blast.lock" ] || fail "no lock file"
# The timer's run: the service user again, nothing to do.
assert_exit 0 runuser -u "$U" -- $BIN sync blast
grep -q 'blast: ok: listed 5, fetched 0' "$LAST_OUT" "$LAST_ERR" ||
    fail "second run: not a no-change run"

# The drop-in (the second block), then systemd-analyze verify of the
# installed units with it (ExecStart moved to the installed binary).
step=0
while IFS= read -r line; do
	step=$((step + 1))
	case $line in
	systemctl*) echo "# (no systemd as PID 1) not run: $line"; continue ;;
	esac
	cmd=$(printf '%s\n' "$line" | move)
	echo "+ $cmd"
	eval "$cmd" || fail "README drop-in step $step: $line"
done < "$T/dropin.sh"
drop=$d/etc/systemd/system/biomirror@blast.service.d/dest.conf
grep -qx "ReadWritePaths=$T/srv/mirror/blast" "$drop" ||
    fail "the drop-in does not name dest's parent: $(cat "$drop")"
if command -v systemd-analyze > /dev/null; then
	u=$T/units
	mkdir -p "$u/biomirror@blast.service.d"
	sed "s|^ExecStart=/usr/local/bin/|ExecStart=$d/usr/local/bin/|" \
	    "$d/usr/local/lib/systemd/system/biomirror@.service" > "$u/biomirror@.service"
	cp "$d/usr/local/lib/systemd/system/biomirror@.timer" "$u/"
	ln -s biomirror@.service "$u/biomirror@blast.service"
	ln -s biomirror@.timer "$u/biomirror@blast.timer"
	cp "$drop" "$u/biomirror@blast.service.d/"
	(cd "$u" && timeout 120 systemd-analyze verify --man=no \
	    ./biomirror@blast.service ./biomirror@blast.timer) > "$T/verify.out" 2>&1
	rc=$?
	cat "$T/verify.out"
	assert_eq "$rc" 0 "systemd-analyze verify"
	[ -s "$T/verify.out" ] && fail "systemd-analyze verify warned"
else
	echo "# SKIPPED: systemd-analyze verify (no systemd-analyze)"
fi
echo PASS
