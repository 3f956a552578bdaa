#!/bin/bash
# tests/bench/wan.sh: on-demand benchmark of biomirror against the usual
# long-distance transfer tools through an emulated wide-area link
# (tests/bench/wan/netns.sh: two network namespaces joined by netem or by
# the wanlink TUN forwarder).  Never part of `make check`.  Run as root on
# an otherwise idle machine:
#
#	tests/bench/wan.sh --deps          # install the Debian packages, exit
#	tests/bench/wan.sh --quick         # RTT 10,100,270 ms, 0.1% loss, cubic
#	tests/bench/wan.sh                 # the full matrix (many hours)
#	tests/bench/wan.sh --rtt 100 --loss 0.1 --cc cubic --datasets 1g \
#	    --tools biomirror,curl,aria2c
#	tests/bench/wan.sh --tls --rtt 100 --loss 0 --datasets 2000x100k \
#	    --runs 3                      # HTTP over TLS, nginx offers h2
#
# Servers run in the server namespace (10.77.0.2): nginx (HTTP: biomirror,
# curl, aria2c, rclone), vsftpd (FTP: lftp), globus-gridftp-server
# (globus-url-copy, biomirror-gridftp-*; its UDT driver whitelisted, -dc-
# whitelist udt,gsi,tcp) and an rsync daemon, each started with tests/bench/
# tcpcc.so so that their TCP sockets use the profile's congestion control
# (they are the senders).  The clients run in the client namespace
# (10.77.0.1).  Each cell is one tool fetching one dataset into an empty
# directory; it ends when the tool exits or after --cap seconds (60), when
# the tool is killed and the bytes on disk are counted.  Throughput is
# bytes / seconds in MB/s (10^6 bytes), the ratio is against `curl`, one
# TCP connection, in the same profile and dataset.  With --runs N every
# cell runs N times and the table shows the median (the CSV has each run).
# CPU: the client of each cell runs in a cgroup of its own and the servers
# in another (cgroup v2 cpu.stat, else v1 cpuacct), so every cell also
# records the CPU seconds each end spent, per GB delivered (a table per
# profile: TCP rows against the UDT rows, the server's libudt included),
# the wanlink forwarder's CPU, the machine's busy share and load average;
# the UDT rows also log UDT::perfmon of both ends (tests/bench/udtperf.cpp).
# With --tls the HTTP tools fetch over HTTPS from the same nginx, which
# offers HTTP/2 by ALPN (a certificate made for the run; each tool is
# given it as its CA), as a public server with h2 would.
#
# Output: a table per (congestion control, loss, dataset) on stdout, every
# cell in tests/bench/out/wan-STAMP.csv and one PNG per table
# (tests/bench/out/wan-STAMP-*.png, gnuplot: MB/s against RTT per tool).
# See tests/bench/README.md and docs/performance.md.

set -u
export LC_ALL=C

usage() {
	cat <<'EOF'
usage: tests/bench/wan.sh [options]
  --quick            RTT 10,100,270 ms x loss 0.1% x cubic, dataset 1g,
                     cap 25 s per cell: about 12 minutes
  --rtt LIST         RTTs in ms (default 10,25,40,65,100,200,270)
  --loss LIST        loss in percent, server->client (default 0,0.1,1)
  --cc LIST          sender congestion control (default cubic,bbr)
  --datasets LIST    1g (1 x 1 GiB), 50x20m (50 x 20 MiB),
                     2000x100k (2,000 x 100 KiB) (default all three);
                     1x8m (1 x 8 MiB) for a smoke run
  --tools LIST       biomirror,biomirror-1s,biomirror-auto,biomirror-gridftp-e,
                     biomirror-gridftp-udt,curl,aria2c,lftp,rclone,
                     globus-url-copy,rsync (default all;
                     biomirror-gridftp-e: FTP from the gridftp server with
                     --ftp-mode extended, MODE E over TCP;
                     biomirror-gridftp-udt: the same over UDT, one row per
                     --udt-streams count, named biomirror-gridftp-udt-pN);
                     curl is always run too, for the ratio column
  --udt-streams LIST streams per file of the UDT rows (default 1,4,8)
  --rmem-max BYTES   raise net.core.rmem_max and wmem_max (host-wide, not
                     per namespace) to BYTES for the run, restored at exit:
                     UDT's UDP buffers are capped by them (default: as
                     they are, and the report says so)
  --rate MBIT        bottleneck in Mbit/s (default 500)
  --cap SECONDS      per-cell time limit (default 60)
  --runs N           runs per cell; tables show the median and every
                     run's figure (default 1); the tools of a cell run
                     in rounds, alternately
  --target-runs N    N runs instead at the profiles of issue 20's target:
                     loss > 0 and RTT >= --target-rtt (default 65 ms)
  --tls              HTTP tools over HTTPS; nginx offers h2 by ALPN
  --dir DIR          datasets and destinations (default /tmp; about 2.2 GB
                     plus the largest dataset)
  --backend B        netem or wanlink (default: netem if the kernel has it)
  --deps             install the Debian packages this needs, then exit
  --no-install       never apt-get install missing tools
  --keep             keep the work directory at exit
EOF
}

RTTS=10,25,40,65,100,200,270 LOSSES=0,0.1,1 CCS=cubic,bbr
DATASETS=1g,50x20m,2000x100k
ALL_TOOLS=biomirror,biomirror-1s,biomirror-auto,biomirror-gridftp-e,biomirror-gridftp-udt,curl,aria2c,lftp,rclone,globus-url-copy,rsync
TOOLS=$ALL_TOOLS RATE=500 CAP=60 DIR=/tmp INSTALL=1 KEEP=0 DEPS_ONLY=0
UDT_STREAMS=1,4,8 RMEM_MAX=
QUICK=0 CAP_SET=0 DS_SET=0 RUNS=1 TLS=0 TARGET_RUNS="" TARGET_RTT=65
while [ $# -gt 0 ]; do
	case $1 in
	--quick) QUICK=1 ;;
	--rtt) RTTS=${2:?--rtt LIST}; shift ;;
	--loss) LOSSES=${2:?--loss LIST}; shift ;;
	--cc) CCS=${2:?--cc LIST}; shift ;;
	--datasets) DATASETS=${2:?--datasets LIST}; DS_SET=1; shift ;;
	--tools) TOOLS=${2:?--tools LIST}; shift ;;
	--udt-streams) UDT_STREAMS=${2:?--udt-streams LIST}; shift ;;
	--rmem-max) RMEM_MAX=${2:?--rmem-max BYTES}; shift ;;
	--rate) RATE=${2:?--rate MBIT}; shift ;;
	--cap) CAP=${2:?--cap SECONDS}; CAP_SET=1; shift ;;
	--runs) RUNS=${2:?--runs N}; shift ;;
	--target-runs) TARGET_RUNS=${2:?--target-runs N}; shift ;;
	--target-rtt) TARGET_RTT=${2:?--target-rtt MS}; shift ;;
	--tls) TLS=1 ;;
	--dir) DIR=${2:?--dir DIR}; shift ;;
	--backend) WAN_BACKEND=${2:?--backend B}; shift ;;
	--deps) DEPS_ONLY=1 ;;
	--no-install) INSTALL=0 ;;
	--keep) KEEP=1 ;;
	-h|--help) usage; exit 0 ;;
	*) echo "wan.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
	esac
	shift
done
if [ "$QUICK" = 1 ]; then
	RTTS=10,100,270 LOSSES=0.1 CCS=cubic
	[ "$DS_SET" = 1 ] || DATASETS=1g
	[ "$CAP_SET" = 1 ] || CAP=25
