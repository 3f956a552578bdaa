/*
 * Digests (OpenSSL EVP) and sidecar checksum files (see
 * include/biomirror/digest.h).  Every EVP call is checked (1 is success)
 * and digests are compared with CRYPTO_memcmp (STYLE.md rule 40).  A
 * sidecar_set is an array of (path, digest, order added) entries, sorted
 * by path on the first lookup after an add; for each path and algorithm
 * the entry added first wins, except that a sidecar stating two different
 * digests of one algorithm for one path makes that path a conflict (a
 * mismatch for the callers, never a pass on either digest).  Sidecar text is hostile input: every line
 * is length-checked, hex is decoded digit by digit, and names go through
 * path_is_safe() before they are joined to the sidecar's directory.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "biomirror/digest.h"
#include "biomirror/error.h"
#include "biomirror/listing.h"

#define DIGEST_CHUNK		(1024 * 1024)	/* bytes per pread */
#define SIDECAR_MAX_LINE	8192		/* longer lines are ignored */

struct digest {
	EVP_MD_CTX	*ctx[DIGEST__N];	/* owned, NULL when not asked for */
	bool		 done;			/* finalized: no more updates */
	struct digest_value out[DIGEST__N];	/* valid when done */
	uint64_t	 bytes;			/* bytes fed */
	uint8_t		*buf;			/* owned: digest_fd's buffer, lazily */
};

struct sidecar_ent {
	char		*path;		/* owned: mirror path it covers */
	struct digest_value v;
	const char	*from;		/* borrowed from the set's names */
	size_t		 seq;		/* order added */
};

struct sidecar_set {
	struct sidecar_ent *e;		/* owned */
	size_t		 n, cap, max;
	char		**names;	/* owned: sidecar paths added */
	size_t		 nnames;
	bool		 sorted;
};

const char *
digest_alg_name(enum digest_alg alg)
{
	return alg == DIGEST_MD5 ? "md5" : "sha256";
}

size_t
digest_len(enum digest_alg alg)
{
	return alg == DIGEST_MD5 ? 16 : 32;
}

static const EVP_MD *
digest_md(enum digest_alg alg)
{
	return alg == DIGEST_MD5 ? EVP_md5() : EVP_sha256();
}

bool
digest_equal(const struct digest_value *a, const struct digest_value *b)
{
	return a->alg == b->alg &&
	    CRYPTO_memcmp(a->md, b->md, digest_len(a->alg)) == 0;
}

int
digest_to_text(const struct digest_value *v, char *buf, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	const char	*name = digest_alg_name(v->alg);
	size_t		 i, n = strlen(name), dl = digest_len(v->alg);

	if (len < n + 1 + 2 * dl + 1)
		return BM_ELIMIT;
	memcpy(buf, name, n);
	buf[n++] = ':';
	for (i = 0; i < dl; i++) {
		buf[n++] = hex[v->md[i] >> 4];
		buf[n++] = hex[v->md[i] & 0xf];
	}
	buf[n] = '\0';
	return 0;
}

static int
hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Decode exactly 2 * digest_len(alg) hex digits at s.  0 or BM_EINVAL. */
static int
hex_decode(const char *s, size_t n, enum digest_alg alg,
    struct digest_value *ret)
{
	struct digest_value v;
	size_t		 i;
	int		 hi, lo;

	if (n != 2 * digest_len(alg))
		return BM_EINVAL;
	memset(&v, 0, sizeof(v));
	v.alg = alg;
	for (i = 0; i < n / 2; i++) {
		if ((hi = hexval(s[2 * i])) < 0 ||
		    (lo = hexval(s[2 * i + 1])) < 0)
			return BM_EINVAL;
		v.md[i] = (uint8_t)(hi << 4 | lo);
	}
	*ret = v;
	return 0;
}

