/*
 * The post_sync hook (see include/biomirror/hook.h), started with
 * posix_spawn(3): no fork of a process that has threads and a large
 * address space, and the child's descriptors and signal state are set in
 * one place (the file actions and attributes below).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/types.h>
#include <sys/wait.h>

#include "biomirror/clock.h"
#include "biomirror/error.h"
#include "biomirror/hook.h"
#include "biomirror/log.h"

extern char **environ;

/* environ without BIOMIRROR_* entries, then env; malloc'd array. */
static int
hook_env(char *const *env, char ***ret)
{
	char	**v;
	size_t	 n = 0, i, j = 0;

	for (i = 0; environ != NULL && environ[i] != NULL; i++)
		n++;
	for (i = 0; env != NULL && env[i] != NULL; i++)
		n++;
	if (n > HOOK_MAX_ENV)
		return BM_ELIMIT;
	if ((v = calloc(n + 1, sizeof(*v))) == NULL)
		return BM_ENOMEM;
	for (i = 0; environ != NULL && environ[i] != NULL; i++)
		if (strncmp(environ[i], "BIOMIRROR_", 10) != 0)
			v[j++] = environ[i];
	for (i = 0; env != NULL && env[i] != NULL; i++)
		v[j++] = env[i];
	v[j] = NULL;
	*ret = v;
	return 0;
}

/* The hook's output: its pipe and the line being gathered. */
struct hook_out {
	int		 fd;		/* read end of the pipe, -1 at EOF */
	const char	*tag;		/* borrowed: log prefix ("up: post_sync") */
	char		 line[1024];	/* a line so far (longer ones are cut) */
	size_t		 len;		/* bytes in line */
};

/* Log the gathered line at info level (hidden by -q). */
static void
hook_out_line(struct hook_out *o)
{
	o->line[o->len] = '\0';
	log_info("%s: %s", o->tag, o->line);
	o->len = 0;
}

/* Read what the pipe holds now (it is O_NONBLOCK) and log whole lines. */
static void
hook_out_drain(struct hook_out *o)
{
	char	 buf[4096];
	ssize_t	 n, i;

	while (o->fd != -1) {
		if ((n = read(o->fd, buf, sizeof(buf))) == -1 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n == 0) {
				(void)close(o->fd);
				o->fd = -1;
			}
			break;
		}
		for (i = 0; i < n; i++) {
			if (buf[i] == '\n' || o->len == sizeof(o->line) - 1)
				hook_out_line(o);
			if (buf[i] != '\n')
				o->line[o->len++] = buf[i];
		}
	}
}

/*
 * Sleep ms milliseconds (less when a signal comes or output arrives),
 * logging the hook's output meanwhile.
 */
static void
hook_nap(struct hook_out *o, long ms)
{
	struct pollfd	 p;
	struct timespec	 ts;

	if (o->fd != -1) {
		p.fd = o->fd;
		p.events = POLLIN;
		if (poll(&p, 1, (int)ms) > 0)
			hook_out_drain(o);
		return;
	}
	ts.tv_sec = ms / 1000;
	ts.tv_nsec = ms % 1000 * 1000000L;
	(void)nanosleep(&ts, NULL);	/* EINTR: the caller looks again */
}

/*
 * Wait for child pid (the leader of its own process group) into *st.
 * The agent's handlers use SA_RESTART, so a blocking waitpid(2) would
 * not see a stop: poll every HOOK_POLL_MS instead.  Once *stop is set, or
 * limit_ns (monotonic ns, 0 = no limit) after the start, SIGTERM goes to
 * the whole group, and SIGKILL after HOOK_GRACE_MS if the child or
 * anything else of its group is still there; *ret_stopped is 0, 1
 * (SIGTERM) or 2 (also SIGKILL), and *ret_timeout says the limit, not
 * *stop, was the cause.  Returns 0 or an errno value of waitpid(2).
 */
static int
hook_wait(pid_t pid, struct hook_out *o, volatile sig_atomic_t *stop,
    int64_t limit_ns, int *st, int *ret_stopped, bool *ret_timeout)
{
	const int64_t	 grace = (int64_t)HOOK_GRACE_MS * 1000000;
	int64_t		 start = clock_mono_ns(), term = 0;
	pid_t		 w;

	*ret_stopped = 0;
	*ret_timeout = false;
	for (;;) {
		if ((w = waitpid(pid, st, WNOHANG)) == pid)
			break;
		if (w == -1 && errno != EINTR)
			return errno;
		if (*ret_stopped == 0 && !(stop != NULL && *stop) &&
		    limit_ns > 0 && clock_mono_ns() - start >= limit_ns)
			*ret_timeout = true;
		if (*ret_stopped == 0 && ((stop != NULL && *stop) ||
		    *ret_timeout)) {
			(void)kill(-pid, SIGTERM);
			term = clock_mono_ns();
			*ret_stopped = 1;
		} else if (*ret_stopped == 1 && clock_mono_ns() - term >= grace) {
			(void)kill(-pid, SIGKILL);
			*ret_stopped = 2;
		}
		hook_nap(o, HOOK_POLL_MS);
	}
	/*
	 * Stopped: what the leader started may outlive it (a shell that died
	 * of the SIGTERM while its command ignores it).  Give the rest of
	 * the group the same grace, then SIGKILL it.
	 */
	while (*ret_stopped == 1 && kill(-pid, 0) == 0) {
		if (clock_mono_ns() - term >= grace) {
			(void)kill(-pid, SIGKILL);
			*ret_stopped = 2;
			break;
		}
		hook_nap(o, HOOK_POLL_MS);
	}
	return 0;
}

