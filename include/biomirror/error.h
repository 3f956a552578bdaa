/*
 * Error codes shared by every module (STYLE.md rule 22).  A function that
 * can fail returns 0 on success or one of these negative codes.  Per-file
 * failure reasons recorded in the manifest are the bm_strerror() strings.
 */
#ifndef BIOMIRROR_ERROR_H
#define BIOMIRROR_ERROR_H

#define BM_OK		  0
#define BM_ENOMEM	(-1)	/* allocation failed */
#define BM_EIO		(-2)	/* local I/O error (errno says which) */
#define BM_ENET		(-3)	/* network error, retryable */
#define BM_EPROTO	(-4)	/* upstream spoke nonsense (bad page, bad reply) */
#define BM_ECHECKSUM	(-5)	/* byte count or digest mismatch */
#define BM_EDB		(-6)	/* manifest (SQLite) error */
#define BM_ELIMIT	(-7)	/* a fixed cap was reached */
#define BM_EINVAL	(-8)	/* invalid argument, bad config value, bad path */
#define BM_ENOENT	(-9)	/* no such file (local) or 404/410 (upstream) */
#define BM_ECHANGED	(-10)	/* upstream changed during the transfer */
#define BM_ENOSPC	(-11)	/* destination file system is full */
#define BM_ELOCKED	(-12)	/* another run holds the lock */
#define BM_EUNSAFE	(-13)	/* hostile path or symlink in the way */
#define BM_EHTTP	(-14)	/* HTTP error status that is not retryable */
#define BM_EINTR	(-15)	/* stopped by a signal (SIGTERM, SIGINT) */
#define BM_ECORRUPT	(-16)	/* the manifest is damaged (or empty) */

/*
 * Return a static, human-readable string for a BM_E* code (or "ok").
 * Never NULL; unknown codes give "unknown error".
 */
const char	*bm_strerror(int rc);

#endif
