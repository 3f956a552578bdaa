/*
 * A minimal TAP harness for unit tests (STYLE.md rule 50: no framework
 * dependency).  Each test binary prints "ok N - what" / "not ok N - what"
 * lines and a plan "1..N", and exits non-zero when any check failed.
 * Header-only: every test file includes it once.
 */
#ifndef BIOMIRROR_TAP_H
#define BIOMIRROR_TAP_H

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tap_n, tap_failed;

/*
 * Stop the test binary: a setup step failed, or (under tests/torture.sh,
 * BM_FAIL_ALLOC set) a check failed after an injected allocation
 * failure, so that the test never goes on with state it did not get.
 */
static void __attribute__((noreturn, unused))
tap_bail(const char *why)
{
	printf("Bail out! %s\n", why);
	fflush(stdout);
	exit(1);
}

static int __attribute__((format(printf, 2, 3), unused))
ok(int cond, const char *fmt, ...)
{
	va_list ap;
	const char *fa = getenv("BM_FAIL_ALLOC");

	tap_n++;
	printf("%s %d - ", cond ? "ok" : "not ok", tap_n);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	if (!cond)
		tap_failed++;
	if (!cond && fa != NULL && strcmp(fa, "0") != 0)
		tap_bail("a check failed under an injected allocation failure");
	return cond;
}

#define is_int(got, want, ...) do {					\
	long long g_ = (long long)(got), w_ = (long long)(want);	\
	if (!ok(g_ == w_, __VA_ARGS__))					\
		printf("#   got %lld, want %lld (%s:%d)\n", g_, w_,	\
		    __FILE__, __LINE__);				\
} while (0)

#define is_str(got, want, ...) do {					\
	const char *g_ = (got), *w_ = (want);				\
	int same_ = (g_ == NULL && w_ == NULL) ||			\
	    (g_ != NULL && w_ != NULL && strcmp(g_, w_) == 0);		\
	if (!ok(same_, __VA_ARGS__))					\
		printf("#   got \"%s\", want \"%s\" (%s:%d)\n",		\
		    g_ ? g_ : "(null)", w_ ? w_ : "(null)",		\
		    __FILE__, __LINE__);				\
} while (0)

static int __attribute__((unused))
done_testing(void)
{
	printf("1..%d\n", tap_n);
	if (tap_failed)
		printf("# %d of %d checks failed\n", tap_failed, tap_n);
	return tap_failed ? 1 : 0;
}

#endif
