/* Whole-file reads (see include/biomirror/fileio.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "biomirror/error.h"
#include "biomirror/fileio.h"

#define FILEIO_CHUNK	(64 * 1024)	/* first allocation, then doubled */

int
fileio_read_all(int fd, size_t max, char **ret, size_t *ret_len)
{
	char	*buf = NULL, *nb;
	size_t	 len = 0, cap = 0;
	ssize_t	 n;
	int	 err;

	*ret = NULL;
	*ret_len = 0;
	for (;;) {
		if (len == cap) {
			if (cap > max) {
				free(buf);
				return BM_ELIMIT;
			}
			cap = cap ? cap * 2 : FILEIO_CHUNK;
			if (cap > max + 1)
				cap = max + 1;	/* one more byte tells "too big" */
			if ((nb = realloc(buf, cap + 1)) == NULL) {
				free(buf);
				return BM_ENOMEM;
			}
			buf = nb;
		}
		n = read(fd, buf + len, cap - len);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1) {
			err = errno;
			free(buf);
			errno = err;
			return BM_EIO;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	if (len > max) {
		free(buf);
		return BM_ELIMIT;
	}
	buf[len] = '\0';
	*ret = buf;
	*ret_len = len;
	return 0;
}

void
fileio_path_canon(char *p)
{
	char	*r = p, *w = p, *e;
	size_t	 n;
	bool	 abs = p[0] == '/';

	for (;;) {
		while (*r == '/')
			r++;
		if (*r == '\0')
			break;
		e = r + strcspn(r, "/");
		n = (size_t)(e - r);
		if (!(n == 1 && r[0] == '.')) {
			if (w > p || abs)
				*w++ = '/';
			memmove(w, r, n);
			w += n;
		}
		r = e;
	}
	if (w == p)
		*w++ = abs ? '/' : '.';
	*w = '\0';
}

char *
fileio_path_resolve(const char *path)
{
	char	*cwd = NULL, *canon = NULL, *head = NULL, *cut, *res;
	char	*out = NULL;

	if (path[0] == '/') {
		if ((canon = malloc(strlen(path) + 2)) == NULL)
			return NULL;
		memcpy(canon, path, strlen(path) + 1);
	} else {
		if ((cwd = getcwd(NULL, 0)) == NULL ||
		    asprintf(&canon, "%s/%s", cwd, path) < 0) {
			free(cwd);
			return NULL;
		}
		free(cwd);
	}
	fileio_path_canon(canon);
	if ((head = strdup(canon)) == NULL)
		goto out;
	for (;;) {
		if ((res = realpath(head, NULL)) != NULL) {
			if (asprintf(&out, "%s/%s", res, canon +
			    strlen(head)) < 0)
				out = NULL;
			free(res);
			break;
		}
		if (errno == ENOMEM)
			break;
		if ((cut = strrchr(head, '/')) == NULL || cut == head) {
			out = strdup(canon);
			break;
		}
		*cut = '\0';
	}
	if (out != NULL)
		fileio_path_canon(out);
out:
	free(head);
	free(canon);
	return out;
}
