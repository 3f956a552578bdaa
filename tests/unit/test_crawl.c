/*
 * Unit tests for agent/lister/crawl.c (the breadth-first crawl the listers
 * share) and agent/lister/lister.c (the lister registry).  The crawl runs with
 * a fake lister: its pages are lines "f NAME", "d NAME" or "d NAME
 * UNIQUE" served from a table by a fake fetch callback.  Checked: the
 * directory URLs (encoded, below the source), breadth-first order
 * whatever the batch, the depth limit, the unique= loop check, the
 * first failure, a failed fetch call, the filter, the page command, and
 * the more() hook (a followed link's directory and its real path).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "biomirror/crawl.h"
#include "biomirror/error.h"
#include "biomirror/lister.h"
#include "biomirror/listing.h"

#include "tap.h"

#define SRC	"http://h/s/"

struct fake_page {
	const char	*url;
	const char	*body;		/* NULL: the page fails (BM_ENOENT) */
};

struct fake {
	const struct fake_page *pages;
	size_t		 n;
	char		 asked[64][64];	/* URLs in the order asked */
	char		 cmds[64][8];	/* their commands, "" for none */
	size_t		 nasked;
	size_t		 calls, max_batch;
	size_t		 fail_call;	/* this call fails (1-based), 0: none */
	bool		 link;		/* more(): queue "l", real "a", once */
	size_t		 mores;		/* more() calls */
};

static int
fake_fetch(void *ctx, struct http_page *pg, size_t n)
{
	struct fake	*f = ctx;
	size_t		 i, j;

	if (++f->calls == f->fail_call)
		return BM_ENET;
	if (n > f->max_batch)
		f->max_batch = n;
	for (i = 0; i < n; i++) {
		if (f->nasked < 64) {
			(void)snprintf(f->asked[f->nasked], 64, "%s",
			    pg[i].url);
			(void)snprintf(f->cmds[f->nasked], 8, "%s",
			    pg[i].command ? pg[i].command : "");
			f->nasked++;
		}
		pg[i].rc = BM_ENOENT;
		(void)snprintf(pg[i].errmsg, sizeof(pg[i].errmsg), "gone");
		for (j = 0; j < f->n; j++)
			if (strcmp(f->pages[j].url, pg[i].url) == 0 &&
			    f->pages[j].body != NULL) {
				pg[i].rc = 0;
				pg[i].errmsg[0] = '\0';
				pg[i].body =
				    (uint8_t *)strdup(f->pages[j].body);
				pg[i].len = strlen(f->pages[j].body);
			}
	}
	return 0;
}

/* One line "T NAME [UNIQUE]" of dir d's page as an entry of tmp. */
static int
fake_line(struct crawl *c, size_t d, const char *line, struct listing *tmp)
{
	const char	*prefix = crawl_dir(c, d)->prefix;
	char		 name[64], uniq[64];
	struct entry	*e;
	int		 k, rc;

	uniq[0] = '\0';
	if ((k = sscanf(line, "%*c %63[^\n|]|%63s", name, uniq)) < 1)
		return 0;
	if ((rc = listing_append(tmp, &e)) != 0)
		return rc;
	e->type = line[0] == 'd' ? ENTRY_DIR : ENTRY_FILE;
	if (asprintf(&e->path, "%s%s%s", prefix, prefix[0] ? "/" : "",
	    name) == -1)
		return BM_ENOMEM;
	if (k == 2 && (e->unique = strdup(uniq)) == NULL)
		return BM_ENOMEM;
	return 0;
}

/* crawl_ops.read of the fake lister. */
static int
fake_read(void *arg, struct crawl *c, size_t first, struct http_page *pg,
    size_t n)
{
	struct listing	*tmp;
	const char	*p, *nl;
	char		 line[160];
	size_t		 i, k;
	int		 rc = 0;

	(void)arg;
	for (i = 0; i < n && rc == 0; i++) {
		if (pg[i].rc != 0) {
			crawl_fail(c, pg[i].url, pg[i].rc, pg[i].errmsg);
			continue;
		}
		if ((tmp = listing_new(100)) == NULL)
			return BM_ENOMEM;
		for (p = (const char *)pg[i].body; rc == 0 && *p; p = nl) {
			nl = p + strcspn(p, "\n");
			(void)snprintf(line, sizeof(line), "%.*s",
			    (int)(nl - p), p);
			if (*nl == '\n')
				nl++;
			rc = fake_line(c, first + i, line, tmp);
		}
		for (k = 0; rc == 0 && k < listing_count(tmp); k++)
			rc = crawl_take(c, first + i, listing_get_mut(tmp, k));
		listing_free(tmp);
	}
	return rc;
}

