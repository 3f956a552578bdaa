/*
 * The command line (DESIGN.md "Command line"): global options, the
 * commands, per-run overrides, and the exit status of the whole call.
 */
#ifndef BIOMIRROR_CLI_H
#define BIOMIRROR_CLI_H

#include <signal.h>

/*
 * Parse argv and run the command.  stop is the flag the SIGTERM, SIGINT
 * and SIGHUP handlers set to the signal's number (0 while none came).  Returns the process exit status (0, 1, 2, 3, 4
 * or 75, DESIGN.md "Exit status").
 */
int	cli_main(int argc, char **argv, volatile sig_atomic_t *stop);

#endif
