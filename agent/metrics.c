/*
 * The metrics file (see include/biomirror/metrics.h): Prometheus text
 * exposition format 0.0.4, rewritten whole under an flock(2) of
 * PATH.lock.  The format and why the lock is on PATH.lock and cannot
 * deadlock: docs/internals.md, "The metrics file".
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/file.h>
#include <sys/stat.h>

#include "biomirror/error.h"
#include "biomirror/fileio.h"
#include "biomirror/metrics.h"

enum mfam {
	MF_LAST_RUN, MF_LAST_SUCCESS, MF_DURATION, MF_SUCCESS, MF_EXIT,
	MF_LISTED, MF_FETCHED, MF_TOUCHED, MF_DELETED, MF_FAILED, MF_BYTES,
	MF_COUNT
};

static const struct {
	const char	*name;
	const char	*help;
} fams[MF_COUNT] = {
	{ "biomirror_last_run_timestamp_seconds",
	    "Unix time at which the last run of the mirror ended." },
	{ "biomirror_last_success_timestamp_seconds",
	    "Unix time at which the last successful run (status ok) ended, 0 if none." },
	{ "biomirror_last_run_duration_seconds",
	    "Wall-clock duration of the last run." },
	{ "biomirror_last_run_success",
	    "1 if the last run synced the mirror completely (status ok), else 0." },
	{ "biomirror_last_run_exit_code",
	    "Exit status of the last run (0 ok, 1 files failed or interrupted, 2 config or manifest, 3 listing, 4 refused by a guard)." },
	{ "biomirror_last_run_listed_files",
	    "Entries in the upstream listing of the last run." },
	{ "biomirror_last_run_fetched_files",
	    "Files fetched by the last run." },
	{ "biomirror_last_run_touched_files",
	    "Files whose mtime the last run set without fetching them." },
	{ "biomirror_last_run_deleted_files",
	    "Files deleted by the last run." },
	{ "biomirror_last_run_failed_files",
	    "Files (and other paths) that failed in the last run." },
	{ "biomirror_last_run_fetched_bytes",
	    "Bytes fetched by the last run." },
};

/* One sample line kept from the old file or made for this run. */
struct sample {
	enum mfam	 fam;
	char		*mirror;	/* owned: label value as escaped in the file */
	char		*line;		/* owned: the whole line, no newline */
};

struct samples {
	struct sample	*v;		/* owned */
	size_t		 n, cap;
};

static void
samples_free(struct samples *s)
{
	size_t	 i;

	for (i = 0; i < s->n; i++) {
		free(s->v[i].mirror);
		free(s->v[i].line);
	}
	free(s->v);
}

/* Append a sample; takes ownership of mirror and line (freed on error). */
static int
samples_add(struct samples *s, enum mfam fam, char *mirror, char *line)
{
	struct sample	*nv;
	size_t		 ncap;

	if (s->n == s->cap) {
		ncap = s->cap ? s->cap * 2 : 32;
		if ((nv = realloc(s->v, ncap * sizeof(*nv))) == NULL) {
			free(mirror);
			free(line);
			return BM_ENOMEM;
		}
		s->v = nv;
		s->cap = ncap;
	}
	s->v[s->n].fam = fam;
	s->v[s->n].mirror = mirror;
	s->v[s->n].line = line;
	s->n++;
	return 0;
}

/* Label value escaped for the text format; malloc'd, NULL on ENOMEM. */
static char *
label_escape(const char *v)
{
	size_t	 n = 0, i, j;
	char	*s;

	for (i = 0; v[i]; i++)
		n += (v[i] == '\\' || v[i] == '"' || v[i] == '\n') ? 2 : 1;
	if ((s = malloc(n + 1)) == NULL)
		return NULL;
	for (i = 0, j = 0; v[i]; i++) {
		if (v[i] == '\\' || v[i] == '"' || v[i] == '\n') {
			s[j++] = '\\';
			s[j++] = v[i] == '\n' ? 'n' : v[i];
		} else
			s[j++] = v[i];
	}
	s[j] = '\0';
	return s;
}

/*
 * Parse a line we wrote: NAME{mirror="ESCAPED"} VALUE.  Returns the
 * family (and the escaped label value in *mirror, its length in *mlen,
 * pointing into line), or -1 for anything else.
 */