fi
case $CAP in ''|*[!0-9]*|0) echo "wan.sh: --cap needs seconds" >&2; exit 2 ;; esac
case $RUNS in ''|*[!0-9]*|0) echo "wan.sh: --runs needs a count" >&2; exit 2 ;; esac
case $TARGET_RUNS in *[!0-9]*|0) echo "wan.sh: --target-runs needs a count" >&2; exit 2 ;; esac
case $TARGET_RTT in ''|*[!0-9]*) echo "wan.sh: --target-rtt needs ms" >&2; exit 2 ;; esac
case $RMEM_MAX in *[!0-9]*) echo "wan.sh: --rmem-max needs bytes" >&2; exit 2 ;; esac
case $RATE in ''|*[!0-9.]*) echo "wan.sh: --rate needs Mbit/s" >&2; exit 2 ;; esac
for t in ${TOOLS//,/ }; do
	case $t in biomirror-gridftp-udt-p[1-9]*) continue ;; esac
	case ",$ALL_TOOLS," in *",$t,"*) ;; *) echo "wan.sh: unknown tool $t" >&2; exit 2 ;; esac
done
case ",$TOOLS," in *,curl,*) ;; *) TOOLS=curl,$TOOLS ;; esac
# biomirror-gridftp-udt: one row per stream count.
for n in ${UDT_STREAMS//,/ }; do
	case $n in ''|*[!0-9]*|0) echo "wan.sh: --udt-streams needs counts" >&2; exit 2 ;; esac
	[ "$n" -le 64 ] || { echo "wan.sh: --udt-streams: at most 64" >&2; exit 2; }
	udt_rows=${udt_rows:+$udt_rows,}biomirror-gridftp-udt-p$n
done
TOOLS=$(echo ",$TOOLS," | sed "s/,biomirror-gridftp-udt,/,$udt_rows,/; s/^,//; s/,\$//")
for d in ${DATASETS//,/ }; do
	case $d in 1g|50x20m|2000x100k|1x8m) ;; *) echo "wan.sh: unknown dataset $d" >&2; exit 2 ;; esac
done
for c in ${CCS//,/ }; do
	grep -qw "$c" /proc/sys/net/ipv4/tcp_available_congestion_control ||
	    { echo "wan.sh: congestion control $c not available here" >&2; exit 2; }
done

ROOT=$(cd "$(dirname "$0")/../.." && pwd) || exit 2
cd "$ROOT" || exit 2
say() { printf '%s %s\n' "$(date -u +%H:%M:%S)" "$*"; }
fail() { echo "wan.sh: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || fail "run as root (namespaces, TUN, servers)"

# ---------------------------------------------------------------- deps
# command:package of what every run needs, of what only the selected
# client tools need, and of what a run can do without (plots; selfcheck).
DEPS="ip:iproute2 ping:iputils-ping cc:build-essential
    nginx:nginx-light vsftpd:vsftpd rsync:rsync curl:curl openssl:openssl
    globus-gridftp-server:globus-gridftp-server-progs"
TOOL_DEPS="aria2c:aria2 lftp:lftp rclone:rclone
    globus-url-copy:globus-gass-copy-progs"
WANT_DEPS="iperf3:iperf3 gnuplot:gnuplot-nox"
need="" want=""
has() { PATH=$PATH:/usr/sbin command -v "$1" >/dev/null; }
for d in $DEPS; do has "${d%%:*}" || need="$need ${d#*:}"; done
for d in $TOOL_DEPS; do
	# A client only its own tool runs (all of them with --deps).
	[ "$DEPS_ONLY" = 1 ] || case ",$TOOLS," in *",${d%%:*},"*) ;; *) continue ;; esac
	has "${d%%:*}" || need="$need ${d#*:}"
done
for d in $WANT_DEPS; do
	has "${d%%:*}" && continue
	if [ "$INSTALL" = 1 ]; then need="$need ${d#*:}"; else want="$want ${d#*:}"; fi
