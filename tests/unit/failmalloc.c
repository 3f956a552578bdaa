/*
 * Allocation-failure injection for tests/torture.sh (STYLE.md rule 54,
 * after curl's torture tests, docs/tests/TEST-SUITE.md).  Linked into a
 * copy of a unit test with
 *
 *	-Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=strdup,
 *	--wrap=strndup,--wrap=asprintf,--wrap=vasprintf
 *
 * so that every allocation made by biomirror's own code (libbiomirror.a
 * and the test) goes through here, and installed as SQLite's allocator
 * (sqlite3_config(SQLITE_CONFIG_MALLOC), https://sqlite.org/c3ref/
 * mem_methods.html) so that SQLite's allocations count too.
 *
 * Environment: BM_FAIL_ALLOC=N makes the Nth allocation (1-based, counted
 * over the whole process) fail: NULL with errno ENOMEM, or -1 for
 * asprintf.  With N = 0 nothing fails and, at exit, the line
 * "failmalloc: COUNT allocations" goes to stderr, so that the driver
 * knows how many points to try.  Allocations inside other shared
 * libraries (libcurl, libxml2, inih, glibc itself) are not counted.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

void	*__real_malloc(size_t);
void	*__real_calloc(size_t, size_t);
void	*__real_realloc(void *, size_t);
char	*__real_strdup(const char *);
char	*__real_strndup(const char *, size_t);
int	 __real_vasprintf(char **, const char *, va_list);

void	*__wrap_malloc(size_t);
void	*__wrap_calloc(size_t, size_t);
void	*__wrap_realloc(void *, size_t);
char	*__wrap_strdup(const char *);
char	*__wrap_strndup(const char *, size_t);
int	 __wrap_asprintf(char **, const char *, ...);
int	 __wrap_vasprintf(char **, const char *, va_list);

static unsigned long	 fm_count;	/* allocations so far */
static unsigned long	 fm_fail_at;	/* 0: never fail */

/* True when this allocation is the one to fail. */
static int
fm_fail(void)
{
	if (++fm_count == fm_fail_at) {
		errno = ENOMEM;
		return 1;
	}
	return 0;
}

void *
__wrap_malloc(size_t n)
{
	return fm_fail() ? NULL : __real_malloc(n);
}

void *
__wrap_calloc(size_t n, size_t sz)
{
	return fm_fail() ? NULL : __real_calloc(n, sz);
}

void *
__wrap_realloc(void *p, size_t n)
{
	return fm_fail() ? NULL : __real_realloc(p, n);
}

char *
__wrap_strdup(const char *s)
{
	return fm_fail() ? NULL : __real_strdup(s);
}

char *
__wrap_strndup(const char *s, size_t n)
{
	return fm_fail() ? NULL : __real_strndup(s, n);
}

int
__wrap_vasprintf(char **ret, const char *fmt, va_list ap)
{
	if (fm_fail())
		return -1;
	return __real_vasprintf(ret, fmt, ap);
}

int
__wrap_asprintf(char **ret, const char *fmt, ...)
{
	va_list	 ap;
	int	 n;

	va_start(ap, fmt);
	n = __wrap_vasprintf(ret, fmt, ap);
	va_end(ap);
	return n;
}

/*
 * SQLite's allocator: a 16-byte header keeps each block's size for
 * xSize (sqlite3_mem_methods).
 */
#define FM_HDR	16

static void *
fm_sq_malloc(int n)
{
	char	*p;

	if (n < 0 || fm_fail() ||
	    (p = __real_malloc((size_t)n + FM_HDR)) == NULL)
		return NULL;
	memcpy(p, &n, sizeof(n));
	return p + FM_HDR;
}

static void
fm_sq_free(void *p)
{
	if (p != NULL)
		free((char *)p - FM_HDR);
}

static void *
fm_sq_realloc(void *p, int n)
{
	char	*q;

	if (p == NULL)
		return fm_sq_malloc(n);
	if (n < 0 || fm_fail() ||
	    (q = __real_realloc((char *)p - FM_HDR, (size_t)n + FM_HDR)) ==
	    NULL)
		return NULL;
	memcpy(q, &n, sizeof(n));
	return q + FM_HDR;
}

static int
fm_sq_size(void *p)
{
	int	 n = 0;

	if (p != NULL)
		memcpy(&n, (char *)p - FM_HDR, sizeof(n));
	return n;
}

static int
fm_sq_roundup(int n)
{
	return (n + 7) & ~7;
}

static int
fm_sq_init(void *arg)
{
	(void)arg;
	return SQLITE_OK;
}

static void
fm_sq_shutdown(void *arg)
{
	(void)arg;
}

static void
fm_report(void)
{
	if (fm_fail_at == 0)
		fprintf(stderr, "failmalloc: %lu allocations\n", fm_count);
}

__attribute__((constructor)) static void
fm_init(void)
{
	static sqlite3_mem_methods m = {
		fm_sq_malloc, fm_sq_free, fm_sq_realloc, fm_sq_size,
		fm_sq_roundup, fm_sq_init, fm_sq_shutdown, NULL
	};
	const char	*v = getenv("BM_FAIL_ALLOC");

	fm_fail_at = v != NULL ? strtoul(v, NULL, 10) : 0;
	(void)sqlite3_config(SQLITE_CONFIG_MALLOC, &m);
	(void)atexit(fm_report);
}
