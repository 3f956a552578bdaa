#!/bin/bash
# FTP listings that are not what they seem; each is an incomplete listing
# (exit 3) and deletes nothing, even with --delete --max-delete 100%:
#  (a) a reply cut in the middle of its last line (no CRLF), then 226
#      (our MODE E fault server's --listing, MLSD, in stream mode and in
#      extended mode; LIST the same) -> "stops in the middle of a line";
#      before, the piece of a name was taken as an entry and the real
#      file deleted;
#  (b) real globus-gridftp-server in extended mode, the source directory
#      replaced upstream by a file: its MLSD lists that file alone, under
#      its own name, with no cdir line -> "not a directory"; before, the
#      mirror's files were deleted and "rootx/rootx" fetched.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup

mkdir -p "$T/up"
for i in 1 2 3 4; do printf 'file %s\n' "$i" > "$T/up/file$i.txt"; done
touch -d '2022-03-04 05:06:07 UTC' "$T/up"/file*.txt
chmod -R a+rX "$T/up"

# files_left: the mirrored file names, one line.
files_left() {
	(cd "$T/mirror" && ls | tr '\n' ' ')
}

for mode in stream extended; do
	echo "# (a) a cut MLSD reply, ftp_mode = $mode"
	rm -rf "$T/mirror" "$T/state"
	stop_servers
	start_modeefault "$T/up"
	write_conf "$MODEEFAULT_URL"
	printf 'ftp_mode = %s\nmax_delete = 100%%\nretries = 1\n' "$mode" >> "$T/bm.conf"
	assert_exit 0 bm --json sync up
	expect_counts 4 0 0 0
	# The same listing, cut 6 bytes before its end.
	(cd "$T/up" && for f in file*.txt; do
		printf 'Type=file;Size=%s;Modify=20220304050607;Perm=r; %s\r\n' \
		    "$(stat -c %s "$f")" "$f"
	done) | head -c -6 > "$T/cut.mlsd"
	stop_servers
	start_modeefault "$T/up" --listing "=$T/cut.mlsd"
	write_conf "$MODEEFAULT_URL"
	printf 'ftp_mode = %s\nmax_delete = 100%%\nretries = 1\n' "$mode" >> "$T/bm.conf"
	assert_exit 3 bm --json sync up
	assert_eq "$(jfield deleted)" 0 "deleted"
	grep -q 'the listing stops in the middle of a line (no CRLF after its last line): cut short' \
	    "$LAST_ERR" || fail "no reason for the cut listing"
	assert_eq "$(files_left)" "file1.txt file2.txt file3.txt file4.txt " "files kept"
done

echo "# (b) real gridftp, extended mode: the source directory became a file"
rm -rf "$T/mirror" "$T/state"
stop_servers
mkdir -p "$T/srv/rootx"
cp -p "$T/up"/file*.txt "$T/srv/rootx/"
chmod -R a+rX "$T/srv"
start_gridftp "$T/srv"
write_conf "${GRIDFTP_URL}rootx/"
printf 'ftp_mode = extended\nmax_delete = 100%%\nretries = 1\n' >> "$T/bm.conf"
assert_exit 0 bm --json sync up
expect_counts 4 0 0 0
rm -r "$T/srv/rootx"
printf 'now a file\n' > "$T/srv/rootx"
chmod a+r "$T/srv/rootx"
assert_exit 3 bm --json sync up
assert_eq "$(jfield deleted)" 0 "deleted"
grep -q 'not a directory: MLSD listed the path itself (one file of the same name, no cdir line)' \
    "$LAST_ERR" || fail "no reason for the source that became a file"
assert_eq "$(files_left)" "file1.txt file2.txt file3.txt file4.txt " "files kept"
[ -e "$T/mirror/rootx" ] && fail "rootx/rootx was fetched"
stop_servers
echo PASS
