#!/bin/sh
# tests/lint.sh [ROOT]: the source checks of make check, run in ROOT
# (default: the current directory).  Banned functions (STYLE.md rule 33),
# the module boundaries (DESIGN.md, "Data flow of one run"; README.md,
# Architecture), man pages that render clean.  The boundary checks run
# last on planted violations too, so that a check that no longer bites
# fails here.
cd "${1:-.}" || exit 1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/bmlint.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

SRCS='agent/*.c agent/*/*.c agent/*/*.cpp agent/*/*.h manifest/*.c
    include/biomirror/*.h'

bad=$(grep -nE '\b(strcpy|strcat|sprintf|vsprintf|gets|atoi|atol|strtok)\s*\(' \
    $SRCS 2>/dev/null |
    grep -vE '\b(snprintf|vsnprintf|strtok_r)\s*\(' |
    grep -vE '(s|vs)nprintf')
if [ -n "$bad" ]; then
	echo "lint: banned functions used:" >&2
	echo "$bad" >&2
	exit 1
fi

# strip SRC DST: SRC with its comments and the insides of its string and
# character literals blanked, line for line (grep -n keeps the numbers).
strip() {
	mkdir -p "$(dirname "$2")"
	awk '{
		out = ""; n = length($0); i = 1
		while (i <= n) {
			c = substr($0, i, 1); d = substr($0, i, 2)
			if (st == 1) {
				if (d == "*/") { st = 0; out = out "  "; i += 2 }
				else { out = out " "; i++ }
				continue
			}
			if (st >= 2) {
				if (c == "\\") { out = out "  "; i += 2; continue }
				if ((st == 2 && c == "\"") || (st == 3 && c == "\047"))
					st = 0
				out = out (st == 0 ? c : " "); i++
				continue
			}
			if (d == "/*") { st = 1; out = out "  "; i += 2; continue }
			if (d == "//") break
			if (c == "\"") st = 2
			else if (c == "\047") st = 3
			out = out c; i++
		}
		if (st >= 2) st = 0
		print out
	}' "$1" > "$2"
}

