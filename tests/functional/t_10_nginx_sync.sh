#!/bin/bash
# Core sync against real nginx (autoindex html): see sync_suite.sh.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup
SERVER=nginx
. "$(dirname "$0")/sync_suite.sh"

# list URL: the listing alone (issue 23), no manifest or destination:
# nginx's autoindex gives exact sizes (autoindex_exact_size on) and times
# to the minute; directories are listed, entered only with -r.
echo "# list"
mkdir -p "$T/up/listcase/sub"
printf 'hello\n' > "$T/up/listcase/x.txt"
printf 'deeper\n' > "$T/up/listcase/sub/y.bin"
touch -d '2024-03-04 05:06:07 UTC' "$T/up/listcase/x.txt" "$T/up/listcase/sub/y.bin"
touch -d '2023-01-02 03:04:05 UTC' "$T/up/listcase/sub"
assert_exit 0 "$BM" --state-dir "$T/list-state" list "${NGINX_URL}listcase/"
assert_eq "$(cat "$LAST_OUT")" "d            - 2023-01-02T03:04Z    sub
f            6 2024-03-04T05:06Z    x.txt" "list: nginx, one level"
[ -e "$T/list-state" ] && fail "list made a state directory"
assert_exit 0 "$BM" list "${NGINX_URL}listcase/" -r --json
python3 - "$LAST_OUT" <<'PY' || fail "list -r --json: nginx"
import json, sys
a = json.load(open(sys.argv[1]))
got = [(e["path"], e["type"], e["size"], e["size_exact"], e["mtime"],
        e["mtime_precision"]) for e in a]
want = [("sub", "dir", None, False, "2023-01-02T03:04Z", "minute"),
        ("sub/y.bin", "file", 7, True, "2024-03-04T05:06Z", "minute"),
        ("x.txt", "file", 6, True, "2024-03-04T05:06Z", "minute")]
assert got == want, got
PY
assert_exit 3 "$BM" list "${NGINX_URL}listcase/nope/"
assert_eq "$(cat "$LAST_ERR")" "biomirror: ${NGINX_URL}listcase/nope/: list: HTTP 404" \
    "list: the 404 said once"
[ -s "$LAST_OUT" ] && fail "list: a failed listing printed entries"
echo "PASS"
