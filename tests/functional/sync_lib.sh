# Helpers shared by the sync tests (sourced after lib.sh).

# write_conf URL: a config for mirror "up" into $T/bm.conf.
write_conf() {
	cat > "$T/bm.conf" <<CONF
[global]
state_dir = $T/state-from-config

[up]
source = $1
dest = $T/mirror
delete = yes
concurrency = 8
CONF
}

# bm ARGS...: biomirror with this test's config and state dir.
bm() {
	"$BM" -c "$T/bm.conf" --state-dir "$T/state" "$@"
}

# jfield KEY: KEY of the first object in the JSON array in $T/last.out.
jfield() {
	python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[0][sys.argv[2]])' \
	    "$T/last.out" "$1"
}

# expect_counts FETCHED TOUCHED DELETED FAILED: checks the last --json run.
expect_counts() {
	assert_eq "$(jfield fetched)" "$1" "fetched"
	assert_eq "$(jfield touched)" "$2" "touched"
	assert_eq "$(jfield deleted)" "$3" "deleted"
	assert_eq "$(jfield failed)" "$4" "failed"
}

# no_temps DIR: no temp file of ours is left in DIR.
no_temps() {
	local left
	left=$(find "$1" -name '.biomirror-tmp.*' | head -5)
	[ -z "$left" ] || fail "temp files left: $left"
}

# tree_sum DIR: a fingerprint of names, sizes, mtimes and bytes.
tree_sum() {
	(cd "$1" && find . -printf '%y %s %T@ %P\n' | LC_ALL=C sort &&
	    find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r cat) |
	    sha256sum | cut -d' ' -f1
}
