/*
 * The time zone of an upstream's listed times, learnt and checked by a
 * run (agent/run/zone.c): listing_timezone / ftp_timezone = auto take the
 * offset from one fetched file's MDTM or Last-Modified against its listed
 * wall-clock time; a named or fixed ftp_timezone is checked for a server
 * whose MDTM answers in that zone too (vsftpd use_localtime = YES, against
 * RFC 3659).  What is found is recorded per host in the manifest.
 */
#ifndef BIOMIRROR_ZONE_H
#define BIOMIRROR_ZONE_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "biomirror/listing.h"

struct manifest;
struct xfer;

/* What one run knows of its upstream's zone. */
struct zone_state {
	const char	*mirror;	/* borrowed: the mirror's name, for logs */
	const char	*source;	/* borrowed: the source URL (ends in '/') */
	const struct tzspec *conf;	/* borrowed: the configured zone */
	bool		 ftp;		/* ftp://: MDTM, else Last-Modified */
	bool		 record;	/* write what is found (not a dry run) */
	char		 host[256];	/* "scheme://authority" of source */
	struct tzspec	 zone;		/* the zone listed times are read in */
	bool		 known;		/* auto: an offset is recorded or learnt */
	bool		 mdtm_local;	/* MDTM is wall-clock time in zone */
};

/*
 * Before the listing: zone = the configured zone, or for auto the offset
 * recorded for the source's host (UTC while none is); mdtm_local as last
 * recorded.  zs's borrowed fields are set by the caller.  m may be NULL.
 * Returns 0 or BM_EDB.
 */
int	zone_start(struct zone_state *zs, struct manifest *m);
/*
 * After the listing l (borrowed), before its times are resolved: for
 * auto, or an FTP zone with an offset, ask x for the MDTM / Last-Modified
 * of the most recently listed files (one at a time, at most 3) until one
 * tells the offset (auto) or whether MDTM is local time; log what changed
 * and record it in m.  A file that tells nothing leaves zs as it was.
 * Returns 0, BM_ENOMEM, BM_EINTR (*stop set) or BM_EDB.
 */
int	zone_check(struct zone_state *zs, struct xfer *x, struct manifest *m,
	    const struct listing *l, volatile sig_atomic_t *stop);
/*
 * For a listing staged in batches: keep in cand (the caller's listing,
 * room for 3) copies of the entries of batch (borrowed, times not yet
 * resolved) that zone_check could ask, so that zone_check on cand after
 * every batch went through here asks what it would of the whole
 * listing.  Returns 0 or BM_ENOMEM.
 */
int	zone_keep(struct listing *cand, const struct listing *batch);
/*
 * The upstream time of path (relative to the source, borrowed) as MDTM or
 * Last-Modified tell it now, fixed as zone_fix_mtime() does, into *ret
 * (s; -1 when not told).  0, BM_ENOMEM, BM_EINTR or BM_ENET.
 */
int	zone_ask_mtime(struct zone_state *zs, struct xfer *x, const char *path,
	    volatile sig_atomic_t *stop, int64_t *ret);
/*
 * An upstream time (s, as MDTM said it) to UTC: converted through zs's
 * zone when MDTM is local time, else unchanged.
 */
int64_t	zone_fix_mtime(const struct zone_state *zs, int64_t s);
/* "UTC", "UTC+03:00", "UTC-05:30" for offset (s east of UTC) into buf. */
void	zone_fmt_offset(int32_t offset, char *buf, size_t len);

#endif
