/*
 * One run of one mirror, end to end (DESIGN.md "Data flow of one run"):
 * lock, manifest, listing, staging and diff, plan, guards, transfers,
 * batch commits, deletes last, directory mtimes, run record.
 */
#ifndef BIOMIRROR_SYNC_H
#define BIOMIRROR_SYNC_H

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>

struct config;
struct mirror_conf;
struct mirror_result;
struct listing;

struct sync_opts {
	const char	*state_dir;	/* borrowed: state directory */
	const char	*key;		/* borrowed: manifest/lock name (mirror name or adhoc key) */
	const char	*label;		/* borrowed: an ad-hoc mirror's --name
					   (BIOMIRROR_MIRROR), NULL = none */
	const char	*config_file;	/* borrowed: the mirror's config file,
					   NULL for an ad-hoc run (the
					   destination's owner record) */
	const char	*user_agent;	/* borrowed: User-Agent */
	bool		 dry_run;	/* plan only: change nothing */
	bool		 progress;	/* live progress line (only ever on a tty) */
	FILE		*plan_out;	/* where a dry run prints its actions, NULL = none */
	volatile sig_atomic_t *stop;	/* borrowed: 0, or the number of the
					   signal (SIGTERM, SIGINT, SIGHUP)
					   that asked the run to stop */
	const char	*command;	/* static: run record's command, NULL = "sync" */
	bool		 checksum;	/* resync --checksum: re-hash local files
					   against recorded and sidecar digests */
	bool		 adopt;		/* resync --adopt: record matching local files */
	bool		 allow_empty;	/* --allow-empty: an empty listing is
					   not refused (plan_guard()) */
	bool		 actions;	/* a dry run keeps its actions in the
					   result (plan --json) */
	const struct config *conf;	/* borrowed: the whole config (its
					   mirror names for metrics_file),
					   NULL if unknown */
};

/*
 * Run mirror c once.  *ret gets the result (status, counts, errors, and
 * the DESIGN.md exit code for this mirror); free it with result_free().
 * Returns 0 when a result was produced (whatever the run's outcome), or
 * BM_ENOMEM.
 */
int	sync_mirror(const struct sync_opts *o, const struct mirror_conf *c,
	    struct mirror_result **ret);

/*
 * The message for mirror name's state fault into buf (len bytes): fault
 * BM_ENOSPC, the state directory state_dir is full (why: "PATH: reason"
 * of the failed write); BM_ECORRUPT, its manifest is damaged (why: the
 * manifest's "PATH: reason"), with the command line that rebuilds it
 * (resync --adopt; with -c for conf's file, --state-dir when state_dir
 * is not the one conf or the default gives; an ad-hoc mirror by source
 * and dest, "URL" and "DIR" when NULL).  All arguments borrowed; conf,
 * source and dest may be NULL.
 */
void	sync_fault_msg(int fault, const char *why,
	    const struct config *conf, const char *state_dir, const char *name,
	    const char *source, const char *dest, char *buf, size_t len);
/*
 * verify NAME: re-hash every committed file of mirror c against its
 * recorded digest and the sidecar files on disk, without listing
 * upstream; each file that is missing, has another size than was
 * committed, or whose digest differs is an error {path, "verify",
 * reason} in *ret (failed counts them, listed counts files checked,
 * digest_checked those hashed against a digest, size_only those with no
 * digest, whose size and mtime are compared instead;
 * exit code 1 when any differ, 2 without a manifest or on a manifest
 * error, 75 when locked).  Returns 0 when a result was produced, or
 * BM_ENOMEM.
 */
int	sync_verify(const struct sync_opts *o, const struct mirror_conf *c,
	    struct mirror_result **ret);
/*
 * list URL: the listing of c->source (its include and exclude apply;
 * no manifest, lock or destination), sorted, times resolved in c's zone
 * key; recursive: the whole tree, else the source's directory only.
 * *ret (free with listing_free) gets the listing, also when it is
 * incomplete (a listing error: rc != 0, "URL: reason" in errbuf;
 * *logged: that failed page was already logged, as "URL: list: reason").
 * Returns 0, the lister's BM_E* code, BM_EINTR (o->stop) or BM_ENOMEM
 * (*ret NULL for these two).
 */
int	sync_list(const struct sync_opts *o, const struct mirror_conf *c,
	    bool recursive, struct listing **ret, bool *logged, char *errbuf,
	    size_t errlen);

#endif