done
[ -z "$want" ] || echo "wan.sh: without$want (no plots, no selfcheck); --deps installs them" >&2
# The gridftp server's UDT driver (only a Recommends of the server).
if [ "$DEPS_ONLY" = 1 ] || case ",$TOOLS," in *,biomirror-gridftp-udt-*) true ;; *) false ;; esac; then
	ls /usr/lib/*/libglobus_xio_udt_driver.so* >/dev/null 2>&1 ||
	    need="$need libglobus-xio-udt-driver"
fi
if [ "$DEPS_ONLY" = 1 ] && [ -z "$need" ]; then
	echo "wan.sh: all packages present"
	exit 0
fi
if [ -n "$need" ]; then
	[ "$INSTALL" = 1 ] || fail "missing:$need"
	say "installing:$need"
	# shellcheck disable=SC2086
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $need >/dev/null ||
	    { apt-get update -q >/dev/null &&
	      DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $need >/dev/null; } ||
	    fail "apt-get install$need"
	[ "$DEPS_ONLY" = 1 ] && exit 0
fi
[ -x ./biomirror ] || { say "building ./biomirror"; make >/dev/null || fail "make"; }

# ---------------------------------------------------------------- work dir
umask 022
mkdir -p "$DIR" || fail "mkdir $DIR"
T=$(mktemp -d "$DIR/bmwan.XXXXXX") || fail "mktemp in $DIR"
chmod 0755 "$T"
DATA=$T/data
mkdir -p "$DATA" "$T/logs" "$T/run" "$T/dest" "$T/plot"
OUTDIR=$ROOT/tests/bench/out
mkdir -p "$OUTDIR"
STAMP=$(date -u +%Y-%m-%dT%H%M%SZ)
CSV=$OUTDIR/wan-$STAMP.csv
WAN_BIN=$T/bin
WAN_LOG=$T/logs/wanlink.log
SCHEME=http
if [ "$TLS" = 1 ]; then
	SCHEME=https
	openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=10.77.0.2 \
	    -addext "subjectAltName=IP:10.77.0.2" -keyout "$T/run/key.pem" \
	    -out "$T/run/cert.pem" 2>/dev/null || fail "openssl req"
	chmod 0644 "$T/run/key.pem" "$T/run/cert.pem"
fi
CERT=$T/run/cert.pem
BM_INFO="$(./biomirror --version 2>&1 | head -n 1), sha256 $(sha256sum < ./biomirror | cut -c1-12)"
cp ./biomirror "$T/biomirror" || fail "cp biomirror"
# The modules are looked for beside the binary (agent/xfer/module.c).
for m in libbiomirror-udt.so libbiomirror-curl.so; do
	[ ! -f "./$m" ] || cp "./$m" "$T/" || fail "cp $m"
done
BM=$T/biomirror
unset http_proxy https_proxy ftp_proxy all_proxy \
    HTTP_PROXY HTTPS_PROXY FTP_PROXY ALL_PROXY
export no_proxy='*' NO_PROXY='*'

# shellcheck source=tests/bench/wan/netns.sh
. "$ROOT/tests/bench/wan/netns.sh"

# ---------------------------------------------------------------- CPU
# Two cgroups, the client cell's and the servers', whose CPU time
# (children that exited included) each cell reads before and after:
# cgroup v2 cpu.stat usage_usec, else v1 cpuacct.usage (ns).  None
# writable: the CPU columns stay empty.
CG_KIND="" CG_CLI="" CG_SRV=""
for cg_root in /sys/fs/cgroup /sys/fs/cgroup/unified; do
	[ -e "$cg_root/cgroup.procs" ] && [ -e "$cg_root/cgroup.subtree_control" ] || continue
	mkdir "$cg_root/bmwan-$$-cli" "$cg_root/bmwan-$$-srv" 2>/dev/null || continue
	if [ -e "$cg_root/bmwan-$$-cli/cpu.stat" ]; then
		CG_KIND=v2 CG_CLI=$cg_root/bmwan-$$-cli CG_SRV=$cg_root/bmwan-$$-srv
		break
	fi
	rmdir "$cg_root/bmwan-$$-cli" "$cg_root/bmwan-$$-srv"
done
if [ -z "$CG_KIND" ] && [ -e /sys/fs/cgroup/cpuacct/cpuacct.usage ] &&
    mkdir /sys/fs/cgroup/cpuacct/bmwan-$$-cli /sys/fs/cgroup/cpuacct/bmwan-$$-srv 2>/dev/null; then
	CG_KIND=v1 CG_CLI=/sys/fs/cgroup/cpuacct/bmwan-$$-cli CG_SRV=/sys/fs/cgroup/cpuacct/bmwan-$$-srv
fi
# cg_enter CG: move this shell (and so what it starts) into CG.
cg_enter() { [ -z "$1" ] || echo "$BASHPID" > "$1/cgroup.procs"; }
# cg_us CG: the CPU time of CG so far, microseconds ("" without
# cgroups).  Never printf %d: mawk clamps it at 2^31 - 1, and the ns (v1)
# or the us*1000 of a cgroup pass that after 2.1 s of CPU (every later
# cell then read 0.00).
cg_us() {
	case $CG_KIND in
	v2) awk '$1 == "usage_usec" { print $2 }' "$1/cpu.stat" ;;
	v1) awk '{ printf "%.0f", $1 / 1000 }' "$1/cpuacct.usage" ;;
	esac
}
# pid_cpu_ticks PID: utime + stime of PID (all its threads), clock ticks.
pid_cpu_ticks() {
	[ -n "$1" ] && sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null |
	    awk '{ print $12 + $13 }'
}
CLK_TCK=$(getconf CLK_TCK)
# cpu_busy: busy and total jiffies of the whole machine (/proc/stat).
cpu_busy() {
	awk '$1 == "cpu" { t = 0; for (i = 2; i <= 9; i++) t += $i
	    printf "%.0f %.0f", t - $5 - $6, t; exit }' /proc/stat
}
cg_fini() {
	local g
	for g in "$CG_CLI" "$CG_SRV"; do
		[ -n "$g" ] && [ -d "$g" ] || continue
		# Anything left (servers not yet reaped) goes back to the root.
		while read -r p; do echo "$p" > "$(dirname "$g")/cgroup.procs"; done < "$g/cgroup.procs" 2>/dev/null
		rmdir "$g" 2>/dev/null
	done
}

bench_cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	[ -n "${CELL_PID:-}" ] && kill -KILL -- "-$CELL_PID" 2>/dev/null
	wan_fini
	cg_fini
	if [ -n "${RMEM_OLD:-}" ]; then
		sysctl -q -w net.core.rmem_max="${RMEM_OLD% *}" net.core.wmem_max="${RMEM_OLD#* }"
	fi
	if [ "$KEEP" = 1 ]; then
		echo "# kept $T" >&2
	elif [ -d "$T" ]; then
		rm -rf -- "$T"
	fi
	exit "$rc"
}
trap bench_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---------------------------------------------------------------- datasets
# keystream N_BYTES SEED: deterministic incompressible bytes on stdout.
keystream() {
	openssl enc -aes-128-ctr -nosalt -pass "pass:bmwan-$2" -pbkdf2 \
	    < /dev/zero 2>/dev/null | head -c "$1"
}
ds_dir() { echo "$DATA/$1"; }
ds_desc() {
	case $1 in
	1g) echo "1 x 1 GiB" ;;
	1x8m) echo "1 x 8 MiB" ;;
	50x20m) echo "50 x 20 MiB" ;;
	2000x100k) echo "2,000 x 100 KiB in 20 directories" ;;
	esac
}
gen_dataset() {
	local d i
	d=$(ds_dir "$1")
	mkdir -p "$d"
	case $1 in
	1g) keystream 1073741824 1g > "$d/file.bin" ;;
	1x8m) keystream 8388608 8m > "$d/file.bin" ;;
	50x20m) keystream $((50 * 20971520)) 20m |
	    (cd "$d" && split -b 20971520 -a 2 -d --additional-suffix=.bin - f) ;;
	2000x100k)
		keystream $((2000 * 102400)) 100k |
		    (cd "$d" && split -b 102400 -a 4 -d --additional-suffix=.bin - f)
		for i in $(seq -w 0 19); do
			mkdir "$d/d$i"
			mv "$d"/f"$i"??.bin "$d/d$i/"
		done ;;
	esac
	find "$d" -type f -exec touch -d '2024-01-02 03:04:05 UTC' {} +
	chmod -R a+rX "$d"
	(cd "$d" && find . -type f -printf '%P\n' | sort) > "$T/run/list-$1"
	DS_BYTES[$1]=$(find "$d" -type f -printf '%s\n' | awk '{ s += $1 } END { printf "%.0f", s }')
	DS_FILES[$1]=$(wc -l < "$T/run/list-$1")
}
declare -A DS_BYTES DS_FILES
avail_kb=$(df -Pk "$T" | awk 'NR == 2 { print $4 }')
[ "$avail_kb" -ge $((5 * 1024 * 1024)) ] || fail "$T: need 5 GiB free"
for ds in ${DATASETS//,/ }; do
	say "generating dataset $ds ($(ds_desc "$ds"))"
	gen_dataset "$ds"
done

# ---------------------------------------------------------------- servers
SIP=10.77.0.2
start_servers() {	# start_servers CC
	local cc=$1 s=$T/srv
	rm -rf "$s"; mkdir -p "$s/nginx/tmp" "$s/empty"
	local TLS_CONF=""
	[ "$TLS" = 1 ] && TLS_CONF="        listen 443 ssl http2;
        ssl_certificate $T/run/cert.pem;
        ssl_certificate_key $T/run/key.pem;
"
	cat > "$s/nginx/nginx.conf" <<EOF
daemon off;
master_process on;
worker_processes 2;
user www-data;
pid $s/nginx/nginx.pid;
error_log $s/nginx/error.log warn;
events { worker_connections 1024; }
http {
    include /etc/nginx/mime.types;
    default_type application/octet-stream;
    access_log off;
    client_body_temp_path $s/nginx/tmp/body;
    proxy_temp_path $s/nginx/tmp/proxy;
    fastcgi_temp_path $s/nginx/tmp/fastcgi;
    uwsgi_temp_path $s/nginx/tmp/uwsgi;
    scgi_temp_path $s/nginx/tmp/scgi;
    sendfile on;
    keepalive_timeout 65;
    keepalive_requests 100000;
    server {
        listen 80;
$TLS_CONF        location / { root $DATA; autoindex on; autoindex_exact_size on; }
    }
}
EOF
	cat > "$s/vsftpd.conf" <<EOF
listen=YES
listen_ipv6=NO
background=NO
anonymous_enable=YES
local_enable=NO
write_enable=NO
no_anon_password=YES
anon_root=$DATA
ftp_username=ftp
secure_chroot_dir=$s/empty
pasv_enable=YES
pasv_min_port=40000
pasv_max_port=40999
max_clients=500
max_per_ip=500
seccomp_sandbox=NO
xferlog_enable=NO
use_sendfile=YES
EOF
	cat > "$s/rsyncd.conf" <<EOF
use chroot = no
uid = nobody
gid = nogroup
max connections = 100
pid file = $s/rsyncd.pid
[data]
    path = $DATA
    read only = yes
EOF
	# In a subshell: the servers' cgroup and environment stay theirs.
	(
	cg_enter "$CG_SRV"
	export BM_TCP_CC=$cc LD_PRELOAD=$WAN_BIN/tcpcc.so \
	    BM_TCP_CC_LOG=$T/logs/tcpcc.log
	in_s /usr/sbin/nginx -p "$s/nginx" -e "$s/nginx/error.log" \
	    -c "$s/nginx/nginx.conf" > "$T/logs/nginx.log" 2>&1 &
	in_s /usr/sbin/vsftpd "$s/vsftpd.conf" > "$T/logs/vsftpd.log" 2>&1 &
	in_s rsync --daemon --no-detach --config="$s/rsyncd.conf" \
	    > "$T/logs/rsyncd.log" 2>&1 &
	# Its UDT sockets' perfmon too (tests/bench/udtperf.cpp, per cell).
	local perf=""
	[ -e "$WAN_BIN/udtperf.so" ] && perf=:$WAN_BIN/udtperf.so
	in_s env "LD_PRELOAD=$LD_PRELOAD$perf" "BM_UDT_PERF_LOG=$T/logs/udtperf-srv.log" \
	    globus-gridftp-server -p 2811 -aa -anonymous-user nobody \
	    -anonymous-group nogroup -home-dir / -d error \
	    -dc-whitelist udt,gsi,tcp \
	    -l "$T/logs/gridftp.log" > "$T/logs/gridftp.out" 2>&1 &
	)
	local port up
	local ports="80 21 873 2811"
	[ "$TLS" = 1 ] && ports="$ports 443"
	for port in $ports; do
		up=0
		for _ in $(seq 100); do
			in_s ss -ltnH "sport = :$port" | grep -q . && { up=1; break; }
			sleep 0.1
		done
		[ "$up" = 1 ] || fail "no server on port $port (logs in $T/logs; --keep)"
	done
}
stop_servers() { wan_kill_ns "$WAN_S"; }

# ---------------------------------------------------------------- tools
# tool_cmd TOOL DATASET DEST: the client command, one word per line.
tool_cmd() {
	local tool=$1 ds=$2 dest=$3 f
	local url=$SCHEME://$SIP/$ds/
	local -a ca=() cacurl=() caaria=() carclone=()
	if [ "$TLS" = 1 ]; then
		ca=(--ca-file "$CERT") cacurl=(--cacert "$CERT")
		caaria=(--ca-certificate="$CERT") carclone=(--ca-cert "$CERT")
	fi
	case $tool in
	biomirror)
		printf '%s\n' "$BM" --state-dir "$dest.state" sync \
		    --source "$url" --dest "$dest" "${ca[@]}" ;;
	biomirror-1s)
		printf '%s\n' "$BM" --state-dir "$dest.state" sync \
		    --source "$url" --dest "$dest" --streams 1 "${ca[@]}" ;;
	biomirror-auto)
		printf '%s\n' "$BM" --state-dir "$dest.state" sync \
		    --source "$url" --dest "$dest" --streams auto \
		    --concurrency auto "${ca[@]}" ;;
	curl)
		[ -e "$T/run/list-$ds" ] && while read -r f; do
			printf 'url = "%s%s"\noutput = "%s/%s"\n' "$url" "$f" "$dest" "$f"
		done < "$T/run/list-$ds" > "$dest.curlrc"
		printf '%s\n' curl -sS --fail --create-dirs "${cacurl[@]}" \
		    -K "$dest.curlrc" ;;
	aria2c)
		[ -e "$T/run/list-$ds" ] && while read -r f; do
			printf '%s%s\n  out=%s\n' "$url" "$f" "$f"
		done < "$T/run/list-$ds" > "$dest.aria2"
		printf '%s\n' aria2c -x 8 -s 8 -j 8 -q --file-allocation=none \
		    --allow-overwrite=true --auto-file-renaming=false \
		    "${caaria[@]}" -d "$dest" -i "$dest.aria2" ;;
	lftp)
		printf '%s\n' lftp -c "set net:max-retries 2; set xfer:clobber on; mirror --parallel=8 --use-pget-n=8 ftp://$SIP/$ds $dest" ;;
	rclone)
		printf '%s\n' rclone --config /dev/null copy --http-url "$url" \
		    :http: "$dest" --transfers 8 --multi-thread-streams 8 \
		    "${carclone[@]}" ;;
	biomirror-gridftp-e)
		# The gridftp server, in its extended block mode (MODE E).
		printf '%s\n' "$BM" --state-dir "$dest.state" sync \
		    --max-connections 8 --ftp-mode extended \
		    --source "ftp://$SIP:2811$DATA/$ds/" --dest "$dest" ;;
	biomirror-gridftp-udt-p*)
		# The same over UDT data connections, N streams per file;
		# a row named biomirror-gridftp-udt-pN-bSIZE (in --tools) sets
		# --udt-buffer SIZE (38400000: the sizing before h20e), one
		# named ...-pN-cFILES --concurrency FILES (16: a second file
		# per session, its RETR pipelined; the default 8 is one).
		n=${tool#biomirror-gridftp-udt-p} ub= cc=
		case $n in *-c*) cc=${n#*-c} n=${n%%-c*} ;; esac
		case $n in *-b*) ub=${n#*-b} n=${n%%-b*} ;; esac
		printf '%s\n' "$BM" --state-dir "$dest.state" sync \
		    --max-connections 8 --ftp-mode extended --transport udt \
		    --streams "$n" ${ub:+--udt-buffer "$ub"} ${cc:+--concurrency "$cc"} \
		    --source "ftp://$SIP:2811$DATA/$ds/" --dest "$dest" ;;
	globus-url-copy)
		printf '%s\n' globus-url-copy -r -cd -p 8 -cc 4 -fast \
		    "ftp://$SIP:2811$DATA/$ds/" "file://$dest/" ;;
	rsync)
		printf '%s\n' rsync -a "rsync://$SIP/data/$ds/" "$dest/" ;;
	esac
}
tool_version() {
	case $1 in
	biomirror*) echo "$BM_INFO" ;;
	curl) curl --version | head -n 1 | cut -d' ' -f1-2 ;;
	aria2c) aria2c --version | head -n 1 ;;
	lftp) lftp --version | head -n 1 | sed 's/ | Version / /; s/ |.*//' ;;
	rclone) rclone version 2>/dev/null | head -n 1 ;;
	globus-url-copy) globus-url-copy -version 2>&1 | head -n 1 ;;
	rsync) rsync --version | head -n 1 | cut -d' ' -f1-4 ;;
	esac
}

