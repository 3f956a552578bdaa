#!/bin/bash
# ftp_active = yes against real vsftpd (port_enable=YES,
# connect_from_port_20=NO): every data connection is opened by the server
# (EPRT/PORT, never PASV/EPSV) and the tree is mirrored.  Then a name that
# is not UTF-8 (Latin-1 "caf\xe9.txt") is mirrored under exactly those
# bytes: requested with the bytes it was listed with.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup

mkdir -p "$T/up/d1/d2"
printf 'one\n' > "$T/up/one.txt"
printf 'two\n' > "$T/up/d1/two.txt"
head -c 300000 /dev/urandom > "$T/up/d1/d2/three.bin"
latin=$(printf 'caf\351.txt')
printf 'latin-1 name\n' > "$T/up/d1/$latin"
touch -d '2020-05-06 07:08:09 UTC' "$T/up/d1/$latin"
start_vsftpd "$T/up"
# 'FTP command: Client "127.0.0.1", "EPRT |1|127.0.0.1|4711|"'
cmds() {
	sed -n 's/.*FTP command: Client "[^"]*", "\([A-Z]*\).*/\1/p' "$VSFTPD_LOG"
}

echo "# ftp_active = yes"
write_conf "$VSFTPD_URL"
printf 'ftp_active = yes\n' >> "$T/bm.conf"
assert_exit 0 bm --json sync up
expect_counts 4 0 0 0
assert_trees_equal "$T/up" "$T/mirror"
assert_eq "$(cmds | grep -c -x -e PASV -e EPSV)" 0 "passive data connections"
active=$(cmds | grep -c -x -e PORT -e EPRT)
retrs=$(cmds | grep -c -x RETR)
lists=$(cmds | grep -c -x LIST)
assert_eq "$retrs" 4 "RETRs"
assert_eq "$active" "$((retrs + lists))" "an EPRT/PORT for every LIST and RETR"

echo "# the Latin-1 name, byte for byte"
[ -f "$T/mirror/d1/$latin" ] || fail "d1/caf\\xe9.txt missing"
assert_eq "$(find "$T/mirror/d1" -name 'caf*' | wc -l)" 1 "one caf* name"
assert_eq "$(find "$T/mirror/d1" -name 'caf*' -printf '%f' | od -An -tx1 | tr -d ' \n')" \
    "636166e92e747874" "name bytes"
cmp "$T/up/d1/$latin" "$T/mirror/d1/$latin" || fail "content"
assert_eq "$(stat -c %Y "$T/mirror/d1/$latin")" "$(stat -c %Y "$T/up/d1/$latin")" "mtime"
assert_eq "$(manifest_sql "$T/state" up "select hex(path) from files where hex(path) like '%E9%'")" \
    "64312F636166E92E747874" "manifest path bytes"

echo "# second run: nothing changed; then the Latin-1 file changes upstream"
assert_exit 0 bm --json sync up
expect_counts 0 0 0 0
printf 'latin-1 name, changed\n' > "$T/up/d1/$latin"
assert_exit 0 bm --json sync up
expect_counts 1 0 0 0
cmp "$T/up/d1/$latin" "$T/mirror/d1/$latin" || fail "changed content"
echo "PASS"
