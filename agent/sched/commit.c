/*
 * The commit step, the only writer of run results (see
 * include/biomirror/commit.h).  A batch keeps the order that makes a
 * crash safe: intents first, then the store's renames, then the one
 * transaction that records the outcomes and drops the intents.
 * tests/lint.sh fails when manifest_commit() or manifest_intent() is
 * called from anywhere else.
 */
#include <string.h>

#include "biomirror/commit.h"
#include "biomirror/file_state.h"
#include "biomirror/manifest.h"
#include "biomirror/plan.h"
#include "biomirror/store.h"

void
commit_rec_action(struct commit_rec *r, const struct action *a,
    enum commit_op op)
{
	memset(r, 0, sizeof(*r));
	r->path = a->path;
	r->op = op;
	r->type = a->type;
	r->fs = a->fs;
	r->etag = a->etag;
}

void
commit_rec_path(struct commit_rec *r, const char *path,
    enum entry_type type, enum commit_op op)
{
	memset(r, 0, sizeof(*r));
	r->path = path;
	r->op = op;
	r->type = type;
	file_state_unknown(&r->fs);
}

void
commit_rec_entry(struct commit_rec *r, const struct action *a,
    enum entry_type type, enum commit_op op)
{
	commit_rec_path(r, a->path, type, op);
	r->fs.listed.mtime = a->fs.listed.mtime;
	r->fs.listed.prec = a->fs.listed.prec;
}

int
commit_results(struct manifest *m, int64_t run,
    const struct commit_rec *recs, size_t n)
{
	return manifest_commit(m, run, recs, n);
}

int
commit_batch(struct manifest *m, struct store *s, int64_t run,
    struct store_commit_item *items, size_t nitems, commit_item_fn rec_of,
    void *ctx, const struct commit_rec *recs, size_t nrecs,
    struct commit_rec *all, int *ret_store_rc)
{
	size_t	 i, n = 0;
	int	 src = 0;

	/*
	 * Every item's rc is still 0 here, so its record is the FETCHED one
	 * it gets if published.  A failure of the intents shows again in the
	 * transaction below.
	 */
	for (i = 0; i < nitems; i++)
		rec_of(ctx, i, &items[i], &all[i]);
	(void)manifest_intent(m, all, nitems);
	if (nitems > 0 && (src = store_commit(s, items, nitems)) != 0)
		for (i = 0; i < nitems; i++)
			items[i].rc = src;
	*ret_store_rc = src;
	for (i = 0; i < nitems; i++)
		rec_of(ctx, i, &items[i], &all[n++]);
	for (i = 0; i < nrecs; i++)
		all[n++] = recs[i];
	return manifest_commit(m, run, all, n);
}
