/*
 * The "gridftp" transport (xfer.h: xfer_gridftp_ops): GridFTP extended
 * block mode (MODE E) for MLSD listings and whole-file FTP jobs, chosen
 * by the registry for ftp:// with ftp_mode = extended.  It is stacked on
 * the next transport of the registry (curl, stream mode), which gets
 * every job the engine does not take and waits on the engine's sockets
 * beside its own (struct xfer_wait).
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
 * The engine probes first: it takes the lister's FEAT (RFC 2389), whose
 * session logs in (USER, PASS), asks FEAT and waits; once the lister has
 * judged the reply (XFER_HINT_MODE_E), that session finishes its set-up
 * and carries the listing, or closes: a GridFTP server sees one control
 * connection fewer than with FEAT on a libcurl connection of its own.
 *
 * Jobs taken: plain ftp:// (no TLS), no bwlimit; while probing, FEAT
 * alone; after, a whole file (off 0, len 0) or an MLSD listing (RFC 3659
 * section 7, its lines in MODE E blocks like a file's bytes), no LIST, no
 * validator, no If-Modified-Since.  Everything else goes below.
 * The sessions that list a tree then carry its files.  Results follow
 * xfer.h: res.status is the last reply code, res.mtime the MDTM time (-1
 * when the listing gave it), res.size the SIZE reply (-1 when not asked);
 * a FEAT job's body is its reply, as received (at most 64 KiB), and a
 * refused FEAT (5xx) is no error: it lists no features.
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

#endif
