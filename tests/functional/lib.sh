# shellcheck shell=bash
# tests/functional/lib.sh: sourced by every tests/functional/t_*.sh (bash).
#
# A test script looks like:
#
#	. "$(dirname "$0")/lib.sh"
#	bm_setup
#	make_tree "$T/up"
#	start_nginx "$T/up"
#	assert_exit 0 "$BM" --state-dir "$T/state" sync --source "$NGINX_URL" --dest "$T/mirror"
#	assert_trees_equal "$T/up" "$T/mirror"
#
# Servers run on 127.0.0.1 only, as their own instances (never the Debian
# default config), with every file (config, pid, logs, temp dirs) under $T.
# The EXIT/INT/TERM trap stops them and removes $T (kept when BM_KEEP=1).
#
# Functions: bm_setup, free_port, free_port_range, port_range, start_nginx,
# start_nginx_static, start_apache, start_vsftpd, start_gridftp,
# start_ftpfault, ftpfault_stat, start_modeefault, modeefault_stat,
# stop_servers, bm_leftovers, make_tree, make_big_file, fail,
# assert_eq, assert_trees_equal, assert_exit, manifest_db, manifest_sql,
# nginx_gets.
# Variables: T, BM, NGINX_PORT, NGINX_URL, NGINX_DIR, NGINX_ACCESS_LOG,
# APACHE_PORT, APACHE_URL, APACHE_DIR, APACHE_ACCESS_LOG, VSFTPD_URL,
# VSFTPD_LOG, GRIDFTP_URL, GRIDFTP_LOG, FTPFAULT_URL, MODEEFAULT_URL,
# MODEEFAULT_STATS, MODEEFAULT_LOG, LAST_RC,
# LAST_OUT, LAST_ERR.

set -u

BM_SERVERS=""		# "kind:pid:dir" words, one per server started
BM_PORTS_USED=""	# ports handed out by free_port in this test
BM_TOOLS=$(cd "$(dirname "${BASH_SOURCE[0]}")/../tools" && pwd)

# fail MSG: print "FAIL: MSG" and exit 1 (the trap cleans up).
fail() {
	echo "FAIL: $*" >&2
	exit 1
}

# bm_setup: temp dir T, BM (the binary), cleanup trap, loopback-only env.
bm_setup() {
	umask 022
	T=$(mktemp -d "${BMTEST_DIR:-/tmp}/bmtest.XXXXXX") || fail "mktemp"
	chmod 0755 "$T" || fail "chmod $T"
	# The servers run as www-data: every parent of $T must be searchable.
	local d=$T
	while [ "$d" != / ]; do
		d=$(dirname "$d")
		[ -x "$d" ] || fail "$d is not searchable"
		case $(stat -c %A "$d") in
		*[xt]) ;;
		*) fail "$d is not searchable by others (www-data)" ;;
		esac
	done
	BM=${BM:-$PWD/biomirror}
	export T BM
	# Never go through a proxy: every server is on 127.0.0.1.
	unset http_proxy https_proxy ftp_proxy all_proxy \
	    HTTP_PROXY HTTPS_PROXY FTP_PROXY ALL_PROXY
	export no_proxy='*' NO_PROXY='*'
	trap 'bm_cleanup' EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	echo "# T=$T BM=$BM"
}

# strace ARGS...: strace(1), with LeakSanitizer off for the traced
# biomirror (it refuses to run under ptrace, and make sanitize's build
# would then exit 1 at its end); ASan's other checks stay on.
strace() {
	ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
	    command strace "$@"
}

bm_cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	stop_servers
	# File systems a test mounted under $T (tmpfs for ENOSPC), deepest
	# first, also when it failed before its own umount.
	if [ -n "${T:-}" ] && [ -d "$T" ]; then
		awk -v t="$T/" 'index($2 "/", t) == 1 { print $2 }' /proc/mounts |
		    sort -r | while read -r m; do umount "$m" || umount -l "$m"; done
	fi
	if [ "${BM_KEEP:-0}" = 1 ]; then
		echo "# kept $T" >&2
	elif [ -n "${T:-}" ] && [ -d "$T" ]; then
		rm -rf -- "$T"
	fi
	exit "$rc"
}

