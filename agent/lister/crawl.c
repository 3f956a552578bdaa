/*
 * The shared breadth-first crawl (see include/biomirror/crawl.h).  The
 * queue only grows: a directory's index is fixed once queued, dirs
 * [0, next) are listed, the rest wait; batches are taken in queue order,
 * so the listing comes out in the same order whatever the batch size.
 * The unique= facts of the directories taken are kept in a sorted set:
 * one listed twice (an alias or a server-side loop) is entered once.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "biomirror/crawl.h"
#include "biomirror/error.h"

/* Entries the output holds before crawl_take hands them to the drain. */
#define CRAWL_DRAIN_AT	8192

struct crawl {
	struct crawl_params p;		/* borrowed pointers */
	struct crawl_dir *dirs;		/* owned: the queue */
	size_t		 ndirs, capdirs;
	char		**seen;		/* owned: sorted unique= taken */
	size_t		 nseen, capseen;
	struct crawl_stats stats;
	bool		 depth_hit;	/* a directory lay past max_depth */
	int		 fail;		/* first failure's code, 0 if none */
};

void
crawl_params_init(struct crawl_params *p, const char *source,
    const struct filter *filter, unsigned max_depth, size_t batch,
    http_fetch_fn fetch, void *ctx, struct listing *out, char *errbuf,
    size_t errlen)
{
	memset(p, 0, sizeof(*p));
	p->source = source;
	p->filter = filter;
	p->max_depth = max_depth;
	p->batch = batch;
	p->fetch = fetch;
	p->ctx = ctx;
	p->out = out;
	p->errbuf = errbuf;
	p->errlen = errlen;
}

int
crawl_new(const struct crawl_params *p, struct crawl **ret)
{
	struct crawl	*c;

	if ((c = calloc(1, sizeof(*c))) == NULL)
		return BM_ENOMEM;
	c->p = *p;
	if (c->p.batch == 0)
		c->p.batch = 1;
	if (c->p.errbuf != NULL && c->p.errlen > 0)
		c->p.errbuf[0] = '\0';
	*ret = c;
	return 0;
}

void
crawl_free(struct crawl *c)
{
	size_t	 i;

	if (c == NULL)
		return;
	for (i = 0; i < c->ndirs; i++) {
		free(c->dirs[i].prefix);
		free(c->dirs[i].real);
		free(c->dirs[i].key);
	}
	free(c->dirs);
	for (i = 0; i < c->nseen; i++)
		free(c->seen[i]);
	free(c->seen);
	free(c);
}

void
crawl_set_command(struct crawl *c, const char *command)
{
	c->p.command = command;
}

struct crawl_dir *
crawl_dir(struct crawl *c, size_t d)
{
	return &c->dirs[d];
}

size_t
crawl_ndirs(const struct crawl *c)
{
	return c->ndirs;
}

const char *
crawl_real(const struct crawl *c, size_t d)
{
	return c->dirs[d].real != NULL ? c->dirs[d].real : c->dirs[d].prefix;
}

struct crawl_stats *
crawl_stats(struct crawl *c)
{
	return &c->stats;
}

struct listing *
crawl_out(struct crawl *c)
{
	return c->p.out;
}

const struct filter *
crawl_filter(const struct crawl *c)
{
	return c->p.filter;
}

void
crawl_fail(struct crawl *c, const char *url, int rc, const char *why)
{
	if (c->fail != 0)
		return;
	c->fail = rc;
	if (c->p.errbuf != NULL && c->p.errlen > 0)
		(void)snprintf(c->p.errbuf, c->p.errlen, "%s%s%s", url,
		    why[0] ? ": " : "", why);
}

bool
crawl_depth_ok(struct crawl *c, size_t parent)
{
	if (parent != CRAWL_ROOT && c->dirs[parent].depth + 1 >
	    c->p.max_depth) {
		c->depth_hit = true;
		return false;
	}
	return true;
}

