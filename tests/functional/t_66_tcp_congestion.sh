#!/bin/bash
# tcp_congestion: the TCP congestion control of the sockets biomirror
# makes (tcp(7) TCP_CONGESTION).  Each case holds a connection open (a
# server that stalls in the middle of big.bin) and reads the algorithm of
# every established socket of the biomirror process with ss -tinp:
#   tcp_congestion = ALT in the config (ALT: an algorithm this kernel has
#   that is not its default)            -> every socket uses ALT (HTTP)
#   the same config, --tcp-congestion auto
#                                       -> the kernel's default
#   --tcp-congestion ALT, GridFTP ftp_mode = extended (a control
#   connection, and the data connection the server makes to the listener
#   biomirror opened)                   -> both use ALT
#   --tcp-congestion nosuchcc (nginx)   -> the warning naming the sysctl
#                                          and its list, the kernel's
#                                          default, exit 0, identical
#   run as nobody with an algorithm the kernel has but does not allow for
#   unprivileged users (when there is one) -> "not allowed for this user",
#                                          exit 0
#   bad values in the config (a space, 16 letters, a ';', empty)
#                                       -> check-config exit 2, the line
#                                          and the reason; AUTO is fine
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup
command -v ss >/dev/null || fail "ss (iproute2) is not installed (make deps)"

PROC=/proc/sys/net/ipv4
DEFAULT=$(cat "$PROC/tcp_congestion_control")
AVAIL=$(cat "$PROC/tcp_available_congestion_control")
ALT=
for a in $AVAIL; do
	[ "$a" != "$DEFAULT" ] && { ALT=$a; break; }
done
[ -n "$ALT" ] || fail "this kernel offers no congestion control besides $DEFAULT ($AVAIL)"
echo "# kernel default $DEFAULT, available: $AVAIL; the test sets $ALT"

mkdir -p "$T/up/sub"
make_big_file "$T/up/big.bin" 1 big
printf 'hello\n' > "$T/up/sub/small.txt"
touch -d '2022-03-04 05:06:07 UTC' "$T/up/sub/small.txt" "$T/up/sub"

# socket_ccs PID: the congestion control of each established TCP socket
# of process PID, one per line (ss prints each socket's line, then its
# -i line; the algorithm is the word of that line found in AVAIL).
socket_ccs() {
	ss -tinpH state established | awk -v pid="pid=$1," -v avail="$AVAIL" '
	    BEGIN { n = split(avail, a, " "); for (i = 1; i <= n; i++) ok[a[i]] = 1 }
	    /^[ \t]/ {
		if (!mine) next
		for (i = 1; i <= NF; i++) if ($i in ok) { print $i; break }
		if (i > NF) print "none"
		next
	    }
	    { mine = index($0, pid) > 0 }'
}

# ccs_while_stalled MIN READY CMD...: run CMD (biomirror itself, not a
# shell function: its pid is what ss shows; a sync that stalls on
# big.bin) in the background, wait until the shell command READY succeeds
# (the server stalls) and the run holds at least MIN established sockets,
# print their algorithms, sorted and unique, into $T/ccs, and stop it.
ccs_while_stalled() {
	local min=$1 ready=$2 pid i n=0
	shift 2
	"$@" > "$T/bg.out" 2> "$T/bg.err" &
	pid=$!
	for i in $(seq 1 200); do
		kill -0 "$pid" 2>/dev/null || break
		if eval "$ready" 2>/dev/null; then
			socket_ccs "$pid" > "$T/ccs.all"
			n=$(wc -l < "$T/ccs.all")
			[ "$n" -ge "$min" ] && break
		fi
		sleep 0.05
	done
	kill -TERM "$pid" 2>/dev/null
	wait "$pid"
	sed 's/^/  bg stderr: /' "$T/bg.err"
	[ "$n" -ge "$min" ] ||
	    fail "the stalled run held $n established sockets, want at least $min: $*"
	sort -u "$T/ccs.all" > "$T/ccs"
	echo "# $n sockets: $(tr '\n' ' ' < "$T/ccs")"
}

# The servers stall: big.bin was asked for.
HTTP_STALLED='[ "$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[\"gets\"].get(\"/big.bin\", 0))" "$FAULT_STATS")" -ge 1 ]'
MODEE_STALLED='[ "$(modeefault_stat "s[\"faults\"].get(\"big.bin stall\", 0)")" -ge 1 ]'

