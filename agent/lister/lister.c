/*
 * The lister registry (lister.h): one row per lister, looked up by the
 * source URL's scheme.  A new lister is one file with its table plus one
 * row here; the config check (agent/config.c) and the run
 * (agent/run/sync.c) learn its schemes from this table.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "biomirror/lister.h"

static const struct lister_ops *const lister_registry[] = {
	&lister_http_ops,
	&lister_ftp_ops,
	&lister_bm_ops,
};
#define LISTER_NREGISTRY (sizeof(lister_registry) / sizeof(lister_registry[0]))

const struct lister_ops *
lister_find(const char *url)
{
	const char	*sep;
	const char *const *s;
	size_t		 i, n;

	if (url == NULL || (sep = strstr(url, "://")) == NULL)
		return NULL;
	n = (size_t)(sep - url);
	for (i = 0; i < LISTER_NREGISTRY; i++)
		for (s = lister_registry[i]->schemes; *s != NULL; s++)
			if (strlen(*s) == n && strncasecmp(url, *s, n) == 0)
				return lister_registry[i];
	return NULL;
}

void
lister_schemes(char *buf, size_t len)
{
	const char *const *s;
	size_t		 i, k = 0, total = 0, used = 0;
	int		 n;

	for (i = 0; i < LISTER_NREGISTRY; i++)
		for (s = lister_registry[i]->schemes; *s != NULL; s++)
			total++;
	if (len > 0)
		buf[0] = '\0';
	for (i = 0; i < LISTER_NREGISTRY; i++)
		for (s = lister_registry[i]->schemes; *s != NULL; s++, k++) {
			n = snprintf(buf + used, len - used, "%s%s://",
			    k == 0 ? "" : k + 1 == total ? " or " : ", ", *s);
			if (n < 0 || (size_t)n >= len - used) {
				if (len > 0)
					buf[used] = '\0'; /* whole names only */
				return;
			}
			used += (size_t)n;
		}
}