# ---------------------------------------------------------------- one cell
# sender_cc: the congestion control algorithms that `ss -ti` shows on the
# server's established connections, e.g. "cubic" or "bbr+cubic".
sender_cc() {
	in_s ss -tinH state established 2>/dev/null |
	    grep -oE '(^|[[:space:]])(cubic|bbr|reno|htcp|vegas|westwood|dctcp)([[:space:]]|$)' |
	    tr -d ' \t' | sort -u | paste -sd+ -
}

# disk_bytes DIR: bytes on disk under DIR, temp files included (allocated
# blocks, so that ranges written into sparse files count only what
# arrived; at most each file's apparent size).
disk_bytes() {
	find "$1" -type f -printf '%b %s\n' |
	    awk '{ a = $1 * 512; if (a > $2) a = $2; s += a } END { printf "%.0f", s }'
}

# rx_bytes: bytes the client's end of the link has received (headers too).
rx_bytes() {
	ip netns exec "$WAN_C" cat "/sys/class/net/$WAN_DEV/statistics/rx_bytes" \
	    2>/dev/null || echo 0
}

# got_bytes DEST RX0: bytes arrived so far: on disk under DEST, but never
# more than the payload the link delivered since RX0 (1448 of each
# 1500-byte frame: IPv4, TCP and its timestamps), since allocated blocks
# overcount a tool that preallocates its files (lftp pget, rclone's
# multi-thread streams).
got_bytes() {
	awk -v d="$(disk_bytes "$1")" -v a="$2" -v b="$(rx_bytes)" \
	    'BEGIN { p = (b - a) * 1448 / 1500; printf "%.0f", (p < d ? p : d) }'
}

