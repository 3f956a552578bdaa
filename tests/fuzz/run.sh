#!/bin/sh
# Run the fuzz targets (paths without spaces) (tests/fuzz/README.md).  Run from the top of the tree.
#   sh tests/fuzz/run.sh smoke 0 NAME...	replay the seeds, then 2000
#						fixed-seed mutations each
#   sh tests/fuzz/run.sh run SECONDS NAME...	fuzz each for SECONDS, growing
#						tests/fuzz/out/corpus/NAME
# Crashes, leaks and sanitizer reports are saved as
# tests/fuzz/out/artifacts/NAME-crash-*; the exit status is 1 if any
# target failed.
set -u
mode=$1
secs=$2
shift 2
out=tests/fuzz/out
sh tests/fuzz/seeds.sh "$out/seeds" || exit 1
mkdir -p "$out/artifacts"
fail=0
for n in "$@"; do
	bin=tests/fuzz/fuzz_$n
	log=$out/$n.log
	case $mode in
	smoke)
		rm -rf "$out/smoke/$n"
		mkdir -p "$out/smoke/$n"
		args="-runs=2000 -seed=1 $out/smoke/$n $out/seeds/$n"
		;;
	run)
		mkdir -p "$out/corpus/$n"
		args="-max_total_time=$secs $out/corpus/$n $out/seeds/$n"
		;;
	*)
		echo "run.sh: unknown mode $mode" >&2
		exit 2
		;;
	esac
	if "$bin" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
	    -artifact_prefix="$out/artifacts/$n-" $args > "$log" 2>&1; then
		echo "ok fuzz_$n: $(ls "$out/seeds/$n" | wc -l) seeds," \
		    "$(sed -n 's/^stat::number_of_executed_units: *//p' \
		    "$log") runs"
	else
		echo "FAIL fuzz_$n (log: $log)"
		tail -40 "$log"
		fail=1
	fi
done
exit $fail
