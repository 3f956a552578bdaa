/*
 * The plan: the diff of a listing against the manifest, checked against
 * the local tree, turned into ordered actions (mkdir, fetch, conditional
 * fetch, touch-mtime, delete last), and the safety guards that refuse a
 * run before it acts (DESIGN.md "Never wipe a mirror by accident").
 */
#ifndef BIOMIRROR_PLAN_H
#define BIOMIRROR_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "biomirror/file_state.h"
#include "biomirror/listing.h"

struct manifest;
struct store;
struct mirror_conf;
struct filter;

enum action_op {
	ACT_MKDIR = 0,		/* create a listed directory */
	ACT_FETCH,		/* GET the file (new, changed, or local drift) */
	ACT_COND_FETCH,		/* conditional GET: listing shows no size/date */
	ACT_TOUCH,		/* content unchanged, set the local mtime */
	ACT_DELETE,		/* gone upstream: delete (last, guarded) */
	ACT_KEEP,		/* gone upstream, kept (delete = no or refused) */
	ACT_CONFLICT,		/* upstream changed the type, delete = no: reported */
	ACT_ADOPT,		/* resync --adopt: the local file matches, record it */
	ACT_SYMLINK,		/* recreate an upstream symlink (target inside) */
};

/* When an action runs; actions are sorted by phase first. */
enum action_phase {
	PHASE_CLEAR = 0,	/* deletes that clear the way for a type change */
	PHASE_MKDIR,		/* directories, parents first */
	PHASE_XFER,		/* fetches and touches */
	PHASE_DELETE,		/* deletes and keeps, children first, last */
};

/*
 * The parts of a planned action that few actions have, held apart
 * (struct action more): the fetches of a cold run have none of them.
 * An action of a recorded file (changed, local missing, touch, delete)
 * has one: 152 bytes with it, against 144 when all was inline.
 */
struct action_more {
	char		*etag;		/* owned: recorded ETag, NULL if none */
	char		*target;	/* owned: ACT_SYMLINK target, NULL unknown */
	char		*got;		/* owned: the body digest ("ALG:HEX") of a
					   try that failed its sidecar (sched.h
					   park_mismatch), NULL if none */
	int64_t		 shift;		/* ns: "changed" in a directory whose
					   changed files all moved by these
					   whole hours, exact sizes the same
					   (plan_shifts); 0 none */
	struct listed_state was;	/* "changed": the listing recorded */
	struct upstream_state upstream;	/* as recorded (action_upstream) */
	struct local_state local;	/* as recorded (action_local) */
};

/*
 * One planned action, held for every path of the plan (2,000,000 of them
 * for a directory that size): the rare parts and the recorded states
 * apart (more), the enums in bit-fields (the flags are not: the
 * scheduler sets them while the committer thread reads the enums), 56
 * bytes on LP64, not 144.
 */
struct action {
	char		*path;		/* owned by the plan (its string
					   blocks): relative path */
	const char	*why;		/* static: "new", "changed", "local missing", ... */
	struct action_more *more;	/* owned: NULL when all its parts are
					   unset (action_more()) */
	struct {
		struct listed_state listed; /* to record on success */
	}		 fs;		/* the upstream and local states as
					   recorded are in more (unknown, -1,
					   for a new file) */
	enum action_op	 op : 8;
	enum action_phase phase : 8;
	enum entry_type	 type : 8;	/* listed (or recorded) type */
	bool		 replace;	/* a delete that makes way for a new type */
	bool		 touch;		/* ACT_COND_FETCH: local mtime drifted too */
	bool		 parked;	/* that try is not yet judged: fetch the
					   sidecar again, then the file */
};

/*
 * a's rare parts (struct action_more), borrowed from a: NULL, 0, or the
 * unknown state (-1) when a has none.
 */
static inline const char *
action_etag(const struct action *a)
{
	return a->more != NULL ? a->more->etag : NULL;
}

static inline const char *
action_target(const struct action *a)
{
	return a->more != NULL ? a->more->target : NULL;
}

static inline const char *
action_got(const struct action *a)
{
	return a->more != NULL ? a->more->got : NULL;
}

static inline int64_t
action_shift(const struct action *a)
{
	return a->more != NULL ? a->more->shift : 0;
}

static inline struct upstream_state
action_upstream(const struct action *a)
{
	return a->more != NULL ? a->more->upstream :
	    (struct upstream_state){ -1, -1 };
}

static inline struct local_state
action_local(const struct action *a)
{
	return a->more != NULL ? a->more->local :
	    (struct local_state){ -1, -1 };
}

/*
 * a's rare parts, made all unset (NULL, 0, -1) if it has none yet; owned
 * by a (action_more_free, plan_free).  NULL when out of memory.
 */
struct action_more *action_more(struct action *a);
/* Free a's rare parts (the plan's paths stay); a then has none. */
void	action_more_free(struct action *a);

struct plan_strs;

