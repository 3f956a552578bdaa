#!/bin/sh
# tests/comments.sh [-v] [--max-long N] [ROOT]: how long the comments are
# (STYLE.md section C).  Prints the share of header lines that are comment
# lines (include/biomirror/*.h and the folders' *_int.h) and the number of
# block comments over 12 lines in all C sources; -v lists each header's
# share and each long block.  Exits 1 when --max-long N is given and more
# than N blocks are over 12 lines; otherwise 0.  Not part of make check.
verbose=0 maxlong=
while [ $# -gt 0 ]; do
	case $1 in
	-v) verbose=1; shift ;;
	--max-long) maxlong=$2; shift 2 ;;
	*) break ;;
	esac
done
cd "${1:-.}" || exit 1
out=$(mktemp "${TMPDIR:-/tmp}/bmcomments.XXXXXX") || exit 1
trap 'rm -f "$out"' EXIT

HDRS=$(ls include/biomirror/*.h agent/*/*_int.h 2>/dev/null)
SRCS=$(ls agent/*.c agent/*/*.c agent/*/*.cpp manifest/*.c 2>/dev/null)

# Per file: a line is a comment line when it holds comment text and no
# code; a block is a comment that opens on a line without code before it
# (a trailing field comment is not a block).  String and character
# literals are skipped so that "/*" inside them opens nothing.
awk -v verbose="$verbose" -v nhdr="$(echo "$HDRS" | wc -w)" '
FNR == 1 { st = 0; inblock = 0; file = FILENAME; ishdr = (++fileno <= nhdr) }
{
	code = 0; cmt = (st == 1); n = length($0); i = 1
	while (i <= n) {
		c = substr($0, i, 1); d = substr($0, i, 2)
		if (st == 1) {
			if (d == "*/") {
				st = 0; i += 2
				if (inblock) {
					len = FNR - bstart + 1; nblock++
					if (len > 1) nmulti++
					if (len > 12) {
						nlong++
						if (verbose)
							printf "long: %s:%d: %d lines\n",
							    file, bstart, len
					}
					inblock = 0
				}
			} else
				i++
			continue
		}
		if (st >= 2) {
			if (c == "\\") { i += 2; continue }
			if ((st == 2 && c == "\"") || (st == 3 && c == "\047"))
				st = 0
			i++; continue
		}
		if (d == "/*") {
			st = 1; cmt = 1; i += 2
			if (!code) { inblock = 1; bstart = FNR }
			continue
		}
		if (d == "//") { cmt = 1; break }
		if (c == "\"") st = 2
		else if (c == "\047") st = 3
		if (c != " " && c != "\t") code = 1
		i++
	}
	if (st >= 2) st = 0
	if (ishdr) {
		lines[file]++; hl++
		if (cmt && !code) { clines[file]++; hc++ }
	}
}
END {
	if (verbose)
		for (f in lines)
			printf "header: %s: %d of %d lines comments (%.0f%%)\n",
			    f, clines[f], lines[f], 100 * clines[f] / lines[f]
	printf "headers: %d of %d lines are comments (%.1f%%)\n",
	    hc, hl, hl ? 100 * hc / hl : 0
	printf "blocks: %d of %d block comments (%d of more than one line) are over 12 lines (%.1f%%, %.1f%%)\n",
	    nlong, nblock, nmulti, nblock ? 100 * nlong / nblock : 0,
	    nmulti ? 100 * nlong / nmulti : 0
	printf "long=%d\n", nlong
}' $HDRS $SRCS > "$out" || exit 1
grep -v '^long=' "$out" | sort
long=$(sed -n 's/^long=//p' "$out")
if [ -n "$maxlong" ] && [ "$long" -gt "$maxlong" ]; then
	echo "comments: $long block comments over 12 lines (at most $maxlong)" >&2
	exit 1
fi
exit 0