# free_port: print a TCP port on 127.0.0.1 that is free now and that this
# test has not handed out before.
free_port() {
	local p
	for _ in 1 2 3 4 5 6 7 8 9 10; do
		p=$(python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])') || fail "free_port: python3"
		case " $BM_PORTS_USED " in
		*" $p "*) continue ;;
		esac
		BM_PORTS_USED="$BM_PORTS_USED $p"
		echo "$p"
		return 0
	done
	fail "free_port: no free port"
}

# wait_http PORT: wait (at most ~5 s) until 127.0.0.1:PORT answers HTTP.
wait_http() {
	local code
	for _ in $(seq 1 50); do
		code=$(curl -s --noproxy '*' -o /dev/null --max-time 1 \
		    -w '%{http_code}' "http://127.0.0.1:$1/" 2>/dev/null)
		[ -n "$code" ] && [ "$code" != 000 ] && return 0
		sleep 0.1
	done
	return 1
}

# check_readable ROOT: the servers run as www-data; fail early and clearly
# when they could not read the tree.
check_readable() {
	[ -d "$1" ] || fail "no directory $1"
	[ "$(id -u)" = 0 ] || return 0	# not root: the servers run as us
	runuser -u www-data -- test -r "$1" -a -x "$1" ||
	    fail "www-data cannot read $1 (check the modes of it and its parents)"
}

# start_nginx ROOT [DIRECTIVE...]: nginx with autoindex on ROOT; each
# DIRECTIVE ("autoindex_format json;", "autoindex_exact_size off;") is
# added inside "location /".  BM_NGINX_HTTP_EXTRA and BM_NGINX_SERVER_EXTRA
# add directives at http and server level.  Exports NGINX_PORT, NGINX_URL
# (http://127.0.0.1:PORT/), NGINX_DIR, NGINX_ACCESS_LOG.
start_nginx() {
	local root=$1
	shift
	bm_nginx autoindex "$root" "$@"
}

# start_nginx_static ROOT [DIRECTIVE...]: same, but directories are served
# by their index.html (autoindex off): for hand-written listing pages.
start_nginx_static() {
	local root=$1
	shift
	bm_nginx static "$root" "$@"
}

bm_nginx() {
	local mode=$1 root=$2 port dir pid loc d
	shift 2
	root=$(cd "$root" && pwd) || fail "start_nginx: no directory $2"
	check_readable "$root"
	port=$(free_port)
	dir=$T/nginx/$port
	mkdir -p "$dir/tmp" || fail "mkdir $dir"
	if [ "$mode" = autoindex ]; then
		loc="autoindex on; autoindex_exact_size on;"
	else
		loc="autoindex off; index index.html;"
	fi
	for d in "$@"; do
		loc="$loc
            $d"
	done
	cat > "$dir/nginx.conf" <<EOF
# biomirror test instance ($mode)
daemon off;
master_process on;
worker_processes 1;
user www-data;
pid $dir/nginx.pid;
error_log $dir/error.log info;
events { worker_connections 256; }
http {
    include /etc/nginx/mime.types;
    default_type application/octet-stream;
    log_format bm '\$remote_addr [\$time_local] "\$request" \$status \$body_bytes_sent "\$http_range" "\$http_if_modified_since" "\$http_if_none_match" "\$http_user_agent"';
    access_log $dir/access.log bm;
    client_body_temp_path $dir/tmp/body;
    proxy_temp_path $dir/tmp/proxy;
    fastcgi_temp_path $dir/tmp/fastcgi;
    uwsgi_temp_path $dir/tmp/uwsgi;
    scgi_temp_path $dir/tmp/scgi;
    sendfile on;
    keepalive_timeout 30;
    ${BM_NGINX_HTTP_EXTRA:-}
    server {
        listen 127.0.0.1:$port;
        server_name 127.0.0.1;
        ${BM_NGINX_SERVER_EXTRA:-}
        location / {
            root $root;
            $loc
        }
    }
}
EOF
	/usr/sbin/nginx -t -q -p "$dir" -e "$dir/error.log" -c "$dir/nginx.conf" \
	    2>"$dir/stderr.log" || {
		cat "$dir/stderr.log" >&2
		fail "start_nginx: bad config $dir/nginx.conf"
	}
	/usr/sbin/nginx -p "$dir" -e "$dir/error.log" -c "$dir/nginx.conf" \
	    >"$dir/stderr.log" 2>&1 </dev/null &
	pid=$!
	BM_SERVERS="$BM_SERVERS nginx:$pid:$dir"
	if ! wait_http "$port"; then
		cat "$dir/stderr.log" "$dir/error.log" >&2 2>/dev/null
		fail "start_nginx: no answer on 127.0.0.1:$port"
	fi
	NGINX_PORT=$port
	NGINX_URL=http://127.0.0.1:$port/
	NGINX_DIR=$dir
	NGINX_ACCESS_LOG=$dir/access.log
	export NGINX_PORT NGINX_URL NGINX_DIR NGINX_ACCESS_LOG
	echo "# nginx ($mode) pid $pid on $NGINX_URL serving $root"
}