int
digest_from_text(const char *s, struct digest_value *ret)
{
	const char	*colon = strchr(s, ':');
	enum digest_alg	 alg;

	if (colon == NULL)
		return BM_EINVAL;
	if ((size_t)(colon - s) == 3 && strncmp(s, "md5", 3) == 0)
		alg = DIGEST_MD5;
	else if ((size_t)(colon - s) == 6 && strncmp(s, "sha256", 6) == 0)
		alg = DIGEST_SHA256;
	else
		return BM_EINVAL;
	return hex_decode(colon + 1, strlen(colon + 1), alg, ret);
}

int
digest_new(unsigned algs, struct digest **ret)
{
	struct digest	*d;
	int		 i, rc = BM_ENOMEM;

	if (algs == 0 || (algs & ~((1U << DIGEST__N) - 1)) != 0)
		return BM_EINVAL;
	if ((d = calloc(1, sizeof(*d))) == NULL)
		return BM_ENOMEM;
	for (i = 0; i < DIGEST__N; i++) {
		if ((algs & DIGEST_BIT(i)) == 0)
			continue;
		if ((d->ctx[i] = EVP_MD_CTX_new()) == NULL ||
		    EVP_DigestInit_ex(d->ctx[i], digest_md((enum digest_alg)i),
		    NULL) != 1)
			goto out;
	}
	*ret = d;
	d = NULL;
	rc = 0;
out:
	digest_free(d);
	return rc;
}

int
digest_update(struct digest *d, const void *buf, size_t len)
{
	int	 i;

	if (d->done)
		return BM_EINVAL;
	for (i = 0; i < DIGEST__N; i++)
		if (d->ctx[i] != NULL &&
		    EVP_DigestUpdate(d->ctx[i], buf, len) != 1)
			return BM_EIO;
	d->bytes += len;
	return 0;
}

int
digest_final(struct digest *d, enum digest_alg alg, struct digest_value *ret)
{
	unsigned int	 n;
	int		 i;

	if ((unsigned)alg >= DIGEST__N || d->ctx[alg] == NULL)
		return BM_EINVAL;
	if (!d->done) {
		for (i = 0; i < DIGEST__N; i++) {
			if (d->ctx[i] == NULL)
				continue;
			memset(&d->out[i], 0, sizeof(d->out[i]));
			d->out[i].alg = (enum digest_alg)i;
			if (EVP_DigestFinal_ex(d->ctx[i], d->out[i].md, &n) != 1 ||
			    n != digest_len((enum digest_alg)i))
				return BM_EIO;
		}
		d->done = true;
	}
	*ret = d->out[alg];
	return 0;
}

uint64_t
digest_bytes(const struct digest *d)
{
	return d->bytes;
}

void
digest_free(struct digest *d)
{
	int	 i;

	if (d == NULL)
		return;
	for (i = 0; i < DIGEST__N; i++)
		EVP_MD_CTX_free(d->ctx[i]);
	free(d->buf);
	free(d);
}

int
digest_fd(struct digest *d, int fd, uint64_t off, uint64_t end,
    uint64_t *ret_n)
{
	uint64_t	 n = 0;
	size_t		 want;
	ssize_t		 r;
	int		 rc = 0;

	if (d->buf == NULL && (d->buf = malloc(DIGEST_CHUNK)) == NULL)
		return BM_ENOMEM;
	while (off < end) {
		want = end - off < DIGEST_CHUNK ? (size_t)(end - off) :
		    DIGEST_CHUNK;
		r = pread(fd, d->buf, want, (off_t)off);
		if (r == -1 && errno == EINTR)
			continue;
		if (r == -1) {
			rc = BM_EIO;
			break;
		}
		if (r == 0) {
			if (end != UINT64_MAX) {
				errno = EIO;
				rc = BM_EIO;
			}
			break;
		}
		if ((rc = digest_update(d, d->buf, (size_t)r)) != 0)
			break;
		off += (uint64_t)r;
		n += (uint64_t)r;
	}
	if (ret_n != NULL)
		*ret_n = n;
	return rc;
}