static int
parse_line(const char *line, size_t len, const char **mirror, size_t *mlen)
{
	const char	*p, *end = line + len, *v;
	size_t		 f, n;
	char		 num[64];
	char		*ep;

	for (f = 0; f < MF_COUNT; f++) {
		n = strlen(fams[f].name);
		if (len > n && memcmp(line, fams[f].name, n) == 0 &&
		    line[n] == '{')
			break;
	}
	if (f == MF_COUNT)
		return -1;
	p = line + strlen(fams[f].name) + 1;
	if ((size_t)(end - p) < 8 || memcmp(p, "mirror=\"", 8) != 0)
		return -1;
	p += 8;
	v = p;
	while (p < end && *p != '"') {
		if (*p == '\\') {
			if (p + 1 >= end || (p[1] != '\\' && p[1] != '"' &&
			    p[1] != 'n'))
				return -1;
			p++;
		}
		p++;
	}
	if (p + 3 > end || p[1] != '}' || p[2] != ' ')
		return -1;
	*mirror = v;
	*mlen = (size_t)(p - v);
	p += 3;
	/* The value must be a number (Go ParseFloat syntax; strtod is close). */
	if ((size_t)(end - p) == 0 || (size_t)(end - p) >= sizeof(num))
		return -1;
	memcpy(num, p, (size_t)(end - p));
	num[end - p] = '\0';
	errno = 0;
	(void)strtod(num, &ep);
	if (ep == num || *ep != '\0' || errno == ERANGE)
		return -1;
	return (int)f;
}

/*
 * Whether line (len bytes) belongs to one of our families: a sample of it
 * ("NAME{", "NAME " or "NAME\t") or its "# HELP NAME" / "# TYPE NAME".
 */
static bool
ours(const char *line, size_t len)
{
	size_t	 f, n, skip = 0;

	if (len > 7 && (memcmp(line, "# HELP ", 7) == 0 ||
	    memcmp(line, "# TYPE ", 7) == 0))
		skip = 7;
	for (f = 0; f < MF_COUNT; f++) {
		n = strlen(fams[f].name);
		if (len - skip > n && memcmp(line + skip, fams[f].name,
		    n) == 0 && (line[skip + n] == ' ' ||
		    line[skip + n] == '\t' || (skip == 0 &&
		    line[skip + n] == '{')))
			return true;
	}
	return false;
}

/* Whether the escaped label value v (n bytes) is one of names. */
static bool
in_names(char *const *names, size_t nnames, const char *v, size_t n)
{
	size_t	 i;

	for (i = 0; i < nnames; i++)
		if (strlen(names[i]) == n && memcmp(names[i], v, n) == 0)
			return true;
	return false;
}

/*
 * Sort the old file's lines: those of other programs go to fp as they
 * were; our samples go to s, except those this run replaces and those of
 * mirrors not in names (escaped label values; names NULL: keep all);
 * our HELP/TYPE lines and broken samples of our families are dropped.
 */
static int
keep_old(struct samples *s, FILE *fp, const char *old, size_t oldlen,
    const char *mine, bool keep_success, char *const *names, size_t nnames)
{
	const char	*p = old, *end = old + oldlen, *nl, *mv;
	size_t		 len, mlen;
	char		*m, *l;
	int		 f, rc;

	while (p < end) {
		nl = memchr(p, '\n', (size_t)(end - p));
		len = nl ? (size_t)(nl - p) : (size_t)(end - p);
		if (!ours(p, len)) {
			(void)fprintf(fp, "%.*s\n", (int)len, p);
			p += len + 1;
			continue;
		}
		if ((f = parse_line(p, len, &mv, &mlen)) >= 0 &&
		    (names == NULL || in_names(names, nnames, mv, mlen)) &&
		    (strlen(mine) != mlen || memcmp(mine, mv, mlen) != 0 ||
		    (f == MF_LAST_SUCCESS && keep_success))) {
			if ((m = strndup(mv, mlen)) == NULL)
				return BM_ENOMEM;
			if ((l = strndup(p, len)) == NULL) {
				free(m);
				return BM_ENOMEM;
			}
			if ((rc = samples_add(s, (enum mfam)f, m, l)) != 0)
				return rc;
		}
		p += len + 1;
	}
	return 0;
}

/* Add this run's sample of family f with value text v. */
static int
add_mine(struct samples *s, enum mfam f, const char *mine, const char *v)
{
	char	*m, *l;
	int	 n;

	if ((m = strdup(mine)) == NULL)
		return BM_ENOMEM;
	n = snprintf(NULL, 0, "%s{mirror=\"%s\"} %s", fams[f].name, mine, v);
	if (n < 0 || (l = malloc((size_t)n + 1)) == NULL) {
		free(m);
		return BM_ENOMEM;
	}
	(void)snprintf(l, (size_t)n + 1, "%s{mirror=\"%s\"} %s",
	    fams[f].name, mine, v);
	return samples_add(s, f, m, l);
}