# nginx_gets [LOG]: print the paths of the successful GETs (200/206) logged
# by nginx (default: the last one started), one a line, in order.
nginx_gets() {
	sed -n 's/^[^"]*"GET \([^ ]*\) HTTP[^"]*" 20[06] .*/\1/p' \
	    "${1:-$NGINX_ACCESS_LOG}"
}

# start_apache ROOT [DIRECTIVE...]: Apache httpd (mpm_event) with
# mod_autoindex (IndexOptions FancyIndexing) on ROOT; each DIRECTIVE
# ("IndexOptions +HTMLTable") is added inside <Directory ROOT>.  Listing
# times are in TZ (UTC unless BM_APACHE_TZ is set).  Exports APACHE_PORT,
# APACHE_URL, APACHE_DIR, APACHE_ACCESS_LOG.
start_apache() {
	local root=$1 port dir pid m d extra=""
	shift
	root=$(cd "$root" && pwd) || fail "start_apache: no directory $1"
	check_readable "$root"
	port=$(free_port)
	dir=$T/apache/$port
	mkdir -p "$dir" || fail "mkdir $dir"
	for d in "$@"; do
		extra="$extra
    $d"
	done
	{
		for m in mpm_event authz_core dir autoindex mime; do
			echo "LoadModule ${m}_module /usr/lib/apache2/modules/mod_$m.so"
		done
		cat <<EOF
ServerRoot $dir
ServerName 127.0.0.1
Listen 127.0.0.1:$port
PidFile $dir/apache2.pid
DefaultRuntimeDir $dir
Mutex file:$dir default
User www-data
Group www-data
ErrorLog $dir/error.log
LogLevel warn
LogFormat "%h %t \"%r\" %>s %B \"%{Range}i\" \"%{If-Modified-Since}i\" \"%{If-None-Match}i\" \"%{User-Agent}i\"" bm
CustomLog $dir/access.log bm
TypesConfig /etc/mime.types
StartServers 1
ServerLimit 2
ThreadsPerChild 25
MaxRequestWorkers 50
KeepAlive On
Timeout 30
DocumentRoot $root
<Directory />
    Options None
    AllowOverride None
    Require all denied
</Directory>
<Directory $root>
    Options +Indexes
    AllowOverride None
    Require all granted
    DirectoryIndex disabled
    IndexOptions FancyIndexing$extra
</Directory>
EOF
	} > "$dir/apache2.conf"
	TZ=${BM_APACHE_TZ:-UTC} /usr/sbin/apache2 -d "$dir" -f "$dir/apache2.conf" \
	    -k start >"$dir/stderr.log" 2>&1 </dev/null || {
		cat "$dir/stderr.log" "$dir/error.log" >&2 2>/dev/null
		fail "start_apache: apache2 -k start failed ($dir/apache2.conf)"
	}
	pid=""
	for _ in $(seq 1 50); do
		[ -s "$dir/apache2.pid" ] && pid=$(cat "$dir/apache2.pid") &&
		    [ -n "$pid" ] && break
		sleep 0.1
	done
	[ -n "$pid" ] || fail "start_apache: no pid file"
	BM_SERVERS="$BM_SERVERS apache:$pid:$dir"
	if ! wait_http "$port"; then
		cat "$dir/stderr.log" "$dir/error.log" >&2 2>/dev/null
		fail "start_apache: no answer on 127.0.0.1:$port"
	fi
	APACHE_PORT=$port
	APACHE_URL=http://127.0.0.1:$port/
	APACHE_DIR=$dir
	APACHE_ACCESS_LOG=$dir/access.log
	export APACHE_PORT APACHE_URL APACHE_DIR APACHE_ACCESS_LOG
	echo "# apache pid $pid on $APACHE_URL serving $root"
}

