/* Threat: a hostile server's index page (HTML, nginx JSON/XML) must not crash, hang or make biomirror accept an unsafe name or a path outside the page's directory. */
/*
 * Target for list_http_parse() (agent/lister/http.c).  Input: optional
 * first line "http[s]://..." (the page URL, else
 * http://example.org/pub/dir/), optional next line "Content-Type: ..."
 * (else text/html), then the page body.  Seeds: every index fixture of
 * tests/fixtures/ (tests/fuzz/seeds.sh).
 */
#include <stdbool.h>
#include <string.h>

#include "biomirror/error.h"
#include "biomirror/list_http.h"
#include "biomirror/listing.h"
#include "fuzz.h"

#define MAX_HDR	1024

/* Take one header line off the front of *p if it starts with tag. */
static bool
take_line(const uint8_t **p, size_t *n, const char *tag, char *buf,
    size_t bufsz)
{
	const uint8_t	*nl;
	size_t		 tl = strlen(tag), l;

	if (*n < tl || strncasecmp((const char *)*p, tag, tl) != 0)
		return false;
	if ((nl = memchr(*p, '\n', *n)) == NULL)
		return false;
	l = (size_t)(nl - *p);
	if (l >= bufsz || memchr(*p, '\0', l) != NULL)
		return false;
	memcpy(buf, *p, l);
	buf[l] = '\0';
	if (l > 0 && buf[l - 1] == '\r')
		buf[l - 1] = '\0';
	*p = nl + 1;
	*n -= l + 1;
	return true;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char		 url[MAX_HDR] = "http://example.org/pub/dir/";
	char		 ctline[MAX_HDR] = "Content-Type: text/html";
	char		 err[256];
	const char	*prefix = "dir";
	struct listing	*l;
	enum page_format fmt = PAGE_GENERIC;
	size_t		 skipped = 0;
	int		 rc;

	if (take_line(&data, &size, "http", url, sizeof(url)))
		prefix = "a/b";
	(void)take_line(&data, &size, "Content-Type: ", ctline,
	    sizeof(ctline));
	FUZZ_CHECK((l = listing_new(100000)) != NULL);
	err[0] = '\0';
	rc = list_http_parse(data, size, ctline + 14, url, prefix, l, &fmt,
	    &skipped, err, sizeof(err));
	FUZZ_CHECK(rc == 0 || rc == BM_EPROTO || rc == BM_ENOMEM ||
	    rc == BM_ELIMIT);
	if (rc == 0) {
		FUZZ_CHECK(page_format_name(fmt) != NULL);
		fuzz_check_listing(l, prefix);
	} else {
		FUZZ_CHECK(listing_count(l) == 0);
		if (rc == BM_EPROTO)
			FUZZ_CHECK(err[0] != '\0');
	}
	listing_free(l);
	return 0;
}
