/*
 * Escapes for byte strings from upstream (agent/text.c): valid UTF-8 is
 * kept, anything else shown as "\xHH", so that no name is dropped and
 * none rewrites a terminal; and the hashes of names and keys for
 * in-memory tables.
 */
#ifndef BIOMIRROR_TEXT_H
#define BIOMIRROR_TEXT_H

#include <stddef.h>
#include <stdint.h>

/*
 * Make a JSON-safe copy of the byte string s: valid UTF-8 is kept, each
 * invalid byte becomes "\xHH" (backslash, x, two uppercase hex digits)
 * and a backslash becomes two, so the escaping can be undone without
 * ambiguity.  *ret is malloc'd.  Returns 0 or BM_ENOMEM.
 */
int	text_utf8_escape(const char *s, char **ret);
/*
 * Copy the byte string s into buf (len bytes; always NUL-terminated when
 * len > 0, cut short at a whole character when it does not fit) for a
 * terminal or the journal: as text_utf8_escape(), each byte of
 * invalid UTF-8 becomes "\xHH", and so does each byte of a C0 control
 * (newline, ESC, ...), DEL, a C1 control, or a Unicode bidirectional
 * override or isolate (U+202A-U+202E, U+2066-U+2069), which could
 * rewrite or reorder what is shown; a backslash stays single (log lines
 * are read, not parsed back).  Never fails.
 */
void	text_term_escape(const char *s, char *buf, size_t len);
/*
 * FNV-1a (64-bit) of the len bytes at p: the hash of the in-memory
 * tables of names (listers, the store's kept lstats); not a digest.
 */
uint64_t	text_fnv1a(const void *p, size_t len);

/*
 * splitmix64's finalizer (Steele, Lea, Flood 2014): every bit of z
 * reaches every bit of the result.  For spreading keys over in-memory
 * tables and for names that must not repeat; not a digest.
 */
static inline uint64_t
text_mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}
/* splitmix64's increment, the golden ratio in 64 bits. */
#define TEXT_GOLDEN64	UINT64_C(0x9e3779b97f4a7c15)

#endif
