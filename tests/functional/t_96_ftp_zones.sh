#!/bin/bash
# FTP servers that list local time (issue 22 items 7 and 8):
# - L: real vsftpd with use_localtime=YES in TZ=XYZ-3 (UTC+3): LIST and
#   MDTM both in local time; with ftp_timezone = +0300 the MDTM is seen to
#   agree with LIST and read in that zone too: local mtimes are the true
#   upstream mtimes; status shows the zone; restarted in UTC+4, LIST and
#   MDTM both move by an hour: a zone shift, nothing fetched;
# - H: Apache's index in local time (UTC+3), listing_timezone = auto:
#   learnt from Last-Modified, listed times read in UTC+3;
# - A: our own server listing local time (LIST in UTC+3, MDTM in UTC):
#   ftp_timezone = auto learns +03:00 from MDTM, recorded, shown by
#   status; restarted in UTC+4 (a daylight-saving change), the next run
#   learns +04:00 again and fetches nothing;
# - D: the same server with a fixed ftp_timezone = +0300, restarted in
#   UTC+4: every file of the directory moved by one hour with its size:
#   one MDTM says unchanged, the shift is recorded, nothing is fetched;
#   a file then rewritten (same size) upstream is fetched;
# - Y: ftp_timezone = auto, files older than six months (LIST shows
#   "Mon DD  YYYY", a date only): the server moves from UTC+1 to UTC+2,
#   the LIST lines are byte-identical and nothing is fetched (item 1 of
#   the break-it pass: the day's resolved start moved an hour).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup

U=$T/up
mkdir -p "$U/d"
now=$(date +%s)
# Recent (LIST shows HH:MM), odd seconds: only MDTM has them.
i=0
for f in a.txt b.txt d/c.txt; do
	printf '%s body\n' "$f" > "$U/$f"
	touch -d "@$((now - 86400 * 3 - 3600 * i - 37))" "$U/$f"
	i=$((i + 1))
done
touch -d "@$((now - 86400 * 10))" "$U/d"

# mtimes_equal: every file of the mirror has its upstream file's mtime.
mtimes_equal() {
	local f up loc
	for f in a.txt b.txt d/c.txt; do
		up=$(stat -c %Y "$U/$f")
		loc=$(stat -c %Y "$T/mirror/$f")
		[ "$up" = "$loc" ] || fail "$1: $f: local mtime $loc, upstream $up ($(( (loc - up) / 60 )) min off)"
	done
}

echo "# L: vsftpd use_localtime=YES in UTC+3, ftp_timezone = +0300"
BM_VSFTPD_TZ=XYZ-3 BM_VSFTPD_EXTRA=use_localtime=YES start_vsftpd "$U"
write_conf "$VSFTPD_URL"
printf 'ftp_timezone = +0300\n' >> "$T/bm.conf"
assert_exit 0 bm --json sync up
expect_counts 3 0 0 0
assert_trees_equal "$U" "$T/mirror"
mtimes_equal "L"
grep -q 'answers MDTM in local time (UTC+03:00' "$T/last.err" ||
    fail "L: no use_localtime note: $(cat "$T/last.err")"
assert_exit 0 bm status up
grep -q "zone: ftp://127.0.0.1:$VSFTPD_PORT UTC+03:00, MDTM in local time" "$T/last.out" ||
    fail "L: status shows no zone"
echo "# L: no change: nothing fetched, mtimes kept"
assert_exit 0 bm --json sync up
expect_counts 0 0 0 0
mtimes_equal "L again"
echo "# L: vsftpd restarted in UTC+4: LIST and MDTM both an hour later"
stop_servers
BM_VSFTPD_PORT=$VSFTPD_PORT BM_VSFTPD_TZ=XYZ-4 BM_VSFTPD_EXTRA=use_localtime=YES \
    start_vsftpd "$U"
assert_exit 0 bm --json sync up
expect_counts 0 0 0 0
grep -q 'listed +1 h off with the same sizes, unchanged upstream' "$T/last.err" ||
    fail "L: no shift note: $(cat "$T/last.err")"
grep -q "MDTM (local time) moved with its listing" "$T/last.err" ||
    fail "L: no zone warning: $(cat "$T/last.err")"
grep -q '"RETR ' "$VSFTPD_LOG" && fail "L: RETRs after the shift: $(grep '"RETR ' "$VSFTPD_LOG")"
grep -q '"MDTM ' "$VSFTPD_LOG" || fail "L: no MDTM asked after the shift"
mtimes_equal "L after the shift"
stop_servers

echo "# H: Apache's index in UTC+3 (Last-Modified in GMT); listing_timezone = auto"
rm -rf "$T/mirror" "$T/state"
BM_APACHE_TZ=XYZ-3 start_apache "$U"
write_conf "$APACHE_URL"
printf 'listing_timezone = auto\n' >> "$T/bm.conf"
assert_exit 0 bm --json sync up
expect_counts 3 0 0 0
mtimes_equal "H"
grep -q 'lists times in UTC+03:00 (learnt from' "$T/last.err" ||
    fail "H: not learnt: $(cat "$T/last.err")"
want=$(( $(stat -c %Y "$U/a.txt") / 60 * 60 ))
assert_eq "$(manifest_sql "$T/state" up "select list_mtime / 1000000000 from files where cast(path as text) = 'a.txt'")" \
    "$want" "H: listed time of a.txt read in UTC+3"