# start_faultserver ROOT MODE [OPTION...]: our own fault-injecting HTTP
# server (tests/tools/faultserver.py) on ROOT; OPTIONs go to it ("--fail 2",
# "--retry-after 1").  Exports FAULT_PORT, FAULT_URL, FAULT_STATS (a JSON
# file: max_concurrent and total connections, GETs per path, ranges).
start_faultserver() {
	local root=$1 mode=$2 port dir pid
	shift 2
	port=$(free_port)
	dir=$T/fault/$port
	mkdir -p "$dir" || fail "mkdir $dir"
	FAULT_STATS=$dir/stats.json
	python3 "$BM_TOOLS/faultserver.py" --root "$root" --port "$port" \
	    --mode "$mode" --stats "$FAULT_STATS" "$@" \
	    > "$dir/server.log" 2>&1 &
	pid=$!
	BM_SERVERS="$BM_SERVERS fault:$pid:$dir"
	wait_http "$port" || { cat "$dir/server.log" >&2; fail "faultserver did not start"; }
	FAULT_PORT=$port
	FAULT_URL=http://127.0.0.1:$port/
	export FAULT_PORT FAULT_URL FAULT_STATS
	echo "# faultserver ($mode) pid $pid on $FAULT_URL serving $root"
}

# free_port_range N: print "LO HI", N consecutive TCP ports on 127.0.0.1
# that are free now (FTP passive data ports).
free_port_range() {
	python3 - "$1" <<'PY' || fail "free_port_range"
import random, socket, sys
n = int(sys.argv[1])
for _ in range(200):
    lo = random.randrange(20000, 60000 - n)
    try:
        for p in range(lo, lo + n):
            with socket.socket() as s:
                s.bind(("127.0.0.1", p))
    except OSError:
        continue
    print(lo, lo + n - 1)
    sys.exit(0)
sys.exit(1)
PY
}

# port_range N: set the caller's lo and hi to N consecutive free ports
# (free_port_range), or fail: a fail inside $(...) would end only that
# subshell.
port_range() {
	read -r lo hi <<< "$(free_port_range "$1")"
	[ -n "${hi:-}" ] || fail "no $1 free consecutive ports on 127.0.0.1"
}

