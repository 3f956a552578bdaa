#!/bin/bash
# A directory of the destination that is another file system's mount
# point (a tmpfs here; a second disk on a real mirror): the batch's one
# syncfs of the destination does not reach it, so its files' bytes must
# be made durable some other way (fdatasync of the temp file, or a syncfs
# of that file system) before they are renamed to their final names;
# else a power cut can leave a published name over bytes never written
# while the manifest records it committed.  Asserted with strace -y:
# before each rename into the mounted directory, an fsync/fdatasync of
# that temp file or a syncfs of an fd on the mounted file system.
# (brk finding; fails on e38a051: only syncfs of the destination.)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup
command -v strace > /dev/null || fail "strace is not installed"

mkdir -p "$T/up" "$T/mirror/m" || fail "mkdir"
for d in 0 1 2 3 4 5 6 m; do
	mkdir -p "$T/up/d$d" || fail "mkdir"
	echo "$d" > "$T/up/d$d/f"
done
mkdir -p "$T/up/m" && echo mounted > "$T/up/m/f" && echo two > "$T/up/m/g"
touch -d 2024-01-01 "$T"/up/*/*
mount -t tmpfs -o size=1m,mode=0755 bmt103 "$T/mirror/m" || fail "mount tmpfs"
start_nginx "$T/up"
write_conf "$NGINX_URL"
strace -f -qq -y -e trace=syncfs,fsync,fdatasync,renameat2,renameat,rename \
    -e signal=none -o "$T/st" "$BM" -c "$T/bm.conf" --state-dir "$T/state" \
    --json sync > "$T/last.out" 2> "$T/last.err"
assert_eq "$?" 0 "sync"
assert_trees_equal "$T/up" "$T/mirror"
python3 - "$T/st" "$T/mirror/m" <<'PY' || fail "a file on the mounted directory renamed before its bytes were made durable"
import re, sys
lines, m = open(sys.argv[1]).read().splitlines(), sys.argv[2]
synced, renames = set(), 0
for l in lines:
    s = re.search(r"\b(fsync|fdatasync)\(\d+<([^>]*)>\) = 0", l)
    if s:
        synced.add(s.group(2))
    if re.search(r"\bsyncfs\(\d+<" + re.escape(m) + r"(/[^>]*)?>\) = 0", l):
        synced.add("fs")
    r = re.search(r"\brenameat2?\(\d+<" + re.escape(m) + r">, \"([^\"]+)\"", l)
    if r:
        renames += 1
        if "fs" not in synced and m + "/" + r.group(1) not in synced:
            sys.exit("renamed unsynced: " + l)
assert renames == 2, renames
PY
echo PASS