/* ---- sidecar files ---- */

bool
sidecar_name(const char *base, enum digest_alg *ret_alg)
{
	size_t		 n = strlen(base);
	enum digest_alg	 alg;

	if (strcmp(base, "MD5SUMS") == 0 || strcmp(base, "md5sum.txt") == 0)
		alg = DIGEST_MD5;
	else if (strcmp(base, "SHA256SUMS") == 0 ||
	    strcmp(base, "sha256sum.txt") == 0)
		alg = DIGEST_SHA256;
	else if (n > 4 && strcmp(base + n - 4, ".md5") == 0)
		alg = DIGEST_MD5;
	else if (n > 7 && strcmp(base + n - 7, ".sha256") == 0)
		alg = DIGEST_SHA256;
	else
		return false;
	if (ret_alg != NULL)
		*ret_alg = alg;
	return true;
}

/* "MD5 (NAME) = HEX" / "SHA256 (NAME) = HEX" (BSD md5(1), --tag). */
static int
parse_tagged(const char *s, size_t len, enum digest_alg alg,
    struct digest_value *ret, const char **ret_name, size_t *ret_nlen)
{
	const char	*tag = alg == DIGEST_MD5 ? "MD5 (" : "SHA256 (";
	size_t		 tl = strlen(tag), hl = 2 * digest_len(alg);
	const char	*eq;

	if (len < tl + 4 + hl || strncmp(s, tag, tl) != 0)
		return BM_EINVAL;
	eq = s + len - hl - 4;		/* ") = " before the hex */
	if (memcmp(eq, ") = ", 4) != 0)
		return BM_EINVAL;
	*ret_name = s + tl;
	*ret_nlen = (size_t)(eq - (s + tl));
	return hex_decode(eq + 4, hl, alg, ret);
}

int
sidecar_parse_line(const char *line, size_t len, enum digest_alg alg,
    struct digest_value *ret, char **ret_name)
{
	struct digest_value v;
	const char	*name = NULL, *sp;
	size_t		 nlen = 0;
	int		 rc;

	while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
		len--;
	if (len > SIDECAR_MAX_LINE)
		return BM_EINVAL;
	if (len == 0 || line[0] == '#' || line[0] == '\\')
		return BM_ENOENT;
	if (memchr(line, '\0', len) != NULL)
		return BM_EINVAL;
	if (line[0] == 'M' || line[0] == 'S') {
		if ((rc = parse_tagged(line, len, alg, &v, &name, &nlen)) != 0)
			return rc;
	} else {
		sp = memchr(line, ' ', len);
		if ((rc = hex_decode(line, sp ? (size_t)(sp - line) : len,
		    alg, &v)) != 0)
			return rc;
		if (sp != NULL) {
			/* "HEX  NAME", "HEX *NAME" or "HEX NAME". */
			name = sp + 1;
			if (name < line + len && (*name == ' ' || *name == '*'))
				name++;
			nlen = (size_t)(line + len - name);
			if (nlen == 0)
				return BM_EINVAL;
		}
	}
	if (name != NULL && nlen >= 2 && name[0] == '.' && name[1] == '/') {
		name += 2;
		nlen -= 2;
	}
	if (name != NULL && !path_is_safe(name, nlen))
		return BM_EINVAL;
	*ret_name = NULL;
	if (name != NULL && (*ret_name = strndup(name, nlen)) == NULL)
		return BM_ENOMEM;
	*ret = v;
	return 0;
}

struct sidecar_set *
sidecar_set_new(size_t max)
{
	struct sidecar_set *s;

	if ((s = calloc(1, sizeof(*s))) == NULL)
		return NULL;
	s->max = max;
	s->sorted = true;
	return s;
}

