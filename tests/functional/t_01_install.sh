#!/bin/bash
# make install (PREFIX, DESTDIR) puts the binary, the example configs, the
# man pages, the docs, the systemd units and the sysusers.d and tmpfiles.d
# files in place (exactly those files); the sysusers.d and tmpfiles.d files
# work; the installed binary runs and accepts the installed configs.
# The UDT module (libbiomirror-udt.so) goes to $(PREFIX)/lib/biomirror and
# exports its table; the binary does not link libudt (whose initializer
# sleeps 100 ms in every process).
. "$(dirname "$0")/lib.sh"
bm_setup
d=$T/root
make -s install DESTDIR="$d" PREFIX=/usr > "$T/install.log" 2>&1 ||
    { cat "$T/install.log"; fail "make install"; }
# Exactly these files, with these modes (man pages and docs as in docs/).
{
	echo "755 usr/bin/biomirror"
	echo "644 usr/lib/biomirror/libbiomirror-udt.so"
	echo "644 usr/lib/biomirror/libbiomirror-curl.so"
	for f in etc/biomirror/biomirror.conf \
	    usr/share/biomirror/conf/biomirror.conf \
	    usr/share/biomirror/conf/ncbi-blast.conf \
	    usr/share/biomirror/conf/ftp-example.conf \
	    usr/lib/systemd/system/biomirror@.service \
	    usr/lib/systemd/system/biomirror@.timer \
	    usr/lib/systemd/system/biomirror-serve.service \
	    usr/lib/sysusers.d/biomirror.conf usr/lib/tmpfiles.d/biomirror.conf \
	    usr/share/doc/biomirror/README.md; do
		echo "644 $f"
	done
	for m in docs/*.1; do echo "644 usr/share/man/man1/${m#docs/}"; done
	for m in docs/*.5; do echo "644 usr/share/man/man5/${m#docs/}"; done
	for m in docs/*.md; do echo "644 usr/share/doc/biomirror/${m#docs/}"; done
} | LC_ALL=C sort > "$T/want.files"
(cd "$d" && find . \( -type f -o -type l \) -printf '%m %P\n') | LC_ALL=C sort > "$T/got.files"
diff -u "$T/want.files" "$T/got.files" || fail "installed files differ"
grep -qx '644 usr/share/doc/biomirror/operations.md' "$T/got.files" ||
    fail "docs/operations.md not installed"
cmp -s systemd/biomirror.tmpfiles "$d/usr/lib/tmpfiles.d/biomirror.conf" ||
    fail "tmpfiles.d file differs from systemd/biomirror.tmpfiles"
# The sysusers.d and tmpfiles.d files work: the user is made, then the
# directories, owned as they say (all inside DESTDIR).
systemd-sysusers --root="$d" > "$T/sysusers.log" 2>&1 ||
    { cat "$T/sysusers.log"; fail "systemd-sysusers --root"; }
uid=$(awk -F: '$1 == "biomirror" { print $3 }' "$d/etc/passwd")
[ -n "$uid" ] || fail "sysusers made no biomirror user"
grep -q "^biomirror:x:$uid:.*:/var/lib/biomirror:" "$d/etc/passwd" ||
    fail "biomirror user's home"
systemd-tmpfiles --root="$d" --create > "$T/tmpfiles.log" 2>&1 ||
    { cat "$T/tmpfiles.log"; fail "systemd-tmpfiles --root --create"; }
assert_eq "$(stat -c '%u %a' "$d/var/lib/biomirror")" "$uid 755" "state directory"
assert_eq "$(stat -c '%u %a' "$d/etc/biomirror")" "0 755" "config directory"
[ -x "$d/usr/bin/biomirror" ] || fail "binary not executable"
grep -q '^ExecStart=/usr/bin/biomirror sync %i$' \
    "$d/usr/lib/systemd/system/biomirror@.service" || fail "ExecStart not set"
grep -q '^ExecStart=/usr/bin/biomirror serve$' \
    "$d/usr/lib/systemd/system/biomirror-serve.service" ||
    fail "biomirror-serve.service: ExecStart not set"
assert_exit 0 "$d/usr/bin/biomirror" --version
grep -q '^biomirror [0-9]' "$T/last.out" || fail "--version output"
! ldd "$d/usr/bin/biomirror" | grep -q libudt || fail "the binary links libudt"
! ldd "$d/usr/bin/biomirror" | grep -q libcurl || fail "the binary links libcurl"
nm -D --defined-only "$d/usr/lib/biomirror/libbiomirror-curl.so" |
    grep -q ' T xfer_curl_module$' || fail "the curl module exports no table"
nm -D --defined-only "$d/usr/lib/biomirror/libbiomirror-udt.so" |
    grep -q ' T udt_shim_module$' || fail "the UDT module exports no table"
strace -f -e trace=clock_nanosleep -o "$T/strace.out" "$d/usr/bin/biomirror" \
    --version > /dev/null || fail "strace --version"
! grep -q 'tv_nsec=100000000' "$T/strace.out" ||
    fail "libudt's 100 ms sleep at start: $(cat "$T/strace.out")"
for c in biomirror.conf ncbi-blast.conf ftp-example.conf; do
	assert_exit 0 "$d/usr/bin/biomirror" -c "$d/usr/share/biomirror/conf/$c" -n
done
# The /etc config has no active mirror: a bare sync has nothing to do.
assert_exit 0 "$d/usr/bin/biomirror" -c "$d/etc/biomirror/biomirror.conf" -n
grep -q '(0 mirrors)' "$T/last.out" || fail "/etc config: a mirror is active"
cmp -s conf/etc-biomirror.conf "$d/etc/biomirror/biomirror.conf" ||
    fail "/etc config is not conf/etc-biomirror.conf"
# A second install keeps an existing /etc config.
echo '; local edit' >> "$d/etc/biomirror/biomirror.conf"
make -s install DESTDIR="$d" PREFIX=/usr > "$T/install.log" 2>&1 || fail "reinstall"
grep -q '; local edit' "$d/etc/biomirror/biomirror.conf" ||
    fail "make install overwrote /etc/biomirror/biomirror.conf"
echo PASS