assert_exit 0 bm --json sync up
expect_counts 0 0 0 0
stop_servers

echo "# A: LIST in UTC+3, MDTM in UTC; ftp_timezone = auto"
rm -rf "$T/mirror" "$T/state"
start_ftpfault "$U" normal --list-tz XYZ-3
write_conf "$FTPFAULT_URL"
printf 'ftp_timezone = auto\n' >> "$T/bm.conf"
assert_exit 0 bm --json sync up
expect_counts 3 0 0 0
mtimes_equal "A"
grep -q 'lists times in UTC+03:00 (learnt from' "$T/last.err" ||
    fail "A: not learnt: $(cat "$T/last.err")"
want=$(( $(stat -c %Y "$U/a.txt") / 60 * 60 ))
assert_eq "$(manifest_sql "$T/state" up "select list_mtime / 1000000000 from files where cast(path as text) = 'a.txt'")" \
    "$want" "A: listed time of a.txt read in UTC+3"
assert_exit 0 bm status up
grep -q "zone: ${FTPFAULT_URL%/} UTC+03:00 (learnt" "$T/last.out" ||
    fail "A: status shows no zone"
echo "# A: the server moves to UTC+4: learnt again, nothing fetched"
stop_servers
BM_FTPFAULT_PORT=$FTPFAULT_PORT start_ftpfault "$U" normal --list-tz XYZ-4
assert_exit 0 bm --json sync up
expect_counts 0 0 0 0
grep -q 'now lists times in UTC+04:00, was UTC+03:00' "$T/last.err" ||
    fail "A: change not seen: $(cat "$T/last.err")"
assert_eq "$(ftpfault_stat 'sum(s["retrs"].values())')" 0 "A: RETRs after the change"
stop_servers

echo "# D: LIST in UTC+3, MDTM in UTC; ftp_timezone = +0300 (fixed)"
rm -rf "$T/mirror" "$T/state"
start_ftpfault "$U" normal --list-tz XYZ-3
write_conf "$FTPFAULT_URL"
printf 'ftp_timezone = +0300\n' >> "$T/bm.conf"
assert_exit 0 bm --json sync up
expect_counts 3 0 0 0
mtimes_equal "D"
echo "# D: the server moves to UTC+4: every file listed an hour later"
stop_servers
BM_FTPFAULT_PORT=$FTPFAULT_PORT start_ftpfault "$U" normal --list-tz XYZ-4
assert_exit 0 bm --json sync up
expect_counts 0 0 0 0
assert_eq "$(ftpfault_stat 'sum(s["retrs"].values())')" 0 "D: RETRs after the shift"
grep -q 'of its directory listed +1 h off with the same sizes, unchanged upstream' "$T/last.err" ||
    fail "D: no shift note: $(cat "$T/last.err")"
mtimes_equal "D after the shift"
echo "# D: the shift is recorded: the next run has nothing to ask"
assert_exit 0 bm --json sync up
expect_counts 0 0 0 0
grep -q 'listed +1 h off' "$T/last.err" && fail "D: shift seen again: $(cat "$T/last.err")"
echo "# D: a.txt rewritten upstream (same size): fetched"
printf 'a.txt BODY\n' > "$U/a.txt"
touch -d "@$((now - 600))" "$U/a.txt"
assert_exit 0 bm --json sync up
expect_counts 1 0 0 0
cmp -s "$U/a.txt" "$T/mirror/a.txt" || fail "D: a.txt not fetched"
mtimes_equal "D after the rewrite"
stop_servers

echo "# Y: dates only (old files), ftp_timezone = auto, UTC+1 then UTC+2"
Y=$T/upy
mkdir -p "$Y"
for f in r.txt o1.txt o2.txt; do printf '%s\n' "$f" > "$Y/$f"; done
touch -d "@$((now - 7200))" "$Y/r.txt"
touch -d "2025-01-01 11:00 UTC" "$Y/o1.txt"
touch -d "2025-01-01 23:30 UTC" "$Y/o2.txt"
rm -rf "$T/mirror" "$T/state"
start_ftpfault "$Y" normal --list-tz XYZ-1
write_conf "$FTPFAULT_URL"
printf 'ftp_timezone = auto\n' >> "$T/bm.conf"
curl -s "$FTPFAULT_URL" > "$T/list.1"
grep -q ' Jan 0[12]  *2025 o2.txt' "$T/list.1" || fail "Y: o2.txt not listed by date: $(cat "$T/list.1")"
assert_exit 0 bm --json sync up
expect_counts 3 0 0 0
stop_servers
BM_FTPFAULT_PORT=$FTPFAULT_PORT start_ftpfault "$Y" normal --list-tz XYZ-2
curl -s "$FTPFAULT_URL" > "$T/list.2"
assert_eq "$(grep -c '2025 o' "$T/list.2")" 2 "Y: two dated lines"
assert_eq "$(grep '2025 o' "$T/list.1")" "$(grep '2025 o' "$T/list.2")" "Y: dated LIST lines byte-identical"
assert_exit 0 bm --json sync up
grep -q 'now lists times in UTC+02:00, was UTC+01:00' "$T/last.err" ||
    fail "Y: change not seen: $(cat "$T/last.err")"
expect_counts 0 0 0 0
assert_eq "$(ftpfault_stat 'sum(s["retrs"].values())')" 0 "Y: RETRs after the change"
stop_servers

echo "PASS"
