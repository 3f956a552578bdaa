#!/bin/bash
# GridFTP extended block mode (ftp_mode = extended) against our own
# fault-injecting server (tests/tools/modeefaultserver.py: FEAT with DCAU,
# MLSD, MODE E over PORT), one fault on big.bin (1 MiB: 4 blocks of 256
# KiB) per server run, fired once unless said otherwise:
#   none, one session -> one data connection, reused (125) for each file
#          and for the listing (MLSD in MODE E)
#   close (every file ends with EOF|EOD|CLOSE and its data connection)
#       -> a new data connection per file, identical, no retry
#   cut (data connection closed mid-file; 426 late, then at once),
#   errors (a block with descriptor 0x20), gap (a block at a wrong
#   offset), eod2 (EOF announces 2 data connections), noeof (EOD and 226
#   but never EOF), stall (half the file, then silence; --stall-timeout 2)
#       -> retried once, identical, RETR count 2, the fault's message; the
#          retry goes on from the bytes held: its ERET P (partial
#          retrieve, which this server refuses) in stream mode (REST),
#          the refusal said once
#   noconnect (150, no data), backwards (an offset going back)
#       -> retried once, identical
#   gap over parallel blocks (streams 4, one job, verify = checksum):
#   the first block sent at 256 KiB (the second then overlaps it), or
#   the last one 100 bytes past the end
#       -> retried once with none of the failed try's bytes kept,
#          identical, the SHA-256 recorded that of the file
#   earlydata (the blocks before the 1xx), nocrlf (LF-only replies),
#   mline1xx (multi-line 1xx and 2xx replies)
#       -> taken as they are: identical, no retry
#   long (100 bytes past the listed size, every RETR)
#       -> the size check refuses it as changed: retried, then failed
#          "got 1048676 bytes, the listing says 1048576", exit 1, not
#          published
#   MODE E refused with 500 (every session)
#       -> the first listing retried once, then everything in stream
#          mode (libcurl), exit 0, identical
#   intruder (big.bin alone; its data connection is first made from
#   127.0.0.2 with a whole fake file, then from 127.0.0.1 with the right
#   one)
#       -> its bytes never reach the file: identical, one RETR
# and faults of the FEAT that the first session asks before its MODE E
# set-up (with no fault, that one control connection is all the run
# opens):
#   the control connection closed at the first FEAT
#       -> the listing retried once: a new session asks FEAT again and
#          carries the run in MODE E, exit 0, identical
#   FEAT refused (500: no features, so no GridFTP)
#       -> the warning, then the listing (LIST) and the files in stream
#          mode (libcurl), exit 0, identical, no MODE E
#   PASS refused (530)
#       -> the listing fails after its retries: exit 3, the server's
#          reply in the error, nothing fetched
# No temp file is ever left behind, and the server stats show each fault
# fired.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup
mkdir -p "$T/up/sub"
make_big_file "$T/up/big.bin" 1 big
printf 'hello\n' > "$T/up/sub/small.txt"
: > "$T/up/zero.dat"
touch -d '2022-03-04 05:06:07 UTC' "$T/up/sub/small.txt" "$T/up/zero.dat"
touch -d '2022-03-04 05:06:07 UTC' "$T/up/sub"

# run_case WANT_RC [SERVER OPTION...]: a cold sync in MODE E against a new
# server with OPTIONs serving CASE_ROOT (default $T/up); 2 retries at
# most, 2 s stall timeout, CASE_STREAMS streams (default 1), CASE_CONF
# lines added to the config.
# CASE_CONNS0: the server's control connections before the run.
run_case() {
	local want=$1
	shift
	stop_servers
	rm -rf "$T/mirror" "$T/state"
	start_modeefault "${CASE_ROOT:-$T/up}" "$@"
	# Control connections before the run (start_modeefault's check).
	CASE_CONNS0=$(modeefault_stat 's["total"]')
	write_conf "$MODEEFAULT_URL"
	printf 'ftp_mode = extended\nstreams = %s\nretries = 2\n%s' \
	    "${CASE_STREAMS:-1}" "${CASE_CONF:-}" >> "$T/bm.conf"
	assert_exit "$want" bm --json sync --stall-timeout 2 up
	no_temps "$T/mirror"
}