static int
cmp_sample(const void *a, const void *b)
{
	const struct sample *x = a, *y = b;

	if (x->fam != y->fam)
		return x->fam < y->fam ? -1 : 1;
	return strcmp(x->mirror, y->mirror);
}

/* Seconds since the epoch with millisecond precision, from ns. */
static void
fmt_ts(int64_t ns, char *buf, size_t len)
{
	(void)snprintf(buf, len, "%lld.%03lld", (long long)(ns / 1000000000),
	    (long long)(ns % 1000000000 / 1000000));
}

int
metrics_merge(const char *old, size_t oldlen, const struct metrics_run *r,
    char **ret, size_t *retlen)
{
	struct samples	 s = { NULL, 0, 0 };
	char		 v[MF_COUNT][64];
	char		*mine = NULL, *buf = NULL, **names = NULL;
	size_t		 len = 0, i;
	FILE		*fp = NULL;
	int		 f, rc = BM_ENOMEM;

	*ret = NULL;
	if ((mine = label_escape(r->mirror)) == NULL)
		goto out;
	if (r->mirrors != NULL) {
		if ((names = calloc(r->nmirrors + 1, sizeof(*names))) == NULL)
			goto out;
		for (i = 0; i < r->nmirrors; i++)
			if ((names[i] = label_escape(r->mirrors[i])) == NULL)
				goto out;
	}
	if ((fp = open_memstream(&buf, &len)) == NULL)
		goto out;
	if (old != NULL && (rc = keep_old(&s, fp, old, oldlen, mine,
	    r->last_success_ns < 0, names, r->nmirrors)) != 0)
		goto out;
	fmt_ts(r->end_ns, v[MF_LAST_RUN], sizeof(v[0]));
	if (r->last_success_ns > 0)
		fmt_ts(r->last_success_ns, v[MF_LAST_SUCCESS], sizeof(v[0]));
	else
		(void)snprintf(v[MF_LAST_SUCCESS], sizeof(v[0]), "0");
	(void)snprintf(v[MF_DURATION], sizeof(v[0]), "%.3f",
	    r->seconds > 0 ? r->seconds : 0.0);
	(void)snprintf(v[MF_SUCCESS], sizeof(v[0]), "%d", r->ok ? 1 : 0);
	(void)snprintf(v[MF_EXIT], sizeof(v[0]), "%d", r->exit_code);
	(void)snprintf(v[MF_LISTED], sizeof(v[0]), "%lld", (long long)r->listed);
	(void)snprintf(v[MF_FETCHED], sizeof(v[0]), "%lld",
	    (long long)r->fetched);
	(void)snprintf(v[MF_TOUCHED], sizeof(v[0]), "%lld",
	    (long long)r->touched);
	(void)snprintf(v[MF_DELETED], sizeof(v[0]), "%lld",
	    (long long)r->deleted);
	(void)snprintf(v[MF_FAILED], sizeof(v[0]), "%lld", (long long)r->failed);
	(void)snprintf(v[MF_BYTES], sizeof(v[0]), "%llu",
	    (unsigned long long)r->bytes);
	for (f = 0; f < MF_COUNT; f++) {
		if (f == MF_LAST_SUCCESS && r->last_success_ns < 0)
			continue;	/* kept from the old file, if there */
		if ((rc = add_mine(&s, (enum mfam)f, mine, v[f])) != 0)
			goto out;
	}
	if (s.n > 1)
		qsort(s.v, s.n, sizeof(*s.v), cmp_sample);
	rc = BM_ENOMEM;
	for (i = 0, f = -1; i < s.n; i++) {
		/* Two equal lines (a hand-edited file) would be invalid. */
		if (i > 0 && s.v[i].fam == s.v[i - 1].fam &&
		    strcmp(s.v[i].mirror, s.v[i - 1].mirror) == 0)
			continue;
		if ((int)s.v[i].fam != f) {
			f = (int)s.v[i].fam;
			(void)fprintf(fp, "# HELP %s %s\n# TYPE %s gauge\n",
			    fams[f].name, fams[f].help, fams[f].name);
		}
		(void)fprintf(fp, "%s\n", s.v[i].line);
	}
	if (ferror(fp))
		goto out;
	if (fclose(fp) != 0) {
		fp = NULL;
		goto out;
	}
	fp = NULL;
	*ret = buf;
	*retlen = len;
	buf = NULL;
	rc = 0;
out:
	if (fp != NULL)
		(void)fclose(fp);
	free(buf);
	free(mine);
	for (i = 0; names != NULL && names[i] != NULL; i++)
		free(names[i]);
	free(names);
	samples_free(&s);
	return rc;
}

