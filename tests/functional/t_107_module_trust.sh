#!/bin/bash
# The transport modules are loaded only from files no other user could
# have planted (agent/xfer/module.c), nginx, real runs of a copy of the
# binary:
#  1. biomirror and its modules copied into a directory of mode 0755: the
#     curl module loads (check-config, and a sync that fetches the tree);
#  2. that directory made 0777, or 1777 (as /tmp), or owned by another
#     user: check-config and sync exit 2 naming the module, the directory
#     and why; the sync fetches nothing (it used to load the module);
#  3. the directory sound, the module group-writable, or owned by another
#     user: refused the same way, naming the file;
#  4. the installed layout (BIN/biomirror, BIN/../lib/biomirror/) with
#     BIN of mode 0777: with nothing beside the binary the installed
#     module loads; a module another user plants beside the binary is
#     refused (the directory), not loaded;
#  5. BM_CURL_MODULE: the file it names is checked (group-writable:
#     refused), the directory it is in is not (the user named it);
#  6. what is loaded is the file that was checked: the module is opened
#     once and loaded through /proc/self/fd/N (strace: the module's path
#     is opened once, by the loader, and dlopen() maps /proc/self/fd/N);
#  7. a module that was mapped but refused (the UDT module named as the
#     curl module: no curl entry point) is refused again for a second
#     mirror from the first verdict: opened once, both mirrors named.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup
[ "$(id -u)" = 0 ] || fail "needs root (chown, runuser: another user's files)"

mkdir -p "$T/up/sub"
printf 'one\n' > "$T/up/a.txt"
printf 'two\n' > "$T/up/sub/b.txt"
chmod -R a+rX "$T/up"
start_nginx "$T/up"
cat > "$T/bm.conf" <<CONF
[global]
state_dir = $T/state

[up]
source = $NGINX_URL
dest = $T/mirror
CONF
B=$T/bin
mkdir -m 0755 "$B"
cp biomirror libbiomirror-curl.so libbiomirror-udt.so "$B/"
chmod 0755 "$B/biomirror" "$B/libbiomirror-curl.so" "$B/libbiomirror-udt.so"
unset BM_CURL_MODULE BM_UDT_MODULE

# refused BIN WHY: check-config and sync of the copy BIN/biomirror exit 2
# with "curl module PATH: WHY" (PATH: BIN's module unless $path is set);
# nothing is fetched.
refused() {
	local bin=$1 why=$2 p=${path:-$1/libbiomirror-curl.so} mark
	assert_exit 2 "$bin/biomirror" -c "$T/bm.conf" check-config
	assert_eq "$(cat "$LAST_ERR")" "biomirror: $T/bm.conf: mirror up: curl module $p: $why" \
	    "check-config: stderr"
	mark=$(wc -l < "$NGINX_ACCESS_LOG")
	assert_exit 2 "$bin/biomirror" -c "$T/bm.conf" sync up
	assert_eq "$(cat "$LAST_ERR")" "biomirror: up: $NGINX_URL: open the tcp transport: curl module $p: $why" \
	    "sync: stderr"
	assert_eq "$(log_since "$mark" "$NGINX_ACCESS_LOG" | wc -l)" 0 "sync: requests"
	[ ! -e "$T/mirror/a.txt" ] || fail "sync: a file fetched"
}

echo "# 1. a directory only root writes: the module loads"
assert_exit 0 "$B/biomirror" -c "$T/bm.conf" check-config
assert_exit 0 "$B/biomirror" -c "$T/bm.conf" --json sync up
expect_counts 2 0 0 0
assert_trees_equal "$T/up" "$T/mirror"
rm -rf "$T/mirror" "$T/state"

echo "# 2. the directory beside the binary: writable by others, or not ours"
chmod 0777 "$B"
refused "$B" "directory $B: mode 0777: writable by group or others, who could plant a module there: refused"
chmod 1777 "$B"
refused "$B" "directory $B: mode 1777: writable by group or others, who could plant a module there: refused"
chmod 0775 "$B"
refused "$B" "directory $B: mode 0775: writable by group or others, who could plant a module there: refused"
chmod 0755 "$B"
chown nobody "$B"
refused "$B" "directory $B: owned by uid $(id -u nobody), not root or this user (uid 0): refused"
chown root "$B"