# wait_ftp PORT: wait (at most ~5 s) until 127.0.0.1:PORT sends an FTP
# greeting (220).
wait_ftp() {
	for _ in $(seq 1 50); do
		python3 -c 'import socket,sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1)
s.settimeout(1)
sys.exit(0 if s.recv(64).startswith(b"220") else 1)' "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

# start_vsftpd ROOT: vsftpd (its own config file, listen=YES,
# background=NO) serving ROOT to anonymous users (ftp_username=ftp,
# read-only, passive ports in a free range, times in UTC, every command
# logged; BM_VSFTPD_EXTRA adds config lines, e.g. for TLS).  Exports
# VSFTPD_PORT, VSFTPD_URL (ftp://127.0.0.1:PORT/),
# VSFTPD_DIR, VSFTPD_LOG (the protocol log: 'FTP command: ... "RETR x"').
start_vsftpd() {
	local root=$1 port dir pid lo hi
	command -v vsftpd >/dev/null || fail "vsftpd is not installed (make deps)"
	check_readable "$root"
	# BM_VSFTPD_PORT: the port of a server restarted (the same host).
	port=${BM_VSFTPD_PORT:-$(free_port)}
	port_range 100
	dir=$T/vsftpd/$port${BM_VSFTPD_PORT:+.$RANDOM}
	mkdir -p "$dir/empty" || fail "mkdir $dir"
	cat > "$dir/vsftpd.conf" <<CONF
listen=YES
listen_ipv6=NO
listen_address=127.0.0.1
listen_port=$port
background=NO
anonymous_enable=YES
local_enable=NO
write_enable=NO
ftp_username=ftp
anon_root=$root
no_anon_password=YES
pasv_enable=YES
pasv_min_port=$lo
pasv_max_port=$hi
pasv_address=127.0.0.1
port_enable=YES
connect_from_port_20=NO
seccomp_sandbox=NO
xferlog_enable=YES
xferlog_std_format=NO
log_ftp_protocol=YES
vsftpd_log_file=$dir/vsftpd.log
dual_log_enable=NO
max_clients=64
max_per_ip=64
secure_chroot_dir=$dir/empty
use_localtime=NO
hide_ids=YES
${BM_VSFTPD_EXTRA:-}
CONF
	# BM_VSFTPD_TZ: the server's TZ (its LIST, and MDTM with
	# use_localtime=YES in BM_VSFTPD_EXTRA, in that zone).
	env ${BM_VSFTPD_TZ:+TZ="$BM_VSFTPD_TZ"} vsftpd "$dir/vsftpd.conf" > "$dir/server.log" 2>&1 &
	pid=$!
	BM_SERVERS="$BM_SERVERS vsftpd:$pid:$dir"
	wait_ftp "$port" || { cat "$dir/server.log" >&2; fail "vsftpd did not start"; }
	VSFTPD_PORT=$port
	VSFTPD_URL=ftp://127.0.0.1:$port/
	VSFTPD_DIR=$dir
	VSFTPD_LOG=$dir/vsftpd.log
	export VSFTPD_PORT VSFTPD_URL VSFTPD_DIR VSFTPD_LOG
	echo "# vsftpd pid $pid on $VSFTPD_URL serving $root"
}

# start_gridftp ROOT [NPORTS]: globus-gridftp-server in anonymous mode (-aa
# -anonymous-user nobody), loopback control and data interfaces, paths
# restricted to ROOT, data ports in a free range (GLOBUS_TCP_PORT_RANGE;
# NPORTS of them, default 1000: it binds without SO_REUSEADDR, so each
# passive data connection keeps its port in TIME_WAIT for a minute, and a
# client in stream mode needs one port per file),
# every command logged.  It offers MLSD.  Exports GRIDFTP_PORT,
# GRIDFTP_URL (ftp://127.0.0.1:PORT/%2FROOT/: RFC 1738 absolute path),
# GRIDFTP_LOG ('[CLIENT]: RETR /path' lines).  GRIDFTP_ARGS: more
# options (-dc-whitelist udt,gsi,tcp for the UDT tests).
start_gridftp() {
	local root=$1 nports=${2:-1000} port dir pid lo hi
	command -v globus-gridftp-server >/dev/null ||
	    fail "globus-gridftp-server is not installed (make deps)"
	[ "$(id -u)" = 0 ] && { runuser -u nobody -- test -r "$root" -a -x "$root" ||
	    fail "nobody cannot read $root"; }
	port=$(free_port)
	port_range "$nports"
	dir=$T/gridftp/$port
	mkdir -p "$dir" || fail "mkdir $dir"
	GLOBUS_TCP_PORT_RANGE=$lo,$hi globus-gridftp-server -aa \
	    -anonymous-user nobody -p "$port" -control-interface 127.0.0.1 \
	    -data-interface 127.0.0.1 -restrict-paths "$root" \
	    -log-level all -log-module stdio:buffer=0 -logfile "$dir/gridftp.log" \
	    ${GRIDFTP_ARGS:-} > "$dir/server.log" 2>&1 &
	pid=$!
	BM_SERVERS="$BM_SERVERS gridftp:$pid:$dir"
	wait_ftp "$port" || { cat "$dir/server.log" >&2; fail "gridftp did not start"; }
	GRIDFTP_PORT=$port
	GRIDFTP_URL=ftp://127.0.0.1:$port/%2F${root#/}/
	GRIDFTP_LOG=$dir/gridftp.log
	export GRIDFTP_PORT GRIDFTP_URL GRIDFTP_LOG
	echo "# gridftp pid $pid on $GRIDFTP_URL"
}

# start_ftpfault ROOT MODE [OPTION...]: our own fault-injecting FTP server
# (tests/tools/ftpfaultserver.py, Debian's pyftpdlib) on ROOT.  Exports
# FTPFAULT_URL, FTPFAULT_STATS (JSON: retrs per path, rests,
# max_concurrent, busy).
start_ftpfault() {
	local root=$1 mode=$2 port dir pid lo hi
	shift 2
	# BM_FTPFAULT_PORT: the port of a server restarted (the same host).
	port=${BM_FTPFAULT_PORT:-$(free_port)}
	port_range 20
	dir=$T/ftpfault/$port${BM_FTPFAULT_PORT:+.$RANDOM}
	mkdir -p "$dir" || fail "mkdir $dir"
	FTPFAULT_STATS=$dir/stats.json
	/usr/bin/python3 "$BM_TOOLS/ftpfaultserver.py" --root "$root" \
	    --port "$port" --mode "$mode" --stats "$FTPFAULT_STATS" \
	    --pasv "$lo-$hi" "$@" > "$dir/server.log" 2>&1 &
	pid=$!
	BM_SERVERS="$BM_SERVERS ftpfault:$pid:$dir"
	wait_ftp "$port" || { cat "$dir/server.log" >&2; fail "ftpfaultserver did not start"; }
	FTPFAULT_URL=ftp://127.0.0.1:$port/
	FTPFAULT_PORT=$port
	export FTPFAULT_URL FTPFAULT_STATS FTPFAULT_PORT
	echo "# ftpfaultserver ($mode) pid $pid on $FTPFAULT_URL serving $root"
}

# ftpfault_stat EXPR: a value from the FTP fault server's statistics
# (a Python expression over the dict s, e.g. 's["rests"]').
ftpfault_stat() {
	python3 -c 'import json,sys; s = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' \
	    "$FTPFAULT_STATS" "$1"
}

# start_modeefault ROOT [OPTION...]: our own fault-injecting GridFTP
# server (tests/tools/modeefaultserver.py: MODE E over PORT, MLSD, FEAT
# with DCAU) on ROOT; OPTIONs go to it ("--fault PATH=cut",
# "--refuse-mode-e").  Exports MODEEFAULT_URL, MODEEFAULT_LOG,
# MODEEFAULT_STATS (JSON: retrs per path, faults fired per "PATH kind",
# data_conns, reused, intruders, mode_e, control connections).
start_modeefault() {
	local root=$1 port dir pid
	shift
	port=$(free_port)
	dir=$T/modeefault/$port
	mkdir -p "$dir" || fail "mkdir $dir"
	MODEEFAULT_STATS=$dir/stats.json
	MODEEFAULT_LOG=$dir/server.log
	/usr/bin/python3 "$BM_TOOLS/modeefaultserver.py" --root "$root" \
	    --port "$port" --stats "$MODEEFAULT_STATS" "$@" \
	    > "$MODEEFAULT_LOG" 2>&1 &
	pid=$!
	BM_SERVERS="$BM_SERVERS modeefault:$pid:$dir"
	wait_ftp "$port" || { cat "$MODEEFAULT_LOG" >&2; fail "modeefaultserver did not start"; }
	MODEEFAULT_URL=ftp://127.0.0.1:$port/
	export MODEEFAULT_URL MODEEFAULT_STATS MODEEFAULT_LOG
	echo "# modeefaultserver pid $pid on $MODEEFAULT_URL serving $root ($*)"
}

# modeefault_stat EXPR: a value from the MODE E fault server's statistics
# (a Python expression over the dict s, e.g. 's["retrs"]["a.bin"]').
modeefault_stat() {
	python3 -c 'import json,sys; s = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' \
	    "$MODEEFAULT_STATS" "$1"
}

# fault_stat KEY: a value from the fault server's statistics.
fault_stat() {
	python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' \
	    "$FAULT_STATS" "$1"
}

# bm_server_pids KIND PID DIR: the pids of one server (master and children).
bm_server_pids() {
	{
		kill -0 "$2" 2>/dev/null && echo "$2"
		pgrep -P "$2" 2>/dev/null
		pgrep -f -- "$3/" 2>/dev/null
	} | sort -un
}

# stop_servers: stop every server this test started and wait until each
# of their processes is gone (TERM, then KILL after ~5 s).  Safe to call
# more than once.
stop_servers() {
	local s kind pid dir pids p
	for s in $BM_SERVERS; do
		kind=${s%%:*}
		pid=${s#*:}
		dir=${pid#*:}
		pid=${pid%%:*}
		pids=$(bm_server_pids "$kind" "$pid" "$dir")
		[ -n "$pids" ] || continue
		kill -TERM "$pid" 2>/dev/null
		for _ in $(seq 1 50); do
			pids=$(for p in $pids; do kill -0 "$p" 2>/dev/null && echo "$p"; done)
			[ -z "$pids" ] && break
			sleep 0.1
		done
		if [ -n "$pids" ]; then
			echo "# $kind $pid did not stop: killing $pids" >&2
			# shellcheck disable=SC2086
			kill -KILL $pids 2>/dev/null
			sleep 0.2
		fi
		# Reap our own background child (nginx runs with daemon off).
		wait "$pid" 2>/dev/null
	done
	return 0
}

# bm_leftovers: print the pids of any server process of this test still
# running (nothing when all are gone).
bm_leftovers() {
	local s pid dir
	{
		for s in $BM_SERVERS; do
			pid=${s#*:}
			dir=${pid#*:}
			pid=${pid%%:*}
			kill -0 "$pid" 2>/dev/null && echo "$pid"
		done
		[ -n "${T:-}" ] && pgrep -f -- "$T/" 2>/dev/null
	} | sort -un
}

# make_tree DIR: the standard test tree (deterministic): 3 levels of nested
# directories, empty directories, zero-byte files, names with spaces, '%',
# '#', '+', UTF-8 and one of 80+ characters, 60+ files from 1 B to 300 KB,
# each with its own past mtime (whole seconds); directory mtimes are set too.
make_tree() {
	mkdir -p "$1" || fail "make_tree: mkdir $1"
	python3 - "$1" <<'EOF' || fail "make_tree $1"
import os, random, sys

root = sys.argv[1]
rng = random.Random(20240607)
sizes = [1, 2, 3, 17, 100, 511, 512, 1000, 1023, 1024, 1025, 4095, 4096,
         4097, 8192, 10000, 16383, 16384, 65535, 65536, 65537, 100000,
         131072, 200000, 262144, 307200]
files = [
    ("README.txt", 1200),
    ("zero.dat", 0),
    ("with space.txt", 333),
    ("percent%20literal.txt", 44),
    ("100%.txt", 100),
    ("hash#tag.txt", 55),
    ("plus+sign.txt", 66),
    ("a+b c%d#e.bin", 777),
    ("caf\u00e9 \u00fcn\u00efcode.txt", 888),
    ("\u65e5\u672c\u8a9e/\u30c7\u30fc\u30bf.txt", 999),
    ("long-" + "n" * 80 + "-name.fasta", 2048),
    ("a/zero-in-a", 0),
    ("a/b/zero-in-b", 0),
    ("a/b/c/deep.txt", 4321),
    ("a/b/c/deep zero", 0),
    ("a/b/c/d e/deepest.bin", 12345),
    ("dir with space/file with space.dat", 5000),
    ("dir with space/sub%dir/x#y+z.txt", 4500),
]
for i, sz in enumerate(sizes):
    files.append(("data/file%02d.bin" % i, sz))
for i in range(12):
    files.append(("a/b/seq%02d.fa" % i, sizes[(i * 7) % len(sizes)]))
for i in range(8):
    files.append(("a/b/c/vol.%02d.tar.gz" % i, sizes[(i * 5 + 3) % len(sizes)]))
empty_dirs = ["empty", "a/empty", "a/b/c/empty3", "dir with space/empty too"]

base = 1600000000          # 2020-09-13
dirs = set()
for n, (rel, size) in enumerate(files):
    path = os.path.join(root, rel)
    d = os.path.dirname(rel)
    while d:
        dirs.add(d)
        d = os.path.dirname(d)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if n % 3 == 0:          # text
        alpha = b"ACGT\n" if n % 2 else b"abcdefghij klmnopqrstuvwxyz\n"
        data = bytes(alpha[b % len(alpha)] for b in rng.randbytes(size))
    else:
        data = rng.randbytes(size)
    with open(path, "wb") as f:
        f.write(data)
    t = base + n * 86400 * 3 + n * 3607 + (n * 13) % 59
    os.utime(path, (t, t))
for d in empty_dirs:
    os.makedirs(os.path.join(root, d), exist_ok=True)
    dirs.add(d)
# Directories last, deepest first, so that nothing touches them afterwards.
for n, d in enumerate(sorted(dirs, key=lambda x: (-x.count("/"), x))):
    t = base - 86400 * (n + 1) - n * 7
    os.utime(os.path.join(root, d), (t, t))
EOF
}

# make_big_file PATH MB [SEED]: a file of MB MiB of deterministic
# pseudo-random bytes (AES-CTR keystream of the seed), mtime 2021-01-02.
make_big_file() {
	local seed=${3:-biomirror}
	local key
	key=$(printf '%s' "$seed" | sha256sum | cut -c1-32)
	mkdir -p "$(dirname "$1")"
	head -c "$(($2 * 1048576))" /dev/zero |
	    openssl enc -aes-128-ctr -K "$key" -iv 00000000000000000000000000000000 \
	    -nosalt > "$1" || fail "make_big_file $1"
	[ "$(stat -c %s "$1")" -eq "$(($2 * 1048576))" ] || fail "make_big_file: short $1"
	touch -d '2021-01-02 03:04:05 UTC' "$1"
}

# assert_eq GOT WANT MSG
assert_eq() {
	[ "$1" = "$2" ] || fail "${3:-values differ}: got '$1', want '$2'"
}

# bm_tree_list DIR: one line per entry: type, for files size and mtime in
# whole seconds, for symlinks the target, then the path.  Sorted.
bm_tree_list() {
	(cd "$1" && find . -mindepth 1 \
	    \( -type f -printf 'f %s %T@ %P\n' \) -o \
	    \( -type l -printf 'l %P -> %l\n' \) -o -printf '%y %P\n') |
	    sed 's/^\(f [0-9]* -\{0,1\}[0-9]*\)\.[0-9]* /\1 /' | LC_ALL=C sort
}

# assert_trees_equal A B: same entries (dirs, including empty ones, files,
# symlinks), same bytes in every file, same mtime to the second for every
# file.  Ignores nothing.
assert_trees_equal() {
	local a=$1 b=$2 f n=0
	[ -d "$a" ] || fail "assert_trees_equal: no directory $a"
	[ -d "$b" ] || fail "assert_trees_equal: no directory $b"
	bm_tree_list "$a" > "$T/tree.a"
	bm_tree_list "$b" > "$T/tree.b"
	if ! diff -u "$T/tree.a" "$T/tree.b" > "$T/tree.diff"; then
		cat "$T/tree.diff" >&2
		fail "trees differ (entries, sizes or mtimes): $a $b"
	fi
	diff -r --no-dereference "$a" "$b" >&2 || fail "diff -r $a $b"
	while IFS= read -r -d '' f; do
		cmp -s -- "$a/$f" "$b/$f" || fail "content differs: $f"
		[ "$(stat -c %Y -- "$a/$f")" = "$(stat -c %Y -- "$b/$f")" ] ||
		    fail "mtime differs: $f"
		n=$((n + 1))
	done < <(cd "$a" && find . -type f -printf '%P\0')
	echo "# trees equal: $a $b ($n files)"
}

# assert_exit WANT CMD...: run CMD; its stdout goes to $T/last.out and its
# stderr to $T/last.err (both also copied to the test's log); LAST_RC is its
# exit status.  Fails unless LAST_RC is WANT.
assert_exit() {
	local want=$1
	shift
	LAST_OUT=$T/last.out
	LAST_ERR=$T/last.err
	echo "+ $*"
	"$@" > "$LAST_OUT" 2> "$LAST_ERR"
	LAST_RC=$?
	cat "$LAST_OUT"
	sed 's/^/  stderr: /' "$LAST_ERR"
	[ "$LAST_RC" = "$want" ] ||
	    fail "exit $LAST_RC, want $want: $*"
	return 0
}

# manifest_db STATE_DIR NAME: the path of mirror NAME's manifest.
manifest_db() {
	printf '%s/manifests/%s.db\n' "$1" "$2"
}

# manifest_sql STATE_DIR NAME SQL: run SQL on the manifest (read-only).
manifest_sql() {
	local db
	db=$(manifest_db "$1" "$2")
	[ -f "$db" ] || fail "no manifest $db"
	sqlite3 -batch -noheader -readonly "$db" "$3"
}
