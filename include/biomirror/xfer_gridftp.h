/*
 * GridFTP extended block mode (MODE E) for whole-file FTP jobs, a part of
 * the TCP transport (xfer.h): agent/xfer_curl.c hands it the jobs that
 * qualify (gridftp_wants) and drives it from its event loop, polling the
 * sockets it lists (gridftp_fds) beside libcurl's.
 *
 * libcurl speaks stream mode only, where the end of a file is the end of
 * its data connection: one passive port, one TCP handshake and one
 * TIME_WAIT per file, and a GridFTP server spends most of a run of small
 * files finding a free port.  In MODE E (GFD.20, "GridFTP: Protocol
 * Extensions to FTP for the Grid", section 3.4) every block carries a
 * header of a descriptor byte, a 64-bit byte count and a 64-bit offset
 * (network order); the end of a file is a descriptor flag (EOD, EOF), so
 * the data connection stays open and the next RETR on the same control
 * connection reuses it ("125 ... reusing existing data connection").  The
 * sender opens the data connection (GFD.20 3.4: a passive sender is
 * refused), so a RETR goes after PORT/EPRT: the server connects to us,
 * as it does for globus-url-copy.  Each control connection ("session")
 * logs in once (USER/PASS, TYPE I, MODE E, DCAU N, OPTS RETR
 * Parallelism=1,1,1, PORT), then sends MLSD per directory and [MDTM]
 * [SIZE] RETR per file.  A session is opened for each queued job that no
 * session logging in will take, within max_connections.
 *
 * An engine made to probe takes the lister's FEAT first (RFC 2389): its
 * session logs in (USER, PASS), asks FEAT and waits; once the lister has
 * judged the reply (gridftp_settle), that session finishes its set-up
 * and carries the listing, or closes: a GridFTP server sees one control
 * connection fewer than with FEAT on a libcurl connection of its own.
 *
 * Jobs taken: plain ftp:// (no TLS), no bwlimit; while probing, FEAT
 * alone; after, a whole file (off 0, len 0) or an MLSD listing (RFC 3659
 * section 7, its lines in MODE E blocks like a file's bytes), no LIST, no
 * validator, no If-Modified-Since.  Everything else stays with libcurl.
 * The sessions that list a tree then carry its files.  Results follow
 * xfer.h: res.status is the last reply code, res.mtime the MDTM time (-1
 * when the listing gave it), res.size the SIZE reply (-1 when not asked);
 * a FEAT job's body is its reply, as received (at most 64 KiB), and a
 * refused FEAT (5xx) is no error: it lists no features.
 */
#ifndef BIOMIRROR_XFER_GRIDFTP_H
#define BIOMIRROR_XFER_GRIDFTP_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "biomirror/xfer.h"

struct gridftp;

/* Parsed MODE E block header (GFD.20 section 3.4.1). */
struct gridftp_block {
	uint8_t		 desc;		/* descriptor flags, GRIDFTP_D_* */
	uint64_t	 count;		/* payload bytes that follow */
	uint64_t	 offset;	/* file offset, or EOD count with EOF */
};
#define GRIDFTP_D_EOR		0x80	/* end of record (not in files) */
#define GRIDFTP_D_EOF		0x40	/* offset is the EOD count */
#define GRIDFTP_D_ERRORS	0x20	/* suspected errors in this block */
#define GRIDFTP_D_RESTART	0x10	/* payload is a restart marker */
#define GRIDFTP_D_EOD		0x08	/* last block on this connection */
#define GRIDFTP_D_CLOSE		0x04	/* sender closes the connection */
#define GRIDFTP_HDRLEN		17

/*
 * Decode the 17-byte header at p into *ret.  Returns 0, or BM_EPROTO for
 * a header no sender of a file may send (suspected errors, EOR, EOF with
 * an EOD count of 0, or a count or offset past 2^63).
 */
int	gridftp_block_parse(const uint8_t p[GRIDFTP_HDRLEN],
	    struct gridftp_block *ret);

/*
 * Make an engine for jobs of one host, with the transport's options
 * (copied; strings borrowed for its lifetime) and at most
 * o->max_connections sessions; probe: it takes FEAT jobs only until
 * gridftp_settle().  Returns 0 or BM_ENOMEM.
 */
int	gridftp_new(const struct xfer_opts *o, bool probe,
	    struct gridftp **ret);
/*
 * End a probe: on, FEAT showed GridFTP (DCAU) with MLSD, and the engine
 * takes listings and files from now on, the probing session first; off,
 * it takes no more jobs and its idle sessions close.  A no-op on an
 * engine that is not probing.
 */
void	gridftp_settle(struct gridftp *g, bool on);
/* Does job qualify (see above)?  The first job taken fixes the host. */
bool	gridftp_wants(const struct gridftp *g, const struct xfer_job *job);
/*
 * Queue job (borrowed until done; res already reset by the caller).
 * Returns 0, BM_ENOMEM, or BM_EINVAL for a URL it cannot take.
 */
int	gridftp_submit(struct gridftp *g, struct xfer_job *job);
/*
 * Fill fds (room for max) with the sockets to poll and the events wanted;
 * returns how many.  *ret_timeout_ms is lowered to the next deadline.
 */
size_t	gridftp_fds(struct gridftp *g, struct pollfd *fds, size_t max,
	    int *ret_timeout_ms);
/*
 * Do all work that is possible without blocking (reads, writes, accepts,
 * connects, deadlines) and call done for each job that ended; *ret_n is
 * how many did.  others: connections the transport holds to the host
 * outside the engine (libcurl's transfers in flight): new sessions keep
 * sessions + others within max_connections, and idle sessions are closed
 * while others > 0 and no job waits.  ready: nready results of poll(2)
 * over gridftp_fds()'s list; only sessions with a reported socket (or a
 * deadline passed) do I/O; NULL steps every session.  Returns 0.
 */
int	gridftp_run(struct gridftp *g, size_t others,
	    const struct pollfd *ready, size_t nready, xfer_done_fn done,
	    void *ctx, size_t *ret_n);
/* Sessions open or opening. */
size_t	gridftp_sessions(const struct gridftp *g);
/* Forget job without a done call (its session, if any, is closed). */
bool	gridftp_cancel(struct gridftp *g, struct xfer_job *job);
/* Jobs queued or running. */
size_t	gridftp_active(const struct gridftp *g);
/* Close every session and free g (no done calls).  NULL is a no-op. */
void	gridftp_free(struct gridftp *g);

#endif
