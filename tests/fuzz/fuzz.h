/*
 * Shared helpers of the libFuzzer targets in tests/fuzz/ (STYLE.md rule
 * 53).  FUZZ_CHECK() aborts with the failed invariant, so that libFuzzer
 * records the input as a crash.
 */
#ifndef BIOMIRROR_FUZZ_H
#define BIOMIRROR_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define FUZZ_CHECK(cond) do {						\
	if (!(cond)) {							\
		(void)fprintf(stderr, "%s:%d: invariant failed: %s\n",	\
		    __FILE__, __LINE__, #cond);				\
		abort();						\
	}								\
} while (0)

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int	LLVMFuzzerInitialize(int *argc, char ***argv);

struct listing;
/*
 * Check every entry of a listing a parser filled from hostile bytes
 * (fuzz_listing.c): its path is prefix + "/" + a name_is_safe() name
 * (prefix "" for the root; NULL for a crawl: any safe relative path),
 * path_is_safe(), a known type, consistent sizes and times.
 */
void	fuzz_check_listing(const struct listing *l, const char *prefix);

#endif
