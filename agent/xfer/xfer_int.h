/*
 * What the transports of agent/xfer/ share and no caller sees: their
 * tables (the registry's rows, agent/xfer/xfer.c) and the stacking of one
 * transport on another (gridftp on curl).
 */
#ifndef BIOMIRROR_XFER_INT_H
#define BIOMIRROR_XFER_INT_H

#include <poll.h>
#include <stddef.h>

#include "biomirror/xfer.h"

/* Sockets polled at once beside a transport's own (XFER_WAIT_MAX). */
#define XFER_WAIT_MAX	(3 * 256)

/*
 * What a transport stacked on another hands to the lower one's poll:
 * its sockets, waited on beside the lower one's own (revents filled in;
 * all 0 when the call did not wait), and the connections it holds to the
 * host, which the lower one leaves out of max_connections.
 */
struct xfer_wait {
	struct pollfd	*fds;		/* borrowed: nfds entries */
	size_t		 nfds;		/* at most XFER_WAIT_MAX */
	size_t		 others;	/* connections held beside */
};

/* The transports of this build (agent/xfer/bm.c, curl.c, gridftp.c). */
extern const struct xfer_ops xfer_bm_ops;
extern const struct xfer_ops xfer_curl_ops;
extern const struct xfer_ops xfer_gridftp_ops;

/*
 * xfer_open() among the transports after above in the registry: the one
 * a stacked transport hands the jobs it does not take.
 */
int	xfer_open_below(const struct xfer_ops *above, const char *url,
	    const struct xfer_opts *o, struct xfer **ret, char *errbuf,
	    size_t errlen);
/* xfer_ready() of the transport xfer_open_below() would open. */
int	xfer_ready_below(const struct xfer_ops *above, const char *url,
	    const struct xfer_opts *o, char *errbuf, size_t errlen);

#endif
