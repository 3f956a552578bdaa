#!/bin/sh
# Install the Debian packages named on the command line (make deps).
# Runs apt-get update first when the package lists are missing or a
# package is not known yet.  Not root: print the command instead.
missing=""
for p in "$@"; do
	dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q "ok installed" ||
	    missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
	echo "biomirror: missing packages:$missing" >&2
	echo "run: sudo apt-get update && sudo apt-get install -y$missing" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
# Debian starts a packaged daemon (nginx, apache2, vsftpd) when it is
# installed; our tests run their own.  Keep the new ones from starting
# (invoke-rc.d and deb-systemd-invoke honour /usr/sbin/policy-rc.d exit
# 101, "action forbidden": Debian Policy, invoke-rc.d(8)) rather than
# stopping daemons afterwards, which would also hit a web server that was
# already running on this machine.  An existing policy-rc.d is left alone.
policy=/usr/sbin/policy-rc.d
made=0
if [ ! -e "$policy" ]; then
	printf '#!/bin/sh\n# biomirror make deps: no daemon starts during install\nexit 101\n' \
	    > "$policy" && chmod 0755 "$policy" && made=1
	trap '[ "$made" = 1 ] && rm -f "$policy"' EXIT INT TERM
fi
apt-get update -qq || exit 1
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null || exit 1
exit 0