/* crawl_ops.more: queue a followed link "l" to "a" once. */
static int
fake_more(void *arg, struct crawl *c, bool *ret_again)
{
	struct fake	*f = arg;

	f->mores++;
	if (!f->link)
		return 0;
	f->link = false;
	*ret_again = true;
	return crawl_push(c, 0, "l", "a", NULL, true);
}

static const struct crawl_ops fake_ops = {
	.read = fake_read, .more = fake_more
};

/*
 * The tree: the root lists a/, b/ (unique= U) and x.txt; a/ lists
 * "sp ace/" and y; b/ lists alias/ (unique= U again: b itself) and z;
 * a/sp ace/ lists deep.
 */
static const struct fake_page tree[] = {
	{ SRC, "d a\nd b|U\nf x.txt\n" },
	{ SRC "a/", "d sp ace|S\nf y\n" },
	{ SRC "b/", "d alias|U\nf z\n" },
	{ SRC "a/sp%20ace/", "f deep\n" },
	{ SRC "l/", "d sp ace|S\nf w\n" },
	{ SRC "l/sp%20ace/", "f deep2\n" },
};
#define NTREE	(sizeof(tree) / sizeof(tree[0]))

struct run {
	struct fake	 f;
	struct listing	*l;
	char		 err[256];
	char		 paths[512];	/* the listing's paths, ' '-joined */
	char		 real[64];	/* crawl_real of dir "l", "" if none */
	bool		 l_ancestor;	/* crawl_ancestor("l", "a") */
	size_t		 loops, ndirs;
	int		 rc;
};

/* Crawl tree with these settings into r. */
static void
run_crawl(struct run *r, const struct fake_page *pages, size_t npages,
    unsigned depth, size_t batch, const struct filter *flt, bool link)
{
	struct crawl_params p;
	struct crawl	*c = NULL;
	size_t		 i, d, used = 0;

	memset(r, 0, sizeof(*r));
	r->f.pages = pages;
	r->f.n = npages;
	r->f.link = link;
	if ((r->l = listing_new(100)) == NULL)
		tap_bail("listing_new");
	crawl_params_init(&p, SRC, flt, depth, batch, fake_fetch, &r->f, r->l,
	    r->err, sizeof(r->err));
	p.command = "MLSD";
	if (crawl_new(&p, &c) != 0)
		tap_bail("crawl_new");
	r->rc = crawl_run(c, &fake_ops, &r->f);
	for (i = 0; i < listing_count(r->l); i++)
		used += (size_t)snprintf(r->paths + used,
		    sizeof(r->paths) - used, "%s%s", i ? " " : "",
		    listing_get(r->l, i)->path);
	r->ndirs = crawl_ndirs(c);
	for (d = 0; d < r->ndirs; d++)
		if (strcmp(crawl_dir(c, d)->prefix, "l") == 0) {
			(void)snprintf(r->real, sizeof(r->real), "%s",
			    crawl_real(c, d));
			r->l_ancestor = crawl_ancestor(c, d, "a", NULL);
		}
	r->loops = crawl_stats(c)->loops;
	crawl_free(c);
	listing_free(r->l);
}

static void
test_registry(void)
{
	char	 buf[128];

	ok(lister_find("http://h/") == &lister_http_ops, "http: HTTP lister");
	ok(lister_find("HTTPS://h/") == &lister_http_ops,
	    "HTTPS (any case): HTTP lister");
	ok(lister_find("ftp://h/") == &lister_ftp_ops, "ftp: FTP lister");
	ok(lister_find("ftps://h/") == &lister_ftp_ops, "ftps: FTP lister");
	ok(lister_find("gopher://h/") == NULL, "gopher: none");
	ok(lister_find("ftpx://h/") == NULL, "ftpx: none (whole scheme)");
	ok(lister_find("/srv/data") == NULL && lister_find(NULL) == NULL,
	    "no URL: none");
	lister_schemes(buf, sizeof(buf));
	is_str(buf, "http://, https://, ftp://, ftps:// or bm://",
	    "the schemes, for messages");
	ok(lister_find("bm://h/pub/") == &lister_bm_ops, "bm: bm:// lister");
	lister_schemes(buf, 12);
	is_str(buf, "http://", "a short buffer: whole names only");
	is_int(lister_http_ops.connections, 8, "HTTP: 8 connections");
	is_int(lister_ftp_ops.connections, 4, "FTP: 4 connections");
	ok(lister_http_ops.zone == LISTER_ZONE_LISTING &&
	    lister_ftp_ops.zone == LISTER_ZONE_FTP,
	    "zones: listing_timezone, ftp_timezone");
}

