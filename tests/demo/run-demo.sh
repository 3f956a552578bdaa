#!/bin/sh
# make run: the demo.  Serves a generated tree shaped like NCBI's blast/db
# with nginx on 127.0.0.1, mirrors it with ./biomirror into ./demo-mirror
# (state in ./demo-state), runs again to show that nothing is fetched twice,
# and prints the status.  Exits with biomirror's status (the first non-zero).
# Run from the repository root; needs nginx-light, python3, curl (make deps).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
set -u
cd "$(dirname "$0")/../.." || exit 2
. tests/functional/lib.sh

BM=${BM:-$PWD/biomirror}
if [ ! -x "$BM" ]; then
	echo "run-demo: no $BM: build it first (make)" >&2
	exit 2
fi
bm_setup >/dev/null

say() { printf '\n== %s\n' "$*"; }

up=$T/demo-upstream
sh tests/demo/gen-demo.sh "$up/blast/db" || fail "gen-demo.sh"
start_nginx "$up" >/dev/null
nfiles=$(find "$up/blast/db" -type f | wc -l)
kb=$(du -sk "$up/blast/db" | cut -f1)

conf=$T/demo.conf
sed -e "s/@PORT@/$NGINX_PORT/g" -e "s|=\( *\)\./|=\1$PWD/|" conf/demo.conf > "$conf" ||
    fail "writing $conf"
rm -rf ./demo-mirror ./demo-state

say "upstream: ${NGINX_URL}blast/db/ ($nfiles files, $kb KB), nginx on 127.0.0.1"
echo "config:   $conf (from conf/demo.conf)"
echo "mirror:   $PWD/demo-mirror   state: $PWD/demo-state"

rc=0
keep() { [ "$rc" -ne 0 ] || rc=$1; }

say "first run: list upstream, fetch everything, give each file the upstream mtime"
echo "\$ biomirror -c $conf sync blast-demo"
"$BM" -c "$conf" sync blast-demo
r=$?; keep $r
if [ "$r" -eq 0 ] && [ -d demo-mirror ]; then
	ok=$(cd demo-mirror && md5sum -c --quiet ./*.md5 >/dev/null 2>&1 && echo yes)
	echo "check: every volume matches its .md5 sidecar: ${ok:-NO}"
	ls -l --time-style=long-iso demo-mirror | sed -n '2,6p'
	echo "..."
fi

mark=$(wc -l < "$NGINX_ACCESS_LOG")
say "second run: nothing changed upstream, nothing fetched"
echo "\$ biomirror -c $conf sync blast-demo"
"$BM" -c "$conf" sync blast-demo
keep $?
got=$(tail -n +"$((mark + 1))" "$NGINX_ACCESS_LOG" | nginx_gets /dev/stdin |
    grep -vc '/$')
echo "upstream served $got file downloads during the second run"

say "status"
echo "\$ biomirror -c $conf status"
"$BM" -c "$conf" status
keep $?

echo
echo "demo done (exit $rc); the mirror stays in ./demo-mirror, its manifest in ./demo-state"
exit "$rc"
