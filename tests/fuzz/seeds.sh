#!/bin/sh
# Build the seed corpora of the fuzz targets (STYLE.md rules 53, 55) under
# tests/fuzz/out/seeds/NAME/ from text only: the fixtures in tests/fixtures/,
# conf/*.conf and the hand-written seeds in tests/fuzz/corpus/NAME/.
# Usage: sh tests/fuzz/seeds.sh [OUTDIR]   (run from the top of the tree)
set -eu
out=${1:-tests/fuzz/out/seeds}
fix=tests/fixtures
rm -rf "$out"
for n in path config list_http list_ftp crawl_http crawl_ftp manifest; do
	mkdir -p "$out/$n"
	[ -d "tests/fuzz/corpus/$n" ] && cp tests/fuzz/corpus/$n/* "$out/$n/"
done

# path: every href of the index fixtures, one seed each (first 300).
i=0
for f in $fix/*.html $fix/*.xml; do
	grep -o 'href="[^"]*"' "$f" | sed 's/^href="//; s/"$//'
done | sort -u | head -300 | while IFS= read -r h; do
	i=$((i + 1))
	printf '%s' "$h" > "$out/path/href-$i"
done

# config: the shipped example configs.
for f in conf/*.conf; do
	cp "$f" "$out/config/$(basename "$f")"
done

# list_http: "URL\n" + "Content-Type: ...\n" + page (see fuzz_list_http.c);
# the URLs are those the pages were served at (tests/unit/test_list_http.c).
url_of() {
	case $1 in
	apache-htmltable-rclone-fixture) echo "http://example.org/~user/pub/" ;;
	apache-fancy-pre-mysql-repo) echo "http://repo.mysql.com/232905/apt/ubuntu/pool/mysql-tools/m/" ;;
	apache-htmltable-winehq) echo "https://dl.winehq.org/wine-builds/" ;;
	apache-plain-ul-debian) echo "http://deb.debian.org/debian/" ;;
	nginx-autoindex-monitoring-plugins|nginx-autoindex-inexact-synthetic)
		echo "https://www.monitoring-plugins.org/monitoring-plugins/" ;;
	nginx-autoindex-proxmox-truncated) echo "http://download.proxmox.com/debian/ceph-quincy/dists/bookworm/main/binary-amd64/" ;;
	nginx-fancyindex-lysator-openbsd) echo "https://ftp.lysator.liu.se/pub/OpenBSD/" ;;
	lighttpd-dirlisting-buildroot-acl) echo "http://sources.buildroot.net/acl/" ;;
	caddy-v1-rclone-fixture) echo "http://localhost:8080/" ;;
	caddy-v2-sdumirror-ubuntu) echo "https://mirrors.sdu.edu.cn/ubuntu/1710048427/ubuntu/" ;;
	snt-utwente-debian) echo "https://ftp.snt.utwente.nl/debian/" ;;
	docker-download-centos) echo "https://download.docker.com/linux/centos/" ;;
	docker-download-armv7l) echo "https://download.docker.com/linux/centos/7/armv7l/" ;;
	iis-dirbrowse-digi-ftp1) echo "http://ftp1.digi.com/support/firmware/branded/sieH7/latest/" ;;
	iis-dirbrowse-ilga-jcar) echo "https://www.ilga.gov/ftp/JCAR/AdminCode/001/" ;;
	iis-dirbrowse-nemweb-longdate) echo "https://nemweb.com.au/Reports/Current/ROOFTOP_PV/ACTUAL/" ;;
	*) echo "http://example.org/pub/dir/" ;;
	esac
}
for f in $fix/*.html $fix/*.json $fix/*.xml; do
	b=$(basename "$f")
	n=${b%.*}
	case $b in
	*.json) ct=application/json ;;
	*.xml) ct=text/xml ;;
	*) ct="text/html; charset=utf-8" ;;
	esac
	{ url_of "$n"; printf 'Content-Type: %s\n' "$ct"; cat "$f"; } \
	    > "$out/list_http/$n"
	cp "$f" "$out/list_http/bare-$n"
done

# list_ftp: the FTP LIST and MLSD replies.
for f in $fix/ftp-*.txt; do
	cp "$f" "$out/list_ftp/$(basename "$f")"
done
