/*
 * The time zone of an upstream's listed times (include/biomirror/zone.h).
 * A listing's wall-clock times (LIST, an HTML index) say nothing of their
 * zone; one file's MDTM (RFC 3659: UTC) or Last-Modified (RFC 9110: GMT)
 * against its listed time tells the offset, to the quarter hour.  Asked
 * once a run, before the diff, so that every listed time of the run is
 * read in the zone the server lists in now (a daylight-saving change
 * between runs is seen at once).  Records go to the manifest's zones
 * table, one row per host.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "biomirror/clock.h"
#include "biomirror/error.h"
#include "biomirror/listing.h"
#include "biomirror/log.h"
#include "biomirror/manifest.h"
#include "biomirror/xfer.h"
#include "biomirror/zone.h"

#define ZONE_PROBES	3		/* files asked at most */
#define ZONE_MAX_OFF	(14 * 3600)	/* UTC-12 .. UTC+14 */
#define ZONE_STEP	900		/* offsets are whole quarter hours */

void
zone_fmt_offset(int32_t offset, char *buf, size_t len)
{
	int32_t	 a = offset < 0 ? -offset : offset;

	if (offset == 0)
		(void)snprintf(buf, len, "UTC");
	else
		(void)snprintf(buf, len, "UTC%c%02d:%02d", offset < 0 ? '-' :
		    '+', (int)(a / 3600), (int)(a % 3600 / 60));
}

/* "scheme://authority" of url into buf. */
static void
zone_host(const char *url, char *buf, size_t len)
{
	const char	*p = strstr(url, "://"), *e;

	p = p != NULL ? p + 3 : url;
	e = strchr(p, '/');
	(void)snprintf(buf, len, "%.*s", (int)(e != NULL ? e - url :
	    (ptrdiff_t)strlen(url)), url);
}

int
zone_start(struct zone_state *zs, struct manifest *m)
{
	struct zone_rec	 z;
	int		 rc;

	zone_host(zs->source, zs->host, sizeof(zs->host));
	zs->zone = *zs->conf;
	zs->known = zs->conf->kind != TZ_AUTO;
	zs->mdtm_local = false;
	if (m == NULL)
		return 0;
	rc = manifest_zone_get(m, zs->host, &z);
	if (rc == BM_ENOENT)
		rc = 0;
	else if (rc == 0 && zs->conf->kind != TZ_AUTO)
		zs->mdtm_local = z.mdtm_local;	/* until zone_check() asks */
	else if (rc == 0) {
		zs->zone.kind = TZ_FIXED;
		zs->zone.offset = z.offset;
		zs->known = true;
	}
	if (zs->zone.kind == TZ_AUTO) {
		/* Nothing learnt yet: UTC until a file tells. */
		zs->zone.kind = TZ_FIXED;
		zs->zone.offset = 0;
	}
	return rc;
}

/* The precision of a listed time in seconds (0: none usable). */
static int64_t
prec_seconds(enum mtime_prec p)
{
	switch (p) {
	case MTIME_MINUTE:
		return 60;
	case MTIME_SECOND:
	case MTIME_NS:
		return 1;
	default:
		return 0;
	}
}

/* True when zone_candidates() would consider e. */
static bool
zone_candidate(const struct entry *e)
{
	return e->type == ENTRY_FILE && !e->zone_stated &&
	    prec_seconds(e->mtime_prec) != 0;
}

/*
 * The ZONE_PROBES files with the latest listed wall-clock times, to the
 * minute or finer, in a zone the listing does not state, into v (latest
 * first); returns how many.
 */
static size_t
zone_candidates(const struct listing *l, const struct entry **v)
{
	const struct entry *e;
	size_t		 i, j, n = 0;

	for (i = 0; i < listing_count(l); i++) {
		e = listing_get(l, i);
		if (!zone_candidate(e))
			continue;
		for (j = n; j > 0 && v[j - 1]->mtime_wall < e->mtime_wall; j--)
			if (j < ZONE_PROBES)
				v[j] = v[j - 1];
		if (j < ZONE_PROBES) {
			v[j] = e;
			if (n < ZONE_PROBES)
				n++;
		}
	}
	return n;
}

