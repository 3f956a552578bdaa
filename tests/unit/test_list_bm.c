/*
 * Unit tests for agent/lister/bm.c (the bm:// lister) with a fake fetch
 * that streams a LIST's ENTRY frames in small pieces.  Checked: with the
 * run's drain the listing is handed on in batches while the LIST still
 * streams, and the judgement is the one of the whole listing: a name
 * listed again keeps the first, an entry below a file (even one listed
 * before that file) is dropped, each counted; without a drain all of it
 * comes out at the end, judged the same; a LIST sent again after some
 * were handed on keeps them, its repeats neither handed on nor counted.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "biomirror/bmproto.h"
#include "biomirror/error.h"
#include "biomirror/lister.h"
#include "biomirror/listing.h"

#include "tap.h"

#define NFILES	3000
#define PIECE	1000		/* bytes fed at once */

struct fake {
	uint8_t		*body;		/* the LIST reply's ENTRY frames */
	size_t		 len;
	size_t		 drained;	/* entries the drain took */
	size_t		 drains;	/* drain calls */
	size_t		 mid;		/* drained when half the reply was fed */
	bool		 resend;	/* feed two thirds, then begin again */
	bool		 saw_xy;	/* the drain got x/y or z/w */
};

static void
add(struct fake *f, const char *path, uint8_t type)
{
	struct bmp_entry e;
	size_t		 n;

	memset(&e, 0, sizeof(e));
	e.path.p = (const uint8_t *)path;
	e.path.len = strlen(path);
	e.type = type;
	e.size = type == BMP_T_FILE ? 5 : 0;
	e.mtime_ns = 1600000000LL * 1000000000LL;
	e.mode = 0644;
	if ((f->body = realloc(f->body, f->len + BMP_HDR_LEN +
	    BMP_FRAME_MAX)) == NULL)
		abort();
	if (bmp_enc_entry(1, &e, f->body + f->len, BMP_HDR_LEN +
	    BMP_FRAME_MAX, &n) != 0)
		abort();
	f->len += n;
}

static int
fake_fetch(void *ctx, struct http_page *pg, size_t n)
{
	struct fake	*f = ctx;
	size_t		 off, k;
	int		 rc;

	if (n != 1 || pg->stream == NULL ||
	    (rc = pg->stream->begin(pg->stream->arg)) != 0)
		return BM_EINVAL;
	for (off = 0; f->resend && off < f->len * 2 / 3; off += k) {
		k = PIECE;
		if ((rc = pg->stream->feed(pg->stream->arg, NULL,
		    f->body + off, k)) != 0)
			return rc;
	}
	if (f->resend && (rc = pg->stream->begin(pg->stream->arg)) != 0)
		return rc;
	for (off = 0; off < f->len; off += k) {
		k = f->len - off < PIECE ? f->len - off : PIECE;
		if ((rc = pg->stream->feed(pg->stream->arg, NULL,
		    f->body + off, k)) != 0)
			return rc;
		if (off < f->len / 2 && off + k >= f->len / 2)
			f->mid = f->drained;
	}
	pg->rc = 0;
	return 0;
}

static int
fake_drain(void *ctx, struct listing *l)
{
	struct fake	*f = ctx;
	size_t		 i;

	for (i = 0; i < listing_count(l); i++)
		if (strcmp(listing_get(l, i)->path, "x/y") == 0 ||
		    strcmp(listing_get(l, i)->path, "z/w") == 0)
			f->saw_xy = true;
	f->drained += listing_count(l);
	f->drains++;
	listing_drain(l);
	return 0;
}

/* The type of path in l, 0 when it is not there. */
static int
type_of(const struct listing *l, const char *path)
{
	size_t	 i;

	for (i = 0; i < listing_count(l); i++)
		if (strcmp(listing_get(l, i)->path, path) == 0)
			return (int)listing_get(l, i)->type;
	return 0;
}

static void
run(bool drain, bool resend)
{
	const char	*tag = resend ? "sent again" : drain ? "drain" : "whole";
	struct lister_run lr;
	struct lister_stats st;
	struct listing	*out;
	struct fake	 f;
	char		 p[32], err[256];
	int		 i, rc;

	memset(&f, 0, sizeof(f));
	f.resend = resend;
	add(&f, "x/y", BMP_T_FILE);	/* before x, a file: dropped */
	add(&f, "d", BMP_T_DIR);
	for (i = 0; i < NFILES; i++) {
		(void)snprintf(p, sizeof(p), "d/f%04d", i);
		add(&f, p, BMP_T_FILE);
	}
	add(&f, "d/f0007", BMP_T_FILE);	/* again: the first kept */
	add(&f, "x", BMP_T_FILE);
	add(&f, "z", BMP_T_FILE);
	add(&f, "z/w", BMP_T_FILE);	/* below a file */
	add(&f, "z", BMP_T_DIR);	/* again, as a directory */

	memset(&lr, 0, sizeof(lr));
	lr.name = "m";
	lr.source = "bm://h:1/s/";
	lr.max_depth = 64;
	lr.max_entries = NFILES + 10;	/* a LIST sent again fits too */
	lr.fetch = fake_fetch;
	lr.ctx = &f;
	lr.drain = drain ? fake_drain : NULL;
	if ((out = listing_new(100000)) == NULL)
		abort();
	rc = lister_bm_ops.list(&lr, out, &st, err, sizeof(err));
	is_int(rc, 0, "%s: listed (%s)", tag, rc != 0 ? err : "");
	if (resend)
		ok(f.drains >= 2, "%s: in batches (%zu)", tag, f.drains);
	else if (drain) {
		ok(f.mid >= NFILES / 3, "%s: a third handed on while the LIST "
		    "streamed (%zu by its middle)", tag, f.mid);
		ok(f.drains >= 2, "%s: in batches (%zu)", tag, f.drains);
	} else
		is_int(f.drains, 0, "%s: no drain", tag);
	is_int(f.drained + listing_count(out), NFILES + 3,
	    "%s: d, its files, x and z", tag);
	is_int(st.dups, 2, "%s: two names listed again", tag);
	is_int(st.beneath, 2, "%s: two below a file", tag);
	ok(!f.saw_xy && type_of(out, "x/y") == 0 && type_of(out, "z/w") == 0,
	    "%s: nothing below x or z handed on", tag);
	is_int(type_of(out, "x"), ENTRY_FILE, "%s: x, a file", tag);
	is_int(type_of(out, "z"), ENTRY_FILE, "%s: z, the file listed first",
	    tag);
	listing_free(out);
	free(f.body);
}

int
main(void)
{
	ok(lister_find("bm://h:1/s/") == &lister_bm_ops, "bm: the bm lister");
	run(true, false);
	run(false, false);
	run(true, true);
	return done_testing();
}
