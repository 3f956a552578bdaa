#!/bin/bash
# Symlinks on real globus-gridftp-server with follow_symlinks = no (the
# default), in stream and in extended mode.  GridFTP's MLSD names a link
# by its resolved absolute path (UNIX.slink=/srv/.../data/f1.txt): a
# target inside the "%2F" source is recreated as a relative symlink that
# leads to the same mirrored file or directory (before: every such link
# was "outside the mirror: recorded, not created"); one outside the
# source is recorded, not created.  A no-change run changes nothing.
# With follow_symlinks = yes, a link to a directory the server will not
# list fails alone: what lies beneath it is kept, the rest goes on.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup

S=$T/srv/tree
mkdir -p "$S/data/deep" "$T/srv/other"
printf 'one\n' > "$S/data/f1.txt"
printf 'two\n' > "$S/data/deep/f2.txt"
printf 'x\n' > "$T/srv/other/x.txt"
ln -s data/f1.txt "$S/link-file"
ln -s data "$S/link-dir"
ln -s ../f1.txt "$S/data/deep/up-file"
ln -s ../other/x.txt "$S/out"
touch -h -d '2022-03-04 05:06:07 UTC' "$S"/* "$S/data"/* "$S/data/deep"/*
chmod -R a+rX "$T/srv"
start_gridftp "$T/srv"

for mode in stream extended; do
	echo "# ftp_mode = $mode"
	rm -rf "$T/mirror" "$T/state"
	write_conf "${GRIDFTP_URL}tree/"
	printf 'ftp_mode = %s\n' "$mode" >> "$T/bm.conf"
	assert_exit 0 bm --json sync up
	for l in link-file link-dir data/deep/up-file; do
		[ -L "$T/mirror/$l" ] || fail "$mode: $l is not a symlink"
		case $(readlink "$T/mirror/$l") in
		/*) fail "$mode: $l points at an absolute path: $(readlink "$T/mirror/$l")" ;;
		esac
	done
	assert_eq "$(readlink "$T/mirror/link-file")" data/f1.txt "$mode: link-file"
	assert_eq "$(readlink "$T/mirror/link-dir")" data "$mode: link-dir"
	# The server gives the resolved path: made relative from data/deep.
	assert_eq "$(readlink "$T/mirror/data/deep/up-file")" ../../data/f1.txt "$mode: up-file"
	assert_eq "$(cat "$T/mirror/link-file")" one "$mode: link-file leads to f1.txt"
	assert_eq "$(cat "$T/mirror/link-dir/deep/f2.txt")" two "$mode: link-dir leads to data"
	assert_eq "$(cat "$T/mirror/data/deep/up-file")" one "$mode: up-file leads to f1.txt"
	[ -e "$T/mirror/out" ] || [ -L "$T/mirror/out" ] &&
	    fail "$mode: the link outside the source was created"
	grep -q 'out -> .*other/x.txt: symlink target outside the mirror: recorded, not created' \
	    "$LAST_ERR" || fail "$mode: no message for the link outside"
	grep -q 'link-file.*outside the mirror' "$LAST_ERR" &&
	    fail "$mode: link-file judged outside"
	assert_exit 0 bm --json sync up
	expect_counts 0 0 0 0
	# The link outside is recorded once, not again on every run.
	grep -q 'out -> ' "$LAST_ERR" && fail "$mode: the outside link recorded again: $(grep 'out -> ' "$LAST_ERR")"
	run=$(jfield run)
	assert_exit 0 bm history up --run "$run"
	grep -q 'out' "$LAST_OUT" && fail "$mode: history of a no-change run lists the outside link: $(cat "$LAST_OUT")"
done

# follow_symlinks = yes with a link to a directory outside the paths the
# server serves (-restrict-paths): the server refuses to list it ("550
# ... Path not allowed").  That link fails (exit 1, the server's reply
# in the error) and what the mirror holds beneath it is kept, while the
# rest of the tree, deletes included, goes on (before: the whole listing
# failed, exit 3, and no delete ever ran).
mkdir -p "$T/elsewhere/d" "$S/outdir"
printf 'x\n' > "$T/elsewhere/d/x.txt"
printf 'kept\n' > "$S/outdir/k.txt"
printf 'gone\n' > "$S/data/gone.txt"
chmod -R a+rX "$T/srv" "$T/elsewhere"
for mode in stream extended; do
	echo "# follow_symlinks, a link the server will not list, ftp_mode = $mode"
	rm -rf "$T/mirror" "$T/state" "$S/outdir"
	mkdir -p "$S/outdir"
	printf 'kept\n' > "$S/outdir/k.txt"
	printf 'gone\n' > "$S/data/gone.txt"
	chmod -R a+rX "$S"
	write_conf "${GRIDFTP_URL}tree/"
	printf 'ftp_mode = %s\nfollow_symlinks = yes\n' "$mode" >> "$T/bm.conf"
	assert_exit 0 bm --json sync up
	assert_eq "$(cat "$T/mirror/outdir/k.txt")" kept "$mode: outdir/k.txt mirrored"
	# outdir becomes a link to a directory outside -restrict-paths.
	rm -rf "$S/outdir" "$S/data/gone.txt"
	ln -s "$T/elsewhere/d" "$S/outdir"
	printf 'new\n' > "$S/data/new.txt"
	chmod a+r "$S/data/new.txt"
	for round in 1 2; do
		assert_exit 1 bm --json sync up
		assert_eq "$(jfield failed)" 1 "$mode round $round: failed"
		grep -q "up: outdir: followed symlink: the server refused to list it (.*5[0-9][0-9] .*Path not allowed.*): nothing beneath it fetched or deleted" \
		    "$LAST_ERR" || fail "$mode: message: $(grep outdir "$LAST_ERR")"
		assert_eq "$(cat "$T/mirror/outdir/k.txt")" kept "$mode round $round: outdir/k.txt kept"
		[ -e "$T/mirror/outdir/x.txt" ] && fail "$mode: a file beneath the refused link fetched"
		[ -e "$T/mirror/data/gone.txt" ] && fail "$mode round $round: data/gone.txt not deleted"
		assert_eq "$(cat "$T/mirror/data/new.txt")" new "$mode round $round: data/new.txt"
	done
	rm -f "$S/outdir" "$S/data/new.txt"
done
stop_servers
echo PASS
