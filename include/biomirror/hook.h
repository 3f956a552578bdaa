/*
 * The post_sync hook: a command run after a successful run that changed
 * the mirror (DESIGN.md "Config").  It runs through /bin/sh -c with the
 * agent's environment minus any BIOMIRROR_* variable, plus the variables
 * the caller passes; stdin is /dev/null, stdout goes to the agent's
 * stderr (stdout carries --json), stderr is shared.  Every descriptor
 * of the agent is O_CLOEXEC (STYLE.md rule 37), so the hook inherits no
 * lock, manifest or socket, and descriptors above 2 that the agent itself
 * inherited are closed for it too (glibc 2.34+).  Signals the agent ignores (SIGPIPE) are
 * reset to their defaults for it, and its signal mask is empty.
 */
#ifndef BIOMIRROR_HOOK_H
#define BIOMIRROR_HOOK_H

#include <stddef.h>

#define HOOK_MAX_ENV	4096	/* environment entries passed on */

/*
 * Run command (borrowed) with /bin/sh -c and wait for it.  env is a
 * NULL-terminated array of "NAME=VALUE" strings (borrowed) added to the
 * environment.  *ret_status gets the command's exit status, or 128 + the
 * signal number that ended it (as the shell reports it).  Returns 0 when
 * the command ran (whatever its status); BM_EIO with "operation: reason"
 * in errbuf when it could not be started or waited for; BM_ELIMIT past
 * HOOK_MAX_ENV entries; BM_ENOMEM.
 */
int	hook_run(const char *command, char *const *env, int *ret_status,
	    char *errbuf, size_t errlen);

#endif
