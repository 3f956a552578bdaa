#!/bin/bash
# check-config (-n) loads the transport modules a mirror's run will load
# (libbiomirror-curl.so, libbiomirror-udt.so: agent/xfer/module.c), so
# that a missing or broken module fails the check (exit 2), not the run;
# no server is needed (nothing connects):
#  1. BM_UDT_MODULE names a missing file: -n names every mirror with
#     transport = udt, "FILE: mirror NAME: UDT module PATH: ...", and no
#     other (MODE E over tcp or auto, http://, bm://); --json has one
#     error object per such mirror; a run of one of them says the same
#     module (exit 1);
#  2. BM_UDT_MODULE names a file that is no shared object: the same, with
#     dlopen's reason;
#  3. without a UDT mirror, -n passes with the UDT module missing and
#     never loads libudt (strace: no libudt, no 100 ms sleep of its
#     initializer);
#  4. BM_CURL_MODULE names a missing file: every HTTP and FTP mirror is
#     named (the UDT ones too: GridFTP is stacked on curl), not bm://;
#  5. with the build tree's modules: configuration OK, exit 0.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup
command -v strace >/dev/null || fail "strace is not installed (make deps)"

PORT=$(free_port)
# mirror NAME SOURCE [KEY = VALUE ...]: a section of $T/bm.conf.
mirror() {
	local name=$1 src=$2
	shift 2
	printf '[%s]\nsource = %s\ndest = %s\n' "$name" "$src" "$T/m/$name"
	for kv in "$@"; do printf '%s\n' "$kv"; done
	printf '\n'
}
ftp=ftp://127.0.0.1:$PORT/pub/
{
	mirror u1 "$ftp" "ftp_mode = extended" "transport = udt"
	mirror h "http://127.0.0.1:$PORT/pub/"
	mirror t "$ftp" "ftp_mode = extended" "transport = tcp"
	mirror a "$ftp" "ftp_mode = extended" "transport = auto"
	mirror b "bm://127.0.0.1:$PORT/pub/"
	mirror u2 "$ftp" "ftp_mode = extended" "transport = udt"
} > "$T/bm.conf"
C=$T/bm.conf

# errors_json: "mirror reason" of each error object of check-config
# --json ($T/last.out), one a line, after checking the object's shape.
errors_json() {
	python3 - "$T/last.out" "$C" <<'PY' || fail "check-config --json: $(cat "$T/last.out")"
import json, sys
o = json.load(open(sys.argv[1]))
assert o["config"] == sys.argv[2] and o["ok"] is False, o
assert o["error"] == o["errors"][0]["reason"], o
for e in o["errors"]:
    assert (e["path"], e["op"]) == (sys.argv[2], "config"), e
    print(e["mirror"], e["reason"])
PY
}

echo "# 1. the UDT module missing: every UDT mirror named, no other"
none=$T/none/libbiomirror-udt.so
export BM_UDT_MODULE=$none
assert_exit 2 bm -n
[ ! -s "$LAST_OUT" ] || fail "-n printed on stdout: $(cat "$LAST_OUT")"
sed -E "s#^biomirror: $C: mirror (u1|u2): UDT module $none: .*No such file or directory\$#\1#" \
    "$LAST_ERR" > "$T/named"
assert_eq "$(tr '\n' , < "$T/named")" "u1,u2," "mirrors named by -n"
assert_exit 2 bm check-config --json
errors_json > "$T/named.json"
assert_eq "$(cut -d' ' -f1 "$T/named.json" | tr '\n' ,)" "u1,u2," \
    "--json: one error object per UDT mirror"
grep -q "^u2 $C: mirror u2: UDT module $none: .*No such file or directory\$" \
    "$T/named.json" || fail "--json: the reason: $(cat "$T/named.json")"
# The run fails on the same module (it connects to no one first).
assert_exit 1 bm sync u1
grep -q "open the udt transport: UDT module $none: .*No such file or directory" \
    "$LAST_ERR" || fail "the run's reason: $(cat "$LAST_ERR")"

echo "# 2. a UDT module that is no shared object"
mkdir -p "$T/junk"
printf 'this is not an ELF object\n' > "$T/junk/libbiomirror-udt.so"
export BM_UDT_MODULE=$T/junk/libbiomirror-udt.so
assert_exit 2 bm -n
assert_eq "$(grep -c "^biomirror: $C: mirror u[12]: UDT module $BM_UDT_MODULE: " "$LAST_ERR")" 2 \
    "-n: both UDT mirrors, the broken module named"
assert_eq "$(wc -l < "$LAST_ERR")" 2 "-n: nothing but the two mirrors"

echo "# 3. no UDT mirror: the UDT module is neither needed nor loaded"
export BM_UDT_MODULE=$none
sed '/^\[u1\]/,/^$/d; /^\[u2\]/,/^$/d' "$C" > "$T/tcp.conf"
grep -q 'transport = udt' "$T/tcp.conf" && fail "tcp.conf has a UDT mirror"
assert_exit 0 "$BM" -c "$T/tcp.conf" -n
grep -qx "$T/tcp.conf: configuration OK (4 mirrors)" "$LAST_OUT" ||
    fail "-n without UDT mirrors: $(cat "$LAST_OUT")"
unset BM_UDT_MODULE
strace -f -qq -o "$T/st.n" -e trace=clock_nanosleep,openat \
    "$BM" -c "$T/tcp.conf" -n > /dev/null 2>&1 || fail "-n under strace"
grep -q 'libudt\|tv_nsec=100000000' "$T/st.n" &&
    fail "libudt loaded by -n: $(grep 'libudt\|nanosleep' "$T/st.n")"

echo "# 4. the curl module missing: every HTTP and FTP mirror named"
export BM_CURL_MODULE=$T/none/libbiomirror-curl.so
assert_exit 2 bm -n
sed -E "s#^biomirror: $C: mirror ([a-z0-9]+): curl module $BM_CURL_MODULE: .*No such file or directory\$#\1#" \
    "$LAST_ERR" > "$T/named"
assert_eq "$(tr '\n' , < "$T/named")" "u1,h,t,a,u2," "mirrors named by -n"
unset BM_CURL_MODULE

echo "# 5. the build tree's modules: configuration OK"
assert_exit 0 bm -n
grep -qx "$C: configuration OK (6 mirrors)" "$LAST_OUT" ||
    fail "-n: $(cat "$LAST_OUT")"
assert_exit 0 bm check-config --json
python3 -c 'import json,sys; o=json.load(open(sys.argv[1]))
assert o["ok"] is True and o["mirrors"] == 6, o' "$LAST_OUT" ||
    fail "check-config --json: $(cat "$LAST_OUT")"

[ -z "$(bm_leftovers)" ] || fail "processes left: $(bm_leftovers)"
echo "PASS"
