/*
 * Unit tests for agent/store/store.c: atomic commit, exact mtime and mode,
 * size mismatch, planted symlinks (parent and final name), hostile paths,
 * temp clean-up, delete, symlink targets, mkdirs, a destination that is
 * itself a symlink (followed), a destination or directory we may not write
 * (BM_EIO with errno EACCES).  The whole suite runs
 * twice: once with whatever parent resolution the kernel offers (openat2
 * where present), once under a seccomp filter that makes openat2 fail
 * with ENOSYS, so that the O_NOFOLLOW walk is exercised too.
 * publish = set: conversion of a real DEST (and each state an interrupted
 * conversion leaves), working snapshots of hard links, copy-on-touch,
 * publish, prune, reuse and discard of unpublished snapshots.
 * ENOSPC is not tested here (needs a full file system; the functional
 * tests cover disk full).
 */
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/types.h>

#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>

#include <dirent.h>
#include <ftw.h>
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <signal.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#include "biomirror/error.h"
#include "biomirror/store.h"
#include "tap.h"

#define MTIME1	1234567890123456789LL
#define MTIME2	1000000000987654321LL

static void
put_file(const char *path, const char *s)
{
	int	 fd;

	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd == -1 || write(fd, s, strlen(s)) != (ssize_t)strlen(s))
		printf("# put_file %s failed\n", path);
	if (fd != -1)
		close(fd);
}

/* Read up to cap-1 bytes of path into buf; -1 if it cannot be opened. */
static ssize_t
get_file(const char *path, char *buf, size_t cap)
{
	ssize_t	 n;
	int	 fd;

	buf[0] = '\0';
	if ((fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) == -1)
		return -1;
	n = read(fd, buf, cap - 1);
	close(fd);
	if (n >= 0)
		buf[n] = '\0';
	return n;
}

static bool
exists(const char *path)
{
	struct stat	 st;

	return lstat(path, &st) == 0;
}

/* Number of temp files directly in dir; the last one's name in last. */
static int
count_temps(const char *dir, char *last, size_t lastsz)
{
	struct dirent	*de;
	DIR		*d;
	int		 n = 0;

	if ((d = opendir(dir)) == NULL)
		return -1;
	while ((de = readdir(d)) != NULL)
		if (strncmp(de->d_name, STORE_TMP_PREFIX,
		    strlen(STORE_TMP_PREFIX)) == 0) {
			n++;
			if (last != NULL)
				snprintf(last, lastsz, "%s/%s", dir,
				    de->d_name);
		}
	closedir(d);
	return n;
}

static int
count_entries(const char *dir)
{
	struct dirent	*de;
	DIR		*d;
	int		 n = 0;

	if ((d = opendir(dir)) == NULL)
		return -1;
	while ((de = readdir(d)) != NULL)
		if (strcmp(de->d_name, ".") != 0 &&
		    strcmp(de->d_name, "..") != 0)
			n++;
	closedir(d);
	return n;
}

struct ctx {
	char		 base[64];	/* mkdtemp dir */
	char		 dest[128];	/* base/a/b/dest */
	char		 out[128];	/* base/outside */
	struct store	*s;
};

static void
pathf(char *buf, const struct ctx *c, const char *rel)
{
	snprintf(buf, PATH_MAX, "%s/%s", c->dest, rel);
}

/* Open a store_file for rel, write s, return it (NULL on failure). */
static struct store_file *
make_file(struct ctx *c, const char *rel, const char *s)
{
	struct store_file	*f = NULL;

	if (store_file_open(c->s, rel, (int64_t)strlen(s), &f) != 0)
		return NULL;
	if (store_file_write(f, 0, s, strlen(s)) != 0) {
		store_file_abort(f);
		return NULL;
	}
	return f;
}

static int
commit_one(struct ctx *c, struct store_file *f, int64_t size, int *ret_rc)
{
	struct store_commit_item it = { f, size, MTIME1, 99, 0 };
	int			 rc;

	rc = store_commit(c->s, &it, 1);
	*ret_rc = it.rc;
	ok(it.file == NULL, "commit takes the store_file");
	return rc;
}

static void
test_open(struct ctx *c, const char *tag)
{
	struct stat	 st;
	struct store	*s2 = NULL;
	char		 p[PATH_MAX], q[PATH_MAX + 2];

	is_int(store_open(c->dest, 0644, 0775, &c->s), 0, "%s: open nested",
	    tag);
	ok(stat(c->dest, &st) == 0 && S_ISDIR(st.st_mode),
	    "%s: dest created", tag);
	is_int(st.st_mode & 07777, 0775, "%s: dest has dir_mode exactly", tag);
	is_str(store_path(c->s), c->dest, "%s: store_path", tag);

	snprintf(p, sizeof(p), "%s/plainfile", c->base);
	put_file(p, "x");
	errno = 0;
	is_int(store_open(p, 0644, 0755, &s2), BM_EIO,
	    "%s: dest is a file: BM_EIO", tag);
	is_int(errno, ENOTDIR, "%s: dest is a file: ENOTDIR", tag);
	ok(s2 == NULL, "%s: no store on failure", tag);
	snprintf(q, sizeof(q), "%s/linkfile", c->base);
	ok(symlink(p, q) == 0, "%s: plant linkfile -> plainfile", tag);
	errno = 0;
	is_int(store_open(q, 0644, 0755, &s2), BM_EIO,
	    "%s: dest symlink to a file: BM_EIO", tag);
	is_int(errno, ENOTDIR, "%s: dest symlink to a file: ENOTDIR", tag);
	is_int(store_open("", 0644, 0755, &s2), BM_EINVAL,
	    "%s: empty dest", tag);
}

/*
 * dest itself (or a parent) may be a symlink to a directory, the usual
 * /srv/mirror -> /data/mirror setup: it is followed and files land in
 * the target.  Symlinks inside the destination stay refused.
 */
static void
test_dest_symlink(struct ctx *c, const char *tag)
{
	struct store		*s2 = NULL;
	struct store_file	*f = NULL;
	struct store_commit_item it;
	char			 real[128], link[128], p[PATH_MAX];
	char			 q[PATH_MAX], buf[64];

	snprintf(real, sizeof(real), "%s/realdest", c->base);
	snprintf(link, sizeof(link), "%s/linkdest", c->base);
	ok(mkdir(real, 0755) == 0, "%s: mkdir realdest", tag);
	ok(symlink(real, link) == 0, "%s: plant linkdest -> realdest", tag);
	is_int(store_open(link, 0644, 0755, &s2), 0,
	    "%s: dest symlink to a directory opens", tag);
	if (s2 == NULL)
		return;
	is_str(store_path(s2), link, "%s: store_path is the link", tag);
	is_int(store_file_open(s2, "sub/x", 2, &f), 0,
	    "%s: file_open through the dest link", tag);
	if (f != NULL) {
		is_int(store_file_write(f, 0, "hi", 2), 0, "%s: write", tag);
		memset(&it, 0, sizeof(it));
		it.file = f;
		it.size = 2;
		it.mtime = MTIME1;
		is_int(store_commit(s2, &it, 1), 0, "%s: commit", tag);
		is_int(it.rc, 0, "%s: published", tag);
	}
	snprintf(p, sizeof(p), "%s/sub/x", real);
	is_int(get_file(p, buf, sizeof(buf)), 2, "%s: file in the target",
	    tag);
	is_str(buf, "hi", "%s: target content", tag);
	/* A symlink inside the (linked) destination is still refused. */
	snprintf(p, sizeof(p), "%s/evil", real);
	ok(symlink(c->out, p) == 0, "%s: plant realdest/evil", tag);
	is_int(store_file_open(s2, "evil/x", 1, &f), BM_EUNSAFE,
	    "%s: symlink inside a linked dest refused", tag);
	store_close(s2);
	s2 = NULL;

	/* Trailing '/' and a symlinked parent are followed too. */
	snprintf(q, sizeof(q), "%s/", link);
	is_int(store_open(q, 0644, 0755, &s2), 0,
	    "%s: dest symlink with trailing / opens", tag);
	if (s2 != NULL)
		is_str(store_path(s2), link, "%s: trailing / dropped", tag);
	store_close(s2);
	s2 = NULL;
	snprintf(q, sizeof(q), "%s/new/deeper", link);
	is_int(store_open(q, 0644, 0755, &s2), 0,
	    "%s: dest below a symlinked parent created", tag);
	snprintf(p, sizeof(p), "%s/new/deeper", real);
	ok(exists(p), "%s: created inside the target", tag);
	store_close(s2);
}