echo "# HTTP: tcp_congestion = $ALT in the config"
start_faultserver "$T/up" normal --fault '/big.bin=stall,at=1000,for=30'
write_conf "$FAULT_URL"
printf 'tcp_congestion = %s\nstall_timeout = 60\n' "$ALT" >> "$T/bm.conf"
assert_exit 0 bm check-config
ccs_while_stalled 1 "$HTTP_STALLED" "$BM" -c "$T/bm.conf" --state-dir "$T/state" sync up
assert_eq "$(cat "$T/ccs")" "$ALT" "algorithm of biomirror's sockets"

echo "# HTTP: the same config, --tcp-congestion auto"
rm -rf "$T/state" "$T/mirror"
ccs_while_stalled 1 "$HTTP_STALLED" "$BM" -c "$T/bm.conf" --state-dir "$T/state" sync \
    --tcp-congestion auto up
assert_eq "$(cat "$T/ccs")" "$DEFAULT" "algorithm with tcp_congestion auto"
stop_servers

echo "# GridFTP extended mode: --tcp-congestion $ALT (control and data connections)"
rm -rf "$T/state" "$T/mirror"
start_modeefault "$T/up" --fault 'big.bin=stall,at=524288,for=30'
write_conf "$MODEEFAULT_URL"
printf 'ftp_mode = extended\nstreams = 1\nstall_timeout = 60\n' >> "$T/bm.conf"
ccs_while_stalled 2 "$MODEE_STALLED" "$BM" -c "$T/bm.conf" --state-dir "$T/state" sync \
    --tcp-congestion "$ALT" up
assert_eq "$(cat "$T/ccs")" "$ALT" "algorithm of the MODE E sockets"
assert_eq "$(modeefault_stat 's["faults"]["big.bin stall"]')" 1 "the stall fired"
stop_servers

echo "# a name this kernel does not have: a warning, the default, exit 0"
rm -rf "$T/state" "$T/mirror"
start_nginx "$T/up"
write_conf "$NGINX_URL"
assert_exit 0 bm sync --tcp-congestion nosuchcc up
grep -qxF "biomirror: up: tcp_congestion = nosuchcc: this kernel has no such algorithm (net.ipv4.tcp_available_congestion_control: $AVAIL): the kernel's default ($DEFAULT) is used" "$LAST_ERR" ||
    fail "no warning for an unknown algorithm"
assert_trees_equal "$T/up" "$T/mirror"

echo "# an algorithm not allowed for unprivileged users"
NOTALLOWED=
for a in $AVAIL; do
	case " $(cat "$PROC/tcp_allowed_congestion_control") " in
	*" $a "*) ;;
	*) NOTALLOWED=$a; break ;;
	esac
done
if [ -n "$NOTALLOWED" ]; then
	rm -rf "$T/state" "$T/mirror"
	mkdir -m 0777 "$T/nobody"
	assert_exit 0 runuser -u nobody -- "$BM" --state-dir "$T/nobody/state" \
	    sync --source "$NGINX_URL" --dest "$T/nobody/mirror" \
	    --tcp-congestion "$NOTALLOWED"
	grep -qF "tcp_congestion = $NOTALLOWED: not allowed for this user (net.ipv4.tcp_allowed_congestion_control: $(cat "$PROC/tcp_allowed_congestion_control")): the kernel's default ($DEFAULT) is used" "$LAST_ERR" ||
	    fail "no warning for an algorithm not allowed"
	assert_trees_equal "$T/up" "$T/nobody/mirror"
else
	echo "# not run: every algorithm this kernel has is allowed for unprivileged users"
fi
stop_servers

echo "# bad values"
for v in 'bb r' 'abcdefghijklmnop' 'cubic;reno'; do
	write_conf "http://127.0.0.1:1/"
	printf 'tcp_congestion = %s\n' "$v" >> "$T/bm.conf"
	assert_exit 2 bm check-config
	line=$(grep -n '^tcp_congestion' "$T/bm.conf" | cut -d: -f1)
	grep -qF "bm.conf:$line: tcp_congestion = $v: expected auto or an algorithm name (bbr, cubic, reno, ...) of at most 15 letters, digits, '_' or '-'" "$LAST_ERR" ||
	    fail "no error for tcp_congestion = '$v'"
done
write_conf "http://127.0.0.1:1/"
printf 'tcp_congestion =\n' >> "$T/bm.conf"
assert_exit 2 bm check-config
grep -qF "bm.conf:9: tcp_congestion: empty value" "$LAST_ERR" ||
    fail "no error for an empty tcp_congestion"
write_conf "http://127.0.0.1:1/"
printf 'tcp_congestion = AUTO\n' >> "$T/bm.conf"
assert_exit 0 bm check-config
echo "PASS"
