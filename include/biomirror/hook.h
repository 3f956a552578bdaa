/*
 * The post_sync hook: a command run after a successful run that changed
 * the mirror (DESIGN.md "Config"), through /bin/sh -c, in a process group
 * of its own, inheriting no descriptor of the agent.  Environment, stdio
 * and signals: see docs/internals.md, "The post_sync hook's process".
 */
#ifndef BIOMIRROR_HOOK_H
#define BIOMIRROR_HOOK_H

#include <signal.h>
#include <stddef.h>

#define HOOK_MAX_ENV	4096	/* environment entries passed on */
#define HOOK_POLL_MS	50	/* how often the wait looks at the stop flag */
#define HOOK_GRACE_MS	10000	/* from SIGTERM to SIGKILL of a stopped or
				   timed-out hook */
#define HOOK_GRACE_TEXT	"10 s"	/* HOOK_GRACE_MS, for messages */

/*
 * Run command (borrowed) with /bin/sh -c in a process group of its own,
 * in directory dir (borrowed; NULL: the agent's), and wait; env:
 * NULL-terminated "NAME=VALUE" strings (borrowed) to add.  Each line the
 * hook writes (stdout and stderr) is logged at info level as "TAG: LINE"
 * (tag borrowed, "up: post_sync"; lines over 1 KiB cut into pieces).
 * stop (the agent's signal flag, may be NULL) and timeout (seconds from
 * its start, 0 = none) stop it: SIGTERM, then SIGKILL HOOK_GRACE_MS later.
 * *ret_status: the exit status or 128 + the signal.  Returns 0 (ran to
 * its end), BM_EINTR (stopped via *stop), BM_ELIMIT (past timeout, or
 * past HOOK_MAX_ENV), BM_EIO or BM_ENOMEM; errbuf and *ret_status for
 * each: docs/internals.md, "The post_sync hook's process".
 */
int	hook_run_log(const char *tag, const char *command, const char *dir,
	    char *const *env, volatile sig_atomic_t *stop, unsigned timeout,
	    int *ret_status, char *errbuf, size_t errlen);

#endif