echo "# 3. the module itself: group-writable, or another user's"
chmod 0775 "$B/libbiomirror-curl.so"
refused "$B" "mode 0775: writable by group or others: refused (chmod go-w it)"
chmod 0757 "$B/libbiomirror-curl.so"
refused "$B" "mode 0757: writable by group or others: refused (chmod go-w it)"
chmod 0755 "$B/libbiomirror-curl.so"
chown nobody "$B/libbiomirror-curl.so"
refused "$B" "owned by uid $(id -u nobody), not root or this user (uid 0): refused"
chown root "$B/libbiomirror-curl.so"
assert_exit 0 "$B/biomirror" -c "$T/bm.conf" check-config

echo "# 4. the installed layout, its bin directory writable by everyone"
I=$T/inst
mkdir -p "$I/bin" "$I/lib/biomirror"
chmod 0755 "$I" "$I/lib" "$I/lib/biomirror"
cp biomirror "$I/bin/"
cp libbiomirror-curl.so libbiomirror-udt.so "$I/lib/biomirror/"
chmod 0644 "$I/lib/biomirror/"*.so
chmod 0777 "$I/bin"
assert_exit 0 "$I/bin/biomirror" -c "$T/bm.conf" check-config
runuser -u nobody -- cp "$B/libbiomirror-curl.so" "$I/bin/" || fail "plant a module"
[ "$(stat -c %U "$I/bin/libbiomirror-curl.so")" = nobody ] || fail "the planted module's owner"
refused "$I/bin" "directory $I/bin: mode 0777: writable by group or others, who could plant a module there: refused"
rm -f "$I/bin/libbiomirror-curl.so"
assert_exit 0 "$I/bin/biomirror" -c "$T/bm.conf" --json sync up
expect_counts 2 0 0 0
rm -rf "$T/mirror" "$T/state"

echo "# 5. BM_CURL_MODULE: the file is checked, not its directory"
mkdir -m 0777 "$T/any"
cp libbiomirror-curl.so "$T/any/mod.so"
chmod 0664 "$T/any/mod.so"
export BM_CURL_MODULE=$T/any/mod.so
path=$T/any/mod.so refused "$B" "mode 0664: writable by group or others: refused (chmod go-w it)"
chmod 0644 "$T/any/mod.so"
assert_exit 0 "$B/biomirror" -c "$T/bm.conf" check-config
unset BM_CURL_MODULE

echo "# 6. the file checked is the file loaded"
strace -f -qq -e trace=openat -o "$T/strace.out" "$B/biomirror" -c "$T/bm.conf" check-config \
    > /dev/null 2>&1 || fail "strace check-config"
assert_eq "$(grep -c "\"$B/libbiomirror-curl.so\"\|\"libbiomirror-curl.so\"" "$T/strace.out")" 1 \
    "opens of the module by name: $(grep curl "$T/strace.out")"
grep -q 'openat(AT_FDCWD, "/proc/self/fd/[0-9]*", O_RDONLY|O_CLOEXEC) = ' "$T/strace.out" ||
    fail "dlopen() did not open /proc/self/fd/N: $(grep -n 'proc/self/fd\|curl' "$T/strace.out")"

echo "# 7. a module mapped but refused (no curl entry) is said again, not loaded again"
cat >> "$T/bm.conf" <<CONF

[up2]
source = $NGINX_URL
dest = $T/mirror2
CONF
export BM_CURL_MODULE=$B/libbiomirror-udt.so
BM_CURL_MODULE=$B/libbiomirror-udt.so strace -f -qq -e trace=openat -o "$T/strace2.out" \
    "$B/biomirror" -c "$T/bm.conf" check-config > "$T/cc2.out" 2>&1
assert_eq "$?" 2 "check-config with the UDT module as curl's: exit"
assert_eq "$(grep -c "mirror up: curl module $B/libbiomirror-udt.so: .*ABI\|mirror up: curl module $B/libbiomirror-udt.so: .*symbol" "$T/cc2.out")" 1 \
    "mirror up named: $(cat "$T/cc2.out")"
assert_eq "$(grep -c "mirror up2: curl module $B/libbiomirror-udt.so: " "$T/cc2.out")" 1 \
    "mirror up2 named: $(cat "$T/cc2.out")"
assert_eq "$(grep -c "\"$B/libbiomirror-udt.so\"" "$T/strace2.out")" 1 \
    "opens of the refused module: $(grep udt "$T/strace2.out")"
unset BM_CURL_MODULE
echo PASS
