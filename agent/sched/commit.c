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
#include "biomirror/log.h"
#include "biomirror/manifest.h"
#include "biomirror/report.h"
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
	r->fs.listed = a->fs.listed;
	r->fs.upstream = action_upstream(a);
	r->fs.local = action_local(a);
	r->etag = action_etag(a);
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

/*
 * -v: one line per file a committed batch acted on, as rsync -i does:
 * op, path, size ("fetched    db/a.tar.gz  1.2 GiB").
 */
static void
commit_log(const struct commit_rec *recs, size_t n)
{
	const struct commit_rec	*r;
	const char		*op;
	char			 hb[32];
	int64_t			 size;
	size_t			 i;

	for (i = 0; log_verbosity() >= 1 && i < n; i++) {
		r = &recs[i];
		switch (r->op) {
		case COMMIT_FETCHED:	op = "fetched"; break;
		case COMMIT_TOUCHED:	op = "touched"; break;
		case COMMIT_MKDIR:	op = "mkdir"; break;
		case COMMIT_SYMLINK:	op = "symlink"; break;
		case COMMIT_DELETED:	op = "deleted"; break;
		case COMMIT_ADOPTED:	op = "adopted"; break;
		case COMMIT_VANISHED:	op = "vanished"; break;
		case COMMIT_FAILED:
		case COMMIT_MISMATCH:	op = "failed"; break;
		default:		continue;
		}
		size = r->fs.local.size >= 0 ? r->fs.local.size :
		    r->fs.upstream.size >= 0 ? r->fs.upstream.size :
		    r->fs.listed.size;
		hb[0] = '\0';
		if (size >= 0 && r->type != ENTRY_DIR && r->op != COMMIT_FAILED)
			report_human_bytes((uint64_t)size, hb, sizeof(hb));
		log_verbose("%-8s %s%s%s", op, r->path, hb[0] ? "  " : "", hb);
	}
}

int
commit_results(struct manifest *m, int64_t run,
    const struct commit_rec *recs, size_t n)
{
	int	 rc;

	if ((rc = manifest_commit(m, run, recs, n)) == 0)
		commit_log(recs, n);
	return rc;
}

int
commit_batch(struct manifest *m, struct store *s, int64_t run,
    struct store_commit_item *items, size_t nitems, commit_item_fn rec_of,
    void *ctx, const struct commit_rec *recs, size_t nrecs,
    struct commit_rec *all, int *ret_store_rc)
{
	size_t	 i, n = 0;
	int	 src = 0, rc;

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
	if ((rc = manifest_commit(m, run, all, n)) == 0)
		commit_log(all, n);
	return rc;
}