# included FILE: the project headers FILE includes, directly or through
# others ("biomirror/x.h" from include/, "x_int.h" beside the includer).
included() {
	todo=$1 seen=
	while [ -n "$todo" ]; do
		set -- $todo
		f=$1
		shift
		todo=$*
		for h in $(sed -n 's/^[ 	]*#[ 	]*include[ 	]*"\([^"]*\)".*/\1/p' \
		    "$f"); do
			case $h in
			biomirror/*) p=include/$h ;;
			*) p=$(dirname "$f")/$h ;;
			esac
			case " $seen " in *" $p "*) continue ;; esac
			seen="$seen $p"
			[ -f "$p" ] && todo="$todo $p"
		done
	done
	echo $seen
}

# boundaries: the module boundaries, checked in the current directory
# (stripped copies under $1); prints each break, fails if there is one.
#
# Exceptions, each for a reason:
# - agent/serve/ (the server) owns its sockets.
# - agent/destlock.c writes beside DEST, never inside it: the owner
#   record (.NAME.biomirror-owner, DEST.biomirror/owner) and the empty
#   DEST.biomirror it made, by openat/mkdirat/renameat/unlinkat on DEST's
#   parent, before the store has opened the tree.
# - agent/serve/tree.c's openat passes on its callers' flags (serve's,
#   all O_RDONLY: the server is read-only), so it is not plainly so.
# The state directory's files (state.c's locks, manifest/'s database and
# backups, metrics.c's textfile) are written by path, not relative to a
# tree's fd: the *at() rule below is about the destination tree.
boundaries() {
	s=$1
	out=
	for f in $SRCS; do
		[ -f "$f" ] && strip "$f" "$s/$f"
	done
	# Only manifest/ touches SQLite.
	out="$out$(cd "$s" && grep -nE '\bsqlite3_|\bsqlite3\.h\b' $SRCS \
	    2>/dev/null | grep -v '^manifest/' |
	    sed 's/$/  [sqlite3 outside manifest\/]/')
"
	# Only the commit step (agent/sched/commit.c) writes run results.
	out="$out$(cd "$s" && grep -nE '\bmanifest_(commit|intent)\b' $SRCS \
	    2>/dev/null | grep -vE '^(manifest/|include/biomirror/manifest\.h:|agent/sched/commit\.c:)' |
	    sed 's/$/  [manifest_commit or manifest_intent outside agent\/sched\/commit.c]/')
"
	# Only the transports (agent/xfer/) call libcurl (the curl module,
	# curl.c; curl_load.c's curl_* are its own functions).
	out="$out$(cd "$s" && grep -noE '\b(curl_[A-Za-z0-9_]+|CURL[A-Za-z0-9_]*)\b|curl/curl\.h' \
	    $SRCS 2>/dev/null | grep -v '^agent/xfer/' |
	    sed 's/$/  [libcurl outside agent\/xfer\/]/')
"
	# Only the transports (and the server) make and use sockets.
	out="$out$(cd "$s" && grep -nE '(^|[^.>A-Za-z0-9_])(socket|socketpair|connect|bind|listen|accept|accept4|send|recv|sendto|recvfrom|sendmsg|recvmsg|setsockopt|getsockopt|getsockname|getpeername|shutdown|getaddrinfo|getnameinfo|gethostbyname)[ 	]*\(' \
	    $SRCS 2>/dev/null | grep -vE '^agent/(xfer|serve)/' |
	    sed 's/$/  [socket call outside agent\/xfer\/ and agent\/serve\/]/')
"
	# Only the store writes in a tree by its fd: the *at() calls that
	# change it, and an openat() that is not plainly read-only.
	out="$out$(cd "$s" && grep -nE '(^|[^.>A-Za-z0-9_])(renameat|renameat2|unlinkat|mkdirat|mknodat|symlinkat|linkat|fchmodat|fchownat|utimensat)[ 	]*\(' \
	    $SRCS 2>/dev/null | grep -vE '^agent/(store/|destlock\.c:)' |
	    sed 's/$/  [tree write outside agent\/store\/]/')
"
	for f in $SRCS; do
		case $f in
		agent/store/*|agent/destlock.c|agent/serve/tree.c) continue ;;
		esac
		[ -f "$s/$f" ] || continue
		out="$out$(awk -v f="$f" '
		    function flush() {
			if (call != "" && (call ~ /O_(WRONLY|RDWR|CREAT|TRUNC|APPEND|TMPFILE)/ ||
			    call !~ /O_(RDONLY|PATH)/))
				print f ":" at ":" call "  [openat for writing outside agent/store/]"
			call = ""
		    }
		    call != "" { call = call $0; depth += gsub(/\(/, "(") - gsub(/\)/, ")")
			if (depth <= 0) flush(); next }
		    /(^|[^.>A-Za-z0-9_])openat2?[ \t]*\(/ {
			at = NR; call = substr($0, match($0, /openat2?[ \t]*\(/))
			depth = gsub(/\(/, "(", call) - gsub(/\)/, ")", call)
			if (depth <= 0) flush()
		    }' "$s/$f")
"
	done
	# A lister (agent/lister/ and its headers) includes no transport's
	# header and not the store's: what it learns goes back as entries.
	for f in agent/lister/*.c agent/lister/*.h include/biomirror/lister.h \
	    include/biomirror/list_http.h include/biomirror/list_ftp.h \
	    include/biomirror/crawl.h; do
		[ -f "$f" ] || continue
		for p in $(included "$f"); do
			case $p in
			include/biomirror/xfer.h|include/biomirror/xfer_*.h|\
			include/biomirror/udt_shim.h|include/biomirror/store.h|\
			agent/xfer/*|agent/store/*)
				out="$out$f: includes $p  [lister includes a transport's or the store's header]
" ;;
			esac
		done
	done
	# Everything logs: log.c calls no module but text.c (no cycles).
	if [ -f agent/log.c ]; then
		for p in $(included agent/log.c); do
			case $p in
			include/biomirror/log.h|include/biomirror/text.h) ;;
			*) out="$out""agent/log.c: includes $p  [log.c uses a module above it]
" ;;
			esac
		done
	fi
	out=$(printf '%s' "$out" | sed '/^$/d')
	[ -z "$out" ] && return 0
	printf '%s\n' "$out"
	return 1
}

if ! bad=$(boundaries "$tmp/strip"); then
	echo "lint: module boundaries broken:" >&2
	echo "$bad" >&2
	exit 1
fi

# The checks themselves: each planted break (FILE TEXT ..., in an empty
# tree) must be found.
plant() {
	rm -rf "$tmp/plant" "$tmp/pstrip"
	while [ $# -ge 2 ]; do
		mkdir -p "$(dirname "$tmp/plant/$1")"
		printf '%s\n' "$2" > "$tmp/plant/$1"
		what="$1: $2"
		shift 2
	done
	if (cd "$tmp/plant" && boundaries "$tmp/pstrip" > /dev/null); then
		echo "lint: the boundary check missed a planted break:" >&2
		echo "$what" >&2
		exit 1
	fi
}
plant agent/run/p.c 'int f(void) { return sqlite3_exec(0, 0, 0, 0, 0); }'
plant agent/run/p.c 'void f(void) { curl_easy_reset(0); }'
plant agent/run/p.c 'int f(void) { return manifest_commit(0, 1, 0, 0); }'
plant agent/sched/sched.c 'int f(void) { return manifest_intent(0, 0, 0); }'
plant agent/main.c 'void f(void) { curl_multi_init(); }'
plant agent/run/p.c 'int f(void) { return socket(2, 1, 0); }'
plant agent/run/p.c 'int f(int d) { return renameat(d, "a", d, "b"); }'
plant agent/run/p.c 'int f(int d) { return openat(d, "a",
    O_WRONLY | O_CREAT, 0644); }'
plant agent/run/p.c 'int f(int d, int fl) { return openat(d, "a", fl); }'
plant agent/lister/p.c '#include "biomirror/store.h"'
plant agent/log.c '#include "biomirror/report.h"'
plant include/biomirror/sched.h '#include "biomirror/xfer.h"' \
    include/biomirror/lister.h '#include "biomirror/sched.h"'
rm -rf "$tmp/plant" "$tmp/pstrip"

# The man pages render without a warning (groff -man -ww -z).
for page in docs/biomirror.1 docs/biomirror.conf.5; do
	out=$(groff -man -ww -z "$page" 2>&1) || out="$out (groff failed)"
	if [ -n "$out" ]; then
		echo "lint: $page: groff warnings:" >&2
		echo "$out" >&2
		exit 1
	fi
done
echo "lint: ok"