/* Add (on) or drop CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH (effective). */
static int
dac_caps(bool on)
{
	struct __user_cap_header_struct	 h;
	struct __user_cap_data_struct	 d[2];
	const uint32_t			 mask = (1U << CAP_DAC_OVERRIDE) |
					    (1U << CAP_DAC_READ_SEARCH);

	memset(&h, 0, sizeof(h));
	h.version = _LINUX_CAPABILITY_VERSION_3;
	if (syscall(SYS_capget, &h, d) == -1)
		return -1;
	if (on)
		d[0].effective |= d[0].permitted & mask;
	else
		d[0].effective &= ~mask;
	return (int)syscall(SYS_capset, &h, d);
}

/*
 * A destination, or a directory in it, we may not write: BM_EIO with
 * errno EACCES, so that the caller can print "Permission denied".  Root
 * gives up CAP_DAC_OVERRIDE for the checks so that mode bits apply.
 */
static void
test_access(struct ctx *c, const char *tag)
{
	struct store		*s2 = NULL;
	struct store_file	*f = NULL;
	char			 ro[PATH_MAX], p[PATH_MAX];

	snprintf(ro, sizeof(ro), "%s/rodest", c->base);
	ok(mkdir(ro, 0755) == 0, "%s: mkdir rodest", tag);
	is_int(store_mkdirs(c->s, "rosub"), 0, "%s: mkdirs rosub", tag);
	pathf(p, c, "rosub");
	if (chmod(ro, 0555) == -1 || chmod(p, 0555) == -1 ||
	    dac_caps(false) == -1) {
		ok(1, "# SKIP permission checks: %s", strerror(errno));
		goto out;
	}
	errno = 0;
	is_int(store_open(ro, 0644, 0755, &s2), BM_EIO,
	    "%s: read-only dest: BM_EIO", tag);
	is_int(errno, EACCES, "%s: read-only dest: EACCES", tag);
	ok(s2 == NULL, "%s: read-only dest: no store", tag);
	errno = 0;
	is_int(store_file_open(c->s, "rosub/x", 1, &f), BM_EIO,
	    "%s: file in a read-only dir: BM_EIO", tag);
	is_int(errno, EACCES, "%s: file in a read-only dir: EACCES", tag);
	errno = 0;
	is_int(store_file_open(c->s, "rosub/new/x", 1, &f), BM_EIO,
	    "%s: new dir in a read-only dir: BM_EIO", tag);
	is_int(errno, EACCES, "%s: new dir in a read-only dir: EACCES", tag);
	ok(f == NULL, "%s: no store_file on failure", tag);
out:
	(void)dac_caps(true);
	(void)chmod(p, 0755);
	(void)chmod(ro, 0755);
	store_close(s2);
}

static void
test_write_commit(struct ctx *c, const char *tag)
{
	struct store_file	*f = NULL;
	struct local_stat	 ls;
	struct stat		 st;
	char			 p[PATH_MAX], tmp[PATH_MAX], buf[64];
	const char		*data = "0123456789abcdefghijKLMNOPQRST";
	int			 irc = 0;

	is_int(store_file_open(c->s, "d1/d2/file.txt", 30, &f), 0,
	    "%s: file_open nested", tag);
	if (f == NULL)
		return;
	is_int(store_file_write(f, 20, data + 20, 10), 0, "%s: write 3rd", tag);
	is_int(store_file_length(f), 30, "%s: length after 3rd chunk", tag);
	is_int(store_file_write(f, 10, data + 10, 10), 0, "%s: write 2nd", tag);
	is_int(store_file_write(f, 0, data, 10), 0, "%s: write 1st", tag);
	is_int(store_file_length(f), 30, "%s: length 30", tag);
	pathf(p, c, "d1/d2");
	is_int(count_temps(p, tmp, sizeof(tmp)), 1, "%s: one temp", tag);
	ok(stat(tmp, &st) == 0 && (st.st_mode & 07777) == 0600,
	    "%s: temp is 0600", tag);
	pathf(p, c, "d1/d2/file.txt");
	ok(!exists(p), "%s: nothing under the final name yet", tag);

	is_int(commit_one(c, f, 30, &irc), 0, "%s: commit", tag);
	is_int(irc, 0, "%s: item published", tag);
	is_int(get_file(p, buf, sizeof(buf)), 30, "%s: 30 bytes", tag);
	is_str(buf, data, "%s: content exact", tag);
	ok(stat(p, &st) == 0, "%s: stat published", tag);
	is_int(st.st_mtim.tv_sec, MTIME1 / 1000000000LL, "%s: mtime s", tag);
	is_int(st.st_mtim.tv_nsec, MTIME1 % 1000000000LL, "%s: mtime ns", tag);
	is_int(st.st_mode & 07777, 0644, "%s: mode 0644", tag);
	pathf(tmp, c, "d1/d2");
	is_int(count_temps(tmp, NULL, 0), 0, "%s: no temp left", tag);
	pathf(tmp, c, "d1");
	ok(stat(tmp, &st) == 0 && (st.st_mode & 07777) == 0775,
	    "%s: created parent has dir_mode", tag);

	is_int(store_stat(c->s, "d1/d2/file.txt", &ls), 0, "%s: store_stat",
	    tag);
	is_int(ls.type, 'f', "%s: type f", tag);
	is_int(ls.size, 30, "%s: size", tag);
	is_int(ls.mtime, MTIME1, "%s: mtime ns via store_stat", tag);
	is_int(store_stat(c->s, "d1", &ls), 0, "%s: store_stat dir", tag);
	is_int(ls.type, 'd', "%s: type d", tag);
	is_int(store_stat(c->s, "d1/nope", &ls), BM_ENOENT, "%s: ENOENT", tag);
	is_int(store_stat(c->s, "nope/x", &ls), BM_ENOENT,
	    "%s: ENOENT parent", tag);
	is_int(store_stat(c->s, "d1/d2/file.txt/x", &ls), BM_EUNSAFE,
	    "%s: file as parent", tag);

	/* Replacing an existing regular file. */
	f = make_file(c, "d1/d2/file.txt", "new");
	ok(f != NULL, "%s: reopen existing name", tag);
	is_int(commit_one(c, f, 3, &irc), 0, "%s: commit replace", tag);
	is_int(irc, 0, "%s: replaced", tag);
	get_file(p, buf, sizeof(buf));
	is_str(buf, "new", "%s: replaced content", tag);

	/* Offsets that do not fit in off_t. */
	f = make_file(c, "big", "");
	ok(f != NULL, "%s: open big", tag);
	is_int(store_file_write(f, (uint64_t)INT64_MAX, "x", 1), BM_EIO,
	    "%s: offset overflow", tag);
	store_file_abort(f);
}

/* Byte i of write-behind test file k: a pattern no two offsets share. */
static uint8_t
wb_byte(unsigned k, uint64_t i)
{
	return (uint8_t)((i * 2654435761u >> 7) + k * 31 + (i >> 16));
}

/* Read f's temp file back and compare with pattern k over size bytes. */
static bool
wb_same(struct store_file *f, unsigned k, uint64_t size)
{
	static uint8_t	 buf[65536];
	uint64_t	 off;
	ssize_t		 n, i;
	int		 fd;
	bool		 same = true;

	if (store_file_dup(f, &fd) != 0)
		return false;
	for (off = 0; same && off < size; off += (uint64_t)n) {
		if ((n = pread(fd, buf, sizeof(buf), (off_t)off)) <= 0) {
			same = false;
			break;
		}
		for (i = 0; i < n; i++)
			if (buf[i] != wb_byte(k, off + (uint64_t)i))
				same = false;
	}
	close(fd);
	return same;
}

/* Write [off, off + len) of pattern k to f in pieces of piece bytes. */
static int
wb_put(struct store_file *f, unsigned k, uint64_t off, uint64_t len,
    size_t piece)
{
	static uint8_t	 buf[300000];
	uint64_t	 end = off + len, i;
	size_t		 n;
	int		 rc;

	for (; off < end; off += n) {
		n = end - off < piece ? (size_t)(end - off) : piece;
		for (i = 0; i < n; i++)
			buf[i] = wb_byte(k, off + i);
		if ((rc = store_file_write(f, off, buf, n)) != 0)
			return rc;
	}
	return 0;
}

/*
 * Write-behind: bytes queued from the caller's thread land where they
 * belong whatever the order and piece sizes, past the 32 MiB the store
 * keeps queued (the writer waits), and a failed queued write is what
 * every later call on the file returns; nothing is published then.
 */