void
sidecar_set_free(struct sidecar_set *s)
{
	size_t	 i;

	if (s == NULL)
		return;
	for (i = 0; i < s->n; i++)
		free(s->e[i].path);
	for (i = 0; i < s->nnames; i++)
		free(s->names[i]);
	free(s->e);
	free(s->names);
	free(s);
}

size_t
sidecar_set_count(const struct sidecar_set *s)
{
	return s->n;
}

/* Append one entry; path is owned by the set from here on (freed on error). */
static int
set_push(struct sidecar_set *s, char *path, const struct digest_value *v,
    const char *from)
{
	struct sidecar_ent *ne;
	size_t		 ncap;

	if (s->n >= s->max) {
		free(path);
		return BM_ELIMIT;
	}
	if (s->n == s->cap) {
		ncap = s->cap ? s->cap * 2 : 64;
		if ((ne = reallocarray(s->e, ncap, sizeof(*ne))) == NULL) {
			free(path);
			return BM_ENOMEM;
		}
		s->e = ne;
		s->cap = ncap;
	}
	s->e[s->n].path = path;
	s->e[s->n].v = *v;
	s->e[s->n].from = from;
	s->e[s->n].seq = s->n;
	s->n++;
	s->sorted = false;
	return 0;
}

/* The mirror path of name in dir (dirlen bytes, 0 for the top). */
static char *
join_path(const char *dir, size_t dirlen, const char *name)
{
	char	*p;

	if (dirlen == 0)
		return strdup(name);
	if (asprintf(&p, "%.*s/%s", (int)dirlen, dir, name) < 0)
		return NULL;
	return p;
}

/* Remember the sidecar's path (entries borrow it). */
static const char *
set_name(struct sidecar_set *s, const char *path)
{
	char	**nv;

	if ((nv = reallocarray(s->names, s->nnames + 1, sizeof(*nv))) == NULL)
		return NULL;
	s->names = nv;
	if ((s->names[s->nnames] = strdup(path)) == NULL)
		return NULL;
	return s->names[s->nnames++];
}

/* The file "X.md5" / "X.sha256" is named for (its path minus the suffix). */
static char *
sidecar_subject(const char *path, const char *base, enum digest_alg alg)
{
	size_t	 n = strlen(path), sl = alg == DIGEST_MD5 ? 4 : 7;

	if (strcmp(base, "MD5SUMS") == 0 || strcmp(base, "SHA256SUMS") == 0 ||
	    strcmp(base, "md5sum.txt") == 0 ||
	    strcmp(base, "sha256sum.txt") == 0)
		return NULL;
	return strndup(path, n - sl);
}

int
sidecar_set_add(struct sidecar_set *s, const char *path, const char *text,
    size_t len, size_t *ret_n, size_t *ret_bad)
{
	struct digest_value v;
	enum digest_alg	 alg;
	const char	*base, *from, *p = text, *nl, *end = text + len;
	char		*name, *full;
	size_t		 dirlen, added = 0, bad = 0;
	int		 rc;

	base = strrchr(path, '/');
	base = base ? base + 1 : path;
	dirlen = base == path ? 0 : (size_t)(base - path - 1);
	if (!sidecar_name(base, &alg))
		return BM_EINVAL;
	if ((from = set_name(s, path)) == NULL)
		return BM_ENOMEM;
	for (; p < end; p = nl + 1) {
		if ((nl = memchr(p, '\n', (size_t)(end - p))) == NULL)
			nl = end;
		rc = sidecar_parse_line(p, (size_t)(nl - p), alg, &v, &name);
		if (rc == BM_ENOMEM)
			return rc;
		if (rc == BM_EINVAL)
			bad++;
		if (rc != 0)
			continue;
		if (name == NULL)
			full = sidecar_subject(path, base, alg);
		else
			full = join_path(path, dirlen, name);
		if (name == NULL && full == NULL) {
			bad++;	/* a bare digest in a list names no file */
			continue;
		}
		free(name);
		if (full == NULL)
			return BM_ENOMEM;
		if (strcmp(full, path) == 0) {
			free(full);	/* no file can hold its own digest */
			continue;
		}
		if ((rc = set_push(s, full, &v, from)) != 0)
			return rc;
		added++;
	}
	if (ret_n != NULL)
		*ret_n = added;
	if (ret_bad != NULL)
		*ret_bad = bad;
	return 0;
}

