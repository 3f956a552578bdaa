#!/bin/bash
# Listings as servers write them (issue 22, items 2-5), against real
# servers that send the exact listing lines given here (nginx serving a
# hand-written index page; our FTP server's --listing, LIST and MLSD):
#  (a) HTML index: a 300 KB file listed "0" is mirrored on the first
#      run, exit 0 (a listed 0 is a hint; before: "got 307200 bytes,
#      the listing says 0", exit 1);
#  (a2) HTML index, files with an exact size and no date: after a same-size
#      rewrite the next run fetches it (a conditional GET, 200), the
#      unchanged one answers 304 (before: neither was asked for again);
#  (a3) HTML index without dates, a file whose Last-Modified is not before
#      the response's Date (weak, RFC 7232 2.2.2: here a future mtime
#      stands for "rewritten again later in that second"): after a
#      same-size rewrite that keeps its mtime the next run fetches it
#      unconditionally (before: a 304, the rewrite never fetched); an
#      older file is still asked for conditionally (304);
#  (a4) HTML index, an empty file listed 0 whose row holds that 0 as
#      exact (as biomirror before issue 22 recorded it): the next run
#      fetches nothing, no GET (before: "changed", fetched again once
#      after the upgrade); a later listed time is a change;
#  (b) LIST: the same for a file listed 0;
#  (c) MLSD with exact sizes and no Modify fact: after a same-size
#      rewrite upstream the next run fetches it again (MDTM decides),
#      an unchanged file is not fetched again (before: never checked);
#  (d) LIST lines whose date does not exist (Feb 30), an OS/2 line
#      (3-digit year) and German/French month names are mirrored; the
#      Feb 30 file is checked by MDTM on the next run (rewrite fetched,
#      the unchanged one not); with -v every skipped line is named with
#      its reason, and the run says how many lines it did not understand;
#  (e) LIST "Mon DD HH:MM", then "Mon DD  YYYY" of the same day (what ls
#      shows six months later): nothing fetched again;
#  (f) MLSD modify= in 2263 and 9999, past what int64 ns holds: the
#      listed time is unknown, the file gets its MDTM time (before: 1901,
#      a signed overflow); the next run asks MDTM and fetches nothing.
# Each case runs in a subshell, so that the old binary's report names
# every case it fails.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup

export LC_ALL=C
D30=$(( $(date -u +%s) - 30 * 86400 ))
MIN30=$(date -u -d "@$D30" '+%b %e %H:%M')	# "Nov  2 10:05"
DAY30=$(date -u -d "@$D30" '+%b %e  %Y')	# "Nov  2  2026"

# conf NAME URL: a config of one mirror NAME into $T/m_NAME.
conf() {
	printf '[global]\nstate_dir = %s/st_%s\n\n[%s]\nsource = %s\ndest = %s/m_%s\nretries = 1\n' \
	    "$T" "$1" "$1" "$2" "$T" "$1" > "$T/$1.conf"
}

# run NAME ARGS...: biomirror with NAME's config.
run() {
	local n=$1
	shift
	"$BM" -c "$T/$n.conf" --state-dir "$T/st_$n" "$@"
}

# retrs PATH: RETRs our FTP server answered for PATH (0 if none).
retrs() {
	modeefault_stat "s['retrs'].get('$1', 0)"
}

mkdir -p "$T/www" "$T/ftp/b" "$T/ftp/c" "$T/ftp/d" "$T/ftp/f"
head -c 307200 /dev/urandom > "$T/www/grow.log"
printf 'one\n' > "$T/www/one.txt"
mkdir -p "$T/www/u" "$T/www/w" "$T/www/z"
: > "$T/www/z/empty.txt"
printf 'hello\n' > "$T/www/w/weak.txt"
printf 'hello\n' > "$T/www/w/old.txt"
printf 'hello\n' > "$T/www/u/nodate.txt"
printf 'hello\n' > "$T/www/u/nodate2.txt"
printf 'hello\n' > "$T/www/u/dated.txt"
cp "$T/www/grow.log" "$T/ftp/b/grow.log"
for f in f/y2263 f/y9999 c/same.txt c/rewrite.txt d/feb30.txt d/feb31.txt d/maerz.txt \
    d/janv.txt d/prec.txt; do
	printf 'hello\n' > "$T/ftp/$f"
