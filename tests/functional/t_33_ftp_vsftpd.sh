#!/bin/bash
# FTP sync against real vsftpd, listed with LIST (vsftpd has no MLSD): see ftp_suite.sh.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup
SERVER=vsftpd
. "$(dirname "$0")/ftp_suite.sh"

# Upstream symlinks ('l' entries of LIST): recreated when the target stays
# inside the mirror, recorded and not created otherwise; retargeted and
# removed upstream, they follow.
echo "# symlinks"
ln -s data/file01.bin "$T/up/link-in"
ln -s ../a "$T/up/data/dir-link"
ln -s ../../etc/passwd "$T/up/link-out"
ln -s /etc/passwd "$T/up/link-abs"
assert_exit 0 bm --json sync up
expect_counts 0 0 0 0
assert_eq "$(readlink "$T/mirror/link-in")" data/file01.bin "link-in target"
assert_eq "$(readlink "$T/mirror/data/dir-link")" ../a "dir-link target"
[ -e "$T/mirror/link-out" ] || [ -L "$T/mirror/link-out" ] && fail "link-out was created"
[ -L "$T/mirror/link-abs" ] && fail "link-abs was created"
grep -q 'link-out -> ../../etc/passwd: symlink target outside the mirror: recorded, not created' \
    "$T/last.err" || fail "link-out not reported"
n=$(manifest_sql "$T/state" up "select count(*) from files where type = 108")
assert_eq "$n" 4 "symlinks in the manifest"
assert_eq "$(manifest_sql "$T/state" up "select cast(target as text) from files where cast(path as text) = 'link-out'")" \
    ../../etc/passwd "link-out target recorded"
echo "# symlinks: no change, then retargeted and removed upstream"
assert_exit 0 bm --json sync up
expect_counts 0 0 0 0
assert_eq "$(readlink "$T/mirror/link-in")" data/file01.bin "link-in kept"
rm "$T/up/link-in" "$T/up/data/dir-link"
ln -s data/file02.bin "$T/up/link-in"
assert_exit 0 bm --json sync up
assert_eq "$(readlink "$T/mirror/link-in")" data/file02.bin "link-in retargeted"
[ -L "$T/mirror/data/dir-link" ] && fail "dir-link not deleted"
assert_eq "$(manifest_sql "$T/state" up "select count(*) from files where type = 108")" 3 \
    "symlinks in the manifest after the removal"
echo "PASS"