static void
test_write_behind(struct ctx *c, const char *tag)
{
	struct store_commit_item it[3];
	struct store_file *f[3] = { NULL, NULL, NULL }, *g = NULL;
	struct rlimit	 rl, small;
	const uint64_t	 size[3] = { 5000011, 41 * 1024 * 1024 + 7, 1 };
	char		 p[PATH_MAX];
	unsigned	 k;
	int		 irc = 0, rc;

	for (k = 0; k < 3; k++) {
		snprintf(p, sizeof(p), "wb/f%u", k);
		is_int(store_file_open(c->s, p, (int64_t)size[k], &f[k]), 0,
		    "%s: wb: open f%u", tag, k);
		if (f[k] == NULL)
			goto out;
		is_int(store_file_write_behind(f[k]), 0,
		    "%s: wb: write-behind f%u", tag, k);
		is_int(store_file_write_behind(f[k]), 0,
		    "%s: wb: write-behind again is a no-op", tag);
	}
	/* f0: four ranges, last first, odd pieces, interleaved with f1. */
	is_int(wb_put(f[0], 0, 3750009, size[0] - 3750009, 100003), 0,
	    "%s: wb: f0 4th range", tag);
	is_int(wb_put(f[1], 1, 0, 20 * 1024 * 1024, 65536), 0,
	    "%s: wb: f1 first 20 MiB in 64 KiB pieces", tag);
	is_int(wb_put(f[0], 0, 1250003, 2500006, 7), 0,
	    "%s: wb: f0 middle ranges in 7-byte pieces", tag);
	is_int(wb_put(f[0], 0, 0, 1250003, 262144 + 13), 0,
	    "%s: wb: f0 1st range in pieces larger than a chunk", tag);
	/* f1: the rest, more than the store keeps queued at once. */
	is_int(wb_put(f[1], 1, 20 * 1024 * 1024, size[1] - 20 * 1024 * 1024,
	    299999), 0, "%s: wb: f1 to 41 MiB", tag);
	is_int(wb_put(f[2], 2, 0, 1, 1), 0, "%s: wb: f2 one byte", tag);
	for (k = 0; k < 3; k++) {
		is_int(store_file_length(f[k]), (long long)size[k],
		    "%s: wb: f%u length counts queued bytes", tag, k);
		is_int(store_file_drain(f[k]), 0, "%s: wb: drain f%u", tag, k);
		ok(wb_same(f[k], k, size[k]), "%s: wb: f%u read back exact",
		    tag, k);
	}
	/* More bytes after a drain, then published without one. */
	is_int(wb_put(f[2], 2, 1, 99999, 4096), 0, "%s: wb: f2 grows", tag);
	memset(it, 0, sizeof(it));
	for (k = 0; k < 3; k++) {
		it[k].file = f[k];
		it[k].size = k == 2 ? 100000 : (int64_t)size[k];
		it[k].mtime = MTIME1;
		f[k] = NULL;
	}
	is_int(store_commit(c->s, it, 3), 0, "%s: wb: commit", tag);
	for (k = 0; k < 3; k++)
		is_int(it[k].rc, 0, "%s: wb: f%u published", tag, k);
	pathf(p, c, "wb");
	is_int(count_temps(p, NULL, 0), 0, "%s: wb: no temp left", tag);

	/* An abort with writes still queued: nothing left, nothing read. */
	is_int(store_file_open(c->s, "wb/gone", -1, &g), 0, "%s: wb: open",
	    tag);
	if (g != NULL) {
		(void)store_file_write_behind(g);
		is_int(wb_put(g, 3, 0, 8 * 1024 * 1024, 262144), 0,
		    "%s: wb: 8 MiB queued", tag);
		store_file_abort(g);
		g = NULL;
	}
	is_int(count_temps(p, NULL, 0), 0, "%s: wb: aborted temp removed",
	    tag);

	/* A queued write that fails (EFBIG past RLIMIT_FSIZE). */
	if (getrlimit(RLIMIT_FSIZE, &rl) != 0 ||
	    signal(SIGXFSZ, SIG_IGN) == SIG_ERR) {
		ok(0, "%s: wb: getrlimit/signal: %s", tag, strerror(errno));
		goto out;
	}
	is_int(store_file_open(c->s, "wb/toolong", -1, &g), 0,
	    "%s: wb: open toolong", tag);
	if (g == NULL)
		goto out;
	(void)store_file_write_behind(g);
	small = rl;
	small.rlim_cur = 1024 * 1024;
	if (setrlimit(RLIMIT_FSIZE, &small) != 0) {
		ok(0, "%s: wb: setrlimit: %s", tag, strerror(errno));
		store_file_abort(g);
		goto out;
	}
	(void)wb_put(g, 4, 0, 2 * 1024 * 1024, 262144);
	errno = 0;
	rc = store_file_drain(g);
	is_int(rc, BM_EIO, "%s: wb: drain returns the failed write", tag);
	is_int(errno, EFBIG, "%s: wb: with its errno (EFBIG)", tag);
	is_int(store_file_write(g, 3 * 1024 * 1024, "x", 1), BM_EIO,
	    "%s: wb: a later write returns it too", tag);
	(void)setrlimit(RLIMIT_FSIZE, &rl);
	(void)signal(SIGXFSZ, SIG_DFL);
	is_int(store_file_sync(g), BM_EIO, "%s: wb: and sync", tag);
	is_int(commit_one(c, g, 2 * 1024 * 1024, &irc), 0,
	    "%s: wb: batch ran", tag);
	is_int(irc, BM_EIO, "%s: wb: not published", tag);
	pathf(p, c, "wb/toolong");
	ok(!exists(p), "%s: wb: nothing under the final name", tag);
out:
	for (k = 0; k < 3; k++)
		store_file_abort(f[k]);
}

/* A tap's view: the ranges handed to it, checked against pattern k. */
struct tapped {
	unsigned	 k;
	uint64_t	 next;		/* end of the last range */
	unsigned	 calls, out_of_order, wrong;
	pthread_t	 caller;	/* the last call's thread */
};

static void
tap_fn(void *arg, uint64_t off, const uint8_t *p, size_t len)
{
	struct tapped	*t = arg;
	size_t		 i;

	t->calls++;
	t->caller = pthread_self();
	if (off != t->next)
		t->out_of_order++;
	for (i = 0; i < len; i++)
		if (p[i] != wb_byte(t->k, off + i))
			t->wrong++;
	t->next = off + len;
}

/* A new temp file at path with t (pattern k) as its tap; NULL failed. */
static struct store_file *
tap_open(struct ctx *c, const char *tag, const char *what, const char *path,
    struct tapped *t, unsigned k)
{
	struct store_file *f = NULL;

	memset(t, 0, sizeof(*t));
	t->k = k;
	is_int(store_file_open(c->s, path, -1, &f), 0, "%s: tap: %s", tag,
	    what);
	return f;
}

/*
 * store_file_tap: every range written is handed over once it is in the
 * temp file, in the order written, by the write-behind writer (or the
 * caller without write-behind); none after the tap is cleared.
 */
static void
test_tap(struct ctx *c, const char *tag)
{
	struct store_file *f;
	struct tapped	 t;
	unsigned	 calls;

	if ((f = tap_open(c, tag, "open", "wb/tapped", &t, 5)) == NULL)
		return;
	(void)store_file_write_behind(f);
	store_file_tap(f, tap_fn, &t);
	is_int(wb_put(f, 5, 0, 40 * 1024 * 1024 + 3, 100003), 0,
	    "%s: tap: 40 MiB queued (past the store's queue)", tag);
	is_int(store_file_drain(f), 0, "%s: tap: drained", tag);
	ok(t.next == 40 * 1024 * 1024 + 3 && t.out_of_order == 0 &&
	    t.wrong == 0, "%s: tap: every byte, in order, as written (%llu "
	    "bytes, %u out of order, %u wrong)", tag,
	    (unsigned long long)t.next, t.out_of_order, t.wrong);
	ok(t.calls > 0 && !pthread_equal(t.caller, pthread_self()),
	    "%s: tap: called by the writer thread", tag);
	store_file_tap(f, NULL, NULL);
	calls = t.calls;
	is_int(wb_put(f, 5, t.next, 1000000, 65536), 0, "%s: tap: more", tag);
	is_int(store_file_drain(f), 0, "%s: tap: drained again", tag);
	is_int(t.calls, calls, "%s: tap: none once cleared", tag);
	store_file_abort(f);

	/* Without write-behind: by the caller, at once. */
	if ((f = tap_open(c, tag, "open 2", "wb/tapped2", &t, 6)) == NULL)
		return;
	store_file_tap(f, tap_fn, &t);
	is_int(wb_put(f, 6, 0, 300000, 4096), 0, "%s: tap: written", tag);
	ok(t.next == 300000 && t.out_of_order == 0 && t.wrong == 0 &&
	    pthread_equal(t.caller, pthread_self()),
	    "%s: tap: in the caller's thread, every byte in order", tag);
	store_file_abort(f);
}

