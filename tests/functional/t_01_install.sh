#!/bin/bash
# make install (PREFIX, DESTDIR) puts the binary, the example configs, the
# man pages and the systemd units in place; the installed binary runs and
# accepts the installed configs.
. "$(dirname "$0")/lib.sh"
bm_setup
d=$T/root
make -s install DESTDIR="$d" PREFIX=/usr > "$T/install.log" 2>&1 ||
    { cat "$T/install.log"; fail "make install"; }
for f in usr/bin/biomirror etc/biomirror/biomirror.conf \
    usr/share/biomirror/conf/biomirror.conf \
    usr/share/biomirror/conf/ncbi-blast.conf \
    usr/share/biomirror/conf/ftp-example.conf \
    usr/share/man/man1/biomirror.1 usr/share/man/man5/biomirror.conf.5 \
    usr/lib/systemd/system/biomirror@.service \
    usr/lib/systemd/system/biomirror@.timer usr/lib/sysusers.d/biomirror.conf; do
	[ -f "$d/$f" ] || fail "not installed: $f"
done
[ -x "$d/usr/bin/biomirror" ] || fail "binary not executable"
grep -q '^ExecStart=/usr/bin/biomirror sync %i$' \
    "$d/usr/lib/systemd/system/biomirror@.service" || fail "ExecStart not set"
assert_exit 0 "$d/usr/bin/biomirror" --version
grep -q '^biomirror [0-9]' "$T/last.out" || fail "--version output"
for c in biomirror.conf ncbi-blast.conf ftp-example.conf; do
	assert_exit 0 "$d/usr/bin/biomirror" -c "$d/usr/share/biomirror/conf/$c" -n
done
# A second install keeps an existing /etc config.
echo '; local edit' >> "$d/etc/biomirror/biomirror.conf"
make -s install DESTDIR="$d" PREFIX=/usr > "$T/install.log" 2>&1 || fail "reinstall"
grep -q '; local edit' "$d/etc/biomirror/biomirror.conf" ||
    fail "make install overwrote /etc/biomirror/biomirror.conf"
echo PASS