done
head -c 612 /dev/urandom > "$T/ftp/d/os2.bin"
touch -d '2026-01-01 00:00:00 UTC' "$T/ftp"/*/* "$T/www"/* "$T/www/u"/* \
    "$T/www/z"/*
chmod -R a+rX "$T/www" "$T/ftp"

# (a) an nginx-style index page, served as it is.
cat > "$T/www/index.html" <<'EOF'
<html>
<head><title>Index of /</title></head>
<body>
<h1>Index of /</h1><hr><pre><a href="../">../</a>
<a href="grow.log">grow.log</a>                                           01-Jan-2026 00:00                   0
<a href="one.txt">one.txt</a>                                            01-Jan-2026 00:00                   4
</pre><hr></body>
</html>
EOF
cat > "$T/www/u/index.html" <<'EOF'
<html>
<head><title>Index of /u/</title></head>
<body>
<h1>Index of /u/</h1><hr><pre><a href="../">../</a>
<a href="dated.txt">dated.txt</a>                                          01-Jan-2026 00:00                   6
<a href="nodate.txt">nodate.txt</a>                                                                6
<a href="nodate2.txt">nodate2.txt</a>                                                               6
</pre><hr></body>
</html>
EOF
cat > "$T/www/w/index.html" <<'EOF'
<html>
<head><title>Index of /w/</title></head>
<body>
<h1>Index of /w/</h1><hr><pre><a href="../">../</a>
<a href="old.txt">old.txt</a>
<a href="weak.txt">weak.txt</a>
</pre><hr></body>
</html>
EOF
# z_index DATE: the index of z/, empty.txt dated DATE and listed 0.
z_index() {
	printf '<html>\n<head><title>Index of /z/</title></head>\n<body>\n<h1>Index of /z/</h1><hr><pre><a href="../">../</a>\n<a href="empty.txt">empty.txt</a>                                          %s                   0\n</pre><hr></body>\n</html>\n' \
	    "$1" > "$T/www/z/index.html"
}
z_index '01-Jan-2026 00:00'
WEAK_MTIME=$(( $(date +%s) + 3600 ))
touch -d "@$WEAK_MTIME" "$T/www/w/weak.txt"
touch -d "2026-01-01 00:00:00 UTC" "$T/www/w/old.txt"
start_nginx_static "$T/www"

printf -- '-rw-r--r--   1 ftp ftp        0 %s grow.log\r\n' "$DAY30" \
    > "$T/b.list"
printf 'Type=file;Size=6;Perm=r; same.txt\r\nType=file;Size=6;Perm=r; rewrite.txt\r\n' \
    > "$T/c.mlsd"
printf 'type=file;size=6;modify=22630101000000; y2263\r\ntype=file;size=6;modify=99991231235959; y9999\r\n' \
    > "$T/f.mlsd"
# d.list LINE7: the LIST reply of d/, its prec.txt line dated LINE7.
d_list() {
	{
		printf -- '-rw-r--r--   1 ftp ftp        6 Feb 30 10:00 feb30.txt\r\n'
		printf -- '-rw-r--r--   1 ftp ftp        6 Feb 31  2025 feb31.txt\r\n'
		printf '  612      A    04-23-103  10:57  os2.bin\r\n'
		printf -- '-rw-r--r--   1 ftp ftp        6 M\303\244r  5  2020 maerz.txt\r\n'
		printf -- '-rw-r--r--   1 ftp ftp        6 janv.  5  2020 janv.txt\r\n'
		printf 'garbage, no listing line\r\n'
		printf -- '-rw-r--r--   1 ftp ftp        6 %s prec.txt\r\n' "$1"
	} > "$T/d.list"
}
d_list "$MIN30"
start_modeefault "$T/ftp" --feat nomlst --listing "b=$T/b.list" \
    --listing "d=$T/d.list"
LIST_URL=$MODEEFAULT_URL
LIST_STATS=$MODEEFAULT_STATS

failed=""

case_a() {
	echo "# (a) HTML index: a file listed 0"
	conf a "$NGINX_URL"
	assert_exit 0 run a --json sync a
	assert_eq "$(jfield fetched)" 2 "fetched"
	cmp "$T/www/grow.log" "$T/m_a/grow.log" || fail "grow.log differs"
	cmp "$T/www/one.txt" "$T/m_a/one.txt" || fail "one.txt differs"
}
( case_a ) || failed="$failed a"

case_a2() {
	echo "# (a2) HTML index: exact sizes, no dates"
	conf a2 "${NGINX_URL}u/"
	assert_exit 0 run a2 --json sync a2
	assert_eq "$(jfield fetched)" 3 "fetched"
	printf 'HELLO\n' > "$T/www/u/nodate.txt"
	touch -d '2026-02-01 00:00:00 UTC' "$T/www/u/nodate.txt"
	assert_exit 0 run a2 --json sync a2
	assert_eq "$(jfield fetched)" 1 "fetched after the rewrite"
	cmp "$T/www/u/nodate.txt" "$T/m_a2/nodate.txt" || fail "rewrite not fetched"
	assert_eq "$(nginx_gets | grep -c '^/u/nodate.txt$')" 2 "GETs (200) of nodate.txt"
	assert_eq "$(nginx_gets | grep -c '^/u/nodate2.txt$')" 1 "GETs (200) of nodate2.txt"
	grep -q '"GET /u/nodate2.txt HTTP/1.1" 304 ' "$NGINX_ACCESS_LOG" ||
	    fail "nodate2.txt was not asked for conditionally (no 304)"
}
( case_a2 ) || failed="$failed a2"

case_a3() {
	echo "# (a3) HTML index, no dates: a weak Last-Modified"
	conf a3 "${NGINX_URL}w/"
	assert_exit 0 run a3 --json sync a3
	assert_eq "$(jfield fetched)" 2 "fetched"
	printf 'HELLO\n' > "$T/www/w/weak.txt"
	touch -d "@$WEAK_MTIME" "$T/www/w/weak.txt"
	assert_exit 0 run a3 --json sync a3
	assert_eq "$(jfield fetched)" 1 "fetched after the same-second rewrite"
	cmp "$T/www/w/weak.txt" "$T/m_a3/weak.txt" || fail "rewrite not fetched"
	assert_eq "$(grep -c '"GET /w/weak.txt HTTP/1.1" 200 ' "$NGINX_ACCESS_LOG")" 2 \
	    "GETs (200) of weak.txt"
	grep -q '"GET /w/old.txt HTTP/1.1" 304 ' "$NGINX_ACCESS_LOG" ||
	    fail "old.txt was not asked for conditionally (no 304)"
}
( case_a3 ) || failed="$failed a3"

case_a4() {
	local db
	echo "# (a4) HTML index: an empty file listed 0, recorded as exact"
	conf a4 "${NGINX_URL}z/"
	assert_exit 0 run a4 --json sync a4
	assert_eq "$(jfield fetched)" 1 "fetched"
	assert_exit 0 run a4 --json sync a4
	assert_eq "$(jfield fetched)" 0 "fetched again (a hint-0 row)"
	db=$(manifest_db "$T/st_a4" a4)
	assert_eq "$(sqlite3 -batch "$db" "update files set list_size = 0, list_size_exact = 1 where path = cast('empty.txt' as blob); select changes()")" \
	    1 "rows set to an exact 0"
	assert_exit 0 run a4 plan a4
	grep -q 'empty.txt' "$LAST_OUT" && fail "plan names empty.txt: $(cat "$LAST_OUT")"
	assert_exit 0 run a4 --json sync a4
	assert_eq "$(jfield fetched)" 0 "fetched again (an exact-0 row)"
	assert_eq "$(grep -c '"GET /z/empty.txt HTTP' "$NGINX_ACCESS_LOG")" 1 \
	    "GETs of empty.txt"
	# A later listed time is a change: fetched, unconditionally.
	z_index '02-Jan-2026 00:00'
	assert_exit 0 run a4 --json sync a4
	assert_eq "$(jfield fetched)" 1 "fetched after a later listed time"
	assert_eq "$(nginx_gets | grep -c '^/z/empty.txt$')" 2 "GETs (200) of empty.txt"
}
( case_a4 ) || failed="$failed a4"

case_b() {
	echo "# (b) LIST: a file listed 0"
	MODEEFAULT_STATS=$LIST_STATS
	conf b "${LIST_URL}b/"
	assert_exit 0 run b --json sync b
	assert_eq "$(jfield fetched)" 1 "fetched"
	cmp "$T/ftp/b/grow.log" "$T/m_b/grow.log" || fail "grow.log differs"
	assert_eq "$(retrs b/grow.log)" 1 "RETRs of grow.log"
}
( case_b ) || failed="$failed b"

case_d() {
	local f
	echo "# (d) LIST: Feb 30, OS/2, month names; -v names skipped lines"
	MODEEFAULT_STATS=$LIST_STATS
	conf d "${LIST_URL}d/"
	assert_exit 0 run d -v --json sync d
	assert_eq "$(jfield fetched)" 6 "fetched"
	for f in feb30.txt feb31.txt os2.bin maerz.txt janv.txt prec.txt; do
		cmp "$T/ftp/d/$f" "$T/m_d/$f" || fail "$f differs"
	done
	grep -qF "${LIST_URL}d/: list: line 6 skipped: not a listing line (no Unix mode, no DOS date): garbage, no listing line" \
	    "$LAST_ERR" || fail "-v does not name the skipped line and why"
	grep -qF "${LIST_URL}d/: list: line 1 kept with an unknown time: no such date: -rw-r--r--   1 ftp ftp        6 Feb 30 10:00 feb30.txt" \
	    "$LAST_ERR" || fail "-v does not name the line without a date"
	grep -qF "d: list: 1 listing line not understood, skipped (-v names each)" \
	    "$LAST_ERR" || fail "no count of the lines not understood"
	# A same-size rewrite of the Feb 30 file: MDTM is newer.
	printf 'HELLO\n' > "$T/ftp/d/feb30.txt"
	touch -d '2026-02-01 00:00:00 UTC' "$T/ftp/d/feb30.txt"
	assert_exit 0 run d --json sync d
	assert_eq "$(jfield fetched)" 1 "fetched after the rewrite"
	cmp "$T/ftp/d/feb30.txt" "$T/m_d/feb30.txt" || fail "rewrite not fetched"
	assert_eq "$(retrs d/feb30.txt)" 2 "RETRs of feb30.txt"
	assert_eq "$(retrs d/feb31.txt)" 1 "RETRs of the unchanged feb31.txt"
}
( case_d ) || failed="$failed d"

case_e() {
	echo "# (e) LIST: minute, then day precision of the same day"
	MODEEFAULT_STATS=$LIST_STATS
	[ -d "$T/m_d" ] || fail "(d) left no mirror"
	d_list "$DAY30"
	assert_exit 0 run d --json sync d
	assert_eq "$(jfield fetched)" 0 "fetched"
	assert_eq "$(retrs d/prec.txt)" 1 "RETRs of prec.txt"
	# Another day is a change.
	d_list "$(date -u -d "@$(( D30 - 86400 ))" '+%b %e  %Y')"
	assert_exit 0 run d --json sync d
	assert_eq "$(jfield fetched)" 1 "fetched: another day"
	assert_eq "$(retrs d/prec.txt)" 2 "RETRs of prec.txt, another day"
}
( case_e ) || failed="$failed e"

stop_servers
start_modeefault "$T/ftp" --listing "c=$T/c.mlsd" --listing "f=$T/f.mlsd"

case_c() {
	echo "# (c) MLSD: exact sizes, no Modify"
	conf c "${MODEEFAULT_URL}c/"
	assert_exit 0 run c --json sync c
	assert_eq "$(jfield fetched)" 2 "fetched"
	printf 'HELLO\n' > "$T/ftp/c/rewrite.txt"
	touch -d '2026-02-01 00:00:00 UTC' "$T/ftp/c/rewrite.txt"
	assert_exit 0 run c --json sync c
	assert_eq "$(jfield fetched)" 1 "fetched after the rewrite"
	cmp "$T/ftp/c/rewrite.txt" "$T/m_c/rewrite.txt" || fail "rewrite not fetched"
	assert_eq "$(retrs c/rewrite.txt)" 2 "RETRs of rewrite.txt"
	assert_eq "$(retrs c/same.txt)" 1 "RETRs of the unchanged same.txt"
}
( case_c ) || failed="$failed c"

case_f() {
	local f
	echo "# (f) MLSD: modify= past what int64 ns holds"
	conf f "${MODEEFAULT_URL}f/"
	assert_exit 0 run f --json sync f
	assert_eq "$(jfield fetched)" 2 "fetched"
	for f in y2263 y9999; do
		assert_eq "$(stat -c %Y "$T/m_f/$f")" \
		    "$(stat -c %Y "$T/ftp/f/$f")" "local mtime of $f (MDTM)"
	done
	assert_eq "$(manifest_sql "$T/st_f" f "select count(*) from files where list_prec = 0")" \
	    2 "listed times recorded unknown"
	assert_exit 0 run f --json sync f
	assert_eq "$(jfield fetched)" 0 "fetched again"
	assert_eq "$(retrs f/y2263)" 1 "RETRs of y2263"
}
( case_f ) || failed="$failed f"

stop_servers
[ -z "$failed" ] || fail "cases failed:$failed"
echo PASS
