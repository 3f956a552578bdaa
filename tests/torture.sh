#!/bin/sh
# Allocation-failure loop (STYLE.md rule 54; curl's "torture" tests):
# each argument is a unit test built with tests/unit/failmalloc.c (make
# torture, under ASan and UBSan from make sanitize).  A first run with
# BM_FAIL_ALLOC=0 counts the allocations (COUNT); then the test runs once
# per failure point N (every one up to TORTURE_MAX points, else evenly
# spaced ones), with the Nth allocation failing.  An injected failure may
# make the test's own checks fail ("not ok": the code under test reported
# the error), but never crash, hang, or make a sanitizer report (use after
# free, double free, undefined behaviour, a leak on the error path): those
# fail the loop, with the failure point and the report.
# Usage: tests/torture.sh BIN...   (TORTURE_MAX, default 120)
max=${TORTURE_MAX:-120}
mkdir -p tests/out
# Sanitizers: a distinct exit status for a report; leaks checked.
ASAN_OPTIONS="exitcode=86:detect_leaks=1:abort_on_error=0:allocator_may_return_null=1"
UBSAN_OPTIONS="halt_on_error=1:exitcode=86:print_stacktrace=1"
LSAN_OPTIONS="exitcode=86"
export ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS
# The curl module of the build tree (not beside tests/unit/).
BM_CURL_MODULE=${BM_CURL_MODULE:-$PWD/libbiomirror-curl.so}
export BM_CURL_MODULE
fail=0
for t in "$@"; do
	name=$(basename "$t")
	log=tests/out/torture-$name.log
	count=$(BM_FAIL_ALLOC=0 timeout 120 "./$t" 2>&1 >/dev/null |
	    sed -n 's/^failmalloc: \([0-9]*\) allocations$/\1/p')
	if [ -z "$count" ] || [ "$count" -eq 0 ]; then
		echo "FAIL: torture/$name: no allocation count (not built with failmalloc?)"
		fail=$((fail + 1))
		continue
	fi
	step=$(( (count + max - 1) / max ))
	[ "$step" -ge 1 ] || step=1
	n=1 runs=0 bad=0
	: > "$log"
	while [ "$n" -le "$count" ]; do
		BM_FAIL_ALLOC=$n timeout 60 "./$t" > "$log.run" 2>&1
		rc=$?
		runs=$((runs + 1))
		case $rc in
		0|1) ;;		# passed, or reported the failure as "not ok"
		*)
			bad=$((bad + 1))
			{ echo "== failure point $n: exit $rc"
			  grep -E 'ERROR|runtime error|SUMMARY|#[0-9]+ 0x' "$log.run" | head -30
			} >> "$log"
			[ "$bad" -ge 5 ] && break ;;
		esac
		n=$((n + step))
	done
	rm -f "$log.run"
	if [ "$bad" -eq 0 ]; then
		echo "PASS: torture/$name ($count allocations, $runs failure points)"
	else
		echo "FAIL: torture/$name ($bad of $runs failure points crashed or reported)"
		head -60 "$log"
		fail=$((fail + 1))
	fi
done
[ "$fail" -eq 0 ]
