/*
 * The state directory and run locks (see include/biomirror/state.h).
 * The lock is an flock(2) on a file that records the holder's PID, so a
 * second run can name it; a crashed run's lock goes with its process.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <openssl/evp.h>

#include "biomirror/error.h"
#include "biomirror/fileio.h"
#include "biomirror/state.h"

int
state_default_dir(char *buf, size_t len)
{
	const char	*xdg, *home;
	int		 n;

	const char	*sd;

	/* Under systemd's StateDirectory= (biomirror@.service). */
	if ((sd = getenv("STATE_DIRECTORY")) != NULL && sd[0] == '/') {
		n = snprintf(buf, len, "%.*s", (int)strcspn(sd, ":"), sd);
		if (n < 0 || (size_t)n >= len)
			return BM_ELIMIT;
		return 0;
	}
	if (geteuid() == 0)
		n = snprintf(buf, len, "/var/lib/biomirror");
	else if ((xdg = getenv("XDG_STATE_HOME")) != NULL && xdg[0] == '/')
		n = snprintf(buf, len, "%s/biomirror", xdg);
	else if ((home = getenv("HOME")) != NULL && home[0] == '/')
		n = snprintf(buf, len, "%s/.local/state/biomirror", home);
	else
		return BM_EINVAL;
	if (n < 0 || (size_t)n >= len)
		return BM_ELIMIT;
	return 0;
}

/* mkdir -p path with mode 0755. */
static int
mkdir_p(const char *path)
{
	char	 tmp[PATH_MAX];
	char	*p;

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s", path) >= sizeof(tmp)) {
		errno = ENAMETOOLONG;
		return BM_EIO;
	}
	for (p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, 0755) == -1 && errno != EEXIST)
			return BM_EIO;
		*p = '/';
	}
	if (mkdir(tmp, 0755) == -1 && errno != EEXIST)
		return BM_EIO;
	return 0;
}

int
state_prepare(const char *dir)
{
	char	 p[PATH_MAX];
	int	 rc;

	if ((rc = mkdir_p(dir)) != 0)
		return rc;
	if ((size_t)snprintf(p, sizeof(p), "%s/manifests", dir) >= sizeof(p))
		return BM_ELIMIT;
	if ((rc = mkdir_p(p)) != 0)
		return rc;
	if ((size_t)snprintf(p, sizeof(p), "%s/locks", dir) >= sizeof(p))
		return BM_ELIMIT;
	return mkdir_p(p);
}

int
state_abs_path(const char *dest, char *buf, size_t len)
{
	char	 cwd[PATH_MAX];

	if (dest[0] == '/') {
		if ((size_t)snprintf(buf, len, "%s", dest) >= len)
			return BM_ELIMIT;
	} else {
		if (getcwd(cwd, sizeof(cwd)) == NULL)
			return BM_EIO;
		if ((size_t)snprintf(buf, len, "%s/%s", cwd, dest) >= len)
			return BM_ELIMIT;
	}
	fileio_path_canon(buf);	/* "/srv//x/./" names "/srv/x" */
	return 0;
}

int
state_adhoc_key(const char *dest, char *buf, size_t len)
{
	char		 abs[PATH_MAX];
	unsigned char	 md[EVP_MAX_MD_SIZE];
	unsigned int	 mdlen = 0;
	size_t		 i;
	int		 rc;

	if ((rc = state_abs_path(dest, abs, sizeof(abs))) != 0)
		return rc;
	if (EVP_Digest(abs, strlen(abs), md, &mdlen, EVP_sha256(), NULL) != 1)
		return BM_EIO;
	if (len < 6 + 16 + 1)
		return BM_ELIMIT;
	memcpy(buf, "adhoc-", 6);
	for (i = 0; i < 8; i++)
		(void)snprintf(buf + 6 + i * 2, 3, "%02x", md[i]);
	return 0;
}

int
state_lock(const char *dir, const char *name, int *ret_fd, long *ret_holder)
{
	const struct timespec pause = { 0, 20 * 1000 * 1000 };
	char	 p[PATH_MAX], pid[32];
	ssize_t	 n;
	int	 fd, saved, len, tries;

	*ret_holder = 0;
	if ((size_t)snprintf(p, sizeof(p), "%s/locks/%s.lock", dir, name) >=
	    sizeof(p))
		return BM_ELIMIT;
	if ((fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644)) ==
	    -1)
		return BM_EIO;
	/*
	 * state_lock_held() takes a shared lock for an instant: try a few
	 * times over ~100 ms before calling the lock taken, so that a
	 * `status` at the wrong moment does not make a run exit 75.
	 */
	for (tries = 0; flock(fd, LOCK_EX | LOCK_NB) == -1; tries++) {
		saved = errno;
		if (saved == EWOULDBLOCK && tries < 5) {
			(void)nanosleep(&pause, NULL);
			continue;
		}
		if (saved == EWOULDBLOCK) {
			n = pread(fd, pid, sizeof(pid) - 1, 0);
			if (n > 0) {
				pid[n] = '\0';
				*ret_holder = strtol(pid, NULL, 10);
			}
			(void)close(fd);
			return BM_ELOCKED;
		}
		(void)close(fd);
		errno = saved;
		return BM_EIO;
	}
	len = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
	if (ftruncate(fd, 0) == -1 || pwrite(fd, pid, (size_t)len, 0) != len) {
		saved = errno;
		(void)close(fd);
		errno = saved;
		return BM_EIO;
	}
	*ret_fd = fd;
	return 0;
}

bool
state_lock_held(const char *dir, const char *name, long *ret_holder)
{
	char	 p[PATH_MAX], pid[32];
	ssize_t	 n;
	bool	 held = false;
	int	 fd;

	*ret_holder = 0;
	if ((size_t)snprintf(p, sizeof(p), "%s/locks/%s.lock", dir, name) >=
	    sizeof(p))
		return false;
	/* Read-only and never created: status may run as another user. */
	if ((fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) == -1)
		return false;
	if (flock(fd, LOCK_SH | LOCK_NB) == -1) {
		held = errno == EWOULDBLOCK;
		if (held && (n = pread(fd, pid, sizeof(pid) - 1, 0)) > 0) {
			pid[n] = '\0';
			*ret_holder = strtol(pid, NULL, 10);
		}
	}
	(void)close(fd);	/* drops our shared lock, if we got it */
	return held;
}

void
state_unlock(int fd)
{
	if (fd < 0)
		return;
	/* An empty lock file says nobody holds it; failing that is harmless. */
	if (ftruncate(fd, 0) == -1)
		(void)close(fd);
	else
		(void)close(fd);
}

int
state_manifest_path(const char *dir, const char *name, char *buf, size_t len)
{
	if ((size_t)snprintf(buf, len, "%s/manifests/%s.db", dir, name) >= len)
		return BM_ELIMIT;
	return 0;
}