int
crawl_push(struct crawl *c, size_t parent, const char *prefix,
    const char *real, const char *key, bool via_link)
{
	struct crawl_dir *nv, *d;
	size_t		 ncap;

	if (c->ndirs == c->capdirs) {
		ncap = c->capdirs ? c->capdirs * 2 : 64;
		if ((nv = reallocarray(c->dirs, ncap, sizeof(*nv))) == NULL)
			return BM_ENOMEM;
		c->dirs = nv;
		c->capdirs = ncap;
	}
	d = &c->dirs[c->ndirs];
	memset(d, 0, sizeof(*d));
	if ((d->prefix = strdup(prefix)) == NULL ||
	    (real != NULL && (d->real = strdup(real)) == NULL) ||
	    (key != NULL && (d->key = strdup(key)) == NULL)) {
		free(d->prefix);
		free(d->real);
		return BM_ENOMEM;
	}
	d->parent = parent;
	d->depth = parent == CRAWL_ROOT ? 0 : c->dirs[parent].depth + 1;
	d->via_link = via_link;
	c->ndirs++;
	return 0;
}

/*
 * Note unique= fact u of a directory taken; *ret_new false when it was
 * noted before.  Returns 0 or BM_ENOMEM.
 */
static int
seen_add(struct crawl *c, const char *u, bool *ret_new)
{
	char	**nv, *s;
	size_t	 lo = 0, hi = c->nseen, mid, ncap;
	int	 cmp;

	while (lo < hi) {
		mid = (lo + hi) / 2;
		if ((cmp = strcmp(u, c->seen[mid])) == 0) {
			*ret_new = false;
			return 0;
		}
		if (cmp < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	if (c->nseen == c->capseen) {
		ncap = c->capseen ? c->capseen * 2 : 64;
		if ((nv = reallocarray(c->seen, ncap, sizeof(*nv))) == NULL)
			return BM_ENOMEM;
		c->seen = nv;
		c->capseen = ncap;
	}
	if ((s = strdup(u)) == NULL)
		return BM_ENOMEM;
	memmove(c->seen + lo + 1, c->seen + lo,
	    (c->nseen - lo) * sizeof(*c->seen));
	c->seen[lo] = s;
	c->nseen++;
	*ret_new = true;
	return 0;
}

/* dir + "/" + the last component of path, malloc'd ("" dir: no '/'). */
static char *
real_child(const char *dir, const char *path)
{
	const char	*name = strrchr(path, '/');
	char		*s;

	name = name != NULL ? name + 1 : path;
	if (dir[0] == '\0')
		return strdup(name);
	if (asprintf(&s, "%s/%s", dir, name) == -1)
		return NULL;
	return s;
}

/* Queue directory e, listed in d (crawl_take). */
static int
take_dir(struct crawl *c, size_t d, const struct entry *e, bool *ret_keep)
{
	char		*real = NULL;
	bool		 fresh = true, via = c->dirs[d].via_link;
	int		 rc;

	*ret_keep = false;
	if (!filter_dir(c->p.filter, e->path))
		return 0;
	/* Inside a followed link the unique= repeat by design. */
	if (e->unique != NULL && !via &&
	    (rc = seen_add(c, e->unique, &fresh)) != 0)
		return rc;
	if (!fresh) {
		c->stats.loops++;
		return 0;
	}
	*ret_keep = true;
	if (!crawl_depth_ok(c, d))
		return 0;
	if (c->dirs[d].real != NULL &&
	    (real = real_child(c->dirs[d].real, e->path)) == NULL)
		return BM_ENOMEM;
	rc = crawl_push(c, d, e->path, real, e->unique, via);
	free(real);
	return rc;
}

int
crawl_take(struct crawl *c, size_t d, struct entry *e)
{
	bool		 keep;
	int		 rc;

	if (e->type == ENTRY_DIR) {
		if ((rc = take_dir(c, d, e, &keep)) != 0 || !keep)
			return rc;
	} else if (!filter_file(c->p.filter, e->path))
		return 0;
	/*
	 * The href and the size as printed served the parser; past the
	 * crawl nothing reads them, and a huge directory pays for each.
	 */
	free(e->href);
	free(e->size_display);
	e->href = e->size_display = NULL;
	if ((rc = listing_move_in(c->p.out, e)) != 0)
		return rc;
	/* A huge directory is handed on in pieces too. */
	if (c->p.drain != NULL && listing_count(c->p.out) >= CRAWL_DRAIN_AT)
		return c->p.drain(c->p.drain_ctx, c->p.out);
	return 0;
}

bool
crawl_streams(const struct crawl *c)
{
	return c->p.drain != NULL && c->p.retract != NULL;
}

int
crawl_flush(struct crawl *c)
{
	if (c->p.drain == NULL || listing_count(c->p.out) == 0)
		return 0;
	return c->p.drain(c->p.drain_ctx, c->p.out);
}

int
crawl_retract(struct crawl *c, size_t d)
{
	if (c->p.retract == NULL)
		return 0;
	return c->p.retract(c->p.drain_ctx, c->dirs[d].prefix);
}

bool
crawl_ancestor(const struct crawl *c, size_t from, const char *real,
    const char *key)
{
	const struct crawl_dir *d;
	size_t		 k;

	for (k = from; k != CRAWL_ROOT; k = d->parent) {
		d = &c->dirs[k];
		if ((real != NULL && strcmp(crawl_real(c, k), real) == 0) ||
		    (key != NULL && d->key != NULL && strcmp(d->key,
		    key) == 0))
			return true;
	}
	return false;
}

/* The URL of directory d: source + path_encode(prefix) + "/". */
static int
dir_url(const struct crawl *c, size_t d, char **ret)
{
	const char	*prefix = c->dirs[d].prefix;
	char		*enc;
	int		 rc;

	if (prefix[0] == '\0')
		return (*ret = strdup(c->p.source)) == NULL ? BM_ENOMEM : 0;
	if ((rc = path_encode(prefix, strlen(prefix), &enc)) != 0)
		return rc;
	rc = asprintf(ret, "%s%s/", c->p.source, enc) == -1 ? BM_ENOMEM : 0;
	free(enc);
	return rc;
}

/* Fetch dirs [first, first + n) with one fetch call and read them. */
static int
crawl_batch(struct crawl *c, const struct crawl_ops *ops, void *arg,
    size_t first, size_t n)
{
	struct http_page *pg;
	char		**urls;
	size_t		 i;
	int		 rc = BM_ENOMEM;

	pg = calloc(n, sizeof(*pg));
	urls = calloc(n, sizeof(*urls));
	if (pg == NULL || urls == NULL)
		goto out;
	for (i = 0; i < n; i++) {
		if ((rc = dir_url(c, first + i, &urls[i])) != 0)
			goto out;
		pg[i].url = urls[i];
		pg[i].command = c->p.command;
	}
	if (ops->prepare != NULL && (rc = ops->prepare(arg, c, first, pg,
	    n)) != 0)
		goto out;
	if ((rc = c->p.fetch(c->p.ctx, pg, n)) != 0) {
		crawl_fail(c, pg[0].url, rc, "fetch failed");
		goto out;
	}
	rc = ops->read(arg, c, first, pg, n);
out:
	if (ops->release != NULL && pg != NULL)
		ops->release(arg, pg, n);
	for (i = 0; pg != NULL && i < n; i++) {
		free(pg[i].body);
		free(pg[i].content_type);
		free(pg[i].effective_url);
	}
	for (i = 0; urls != NULL && i < n; i++)
		free(urls[i]);
	free(urls);
	free(pg);
	return rc;
}

int
crawl_run(struct crawl *c, const struct crawl_ops *ops, void *arg)
{
	char	 why[96];
	size_t	 next = 0, n;
	bool	 again;
	int	 rc;

	if ((rc = crawl_push(c, CRAWL_ROOT, "", NULL, NULL, false)) != 0)
		return rc;
	for (;;) {
		for (; next < c->ndirs; next += n) {
			n = c->ndirs - next < c->p.batch ? c->ndirs - next :
			    c->p.batch;
			if ((rc = crawl_batch(c, ops, arg, next, n)) != 0)
				return rc;
			if (c->p.drain != NULL && listing_count(c->p.out) > 0 &&
			    (rc = c->p.drain(c->p.drain_ctx, c->p.out)) != 0)
				return rc;
		}
		again = false;
		if (ops->more == NULL ||
		    (rc = ops->more(arg, c, &again)) != 0 || !again)
			break;
	}
	if (rc != 0)
		return rc;
	if (c->fail != 0)
		return c->fail;
	if (c->depth_hit && !c->p.shallow) {
		(void)snprintf(why, sizeof(why), "directories more than %u "
		    "levels below the source not listed (the depth limit)",
		    c->p.max_depth);
		crawl_fail(c, c->p.source, BM_ELIMIT, why);
		return BM_ELIMIT;
	}
	return 0;
}
