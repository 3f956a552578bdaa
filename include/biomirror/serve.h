/*
 * biomirror serve (DESIGN.md "Sources, transports and the server"): a
 * read-only server of the config's [export NAME] trees to downstream
 * biomirror sites over the bm:// protocol (docs/protocol.md), TCP control
 * and data connections.  Its code lives in agent/serve/, the one place
 * besides the transports that owns sockets.
 */
#ifndef BIOMIRROR_SERVE_H
#define BIOMIRROR_SERVE_H

#include <signal.h>

#include "biomirror/config.h"

struct serve_opts {
	const char	*listen;	/* borrowed: --listen, NULL = [serve]'s */
	const char	*state_dir;	/* borrowed: where served mirrors'
					   manifests are (their digests),
					   NULL: none read */
};

/*
 * Serve c's exports (borrowed; checked by config_load_all, none bad)
 * until *stop is set (SIGTERM, SIGINT): then no new sessions, running
 * transfers get drain_timeout seconds, the rest are cut.  Logs one line
 * per session and per file served.  Returns 0 (drained), 1 (transfers
 * were cut) or 2 (a secret file, an export root or the listening socket
 * could not be set up; logged).
 * Sandbox: read the exports and secret files, bind the listen address,
 * write metrics_file.
 */
int	serve_run(const struct config *c, const struct serve_opts *o,
	    volatile sig_atomic_t *stop);

#endif
