#!/bin/bash
# GridFTP MODE E sessions pipeline (issue 20): against our own server
# (tests/tools/modeefaultserver.py --await-pipeline 2: before each 226 of
# a MODE E RETR it waits up to 2 s for the client's next command and
# counts a RETR that comes, sent before the reply), 16 files (8 below 1
# MiB, 8 of 1.5 MiB: resumable), 2 sessions, concurrency 8:
#  1. the next file's RETR goes before the 226 of the one in hand: most
#     RETRs pipelined; the set-up after PASS goes at once (TYPE, MODE,
#     DCAU, OPTS, PORT arrive before TYPE's reply); no MDTM and no SIZE
#     (MLSD gave exact sizes and times to the second, the resumable files'
#     validator too); one data connection per session for all its files;
#     identical tree, upstream mtimes; a second run fetches nothing;
#  2. a cut (data connection closed mid-file, 426) on a file with another
#     pipelined behind it: that session ends, the job behind it goes to a
#     session again (no failure counted), the cut file is retried: exit 0,
#     identical;
#  3. every 1.5 MiB file ends with EOF|EOD|CLOSE and its data connection:
#     the connection the server opens for the RETR pipelined behind is
#     that file's, not the one in hand's (the session then pipelines no
#     more): exit 0, identical (no bytes of one file in another);
#     no file retried: 16 RETRs (one run in four stalled here and
#     retried a file while a pipelined job that began with its bytes
#     already read waited for the next poll event);
#  4. max_connections 8 = concurrency 8: no RETR pipelined (a session of
#     its own is sooner), more than 2 sessions.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup
mkdir -p "$T/up/d"
for i in 1 2 3 4 5 6 7 8; do
	head -c $((i * 50000)) /dev/urandom > "$T/up/d/s$i.dat"
	head -c $((1536 * 1024 + i)) /dev/urandom > "$T/up/b$i.bin"
done
find "$T/up" -type f -exec touch -d '2022-03-04 05:06:07 UTC' {} +
nfiles=16

# run_case WANT_RC [SERVER OPTION...]: a cold sync in MODE E against a new
# server with OPTIONs.
run_case() {
	local want=$1
	shift
	stop_servers
	rm -rf "$T/mirror" "$T/state"
	start_modeefault "$T/up" --await-pipeline 2 "$@"
	write_conf "$MODEEFAULT_URL"
	printf 'ftp_mode = extended\nstreams = 1\nretries = 2\nmax_connections = %s\n' \
	    "${CASE_SESS:-2}" >> "$T/bm.conf"
	assert_exit "$want" bm --json sync --stall-timeout 5 up
	no_temps "$T/mirror"
}

echo "# 1. pipelined RETRs, the set-up at once, no MDTM or SIZE"
run_case 0
expect_counts "$nfiles" 0 0 0
assert_trees_equal "$T/up" "$T/mirror"
piped=$(modeefault_stat 's["pipelined_retrs"]')
echo "# $piped of $nfiles RETRs pipelined"
# Each session's first RETR has nothing before it; the queue drains at
# the end: at least half of the others.
[ "$piped" -ge 7 ] || fail "$piped RETRs sent before the previous 226, want >= 7"
nsess=$(modeefault_stat 's["mode_e"]')
for c in MODE DCAU OPTS PORT; do
	assert_eq "$(modeefault_stat "s[\"early\"].get(\"$c\", 0)")" "$nsess" \
	    "$c commands come with TYPE I (the set-up after PASS in one write)"
done
assert_eq "$(grep -c '> MDTM ' "$MODEEFAULT_LOG")" 0 "MDTM commands"
assert_eq "$(grep -c '> SIZE ' "$MODEEFAULT_LOG")" 0 "SIZE commands"
# One data connection per MODE E session, kept for all its files.
assert_eq "$(modeefault_stat 's["data_conns"]')" "$nsess" "data connections (one per session)"
assert_eq "$(modeefault_stat 'sum(s["retrs"].values())')" "$nfiles" "RETRs"
echo "# second run: nothing to fetch"
assert_exit 0 bm --json sync up
expect_counts 0 0 0 0

echo "# 2. a cut with a RETR pipelined behind it"
run_case 0 --fault b3.bin=cut
assert_trees_equal "$T/up" "$T/mirror"
assert_eq "$(modeefault_stat 's["faults"]["b3.bin cut"]')" 1 "cut fired"
assert_eq "$(modeefault_stat 's["retrs"]["b3.bin"]')" 2 "RETRs of b3.bin"
expect_counts "$nfiles" 0 0 0

echo "# 3. a new data connection per file (CLOSE) behind a pipelined RETR"
run_case 0 $(for i in 1 2 3 4 5 6 7 8; do printf -- '--fault b%d.bin=close ' "$i"; done)
assert_trees_equal "$T/up" "$T/mirror"
expect_counts "$nfiles" 0 0 0
assert_eq "$(modeefault_stat 'sum(s["retrs"].values())')" "$nfiles" "RETRs (none retried)"
assert_eq "$(modeefault_stat 'sum(v for k, v in s["faults"].items() if k.endswith(" close"))')" 8 "closes fired"

echo "# 4. as many sessions allowed as files in flight: none pipelined"
CASE_SESS=8 run_case 0
assert_trees_equal "$T/up" "$T/mirror"
assert_eq "$(modeefault_stat 's["pipelined_retrs"]')" 0 "RETRs pipelined"
[ "$(modeefault_stat 's["mode_e"]')" -gt 2 ] || fail "at most 2 MODE E sessions"
echo PASS
