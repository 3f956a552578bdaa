/*
 * Byte strings from upstream (names, server replies) made safe to show:
 * UTF-8 validation (RFC 3629) and the two escapes, for JSON and for a
 * terminal or the journal; FNV-1a for tables of names.  Below log.c and
 * report.c, which both use it; it calls nothing and never fails but on
 * out-of-memory.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "biomirror/error.h"
#include "biomirror/text.h"

/*
 * Length of the well-formed UTF-8 sequence at p (n bytes left), or 0 if
 * it is not one (RFC 3629 section 4: no overlong forms, no surrogates
 * U+D800..DFFF, nothing above U+10FFFF).
 */
static size_t
utf8_seq_len(const unsigned char *p, size_t n)
{
	unsigned char	 lo = 0x80, hi = 0xbf;
	size_t		 len, k;

	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		len = 2;
	else if (p[0] >= 0xe0 && p[0] <= 0xef) {
		len = 3;
		if (p[0] == 0xe0)
			lo = 0xa0;
		else if (p[0] == 0xed)
			hi = 0x9f;
	} else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
		len = 4;
		if (p[0] == 0xf0)
			lo = 0x90;
		else if (p[0] == 0xf4)
			hi = 0x8f;
	} else
		return 0;
	if (n < len || p[1] < lo || p[1] > hi)
		return 0;
	for (k = 2; k < len; k++)
		if ((p[k] & 0xc0) != 0x80)
			return 0;
	return len;
}

/* See include/biomirror/text.h. */
int
text_utf8_escape(const char *s, char **ret)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t		 n = strlen(s), i = 0, o = 0, need;
	char		*out;

	if ((out = malloc(n * 4 + 1)) == NULL)
		return BM_ENOMEM;
	while (i < n) {
		need = utf8_seq_len(p + i, n - i);
		if (need == 0) {
			(void)snprintf(out + o, 5, "\\x%02X", p[i]);
			o += 4;
			i++;
			continue;
		}
		if (p[i] == '\\') {
			/* Doubled, so that "\\xE9" (a real backslash) differs. */
			out[o++] = '\\';
			out[o++] = '\\';
			i++;
			continue;
		}
		memcpy(out + o, p + i, need);
		o += need;
		i += need;
	}
	out[o] = '\0';
	*ret = out;
	return 0;
}

/*
 * Whether the valid UTF-8 sequence p (need bytes) must not reach a
 * terminal or the journal as it is: a C0 control or DEL, a C1 control
 * (U+0080-U+009F), or a bidirectional embedding, override or isolate
 * (U+202A-U+202E, U+2066-U+2069: they reorder the text shown; Unicode
 * UAX #9).
 */
static bool
text_unsafe(const unsigned char *p, size_t need)
{
	if (need == 1)
		return p[0] < 0x20 || p[0] == 0x7f;
	if (need == 2)
		return p[0] == 0xc2 && p[1] < 0xa0;
	return need == 3 && p[0] == 0xe2 && ((p[1] == 0x80 && p[2] >= 0xaa &&
	    p[2] <= 0xae) || (p[1] == 0x81 && p[2] >= 0xa6 && p[2] <= 0xa9));
}

/* See include/biomirror/text.h. */
void
text_term_escape(const char *s, char *buf, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t		 n = strlen(s), i = 0, o = 0, need, k;

	if (len == 0)
		return;
	while (i < n) {
		need = utf8_seq_len(p + i, n - i);
		if (need == 0 || text_unsafe(p + i, need)) {
			if (need == 0)
				need = 1;
			if (o + 4 * need >= len)
				break;
			for (k = 0; k < need; k++, o += 4)
				(void)snprintf(buf + o, 5, "\\x%02X", p[i + k]);
			i += need;
			continue;
		}
		if (o + need >= len)
			break;
		memcpy(buf + o, p + i, need);
		o += need;
		i += need;
	}
	buf[o] = '\0';
}

uint64_t
text_fnv1a(const void *p, size_t len)
{
	const unsigned char *b = p;
	uint64_t	 h = UINT64_C(14695981039346656037);
	size_t		 i;

	for (i = 0; i < len; i++)
		h = (h ^ b[i]) * UINT64_C(1099511628211);
	return h;
}
