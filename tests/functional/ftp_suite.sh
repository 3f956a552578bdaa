# The FTP sync scenario against one real server (sourced by t_25 and t_26
# with SERVER=vsftpd, which has no MLSD and so is listed with LIST, or
# SERVER=gridftp, which offers MLSD): a cold mirror of a generated tree
# (nested directories, spaces, '%', '#', '+', UTF-8 names, zero-byte
# files, a 100 MB file) is byte-identical with upstream mtimes to the
# second; the 100 MB file came in 4 ranged streams (4 RETRs, 3 of them
# after REST at the range offsets), the others without a SIZE round trip
# (the listing gave their exact size; a LIST size of 0 is a hint, so the
# zero-byte files from vsftpd take one each) and, from an MLSD listing, without
# MDTM (it gave their time to the second); a second run fetches nothing; changes
# upstream (2 modified, 1 added, 2 removed) are exactly what is fetched and
# deleted.

make_tree "$T/up"
make_big_file "$T/up/big/big.bin" 100
nfiles=$(find "$T/up" -type f | wc -l)

if [ "$SERVER" = vsftpd ]; then
	start_vsftpd "$T/up"
	URL=$VSFTPD_URL
	LOG=$VSFTPD_LOG
	# 'FTP command: Client "127.0.0.1", "RETR big.bin"'; vsftpd logs
	# each byte outside printable ASCII as '?'.
	cmds_since() {
		tail -n +"$(($1 + 1))" "$LOG" |
		    sed -n 's/.*FTP command: Client "[^"]*", "\(.*\)"$/\1/p'
	}
else
	# globus-gridftp-server 13 drops the bytes of non-ASCII names from
	# command arguments ("CWD 日本語" arrives as "CWD ") while MLSD lists
	# them right: such names cannot be fetched from it at all (t_26 checks
	# what biomirror makes of that); vsftpd covers UTF-8 names.
	find "$T/up" -name '*[! -~]*' -prune -exec rm -rf {} +
	nfiles=$(find "$T/up" -type f | wc -l)
	start_gridftp "$T/up"
	URL=$GRIDFTP_URL
	LOG=$GRIDFTP_LOG
	# '[CLIENT]: RETR /tmp/bmtest.x/up/big/big.bin'
	cmds_since() {
		tail -n +"$(($1 + 1))" "$LOG" |
		    sed -n 's/.*\[CLIENT\]: \(.*[^\r]\)\r\{0,1\}$/\1/p' |
		    sed "s#^\([A-Z]*\) $T/up/#\1 #"
	}
fi
# count_cmds MARK RE WANT: the number of commands after line MARK that
# match RE, once it reaches WANT or after ~5 s (gridftp writes its log
# in the background, a little after the reply).
count_cmds() {
	local n
	for _ in $(seq 1 50); do
		n=$(cmds_since "$1" | grep -c -- "$2")
		[ "$n" -ge "$3" ] && break
		sleep 0.1
	done
	echo "$n"
}
write_conf "$URL"
printf 'streams = 4\nmin_split = 16M\n' >> "$T/bm.conf"

echo "# cold sync of $nfiles files from $SERVER"
mark=$(wc -l < "$LOG")
assert_exit 0 bm --json sync up
expect_counts "$nfiles" 0 0 0
assert_trees_equal "$T/up" "$T/mirror"
no_temps "$T/mirror"
n=$(manifest_sql "$T/state" up "select count(*) from files where type = 102")
assert_eq "$n" "$nfiles" "files in the manifest"

echo "# the 100 MB file came in 4 ranged streams (REST + RETR), then its"
echo "# end check: MDTM + SIZE + REST 0 without RETR (libcurl's body-less FTP)"
retrs=$(count_cmds "$mark" '^RETR \(big/\)\{0,1\}big.bin$' 4)
count_cmds "$mark" '^REST ' 4 > /dev/null
assert_eq "$retrs" 4 "RETRs of big.bin"
rests=$(cmds_since "$mark" | sed -n 's/^REST \([0-9]*\)$/\1/p' | LC_ALL=C sort -n | tr '\n' ' ')
assert_eq "$rests" "0 26214400 52428800 78643200 " "REST offsets"
assert_eq "$(count_cmds "$mark" '^MDTM \(big/\)\{0,1\}big.bin$' 5)" 5 \
    "MDTMs of big.bin (4 ranges, 1 end check)"

echo "# whole files of an exact listed size: RETR without SIZE"
# (the ranges of big.bin still ask SIZE: the log shows them)
[ "$(cmds_since "$mark" | grep -c '^SIZE .*big.bin$')" -ge 1 ] ||
    fail "no SIZE logged for the ranges of big.bin"
# A LIST size of 0 is a hint (issue 22): the zero-byte files listed by
# vsftpd are asked for their SIZE, one each; MLSD's size=0 is exact.
nzero=0
[ "$SERVER" = vsftpd ] && nzero=$(find "$T/up" -type f -size 0 | wc -l)
assert_eq "$(cmds_since "$mark" | grep '^SIZE ' | grep -vc 'big.bin$')" \
    "$nzero" "SIZE commands for whole files (one per file LIST gave as 0)"