# retried KIND MESSAGE [REST]: big.bin failed once with MESSAGE, was
# retried and is identical, everything else too; the fault fired once.
# With REST: the retry went on from the bytes held, in stream mode
# (libcurl: REST, RETR), not again from byte 0 in MODE E.
retried() {
	expect_counts 3 0 0 0
	assert_trees_equal "$T/up" "$T/mirror"
	grep -qF "up: big.bin: fetch: $2 (retry 1 of 2)" "$T/last.err" ||
	    fail "$1: no retry with '$2': $(grep big.bin "$T/last.err")"
	assert_eq "$(grep -c 'big.bin: fetch: .*(retry ' "$T/last.err")" 1 \
	    "$1: retries of big.bin"
	assert_eq "$(modeefault_stat 's["retrs"]["big.bin"]')" 2 "$1: RETRs of big.bin"
	[ $# -lt 3 ] || assert_eq "$(modeefault_stat 's["stream_retrs"]')" \
	    "{'big.bin': [$3]}" "$1: stream mode RETRs (REST offsets)"
	# This server has no ERET: the retry's ERET P is refused, said once.
	[ $# -lt 3 ] || assert_eq "$(grep -c "^biomirror: 127.0.0.1:[0-9]*: ERET P refused (500 .*): kept partials continue in stream mode$" \
	    "$T/last.err")" 1 "$1: the refused ERET P said once"
	assert_eq "$(modeefault_stat 's["faults"]')" "{'big.bin $1': 1}" \
	    "$1: faults fired"
	assert_eq "$(modeefault_stat 's["retrs"]["sub/small.txt"]')" 1 \
	    "$1: RETRs of sub/small.txt"
	# Every file went in MODE E, none through libcurl's stream mode.
	[ "$(modeefault_stat 's["mode_e"]')" -ge 2 ] ||
	    fail "$1: fewer than 2 MODE E sessions"
}

echo "# no fault, one session: one data connection, reused for each file"
CASE_CONF='max_connections = 1
' run_case 0
expect_counts 3 0 0 0
assert_trees_equal "$T/up" "$T/mirror"
assert_eq "$(modeefault_stat 's["retrs"]')" \
    "{'big.bin': 1, 'sub/small.txt': 1, 'zero.dat': 1}" "RETRs"
assert_eq "$(modeefault_stat 's["mode_e"]')" 1 "MODE E sessions"
# The listing too (MLSD of the root and sub/) goes on that session: one
# data connection for 5 transfers.
assert_eq "$(modeefault_stat 's["mlsd_e"]')" 2 "MLSDs in MODE E"
assert_eq "$(modeefault_stat 's["data_conns"]')" 1 "data connections opened"
assert_eq "$(modeefault_stat 's["reused"]')" 4 "data connections reused (125)"
# FEAT too: the run's one control connection asked it, then went on in
# MODE E.
assert_eq "$(modeefault_stat 's["feat"]')" 1 "FEAT commands"
assert_eq "$(($(modeefault_stat 's["total"]') - CASE_CONNS0))" 1 "control connections"

echo "# close: every file ends with EOF|EOD|CLOSE (0x4c): a new data"
echo "# connection for each, no retry"
CASE_CONF='max_connections = 1
' run_case 0 --fault big.bin=close --fault sub/small.txt=close \
    --fault zero.dat=close
expect_counts 3 0 0 0
assert_trees_equal "$T/up" "$T/mirror"
grep -q 'retry' "$T/last.err" && fail "close: retried"
assert_eq "$(modeefault_stat 's["mode_e"]')" 1 "close: MODE E sessions"
# The two MLSDs share the first; the first file reuses it and closes it,
# and each of the other two gets a new one.
assert_eq "$(modeefault_stat 's["data_conns"]')" 3 "close: data connections opened"
assert_eq "$(modeefault_stat 's["reused"]')" 2 "close: data connections reused"

echo "# cut: the data connection closed after 300000 bytes, 426 late"
run_case 0 --fault 'big.bin=cut,at=300000,delay=10'
retried cut "data connection closed before the end of the file" 300000

echo "# cut: the same with the 426 at once (either end may be seen first)"
run_case 0 --fault 'big.bin=cut,at=300000'
expect_counts 3 0 0 0
assert_trees_equal "$T/up" "$T/mirror"
grep -qE "up: big.bin: fetch: (data connection closed before the end of the file|426 Data connection closed; transfer aborted\.) \(retry 1 of 2\)" \
    "$T/last.err" || fail "cut: no retry: $(grep big.bin "$T/last.err")"
assert_eq "$(modeefault_stat 's["retrs"]["big.bin"]')" 2 "cut: RETRs of big.bin"

echo "# errors: a block with descriptor 0x20 (suspected errors)"
run_case 0 --fault 'big.bin=errors,at=262144'
retried errors "bad MODE E block header (descriptor 0x20)" 262144

echo "# gap: the second block 4096 bytes too far"
run_case 0 --fault 'big.bin=gap,at=262144,skip=4096'
retried gap "MODE E block at offset 266240, expected 262144" 262144

# parallel KIND MESSAGE: with 4 streams in one job (verify = checksum),
# big.bin's try failed with MESSAGE and none of its bytes was kept (a
# block may have been written at a wrong offset): fetched again whole,
# identical, and the SHA-256 recorded is the file's.
parallel() {
	local want got
	expect_counts 3 0 0 0
	assert_trees_equal "$T/up" "$T/mirror"
	grep -qF "up: big.bin: fetch: $2" "$T/last.err" ||
	    fail "$1: no '$2': $(grep big.bin "$T/last.err")"
	grep -q 'big.bin.*continuing with' "$T/last.err" &&
	    fail "$1: bytes of the failed try kept: $(grep big.bin "$T/last.err")"
	want="sha256:$(sha256sum < "$T/up/big.bin" | cut -d' ' -f1)"
	got=$(python3 -c 'import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
print(c.execute("SELECT checksum FROM files WHERE path = ?",
    (b"big.bin",)).fetchone()[0])' "$T/state/manifests/up.db")
	assert_eq "$got" "$want" "$1: the SHA-256 recorded"
}

# With parallel blocks (streams 4, one job), a block at a wrong offset
# is written before the overlap it causes is seen: the try's bytes are
# dropped, not continued (they once were, and a misplaced block was
# published with exit 0 and its wrong digest recorded).
echo "# gap over parallel blocks: the first block at 256 KiB, then the second"
CASE_STREAMS=4 CASE_CONF='min_split = 1G
verify = checksum
' run_case 0 --fault 'big.bin=gap,at=0,skip=262144'
parallel gap "MODE E block at offset 262144: bytes sent twice (its offsets are not to be trusted: the bytes held are dropped)"

echo "# gap over parallel blocks: the last block 100 bytes past the end"
CASE_STREAMS=4 CASE_CONF='min_split = 1G
verify = checksum
' run_case 0 --fault 'big.bin=gap,at=1048575,skip=100'
parallel gap-end "MODE E block at offset 786532 of 262144 bytes: past the 1048576 bytes listed (upstream changed, or its offsets are wrong: the bytes held are dropped)"

echo "# eod2: EOF announces 2 data connections"
run_case 0 --fault 'big.bin=eod2,count=2'
# (every byte held: the retry asks for the last one again)
retried eod2 "MODE E: 2 data connections announced, 1 asked for" 1048575

echo "# noeof: the file ends with EOD (0x08) and 226, and no EOF ever"
run_case 0 --fault 'big.bin=noeof'
retried noeof "MODE E: end of data without EOF" 1048575

echo "# stall: half the file, then silence (--stall-timeout 2)"
run_case 0 --fault 'big.bin=stall,at=524288,for=20'
retried stall "stalled: no data for 2 s" 524288

echo "# noconnect: 150, then no data at all (--stall-timeout 2)"
run_case 0 --fault 'big.bin=noconnect,for=20'
retried noconnect "stalled: no data for 2 s"
assert_eq "$(modeefault_stat 's["stream_retrs"]')" "{}" \
    "noconnect: nothing held, the retry in MODE E again"

echo "# backwards: the second block's offset goes back to 0"
run_case 0 --fault 'big.bin=backwards'
retried backwards "MODE E block at offset 0, expected 524288" 524288

# Odd but lawful: no retry, an identical file, one RETR.
for kind in earlydata nocrlf mline1xx; do
	echo "# $kind: taken as it is"
	run_case 0 --fault "big.bin=$kind"
	expect_counts 3 0 0 0
	assert_trees_equal "$T/up" "$T/mirror"
	grep -q 'retry' "$T/last.err" && fail "$kind: retried"
	assert_eq "$(modeefault_stat 's["retrs"]["big.bin"]')" 1 "$kind: RETRs of big.bin"
	assert_eq "$(modeefault_stat 's["faults"]')" "{'big.bin $kind': 1}" \
	    "$kind: faults fired"
done

echo "# long: 100 bytes past the listed size, every time: never published"
# The transport takes the bytes (the job has no expected size); the
# scheduler's size check refuses the body as a changed file: retried,
# then failed.
run_case 1 --fault 'big.bin=long,extra=100,times=5'
expect_counts 2 0 0 1
assert_eq "$(jerrors)" "big.bin fetch" "errors"
msg="got 1048676 bytes, the listing says 1048576"
assert_eq "$(python3 -c 'import json,sys
print(json.load(open(sys.argv[1]))[0]["errors"][0]["reason"])' "$T/last.out")" \
    "$msg" "long: JSON reason"
grep -qxF "biomirror: up: big.bin: fetch: $msg" "$T/last.err" ||
    fail "long: no final message in stderr"
assert_eq "$(grep -c "big.bin: fetch: $msg (retry [12] of 2)" "$T/last.err")" 2 \
    "long: retries"
[ -e "$T/mirror/big.bin" ] && fail "long: big.bin published"
cmp -s "$T/up/sub/small.txt" "$T/mirror/sub/small.txt" || fail "long: small.txt"
[ -f "$T/mirror/zero.dat" ] || fail "long: zero.dat"
assert_eq "$(modeefault_stat 's["retrs"]["big.bin"]')" 3 "long: RETRs of big.bin"
assert_eq "$(modeefault_stat 's["faults"]')" "{'big.bin long': 3}" "long: faults fired"
assert_eq "$(manifest_sql "$T/state" up "select count(*) from files where path = 'big.bin'")" 0 \
    "long: big.bin in the manifest"

echo "# MODE E refused (500): the first listing retried once, then stream mode"
run_case 0 --refuse-mode-e
expect_counts 3 0 0 0
assert_trees_equal "$T/up" "$T/mirror"
# The root's MLSD is the first job in MODE E: its session's refusal ends
# it as a retry, which libcurl carries in stream mode, as everything after.
assert_eq "$(grep -cE ': list: MODE E (set-up: 500 MODE E not supported\.|refused by the server): stream mode from now on \(retry 1 of 2\)$' "$T/last.err")" 1 \
    "refused: one retry of the listing"
assert_eq "$(grep -c 'retry' "$T/last.err")" 1 "refused: retries in all"
assert_eq "$(modeefault_stat 'sorted(s["retrs"].items())')" \
    "[('big.bin', 1), ('sub/small.txt', 1), ('zero.dat', 1)]" "refused: one RETR each"
assert_eq "$(modeefault_stat 's["mlsd_e"]')" 0 "refused: MLSDs in MODE E"
[ "$(modeefault_stat 's["mode_e_refused"]')" -ge 1 ] || fail "refused: MODE E never asked"

echo "# intruder: a fake listing from 127.0.0.2 first, then the real one"
# (the root's MLSD is the first transfer of the first session, so the
# intruder comes while biomirror waits for the data connection; one
# session, so that big.bin then reuses the real one)
mkdir -p "$T/up1"
cp -p "$T/up/big.bin" "$T/up1/"
CASE_CONF='max_connections = 1
' CASE_ROOT=$T/up1 run_case 0 --fault '=intruder,from=127.0.0.2'
expect_counts 1 0 0 0
assert_trees_equal "$T/up1" "$T/mirror"
grep -q 'retry' "$T/last.err" && fail "intruder: retried"
assert_eq "$(modeefault_stat 's["intruders"]')" 1 "intruder connections"
assert_eq "$(modeefault_stat 's["intruders_reused"]')" 0 \
    "intruder connections while a data connection was open"
assert_eq "$(modeefault_stat 's["data_conns"]')" 1 "intruder: data connections"
assert_eq "$(modeefault_stat 's["reused"]')" 1 "intruder: big.bin on the listing's data connection"
assert_eq "$(modeefault_stat 's["faults"]')" "{' intruder': 1}" "intruder: faults fired"
assert_eq "$(modeefault_stat 's["retrs"]')" "{'big.bin': 1}" "intruder: RETRs"

echo "# FEAT dropped: the control connection closed at the first FEAT"
CASE_CONF='max_connections = 1
' run_case 0 --feat drop
expect_counts 3 0 0 0
assert_trees_equal "$T/up" "$T/mirror"
assert_eq "$(grep -c ': list: .*(retry 1 of 2)$' "$T/last.err")" 1 \
    "FEAT dropped: one retry of the listing"
grep -q ': list: control connection closed by the server (retry 1 of 2)$' "$T/last.err" ||
    fail "FEAT dropped: message: $(grep retry "$T/last.err")"
assert_eq "$(grep -c 'retry' "$T/last.err")" 1 "FEAT dropped: retries in all"
assert_eq "$(modeefault_stat 's["feat"]')" 2 "FEAT dropped: FEAT commands"
assert_eq "$(($(modeefault_stat 's["total"]') - CASE_CONNS0))" 2 "FEAT dropped: control connections"
assert_eq "$(modeefault_stat 's["mode_e"]')" 1 "FEAT dropped: MODE E sessions"
assert_eq "$(modeefault_stat 's["mlsd_e"]')" 2 "FEAT dropped: MLSDs in MODE E"
assert_eq "$(modeefault_stat 'sorted(s["retrs"].items())')" \
    "[('big.bin', 1), ('sub/small.txt', 1), ('zero.dat', 1)]" "FEAT dropped: one RETR each"
assert_eq "$(modeefault_stat 's["stream_retrs"]')" "{}" "FEAT dropped: stream mode RETRs"

echo "# FEAT refused (500): no GridFTP, so stream mode, LIST"
run_case 0 --feat refuse
expect_counts 3 0 0 0
assert_trees_equal "$T/up" "$T/mirror"
grep -qxF "biomirror: up: ftp_mode = extended: the server does not speak GridFTP (FEAT lists no DCAU): stream mode" \
    "$T/last.err" || fail "FEAT refused: no warning: $(cat "$T/last.err")"
grep -q 'retry' "$T/last.err" && fail "FEAT refused: retried"
assert_eq "$(modeefault_stat 's["feat"]')" 1 "FEAT refused: FEAT commands"
assert_eq "$(modeefault_stat 's["lists"]')" 2 "FEAT refused: LISTs"
assert_eq "$(modeefault_stat 's["mode_e"]')" 0 "FEAT refused: MODE E sessions"
assert_eq "$(modeefault_stat 'sorted(s["stream_retrs"].items())')" \
    "[('big.bin', [0]), ('sub/small.txt', [0]), ('zero.dat', [0])]" \
    "FEAT refused: stream mode RETRs"

echo "# PASS refused (530): the listing fails, exit 3"
run_case 3 --refuse-login
expect_counts 0 0 0 0
grep -q ': list: login: 530 Login incorrect\.$' "$T/last.err" ||
    fail "login refused: message: $(cat "$T/last.err")"
assert_eq "$(modeefault_stat 's["feat"]')" 0 "login refused: FEAT commands"
assert_eq "$(modeefault_stat 's["retrs"]')" "{}" "login refused: RETRs"
[ -z "$(ls -A "$T/mirror" 2>/dev/null)" ] || fail "login refused: files in the mirror"

# The same refusal of a named user is a wrong login, not an anonymous
# slot limit (ftp_530_is_limit): tried once, never retried.
echo "# PASS refused (530) for a named user: not retried"
printf 'secret\n' > "$T/pw"
chmod 0600 "$T/pw"
CASE_CONF="user = bmuser
password_file = $T/pw
" run_case 3 --refuse-login
expect_counts 0 0 0 0
grep -q ': list: login refused: 530 Login incorrect\.$' "$T/last.err" ||
    fail "wrong login: message: $(cat "$T/last.err")"
grep -q 'retry' "$T/last.err" && fail "wrong login: retried: $(grep retry "$T/last.err")"
assert_eq "$(($(modeefault_stat 's["total"]') - CASE_CONNS0))" 1 "wrong login: control connections"

stop_servers
[ -z "$(bm_leftovers)" ] || fail "processes left: $(bm_leftovers)"
echo "PASS"
