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
apt-get update -qq || exit 1
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null || exit 1
# Debian starts packaged daemons after install; our tests run their own.
for svc in nginx apache2; do
	pkill -x "$svc" 2>/dev/null || true
done
exit 0
