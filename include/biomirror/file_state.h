/*
 * What is known of one path, in three parts: what the listing said, what
 * upstream's GET said, what was committed locally.  Declared once and
 * shared by the manifest's rows and records, the plan's actions and the
 * scheduler, so that a result is copied by the part (rec.fs = row->fs;
 * an action holds the listed part inline and the other two in its
 * struct action_more, commit_rec_action), never field by field.  The
 * ETag is not part of it: the plan owns its copy, the records borrow
 * theirs.
 */
#ifndef BIOMIRROR_FILE_STATE_H
#define BIOMIRROR_FILE_STATE_H

#include <stdbool.h>
#include <stdint.h>

#include "biomirror/listing.h"

/* The listing's values (as staged). */
struct listed_state {			/* ordered without padding: 24 bytes */
	int64_t		 size;		/* bytes, -1 unknown */
	int64_t		 mtime;		/* ns UTC; meaningless when prec unknown */
	enum mtime_prec	 prec;		/* precision of mtime */
	bool		 size_exact;	/* size is the exact byte count */
};

/* The exact values of upstream's last GET. */
struct upstream_state {
	int64_t		 size;		/* bytes, -1 unknown */
	int64_t		 mtime;		/* ns, -1 unknown */
};

/* What was committed locally. */
struct local_state {
	int64_t		 size;		/* bytes, -1 if none */
	int64_t		 mtime;		/* ns, -1 if none */
};

struct file_state {
	struct listed_state   listed;
	struct upstream_state upstream;
	struct local_state    local;
};

/*
 * A state that knows nothing: sizes and times -1, no listed precision
 * (MTIME_UNKNOWN).
 */
static inline void
file_state_unknown(struct file_state *fs)
{
	fs->listed.size = -1;
	fs->listed.size_exact = false;
	fs->listed.mtime = 0;
	fs->listed.prec = MTIME_UNKNOWN;
	fs->upstream.size = fs->upstream.mtime = -1;
	fs->local.size = fs->local.mtime = -1;
}

#endif
