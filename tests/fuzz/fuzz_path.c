/* Threat: a hostile listing's name, href or path must never pass the path validator and then escape the mirror root, nor crash the decoder. */
/*
 * Target for agent/listing.c: path_is_safe(), name_is_safe(),
 * path_decode() and path_encode() on arbitrary bytes, with the
 * invariants of listing.h checked on every accepted input.
 */
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "biomirror/listing.h"
#include "biomirror/store.h"
#include "fuzz.h"

#define TMP_PREFIX_LEN	(sizeof(STORE_TMP_PREFIX) - 1)

/* What name_is_safe() promises, restated independently. */
static bool
name_ok(const uint8_t *p, size_t n)
{
	size_t	 i;

	if (n == 0 || n > 255)
		return false;
	if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
		return false;
	if (n >= TMP_PREFIX_LEN && memcmp(p, STORE_TMP_PREFIX,
	    TMP_PREFIX_LEN) == 0)
		return false;
	for (i = 0; i < n; i++)
		if (p[i] < 0x20 || p[i] == 0x7f || p[i] == '/')
			return false;
	return true;
}

/*
 * Check an accepted path: relative, each component a safe name, and
 * resolving it lexically from a root never leaves the root.
 */
static void
check_safe_path(const uint8_t *p, size_t n)
{
	size_t	 start = 0, i;
	long	 depth = 0;

	FUZZ_CHECK(n > 0 && n < PATH_MAX && p[0] != '/');
	FUZZ_CHECK(memchr(p, '\0', n) == NULL);
	for (i = 0; i <= n; i++) {
		if (i < n && p[i] != '/')
			continue;
		FUZZ_CHECK(name_ok(p + start, i - start));
		FUZZ_CHECK(name_is_safe((const char *)p + start, i - start));
		depth++;
		FUZZ_CHECK(depth > 0);
		start = i + 1;
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char	*s = (const char *)data;
	char		*dec = NULL, *enc = NULL, *dec2 = NULL;
	size_t		 dlen = 0, d2len = 0;
	bool		 psafe, nsafe;
	int		 rc;

	nsafe = name_is_safe(s, size);
	FUZZ_CHECK(nsafe == name_ok(data, size));
	psafe = path_is_safe(s, size);
	if (psafe)
		check_safe_path(data, size);
	/* Without '/', a path is one name: both validators must agree. */
	if (size > 0 && memchr(data, '/', size) == NULL)
		FUZZ_CHECK(psafe == nsafe);

	rc = path_decode(s, size, &dec, &dlen);
	if (rc == 0) {
		FUZZ_CHECK(dec != NULL);
		FUZZ_CHECK(dlen <= size);
		FUZZ_CHECK(dec[dlen] == '\0');
		FUZZ_CHECK(strlen(dec) == dlen);	/* no decoded NUL */
		if (path_is_safe(dec, dlen))
			check_safe_path((const uint8_t *)dec, dlen);
		if (name_is_safe(dec, dlen))
			FUZZ_CHECK(memchr(dec, '/', dlen) == NULL);
		/* encode then decode gives the same bytes back */
		FUZZ_CHECK(path_encode(dec, dlen, &enc) == 0);
		FUZZ_CHECK(path_decode(enc, strlen(enc), &dec2, &d2len) == 0);
		FUZZ_CHECK(d2len == dlen && memcmp(dec, dec2, dlen) == 0);
		/* the encoded form holds no byte a URL path must escape */
		FUZZ_CHECK(strcspn(enc, " \"#<>?[\\]^`{|}") == strlen(enc));
	} else {
		FUZZ_CHECK(dec == NULL);
		/* an error only for a NUL, a bad escape or "%00" */
		FUZZ_CHECK(memchr(data, '\0', size) != NULL ||
		    memchr(data, '%', size) != NULL);
	}
	free(dec);
	free(enc);
	free(dec2);
	return 0;
}