static void
test_mismatch_batch(struct ctx *c, const char *tag)
{
	struct store_commit_item it[4];
	char			 p[PATH_MAX], buf[64];
	int			 irc = 0;

	it[0].file = make_file(c, "bad.txt", "12345");
	ok(it[0].file != NULL, "%s: open bad.txt", tag);
	is_int(commit_one(c, it[0].file, 6, &irc), 0, "%s: batch ran", tag);
	is_int(irc, BM_ECHECKSUM, "%s: size mismatch", tag);
	pathf(p, c, "bad.txt");
	ok(!exists(p), "%s: no file under final name", tag);
	is_int(count_temps(c->dest, NULL, 0), 0, "%s: temp removed", tag);

	memset(it, 0, sizeof(it));
	it[0].file = make_file(c, "b1/x", "xx");
	it[1].file = make_file(c, "b2/y", "yyy");
	it[2].file = make_file(c, "b1/z", "zzzz");
	it[3].file = NULL;
	it[0].size = 2;
	it[1].size = 4;		/* wrong */
	it[2].size = 4;
	it[0].mtime = it[1].mtime = it[2].mtime = MTIME2;
	is_int(store_commit(c->s, it, 4), 0, "%s: mixed batch ran", tag);
	is_int(it[0].rc, 0, "%s: b1/x ok", tag);
	is_int(it[1].rc, BM_ECHECKSUM, "%s: b2/y mismatch", tag);
	is_int(it[2].rc, 0, "%s: b1/z ok", tag);
	is_int(it[3].rc, BM_EINVAL, "%s: NULL file item", tag);
	pathf(p, c, "b1/z");
	get_file(p, buf, sizeof(buf));
	is_str(buf, "zzzz", "%s: b1/z content", tag);
	pathf(p, c, "b2/y");
	ok(!exists(p), "%s: b2/y not published", tag);
	pathf(p, c, "b2");
	is_int(count_temps(p, NULL, 0), 0, "%s: b2 temp removed", tag);
	is_int(store_commit(c->s, it, 0), 0, "%s: empty batch", tag);
}

static void
test_planted(struct ctx *c, const char *tag)
{
	struct store_file	*f = NULL;
	struct local_stat	 ls;
	struct stat		 st;
	char			 p[PATH_MAX], q[PATH_MAX], buf[64];
	int			 irc = 0;

	pathf(p, c, "evil");
	ok(symlink(c->out, p) == 0, "%s: plant evil -> outside", tag);
	is_int(store_file_open(c->s, "evil/x", 1, &f), BM_EUNSAFE,
	    "%s: symlink parent refused", tag);
	ok(f == NULL, "%s: no store_file", tag);
	is_int(store_file_open(c->s, "evil/sub/x", 1, &f), BM_EUNSAFE,
	    "%s: symlink grandparent refused", tag);
	is_int(store_mkdirs(c->s, "evil/sub"), BM_EUNSAFE,
	    "%s: mkdirs through symlink", tag);
	is_int(store_mkdirs(c->s, "evil"), BM_EUNSAFE,
	    "%s: mkdirs on symlink", tag);
	is_int(store_stat(c->s, "evil/x", &ls), BM_EUNSAFE,
	    "%s: stat through symlink", tag);
	is_int(store_set_mtime(c->s, "evil/x", MTIME1), BM_EUNSAFE,
	    "%s: set_mtime through symlink", tag);
	is_int(store_symlink(c->s, "evil/l", "x"), BM_EUNSAFE,
	    "%s: symlink through symlink", tag);
	is_int(store_delete(c->s, "evil/x"), BM_EUNSAFE,
	    "%s: delete through symlink", tag);
	pathf(p, c, "d1/evil2");
	ok(symlink(c->out, p) == 0, "%s: plant d1/evil2", tag);
	is_int(store_file_open(c->s, "d1/evil2/x", 1, &f), BM_EUNSAFE,
	    "%s: deeper symlink parent refused", tag);
	is_int(count_entries(c->out), 1, "%s: outside untouched", tag);

	snprintf(q, sizeof(q), "%s/f", c->out);
	pathf(p, c, "f");
	ok(symlink(q, p) == 0, "%s: plant f -> outside/f", tag);
	f = make_file(c, "f", "evil");
	ok(f != NULL, "%s: temp beside planted link", tag);
	is_int(commit_one(c, f, 4, &irc), 0, "%s: commit ran", tag);
	is_int(irc, BM_EUNSAFE, "%s: planted final symlink refused", tag);
	get_file(q, buf, sizeof(buf));
	is_str(buf, "orig", "%s: outside file unchanged", tag);
	ok(lstat(p, &st) == 0 && S_ISLNK(st.st_mode), "%s: link kept", tag);
	is_int(count_temps(c->dest, NULL, 0), 0, "%s: temp removed", tag);

	pathf(p, c, "dirx");
	mkdir(p, 0755);
	f = make_file(c, "dirx", "x");
	is_int(commit_one(c, f, 1, &irc), 0, "%s: commit ran", tag);
	is_int(irc, BM_EUNSAFE, "%s: directory in the way", tag);
	ok(lstat(p, &st) == 0 && S_ISDIR(st.st_mode), "%s: dir kept", tag);
}

static void
test_hostile_paths(struct ctx *c, const char *tag)
{
	static const char *const bad[] = {
		"../x", "/etc/x", "a/../../x", "", "a//b", "./x", "x/",
		"q/\001", STORE_TMP_PREFIX "1234abcd",
		"q/" STORE_TMP_PREFIX "x/y",
	};
	struct store_file	*f = NULL;
	struct local_stat	 ls;
	char			 p[PATH_MAX];
	size_t			 i;
	int			 before;

	before = count_entries(c->dest);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		is_int(store_file_open(c->s, bad[i], 1, &f), BM_EUNSAFE,
		    "%s: file_open \"%s\" refused", tag, bad[i]);
		is_int(store_mkdirs(c->s, bad[i]), BM_EUNSAFE,
		    "%s: mkdirs \"%s\" refused", tag, bad[i]);
		is_int(store_stat(c->s, bad[i], &ls), BM_EUNSAFE,
		    "%s: stat \"%s\" refused", tag, bad[i]);
		is_int(store_delete(c->s, bad[i]), BM_EUNSAFE,
		    "%s: delete \"%s\" refused", tag, bad[i]);
	}
	ok(f == NULL, "%s: no store_file", tag);
	is_int(store_file_open(c->s, NULL, 1, &f), BM_EINVAL, "%s: NULL", tag);
	is_int(count_entries(c->dest), before, "%s: nothing created", tag);
	snprintf(p, sizeof(p), "%s/a/b/x", c->base);
	ok(!exists(p), "%s: nothing above dest", tag);
	snprintf(p, sizeof(p), "%s/a/x", c->base);
	ok(!exists(p), "%s: nothing two above dest", tag);
}

static void
test_abort_clean(struct ctx *c, const char *tag)
{
	struct store_file	*f;
	size_t			 n = 99;
	char			 p[PATH_MAX], q[PATH_MAX];

	f = make_file(c, "ab/file", "abc");
	pathf(p, c, "ab");
	is_int(count_temps(p, NULL, 0), 1, "%s: temp before abort", tag);
	store_file_abort(f);
	is_int(count_temps(p, NULL, 0), 0, "%s: abort removes temp", tag);
	pathf(p, c, "ab/file");
	ok(!exists(p), "%s: aborted file not published", tag);
	store_file_abort(NULL);

	is_int(store_mkdirs(c->s, "t1/t2/t3"), 0, "%s: mkdirs t1/t2/t3", tag);
	pathf(p, c, STORE_TMP_PREFIX "deadbeef");
	put_file(p, "");
	pathf(p, c, "t1/" STORE_TMP_PREFIX "0badf00d");
	put_file(p, "partial");
	pathf(p, c, "t1/t2/t3/" STORE_TMP_PREFIX "12345678");
	put_file(p, "");
	pathf(p, c, "t1/keep");
	put_file(p, "keep");
	pathf(p, c, "t1/t2/.biomirror-tmp");
	put_file(p, "no dot after tmp: not ours");
	snprintf(q, sizeof(q), "%s/" STORE_TMP_PREFIX "outside", c->out);
	put_file(q, "must survive");
	is_int(store_clean_temps(c->s, &n), 0, "%s: clean_temps", tag);
	is_int(n, 3, "%s: three temps removed", tag);
	pathf(p, c, "t1/t2/t3");
	is_int(count_temps(p, NULL, 0), 0, "%s: deep temp gone", tag);
	pathf(p, c, "t1/keep");
	ok(exists(p), "%s: other file kept", tag);
	pathf(p, c, "t1/t2/.biomirror-tmp");
	ok(exists(p), "%s: near-miss name kept", tag);
	ok(exists(q), "%s: temp behind a symlink not touched", tag);
	is_int(store_clean_temps(c->s, &n), 0, "%s: clean again", tag);
	is_int(n, 0, "%s: nothing left", tag);
	(void)unlink(q);
}