# udt_perf_sum LOG: one line of UDT::perfmon figures (tests/bench/
# udtperf.cpp) over the "tick" samples of LOG (one a second per socket):
# sockets, and per socket-second means of the receive or send rate, the
# RTT, flow and congestion windows, sending period, available buffer,
# and the packets lost (receiver) or retransmitted (sender) in all.
udt_perf_sum() {
	[ -s "$1" ] || { echo "-"; return; }
	awk '{
		for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
		if (!(f["pid"] "/" f["u"] in seen)) { seen[f["pid"] "/" f["u"]] = 1; ns++ }
		if ($1 != "tick") next
		n++; rmb += f["recv_mbps"]; smb += f["send_mbps"]; rtt += f["rtt_ms"]
		fw += f["flow_win"]; cw += f["cwnd"]; per += f["snd_period_us"]
		rb += f["avail_rcvbuf"]; sb += f["avail_sndbuf"]; fl += f["flight"]
		rl += f["rcv_loss"]; sl += f["snd_loss"]; rt += f["retrans"]
		rp += f["recv"]; sp += f["sent"]; nak += f["sent_nak"]
	    }
	    END {
		if (n == 0) { printf "sockets=%d no-ticks", ns; exit }
		printf "sockets=%d samples=%d recv_mbps=%.0f send_mbps=%.0f rtt_ms=%.0f flow_win=%.0f cwnd=%.0f flight=%.0f snd_period_us=%.2f avail_rcvbuf_kb=%.0f avail_sndbuf_kb=%.0f pkts_recv=%d rcv_loss=%d naks=%d pkts_sent=%d snd_loss=%d retrans=%d",
		    ns, n, rmb / n, smb / n, rtt / n, fw / n, cw / n, fl / n, per / n,
		    rb / n / 1024, sb / n / 1024, rp, rl, nak, sp, sl, rt
	    }' "$1"
}

# wl_counters: packets in, lost and tail-dropped so far in the wanlink
# forwarder's server->client direction (its SIGUSR1 report); "" with
# netem.
wl_counters() {
	[ -n "$WAN_PID" ] || return 0
	local n
	n=$(grep -c 'b->a' "$WAN_LOG")
	kill -USR1 "$WAN_PID" 2>/dev/null || return 0
	for _ in 1 2 3 4 5 6 7 8 9 10; do
		[ "$(grep -c 'b->a' "$WAN_LOG")" -gt "$n" ] && break
		sleep 0.05
	done
	grep 'b->a' "$WAN_LOG" | tail -n 1 |
	    awk '{ for (i = 1; i < NF; i++) f[$i] = $(i + 1); print f["in"], f["loss"], f["taildrop"] }'
}

# udp_counters NS: the Udp InDatagrams, InErrors, RcvbufErrors and
# SndbufErrors of namespace NS (/proc/net/snmp).
udp_counters() {
	ip netns exec "$1" cat /proc/net/snmp 2>/dev/null | awk '$1 == "Udp:" {
	    if (!h) { for (i = 2; i <= NF; i++) c[$i] = i; h = 1; next }
	    print $c["InDatagrams"], $c["InErrors"], $c["RcvbufErrors"], $c["SndbufErrors"]; exit }'
}

# end_sessions: kill the gridftp server's session processes (children of
# the daemon the script started, in the servers' cgroup; comm is cut to
# 15 characters); true if there was one.
end_sessions() {
	local p pp any=1
	[ -n "$CG_SRV" ] || return 1
	while read -r p; do
		[ "$(cat "/proc/$p/comm" 2>/dev/null)" = globus-gridftp- ] || continue
		pp=$(awk '{ sub(/^.*\) /, ""); print $2 }' "/proc/$p/stat" 2>/dev/null)
		[ "$(cat "/proc/$pp/comm" 2>/dev/null)" = globus-gridftp- ] || continue
		kill -KILL "$p" 2>/dev/null && any=0
	done < "$CG_SRV/cgroup.procs"
	return "$any"
}