struct plan {
	struct action	*acts;		/* owned: actions in execution order */
	struct plan_strs *strs;		/* owned: blocks holding the actions'
					   paths (one malloc per file cost 32
					   bytes for a 13-byte name) */
	size_t		 nacts;
	size_t		 cap;
	int64_t		 listed;	/* entries in the listing (files + dirs) */
	int64_t		 listed_files;	/* regular files among them: none is
					   an empty listing for the guard */
	int64_t		 nfetch, ntouch, nmkdir, ndelete, nkeep; /* counts */
	int64_t		 nconflict;	/* type changes left alone (delete = no) */
	int64_t		 nadopt;	/* local files recorded without a fetch */
	int64_t		 unchanged;	/* files needing nothing */
	uint64_t	 fetch_bytes;	/* bytes to fetch, as far as known */
	int64_t		 manifest_files; /* committed files before this run */
	size_t		 nshifted;	/* fetches with a shift (plan_shifts) */
};

/*
 * Build the plan from manifest_diff() of the staged listing, checking the
 * local file of each path the listing did not change through store (NULL
 * when the destination does not exist yet: every local file missing).
 * do_delete selects ACT_DELETE over ACT_KEEP for gone paths; filter
 * (borrowed, NULL for none).  Excluded paths, type changes and the phase
 * order: docs/internals.md, "Building the plan".  *ret is freed with
 * plan_free().  Returns 0, BM_EDB or BM_ENOMEM.
 */
int	plan_build(struct manifest *m, struct store *s, bool do_delete,
	    const struct filter *filter, struct plan **ret);
struct diff_row;

/*
 * Re-check the content of a local file whose size and mtime match what
 * was committed (resync --checksum, verify --repair): return true when
 * it differs (it is then fetched again).  row is borrowed for the call.
 */
typedef bool (*plan_check_fn)(void *ctx, const struct diff_row *row);

/* Options of plan_build_opts() (resync). */
struct plan_opts {
	bool		 adopt;		/* a file the manifest lacks whose local
					   exact size and mtime (at the listing's
					   precision) match the listing, and which
					   check (if set) finds the same: ACT_ADOPT */
	plan_check_fn	 check;		/* NULL: trust size and mtime */
	void		*check_ctx;	/* borrowed: check's first argument */
	const struct listing *keep;	/* borrowed, NULL: directories the
					   listing could not list; nothing the
					   manifest holds beneath them (or at
					   them) is deleted: ACT_KEEP */
};

/*
 * plan_build() with options (po may be NULL: plan_build()).  Adopted
 * files get ACT_ADOPT with fs.local from the local file;
 * files check() finds different get ACT_FETCH "local content differs".
 */
int	plan_build_opts(struct manifest *m, struct store *s, bool do_delete,
	    const struct filter *filter, const struct plan_opts *po,
	    struct plan **ret);
struct file_row;
/*
 * Append to p a fetch (why: static text) of the committed file row
 * (borrowed) whose listing did not change: the recorded listing values
 * are recorded again.  The appended action comes after the sorted ones.
 * 0 or BM_ENOMEM.
 */
int	plan_add_refetch(struct plan *p, const struct file_row *row,
	    const char *why);
/* Free a plan.  NULL is a no-op. */
void	plan_free(struct plan *p);
/*
 * The daylight-saving rule: in each directory whose changed files
 * (ACT_FETCH "changed") all moved their listed mtime by the same whole
 * number of hours (at most 14), with exact sizes that did not change and
 * the same precision (minute or finer), set each one's shift to it.  The
 * run then checks one of them upstream (plan_keep() if unchanged).
 * plan_build() calls it.  *ret_marked: the files marked.  0 or BM_ENOMEM.
 */
int	plan_shifts(struct plan *p, size_t *ret_marked);
/* Make a planned action nothing (ACT_KEEP, why static), fixing counts. */
void	plan_keep(struct plan *p, struct action *a, const char *why);

/*
 * The safety guards, before anything is changed: an empty listing, more
 * deletes than max_delete, fewer free bytes (free_bytes, UINT64_MAX if
 * unknown) than the planned fetches; allow_empty is --allow-empty
 * (docs/internals.md, "Building the plan").  Returns 0, or BM_ELIMIT with
 * the guard and by how much in errbuf (exit 4).
 */
int	plan_guard(const struct plan *p, const struct mirror_conf *c,
	    uint64_t free_bytes, bool allow_empty, char *errbuf,
	    size_t errlen);
/*
 * Where the planned fetches will be written, as far as it exists now:
 * DEST (with publish = set DEST.biomirror/snapshots) or, when that is
 * not there yet (a first run, a plan before it), its nearest existing
 * ancestor, into buf.  Returns 0, BM_EINVAL (no dest), BM_ELIMIT (buf
 * too small) or BM_EIO (a stat(2) failed other than ENOENT or ENOTDIR;
 * errno says why).
 */
int	plan_space_dir(const struct mirror_conf *c, char *buf, size_t len);
/*
 * Free bytes (f_bavail * f_frsize) for the planned fetches into *ret:
 * the open destination's file system (s, borrowed; publish = file), else
 * that of plan_space_dir().  *ret is untouched on failure: 0 or a code of
 * store_free_space() or plan_space_dir().
 * Sandbox: stat and statvfs of DEST and its ancestors.
 */
int	plan_free_space(const struct mirror_conf *c, struct store *s,
	    uint64_t *ret);

/* Short name of an action ("fetch", "touch", ...). */
const char *action_name(enum action_op op);
/*
 * Bytes action a moves: what a fetch (or a conditional fetch answered
 * 200) transfers, listed size first, then the recorded one (-1 when
 * neither is known); the recorded local size a delete of a file
 * removes; 0 for the others.
 */
int64_t	action_bytes(const struct action *a);

#endif
