#!/bin/bash
# A hostile listing (../x, /etc/x, a/../../x, encoded dot-dots, another
# host) and a symlink planted in the destination write nothing outside the
# destination.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup

mkdir -p "$T/up/evil" "$T/up/a" "$T/outside"
printf 'good\n' > "$T/up/good.txt"
printf 'pwned\n' > "$T/up/evil/pwn.txt"
printf 'x\n' > "$T/up/x"
cat > "$T/up/index.html" <<'HTML'
<html><body><h1>Index of /</h1><pre>
<a href="../">../</a>
<a href="good.txt">good.txt</a>
<a href="../x">../x</a>
<a href="/etc/x">/etc/x</a>
<a href="a/../../x">a/../../x</a>
<a href="%2e%2e/x">%2e%2e/x</a>
<a href="..%2Fx">..%2Fx</a>
<a href="http://other.example/x">other</a>
<a href="evil/">evil/</a>
</pre></body></html>
HTML
cat > "$T/up/evil/index.html" <<'HTML'
<html><body><pre><a href="pwn.txt">pwn.txt</a>
<a href="../../../outside-too">up</a></pre></body></html>
HTML
start_nginx_static "$T/up"
write_conf "$NGINX_URL"

# The planted symlink: dest/evil -> $T/outside.
mkdir -p "$T/mirror"
ln -s "$T/outside" "$T/mirror/evil"
before_outside=$(ls -A "$T/outside" | wc -l)

# delete = no: the symlink stays, nothing is written through it.
sed -i 's/^delete = yes$/delete = no/' "$T/bm.conf"
assert_exit 1 bm --json sync up
assert_eq "$(jfield fetched)" 1 "only good.txt is fetched"
cmp -s "$T/up/good.txt" "$T/mirror/good.txt" || fail "good.txt not mirrored"
assert_eq "$(ls -A "$T/outside" | wc -l)" "$before_outside" "files written outside"
[ -L "$T/mirror/evil" ] || fail "the planted symlink was replaced with delete = no"
for f in "$T/x" "$T/outside-too" /etc/x; do
	[ -e "$f" ] && fail "$f was written"
done
# Nothing but good.txt, the symlink and the listed dir entries.
extra=$(cd "$T/mirror" && find . -mindepth 1 ! -path ./good.txt ! -path ./evil)
[ -z "$extra" ] || fail "unexpected entries in the mirror: $extra"
grep -q 'evil' "$T/last.err" || fail "the refused path is not reported"

# delete = yes: the symlink is not what biomirror committed there, so it
# is not deleted either (a conflict, exit 1); its target is never written
# to.  Once the admin removes it, the real directory is mirrored.
sed -i 's/^delete = no$/delete = yes/' "$T/bm.conf"
assert_exit 1 bm --json sync up
[ -L "$T/mirror/evil" ] || fail "the planted symlink was deleted"
grep -qxF 'biomirror: evil: upstream has a directory here; the local symlink is not the one biomirror committed: it stays, not replaced' \
    "$T/last.err" || fail "no conflict for the planted symlink"
assert_eq "$(ls -A "$T/outside" | wc -l)" "$before_outside" "files written outside"
rm "$T/mirror/evil"
assert_exit 0 bm --json sync up
[ -L "$T/mirror/evil" ] && fail "the planted symlink is still there"
[ -d "$T/mirror/evil" ] || fail "evil/ is not a directory now"
cmp -s "$T/up/evil/pwn.txt" "$T/mirror/evil/pwn.txt" || fail "evil/pwn.txt not mirrored"
assert_eq "$(ls -A "$T/outside" | wc -l)" "$before_outside" "files written outside"
[ -e "$T/outside/pwn.txt" ] && fail "written through the symlink"
echo PASS