static size_t	nftw_count;	/* entries beneath the destination */
static size_t	nftw_prefetch;	/* of them, those 16 levels deep or less */

static int
nftw_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)path;
	(void)st;
	(void)flag;
	if (ftw->level > 0)
		nftw_count++;
	if (ftw->level > 0 && ftw->level <= 16)
		nftw_prefetch++;
	return 0;
}

/*
 * store_prefetch: the walk looks at every entry beneath the destination
 * down to 16 levels (counted independently with nftw(FTW_PHYS)), never
 * through a symlink; an early stop joins cleanly; a second start is a
 * no-op.
 */
static void
test_prefetch(struct ctx *c, const char *tag)
{
	char	 p[PATH_MAX], q[32];
	size_t	 n = 99;
	int	 i, rc;

	is_int(store_prefetch_stop(c->s, true, &n), 0,
	    "%s: prefetch stop without start", tag);
	is_int(n, 0, "%s: nothing walked", tag);
	is_int(store_mkdirs(c->s, "pf/x/y"), 0, "%s: mkdirs pf/x/y", tag);
	for (i = 0; i < 40; i++) {
		snprintf(q, sizeof(q), "pf/x/y/f%d", i);
		pathf(p, c, q);
		put_file(p, "x");
	}
	pathf(p, c, "pf/out");
	ok(symlink(c->out, p) == 0, "%s: symlink to outside", tag);
	/* A chain 20 levels deep: its last levels are not walked. */
	is_int(store_mkdirs(c->s, "pf/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d"),
	    0, "%s: mkdirs 20 levels", tag);
	pathf(p, c, "pf/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/f");
	put_file(p, "deep");
	nftw_count = nftw_prefetch = 0;
	ok(nftw(c->dest, nftw_one, 16, FTW_PHYS) == 0, "%s: nftw", tag);
	ok(nftw_count > nftw_prefetch, "%s: entries deeper than 16 levels "
	    "(%zu of %zu)", tag, nftw_count - nftw_prefetch, nftw_count);

	is_int(store_prefetch_start(c->s), 0, "%s: prefetch start", tag);
	is_int(store_prefetch_start(c->s), 0, "%s: second start: no-op", tag);
	is_int(store_prefetch_stop(c->s, true, &n), 0,
	    "%s: prefetch walked the whole tree", tag);
	is_int(n, nftw_prefetch, "%s: every entry 16 levels deep or less "
	    "looked at once, none behind the symlink", tag);
	ok(n >= 43, "%s: the new entries are among them (%zu)", tag, n);

	is_int(store_prefetch_start(c->s), 0, "%s: prefetch again", tag);
	rc = store_prefetch_stop(c->s, false, &n);
	ok(rc == 0 || rc == BM_EINTR, "%s: early stop: 0 or BM_EINTR (%d)",
	    tag, rc);
	ok(n <= nftw_prefetch, "%s: early stop looked at no more (%zu)", tag,
	    n);
	/* store_close() stops a running one (the suite's close, under ASan). */
	is_int(store_prefetch_start(c->s), 0, "%s: left running", tag);
}

/*
 * The prefetch's lstats stand in for the planner's: store_stat takes the
 * one kept (changed behind its back, it still reports the size the walk
 * saw), once; a change through the store drops them all.
 */
static void
test_prefetch_keep(struct ctx *c, const char *tag)
{
	struct local_stat st;
	char		 p[PATH_MAX];
	int		 rc;

	is_int(store_mkdirs(c->s, "pk"), 0, "%s: mkdirs pk", tag);
	pathf(p, c, "pk/a");
	put_file(p, "x");
	pathf(p, c, "pk/b");
	put_file(p, "x");
	is_int(store_prefetch_start(c->s), 0, "%s: keep: start", tag);
	store_prefetch_wait(c->s);
	store_prefetch_wait(c->s);
	pathf(p, c, "pk/a");
	put_file(p, "xyz");
	pathf(p, c, "pk/b");
	put_file(p, "xyz");
	rc = store_stat(c->s, "pk/a", &st);
	ok(rc == 0 && st.type == 'f' && st.size == 1,
	    "%s: keep: the walk's lstat of pk/a (%d, %lld)", tag, rc,
	    (long long)st.size);
	rc = store_stat(c->s, "pk/a", &st);
	ok(rc == 0 && st.size == 3, "%s: keep: taken once, then lstat'ed "
	    "(%d, %lld)", tag, rc, (long long)st.size);
	is_int(store_mkdirs(c->s, "pk/c"), 0, "%s: keep: a change", tag);
	rc = store_stat(c->s, "pk/b", &st);
	ok(rc == 0 && st.size == 3, "%s: keep: dropped by the change "
	    "(%d, %lld)", tag, rc, (long long)st.size);
	is_int(store_prefetch_stop(c->s, false, NULL), 0, "%s: keep: stop "
	    "after the wait", tag);
	is_int(store_prefetch_start(c->s), 0, "%s: keep: again", tag);
	store_prefetch_wait(c->s);
	is_int(store_prefetch_stop(c->s, true, NULL), 0, "%s: keep: stop",
	    tag);
	pathf(p, c, "pk/b");
	put_file(p, "x");
	rc = store_stat(c->s, "pk/b", &st);
	ok(rc == 0 && st.size == 1, "%s: keep: none after the stop "
	    "(%d, %lld)", tag, rc, (long long)st.size);
}

/*
 * A prefetch that walked the whole tree and saw no temp file spares
 * store_clean_temps its walk until the tree changes; one that saw a temp
 * file does not.
 */
static void
test_prefetch_temps(struct ctx *c, const char *tag)
{
	char	 p[PATH_MAX];
	size_t	 n = 99;
	int	 rc;

	is_int(store_mkdirs(c->s, "pt"), 0, "%s: temps: mkdirs pt", tag);
	is_int(store_clean_temps(c->s, &n), 0, "%s: temps: none left", tag);
	pathf(p, c, "pt/" STORE_TMP_PREFIX "0000aaaa");
	put_file(p, "killed run");
	is_int(store_prefetch_start(c->s), 0, "%s: temps: start", tag);
	is_int(store_prefetch_stop(c->s, true, NULL), 0, "%s: temps: stop",
	    tag);
	rc = store_clean_temps(c->s, &n);
	ok(rc == 0 && n == 1 && !exists(p),
	    "%s: temps: the one the walk saw removed (%zu)", tag, n);
	is_int(store_prefetch_start(c->s), 0, "%s: temps: again", tag);
	is_int(store_prefetch_stop(c->s, true, NULL), 0, "%s: temps: stop "
	    "again", tag);
	put_file(p, "behind the store's back");
	rc = store_clean_temps(c->s, &n);
	ok(rc == 0 && n == 0 && exists(p),
	    "%s: temps: no walk after a walk that saw none (%zu)", tag, n);
	is_int(store_mkdirs(c->s, "pt/q"), 0, "%s: temps: a change", tag);
	rc = store_clean_temps(c->s, &n);
	ok(rc == 0 && n == 1 && !exists(p),
	    "%s: temps: walked after the change (%zu)", tag, n);
}