static void
test_crawl_tree(void)
{
	struct run	 r, r1;
	size_t		 i;
	bool		 mlsd = true;

	run_crawl(&r, tree, NTREE, 10, 1, NULL, false);
	is_int(r.rc, 0, "tree: complete");
	is_str(r.err, "", "tree: no error");
	is_str(r.paths, "a b x.txt a/sp ace a/y b/z a/sp ace/deep",
	    "tree: breadth first, the alias of b not listed");
	is_int(r.loops, 1, "tree: one loop (unique= U twice)");
	is_int(r.f.nasked, 4, "tree: 4 directories asked");
	is_str(r.f.asked[0], SRC, "tree: the source first");
	is_str(r.f.asked[3], SRC "a/sp%20ace/", "tree: URLs encoded");
	for (i = 0; i < r.f.nasked; i++)
		mlsd = mlsd && strcmp(r.f.cmds[i], "MLSD") == 0;
	ok(mlsd, "tree: every page with the command");
	is_int(r.f.mores, 1, "tree: more() asked once the queue was done");

	run_crawl(&r1, tree, NTREE, 10, 2, NULL, false);
	is_str(r1.paths, r.paths, "batch 2: the same listing");
	is_int(r1.f.max_batch, 2, "batch 2: two pages per call");
	is_int(r1.f.calls, 3, "batch 2: 3 calls (1, 2, 1)");
}

static void
test_crawl_limits(void)
{
	static const char *const exc[] = { "b/", "*.txt" };
	struct filter	 flt = { NULL, 0, exc, 2 };
	struct fake_page bad[NTREE];
	struct run	 r;

	run_crawl(&r, tree, NTREE, 1, 4, NULL, false);
	is_int(r.rc, BM_ELIMIT, "depth 1: BM_ELIMIT");
	is_str(r.err, SRC ": directories more than 1 levels below the source "
	    "not listed (the depth limit)", "depth 1: named");
	ok(strstr(r.paths, "a/sp ace") != NULL &&
	    strstr(r.paths, "deep") == NULL, "depth 1: listed, not entered");

	run_crawl(&r, tree, NTREE, 10, 4, &flt, false);
	is_int(r.rc, 0, "filter: complete");
	is_str(r.paths, "a a/sp ace a/y a/sp ace/deep",
	    "filter: b/ neither listed nor entered, *.txt not listed");
	is_int(r.f.nasked, 3, "filter: b/ never asked");

	memcpy(bad, tree, sizeof(bad));
	bad[1].body = NULL;		/* a/ */
	bad[2].body = NULL;		/* b/ */
	run_crawl(&r, bad, NTREE, 10, 4, NULL, false);
	is_int(r.rc, BM_ENOENT, "failed pages: the first one's code");
	is_str(r.err, SRC "a/: gone", "failed pages: the first one named");
	is_str(r.paths, "a b x.txt", "failed pages: the rest listed");

	memset(&r, 0, sizeof(r));
	{
		struct crawl_params p;
		struct crawl	*c;
		struct listing	*l = listing_new(100);

		crawl_params_init(&p, SRC, NULL, 10, 2, fake_fetch, &r.f, l,
		    r.err, sizeof(r.err));
		r.f.pages = tree;
		r.f.n = NTREE;
		r.f.fail_call = 2;
		if (l == NULL || crawl_new(&p, &c) != 0)
			tap_bail("crawl_new");
		is_int(crawl_run(c, &fake_ops, &r.f), BM_ENET,
		    "a failed fetch call: its code");
		is_str(r.err, SRC "a/: fetch failed",
		    "a failed fetch call: its first URL named");
		is_int(listing_count(l), 3,
		    "a failed fetch call: the root kept");
		crawl_free(c);
		listing_free(l);
	}
}

static void
test_crawl_link(void)
{
	struct run	 r;

	run_crawl(&r, tree, NTREE, 10, 4, NULL, true);
	is_int(r.rc, 0, "link: complete");
	is_int(r.f.mores, 2, "link: more() again after its directories");
	is_str(r.f.asked[r.f.nasked - 2], SRC "l/", "link: its URL asked");
	is_str(r.f.asked[r.f.nasked - 1], SRC "l/sp%20ace/",
	    "link: unique= S again inside the link is entered");
	is_str(r.real, "a", "link: its real path upstream");
	ok(r.l_ancestor, "link: an ancestor check sees its real path");
	ok(strstr(r.paths, "l/sp ace l/w l/sp ace/deep2") != NULL,
	    "link: what it leads to listed at its own path (%s)", r.paths);
	is_int(r.loops, 1, "link: still one loop");
}

int
main(void)
{
	test_registry();
	test_crawl_tree();
	test_crawl_limits();
	test_crawl_link();
	return done_testing();
}