int
hook_run_log(const char *tag, const char *command, const char *dir,
    char *const *env, volatile sig_atomic_t *stop, unsigned timeout, int *ret_status,
    char *errbuf, size_t errlen)
{
	struct hook_out	 o;
	int		 pfd[2] = { -1, -1 };
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t	 none, deflt;
	char		 sh[] = "sh", dashc[] = "-c";
	char		*argv[4], *cmd = NULL;
	char		**envp = NULL;
	const char	*op = "posix_spawn", *what;
	pid_t		 pid;
	int		 st, e, rc, stopped = 0;
	int		 have_fa = 0, have_at = 0;
	bool		 timed_out = false;

	*ret_status = -1;
	memset(&o, 0, sizeof(o));
	o.fd = -1;
	o.tag = tag;
	if ((rc = hook_env(env, &envp)) != 0) {
		(void)snprintf(errbuf, errlen, "environment: %s",
		    bm_strerror(rc));
		return rc;
	}
	rc = BM_EIO;
	op = "posix_spawn_file_actions_init";
	if ((e = posix_spawn_file_actions_init(&fa)) != 0)
		goto fail;
	have_fa = 1;
	op = "posix_spawnattr_init";
	if ((e = posix_spawnattr_init(&at)) != 0)
		goto fail;
	have_at = 1;
	/*
	 * stdin: nothing to read; stdout and stderr: a pipe whose lines go
	 * to the log at info level (away from --json; -q hides them).
	 */
	op = "pipe2";
	if (pipe2(pfd, O_CLOEXEC) == -1) {
		e = errno;
		goto fail;
	}
	op = "posix_spawn_file_actions";
	if ((e = posix_spawn_file_actions_addopen(&fa, STDIN_FILENO,
	    "/dev/null", O_RDONLY, 0)) != 0 ||
	    (e = posix_spawn_file_actions_adddup2(&fa, pfd[1],
	    STDOUT_FILENO)) != 0 ||
	    (e = posix_spawn_file_actions_adddup2(&fa, pfd[1],
	    STDERR_FILENO)) != 0)
		goto fail;
	op = "chdir";
	if (dir != NULL && (e = posix_spawn_file_actions_addchdir_np(&fa,
	    dir)) != 0)
		goto fail;
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 34)
	/*
	 * Our own descriptors are O_CLOEXEC; this also keeps from the hook
	 * any descriptor our parent leaked to us (glibc 2.34+).
	 */
	if ((e = posix_spawn_file_actions_addclosefrom_np(&fa,
	    STDERR_FILENO + 1)) != 0)
		goto fail;
#endif
	(void)sigemptyset(&none);
	(void)sigemptyset(&deflt);
	(void)sigaddset(&deflt, SIGPIPE);
	(void)sigaddset(&deflt, SIGTERM);
	(void)sigaddset(&deflt, SIGINT);
	(void)sigaddset(&deflt, SIGHUP);
	/*
	 * Its own process group (pgid = its pid), so that a stop reaches
	 * the shell and everything it started (hook_wait()).
	 */
	op = "posix_spawnattr";
	if ((e = posix_spawnattr_setsigmask(&at, &none)) != 0 ||
	    (e = posix_spawnattr_setsigdefault(&at, &deflt)) != 0 ||
	    (e = posix_spawnattr_setpgroup(&at, 0)) != 0 ||
	    (e = posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK |
	    POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP)) != 0)
		goto fail;
	/* posix_spawn's argv is not const: give it copies. */
	if ((cmd = strdup(command)) == NULL) {
		rc = BM_ENOMEM;
		(void)snprintf(errbuf, errlen, "%s", bm_strerror(rc));
		goto out;
	}
	argv[0] = sh;
	argv[1] = dashc;
	argv[2] = cmd;
	argv[3] = NULL;
	op = "posix_spawn /bin/sh";
	(void)fflush(stdout);
	(void)fflush(stderr);
	if ((e = posix_spawn(&pid, "/bin/sh", &fa, &at, argv, envp)) != 0)
		goto fail;
	(void)close(pfd[1]);
	pfd[1] = -1;
	o.fd = pfd[0];
	pfd[0] = -1;
	(void)fcntl(o.fd, F_SETFL, O_NONBLOCK);
	op = "waitpid";
	if ((e = hook_wait(pid, &o, stop, (int64_t)timeout * 1000000000,
	    &st, &stopped, &timed_out)) != 0)
		goto fail;
	/* What it wrote before it ended; a child it left running is not waited for. */
	hook_out_drain(&o);
	if (o.len > 0)
		hook_out_line(&o);
	if (WIFEXITED(st))
		*ret_status = WEXITSTATUS(st);
	else if (WIFSIGNALED(st))
		*ret_status = 128 + WTERMSIG(st);
	rc = !stopped ? 0 : timed_out ? BM_ELIMIT : BM_EINTR;
	what = stopped == 2 ? "SIGTERM sent to the hook, SIGKILL "
	    HOOK_GRACE_TEXT " later" : "SIGTERM sent to the hook";
	if (timed_out)
		(void)snprintf(errbuf, errlen, "timed out after %u s: %s",
		    timeout, what);
	else if (stopped)
		(void)snprintf(errbuf, errlen, "%s", what);
	goto out;
fail:
	(void)snprintf(errbuf, errlen, "%s: %s", op, strerror(e));
out:
	if (have_fa)
		(void)posix_spawn_file_actions_destroy(&fa);
	if (have_at)
		(void)posix_spawnattr_destroy(&at);
	free(envp);
	free(cmd);
	if (o.fd != -1)
		(void)close(o.fd);
	if (pfd[0] != -1)
		(void)close(pfd[0]);
	if (pfd[1] != -1)
		(void)close(pfd[1]);
	return rc;
}