/* Read the whole file at path (missing: empty) into *ret (malloc'd). */
static int
read_old(const char *path, char **ret, size_t *retlen, char *errbuf,
    size_t errlen)
{
	struct stat	 st;
	int		 fd, rc = BM_EIO;

	*ret = NULL;
	*retlen = 0;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)) == -1) {
		if (errno == ENOENT)
			return 0;
		(void)snprintf(errbuf, errlen, "%s: open: %s", path,
		    strerror(errno));
		return BM_EIO;
	}
	if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode))
		(void)snprintf(errbuf, errlen, "%s: not a regular file", path);
	else if ((rc = fileio_read_all(fd, METRICS_MAX_FILE, ret, retlen)) ==
	    BM_ELIMIT)
		(void)snprintf(errbuf, errlen, "%s: larger than %d bytes: not "
		    "a metrics file of ours", path, METRICS_MAX_FILE);
	else if (rc == BM_EIO)
		(void)snprintf(errbuf, errlen, "%s: read: %s", path,
		    strerror(errno));
	(void)close(fd);
	return rc;
}

/* Write len bytes of buf to fd.  0 or -1 (errno set). */
static int
write_all(int fd, const char *buf, size_t len)
{
	ssize_t	 n;

	while (len > 0) {
		n = write(fd, buf, len);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1)
			return -1;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

int
metrics_write(const char *path, const struct metrics_run *r, char *errbuf,
    size_t errlen)
{
	char		 lockp[PATH_MAX], tmp[PATH_MAX], dir[PATH_MAX];
	const char	*slash, *op = "";
	char		*old = NULL, *out = NULL;
	size_t		 oldlen = 0, outlen = 0;
	bool		 made = false;	/* tmp exists and is ours to remove */
	int		 lockfd = -1, fd = -1, dfd = -1, saved, rc = BM_EIO;

	if (errlen > 0)
		errbuf[0] = '\0';
	if ((slash = strrchr(path, '/')) == NULL || slash[1] == '\0' ||
	    (size_t)snprintf(lockp, sizeof(lockp), "%s.lock", path) >=
	    sizeof(lockp) ||
	    (size_t)snprintf(dir, sizeof(dir), "%.*s", slash == path ? 1 :
	    (int)(slash - path), path) >= sizeof(dir) ||
	    (size_t)snprintf(tmp, sizeof(tmp), "%s/.%s.XXXXXX", dir,
	    slash + 1) >= sizeof(tmp)) {
		(void)snprintf(errbuf, errlen, "%s: not an absolute file name "
		    "or too long", path);
		return BM_EINVAL;
	}
	op = "open lock file";
	if ((lockfd = open(lockp, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
	    0644)) == -1)
		goto fail;
	op = "flock";
	while (flock(lockfd, LOCK_EX) == -1)
		if (errno != EINTR)
			goto fail;
	if ((rc = read_old(path, &old, &oldlen, errbuf, errlen)) != 0)
		goto out;
	if ((rc = metrics_merge(old, oldlen, r, &out, &outlen)) != 0)
		goto out;
	rc = BM_EIO;
	op = "create temp file";
	if ((fd = mkostemp(tmp, O_CLOEXEC)) == -1)
		goto fail;
	made = true;
	/* node_exporter runs as another user: the file must be readable. */
	op = "fchmod";
	if (fchmod(fd, 0644) == -1)
		goto fail;
	op = "write";
	if (write_all(fd, out, outlen) == -1)
		goto fail;
	op = "fsync";
	if (fsync(fd) == -1)
		goto fail;
	op = "close";
	saved = close(fd);
	fd = -1;
	if (saved == -1)
		goto fail;
	op = "rename";
	if (rename(tmp, path) == -1)
		goto fail;
	made = false;
	/* The rename is durable once the directory is synced. */
	op = "fsync directory";
	if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1 ||
	    fsync(dfd) == -1)
		goto fail;
	rc = 0;
	goto out;
fail:
	saved = errno;
	(void)snprintf(errbuf, errlen, "%s: %s: %s", path, op,
	    strerror(saved));
	rc = BM_EIO;
out:
	saved = errno;
	if (fd != -1)
		(void)close(fd);
	if (made)
		(void)unlink(tmp);
	if (dfd != -1)
		(void)close(dfd);
	if (lockfd != -1)
		(void)close(lockfd);	/* releases the flock */
	free(old);
	free(out);
	errno = saved;
	return rc;
}
