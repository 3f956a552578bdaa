/* Threat: a hostile HTTP server's index pages and redirects must not make the crawl hang, crash, request a URL outside the source (another host, a parent directory) or list an unsafe path. */
/*
 * Target for list_http_crawl() (agent/lister/http.c).  The input is a
 * sequence of index pages separated by lines "----", served as text/html
 * with status 200 in the order the crawl asks for them; a page whose
 * first line is "Location: URL" was redirected there (effective URL).
 * Once the pages run out, directories are empty pages; past FUZZ_MAX_REQ
 * requests every fetch fails.  Seeds: tests/fuzz/corpus/crawl_http/.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "biomirror/error.h"
#include "biomirror/list_http.h"
#include "biomirror/listing.h"
#include "fuzz.h"

#define SOURCE	"http://h/pub/"
#define LOC	"Location: "

static int
fetch(void *ctx, struct http_page *pages, size_t n)
{
	struct fuzz_script *s = ctx;
	const uint8_t	*body, *nl;
	size_t		 i, len, ll;

	for (i = 0; i < n; i++) {
		struct http_page *pg = &pages[i];

		FUZZ_CHECK(pg->url != NULL && pg->command == NULL);
		fuzz_check_crawl_url(pg->url, SOURCE);
		if (!fuzz_script_next(s, pg, &body, &len))
			continue;
		if (len > strlen(LOC) && memcmp(body, LOC, strlen(LOC)) == 0 &&
		    (nl = memchr(body, '\n', len)) != NULL &&
		    memchr(body, '\0', (size_t)(nl - body)) == NULL) {
			ll = (size_t)(nl - body) - strlen(LOC);
			FUZZ_CHECK((pg->effective_url = strndup((const char *)
			    body + strlen(LOC), ll)) != NULL);
			len -= (size_t)(nl + 1 - body);
			body = nl + 1;
		}
		pg->rc = 0;
		pg->status = 200;
		pg->len = len;
		FUZZ_CHECK((pg->content_type = strdup("text/html")) != NULL);
		FUZZ_CHECK((pg->body = malloc(len + 1)) != NULL);
		memcpy(pg->body, body, len);
		pg->body[len] = '\0';
	}
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_script	 s = { data, size, 0, 0 };
	struct crawl_opts	 o;
	struct listing		*l;
	char			 err[256];
	size_t			 loops = 0, skipped = 0, i;
	int			 rc;

	memset(&o, 0, sizeof(o));
	o.max_depth = 6;
	o.max_entries = 0;
	o.batch = 3;
	o.ret_loops = &loops;
	o.ret_skipped = &skipped;
	FUZZ_CHECK((l = listing_new(20000)) != NULL);
	err[0] = '\0';
	rc = list_http_crawl(SOURCE, &o, fetch, &s, l, err, sizeof(err));
	FUZZ_CHECK(rc <= 0);
	if (rc != 0 && rc != BM_ENOMEM)
		FUZZ_CHECK(err[0] != '\0');
	if (getenv("FUZZ_VERBOSE") != NULL) {
		(void)fprintf(stderr, "rc=%d err=%s loops=%zu skipped=%zu\n",
		    rc, err, loops, skipped);
		for (i = 0; i < listing_count(l); i++)
			(void)fprintf(stderr, "  %c %s\n",
			    (char)listing_get(l, i)->type,
			    listing_get(l, i)->path);
	}
	fuzz_check_listing(l, NULL);
	listing_free(l);
	return 0;
}
