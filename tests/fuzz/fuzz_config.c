/* Threat: a corrupt or hostile config file must give errors naming the file and line, never a crash, a leak or a half-checked mirror left usable. */
/*
 * Target for config_load() (agent/config.c, inih).  The input is the
 * file's bytes, written to a memfd and loaded through /proc/self/fd/N
 * (config_load() only takes a path).  Seeds: conf/NAME.conf and
 * tests/fuzz/corpus/config/ (tests/fuzz/seeds.sh).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "biomirror/config.h"
#include "biomirror/error.h"
#include "fuzz.h"

static int	 memfd = -1;
static char	 path[64];

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	FUZZ_CHECK((memfd = memfd_create("fuzz-config", MFD_CLOEXEC)) != -1);
	(void)snprintf(path, sizeof(path), "/proc/self/fd/%d", memfd);
	return 0;
}

static void
check_mirror(const struct mirror_conf *m)
{
	size_t	 l;

	FUZZ_CHECK(m != NULL && m->name != NULL && m->name[0] != '\0');
	FUZZ_CHECK(m->source != NULL && m->dest != NULL);
	l = strlen(m->source);
	FUZZ_CHECK(l > 0 && m->source[l - 1] == '/');
	FUZZ_CHECK(m->dest[0] == '/' && strcmp(m->dest, "/") != 0);
	FUZZ_CHECK(m->concurrency >= 1 && m->concurrency <= 1024);
	FUZZ_CHECK(m->streams >= 1 && m->streams <= 64);
	FUZZ_CHECK(!m->max_delete_pct || m->max_delete <= 100);
	FUZZ_CHECK(m->ninclude == 0 || m->include != NULL);
	FUZZ_CHECK(m->nexclude == 0 || m->exclude != NULL);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct config	*c = NULL;
	char		 err[512];
	size_t		 i, pl = strlen(path);
	int		 rc;

	FUZZ_CHECK(ftruncate(memfd, 0) == 0);
	FUZZ_CHECK(pwrite(memfd, data, size, 0) == (ssize_t)size);
	memset(err, 0, sizeof(err));
	rc = config_load(path, &c, err, sizeof(err));
	if (getenv("FUZZ_VERBOSE") != NULL)
		(void)fprintf(stderr, "config_load: %d %s\n", rc, err);
	if (rc == 0) {
		FUZZ_CHECK(c != NULL);
		for (i = 0; i < c->nmirrors; i++) {
			check_mirror(c->mirrors[i]);
			FUZZ_CHECK(config_find(c, c->mirrors[i]->name) != NULL);
		}
		config_free(c);
	} else {
		FUZZ_CHECK(c == NULL);
		FUZZ_CHECK(rc == BM_EINVAL || rc == BM_ENOMEM ||
		    rc == BM_EIO);
		/* "FILE:LINE: reason" or "FILE: reason" */
		FUZZ_CHECK(strncmp(err, path, pl) == 0);
		FUZZ_CHECK(err[pl] == ':' && strlen(err) > pl + 2);
	}
	/* Going on past errors: the mirrors not bad are whole mirrors. */
	c = NULL;
	if (config_load_all(path, &c, err, sizeof(err)) == 0) {
		FUZZ_CHECK(c != NULL && (rc == 0) == (c->nerrors == 0));
		for (i = 0; i < c->nmirrors; i++)
			if (!c->mirrors[i]->bad)
				check_mirror(c->mirrors[i]);
		for (i = 0; i < c->nerrors; i++)
			FUZZ_CHECK(strncmp(c->errors[i].where, path, pl) == 0 &&
			    c->errors[i].where[pl] == ':' &&
			    c->errors[i].reason[0] != '\0');
		config_free(c);
	}
	return 0;
}