int
zone_keep(struct listing *cand, const struct listing *batch)
{
	const struct entry *e, *c;
	struct entry	*dst;
	size_t		 i, j, n, w;
	int		 rc;

	for (i = 0; i < listing_count(batch); i++) {
		e = listing_get(batch, i);
		if (!zone_candidate(e))
			continue;
		if ((n = listing_count(cand)) == ZONE_PROBES) {
			/* The one that ranks last: the earliest time, and
			 * of equal times the one listed last. */
			for (w = 0, j = 1; j < n; j++) {
				c = listing_get(cand, j);
				if (c->mtime_wall <= listing_get(cand,
				    w)->mtime_wall)
					w = j;
			}
			if (e->mtime_wall <= listing_get(cand, w)->mtime_wall)
				continue;
			entry_clear(listing_get_mut(cand, w));
			for (j = w; j + 1 < n; j++)
				*listing_get_mut(cand, j) =
				    *listing_get(cand, j + 1);
			memset(listing_get_mut(cand, n - 1), 0, sizeof(*e));
			listing_pop(cand);
		}
		if ((rc = listing_append(cand, &dst)) != 0)
			return rc;
		if ((rc = listing_entry_copy(dst, e)) != 0) {
			listing_pop(cand);
			return rc;
		}
	}
	return 0;
}

static void
probe_done(void *ctx, struct xfer_job *job)
{
	(void)ctx;
	*(bool *)job->owner = true;
}

/*
 * Ask for e's validators (MDTM + SIZE, or the first byte over HTTP);
 * *ret the upstream time (s), -1 when not told.  0, BM_ENOMEM, BM_EINTR
 * or the engine's failure.
 */
static int
zone_probe(struct zone_state *zs, struct xfer *x, const char *path,
    volatile sig_atomic_t *stop, int64_t *ret)
{
	struct xfer_job	 job;
	char		*enc = NULL, *url = NULL;
	bool		 done = false;
	int		 rc;

	*ret = -1;
	if ((rc = path_encode(path, strlen(path), &enc)) != 0)
		goto out;
	if (asprintf(&url, "%s%s", zs->source, enc) == -1) {
		url = NULL;
		rc = BM_ENOMEM;
		goto out;
	}
	memset(&job, 0, sizeof(job));
	job.url = url;
	job.kind = XFER_JOB_VALIDATE;
	job.expect_size = -1;
	job.if_modified_since = -1;
	job.owner = &done;
	if ((rc = xfer_submit(x, &job)) != 0)
		goto out;
	while (!done) {
		if (*stop) {
			xfer_cancel(x, &job);
			rc = BM_EINTR;
			goto out;
		}
		if ((rc = xfer_poll(x, 100, probe_done, NULL)) != 0) {
			xfer_cancel(x, &job);
			goto out;
		}
	}
	if (job.res.cls == XFER_OK)
		*ret = job.res.mtime;
	else
		log_debug("%s: zone: %s: %s", zs->mirror, path,
		    job.res.errmsg);
	rc = 0;
out:
	free(enc);
	free(url);
	return rc;
}

/*
 * What one probed file tells: for auto the offset (*ret_off, true), else
 * whether its MDTM is the listed wall-clock time (*ret_local).  False
 * when it tells nothing (no time, or one that fits no whole offset: the
 * file changed since it was listed).
 */
static bool
zone_judge(const struct zone_state *zs, const struct entry *e, int64_t up,
    int32_t *ret_off, bool *ret_local)
{
	int64_t		 p = prec_seconds(e->mtime_prec), d, off, utc;

	if (up < 0)
		return false;
	d = e->mtime_wall - up;	/* in (off - p, off] */
	if (zs->conf->kind == TZ_AUTO) {
		off = (d + (d < 0 ? -ZONE_STEP : ZONE_STEP) / 2) / ZONE_STEP *
		    ZONE_STEP;
		if (off > ZONE_MAX_OFF || off < -ZONE_MAX_OFF ||
		    d > off || d <= off - p)
			return false;
		*ret_off = (int32_t)off;
		return true;
	}
	if (tzspec_to_utc(zs->conf, e->mtime_wall, &utc) != 0)
		return false;
	*ret_off = (int32_t)(e->mtime_wall - utc);
	if (d <= 0 && d > -p) {
		*ret_local = true;	/* MDTM is the wall-clock time */
		return true;
	}
	utc = up - utc;
	if (utc >= 0 && utc < p) {
		*ret_local = false;
		return true;
	}
	return false;
}

