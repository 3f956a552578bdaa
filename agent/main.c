/*
 * biomirror: keep a local mirror of a public data repository current.
 * main() sets up what must exist before any other code runs (signal
 * flags, the open-files limit) and hands over to the command line
 * (libcurl's global state comes with the curl module, agent/xfer/
 * curl_load.c, in the runs that use it).  The
 * signal flag is the only mutable global besides the log level (rule 18).
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "biomirror/cli.h"

static volatile sig_atomic_t stop_flag;

/* The flag holds the signal's number, so that the run can name it. */
static void
on_signal(int sig)
{
	stop_flag = sig;
}

int
main(int argc, char **argv)
{
	struct sigaction sa;
	struct rlimit	 rl;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sa.sa_flags = SA_RESTART;
	(void)sigemptyset(&sa.sa_mask);
	(void)sigaction(SIGTERM, &sa, NULL);
	(void)sigaction(SIGINT, &sa, NULL);
	/* A closed terminal ends a run cleanly, like SIGTERM. */
	(void)sigaction(SIGHUP, &sa, NULL);
	sa.sa_handler = SIG_IGN;
	(void)sigaction(SIGPIPE, &sa, NULL);
	/*
	 * Files finished but not yet published keep their temp file and
	 * parent directory open until the batch commit: use the hard limit
	 * of open files, as systemd advises for programs that need many.
	 */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
	return cli_main(argc, argv, &stop_flag);
}
