/*
 * The "gridftp" transport (xfer.h: xfer_gridftp_ops): GridFTP extended
 * block mode (MODE E, GFD.20) for MLSD listings and whole-file jobs over
 * plain ftp:// with ftp_mode = extended, one data connection reused per
 * session.  Stacked on the next transport (curl), which gets every other
 * job.  Results follow xfer.h.  Sessions, the FEAT probe and the jobs it
 * takes: see docs/ftp.md, "GridFTP extended block mode".
 */
#ifndef BIOMIRROR_XFER_GRIDFTP_H
#define BIOMIRROR_XFER_GRIDFTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "biomirror/xfer.h"

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
 * The receive buffers of one UDT listener when udt_buffer is 0, from
 * rtt_us (the control connection's round trip, microseconds), streams
 * (connections per file) and sessions (listeners receiving at once).
 * *ret_udp, the UDP buffer the listener's connections share: the
 * bandwidth-delay product at 1 Gbit/s, at least 38,400,000 (libudt's
 * flow window), at most 256 MiB.  *ret_udt, each connection's UDT buffer,
 * which libudt advertises to the sender as its flow window: the same
 * product (at least 4 MiB) split over streams x sessions, so that all
 * senders together keep about one product in flight; at least 256 KiB
 * (4 MiB below an RTT of 20 ms: a LAN), at most 25,600 packets of 1,472
 * bytes.  docs/performance.md says why.
 */
void	gridftp_udt_bufs(uint64_t rtt_us, unsigned streams, size_t sessions,
	    uint64_t *ret_udt, uint64_t *ret_udp);

#endif
