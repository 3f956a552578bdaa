#!/bin/bash
# user + password_file against real vsftpd with a local account made by
# this test (useradd + chpasswd; chrooted to the test tree through
# local_root; anonymous login off; removed again by the cleanup trap):
# the tree is mirrored as that user; a wrong password fails the listing
# with the server's refusal (exit 3, nothing fetched) after one login:
# a wrong login is not retried.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup
FTPU=bmftp$$
useradd -M -d "$T/up" -s /bin/sh "$FTPU" || fail "useradd $FTPU"
trap 'rc=$?; userdel -f "$FTPU" > /dev/null 2>&1; (exit $rc); bm_cleanup' EXIT
PW=pw-$RANDOM-$RANDOM-$$
echo "$FTPU:$PW" | chpasswd || fail "chpasswd"

mkdir -p "$T/up/sub dir"
printf 'hello\n' > "$T/up/a.txt"
head -c 100000 /dev/urandom > "$T/up/sub dir/b.bin"
BM_VSFTPD_EXTRA="anonymous_enable=NO
local_enable=YES
chroot_local_user=YES
allow_writeable_chroot=YES
local_root=$T/up
pam_service_name=vsftpd"
start_vsftpd "$T/up"
unset BM_VSFTPD_EXTRA

echo "# anonymous is refused by this server"
write_conf "$VSFTPD_URL"
printf 'retries = 0\n' >> "$T/bm.conf"
assert_exit 3 bm --json sync up

echo "# user + password_file"
printf '%s\n' "$PW" > "$T/pw"
chmod 0600 "$T/pw"
write_conf "$VSFTPD_URL"
printf 'user = %s\npassword_file = %s\nretries = 0\n' "$FTPU" "$T/pw" >> "$T/bm.conf"
assert_exit 0 bm --json sync up
expect_counts 2 0 0 0
assert_trees_equal "$T/up" "$T/mirror"
grep -q "\[$FTPU\] OK LOGIN" "$VSFTPD_LOG" || fail "no login as $FTPU in the server log"
grep -q -- "$PW" "$T/last.err" "$T/last.out" "$T/bm.conf" && fail "password printed or in the config"

echo "# a world-readable password_file is refused (exit 2)"
chmod 0644 "$T/pw"
assert_exit 2 bm --json sync up
grep -q "password_file.*readable by everyone" "$T/last.err" || fail "world-readable message"
chmod 0600 "$T/pw"

echo "# a first line longer than 511 bytes is refused, not cut short (exit 2)"
head -c 600 /dev/zero | tr '\0' x > "$T/pw.long"
chmod 0600 "$T/pw.long"
sed -i "s#^password_file = .*#password_file = $T/pw.long#" "$T/bm.conf"
assert_exit 2 bm --json sync up
grep -q "password_file $T/pw.long: the first line is longer than 511 bytes" "$T/last.err" ||
    fail "long password_file message: $(cat "$T/last.err")"
# A line of exactly 511 bytes and its line end (LF, CRLF) is whole: it
# goes to the server (a wrong password here: exit 3), it is not refused.
for eol in '\n' '\r\n'; do
	{ head -c 511 /dev/zero | tr '\0' x; printf "$eol"; } > "$T/pw.long"
	assert_exit 3 bm --json sync up
	grep -q "longer than" "$T/last.err" &&
	    fail "511-byte password_file line refused: $(cat "$T/last.err")"
done
sed -i "s#^password_file = .*#password_file = $T/pw#" "$T/bm.conf"

echo "# wrong password: the listing fails, nothing is fetched or deleted;"
echo "# a wrong login is tried once, also with retries at its default (5)"
printf 'wrong-%s\n' "$PW" > "$T/pw"
printf 'changed\n' > "$T/up/a.txt"
sed -i '/^retries = 0$/d' "$T/bm.conf"
failed=$(grep -c "\[$FTPU\] FAIL LOGIN" "$VSFTPD_LOG" || true)
assert_exit 3 bm --json sync up
expect_counts 0 0 0 0
grep -q "up: list: ${VSFTPD_URL}: login refused: 530 Login incorrect." "$T/last.err" ||
    fail "login failure message"
assert_eq "$(grep -c 'retry' "$T/last.err")" 0 "retries of a wrong login"
assert_eq "$(( $(grep -c "\[$FTPU\] FAIL LOGIN" "$VSFTPD_LOG") - failed ))" 1 \
    "logins tried with a wrong password"
assert_eq "$(cat "$T/mirror/a.txt")" hello "a.txt untouched"
[ -f "$T/mirror/sub dir/b.bin" ] || fail "sub dir/b.bin deleted"
echo "PASS"