int
sidecar_set_put(struct sidecar_set *s, const char *path,
    const struct digest_value *v, const char *from)
{
	const char	*name = NULL;
	char		*p;
	size_t		 i;

	for (i = 0; i < s->nnames && name == NULL; i++)
		if (strcmp(s->names[i], from) == 0)
			name = s->names[i];
	if (name == NULL && (name = set_name(s, from)) == NULL)
		return BM_ENOMEM;
	if ((p = strdup(path)) == NULL)
		return BM_ENOMEM;
	return set_push(s, p, v, name);
}

static int
ent_cmp(const void *a, const void *b)
{
	const struct sidecar_ent *x = a, *y = b;
	int	 c = strcmp(x->path, y->path);

	if (c != 0)
		return c;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Sort by (path, order added) when an add came since the last sort. */
static void
set_sort(struct sidecar_set *s)
{
	if (!s->sorted) {
		if (s->n > 1)
			qsort(s->e, s->n, sizeof(*s->e), ent_cmp);
		s->sorted = true;
	}
}

bool
sidecar_set_find(struct sidecar_set *s, const char *path,
    struct sidecar_sum *ret)
{
	size_t		 lo = 0, hi = s->n, mid;
	enum digest_alg	 alg;
	bool		 found = false;

	set_sort(s);
	/* The first entry of path: entries of one path are in added order. */
	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (strcmp(s->e[mid].path, path) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	memset(ret, 0, sizeof(*ret));
	for (; lo < s->n && strcmp(s->e[lo].path, path) == 0; lo++) {
		alg = s->e[lo].v.alg;
		if (ret->has[alg]) {
			/* The first added wins, unless its own sidecar
			 * states another digest for the path too. */
			if (s->e[lo].from == ret->from[alg] &&
			    !digest_equal(&s->e[lo].v, &ret->v[alg]))
				ret->conflict[alg] = true;
			continue;
		}
		ret->has[alg] = true;
		ret->v[alg] = s->e[lo].v;
		ret->from[alg] = s->e[lo].from;
		found = true;
	}
	return found;
}

int
sidecar_set_conflicts(struct sidecar_set *s, sidecar_conflict_fn fn,
    void *ctx)
{
	struct sidecar_sum sum;
	size_t		 i;
	int		 a, rc;

	set_sort(s);
	for (i = 0; i < s->n; i++) {
		/* sorted by the find: one call per distinct path */
		if (i > 0 && strcmp(s->e[i].path, s->e[i - 1].path) == 0)
			continue;
		(void)sidecar_set_find(s, s->e[i].path, &sum);
		for (a = 0; a < DIGEST__N; a++)
			if (sum.conflict[a] &&
			    (rc = fn(ctx, sum.from[a], s->e[i].path)) != 0)
				return rc;
	}
	return 0;
}

int
sidecar_sum_text(const struct sidecar_sum *sum, char *buf, size_t len)
{
	char	 one[DIGEST_TEXT_MAX];
	size_t	 n = 0;
	int	 i, w;

	if (len == 0)
		return BM_ELIMIT;
	buf[0] = '\0';
	for (i = 0; i < DIGEST__N; i++) {
		if (!sum->has[i])
			continue;
		if (digest_to_text(&sum->v[i], one, sizeof(one)) != 0)
			return BM_ELIMIT;
		w = snprintf(buf + n, len - n, "%s%s", n ? " " : "", one);
		if (w < 0 || (size_t)w >= len - n)
			return BM_ELIMIT;
		n += (size_t)w;
	}
	return 0;
}
