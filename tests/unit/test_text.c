/*
 * Unit tests for agent/text.c: the escaping of names that are not UTF-8
 * (RFC 3629: overlong forms, surrogates and code points above U+10FFFF
 * are not UTF-8 either), for JSON and for a terminal or the journal.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "biomirror/text.h"
#include "tap.h"

static void
esc(const char *in, const char *want, const char *what)
{
	char	*out = NULL;

	if (!ok(text_utf8_escape(in, &out) == 0, "escape %s", what))
		return;
	is_str(out, want, "%s", what);
	free(out);
}

static void
test_escape(void)
{
	esc("plain.txt", "plain.txt", "ASCII kept");
	esc("caf\xc3\xa9", "caf\xc3\xa9", "valid 2-byte kept");
	esc("\xe6\x97\xa5\xe6\x9c\xac", "\xe6\x97\xa5\xe6\x9c\xac",
	    "valid 3-byte kept");
	esc("\xf0\x9f\x98\x80", "\xf0\x9f\x98\x80", "valid 4-byte kept");
	esc("caf\xe9.txt", "caf\\xE9.txt", "Latin-1 byte escaped");
	esc("a\\xE9", "a\\\\xE9", "a literal backslash is doubled");
	esc("\xed\xa0\x80", "\\xED\\xA0\\x80", "surrogate U+D800 escaped");
	esc("\xf4\x90\x80\x80", "\\xF4\\x90\\x80\\x80",
	    "above U+10FFFF escaped");
	esc("\xc0\xaf", "\\xC0\\xAF", "overlong '/' escaped");
	esc("\xe0\x80\xaf", "\\xE0\\x80\\xAF", "overlong 3-byte escaped");
	esc("\xf0\x80\x80\xaf", "\\xF0\\x80\\x80\\xAF",
	    "overlong 4-byte escaped");
	esc("x\xe6\x97", "x\\xE6\\x97", "truncated sequence escaped");
	esc("\xff\xfe", "\\xFF\\xFE", "invalid lead bytes escaped");
}

static void
text(const char *in, size_t len, const char *want, const char *what)
{
	char	 buf[64];

	text_term_escape(in, buf, len);
	is_str(buf, want, "%s", what);
}

/* Log lines: controls, bidi overrides and invalid UTF-8 as \xHH. */
static void
test_text_escape(void)
{
	text("plain a\\b", 64, "plain a\\b", "ASCII and a backslash kept");
	text("caf\xc3\xa9 \xe6\x97\xa5", 64, "caf\xc3\xa9 \xe6\x97\xa5",
	    "valid UTF-8 kept");
	text("a\nb\tc\x1b[31md\x7f", 64, "a\\x0Ab\\x09c\\x1B[31md\\x7F",
	    "C0 controls and DEL escaped");
	text("x\xc2\x9by", 64, "x\\xC2\\x9By", "a C1 control escaped");
	text("evil\xe2\x80\xaetxt.exe", 64, "evil\\xE2\\x80\\xAEtxt.exe",
	    "U+202E RIGHT-TO-LEFT OVERRIDE escaped");
	text("\xe2\x81\xa6i\xe2\x81\xa9", 64,
	    "\\xE2\\x81\\xA6i\\xE2\\x81\\xA9", "U+2066/U+2069 isolates escaped");
	text("\xe2\x80\x94", 64, "\xe2\x80\x94", "U+2014 EM DASH kept");
	text("caf\xe9", 64, "caf\\xE9", "invalid UTF-8 escaped");
	text("abcdef", 4, "abc", "cut short, NUL-terminated");
	text("ab\x01", 5, "ab", "an escape that does not fit is left out whole");
	text("a\xe6\x97\xa5", 3, "a", "a character that does not fit is left out whole");
}

/* text_fnv1a: the published FNV-1a 64-bit vectors. */
static void
test_fnv1a(void)
{
	ok(text_fnv1a("", 0) == UINT64_C(0xcbf29ce484222325), "fnv1a of ''");
	ok(text_fnv1a("a", 1) == UINT64_C(0xaf63dc4c8601ec8c), "fnv1a of 'a'");
	ok(text_fnv1a("foobar", 6) == UINT64_C(0x85944171f73967e8),
	    "fnv1a of 'foobar'");
	ok(text_fnv1a("ab", 1) == text_fnv1a("a", 1), "fnv1a reads len bytes");
}

int
main(void)
{
	test_escape();
	test_text_escape();
	test_fnv1a();
	return done_testing();
}
