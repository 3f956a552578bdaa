/*
 * Invariants of a listing a parser built from hostile bytes, and the
 * crawl targets' scripted server, shared by the listing fuzz targets (not
 * a target itself).
 */
#include <string.h>

#include "biomirror/error.h"
#include "biomirror/list_http.h"
#include "biomirror/listing.h"
#include "fuzz.h"

void
fuzz_check_listing(const struct listing *l, const char *prefix)
{
	const struct entry	*e;
	const char		*name;
	size_t			 i, pl = prefix != NULL ? strlen(prefix) : 0, n;

	for (i = 0; i < listing_count(l); i++) {
		e = listing_get(l, i);
		FUZZ_CHECK(e != NULL && e->path != NULL);
		n = strlen(e->path);
		FUZZ_CHECK(path_is_safe(e->path, n));
		if (prefix == NULL)
			name = NULL;	/* a crawl: any depth */
		else if (pl > 0) {
			FUZZ_CHECK(n > pl + 1 &&
			    memcmp(e->path, prefix, pl) == 0 &&
			    e->path[pl] == '/');
			name = e->path + pl + 1;
		} else
			name = e->path;
		if (name != NULL)
			FUZZ_CHECK(name_is_safe(name, strlen(name)));
		FUZZ_CHECK(e->type == ENTRY_FILE || e->type == ENTRY_DIR ||
		    e->type == ENTRY_SYMLINK);
		FUZZ_CHECK(e->size >= -1);
		if (e->size_exact)
			FUZZ_CHECK(e->size >= 0 && e->size_min == e->size &&
			    e->size_max == e->size);
		if (e->size_min >= 0 && e->size_max >= 0)
			FUZZ_CHECK(e->size_min <= e->size_max);
		if (e->size >= 0 && e->size_min >= 0 && e->size_max >= 0)
			FUZZ_CHECK(e->size_min <= e->size &&
			    e->size <= e->size_max);
		FUZZ_CHECK(e->mtime_nsec >= 0 && e->mtime_nsec < 1000000000);
		FUZZ_CHECK(e->mtime_prec >= MTIME_UNKNOWN &&
		    e->mtime_prec <= MTIME_NS);
		if (e->zone_stated)
			FUZZ_CHECK(e->zone_offset > -86400 &&
			    e->zone_offset < 86400);
	}
}

bool
fuzz_script_next(struct fuzz_script *s, struct http_page *pg,
    const uint8_t **ret, size_t *ret_len)
{
	static const char sep[] = "\n----\n";
	const uint8_t	*p = s->data + s->pos, *q;
	size_t		 left = s->size - s->pos;

	if (++s->nreq > FUZZ_MAX_REQ) {
		pg->rc = BM_ENET;
		(void)snprintf(pg->errmsg, sizeof(pg->errmsg),
		    "fuzz: too many requests");
		return false;
	}
	q = memmem(p, left, sep, sizeof(sep) - 1);
	*ret = p;
	*ret_len = q != NULL ? (size_t)(q - p) : left;
	s->pos = q != NULL ? (size_t)(q - s->data) + sizeof(sep) - 1 : s->size;
	return true;
}

void
fuzz_check_crawl_url(const char *url, const char *source)
{
	size_t	 sl = strlen(source), l = strlen(url), dl;
	char	*dec = NULL;

	FUZZ_CHECK(l >= sl && memcmp(url, source, sl) == 0);
	FUZZ_CHECK(url[l - 1] == '/');
	if (l == sl)
		return;
	FUZZ_CHECK(path_decode(url + sl, l - sl - 1, &dec, &dl) == 0);
	FUZZ_CHECK(path_is_safe(dec, dl));
	free(dec);
}
