#!/bin/sh
# make check: run every unit test binary (arguments) and every functional
# test script (tests/functional/t_*.sh), then print the closing line
# "N passed, N failed".  A functional script exits 0 (pass) or non-zero
# (fail); there is no skip status.  Logs go to tests/out/.
mkdir -p tests/out
pass=0 fail=0 failed=""
for t in "$@"; do
	name=$(basename "$t")
	# The curl module of the build tree (not beside tests/unit/).
	if BM_CURL_MODULE=${BM_CURL_MODULE:-$PWD/libbiomirror-curl.so} \
	    "./$t" > "tests/out/$name.log" 2>&1; then
		pass=$((pass + 1)); echo "PASS: unit/$name"
	else
		fail=$((fail + 1)); failed="$failed unit/$name"
		echo "FAIL: unit/$name"
		grep -E '^(not ok|#)' "tests/out/$name.log" | head -40
	fi
done
for t in tests/functional/t_*.sh; do
	[ -e "$t" ] || continue
	name=$(basename "$t" .sh)
	start=$(date +%s)
	if timeout 600 bash "$t" > "tests/out/$name.log" 2>&1; then
		pass=$((pass + 1))
		echo "PASS: functional/$name ($(( $(date +%s) - start ))s)"
	else
		fail=$((fail + 1)); failed="$failed functional/$name"
		echo "FAIL: functional/$name"
		tail -40 "tests/out/$name.log"
	fi
done
[ -n "$failed" ] && echo "failed:$failed"
echo "check: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