echo "# MDTM of the small files: none where MLSD gave the time to the second"
echo "# (gridftp), one per file where LIST gave minutes (vsftpd)"
nsmall=$(cmds_since "$mark" | grep '^RETR ' | grep -vc 'big.bin$')
nmdtm=$(cmds_since "$mark" | grep '^MDTM ' | grep -vc 'big.bin$')
echo "# $nsmall RETRs of small files, $nmdtm MDTM"
[ "$nsmall" -ge 10 ] || fail "only $nsmall small files fetched"
if [ "$SERVER" = gridftp ]; then
	assert_eq "$nmdtm" 0 "gridftp: MDTM of small files (MLSD modify=)"
else
	assert_eq "$nmdtm" "$nsmall" "vsftpd: one MDTM per small file (LIST)"
fi

echo "# TYPE I: before every RETR on GridFTP (FEAT lists DCAU), once per"
echo "# control connection elsewhere (libcurl's own)"
nretr=$(cmds_since "$mark" | grep -c '^RETR ')
ntype=$(cmds_since "$mark" | grep -c '^TYPE I$')
echo "# $nretr RETRs, $ntype TYPE I"
if [ "$SERVER" = gridftp ]; then
	[ "$ntype" -ge "$nretr" ] || fail "gridftp: $ntype TYPE I for $nretr RETRs"
else
	[ "$((ntype * 2))" -lt "$nretr" ] ||
	    fail "vsftpd: $ntype TYPE I for $nretr RETRs (one per file?)"
fi

echo "# second run: nothing changed upstream"
mark=$(wc -l < "$LOG")
assert_exit 0 bm --json sync up
expect_counts 0 0 0 0
assert_eq "$(cmds_since "$mark" | grep -c '^RETR ')" 0 "RETRs of the second run"

echo "# upstream changes: 2 modified, 1 added, 2 removed"
printf 'new readme\n' > "$T/up/README.txt"
touch -d '2022-03-04 05:06:07 UTC' "$T/up/README.txt"
printf 'appended' >> "$T/up/data/file03.bin"
touch -d '2022-03-05 01:02:03 UTC' "$T/up/data/file03.bin"
# A new name: UTF-8 where the server takes it (vsftpd), ASCII for gridftp.
new="n$(printf '\xc3\xa9')w file.txt"
logged=$new
[ "$SERVER" = vsftpd ] && logged="n??w file.txt"
[ "$SERVER" = gridftp ] && new="new file.txt" logged="new file.txt"
mkdir -p "$T/up/new dir"
printf 'brand new\n' > "$T/up/new dir/$new"
touch -d '2022-03-06 11:12:13 UTC' "$T/up/new dir/$new"
rm "$T/up/zero.dat" "$T/up/a/b/seq00.fa"
mark=$(wc -l < "$LOG")
assert_exit 0 bm --json sync up
expect_counts 3 0 2 0
assert_trees_equal "$T/up" "$T/mirror"
got=$(cmds_since "$mark" | sed -n 's/^RETR //p' | sed 's#.*/##' | LC_ALL=C sort | tr '\n' '|')
assert_eq "$got" "README.txt|file03.bin|$logged|" "files fetched"
no_temps "$T/mirror"

echo "# resume across runs: a run killed (SIGKILL) in the middle of big.bin"
echo "# recorded its finished ranges (the MDTM time is their validator), and"
echo "# the next run asks only for what is missing (no REST 0)"
make_big_file "$T/up/big/big.bin" 100 resumed
touch -d '2022-04-05 06:07:08 UTC' "$T/up/big/big.bin"
cp "$T/bm.conf" "$T/bm.conf.fast"
printf 'bwlimit = 20M\n' >> "$T/bm.conf"
# "$BM" itself in the background (not the bm function: $! would be a
# subshell's, and the kill would miss biomirror).
"$BM" -c "$T/bm.conf" --state-dir "$T/state" sync up > "$T/killed.out" 2>&1 &
pid=$!
ranges=""
for _ in $(seq 1 100); do
	sleep 0.1
	ranges=$(manifest_sql "$T/state" up \
	    "select ranges from partials where cast(path as text) = 'big/big.bin'" 2>/dev/null)
	[ -n "$ranges" ] && break
done
kill -9 "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
[ -n "$ranges" ] || fail "no finished ranges of big.bin recorded in 10 s"
echo "# recorded before the kill: $ranges"
mv "$T/bm.conf.fast" "$T/bm.conf"
mark=$(wc -l < "$LOG")
assert_exit 0 bm --json sync up
grep -q 'big/big.bin: continuing with [1-9][0-9]* of 104857600 bytes held' \
    "$T/last.err" || fail "the rerun did not continue big.bin: $(cat "$T/last.err")"
count_cmds "$mark" '^RETR \(big/\)\{0,1\}big.bin$' 1 > /dev/null
count_cmds "$mark" '^REST 0$' 1 > /dev/null
rests=$(cmds_since "$mark" | sed -n 's/^REST \([0-9]*\)$/\1/p' | tr '\n' ' ')
echo "# REST offsets of the rerun: $rests"
# REST 0 once: the end check (MDTM + SIZE + REST 0, no RETR), not a range.
assert_eq "$(cmds_since "$mark" | grep -c '^REST 0$')" 1 \
    "REST 0 in the rerun (the end check only)"
[ "$(cmds_since "$mark" | grep -c '^REST [1-9]')" -ge 1 ] ||
    fail "the rerun continued no range of big.bin"
assert_trees_equal "$T/up" "$T/mirror"
no_temps "$T/mirror"
assert_eq "$(manifest_sql "$T/state" up "select count(*) from partials")" 0 \
    "partial rows after the rerun"