# run_cell TOOL DATASET: sets CELL_STATUS (ok, cap, error, incomplete),
# CELL_S (seconds), CELL_BYTES (bytes on disk), CELL_FILES, CELL_CC (the
# sender's congestion control seen by ss 1 s into the cell), CELL_LATE
# (MB/s over the second half of the cap: bytes from the sample at CAP/2
# to the end, when the cell lasted past it), CELL_CPU_C, CELL_CPU_S
# (CPU seconds of the client and of the servers, "" if not measured),
# CELL_CPU_W (of the wanlink forwarder: with TUN it also carries the
# kernel's receive path of both namespaces), CELL_BUSY (percent of all
# the machine's CPUs busy during the cell, every process counted), CELL_LOAD
# (1-minute load average at the start) and, for UDT rows, CELL_PERF_C
# and CELL_PERF_S (udt_perf_sum of the client's and the server's sockets),
# CELL_LINK (the forwarder's server->client packets: in, lost by the
# loss setting, tail-dropped at the bottleneck queue).
run_cell() {
	local tool=$1 ds=$2 dest=$T/dest/$1 t0 t1 rc=0 killed=0 log rx0
	local cc0 cs0 cw0 b0 wl0 uc0 us0 tmid="" bmid="" perf_c perf_s
	local -a cmd pre=()
	rm -rf -- "$dest" "$dest.state" "$dest".*
	mkdir -p "$dest"
	mapfile -t cmd < <(tool_cmd "$tool" "$ds" "$dest")
	log=$T/logs/cell-$tool.log
	perf_c=$T/logs/udtperf-cli.log perf_s=$T/logs/udtperf-srv.log
	rm -f "$perf_c" "$perf_s"
	# The server's session runs as nobody: its log must exist, writable.
	: > "$perf_s"; chmod 0666 "$perf_s"
	case $tool in biomirror-gridftp-udt-*)
		[ -e "$WAN_BIN/udtperf.so" ] &&
		    pre=(env "LD_PRELOAD=$WAN_BIN/udtperf.so" "BM_UDT_PERF_LOG=$perf_c") ;;
	esac
	printf '%q ' "${cmd[@]}" > "$log"; echo >> "$log"
	sync
	CELL_LOAD=$(cut -d' ' -f1 /proc/loadavg)
	rx0=$(rx_bytes)
	cc0=$(cg_us "$CG_CLI") cs0=$(cg_us "$CG_SRV") cw0=$(pid_cpu_ticks "$WAN_PID")
	b0=$(cpu_busy) wl0=$(wl_counters) uc0=$(udp_counters "$WAN_C") us0=$(udp_counters "$WAN_S")
	t0=$(date +%s.%N)
	# The client joins its cgroup before it execs (cg_enter).
	setsid bash -c '[ -z "$1" ] || echo $$ > "$1/cgroup.procs"; shift; exec "$@"' \
	    cell "$CG_CLI" ip netns exec "$WAN_C" "${pre[@]}" "${cmd[@]}" >> "$log" 2>&1 < /dev/null &
	CELL_PID=$!
	CELL_CC=""
	while kill -0 "$CELL_PID" 2>/dev/null; do
		t1=$(date +%s.%N)
		if [ -z "$CELL_CC" ] &&
		    awk -v a="$t0" -v b="$t1" 'BEGIN { exit !(b - a >= 1) }'; then
			CELL_CC=$(sender_cc)
			CELL_CC=${CELL_CC:--}
		fi
		if [ -z "$tmid" ] &&
		    awk -v a="$t0" -v b="$t1" -v c="$CAP" 'BEGIN { exit !(b - a >= c / 2) }'; then
			bmid=$(got_bytes "$dest" "$rx0")
			tmid=$(date +%s.%N)
		fi
		if awk -v a="$t0" -v b="$t1" -v c="$CAP" 'BEGIN { exit !(b - a >= c) }'; then
			# Count before the kill: a tool may remove its
			# partial files when it is stopped (biomirror does).
			CELL_BYTES=$(got_bytes "$dest" "$rx0")
			t1=$(date +%s.%N)
			CELL_FILES=$(find "$dest" -type f | wc -l)
			kill -TERM -- "-$CELL_PID" 2>/dev/null
			killed=1
			sleep 1
			kill -KILL -- "-$CELL_PID" 2>/dev/null
			break
		fi
		sleep 0.1
	done
	wait "$CELL_PID"
	rc=$?
	[ "$killed" = 1 ] || t1=$(date +%s.%N)
	CELL_PID=""
	# A gridftp session whose client was killed keeps sending (a UDT
	# sender for seconds, spinning): it would take CPU and link from the
	# next cell, and its CPU would be counted there.  End the sessions
	# (the daemon's children) and give the link a moment to drain.
	if [ "$killed" = 1 ] && end_sessions; then
		sleep 0.5
	fi
	# CPU: the cgroups keep the time of the processes that exited (or
	# were killed at the cap) in their usage, so the difference is the
	# whole cell; the kill second is included, a few ms.
	CELL_CPU_C="" CELL_CPU_S=""
	if [ -n "$CG_KIND" ]; then
		CELL_CPU_C=$(awk -v a="$cc0" -v b="$(cg_us "$CG_CLI")" 'BEGIN { printf "%.2f", (b - a) / 1e6 }')
		CELL_CPU_S=$(awk -v a="$cs0" -v b="$(cg_us "$CG_SRV")" 'BEGIN { printf "%.2f", (b - a) / 1e6 }')
	fi
	CELL_CPU_W=$(awk -v a="$cw0" -v b="$(pid_cpu_ticks "$WAN_PID")" -v h="$CLK_TCK" \
	    'BEGIN { if (a != "" && b != "") printf "%.2f", (b - a) / h }')
	CELL_BUSY=$(awk -v a="$b0" -v b="$(cpu_busy)" 'BEGIN { split(a, x, " "); split(b, y, " ")
	    if (y[2] > x[2]) printf "%.0f", 100 * (y[1] - x[1]) / (y[2] - x[2]) }')
	CELL_S=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
	CELL_LINK=$(awk -v a="$wl0" -v b="$(wl_counters)" 'BEGIN { split(a, x, " "); split(b, y, " ")
	    if (y[1] == "") exit
	    i = y[1] - x[1]; d = y[3] - x[3]
	    printf "in=%d loss=%d taildrop=%d (%.2f%%)", i, y[2] - x[2], d, (i > 0 ? 100 * d / i : 0) }')
	CELL_LINK="$CELL_LINK$(awk -v a="$uc0" -v b="$(udp_counters "$WAN_C")" -v c="$us0" -v d="$(udp_counters "$WAN_S")" \
	    'BEGIN { split(a, x, " "); split(b, y, " "); split(c, u, " "); split(d, v, " ")
	    if (y[1] - x[1] > 0 || v[4] - u[4] > 0)
		printf " client udp in=%d inerr=%d rcvbuferr=%d server udp sndbuferr=%d",
		    y[1] - x[1], y[2] - x[2], y[3] - x[3], v[4] - u[4] }')"
	if [ "$killed" = 0 ]; then
		CELL_BYTES=$(disk_bytes "$dest")
		CELL_FILES=$(find "$dest" -type f | wc -l)
	fi
	CELL_LATE=$(awk -v b0="$bmid" -v t0="$tmid" -v b1="$CELL_BYTES" -v t1="$t1" \
	    'BEGIN { if (t0 != "" && t1 - t0 >= 1) printf "%.2f", (b1 - b0) / (t1 - t0) / 1e6 }')
	# No second-half rate for a run that failed (its files removed).
	[ "$killed" = 1 ] || [ "$rc" = 0 ] || CELL_LATE=""
	if [ "$killed" = 1 ]; then
		CELL_STATUS=cap
	elif [ "$rc" != 0 ]; then
		CELL_STATUS=error
	elif [ "$CELL_FILES" != "${DS_FILES[$ds]}" ] ||
	    [ "$(find "$dest" -type f -printf '%s\n' | awk '{ s += $1 } END { printf "%.0f", s }')" != "${DS_BYTES[$ds]}" ]; then
		CELL_STATUS=incomplete
	else
		CELL_STATUS=ok
	fi
	CELL_PERF_C="" CELL_PERF_S=""
	case $tool in biomirror-gridftp-udt-*)
		# The server's session may still be sending: a moment for
		# its close line.
		sleep 0.5
		CELL_PERF_C=$(udt_perf_sum "$perf_c") CELL_PERF_S=$(udt_perf_sum "$perf_s")
		{ echo "# udt perfmon client: $CELL_PERF_C"; echo "# udt perfmon server: $CELL_PERF_S"; } >> "$log"
		[ -e "$perf_c" ] && cat "$perf_c" >> "$T/logs/udtperf-all.log"
		[ -e "$perf_s" ] && cat "$perf_s" >> "$T/logs/udtperf-all.log" ;;
	esac
	echo "# exit $rc status $CELL_STATUS ${CELL_S}s $CELL_BYTES bytes $CELL_FILES files late ${CELL_LATE:--} MB/s cpu client ${CELL_CPU_C:--} s server ${CELL_CPU_S:--} s wanlink ${CELL_CPU_W:--} s machine busy ${CELL_BUSY:--}% load $CELL_LOAD link ${CELL_LINK:--}" >> "$log"
	cat "$log" >> "$T/logs/cells.log"
	rm -rf -- "$dest" "$dest.state" "$dest".*
}

# ---------------------------------------------------------------- main
if [ -n "$RMEM_MAX" ]; then
	RMEM_OLD="$(sysctl -n net.core.rmem_max) $(sysctl -n net.core.wmem_max)"
	sysctl -q -w net.core.rmem_max="$RMEM_MAX" net.core.wmem_max="$RMEM_MAX" ||
	    fail "sysctl net.core.rmem_max"
fi
wan_init
# The UDT rows' perfmon sampler (LD_PRELOAD; needs g++ and libudt-dev).
case ",$TOOLS," in *,biomirror-gridftp-udt-*)
	g++ -O2 -Wall -Wextra -shared -fPIC -o "$WAN_BIN/udtperf.so" \
	    tests/bench/udtperf.cpp -ludt -ldl -lpthread 2> "$T/logs/udtperf-cc.log" ||
	    { rm -f "$WAN_BIN/udtperf.so"; echo "wan.sh: no UDT perfmon (udtperf.cpp: $(head -c 200 "$T/logs/udtperf-cc.log"))" >&2; } ;;
