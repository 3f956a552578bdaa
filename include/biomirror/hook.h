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
 * Run command (borrowed) with /bin/sh -c, in a process group of its own,
 * and wait for it.  env is a NULL-terminated array of "NAME=VALUE"
 * strings (borrowed) added to the environment.  stop (borrowed, may be
 * NULL) is the agent's signal flag: once it is set, SIGTERM goes to the
 * hook's process group and, if the hook is still there HOOK_GRACE_MS
 * later, SIGKILL.  timeout is in seconds (0 = no limit): a hook still
 * running that long after its start is stopped the same way.
 * *ret_status gets the command's exit status, or 128 + the signal number
 * that ended it (as the shell reports it).  Returns 0 when the command
 * ran to its end (whatever its status); BM_EINTR when it was stopped
 * through *stop (what was done in errbuf, "SIGTERM sent to the hook" or
 * "SIGTERM sent to the hook, SIGKILL 10 s later"; *ret_status set);
 * BM_ELIMIT with *ret_status set when it was stopped for running past
 * timeout (errbuf "timed out after N s: " and what was done); BM_EIO
 * with "operation: reason" in errbuf when it could not be started or
 * waited for; BM_ELIMIT with *ret_status -1 (not started) past
 * HOOK_MAX_ENV entries; BM_ENOMEM.
 */
int	hook_run(const char *command, char *const *env,
	    volatile sig_atomic_t *stop, unsigned timeout, int *ret_status,
	    char *errbuf, size_t errlen);

#endif
