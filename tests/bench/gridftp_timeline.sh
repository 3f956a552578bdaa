#!/bin/bash
# tests/bench/gridftp_timeline.sh BIN RTT_MS NFILES SESSIONS STREAMS OUT:
# the timeline of GridFTP files over UDT (issue 20): one sync by BIN from
# the real globus-gridftp-server (-log-level all, OUT/server.log) across
# the emulated link (tests/bench/wan/netns.sh: 500 Mbit/s, 0.1% loss),
# NFILES x 20 MiB, the client under strace (control commands and replies,
# its pwrite64s: OUT/strace.txt).  Root; never part of make check.
# Read it with grep -E "sendto\(|recvfrom\(|pwrite64" (docs/performance.md, h20w).
set -u
BIN=$1 RTT=$2 NF=$3 NS=$4 ST=$5 OUT=${6:?usage: gridftp_timeline.sh BIN RTT NFILES SESSIONS STREAMS OUT}
cd "$(dirname "$0")/../.." || exit 2
export WAN_TAG=tl$$ WAN_BIN=${TL_DIR:-/tmp/bm-timeline}/bin WAN_LOG=${TL_DIR:-/tmp/bm-timeline}/wanlink.log
. tests/bench/wan/netns.sh
trap wan_fini EXIT
wan_init >/dev/null
wan_link "$RTT" 500 0.1 >/dev/null
D=${TL_DIR:-/tmp/bm-timeline}/data; mkdir -p $D/ds
for i in $(seq 1 $NF); do [ -e $D/ds/f$i ] || head -c $((20*1024*1024)) /dev/urandom > $D/ds/f$i; done
chmod -R a+rX ${TL_DIR:-/tmp/bm-timeline}
rm -rf $OUT; mkdir -p $OUT; chmod 777 $OUT
in_s globus-gridftp-server -p 2811 -aa -anonymous-user nobody -anonymous-group nogroup -home-dir / \
   -log-level all -log-module stdio:buffer=0 -dc-whitelist udt,gsi,tcp -l $OUT/server.log > $OUT/server.out 2>&1 &
sleep 1
for _ in $(seq 50); do in_s ss -ltnH "sport = :2811" | grep -q . && break; sleep 0.1; done
t0=$(date +%s.%N)
in_c strace -f -tt --seccomp-bpf -e trace=sendto,recvfrom,connect,pwrite64,openat -e status=successful -e signal=none -o $OUT/strace.txt -s 80 \
   $BIN --state-dir $OUT/state sync --max-connections $NS --concurrency 8 --ftp-mode extended --transport udt --streams $ST \
   --source "ftp://10.77.0.2:2811$D/ds/" --dest $OUT/dest > $OUT/client.log 2>&1
echo "rc=$? $(awk -v a=$t0 -v b=$(date +%s.%N) 'BEGIN{print b-a}') s" | tee $OUT/result
