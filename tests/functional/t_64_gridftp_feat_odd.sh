#!/bin/bash
# ftp_mode = extended against servers that answer the first session's FEAT
# oddly (tests/tools/modeefaultserver.py --feat KIND), a cold sync each:
#   split     the usual reply, 7 bytes a packet
#       -> read whole: MODE E from the first session, no retry, exit 0
#   r4xx      "451 FEAT: local error." to the first FEAT
#       -> transient (RFC 959 4.2): the listing retried once, then MODE
#          E, exit 0
#   midclose  two lines of the reply, then the control connection closed
#       -> the listing retried once, then MODE E, exit 0
#   long      a 211 reply of about 8 KiB (more than the MODE E engine
#             holds at once, less than libcurl's 64 KiB)
#       -> the FEAT retried once in stream mode, which carries the run
#          (MLSD, RETR), exit 0 (it failed every try before: exit 3)
#   huge      a 211 reply of about 1 MiB
#       -> refused in both modes: the listing fails, exit 3, nothing
#          fetched
# The tree is identical after each run that succeeds; no temp files.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup
mkdir -p "$T/up/sub"
make_big_file "$T/up/big.bin" 1 big
printf 'hello\n' > "$T/up/sub/small.txt"

# run_case WANT_RC KIND: a cold sync in MODE E against a new server whose
# FEAT replies are of KIND.
run_case() {
	echo "# FEAT $2"
	stop_servers
	rm -rf "$T/mirror" "$T/state"
	start_modeefault "$T/up" --feat "$2"
	write_conf "$MODEEFAULT_URL"
	printf 'ftp_mode = extended\nstreams = 1\nretries = 2\nmax_connections = 1\n' >> "$T/bm.conf"
	assert_exit "$1" bm --json sync --stall-timeout 5 up
	no_temps "$T/mirror"
	[ "$1" != 0 ] || { expect_counts 2 0 0 0; assert_trees_equal "$T/up" "$T/mirror"; }
}

# stats WANT: FEAT commands, MODE E commands, MLSDs in MODE E, LISTs and
# the stream mode RETRs (path: REST offsets) the server saw.
stats() {
	assert_eq "$(modeefault_stat 's["feat"], s["mode_e"], s["mlsd_e"], s["lists"], sorted(s["stream_retrs"].items())')" \
	    "$1" "FEAT $KIND: server stats"
}

KIND=split
run_case 0 split
[ -s "$T/last.err" ] && fail "split: messages: $(cat "$T/last.err")"
stats "(1, 1, 2, 0, [])"

KIND=r4xx
run_case 0 r4xx
assert_eq "$(grep -c 'retry' "$T/last.err")" 1 "r4xx: retries"
grep -q ': list: 451 FEAT: local error\. (retry 1 of 2)$' "$T/last.err" ||
    fail "r4xx: message: $(cat "$T/last.err")"
grep -q 'does not speak GridFTP' "$T/last.err" && fail "r4xx: taken for no GridFTP"
stats "(2, 1, 2, 0, [])"

KIND=midclose
run_case 0 midclose
assert_eq "$(grep -c 'retry' "$T/last.err")" 1 "midclose: retries"
grep -q ': list: control connection closed by the server (retry 1 of 2)$' "$T/last.err" ||
    fail "midclose: message: $(cat "$T/last.err")"
stats "(2, 1, 2, 0, [])"

KIND=long
run_case 0 long
assert_eq "$(grep -c 'retry' "$T/last.err")" 1 "long: retries"
grep -q ': list: FEAT reply longer than 4096 bytes: stream mode from now on (retry 1 of 2)$' \
    "$T/last.err" || fail "long: message: $(cat "$T/last.err")"
stats "(2, 0, 0, 0, [('big.bin', [0]), ('sub/small.txt', [0])])"

KIND=huge
run_case 3 huge
expect_counts 0 0 0 0
assert_eq "$(jerrors | tr '\n' ,)" " list," "huge: errors"
[ -z "$(ls -A "$T/mirror" 2>/dev/null)" ] || fail "huge: files in the mirror"
assert_eq "$(modeefault_stat 's["retrs"]')" "{}" "huge: RETRs"

stop_servers
[ -z "$(bm_leftovers)" ] || fail "processes left: $(bm_leftovers)"
echo "PASS"
