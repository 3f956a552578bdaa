/*
 * The commit step: the only writer of run results (DESIGN.md: "the
 * manifest is written by the commit step only").  Every outcome of a run
 * (fetched, not modified, touched, failed, vanished, mkdir, symlink,
 * delete, released, conflict, adopted, digest, sidecar, mismatch) reaches
 * the manifest through this module, as a struct commit_rec built by the
 * helpers below from the plan's action (one struct file_state, copied
 * whole).  A scheduler batch is published here too: intents, the store's
 * renames, then one manifest transaction.  This module never logs.
 */
#ifndef BIOMIRROR_COMMIT_H
#define BIOMIRROR_COMMIT_H

#include <stddef.h>
#include <stdint.h>

#include "biomirror/listing.h"
#include "biomirror/manifest.h"

struct action;
struct store;
struct store_commit_item;

/*
 * r (all of it) from the planned action a (borrowed, as r's strings
 * are): path, type, its file_state and ETag, op; the rest zero.
 */
void	commit_rec_action(struct commit_rec *r, const struct action *a,
	    enum commit_op op);
/*
 * r (all of it) for path (borrowed) of type with op, nothing known of
 * its state (file_state_unknown); the rest zero.
 */
void	commit_rec_path(struct commit_rec *r, const char *path,
	    enum entry_type type, enum commit_op op);
/*
 * r for a directory or symlink the plan made (mkdir, symlink): what
 * commit_rec_path() gives, with a's listed mtime and its precision.
 */
void	commit_rec_entry(struct commit_rec *r, const struct action *a,
	    enum entry_type type, enum commit_op op);

/*
 * Record n outcomes of run (recs borrowed) in one manifest transaction.
 * Returns 0, BM_EINVAL or BM_EDB (nothing of them recorded;
 * manifest_errmsg() says why).
 */
int	commit_results(struct manifest *m, int64_t run,
	    const struct commit_rec *recs, size_t n);

/*
 * The record of batch item i: FETCHED while items[i].rc is 0, else
 * FAILED (strings borrowed until commit_batch() returns).
 */
typedef void (*commit_item_fn)(void *ctx, size_t i,
	    const struct store_commit_item *it, struct commit_rec *ret);

/*
 * Publish a scheduler batch (nitems items) and record it with the nrecs
 * other records (recs, borrowed); all (borrowed) has room for nitems +
 * nrecs records.  The order of the steps: docs/internals.md, "One result
 * writer".  *ret_store_rc gets a failed syncfs's code, else 0.  Returns 0,
 * BM_EINVAL or BM_EDB (nothing of the batch recorded; manifest_errmsg()
 * says why).
 */
int	commit_batch(struct manifest *m, struct store *s, int64_t run,
	    struct store_commit_item *items, size_t nitems,
	    commit_item_fn rec_of, void *ctx, const struct commit_rec *recs,
	    size_t nrecs, struct commit_rec *all, int *ret_store_rc);

#endif
