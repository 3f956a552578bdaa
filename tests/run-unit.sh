#!/bin/sh
# Run each unit test binary given as an argument; print a summary line.
pass=0 fail=0
# The curl module of the build tree (not beside tests/unit/).
BM_CURL_MODULE=${BM_CURL_MODULE:-$PWD/libbiomirror-curl.so}
export BM_CURL_MODULE
for t in "$@"; do
	if "./$t" > "$t.log" 2>&1; then
		pass=$((pass + 1)); echo "PASS: $t"
	else
		fail=$((fail + 1)); echo "FAIL: $t"; grep -E '^(not ok|#)' "$t.log" | head -40
	fi
done
echo "unit: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