/* Log and record what zone_check() found; 0 or BM_EDB. */
static int
zone_record(struct zone_state *zs, struct manifest *m, const char *path,
    int32_t off, bool local)
{
	struct zone_rec	 z, old;
	char		 now[32], was[32];
	bool		 had;
	int		 rc;

	had = manifest_zone_get(m, zs->host, &old) == 0;
	zone_fmt_offset(off, now, sizeof(now));
	if (zs->conf->kind == TZ_AUTO) {
		if (!had)
			log_info("%s: zone: %s lists times in %s (learnt from "
			    "%s)", zs->mirror, zs->host, now, path);
		else if (old.offset != off) {
			zone_fmt_offset(old.offset, was, sizeof(was));
			log_warnx("%s: zone: %s now lists times in %s, was %s "
			    "(a daylight-saving change?): learnt from %s",
			    zs->mirror, zs->host, now, was, path);
		}
	} else if (local && (!had || !old.mdtm_local))
		log_info("%s: zone: %s answers MDTM in local time (%s, as "
		    "its listing; vsftpd use_localtime): read in "
		    "ftp_timezone", zs->mirror, zs->host, now);
	if (!zs->record)
		return 0;
	memset(&z, 0, sizeof(z));
	(void)snprintf(z.host, sizeof(z.host), "%s", zs->host);
	z.offset = off;
	z.mdtm_local = local;
	z.checked_ns = clock_real_ns();
	z.learnt_ns = had && old.offset == off && old.mdtm_local == local ?
	    old.learnt_ns : z.checked_ns;
	if ((rc = manifest_zone_put(m, &z)) != 0)
		return BM_EDB;
	return 0;
}

int
zone_check(struct zone_state *zs, struct xfer *x, struct manifest *m,
    const struct listing *l, volatile sig_atomic_t *stop)
{
	const struct entry *v[ZONE_PROBES];
	int64_t		 up, utc;
	int32_t		 off = 0;
	size_t		 i, n;
	bool		 local = false;
	int		 rc;

	if (zs->conf->kind == TZ_UTC || (zs->conf->kind != TZ_AUTO &&
	    !zs->ftp))
		return 0;
	n = zone_candidates(l, v);
	/* A named or fixed zone with no offset has nothing to tell. */
	if (zs->conf->kind != TZ_AUTO && (n == 0 || tzspec_to_utc(zs->conf,
	    v[0]->mtime_wall, &utc) != 0 || utc == v[0]->mtime_wall))
		return 0;
	for (i = 0; i < n; i++) {
		if ((rc = zone_probe(zs, x, v[i]->path, stop, &up)) != 0)
			return rc;
		if (zone_judge(zs, v[i], up, &off, &local))
			break;
	}
	if (i == n) {
		if (zs->conf->kind == TZ_AUTO && !zs->known)
			log_warnx("%s: zone: no listed file told %s's offset "
			    "(MDTM or Last-Modified): its times are read as "
			    "UTC this run", zs->mirror, zs->host);
		return 0;
	}
	if (zs->conf->kind == TZ_AUTO) {
		zs->zone.kind = TZ_FIXED;
		zs->zone.offset = off;
		zs->known = true;
	}
	zs->mdtm_local = local;
	return m != NULL ? zone_record(zs, m, v[i]->path, off, local) : 0;
}

int
zone_ask_mtime(struct zone_state *zs, struct xfer *x, const char *path,
    volatile sig_atomic_t *stop, int64_t *ret)
{
	int	 rc;

	if ((rc = zone_probe(zs, x, path, stop, ret)) == 0)
		*ret = zone_fix_mtime(zs, *ret);
	return rc;
}

int64_t
zone_fix_mtime(const struct zone_state *zs, int64_t s)
{
	int64_t	 utc;

	if (!zs->mdtm_local || s < 0 || tzspec_to_utc(&zs->zone, s,
	    &utc) != 0)
		return s;
	return utc;
}
