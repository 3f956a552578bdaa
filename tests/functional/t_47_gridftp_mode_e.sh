#!/bin/bash
# GridFTP extended block mode (ftp_mode = extended) against a real
# globus-gridftp-server, and its fallback on a server that is no GridFTP
# (vsftpd):
#  1. a cold mirror (nested directories, spaces, '%', '#', a leading
#     space and a leading '~', a zero-byte
#     file, 200 small files, one 20 MB file below 2 * min_split) is
#     byte-identical with upstream mtimes; every file came by exactly one
#     RETR on a MODE E session (USER, PASS, TYPE I, MODE E, DCAU N, OPTS
#     RETR, one PORT, then MLSD per directory listed and RETR per file;
#     no EPSV/PASV/EPRT, no SIZE, no MDTM, not even for the file large
#     enough to resume: MLSD gave its time to the second), at most
#     max_connections (4) sessions, and each session's RETRs after its
#     first reused its data connection (125); the run's one FEAT came on
#     the first session, after PASS, and the server saw no control
#     connection besides the MODE E sessions;
#  2. a second run fetches nothing;
#  3. one file changed and one added upstream: exactly those are fetched;
#  4. a file the server cannot open (mode 000; gridftp runs as nobody)
#     fails with the server's reason (exit 1) while the run's other files,
#     in the same one session, are published; nothing under
#     its name, no temp files; readable again, the next run fetches it;
#  5. vsftpd (FEAT lists no DCAU): a warning, and stream mode (exit 0);
#  6. config errors (exit 2, the message naming the key);
#  7. the server killed in the middle of a run of 3000 files: exit 1, what
#     was published is upstream's, no temp files; a new server on the same
#     tree, and the next run completes the mirror.
# Cases 1 and 7 run with stall_timeout = 3600 under timeout 300: a
# pipelined file whose bytes and 226 were read before it began is taken
# at once (it waited for the stall timeout before, then completed).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup

# gen_tree DIR: the tree of this test (deterministic names, sizes, mtimes).
gen_tree() {
	python3 - "$1" <<'EOF' || fail "gen_tree $1"
import os, random, sys

root = sys.argv[1]
rng = random.Random(47)
files = [
    ("README.txt", 1200),
    ("zero.dat", 0),
    ("with space.txt", 333),
    ("100%.txt", 100),
    ("pct%41#hash.txt", 55),
    ("a+b c%d#e.bin", 777),
    (" lead space.txt", 21),    # RETR by absolute path: stream mode's
    ("~tilde.txt", 22),         # CWD + RETR NAME loses both on gridftp
    ("a/b/c/deep.txt", 4321),
    ("a/b/c/d e/deepest.bin", 12345),
    ("dir with space/sub dir/file with space.dat", 5000),
]
for i in range(200):
    files.append(("small/s%d/f%03d.dat" % (i % 5, i), rng.randrange(1, 3000)))
for n, (rel, size) in enumerate(files):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(rng.randbytes(size))
    t = 1600000000 + n * 86400 + (n * 13) % 59
    os.utime(path, (t, t))
EOF
}