static void
test_delete_mtime(struct ctx *c, const char *tag)
{
	struct stat	 st;
	char		 p[PATH_MAX];

	pathf(p, c, "del");
	mkdir(p, 0755);
	pathf(p, c, "del/file");
	put_file(p, "x");
	pathf(p, c, "del/empty");
	mkdir(p, 0755);
	is_int(store_delete(c->s, "del/file"), 0, "%s: delete file", tag);
	pathf(p, c, "del/file");
	ok(!exists(p), "%s: file gone", tag);
	is_int(store_delete(c->s, "del/empty"), 0, "%s: delete empty dir", tag);
	pathf(p, c, "del/empty");
	ok(!exists(p), "%s: dir gone", tag);
	is_int(store_delete(c->s, "del/file"), BM_ENOENT, "%s: missing", tag);
	is_int(store_delete(c->s, "nodir/file"), BM_ENOENT,
	    "%s: missing parent", tag);
	pathf(p, c, "del/full");
	mkdir(p, 0755);
	pathf(p, c, "del/full/x");
	put_file(p, "x");
	errno = 0;
	is_int(store_delete(c->s, "del/full"), BM_EIO, "%s: non-empty", tag);
	is_int(errno, ENOTEMPTY, "%s: errno ENOTEMPTY", tag);
	ok(exists(p), "%s: contents kept", tag);
	pathf(p, c, "del/link");
	ok(symlink(c->out, p) == 0, "%s: plant del/link", tag);
	is_int(store_delete(c->s, "del/link"), 0, "%s: delete symlink", tag);
	ok(!exists(p) && count_entries(c->out) == 1,
	    "%s: link gone, target intact", tag);

	is_int(store_mkdirs(c->s, "m/n"), 0, "%s: mkdirs m/n", tag);
	is_int(store_mkdirs(c->s, "m/n"), 0, "%s: mkdirs existing", tag);
	is_int(store_set_mtime(c->s, "m/n", MTIME2), 0, "%s: set_mtime dir",
	    tag);
	pathf(p, c, "m/n");
	ok(stat(p, &st) == 0 && S_ISDIR(st.st_mode), "%s: m/n is dir", tag);
	is_int(st.st_mode & 07777, 0775, "%s: m/n has dir_mode", tag);
	is_int(st.st_mtim.tv_sec, MTIME2 / 1000000000LL, "%s: dir mtime s",
	    tag);
	is_int(st.st_mtim.tv_nsec, MTIME2 % 1000000000LL, "%s: dir mtime ns",
	    tag);
	is_int(store_set_mtime(c->s, "m/none", MTIME2), BM_ENOENT,
	    "%s: set_mtime missing", tag);

	pathf(p, c, "m/afile");
	put_file(p, "x");
	is_int(store_mkdirs(c->s, "m/afile"), BM_EUNSAFE,
	    "%s: mkdirs over a file", tag);
	is_int(store_mkdirs(c->s, "m/afile/sub"), BM_EUNSAFE,
	    "%s: mkdirs under a file", tag);
}

static void
test_symlink(struct ctx *c, const char *tag)
{
	struct local_stat	 ls;
	char			 p[PATH_MAX], buf[PATH_MAX];
	ssize_t			 n;

	is_int(store_symlink(c->s, "s/link", "../d1/d2/file.txt"), 0,
	    "%s: symlink inside", tag);
	pathf(p, c, "s/link");
	n = readlink(p, buf, sizeof(buf) - 1);
	buf[n < 0 ? 0 : n] = '\0';
	is_str(buf, "../d1/d2/file.txt", "%s: link target", tag);
	is_int(store_stat(c->s, "s/link", &ls), 0, "%s: stat link", tag);
	is_int(ls.type, 'l', "%s: type l", tag);
	is_int(store_symlink(c->s, "s/link", "other"), 0, "%s: replace link",
	    tag);
	n = readlink(p, buf, sizeof(buf) - 1);
	buf[n < 0 ? 0 : n] = '\0';
	is_str(buf, "other", "%s: replaced target", tag);
	is_int(store_symlink(c->s, "s/link2", "/etc/passwd"), BM_EUNSAFE,
	    "%s: absolute target refused", tag);
	is_int(store_symlink(c->s, "s/link2", "../../x"), BM_EUNSAFE,
	    "%s: ../../x escaping refused", tag);
	is_int(store_symlink(c->s, "link3", "../x"), BM_EUNSAFE,
	    "%s: ../x at root refused", tag);
	is_int(store_symlink(c->s, "s/link2", "a/../../../x"), BM_EUNSAFE,
	    "%s: a/../../../x refused", tag);
	is_int(store_symlink(c->s, "s/link2", ""), BM_EUNSAFE,
	    "%s: empty target refused", tag);
	pathf(p, c, "s/link2");
	ok(!exists(p), "%s: nothing created for refused links", tag);
	is_int(store_symlink(c->s, "s/t/link4", "../../x"), 0,
	    "%s: ../../x from depth 2 ok", tag);
	is_int(store_symlink(c->s, "d1", "x"), BM_EUNSAFE,
	    "%s: directory in the way", tag);
	pathf(p, c, "s");
	is_int(count_temps(p, NULL, 0), 0, "%s: no temp links left", tag);
	is_int(count_temps(c->dest, NULL, 0), 0, "%s: none at root", tag);
}

static void
test_free_space(struct ctx *c, const char *tag)
{
	struct statvfs	 sv;
	uint64_t	 n = 0;

	is_int(store_free_space(c->s, &n), 0, "%s: free_space", tag);
	ok(statvfs(c->dest, &sv) == 0 && n > 0 &&
	    n / sv.f_frsize / 1024 == sv.f_bavail / 1024,
	    "%s: free space matches statvfs", tag);
}

/* --- publish = set ------------------------------------------------ */

static void
mklink(const char *target, const char *path)
{
	if (symlink(target, path) != 0)
		printf("# symlink %s failed\n", path);
}

static ino_t
ino_of(const char *path)
{
	struct stat	 st;

	return lstat(path, &st) == 0 ? st.st_ino : 0;
}

static int64_t
mtime_of(const char *path)
{
	struct stat	 st;

	if (lstat(path, &st) != 0)
		return -1;
	return (int64_t)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
}

static void
set_mtime_path(const char *path, int64_t ns)
{
	struct timespec	 ts[2];

	ts[0].tv_sec = (time_t)(ns / 1000000000LL);
	ts[0].tv_nsec = (long)(ns % 1000000000LL);
	ts[1] = ts[0];
	if (utimensat(AT_FDCWD, path, ts, AT_SYMLINK_NOFOLLOW) != 0)
		printf("# utimensat %s failed\n", path);
}

static bool
link_is(const char *path, const char *want)
{
	char	 buf[PATH_MAX];
	ssize_t	 n;

	if ((n = readlink(path, buf, sizeof(buf) - 1)) < 0)
		return false;
	buf[n] = '\0';
	if (strcmp(buf, want) != 0)
		printf("# %s -> %s, want %s\n", path, buf, want);
	return strcmp(buf, want) == 0;
}

