/* Threat: a hostile FTP server's replies (directories, symlink chains and loops, repeated unique= facts) must not make the crawl hang, crash, request a path outside the source or list an unsafe path. */
/*
 * Target for list_ftp_crawl() (agent/lister/ftp.c), with and without
 * follow_symlinks.  The input is a sequence of replies separated by lines
 * "----": the first answers FEAT, the following ones answer the MLSD or
 * LIST requests in the order the crawl makes them; once they run out,
 * directories are empty, and past FUZZ_MAX_REQ requests every fetch fails.
 * Seeds: tests/fuzz/corpus/crawl_ftp/.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "biomirror/error.h"
#include "biomirror/list_ftp.h"
#include "biomirror/listing.h"
#include "fuzz.h"

#define SOURCE	"ftp://h/pub/"

struct server {
	struct fuzz_script script;	/* the replies */
	bool		 feat_seen;
};

static int
fetch(void *ctx, struct http_page *pages, size_t n)
{
	struct server	*s = ctx;
	const uint8_t	*body;
	size_t		 i, len;

	for (i = 0; i < n; i++) {
		struct http_page *pg = &pages[i];

		FUZZ_CHECK(pg->url != NULL && pg->command != NULL);
		fuzz_check_crawl_url(pg->url, SOURCE);
		if (strcmp(pg->command, "FEAT") == 0) {
			FUZZ_CHECK(!s->feat_seen);
			s->feat_seen = true;
		} else
			FUZZ_CHECK(strcmp(pg->command, "MLSD") == 0 ||
			    strcmp(pg->command, "LIST") == 0);
		if (!fuzz_script_next(&s->script, pg, &body, &len))
			continue;
		pg->rc = 0;
		pg->status = 226;
		pg->len = len;
		FUZZ_CHECK((pg->body = malloc(len + 1)) != NULL);
		memcpy(pg->body, body, len);
		pg->body[len] = '\0';
	}
	return 0;
}

static void
crawl(const uint8_t *data, size_t size, bool follow)
{
	struct server		 s = { { data, size, 0, 0 }, false };
	struct ftp_crawl_opts	 o;
	struct listing		*l;
	char			 err[256];
	size_t			 loops = 0, skipped = 0, dangling = 0;
	bool			 mlsd = false, gridftp = false;
	int			 rc;

	memset(&o, 0, sizeof(o));
	o.max_depth = 6;
	o.batch = 3;
	o.now_wall = 1796040000LL;	/* 2026-11-30 12:00 */
	o.ret_mlsd = &mlsd;
	o.ret_gridftp = &gridftp;
	o.ret_loops = &loops;
	o.ret_skipped = &skipped;
	o.follow = follow;
	o.ret_dangling = &dangling;
	FUZZ_CHECK((l = listing_new(20000)) != NULL);
	err[0] = '\0';
	rc = list_ftp_crawl(SOURCE, &o, fetch, &s, l, err, sizeof(err));
	FUZZ_CHECK(rc <= 0);
	if (getenv("FUZZ_VERBOSE") != NULL) {
		size_t	 i;

		(void)fprintf(stderr, "follow=%d rc=%d err=%s loops=%zu "
		    "dangling=%zu\n", follow, rc, err, loops, dangling);
		for (i = 0; i < listing_count(l); i++)
			(void)fprintf(stderr, "  %c %s %lld\n",
			    (char)listing_get(l, i)->type,
			    listing_get(l, i)->path,
			    (long long)listing_get(l, i)->size);
	}
	if (rc != 0 && rc != BM_ENOMEM)
		FUZZ_CHECK(err[0] != '\0');
	fuzz_check_listing(l, NULL);
	listing_free(l);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	crawl(data, size, false);
	crawl(data, size, true);
	return 0;
}