# many_tree DIR N: N files of a few bytes in directories of 100.
many_tree() {
	python3 - "$1" "$2" <<'EOF' || fail "many_tree $1"
import os, sys

root, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    d = os.path.join(root, "d%02d" % (i // 100))
    os.makedirs(d, exist_ok=True)
    p = os.path.join(d, "f%03d" % (i % 100))
    with open(p, "w") as f:
        f.write("%d\n" % i)
    os.utime(p, (1500000000 + i, 1500000000 + i))
EOF
}

# sessions LOG MARK: one line per command after line MARK of a gridftp
# log, "PID CMD ARGS" (the server forks one process per control
# connection and logs '[PID] ... [CLIENT]: CMD'), paths made relative to
# $T/up/ where they are under it.
sessions() {
	tail -n +"$(($2 + 1))" "$1" |
	    sed -n 's/^\[\([0-9]*\)\].*\[CLIENT\]: \(.*[^\r]\)\r\{0,1\}$/\1 \2/p' |
	    sed "s#^\([0-9]* [A-Z]*\) $T/up/#\1 #"
}

# wait_log LOG MARK RE WANT: wait (~5 s at most) until WANT lines after
# line MARK of LOG match RE (gridftp logs a little after its reply);
# prints how many do.
wait_log() {
	local n
	for _ in $(seq 1 50); do
		n=$(tail -n +"$(($2 + 1))" "$1" | grep -ac -- "$3")
		[ "$n" -ge "$4" ] && break
		sleep 0.1
	done
	echo "$n"
}

# no_temp_names DIR: nothing of ours but final names in DIR.
no_temp_names() {
	no_temps "$1"
	left=$(find "$1" -name '.biomirror*' | head -5)
	[ -z "$left" ] || fail "temp names left: $left"
}

gen_tree "$T/up"
make_big_file "$T/up/big/big 20M.bin" 20
nfiles=$(find "$T/up" -type f | wc -l)
start_gridftp "$T/up"
write_conf "$GRIDFTP_URL"
# No stall ends a transfer here: a file whose bytes and 226 the client
# holds but does not read (a pipelined RETR begun with nothing left to
# poll for) hangs the run until timeout(1) fails it.
printf 'ftp_mode = extended\nmax_connections = 4\nmin_split = 16M\nstall_timeout = 3600\n' >> "$T/bm.conf"

echo "# 1. cold mirror of $nfiles files in MODE E"
mark=$(wc -l < "$GRIDFTP_LOG")
assert_exit 0 timeout 300 "$BM" -c "$T/bm.conf" --state-dir "$T/state" \
    --json sync up --min-split 16M
expect_counts "$nfiles" 0 0 0
assert_trees_equal "$T/up" "$T/mirror"
no_temp_names "$T/mirror"
assert_eq "$(manifest_sql "$T/state" up "select count(*) from files where type = 102")" \
    "$nfiles" "files in the manifest"
wait_log "$GRIDFTP_LOG" "$mark" '\[CLIENT\]: RETR ' "$nfiles" > /dev/null
sessions "$GRIDFTP_LOG" "$mark" > "$T/cmds"
# Every file once, by name (the server logs the decoded path).
sed -n 's/^[0-9]* RETR //p' "$T/cmds" | LC_ALL=C sort > "$T/retrs"
(cd "$T/up" && find . -type f -printf '%P\n') | LC_ALL=C sort > "$T/want"
diff -u "$T/want" "$T/retrs" >&2 || fail "RETRs are not one per file"
# The sessions that sent MODE E, and what each of them sent.
modee=$(awk '$2 == "MODE" && $3 == "E" { print $1 }' "$T/cmds" | sort -u)
nsess=$(echo "$modee" | grep -c .)
echo "# $nsess MODE E sessions"
if [ "$nsess" -lt 1 ] || [ "$nsess" -gt 4 ]; then
	fail "$nsess MODE E sessions, want 1..4"
fi
# One FEAT in the run, on a MODE E session: the probe went on in MODE E.
assert_eq "$(grep -c '^[0-9]* FEAT$' "$T/cmds")" 1 "FEAT commands"
feat_pid=$(awk '$2 == "FEAT" { print $1 }' "$T/cmds")
echo "$modee" | grep -qx "$feat_pid" || fail "FEAT on session $feat_pid, not a MODE E session"
assert_eq "$(awk '{ print $1 }' "$T/cmds" | sort -u | grep -c .)" "$nsess" \
    "control connections (all MODE E sessions)"
for p in $modee; do
	awk -v p="$p" '$1 == p { $1 = ""; sub(/^ /, ""); print }' "$T/cmds" \
	    > "$T/sess.$p"
	# The set-up, in this order (gridftp logs PASS twice); FEAT after
	# PASS on the session that asked it.
	got=$(grep -Ev '^(RETR|MDTM|MLSD)( |$)' "$T/sess.$p" | uniq | sed 's/^PORT .*/PORT/' | tr '\n' '|')
	want="USER anonymous|PASS ftp@example.com|TYPE I|MODE E|DCAU N|OPTS RETR Parallelism=4,4,4;|PORT|"
	[ "$p" != "$feat_pid" ] || want="USER anonymous|PASS ftp@example.com|FEAT|TYPE I|MODE E|DCAU N|OPTS RETR Parallelism=4,4,4;|PORT|"
	assert_eq "$got" "$want" "commands of session $p besides RETR"
	first=$(grep -n '^RETR ' "$T/sess.$p" | head -1 | cut -d: -f1)
	port=$(grep -n '^PORT ' "$T/sess.$p" | cut -d: -f1)
	[ "$port" -lt "$first" ] || fail "session $p: PORT after its first RETR"
done
# RETRs only on MODE E sessions (no stream-mode fallback for any file).
nretr_e=$(for p in $modee; do grep -c '^RETR ' "$T/sess.$p"; done |
    awk '{ n += $1 } END { print n + 0 }')
assert_eq "$nretr_e" "$nfiles" "RETRs on MODE E sessions"
# The listing too: after FEAT, every directory is one MLSD on a MODE E
# session (its blocks on the session's data connection), and no command
# asks for a passive data connection.
nmlsd_e=$(for p in $modee; do grep -cE '^MLSD( |$)' "$T/sess.$p"; done |
    awk '{ n += $1 } END { print n + 0 }')
assert_eq "$nmlsd_e" "$(find "$T/up" -type d | wc -l)" "MLSDs on MODE E sessions"
assert_eq "$(grep -c '^[0-9]* MLSD' "$T/cmds")" "$nmlsd_e" "MLSDs in all"
assert_eq "$(grep -cE '^[0-9]* (EPSV|PASV|EPRT)' "$T/cmds")" 0 "passive data connections"
assert_eq "$(grep -c '^[0-9]* PORT ' "$T/cmds")" "$nsess" "PORT commands"
# MLSD gave each file's exact size and time to the second: no SIZE, and
# no MDTM, not even for the file large enough to be resumed (the listed
# time is its validator).
assert_eq "$(grep -c '^[0-9]* SIZE ' "$T/cmds")" 0 "SIZE commands"
assert_eq "$(sed -n 's/^[0-9]* MDTM //p' "$T/cmds" | tr '\n' '|')" \
    "" "MDTM commands"
reused=$(wait_log "$GRIDFTP_LOG" "$mark" 'reusing existing data connection' \
    "$((nfiles - nsess))")
echo "# $reused RETRs reused their session's data connection"
[ "$reused" -ge "$((nfiles - nsess))" ] ||
    fail "$reused data connections reused, want >= $((nfiles - nsess))"

echo "# 2. nothing changed upstream: nothing fetched"
mark=$(wc -l < "$GRIDFTP_LOG")
assert_exit 0 bm --json sync up
expect_counts 0 0 0 0
ndirs=$(find "$T/up" -type d | wc -l)
wait_log "$GRIDFTP_LOG" "$mark" '\[CLIENT\]: MLSD' "$ndirs" > /dev/null
sleep 0.3
assert_eq "$(sessions "$GRIDFTP_LOG" "$mark" | grep -c '^[0-9]* RETR ')" 0 \
    "RETRs of the second run"
assert_trees_equal "$T/up" "$T/mirror"

echo "# 3. one file changed, one added"
printf 'new readme\n' > "$T/up/README.txt"
touch -d '2022-03-04 05:06:07 UTC' "$T/up/README.txt"
mkdir -p "$T/up/new dir"
printf 'brand new\n' > "$T/up/new dir/new 100%#.txt"
touch -d '2022-03-06 11:12:13 UTC' "$T/up/new dir/new 100%#.txt"
mark=$(wc -l < "$GRIDFTP_LOG")
assert_exit 0 bm --json sync up
expect_counts 2 0 0 0
assert_trees_equal "$T/up" "$T/mirror"
no_temp_names "$T/mirror"
wait_log "$GRIDFTP_LOG" "$mark" '\[CLIENT\]: RETR ' 2 > /dev/null
got=$(sessions "$GRIDFTP_LOG" "$mark" | sed -n 's/^[0-9]* RETR //p' | LC_ALL=C sort | tr '\n' '|')
assert_eq "$got" "README.txt|new dir/new 100%#.txt|" "files fetched"

echo "# 4. a file the server cannot open, among 20 new ones, one session"
mkdir -p "$T/up/locked"
for i in $(seq -w 1 20); do
	printf 'new %s\n' "$i" > "$T/up/locked/n$i.txt"
	touch -d "2022-04-0$((10#$i % 9 + 1)) 01:02:$i UTC" "$T/up/locked/n$i.txt"
done
printf 'secret\n' > "$T/up/locked/n10 secret.txt"
chmod 000 "$T/up/locked/n10 secret.txt"
mark=$(wc -l < "$GRIDFTP_LOG")
assert_exit 1 bm --json sync up --max-connections 1
expect_counts 20 0 0 1
assert_eq "$(jerrors)" "locked/n10 secret.txt fetch" "errors"
reason=$(python3 -c 'import json,sys
print(json.load(open(sys.argv[1]))[0]["errors"][0]["reason"])' "$T/last.out")
case $reason in
500-*"Unable to open file $T/up/locked/n10 secret.txt"*"Permission denied"*) ;;
*) fail "reason of the failure: $reason" ;;
esac
grep -qF "up: locked/n10 secret.txt: fetch: 500-" "$T/last.err" ||
    fail "the failure is not on stderr"
[ -e "$T/mirror/locked/n10 secret.txt" ] && fail "the unreadable file was published"
no_temp_names "$T/mirror"
# A RETR refused before its transfer began leaves the session as it was:
# the rest came on the same one (one MODE E set-up in the run).
wait_log "$GRIDFTP_LOG" "$mark" '\[CLIENT\]: RETR ' 21 > /dev/null
assert_eq "$(sessions "$GRIDFTP_LOG" "$mark" | grep -c '^[0-9]* RETR ')" 21 \
    "RETRs of the run (20 files, 1 refused)"
assert_eq "$(tail -n +"$((mark + 1))" "$GRIDFTP_LOG" | grep -c '\[CLIENT\]: MODE E')" 1 \
    "MODE E sessions of the run"
chmod 644 "$T/up/locked/n10 secret.txt"
mv "$T/up/locked/n10 secret.txt" "$T/secret.save"
assert_trees_equal "$T/up" "$T/mirror"
mv "$T/secret.save" "$T/up/locked/n10 secret.txt"
echo "# readable again: the next run fetches it, and only it"
assert_exit 0 bm --json sync up
expect_counts 1 0 0 0
assert_trees_equal "$T/up" "$T/mirror"

echo "# 5. ftp_mode = extended on vsftpd (no DCAU): stream mode"
start_vsftpd "$T/up"
cat > "$T/v.conf" <<CONF
[v]
source = $VSFTPD_URL
dest = $T/vmirror
ftp_mode = extended
min_split = 16M
CONF
vmark=$(wc -l < "$VSFTPD_LOG")
assert_exit 0 "$BM" -c "$T/v.conf" --state-dir "$T/vstate" --json sync v
grep -qxF "biomirror: v: ftp_mode = extended: the server does not speak GridFTP (FEAT lists no DCAU): stream mode" \
    "$T/last.err" || fail "no fallback warning"
assert_eq "$(jfield fetched)" "$(find "$T/up" -type f | wc -l)" "fetched from vsftpd"
assert_trees_equal "$T/up" "$T/vmirror"
no_temp_names "$T/vmirror"
tail -n +"$((vmark + 1))" "$VSFTPD_LOG" | grep -q '"MODE E"' &&
    fail "MODE E sent to vsftpd"
tail -n +"$((vmark + 1))" "$VSFTPD_LOG" | grep -q '"RETR big 20M.bin"' ||
    fail "no RETR of big 20M.bin in vsftpd's log"

echo "# 6. config errors"
printf '[x]\nsource = %s\ndest = %s\nftp_mode = bogus\n' "$GRIDFTP_URL" "$T/x" > "$T/e1.conf"
assert_exit 2 "$BM" -c "$T/e1.conf" check-config
grep -qF "e1.conf:4: ftp_mode = bogus: expected stream or extended" "$T/last.err" ||
    fail "ftp_mode = bogus: message"
printf '[x]\nsource = http://127.0.0.1:1/\ndest = %s\nftp_mode = extended\n' "$T/x" > "$T/e2.conf"
assert_exit 2 "$BM" -c "$T/e2.conf" check-config
grep -qF "ftp_mode applies only to ftp:// and ftps:// sources" "$T/last.err" ||
    fail "ftp_mode with http: message"
printf '[x]\nsource = ftps://127.0.0.1:1/\ndest = %s\n' "$T/x" > "$T/e3.conf"
assert_exit 0 "$BM" -c "$T/e3.conf" check-config
assert_exit 2 "$BM" -c "$T/e3.conf" --state-dir "$T/xstate" sync x --ftp-mode extended
grep -qF "x: ftp_mode = extended needs an ftp:// source without TLS" "$T/last.err" ||
    fail "--ftp-mode extended with ftps: message"
printf '[x]\nsource = %s\ndest = %s\nftp_tls = require\nftp_mode = extended\n' \
    "$GRIDFTP_URL" "$T/x" > "$T/e4.conf"
assert_exit 2 "$BM" -c "$T/e4.conf" check-config
grep -qF "ftp_mode = extended needs an ftp:// source without TLS" "$T/last.err" ||
    fail "ftp_mode = extended with ftp_tls = require: message"
assert_exit 2 bm sync up --ftp-mode bogus
grep -qF -- "--ftp-mode bogus: ftp_mode = bogus: expected stream or extended" \
    "$T/last.err" || fail "--ftp-mode bogus: message"
[ -e "$T/x" ] && fail "a refused config made $T/x"

echo "# 7. the server killed in the middle of a run of 3000 files"
many_tree "$T/many" 3000
start_gridftp "$T/many"
kdir=$T/gridftp/$GRIDFTP_PORT
kpid=$(echo "$BM_SERVERS" | tr ' ' '\n' | sed -n "s#^gridftp:\([0-9]*\):$kdir\$#\1#p")
[ -n "$kpid" ] || fail "no pid for the gridftp on $GRIDFTP_PORT"
cat > "$T/k.conf" <<CONF
[k]
source = $GRIDFTP_URL
dest = $T/kmirror
ftp_mode = extended
max_connections = 4
retries = 0
stall_timeout = 3600
CONF
"$BM" -c "$T/k.conf" --state-dir "$T/kstate" --json sync k \
    > "$T/k.out" 2> "$T/k.err" &
bmpid=$!
# Wait for the first file of the transfers (a temp file, or one
# published), then freeze the server (the master first, so that it forks
# no more) and kill every process of it.  The server's log would come too
# late: it writes it in the background.
for _ in $(seq 1 6000); do
	[ -n "$(find "$T/kmirror" -type f -print -quit 2>/dev/null)" ] && break
	kill -0 "$bmpid" 2>/dev/null || break
	sleep 0.005
done
kill -STOP "$kpid"
pids=$(bm_server_pids gridftp "$kpid" "$kdir")
# shellcheck disable=SC2086
kill -STOP $pids
# shellcheck disable=SC2086
kill -KILL $pids
wait "$kpid" 2>/dev/null
wait "$bmpid"
rc=$?
python3 -c 'import json,sys
r = json.load(open(sys.argv[1]))[0]
print("# status %s, fetched %d, failed %d" % (r["status"], r["fetched"], r["failed"]))
print("# errors: %s" % sorted(set(e["reason"] for e in r["errors"])))' "$T/k.out"
[ "$rc" = 1 ] || fail "exit $rc after the server was killed, want 1 (did the run end before the kill?)"
kf=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[0]["fetched"])' "$T/k.out")
kfail=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[0]["failed"])' "$T/k.out")
echo "# before the kill: $kf fetched, $kfail failed"
[ "$kf" -lt 3000 ] || fail "all 3000 fetched although the server was killed"
[ "$kfail" -ge 1 ] || fail "no file failed although the server was killed"
# Every failure is a fetch, for a reason of a server gone.
python3 - "$T/k.out" <<'EOF' || fail "unexpected errors after the kill"
import json, re, sys