esac
say "link: $(wan_describe), bottleneck $RATE Mbit/s, queue one BDP"
echo "date,backend,rate_mbit,rtt_ms,loss_pct,cc,dataset,tool,status,seconds,bytes,files,mb_s,ratio_vs_curl,sender_cc_seen,http_scheme,runs_mb_s,client_cpu_s,server_cpu_s,client_cpu_s_per_gb,server_cpu_s_per_gb,runs,late_mb_s,runs_late_mb_s,wanlink_cpu_s,machine_busy_pct,load1,runs_load1,runs_status,udt_perf_client,udt_perf_server,link_server_to_client" > "$CSV"
TOOL_LIST=${TOOLS//,/ }
# cell_runs RTT LOSS: --target-runs at the target's profiles (loss > 0,
# RTT >= --target-rtt), else --runs.
cell_runs() {
	if [ -n "$TARGET_RUNS" ] && awk -v r="$1" -v l="$2" -v m="$TARGET_RTT" \
	    'BEGIN { exit !(l > 0 && r >= m) }'; then
		echo "$TARGET_RUNS"
	else
		echo "$RUNS"
	fi
}
ncell=0 SERVERS_CC=""
for cc in ${CCS//,/ }; do
	for loss in ${LOSSES//,/ }; do
		for rtt in ${RTTS//,/ }; do
			WAN_CC=$cc
			wan_link "$rtt" "$RATE" "$loss" || fail "wan_link $rtt $RATE $loss"
			if [ "$cc" != "$SERVERS_CC" ]; then
				stop_servers
				start_servers "$cc"
				SERVERS_CC=$cc
			fi
			in_c ping -q -c 3 -i 0.2 "$SIP" > "$T/logs/ping.log" 2>&1 ||
			    fail "no path to $SIP (rtt $rtt loss $loss)"
			nruns=$(cell_runs "$rtt" "$loss")
			for ds in ${DATASETS//,/ }; do
				base=""
				for tool in $TOOL_LIST; do : > "$T/run/runs-$tool"; done
				# Round r runs every tool once, so that the tools
				# of a cell alternate (the load changes slowly).
				for run in $(seq "$nruns"); do
					for tool in $TOOL_LIST; do
						run_cell "$tool" "$ds"
						ncell=$((ncell + 1))
						mbs=$(awk -v b="$CELL_BYTES" -v s="$CELL_S" 'BEGIN { printf "%.2f", (s > 0) ? b / s / 1e6 : 0 }')
						printf '%s %s %s %s %s %s %s %s %s %s %s %s %s|%s|%s\n' "$mbs" "$CELL_STATUS" \
						    "$CELL_S" "$CELL_BYTES" "$CELL_FILES" \
						    "${CELL_CC:--}" "${CELL_CPU_C:--}" \
						    "${CELL_CPU_S:--}" "${CELL_LATE:--}" \
						    "${CELL_CPU_W:--}" "${CELL_BUSY:--}" "$CELL_LOAD" \
						    "${CELL_PERF_C:--}" "${CELL_PERF_S:--}" "${CELL_LINK:--}" >> "$T/run/runs-$tool"
						say "cc $cc loss $loss% rtt $rtt ms $ds $tool run $run/$nruns: $CELL_STATUS ${CELL_S}s $mbs MB/s (late ${CELL_LATE:--}) [ss: ${CELL_CC:-}] [cpu s: client ${CELL_CPU_C:--} server ${CELL_CPU_S:--} wanlink ${CELL_CPU_W:--}; machine ${CELL_BUSY:--}% busy, load $CELL_LOAD] [link: ${CELL_LINK:--}]${CELL_PERF_C:+ [udt client: $CELL_PERF_C] [udt server: $CELL_PERF_S]}"
					done
				done
				for tool in $TOOL_LIST; do
					r=$T/run/runs-$tool
					all=$(cut -d' ' -f1 "$r" | paste -sd' ' -)
					all_late=$(cut -d' ' -f9 "$r" | paste -sd' ' -)
					all_load=$(cut -d' ' -f12 "$r" | paste -sd' ' -)
					all_st=$(cut -d' ' -f2 "$r" | paste -sd' ' -)
					# The run with the median MB/s (the lower middle
					# one of an even count) gives the other columns.
					IFS='|' read -r row perf_s link < <(sort -n -k1,1 "$r" | sed -n "$(( (nruns + 1) / 2 ))p")
					read -r mbs CELL_STATUS CELL_S CELL_BYTES CELL_FILES CELL_CC CELL_CPU_C CELL_CPU_S CELL_LATE CELL_CPU_W CELL_BUSY CELL_LOAD perf_c <<<"$row"
					for v in CELL_CPU_C CELL_CPU_S CELL_LATE CELL_CPU_W CELL_BUSY; do
						[ "${!v}" = - ] && printf -v "$v" ''
					done
					# The median of the late MB/s on its own.
					late=$(tr ' ' '\n' <<<"$all_late" | grep -v '^-$' | sort -n |
					    awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }')
					# CPU seconds per GB (10^9 bytes) delivered.
					cpugb() { awk -v c="$1" -v b="$CELL_BYTES" 'BEGIN { if (c != "" && b > 0) printf "%.2f", c / (b / 1e9) }'; }
					cgc=$(cpugb "$CELL_CPU_C") cgs=$(cpugb "$CELL_CPU_S")
					[ "$tool" = curl ] && base=$mbs
					ratio=$(awk -v m="$mbs" -v b="${base:-0}" 'BEGIN { if (b > 0) printf "%.2f", m / b; else printf "" }')
					echo "$STAMP,$WAN_BACKEND,$RATE,$rtt,$loss,$cc,$ds,$tool,$CELL_STATUS,$CELL_S,$CELL_BYTES,$CELL_FILES,$mbs,$ratio,$CELL_CC,$SCHEME,$all,$CELL_CPU_C,$CELL_CPU_S,$cgc,$cgs,$nruns,$late,$all_late,$CELL_CPU_W,$CELL_BUSY,$CELL_LOAD,$all_load,$all_st,$perf_c,$perf_s,$link" >> "$CSV"
					say "cc $cc loss $loss% rtt $rtt ms $ds $tool: median of $nruns: $CELL_STATUS ${CELL_S}s $mbs MB/s${ratio:+ (${ratio}x curl)} (runs: $all; late: $all_late; load: $all_load)${cgc:+ cpu s/GB client $cgc server $cgs}"
				done
			done
		done
	done
done
stop_servers
wan_unlink

# ---------------------------------------------------------------- report
# csv_by_rtt: the CSV with its rows by RTT (the tables' row order), the
# order of the runs otherwise kept.
csv_by_rtt() { head -n 1 "$CSV"; tail -n +2 "$CSV" | sort -t, -s -n -k4,4; }
echo
echo "## WAN benchmark $STAMP"
echo
echo "- link: $(wan_describe); bottleneck $RATE Mbit/s each way, queue one BDP (tail drop), loss in the server->client direction"
echo "- machine: $(nproc) CPUs, kernel $(uname -r); load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "- sender congestion control: tests/bench/tcpcc.so (TCP_CONGESTION per socket) in every server, and congctl on the server namespace's route; the CSV column sender_cc_seen is what ss -ti showed 1 s into each cell"
if [ -s "$T/logs/tcpcc.log" ]; then
	echo "- tcpcc.so refusals (the route's congctl applies there): $(sort -u -t: -k3 "$T/logs/tcpcc.log" | sed 's/^tcpcc: pid [0-9]* //' | sort -u | paste -sd';' -)"
fi
echo "- each cell: one tool, empty destination, until done or $CAP s (then killed, bytes on disk counted); MB/s = 10^6 bytes/s, median of $RUNS run(s); (Nx) = ratio to curl, one TCP connection"
if [ "$TLS" = 1 ]; then
	echo "- HTTP tools over HTTPS (TLS 1.3, nginx offers h2 by ALPN; curl and rclone use h2, biomirror multiplexes over it, aria2c speaks HTTP/1.1); lftp, globus-url-copy and rsync unchanged"
else
	echo "- HTTP tools over plain HTTP/1.1 (keep-alive; no h2: run with --tls for HTTPS + h2)"
fi
echo "- UDP buffers: net.core.rmem_max $(sysctl -n net.core.rmem_max), wmem_max $(sysctl -n net.core.wmem_max) (UDT's buffers are capped there; biomirror warns in the cell log when it got less than it asked; --rmem-max)"
for t in $TOOL_LIST; do echo "- $t: $(tool_version "$t")"; done
for t in $TOOL_LIST; do echo "    $t: $(tool_cmd "$t" DATASET /DEST | tr '\n' ' ')"; done | sed "s|$T|\$W|g"
for cc in ${CCS//,/ }; do
	for loss in ${LOSSES//,/ }; do
		for ds in ${DATASETS//,/ }; do
			echo
			echo "### sender $cc, loss $loss%, $(ds_desc "$ds"), $RATE Mbit/s"
			echo
			awk -F, -v cc="$cc" -v loss="$loss" -v ds="$ds" -v tools="$TOOL_LIST" -v dat="$T/plot/$cc-$loss-$ds.dat" '
			    NR > 1 && $6 == cc && $5 == loss && $7 == ds {
				k = $4 SUBSEP $8; v[k] = $13; r[k] = $14; st[k] = $9
				if ($22 > 1) raw[k] = $17
				if (!($4 in seen)) { seen[$4] = 1; rtts[++n] = $4 }
			    }
			    END {
				nt = split(tools, t, " ")
				h = "| RTT ms |"; s = "|---:|"
				for (j = 1; j <= nt; j++) { h = h " " t[j] " |"; s = s "---:|" }
				print h; print s
				printf "RTT" > dat
				for (j = 1; j <= nt; j++) printf " %s", t[j] > dat
				printf "\n" > dat
				for (i = 1; i <= n; i++) {
					line = "| " rtts[i] " |"; printf "%s", rtts[i] > dat
					for (j = 1; j <= nt; j++) {
						k = rtts[i] SUBSEP t[j]
						c = v[k]
						if (t[j] != "curl" && r[k] != "") c = c " (" r[k] "x)"
						if (st[k] != "ok") c = c " " st[k]
						if (raw[k] != "") c = c " [" raw[k] "]"
						line = line " " c " |"
						printf " %s", (v[k] == "" ? "NaN" : v[k]) > dat
					}
					print line; printf "\n" > dat
				}
			    }' <(csv_by_rtt)
			if command -v gnuplot >/dev/null; then
				png=$OUTDIR/wan-$STAMP-$cc-$loss-$ds.png
				gnuplot > "$T/logs/gnuplot.log" 2>&1 <<EOF || echo "(gnuplot failed: $(head -c 300 "$T/logs/gnuplot.log"))"
set terminal png size 900,560
set output "$png"
set title "sender $cc, loss $loss%, $(ds_desc "$ds"), bottleneck $RATE Mbit/s ($WAN_BACKEND)"
set xlabel "RTT (ms)"
set ylabel "MB/s"
set key outside right
set grid
set yrange [0:*]
set datafile missing "NaN"
plot for [i=2:$(( $(wc -w <<<"$TOOL_LIST") + 1 ))] "$T/plot/$cc-$loss-$ds.dat" using 1:i with linespoints title columnhead(i)
EOF
				[ -s "$png" ] && echo && echo "plot: ${png#"$ROOT"/}"
			fi
			echo
			echo "MB/s over the second half of the cap (from the sample at $((CAP / 2)) s to the end; '-': done before), [every run]:"
			echo
			awk -F, -v cc="$cc" -v loss="$loss" -v ds="$ds" -v tools="$TOOL_LIST" '
			    NR > 1 && $6 == cc && $5 == loss && $7 == ds {
				k = $4 SUBSEP $8; v[k] = $23; raw[k] = ($22 > 1 ? $24 : "")
				if (!($4 in seen)) { seen[$4] = 1; rtts[++n] = $4 }
			    }
			    END {
				nt = split(tools, t, " ")
				h = "| RTT ms |"; l = "|---:|"
				for (j = 1; j <= nt; j++) { h = h " " t[j] " |"; l = l "---:|" }
				print h; print l
				for (i = 1; i <= n; i++) {
					line = "| " rtts[i] " |"
					for (j = 1; j <= nt; j++) {
						k = rtts[i] SUBSEP t[j]
						c = (v[k] == "" ? "-" : v[k])
						if (raw[k] != "") c = c " [" raw[k] "]"
						line = line " " c " |"
					}
					print line
				}
			    }' <(csv_by_rtt)
			echo
			echo "CPU seconds per GB delivered, client / server / wanlink forwarder (cgroup ${CG_KIND:-none}; /proc for wanlink), then the whole machine's CPU busy during the cell and the 1-minute load average at its start [every run's load] (median run):"
			echo
			awk -F, -v cc="$cc" -v loss="$loss" -v ds="$ds" -v tools="$TOOL_LIST" '
			    function pg(x) { return (x == "" || b <= 0) ? "-" : sprintf("%.2f", x / (b / 1e9)) }
			    NR > 1 && $6 == cc && $5 == loss && $7 == ds {
				k = $4 SUBSEP $8; b = $11
				cell[k] = pg($18) " / " pg($19) " / " pg($25) "; " ($26 == "" ? "-" : $26) "% busy, load " $27
				if ($22 > 1) cell[k] = cell[k] " [" $28 "]"
				if (!($4 in seen)) { seen[$4] = 1; rtts[++n] = $4 }
			    }
			    END {
				nt = split(tools, t, " ")
				h = "| RTT ms |"; l = "|---:|"
				for (j = 1; j <= nt; j++) { h = h " " t[j] " |"; l = l "---:|" }
				print h; print l
				for (i = 1; i <= n; i++) {
					line = "| " rtts[i] " |"
					for (j = 1; j <= nt; j++)
						line = line " " cell[rtts[i] SUBSEP t[j]] " |"
					print line
				}
			    }' <(csv_by_rtt)
			if awk -F, -v cc="$cc" -v loss="$loss" -v ds="$ds" 'NR > 1 && $6 == cc && $5 == loss && $7 == ds && $30 != "" && $30 != "-" { f = 1 } END { exit !f }' <(csv_by_rtt); then
				echo
				echo "UDT perfmon (tests/bench/udtperf.cpp; per socket-second means over the median run, packet counts summed; client = receiver, server = sender):"
				echo
				awk -F, -v cc="$cc" -v loss="$loss" -v ds="$ds" '
				    NR > 1 && $6 == cc && $5 == loss && $7 == ds && $30 != "" && $30 != "-" {
					printf "- RTT %s, %s: client: %s; server: %s; link: %s\n", $4, $8, $30, $31, $32
				    }' <(csv_by_rtt)
			fi
		done
	done
done
[ -n "$CG_KIND" ] || echo "(no writable cgroup: CPU seconds not measured)"
echo
echo "csv: ${CSV#"$ROOT"/} ($ncell cells)"
echo "Figures measured on a loaded machine (other work on the same cores) are not valid."