/* Conversion, working snapshot, copy-on-touch, publish, prune. */
static void
test_set_cycle(const char *base, const char *tag)
{
	struct store		*s = NULL;
	struct store_set_info	 info;
	struct store_file	*f;
	struct store_commit_item it;
	char			 dest[512], p[PATH_MAX], q[PATH_MAX];
	char			 buf[64], err[256];
	ino_t			 dino, aino, bino;
	int			 rc;

	snprintf(dest, sizeof(dest), "%s/set/db", base);
	snprintf(p, sizeof(p), "%s/set", base);
	mkdir(p, 0755);
	mkdir(dest, 0755);
	snprintf(p, sizeof(p), "%s/a", dest);
	put_file(p, "A1");
	snprintf(p, sizeof(p), "%s/d", dest);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/d/b", dest);
	put_file(p, "B1");
	set_mtime_path(p, MTIME1);
	dino = ino_of(dest);

	/* Read-only: a real DEST is read as it is, nothing is made. */
	rc = store_open_set(dest, 0644, 0755, 0, -1, &s, err, sizeof(err));
	ok(rc == 0 && s != NULL, "%s: read-only open of a real DEST", tag);
	ok(s != NULL && store_stat(s, "a", &(struct local_stat){0}) == 0,
	    "%s: read-only root is DEST", tag);
	store_close(s);
	s = NULL;
	snprintf(p, sizeof(p), "%s.biomirror", dest);
	ok(!exists(p), "%s: read-only open made nothing", tag);

	rc = store_open_set(dest, 0644, 0755, 5, 4, &s, err, sizeof(err));
	if (!ok(rc == 0 && s != NULL, "%s: open_set converts", tag)) {
		printf("#   rc %d: %s\n", rc, err);
		return;
	}
	ok(link_is(dest, "db.biomirror/snapshots/0"), "%s: DEST -> 0", tag);
	snprintf(p, sizeof(p), "%s.biomirror/snapshots/0", dest);
	is_int(ino_of(p), dino, "%s: snapshot 0 is the old directory", tag);
	snprintf(p, sizeof(p), "%s.biomirror", dest);
	is_int(count_entries(p), 1, "%s: only snapshots/ beside", tag);
	store_set_get_info(s, &info);
	ok(info.published == 0 && info.working == -1 && !info.reused,
	    "%s: info after conversion", tag);
	ok(!store_set_pending(s), "%s: nothing pending", tag);

	is_int(store_set_begin(s), 0, "%s: begin", tag);
	store_set_get_info(s, &info);
	is_int(info.working, 5, "%s: working snapshot 5 (the run)", tag);
	snprintf(p, sizeof(p), "%s.biomirror/snapshots/0/a", dest);
	snprintf(q, sizeof(q), "%s.biomirror/snapshots/5/a", dest);
	aino = ino_of(p);
	is_int(ino_of(q), aino, "%s: a is a hard link", tag);
	snprintf(p, sizeof(p), "%s.biomirror/snapshots/0/d/b", dest);
	snprintf(q, sizeof(q), "%s.biomirror/snapshots/5/d/b", dest);
	bino = ino_of(p);
	is_int(ino_of(q), bino, "%s: d/b is a hard link", tag);
	snprintf(p, sizeof(p), "%s.biomirror/snapshots", dest);
	is_int(count_entries(p), 2, "%s: no temp dir left", tag);
	ok(!store_set_pending(s), "%s: nothing pending after begin", tag);
	ok(link_is(dest, "db.biomirror/snapshots/0"), "%s: DEST unchanged", tag);

	/* New content replaces the link; the published file is untouched. */
	f = NULL;
	if (store_file_open(s, "a", 2, &f) == 0 &&
	    store_file_write(f, 0, "A2", 2) == 0) {
		it.file = f;
		it.size = 2;
		it.mtime = MTIME2;
		it.rc = 99;
		ok(store_commit(s, &it, 1) == 0 && it.rc == 0,
		    "%s: commit a", tag);
	} else {
		ok(0, "%s: store_file_open a", tag);
		store_file_abort(f);
	}
	snprintf(p, sizeof(p), "%s.biomirror/snapshots/0/a", dest);
	get_file(p, buf, sizeof(buf));
	is_str(buf, "A1", "%s: published a unchanged", tag);
	is_int(ino_of(p), aino, "%s: published a same inode", tag);
	snprintf(p, sizeof(p), "%s.biomirror/snapshots/5/a", dest);
	get_file(p, buf, sizeof(buf));
	is_str(buf, "A2", "%s: working a is new", tag);

	/* A touch of a shared file makes a copy. */
	is_int(store_set_mtime(s, "d/b", MTIME2), 0, "%s: touch d/b", tag);
	snprintf(p, sizeof(p), "%s.biomirror/snapshots/0/d/b", dest);
	snprintf(q, sizeof(q), "%s.biomirror/snapshots/5/d/b", dest);
	is_int(mtime_of(p), MTIME1, "%s: published d/b mtime kept", tag);
	is_int(ino_of(p), bino, "%s: published d/b inode kept", tag);
	ok(ino_of(q) != bino, "%s: working d/b has its own inode", tag);
	is_int(mtime_of(q), MTIME2, "%s: working d/b new mtime", tag);
	get_file(q, buf, sizeof(buf));
	is_str(buf, "B1", "%s: working d/b content copied", tag);
	store_set_get_info(s, &info);
	rc = (int)info.changes;
	is_int(store_set_mtime(s, "d/b", MTIME2), 0, "%s: same mtime", tag);
	store_set_get_info(s, &info);
	is_int((int)info.changes, rc, "%s: same mtime is no change", tag);
	ok(store_set_pending(s), "%s: pending", tag);

	is_int(store_set_publish(s, NULL), 0, "%s: publish", tag);
	ok(link_is(dest, "db.biomirror/snapshots/5"), "%s: DEST -> 5", tag);
	snprintf(p, sizeof(p), "%s/a", dest);
	get_file(p, buf, sizeof(buf));
	is_str(buf, "A2", "%s: DEST shows the new a", tag);
	store_set_get_info(s, &info);
	ok(info.published == 5 && info.previous == 0 && info.working == -1,
	    "%s: info after publish", tag);
	is_int(store_set_prune(s, NULL), 0, "%s: prune", tag);
	snprintf(p, sizeof(p), "%s.biomirror/snapshots/0", dest);
	ok(exists(p), "%s: previous snapshot kept", tag);
	store_close(s);
	s = NULL;

	/* Next run: a stale temp dir and an old snapshot go; prune keeps 5, 9. */
	snprintf(p, sizeof(p), "%s.biomirror/snapshots/.biomirror-tmp.0badf00d",
	    dest);
	mkdir(p, 0700);
	snprintf(q, sizeof(q), "%s.biomirror/snapshots/.biomirror-tmp.0badf00d/x",
	    dest);
	put_file(q, "x");
	rc = store_open_set(dest, 0644, 0755, 9, 8, &s, err, sizeof(err));
	ok(rc == 0 && s != NULL, "%s: reopen", tag);
	ok(!exists(p), "%s: stale temp snapshot removed", tag);
	if (s == NULL)
		return;
	is_int(store_set_begin(s), 0, "%s: begin 9", tag);
	is_int(store_delete(s, "a"), 0, "%s: delete a by omission", tag);
	is_int(store_set_publish(s, NULL), 0, "%s: publish 9", tag);
	is_int(store_set_prune(s, NULL), 0, "%s: prune after 9", tag);
	snprintf(p, sizeof(p), "%s.biomirror/snapshots", dest);
	is_int(count_entries(p), 2, "%s: two snapshots left", tag);
	snprintf(p, sizeof(p), "%s.biomirror/snapshots/0", dest);
	ok(!exists(p), "%s: snapshot 0 pruned", tag);
	snprintf(p, sizeof(p), "%s.biomirror/snapshots/5/a", dest);
	ok(exists(p), "%s: a still in the previous snapshot", tag);
	snprintf(p, sizeof(p), "%s/a", dest);
	ok(!exists(p), "%s: a gone from DEST", tag);
	store_close(s);
}

/* Unpublished work is reused; an empty first snapshot is discarded. */
static void
test_set_partial(const char *base, const char *tag)
{
	struct store		*s = NULL;
	struct store_set_info	 info;
	char			 dest[512], p[PATH_MAX], err[256];
	int			 rc;

	/* Fresh: nothing at DEST. */
	snprintf(dest, sizeof(dest), "%s/fresh/db", base);
	rc = store_open_set(dest, 0644, 0755, 0, -1, &s, err, sizeof(err));
	ok(rc == 0 && s == NULL, "%s: read-only fresh: no store", tag);
	snprintf(p, sizeof(p), "%s/fresh", base);
	ok(!exists(p), "%s: read-only made nothing", tag);
	rc = store_open_set(dest, 0644, 0750, 3, 2, &s, err, sizeof(err));
	ok(rc == 0 && s != NULL, "%s: fresh open", tag);
	if (s == NULL)
		return;
	store_set_get_info(s, &info);
	ok(info.published == -1 && info.working == 3 && !info.reused,
	    "%s: fresh working snapshot 3", tag);
	ok(!exists(dest), "%s: DEST not made before publication", tag);
	ok(!store_set_pending(s), "%s: empty is not pending", tag);
	is_int(store_set_discard(s), 0, "%s: discard", tag);
	snprintf(p, sizeof(p), "%s.biomirror/snapshots/3", dest);
	ok(!exists(p), "%s: discarded snapshot removed", tag);
	store_close(s);

	/* A run that wrote and failed: its snapshot is reused. */
	s = NULL;
	rc = store_open_set(dest, 0644, 0755, 4, 3, &s, err, sizeof(err));
	ok(rc == 0 && s != NULL, "%s: fresh open 4", tag);
	if (s == NULL)
		return;
	is_int(store_mkdirs(s, "sub"), 0, "%s: mkdir in 4", tag);
	ok(store_set_pending(s), "%s: 4 pending", tag);
	is_int(store_set_discard(s), 0, "%s: discard keeps nothing...", tag);
	store_close(s);
	s = NULL;
	snprintf(p, sizeof(p), "%s.biomirror/snapshots/4", dest);
	ok(!exists(p), "%s: ...when asked (sync only asks when empty)", tag);

	rc = store_open_set(dest, 0644, 0755, 5, 4, &s, err, sizeof(err));
	if (s == NULL)
		return;
	is_int(store_mkdirs(s, "sub"), 0, "%s: mkdir in 5", tag);
	store_close(s);
	s = NULL;
	rc = store_open_set(dest, 0644, 0755, 6, 5, &s, err, sizeof(err));
	ok(rc == 0 && s != NULL, "%s: open 6", tag);
	if (s == NULL)
		return;
	store_set_get_info(s, &info);
	ok(info.working == 6 && info.reused && info.discarded == -1,
	    "%s: 5 is reused, renamed 6", tag);
	snprintf(p, sizeof(p), "%s.biomirror/snapshots/5", dest);
	ok(!exists(p), "%s: 5 renamed away", tag);
	ok(store_set_pending(s), "%s: reused is pending", tag);
	is_int(store_set_begin(s), 0, "%s: begin on reused is a no-op", tag);
	is_int(store_set_discard(s), 0, "%s: discard keeps reused", tag);
	snprintf(p, sizeof(p), "%s.biomirror/snapshots/6/sub", dest);
	ok(exists(p), "%s: reused snapshot kept", tag);
	store_close(s);
	s = NULL;
	/* Read-only with the newest run 6: the unpublished 6 is the root. */
	rc = store_open_set(dest, 0644, 0755, 0, 6, &s, err, sizeof(err));
	store_set_get_info(s, &info);
	ok(rc == 0 && s != NULL && info.working == 6 &&
	    store_stat(s, "sub", &(struct local_stat){0}) == 0,
	    "%s: read-only root is the unpublished 6", tag);
	store_close(s);
	s = NULL;
	rc = store_open_set(dest, 0644, 0755, 7, 6, &s, err, sizeof(err));
	if (s == NULL)
		return;
	is_int(store_set_publish(s, NULL), 0, "%s: publish reused", tag);
	ok(link_is(dest, "db.biomirror/snapshots/7"), "%s: DEST -> 7", tag);
	store_close(s);

	/*
	 * Run 8 leaves an unpublished snapshot; run 9 is not a set run
	 * (publish = file): run 10 must not continue 8.
	 */
	s = NULL;
	rc = store_open_set(dest, 0644, 0755, 8, 7, &s, err, sizeof(err));
	if (s == NULL)
		return;
	is_int(store_set_begin(s), 0, "%s: begin 8", tag);
	is_int(store_mkdirs(s, "stale"), 0, "%s: mkdir in 8", tag);
	store_close(s);
	s = NULL;
	rc = store_open_set(dest, 0644, 0755, 0, 9, &s, err, sizeof(err));
	store_set_get_info(s, &info);
	ok(rc == 0 && s != NULL && info.working == -1 &&
	    info.published == 7 && info.discarded == 8 &&
	    store_stat(s, "stale", &(struct local_stat){0}) == BM_ENOENT,
	    "%s: read-only ignores 8 left before run 9", tag);
	snprintf(p, sizeof(p), "%s.biomirror/snapshots/8/stale", dest);
	ok(exists(p), "%s: read-only removed nothing", tag);
	store_close(s);
	s = NULL;
	rc = store_open_set(dest, 0644, 0755, 10, 9, &s, err, sizeof(err));
	store_set_get_info(s, &info);
	ok(rc == 0 && s != NULL && info.working == -1 &&
	    info.published == 7 && info.discarded == 8 && !info.reused,
	    "%s: 8 discarded, root is the published 7", tag);
	snprintf(p, sizeof(p), "%s.biomirror/snapshots/8", dest);
	ok(!exists(p), "%s: stale 8 removed", tag);
	store_close(s);
}