gone = re.compile(r"connect: Connection refused|"
                  r"control connection closed by the server|"
                  r"control connection: Connection reset by peer|"
                  r"data connection (closed|failed) before the end of the "
                  r"file(: Connection reset by peer)?")
r = json.load(open(sys.argv[1]))[0]
bad = [e for e in r["errors"]
       if e["op"] != "fetch" or not gone.fullmatch(e["reason"])]
for e in bad[:5]:
    print("error: %s" % e, file=sys.stderr)
sys.exit(1 if bad or len(r["errors"]) != r["failed"] else 0)
EOF
nk=$(find "$T/kmirror" -type f | wc -l)
assert_eq "$nk" "$kf" "files published"
# What was published is upstream's, bytes and mtime.
python3 - "$T/many" "$T/kmirror" <<'EOF' || fail "a published file differs from upstream"
import os, sys

up, mirror = sys.argv[1], sys.argv[2]
bad = 0
for d, _, names in os.walk(mirror):
    for n in names:
        m = os.path.join(d, n)
        u = os.path.join(up, os.path.relpath(m, mirror))
        if open(m, "rb").read() != open(u, "rb").read() or \
                int(os.stat(m).st_mtime) != int(os.stat(u).st_mtime):
            print("differs: " + m, file=sys.stderr)
            bad += 1
sys.exit(1 if bad else 0)
EOF
no_temp_names "$T/kmirror"
echo "# a new server on the same tree: the next run completes the mirror"
start_gridftp "$T/many"
sed -i "s#^source = .*#source = $GRIDFTP_URL#" "$T/k.conf"
assert_exit 0 timeout 300 "$BM" -c "$T/k.conf" --state-dir "$T/kstate" \
    --json sync k
assert_eq "$(jfield fetched)" "$((3000 - kf))" "fetched by the rerun"
assert_eq "$(jfield failed)" 0 "failed in the rerun"
assert_trees_equal "$T/many" "$T/kmirror"
no_temp_names "$T/kmirror"
echo "PASS"
