/*
 * Digests and sidecar checksum files (DESIGN.md "verify").  Digests are
 * computed with OpenSSL EVP (MD5, SHA-256); a struct digest runs one
 * EVP_MD_CTX per algorithm it was asked for, fed in file order.  Sidecar
 * files are the checksums an upstream publishes beside its data:
 * "X.md5" / "X.sha256" (NCBI's "X.md5" holds "digest  name"), and the
 * per-directory lists "MD5SUMS", "SHA256SUMS", "md5sum.txt" and
 * "sha256sum.txt" in md5sum(1)/sha256sum(1) output form.  A struct
 * sidecar_set maps mirror paths to the digests those files state.  This
 * module never logs (STYLE.md rule 24) and knows nothing of the network.
 */
#ifndef BIOMIRROR_DIGEST_H
#define BIOMIRROR_DIGEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum digest_alg {
	DIGEST_MD5 = 0,
	DIGEST_SHA256,
	DIGEST__N,		/* number of algorithms */
};

#define DIGEST_BIT(alg)		(1U << (alg))
#define DIGEST_MAX_LEN		32	/* bytes of the longest digest (SHA-256) */
#define DIGEST_TEXT_MAX		80	/* "sha256:" + 64 hex + NUL fits */

struct digest_value {
	enum digest_alg	 alg;
	uint8_t		 md[DIGEST_MAX_LEN];	/* digest_len(alg) bytes used */
};

/* Name of alg ("md5", "sha256"). */
const char *digest_alg_name(enum digest_alg alg);
/* Digest length of alg in bytes (16, 32). */
size_t	digest_len(enum digest_alg alg);
/* True when a and b are the same algorithm and digest (CRYPTO_memcmp). */
bool	digest_equal(const struct digest_value *a, const struct digest_value *b);
/*
 * Write v as "ALG:HEX" (lowercase hex, e.g. "sha256:e3b0...") into buf
 * (len bytes, DIGEST_TEXT_MAX is enough).  Returns 0 or BM_ELIMIT.
 */
int	digest_to_text(const struct digest_value *v, char *buf, size_t len);
/* Parse "ALG:HEX" as written by digest_to_text().  0 or BM_EINVAL. */
int	digest_from_text(const char *s, struct digest_value *ret);

struct digest;

/*
 * A new digest over the algorithms in algs (a mask of DIGEST_BIT(alg),
 * not 0).  *ret is freed with digest_free().  Returns 0, BM_EINVAL or
 * BM_ENOMEM (also when OpenSSL refuses to set up a context).
 */
int	digest_new(unsigned algs, struct digest **ret);
/* Feed len bytes of buf (borrowed).  0, or BM_EIO when EVP failed. */
int	digest_update(struct digest *d, const void *buf, size_t len);
/*
 * Finish the digest (no update after) and put the value of alg (one of
 * the algorithms asked for) into *ret.  May be called once per
 * algorithm.  Returns 0, BM_EINVAL (alg not asked for) or BM_EIO.
 */
int	digest_final(struct digest *d, enum digest_alg alg,
	    struct digest_value *ret);
/* Bytes fed so far. */
uint64_t digest_bytes(const struct digest *d);
/* Free d.  NULL is a no-op. */
void	digest_free(struct digest *d);
/*
 * Feed the bytes of fd (borrowed, readable) from offset off up to
 * offset end (exclusive; UINT64_MAX: to the end of the file) into d,
 * with pread(2) in 1 MiB steps, so that no file position is shared.
 * *ret_n (may be NULL) gets the bytes read.  Returns 0, BM_EIO (errno
 * kept; EIO when the file ended before end) or BM_ENOMEM.  Blocks: call
 * it off the event-loop thread.
 */
int	digest_fd(struct digest *d, int fd, uint64_t off, uint64_t end,
	    uint64_t *ret_n);

/*
 * Is base (a last path component) a sidecar checksum file?  *ret_alg
 * (may be NULL) gets the algorithm its name implies.  "X.md5" and
 * "X.sha256" need a non-empty X.
 */
bool	sidecar_name(const char *base, enum digest_alg *ret_alg);

/*
 * Parse one line of a sidecar file (len bytes, borrowed, without or with
 * its "\n" / "\r\n") for alg; the forms taken: docs/internals.md,
 * "Sidecar files".  On success *ret gets the digest and *ret_name a
 * malloc'd name or NULL when the line has none.  Returns 0, BM_ENOENT
 * (not an entry: ignore it), BM_EINVAL (malformed or unsafe: ignore it)
 * or BM_ENOMEM.
 */
int	sidecar_parse_line(const char *line, size_t len, enum digest_alg alg,
	    struct digest_value *ret, char **ret_name);

/* One path's published digests. */
struct sidecar_sum {
	bool		 has[DIGEST__N];	/* v[alg] is known */
	struct digest_value v[DIGEST__N];
	const char	*from[DIGEST__N];	/* borrowed: sidecar that said so */
	bool		 conflict[DIGEST__N];	/* from[alg] also states another
						   digest for the path: treat
						   it as a mismatch */
};

struct sidecar_set;

/* An empty set (at most max entries).  NULL on out-of-memory. */
struct sidecar_set *sidecar_set_new(size_t max);
/* Free s.  NULL is a no-op. */
void	sidecar_set_free(struct sidecar_set *s);
/*
 * Add the entries of the sidecar file at path (a mirror path, borrowed)
 * whose content is text[0..len) (borrowed); names are relative to its
 * directory.  *ret_n gets the entries added, *ret_bad the lines skipped
 * as invalid (either may be NULL).  Which sidecar wins and what a
 * conflict means: docs/internals.md, "Sidecar files".  Returns 0,
 * BM_EINVAL (path is not a sidecar name), BM_ELIMIT (past max entries)
 * or BM_ENOMEM.
 */
int	sidecar_set_add(struct sidecar_set *s, const char *path,
	    const char *text, size_t len, size_t *ret_n, size_t *ret_bad);
/*
 * Add one digest v for path (borrowed, copied) as stated by from (a
 * name for messages, e.g. "the bm:// listing"; copied): it counts as one
 * more sidecar, after those added before it.  0, BM_ELIMIT or BM_ENOMEM.
 */
int	sidecar_set_put(struct sidecar_set *s, const char *path,
	    const struct digest_value *v, const char *from);
/*
 * The digests published for path, or false when none.  Not thread-safe
 * (the first call after an add sorts the set).
 */
bool	sidecar_set_find(struct sidecar_set *s, const char *path,
	    struct sidecar_sum *ret);
/*
 * Call fn(ctx, sidecar, path) (both borrowed for the call) once for each
 * path and algorithm that sidecar_set_find() would flag as a conflict,
 * in path order.  Stops at and returns fn's first nonzero value, else 0.
 * Not thread-safe (sorts the set).
 */
typedef int (*sidecar_conflict_fn)(void *ctx, const char *sidecar,
	    const char *path);
int	sidecar_set_conflicts(struct sidecar_set *s, sidecar_conflict_fn fn,
	    void *ctx);
/* Entries in the set. */
size_t	sidecar_set_count(const struct sidecar_set *s);

#define SIDECAR_TEXT_MAX	(DIGEST__N * DIGEST_TEXT_MAX)
/*
 * Write the digests sum has as "ALG:HEX" words in algorithm order
 * ("md5:HEX", "md5:HEX sha256:HEX") into buf (len bytes,
 * SIDECAR_TEXT_MAX is enough); "" when it has none.  0 or BM_ELIMIT.
 */
int	sidecar_sum_text(const struct sidecar_sum *sum, char *buf, size_t len);

#endif