/* Each state an interrupted conversion can leave is completed. */
static void
test_set_recover(const char *base, const char *tag)
{
	struct store	*s = NULL;
	char		 dest[512], m[600], p[PATH_MAX], q[PATH_MAX];
	char		 buf[64], err[256];
	int		 step, rc;

	for (step = 0; step < 4; step++) {
		snprintf(dest, sizeof(dest), "%s/rec%d/db", base, step);
		snprintf(m, sizeof(m), "%s.biomirror", dest);
		snprintf(p, sizeof(p), "%s/rec%d", base, step);
		mkdir(p, 0755);
		mkdir(dest, 0755);
		snprintf(p, sizeof(p), "%s/f", dest);
		put_file(p, "F");
		mkdir(m, 0755);
		snprintf(p, sizeof(p), "%s/snapshots", m);
		mkdir(p, 0755);
		snprintf(p, sizeof(p), "%s/snapshots/0", m);
		snprintf(q, sizeof(q), "%s/convert", m);
		switch (step) {
		case 0:	/* placeholders made, nothing exchanged */
			mklink("../convert", p);
			mklink("db.biomirror/snapshots/0", q);
			break;
		case 1:	/* first exchange done */
			mklink("../convert", p);
			(void)rename(dest, q);
			mklink("db.biomirror/snapshots/0", dest);
			break;
		case 2:	/* both exchanges done, convert left */
			(void)rename(dest, p);
			mklink("db.biomirror/snapshots/0", dest);
			mklink("../convert", q);
			break;
		case 3:	/* fallback: DEST moved, symlink not yet in place */
			(void)rename(dest, p);
			mklink("db.biomirror/snapshots/0", q);
			break;
		}
		s = NULL;
		rc = store_open_set(dest, 0644, 0755, 1, 0, &s, err, sizeof(err));
		if (!ok(rc == 0 && s != NULL, "%s: recover step %d", tag,
		    step))
			printf("#   rc %d: %s\n", rc, err);
		store_close(s);
		ok(link_is(dest, "db.biomirror/snapshots/0"),
		    "%s: step %d: DEST -> 0", tag, step);
		snprintf(p, sizeof(p), "%s/snapshots/0/f", m);
		get_file(p, buf, sizeof(buf));
		is_str(buf, "F", "%s: step %d: content in snapshot 0", tag, step);
		snprintf(p, sizeof(p), "%s/convert", m);
		ok(!exists(p), "%s: step %d: convert gone", tag, step);
		is_int(count_entries(m), 1, "%s: step %d: only snapshots/",
		    tag, step);
	}

	/* A symlink DEST that is not ours is refused and left alone. */
	snprintf(dest, sizeof(dest), "%s/rec0/other", base);
	mklink("elsewhere", dest);
	s = NULL;
	rc = store_open_set(dest, 0644, 0755, 1, 0, &s, err, sizeof(err));
	is_int(rc, BM_EUNSAFE, "%s: foreign symlink refused", tag);
	ok(s == NULL && strstr(err, "not a directory nor a symlink made by "
	    "publish = set") != NULL, "%s: says why: %s", tag, err);
	ok(link_is(dest, "elsewhere"), "%s: foreign symlink kept", tag);
}

static void
test_set(struct ctx *c, const char *tag)
{
	test_set_cycle(c->base, tag);
	test_set_partial(c->base, tag);
	test_set_recover(c->base, tag);
}

static void
run_suite(const char *tag)
{
	struct ctx	 c;
	char		 p[PATH_MAX];

	memset(&c, 0, sizeof(c));
	snprintf(c.base, sizeof(c.base), "/tmp/test_store.XXXXXX");
	if (mkdtemp(c.base) == NULL) {
		ok(0, "%s: mkdtemp", tag);
		return;
	}
	snprintf(c.dest, sizeof(c.dest), "%s/a/b/dest", c.base);
	snprintf(c.out, sizeof(c.out), "%s/outside", c.base);
	mkdir(c.out, 0755);
	snprintf(p, sizeof(p), "%s/f", c.out);
	put_file(p, "orig");

	test_open(&c, tag);
	if (c.s == NULL)
		return;
	test_dest_symlink(&c, tag);
	test_access(&c, tag);
	test_write_commit(&c, tag);
	test_write_behind(&c, tag);
	test_tap(&c, tag);
	test_mismatch_batch(&c, tag);
	test_planted(&c, tag);
	test_hostile_paths(&c, tag);
	test_abort_clean(&c, tag);
	test_prefetch_keep(&c, tag);
	test_prefetch_temps(&c, tag);
	test_prefetch(&c, tag);
	test_delete_mtime(&c, tag);
	test_symlink(&c, tag);
	test_free_space(&c, tag);
	test_set(&c, tag);
	store_close(c.s);
	store_close(NULL);
	if (tap_failed != 0)
		printf("# %s: left %s for inspection\n", tag, c.base);
	else {
		snprintf(p, sizeof(p), "rm -rf '%s'", c.base);
		if (system(p) != 0)
			printf("# could not remove %s\n", c.base);
	}
}

static bool
have_openat2(void)
{
	struct open_how	 how;
	int		 fd;

	memset(&how, 0, sizeof(how));
	how.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC;
	how.resolve = RESOLVE_BENEATH;
	fd = (int)syscall(SYS_openat2, AT_FDCWD, ".", &how, sizeof(how));
	if (fd == -1)
		return false;
	close(fd);
	return true;
}

/* Make openat2 fail with ENOSYS from now on, like an old kernel. */
static int
block_openat2(void)
{
	struct sock_filter filt[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
		    offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat2, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {
		(unsigned short)(sizeof(filt) / sizeof(filt[0])), filt
	};

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1)
		return -1;
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
}

int
main(void)
{
	umask(022);
	printf("# openat2 on this kernel: %s\n",
	    have_openat2() ? "yes" : "no (walk only)");
	run_suite("native");
	if (block_openat2() == -1) {
		ok(1, "# skip walk pass: seccomp unavailable (%s)",
		    strerror(errno));
		return done_testing();
	}
	ok(!have_openat2() && errno == ENOSYS, "openat2 now gives ENOSYS");
	run_suite("walk");
	return done_testing();
}
