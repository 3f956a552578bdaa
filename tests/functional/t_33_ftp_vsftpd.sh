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

# list URL (issue 23): vsftpd's LIST gives exact sizes, and a date only
# for a time more than six months old; the symlink with its target.
echo "# list"
mkdir -p "$T/up/listcase/sub"
printf 'hello\n' > "$T/up/listcase/x.txt"
printf 'deeper\n' > "$T/up/listcase/sub/y.bin"
ln -s x.txt "$T/up/listcase/ln"
touch -d '2020-03-04 05:06:07 UTC' "$T/up/listcase/x.txt" "$T/up/listcase/sub/y.bin"
touch -d '2020-01-02 03:04:05 UTC' "$T/up/listcase/sub"
assert_exit 0 "$BM" list "${URL}listcase/"
# (LIST's size of a directory is the server's: its inode's, as shown)
grep -Eqx 'd +[0-9]+ 2020-01-02 +sub' "$LAST_OUT" || fail "list: vsftpd sub"
grep -qx 'f            6 2020-03-04           x.txt' "$LAST_OUT" ||
    fail "list: vsftpd x.txt"
assert_eq "$(wc -l < "$LAST_OUT")" 3 "list: vsftpd, one level"
grep -q '^l .* ln -> x.txt$' "$LAST_OUT" || fail "list: vsftpd symlink"
assert_exit 0 "$BM" --json list -r "${URL}listcase/"
python3 - "$LAST_OUT" <<'PY' || fail "list -r --json: vsftpd"
import json, sys
a = json.load(open(sys.argv[1]))
got = {e["path"]: (e["type"], e["size"], e["size_exact"], e["mtime"],
                   e["mtime_precision"], e.get("target")) for e in a}
assert got["sub/y.bin"] == ("file", 7, True, "2020-03-04", "day", None), got
assert got["x.txt"] == ("file", 6, True, "2020-03-04", "day", None), got
assert got["ln"][0] == "symlink" and got["ln"][5] == "x.txt", got
assert sorted(got) == ["ln", "sub", "sub/y.bin", "x.txt"], got
PY
echo "PASS"
