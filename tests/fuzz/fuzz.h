/*
 * Shared helpers of the libFuzzer targets in tests/fuzz/ (STYLE.md rule
 * 53).  FUZZ_CHECK() aborts with the failed invariant, so that libFuzzer
 * records the input as a crash.
 */
#ifndef BIOMIRROR_FUZZ_H
#define BIOMIRROR_FUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define FUZZ_CHECK(cond) do {						\
	if (!(cond)) {							\
		(void)fprintf(stderr, "%s:%d: invariant failed: %s\n",	\
		    __FILE__, __LINE__, #cond);				\
		abort();						\
	}								\
} while (0)

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int	LLVMFuzzerInitialize(int *argc, char ***argv);

struct listing;
/*
 * Check every entry of a listing a parser filled from hostile bytes
 * (fuzz_listing.c): its path is prefix + "/" + a name_is_safe() name
 * (prefix "" for the root; NULL for a crawl: any safe relative path),
 * path_is_safe(), a known type, consistent sizes and times.
 */
void	fuzz_check_listing(const struct listing *l, const char *prefix);

struct http_page;

/*
 * The crawl targets' scripted server: the input is a sequence of pieces
 * (replies, pages) separated by "\n----\n", served one per request.
 */
#define FUZZ_MAX_REQ	64	/* requests served; later ones fail */
struct fuzz_script {
	const uint8_t	*data;		/* borrowed: the fuzz input */
	size_t		 size;
	size_t		 pos;		/* next piece starts here */
	unsigned	 nreq;		/* requests so far */
};
/*
 * The reply to one more request: true with *ret and *ret_len set to the
 * next piece (borrowed from s->data; empty once the input runs out), or,
 * past FUZZ_MAX_REQ requests, false with pg->rc = BM_ENET and a reason.
 */
bool	fuzz_script_next(struct fuzz_script *s, struct http_page *pg,
	    const uint8_t **ret, size_t *ret_len);
/*
 * A crawl's request URL must be source, then a path_decode()-able,
 * path_is_safe() relative path and a final '/' (or source itself).
 */
void	fuzz_check_crawl_url(const char *url, const char *source);

#endif
