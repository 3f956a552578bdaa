/*
 * Unit tests of manifest/manifest.c: open/create/reopen, refusal of
 * foreign, garbage, newer and locked files (left byte-for-byte intact),
 * every diff rule, BLOB paths that are not UTF-8, commit op effects,
 * runs, events, ls prefixes, and the time to stage 100,000 entries.
 * The test uses sqlite3 directly only to build hostile files and to hold
 * locks from a second connection.
 */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "biomirror/error.h"
#include "biomirror/listing.h"
#include "biomirror/manifest.h"
#include "tap.h"

#define NS	1000000000LL

struct seen {
	char		*path;		/* owned copy */
	size_t		 pathlen;
	enum diff_kind	 kind;
	enum entry_type	 type;
	struct file_state fs;		/* the row's */
	int64_t		 seen_run, fetched_run;
	bool		 recorded;
	char		*etag;		/* owned copy, NULL if none */
	char		*target;	/* owned copy, NULL if none */
	char		*checksum;	/* owned copy, NULL if none */
	char		*op, *reason;	/* events: owned copies */
	int64_t		 bytes, time_ns;
};

struct seen_list {
	struct seen	 v[64];
	size_t		 n;
	int		 stop_at;	/* return 7 at this row (1-based) */
};

static char *
dup_or_null(const char *s)
{
	char	*d;

	if (s == NULL)
		return NULL;
	if ((d = strdup(s)) == NULL)
		tap_bail("setup failed");
	return d;
}

static void
seen_reset(struct seen_list *sl)
{
	size_t	 i;

	for (i = 0; i < sl->n; i++) {
		free(sl->v[i].path);
		free(sl->v[i].etag);
		free(sl->v[i].target);
		free(sl->v[i].checksum);
		free(sl->v[i].op);
		free(sl->v[i].reason);
	}
	memset(sl, 0, sizeof(*sl));
}

static struct seen *
seen_find(struct seen_list *sl, const char *path)
{
	size_t	 i;

	for (i = 0; i < sl->n; i++)
		if (strcmp(sl->v[i].path, path) == 0)
			return &sl->v[i];
	return NULL;
}

static int
diff_cb(void *ctx, const struct diff_row *r)
{
	struct seen_list	*sl = ctx;
	struct seen		*s;

	if (sl->n == sizeof(sl->v) / sizeof(sl->v[0]))
		return 99;
	s = &sl->v[sl->n++];
	if ((s->path = malloc(r->pathlen + 1)) == NULL)
		tap_bail("setup failed");
	memcpy(s->path, r->path, r->pathlen + 1);
	s->pathlen = r->pathlen;
	s->kind = r->kind;
	s->type = r->type;
	s->fs = r->fs;
	s->recorded = r->recorded;
	s->etag = dup_or_null(r->etag);
	s->target = dup_or_null(r->target);
	if (sl->stop_at != 0 && (int)sl->n == sl->stop_at)
		return 7;
	return 0;
}

static int
ls_cb(void *ctx, const struct file_row *r)
{
	struct seen_list	*sl = ctx;
	struct seen		*s;

	if (sl->n == sizeof(sl->v) / sizeof(sl->v[0]))
		return 99;
	s = &sl->v[sl->n++];
	if ((s->path = malloc(r->pathlen + 1)) == NULL)
		tap_bail("setup failed");
	memcpy(s->path, r->path, r->pathlen + 1);
	s->pathlen = r->pathlen;
	s->type = r->type;
	s->fs = r->fs;
	s->seen_run = r->seen_run;
	s->fetched_run = r->fetched_run;
	s->etag = dup_or_null(r->etag);
	s->target = dup_or_null(r->target);
	s->checksum = dup_or_null(r->checksum);
	return 0;
}

static int
ev_cb(void *ctx, const struct event_row *r)
{
	struct seen_list	*sl = ctx;
	struct seen		*s;

	if (sl->n == sizeof(sl->v) / sizeof(sl->v[0]))
		return 99;
	s = &sl->v[sl->n++];
	s->path = dup_or_null(r->path);
	s->pathlen = strlen(r->path);
	s->op = dup_or_null(r->op);
	s->reason = dup_or_null(r->reason);
	s->bytes = r->bytes;
	s->time_ns = r->time_ns;
	s->seen_run = r->run;
	return 0;
}

/* Append one entry; mtime in seconds. */
static void
add(struct listing *l, const char *path, enum entry_type type, int64_t size,
    bool exact, int64_t mtime_s, enum mtime_prec prec, const char *target)
{
	struct entry	*e;

	if (listing_append(l, &e) != 0)
		tap_bail("setup failed");
	e->path = dup_or_null(path);
	e->type = type;
	e->size = size;
	e->size_exact = exact;
	e->mtime_prec = prec;
	e->mtime_wall = mtime_s;
	e->mtime = mtime_s * NS;
	e->target = dup_or_null(target);
}

/* A commit record with the listed values; up/local from the same size. */
static struct commit_rec
rec(const char *path, enum commit_op op, enum entry_type type, int64_t size,
    int64_t mtime_s, enum mtime_prec prec)
{
	struct commit_rec	 c;

	memset(&c, 0, sizeof(c));
	c.path = path;
	c.op = op;
	c.type = type;
	c.fs.listed.size = size;
	c.fs.listed.size_exact = true;
	c.fs.listed.mtime = mtime_s * NS;
	c.fs.listed.prec = prec;
	c.fs.upstream.size = size;
	c.fs.upstream.mtime = mtime_s * NS;
	c.fs.local.size = size;
	c.fs.local.mtime = mtime_s * NS;
	c.bytes = size > 0 ? size : 0;
	return c;
}

static void
write_file(const char *path, const char *data, size_t len)
{
	FILE	*f;

	if ((f = fopen(path, "wbe")) == NULL ||
	    fwrite(data, 1, len, f) != len || fclose(f) != 0)
		tap_bail("setup failed");
}

static bool
file_equals(const char *path, const char *data, size_t len)
{
	char	 buf[256];
	FILE	*f;
	size_t	 n;

	if ((f = fopen(path, "rbe")) == NULL)
		return false;
	n = fread(buf, 1, sizeof(buf), f);
	(void)fclose(f);
	return n == len && memcmp(buf, data, len) == 0;
}

static bool
exists(const char *path)
{
	struct stat	 sb;

	return stat(path, &sb) == 0;
}

/* Overwrite the b-tree part of page 1 (after the 100-byte header). */
static void
corrupt_page1(const char *path)
{
	char	 junk[400];
	int	 fd;

	memset(junk, 0x5a, sizeof(junk));
	if ((fd = open(path, O_WRONLY | O_CLOEXEC)) == -1 ||
	    pwrite(fd, junk, sizeof(junk), 100) != (ssize_t)sizeof(junk) ||
	    close(fd) == -1)
		tap_bail("setup failed");
}

/* Run SQL on a raw connection to path; abort on error. */
static sqlite3 *
raw_open(const char *path)
{
	sqlite3	*db;

	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE |
	    SQLITE_OPEN_CREATE, NULL) != SQLITE_OK)
		tap_bail("setup failed");
	return db;
}

static void
raw_exec(sqlite3 *db, const char *sql)
{
	char	*msg = NULL;

	if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
		printf("# raw_exec %s: %s\n", sql, msg ? msg : "?");
		tap_bail("setup failed");
	}
}

static void
join(char *buf, size_t sz, const char *dir, const char *name)
{
	if ((size_t)snprintf(buf, sz, "%s/%s", dir, name) >= sz)
		tap_bail("setup failed");
}

static double
now_s(void)
{
	struct timespec	 ts;

	(void)clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void
test_open(const char *dir)
{
	struct manifest		*m = NULL;
	struct seen_list	 sl;
	struct commit_rec	 c;
	char			 p[512], side[600], err[512];
	int			 rc;

	memset(&sl, 0, sizeof(sl));
	join(p, sizeof(p), dir, "missing.db");
	rc = manifest_open(p, false, &m, err, sizeof(err));
	is_int(rc, BM_ENOENT, "create=false on a missing file: BM_ENOENT");
	ok(strstr(err, p) != NULL, "ENOENT message names the path: %s", err);
	ok(!exists(p), "missing file not created");

	join(p, sizeof(p), dir, "a.db");
	rc = manifest_open(p, true, &m, err, sizeof(err));
	is_int(rc, 0, "create a new manifest");
	ok(exists(p), "file exists after create");
	is_str(manifest_errmsg(m), "", "no error text after open");
	c = rec("pub/x", COMMIT_FETCHED, ENTRY_FILE, 10, 1000, MTIME_SECOND);
	is_int(manifest_commit(m, 1, &c, 1), 0, "commit one row");
	manifest_close(m);
	m = NULL;
	manifest_close(NULL);

	rc = manifest_open(p, false, &m, err, sizeof(err));
	is_int(rc, 0, "reopen with create=false");
	is_int(manifest_ls(m, NULL, ls_cb, &sl), 0, "ls after reopen");
	is_int(sl.n, 1, "row kept across reopen");
	if (sl.n == 1)
		is_str(sl.v[0].path, "pub/x", "kept row path");
	seen_reset(&sl);
	manifest_close(m);
	m = NULL;
	rc = manifest_open(p, true, &m, err, sizeof(err));
	is_int(rc, 0, "reopen with create=true keeps the file");
	is_int(manifest_ls(m, "", ls_cb, &sl), 0, "ls again");
	is_int(sl.n, 1, "row still there");
	seen_reset(&sl);
	manifest_close(m);

	/*
	 * An empty file: a new manifest is renamed into place with its
	 * schema, so this one was truncated.  Never started afresh.
	 */
	join(p, sizeof(p), dir, "empty.db");
	write_file(p, "", 0);
	m = NULL;
	rc = manifest_open(p, false, &m, err, sizeof(err));
	is_int(rc, BM_ECORRUPT, "empty file without create: BM_ECORRUPT");
	rc = manifest_open(p, true, &m, err, sizeof(err));
	is_int(rc, BM_ECORRUPT, "empty file with create: BM_ECORRUPT");
	ok(strncmp(err, p, strlen(p)) == 0 &&
	    strstr(err, ": empty (0 bytes)") != NULL, "empty message: %s", err);
	rc = manifest_open_read(p, &m, err, sizeof(err));
	is_int(rc, BM_ECORRUPT, "empty file, read: BM_ECORRUPT");
	ok(file_equals(p, "", 0), "empty file left empty");
	(void)snprintf(side, sizeof(side), "%s-wal", p);
	ok(!exists(side), "no -wal beside the empty file");
}

/*
 * Creation goes through PATH.new: none is left, a stale one (a killed
 * creation) is replaced, and a -wal left without its file is not read
 * into the new one.
 */
static void
test_create(const char *dir)
{
	struct manifest		*m = NULL;
	struct seen_list	 sl;
	char			 p[512], side[600], err[512];

	memset(&sl, 0, sizeof(sl));
	join(p, sizeof(p), dir, "fresh.db");
	(void)snprintf(side, sizeof(side), "%s.new", p);
	write_file(side, "half made", 9);
	(void)snprintf(side, sizeof(side), "%s-wal", p);
	write_file(side, "orphan wal", 10);
	is_int(manifest_open(p, true, &m, err, sizeof(err)), 0,
	    "create over a stale PATH.new and an orphan -wal: %s", err);
	is_int(manifest_ls(m, "", ls_cb, &sl), 0, "ls of the new manifest");
	is_int(sl.n, 0, "new manifest is empty");
	is_int(manifest_fault(m), 0, "no fault after a sound open");
	manifest_close(m);
	m = NULL;
	(void)snprintf(side, sizeof(side), "%s.new", p);
	ok(!exists(side), "no PATH.new left");
	(void)snprintf(side, sizeof(side), "%s.new-journal", p);
	ok(!exists(side), "no PATH.new-journal left");
	is_int(manifest_open(p, false, &m, err, sizeof(err)), 0,
	    "the new manifest reopens");
	manifest_close(m);
}

static void
test_refuse(const char *dir)
{
	static const char garbage[] = "hello, not a database";
	struct manifest		*m = NULL;
	sqlite3			*db;
	char			 p[512], side[600], err[512];
	int			 rc;

	join(p, sizeof(p), dir, "garbage.db");
	write_file(p, garbage, sizeof(garbage) - 1);
	rc = manifest_open(p, true, &m, err, sizeof(err));
	is_int(rc, BM_ECORRUPT, "garbage file: BM_ECORRUPT");
	ok(strncmp(err, p, strlen(p)) == 0 &&
	    strstr(err, "not a database") != NULL,
	    "garbage message is \"PATH: ...not a database\": %s", err);
	ok(file_equals(p, garbage, sizeof(garbage) - 1),
	    "garbage file left byte-for-byte unchanged");
	(void)snprintf(side, sizeof(side), "%s-wal", p);
	ok(!exists(side), "no -wal created beside the garbage");
	(void)snprintf(side, sizeof(side), "%s-journal", p);
	ok(!exists(side), "no -journal created beside the garbage");
	rc = manifest_open(p, false, &m, err, sizeof(err));
	is_int(rc, BM_ECORRUPT, "garbage file, create=false: BM_ECORRUPT");

	join(p, sizeof(p), dir, "other.db");
	db = raw_open(p);
	raw_exec(db, "CREATE TABLE foo(a); INSERT INTO foo VALUES (1);");
	(void)sqlite3_close(db);
	rc = manifest_open(p, true, &m, err, sizeof(err));
	is_int(rc, BM_ECORRUPT, "foreign SQLite database: damaged for us");
	ok(strstr(err, p) != NULL &&
	    strstr(err, "not a biomirror manifest") != NULL,
	    "foreign message: %s", err);
	db = raw_open(p);
	raw_exec(db, "SELECT a FROM foo;");
	(void)sqlite3_close(db);
	ok(1, "foreign database still readable by its owner");

	join(p, sizeof(p), dir, "appid.db");
	db = raw_open(p);
	raw_exec(db, "PRAGMA application_id = 42; PRAGMA user_version = 1;");
	(void)sqlite3_close(db);
	rc = manifest_open(p, true, &m, err, sizeof(err));
	is_int(rc, BM_ECORRUPT, "another application_id: BM_ECORRUPT");
	ok(strstr(err, "0x0000002a") != NULL, "message gives the id: %s", err);

	/* A manifest whose first page is overwritten: corrupt. */
	join(p, sizeof(p), dir, "corrupt.db");
	is_int(manifest_open(p, true, &m, err, sizeof(err)), 0,
	    "create for the corrupt test");
	manifest_close(m);
	m = NULL;
	corrupt_page1(p);
	rc = manifest_open(p, true, &m, err, sizeof(err));
	is_int(rc, BM_ECORRUPT, "corrupt manifest: BM_ECORRUPT");
	ok(strstr(err, p) != NULL && strstr(err, "malformed") != NULL,
	    "corrupt message: %s", err);
	ok(exists(p), "corrupt manifest left in place");

	/* A database without tables (never what a creation leaves). */
	join(p, sizeof(p), dir, "notables.db");
	db = raw_open(p);
	raw_exec(db, "VACUUM;");
	(void)sqlite3_close(db);
	rc = manifest_open(p, true, &m, err, sizeof(err));
	is_int(rc, BM_ECORRUPT, "a database without tables: BM_ECORRUPT");
	ok(strstr(err, "an empty database") != NULL, "no tables message: %s",
	    err);

	join(p, sizeof(p), dir, "newer.db");
	rc = manifest_open(p, true, &m, err, sizeof(err));
	is_int(rc, 0, "create for the newer test");
	manifest_close(m);
	m = NULL;
	db = raw_open(p);
	raw_exec(db, "PRAGMA user_version = 99;");
	(void)sqlite3_close(db);
	rc = manifest_open(p, true, &m, err, sizeof(err));
	is_int(rc, BM_EDB, "newer schema version: BM_EDB");
	ok(strstr(err, p) != NULL && strstr(err, "newer") != NULL,
	    "newer message: %s", err);
	db = raw_open(p);
	raw_exec(db, "SELECT count(*) FROM files;");
	(void)sqlite3_close(db);
	ok(1, "newer manifest left in place");
}

/*
 * A page in the middle overwritten (the events table's root, which ls
 * never reads): open finds it (quick_check), for writers and readers,
 * and leaves the file as it was; manifest_set_aside moves it and its
 * -wal and -shm away, and a new manifest starts at PATH.
 */
/* The newest run's status as the manifest at path reads (read-only). */
static const char *
last_status(const char *path, char *buf, size_t len, char *warn, size_t wlen)
{
	struct manifest		*m = NULL;
	struct run_record	*runs = NULL;
	size_t			 n = 0;
	char			 err[512];

	(void)snprintf(buf, len, "(open failed)");
	if (manifest_open_read(path, &m, err, sizeof(err)) != 0)
		return buf;
	(void)snprintf(warn, wlen, "%s", manifest_warning(m));
	if (manifest_runs(m, 1, &runs, &n) == 0 && n == 1)
		(void)snprintf(buf, len, "%s", runs[0].status);
	free(runs);
	manifest_close(m);
	return buf;
}

/* Read up to len bytes of path into buf; the count, or -1. */
static ssize_t
slurp(const char *path, char *buf, size_t len)
{
	ssize_t	 n;
	int	 fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return -1;
	n = read(fd, buf, len);
	(void)close(fd);
	return n;
}

/* Flip one byte of path at off. */
static void
flip_byte(const char *path, off_t off)
{
	char	 b;
	int	 fd;

	if ((fd = open(path, O_RDWR | O_CLOEXEC)) == -1 ||
	    pread(fd, &b, 1, off) != 1)
		tap_bail("setup failed");
	b ^= 0x55;
	if (pwrite(fd, &b, 1, off) != 1 || close(fd) == -1)
		tap_bail("setup failed");
}

/*
 * A -wal holding a commit (a run's status set to partial) that a bad
 * header or first frame makes unreadable: readers warn and leave it, a
 * writer keeps a copy before SQLite may overwrite it; a sound one is no
 * warning and is read.
 */
static void
test_bad_wal(const char *dir)
{
	struct manifest	*m = NULL;
	sqlite3		*db;
	static char	 good[65536], bad[65536], got[65536];
	char		 p[512], wal[600], copy[700], st[16], warn[2048];
	char		 err[512];
	const char	*c;
	int64_t		 run = 0;
	ssize_t		 n, nb;

	join(p, sizeof(p), dir, "badwal.db");
	(void)snprintf(wal, sizeof(wal), "%s-wal", p);
	is_int(manifest_open(p, true, &m, err, sizeof(err)), 0, "create");
	is_int(manifest_run_begin(m, "sync", NS, &run), 0, "a run");
	manifest_close(m);
	m = NULL;
	db = raw_open(p);
	(void)sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL);
	raw_exec(db, "UPDATE runs SET status = 'partial'");
	(void)sqlite3_close(db);
	n = slurp(wal, good, sizeof(good));
	ok(n > 32 + 24 + 512 && n < (ssize_t)sizeof(good), "a -wal of %zd "
	    "bytes", n);
	memcpy(bad, good, (size_t)n);
	bad[32 + 24 + 40] ^= 0x55;	/* in the first frame's page */
	write_file(wal, bad, (size_t)n);
	is_str(last_status(p, st, sizeof(st), warn, sizeof(warn)), "running",
	    "a bad first frame: the file's state");
	ok(strstr(warn, "-wal: a bad first frame: ") != NULL &&
	    strstr(warn, "it is left as it is") != NULL, "warning: %s", warn);
	nb = slurp(wal, got, sizeof(got));
	ok(nb == n && memcmp(got, bad, (size_t)n) == 0,
	    "a reader leaves that -wal byte for byte");
	flip_byte(wal, 24);		/* the header's checksum */
	(void)last_status(p, st, sizeof(st), warn, sizeof(warn));
	ok(strstr(warn, "-wal: a bad header: ") != NULL, "bad header: %s",
	    warn);
	ok(exists(wal), "still there");
	write_file(wal, good, (size_t)n);
	is_str(last_status(p, st, sizeof(st), warn, sizeof(warn)), "partial",
	    "a sound -wal is read");
	is_str(warn, "", "and is no warning");

	db = raw_open(p);
	(void)sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL);
	raw_exec(db, "UPDATE runs SET status = 'failed'");
	(void)sqlite3_close(db);
	n = slurp(wal, bad, sizeof(bad));
	bad[5] ^= 0x55;			/* the header's version */
	write_file(wal, bad, (size_t)n);
	is_int(manifest_open(p, false, &m, err, sizeof(err)), 0,
	    "a writer opens it: %s", err);
	c = m != NULL ? manifest_warning(m) : NULL;
	if (c == NULL)
		c = "";
	ok(strstr(c, "a copy is kept as ") != NULL, "warning: %s", c);
	(void)snprintf(copy, sizeof(copy), "%s", c[0] != '\0' ?
	    strstr(c, "kept as ") + 8 : "");
	ok(strncmp(copy, wal, strlen(wal)) == 0 &&
	    strncmp(copy + strlen(wal), ".corrupt-", 9) == 0, "copy %s", copy);
	nb = slurp(copy, got, sizeof(got));
	ok(nb == n && memcmp(got, bad, (size_t)n) == 0, "the copy is the -wal");
	manifest_close(m);
	m = NULL;
}

/*
 * Nothing SQLite could open at PATH: a directory, a FIFO, a symlink to
 * nothing (never replaced); tables missing; what a failed open leaves.
 */
static void
test_not_a_file(const char *dir)
{
	struct manifest	*m = NULL;
	struct stat	 sb;
	sqlite3		*db;
	char		 p[512], side[600], to[600], err[512];
	int		 rc;

	join(p, sizeof(p), dir, "isdir.db");
	if (mkdir(p, 0755) == -1)
		tap_bail("setup failed");
	rc = manifest_open(p, true, &m, err, sizeof(err));
	is_int(rc, BM_EDB, "a directory: BM_EDB");
	ok(strncmp(err, p, strlen(p)) == 0 && strstr(err, ": Is a directory")
	    != NULL, "message: %s", err);
	is_int(manifest_open_read(p, &m, err, sizeof(err)), BM_EDB,
	    "a directory, read: BM_EDB");

	join(p, sizeof(p), dir, "fifo.db");
	if (mkfifo(p, 0644) == -1)
		tap_bail("setup failed");
	is_int(manifest_open_read(p, &m, err, sizeof(err)), BM_EDB,
	    "a FIFO: BM_EDB (and no hang)");
	ok(strstr(err, "not a regular file") != NULL, "message: %s", err);

	join(p, sizeof(p), dir, "dangling.db");
	join(to, sizeof(to), dir, "nowhere.db");
	if (symlink(to, p) == -1)
		tap_bail("setup failed");
	is_int(manifest_open(p, true, &m, err, sizeof(err)), BM_EDB,
	    "a symlink to nothing, create: BM_EDB");
	ok(strstr(err, ": a symlink to ") != NULL && strstr(err, to) != NULL &&
	    strstr(err, "No such file") != NULL, "message: %s", err);
	ok(lstat(p, &sb) == 0 && S_ISLNK(sb.st_mode) && !exists(to),
	    "the symlink left, nothing made");
	is_int(manifest_open_read(p, &m, err, sizeof(err)), BM_EDB,
	    "read: BM_EDB, not BM_ENOENT (never run)");

	join(p, sizeof(p), dir, "notable.db");
	is_int(manifest_open(p, true, &m, err, sizeof(err)), 0, "create");
	manifest_close(m);
	m = NULL;
	db = raw_open(p);
	raw_exec(db, "DROP TABLE files");
	(void)sqlite3_close(db);
	rc = manifest_open_read(p, &m, err, sizeof(err));
	is_int(rc, BM_ECORRUPT, "a table dropped: BM_ECORRUPT");
	ok(strstr(err, ": damaged schema: no such table: main.files") != NULL,
	    "message: %s", err);
	(void)snprintf(side, sizeof(side), "%s-wal", p);
	ok(!exists(side), "the failed open left no -wal");
	(void)snprintf(side, sizeof(side), "%s-shm", p);
	ok(!exists(side), "nor a -shm");
}

/* A dry run's manifest in memory; a rebuilt one's run ids carried on. */
static void
test_scratch_and_ids(const char *dir)
{
	struct manifest	*m = NULL;
	char		 p[512], err[512];
	int64_t		 id = -1, n = -1;

	is_int(manifest_open_scratch(&m, err, sizeof(err)), 0, "scratch: %s",
	    err);
	is_int(manifest_file_count(m, &n), 0, "file count");
	is_int(n, 0, "empty");
	is_int(manifest_run_begin(m, "plan", NS, &id), 0, "a run in it");
	ok(!exists(":memory:"), "no file made");
	manifest_close(m);
	m = NULL;

	join(p, sizeof(p), dir, "ids.db");
	is_int(manifest_open(p, true, &m, err, sizeof(err)), 0, "create");
	manifest_run_ids_from(m, 42);
	is_int(manifest_run_begin(m, "resync", NS, &id), 0, "run");
	is_int(id, 42, "the first run carries on from 42");
	is_int(manifest_run_begin(m, "sync", NS, &id), 0, "run");
	is_int(id, 43, "then 43");
	manifest_close(m);
	m = NULL;
	corrupt_page1(p);
	id = 0;
	is_int(manifest_peek_last_run(p, &id), BM_ECORRUPT,
	    "page 1 damaged: no last run");
}

static void
test_damaged(const char *dir)
{
	struct manifest		*m = NULL;
	struct commit_rec	 c;
	sqlite3			*db;
	sqlite3_stmt		*st;
	char			 p[512], side[600], kept[600], kept2[600];
	char			 err[512], junk[4096];
	int64_t			 run = 0;
	int			 fd, root = 0, rc;

	join(p, sizeof(p), dir, "damaged.db");
	is_int(manifest_open(p, true, &m, err, sizeof(err)), 0,
	    "create for the damaged test");
	is_int(manifest_run_begin(m, "sync", NS, &run), 0, "a run");
	c = rec("a", COMMIT_FETCHED, ENTRY_FILE, 1, NS, MTIME_SECOND);
	is_int(manifest_commit(m, run, &c, 1), 0, "a commit with an event");
	manifest_close(m);
	m = NULL;
	db = raw_open(p);
	if (sqlite3_prepare_v2(db, "SELECT rootpage FROM sqlite_master "
	    "WHERE name = 'events'", -1, &st, NULL) != SQLITE_OK ||
	    sqlite3_step(st) != SQLITE_ROW)
		tap_bail("setup failed");
	root = sqlite3_column_int(st, 0);
	(void)sqlite3_finalize(st);
	(void)sqlite3_close(db);
	ok(root > 1, "events root page %d", root);
	memset(junk, 0x5a, sizeof(junk));
	if ((fd = open(p, O_WRONLY | O_CLOEXEC)) == -1 ||
	    pwrite(fd, junk, sizeof(junk), (off_t)(root - 1) * 4096) !=
	    (ssize_t)sizeof(junk) || close(fd) == -1)
		tap_bail("setup failed");
	rc = manifest_open(p, true, &m, err, sizeof(err));
	is_int(rc, BM_ECORRUPT, "a damaged page: BM_ECORRUPT");
	ok(strncmp(err, p, strlen(p)) == 0 && strstr(err, ": quick_check: ")
	    != NULL && strchr(err, '\n') == NULL, "one-line message: %s", err);
	rc = manifest_open_read(p, &m, err, sizeof(err));
	is_int(rc, BM_ECORRUPT, "a damaged page, read: BM_ECORRUPT");
	(void)snprintf(side, sizeof(side), "%s-shm", p);
	ok(!exists(side), "the failed opens left no -shm");
	is_int(manifest_peek_last_run(p, &run), 0, "its runs can be read");
	is_int(run, 1, "last run 1");

	(void)snprintf(side, sizeof(side), "%s-wal", p);
	write_file(side, "wal", 3);
	rc = manifest_open(p, false, &m, err, sizeof(err));
	is_int(rc, BM_ECORRUPT, "damaged with a -wal: BM_ECORRUPT");
	ok(file_equals(side, "wal", 3), "a failed open keeps the -wal");
	is_int(manifest_set_aside(p, kept, sizeof(kept), err, sizeof(err)), 0,
	    "set aside: %s", err);
	ok(strncmp(kept, p, strlen(p)) == 0 &&
	    strncmp(kept + strlen(p), ".corrupt-", 9) == 0 &&
	    kept[strlen(kept) - 1] == 'Z', "kept as %s", kept);
	ok(!exists(p) && !exists(side), "PATH and PATH-wal moved");
	ok((size_t)snprintf(side, sizeof(side), "%s-wal", kept) <
	    sizeof(side) && file_equals(side, "wal", 3),
	    "the -wal kept beside it");
	is_int(manifest_open(p, true, &m, err, sizeof(err)), 0,
	    "a new manifest at PATH");
	manifest_close(m);
	m = NULL;
	is_int(manifest_set_aside(p, kept2, sizeof(kept2), err, sizeof(err)),
	    0, "set aside again");
	ok(strcmp(kept, kept2) != 0 && exists(kept) && exists(kept2),
	    "a second one kept under another name: %s", kept2);
	is_int(manifest_set_aside(p, kept2, sizeof(kept2), err, sizeof(err)),
	    BM_EIO, "nothing to set aside: BM_EIO");
	ok(strstr(err, "No such file") != NULL, "message: %s", err);
}

static void
test_locked(const char *dir)
{
	struct manifest		*m = NULL;
	struct seen_list	 sl;
	struct commit_rec	 c[2];
	struct listing		*l;
	sqlite3			*db;
	char			 p[512], err[512];
	double			 t0;
	int			 rc;

	memset(&sl, 0, sizeof(sl));
	join(p, sizeof(p), dir, "locked.db");
	is_int(manifest_open(p, true, &m, err, sizeof(err)), 0,
	    "create for the lock tests");
	manifest_close(m);
	m = NULL;

	/* A connection holding the file exclusively blocks even readers. */
	db = raw_open(p);
	raw_exec(db, "PRAGMA locking_mode = EXCLUSIVE; BEGIN EXCLUSIVE;"
	    " INSERT INTO runs (command, start_ns, status)"
	    " VALUES ('x', 0, 'running');");
	t0 = now_s();
	rc = manifest_open(p, true, &m, err, sizeof(err));
	is_int(rc, BM_EDB, "exclusively locked manifest: BM_EDB");
	ok(strstr(err, p) != NULL && strstr(err, "locked") != NULL,
	    "locked message: %s", err);
	printf("# open gave up after %.2f s (busy timeout 5 s)\n",
	    now_s() - t0);
	ok(now_s() - t0 >= 4.5, "open waited for the busy timeout");
	raw_exec(db, "ROLLBACK;");
	(void)sqlite3_close(db);

	/* Under WAL a writer does not block open, but blocks commits. */
	is_int(manifest_open(p, false, &m, err, sizeof(err)), 0,
	    "open while unlocked");
	is_int(manifest_set_busy_timeout(m, 100), 0, "short busy timeout");
	db = raw_open(p);
	raw_exec(db, "BEGIN IMMEDIATE;");
	c[0] = rec("a", COMMIT_FETCHED, ENTRY_FILE, 1, 1, MTIME_SECOND);
	c[1] = rec("b", COMMIT_FETCHED, ENTRY_FILE, 2, 2, MTIME_SECOND);
	if ((l = listing_new(4)) == NULL)
		tap_bail("setup failed");
	add(l, "a", ENTRY_FILE, 1, true, 1, MTIME_SECOND, NULL);
	is_int(manifest_stage(m, l), 0, "stage works under a writer (TEMP)");
	is_int(manifest_diff(m, diff_cb, &sl), 0, "diff reads under a writer");
	is_int(sl.n, 1, "diff row under a writer");
	seen_reset(&sl);
	listing_free(l);
	rc = manifest_commit(m, 1, c, 2);
	is_int(rc, BM_EDB, "commit while another writer holds the lock");
	ok(strstr(manifest_errmsg(m), p) != NULL &&
	    strstr(manifest_errmsg(m), "locked") != NULL,
	    "commit lock message: %s", manifest_errmsg(m));
	raw_exec(db, "ROLLBACK;");
	(void)sqlite3_close(db);
	is_int(manifest_ls(m, NULL, ls_cb, &sl), 0, "ls after failed commit");
	is_int(sl.n, 0, "nothing of the failed batch recorded");
	seen_reset(&sl);
	is_int(manifest_commit(m, 1, c, 2), 0, "commit after release");
	is_int(manifest_ls(m, NULL, ls_cb, &sl), 0, "ls after commit");
	is_int(sl.n, 2, "whole batch recorded");
	seen_reset(&sl);
	manifest_close(m);
}

static void
test_no_reprepare(const char *dir)
{
	struct manifest		*m = NULL;
	struct listing		*l;
	struct run_record	 r;
	struct run_record	*runs = NULL;
	char			 p[512], err[512];
	size_t			 n = 0;
	int64_t			 id = 0, count = -1;

	join(p, sizeof(p), dir, "reprep.db");
	is_int(manifest_open(p, true, &m, err, sizeof(err)), 0, "create");
	manifest_close(m);
	m = NULL;
	/* A no-change sync's statements, on a reopened (existing) file. */
	is_int(manifest_open(p, false, &m, err, sizeof(err)), 0, "reopen");
	if ((l = listing_new(10)) == NULL)
		tap_bail("setup failed");
	add(l, "f", ENTRY_FILE, 1, true, 5000, MTIME_SECOND, NULL);
	memset(&r, 0, sizeof(r));
	ok(manifest_run_begin(m, "sync", NS, &id) == 0 &&
	    manifest_stage(m, l) == 0 && manifest_file_count(m, &count) == 0 &&
	    manifest_runs(m, 5, &runs, &n) == 0, "a run's statements");
	r.id = id;
	(void)snprintf(r.status, sizeof(r.status), "ok");
	is_int(manifest_run_end(m, &r), 0, "its end");
	is_int(manifest_reprepares(m), 0,
	    "no statement compiled twice (prepared after the open's last "
	    "connection flag change)");
	free(runs);
	listing_free(l);
	manifest_close(m);
	m = NULL;
	is_int(manifest_open_read(p, &m, err, sizeof(err)), 0, "a reader");
	ok(manifest_runs(m, 5, &runs, &n) == 0 && n == 1, "its runs");
	is_int(manifest_reprepares(m), 0, "... none compiled twice either");
	free(runs);
	manifest_close(m);
}

static void
test_diff(const char *dir)
{
	struct manifest		*m = NULL;
	struct listing		*l;
	struct seen_list	 sl;
	struct seen		*s;
	struct commit_rec	 c[14];
	char			 p[512], err[512];
	size_t			 i;
	int64_t			 count = -1;

	memset(&sl, 0, sizeof(sl));
	join(p, sizeof(p), dir, "diff.db");
	is_int(manifest_open(p, true, &m, err, sizeof(err)), 0, "open diff.db");
	i = 0;
	c[i++] = rec("same", COMMIT_FETCHED, ENTRY_FILE, 100, 5000,
	    MTIME_SECOND);
	c[i++] = rec("size", COMMIT_FETCHED, ENTRY_FILE, 100, 5000,
	    MTIME_SECOND);
	c[i++] = rec("mtime", COMMIT_FETCHED, ENTRY_FILE, 100, 5000,
	    MTIME_SECOND);
	c[i++] = rec("prec", COMMIT_FETCHED, ENTRY_FILE, 100, 5040,
	    MTIME_MINUTE);
	c[i] = rec("inexact", COMMIT_FETCHED, ENTRY_FILE, 1536, 5040,
	    MTIME_MINUTE);
	c[i].fs.listed.size_exact = false;
	c[i++].fs.upstream.size = 1500;
	c[i] = rec("unknown", COMMIT_FETCHED, ENTRY_FILE, 7, 60, MTIME_SECOND);
	c[i++].etag = "\"abc\"";
	c[i++] = rec("typechg", COMMIT_FETCHED, ENTRY_FILE, 3, 60,
	    MTIME_SECOND);
	c[i++] = rec("gone", COMMIT_FETCHED, ENTRY_FILE, 3, 60, MTIME_SECOND);
	c[i] = rec("link", COMMIT_SYMLINK, ENTRY_SYMLINK, -1, 60,
	    MTIME_SECOND);
	c[i++].target = "old";
	c[i] = rec("linksame", COMMIT_SYMLINK, ENTRY_SYMLINK, -1, 60,
	    MTIME_SECOND);
	c[i++].target = "t";
	c[i++] = rec("dir", COMMIT_MKDIR, ENTRY_DIR, -1, 60, MTIME_SECOND);
	/* A listed 0 recorded as exact (before issue 22 made it a hint). */
	c[i++] = rec("zero", COMMIT_FETCHED, ENTRY_FILE, 0, 5040,
	    MTIME_MINUTE);
	c[i++] = rec("zerot", COMMIT_FETCHED, ENTRY_FILE, 0, 5040,
	    MTIME_MINUTE);
	is_int(manifest_commit(m, 1, c, i), 0, "commit the baseline");
	is_int(manifest_file_count(m, &count), 0, "file count");
	is_int(count, 10, "10 committed files (links and dirs not counted)");

	if ((l = listing_new(100)) == NULL)
		tap_bail("setup failed");
	add(l, "same", ENTRY_FILE, 100, true, 5000, MTIME_SECOND, NULL);
	add(l, "size", ENTRY_FILE, 101, true, 5000, MTIME_SECOND, NULL);
	add(l, "mtime", ENTRY_FILE, 100, true, 5001, MTIME_SECOND, NULL);
	add(l, "prec", ENTRY_FILE, 100, true, 5040, MTIME_SECOND, NULL);
	add(l, "inexact", ENTRY_FILE, 1536, false, 5040, MTIME_MINUTE, NULL);
	add(l, "unknown", ENTRY_FILE, -1, false, 0, MTIME_UNKNOWN, NULL);
	add(l, "typechg", ENTRY_DIR, -1, false, 60, MTIME_SECOND, NULL);
	add(l, "new", ENTRY_FILE, 1, true, 60, MTIME_SECOND, NULL);
	add(l, "link", ENTRY_SYMLINK, -1, false, 60, MTIME_SECOND, "new");
	add(l, "linksame", ENTRY_SYMLINK, -1, false, 60, MTIME_SECOND, "t");
	add(l, "dir", ENTRY_DIR, -1, false, 60, MTIME_SECOND, NULL);
	add(l, "newunknown", ENTRY_FILE, -1, false, 0, MTIME_UNKNOWN, NULL);
	add(l, "zero", ENTRY_FILE, -1, false, 5040, MTIME_MINUTE, NULL);
	add(l, "zerot", ENTRY_FILE, -1, false, 5100, MTIME_MINUTE, NULL);
	add(l, "same", ENTRY_FILE, 999, true, 1, MTIME_SECOND, NULL);
	is_int(manifest_stage(m, l), 0, "stage the listing (with a dup)");
	is_int(manifest_diff(m, diff_cb, &sl), 0, "diff");
	is_int(sl.n, 15, "14 staged rows + 1 gone");
	for (i = 0; i + 1 < sl.n && i < 13; i++)
		ok(strcmp(sl.v[i].path, sl.v[i + 1].path) < 0,
		    "staged rows in path order: %s < %s", sl.v[i].path,
		    sl.v[i + 1].path);
	if (sl.n == 15)
		is_str(sl.v[14].path, "gone", "gone row comes last");
#define KIND(path, k) do {						\
	s = seen_find(&sl, path);					\
	ok(s != NULL && s->kind == k, "%s is %s (got %d)", path, #k,	\
	    s != NULL ? (int)s->kind : -1);				\
} while (0)
	KIND("same", DIFF_SAME);
	KIND("size", DIFF_CHANGED);
	KIND("mtime", DIFF_CHANGED);
	/* 5040 to the minute, then to the second: the same (issue 22). */
	KIND("prec", DIFF_SAME);
	KIND("inexact", DIFF_SAME);
	KIND("unknown", DIFF_UNKNOWN);
	KIND("typechg", DIFF_CHANGED);
	KIND("new", DIFF_NEW);
	KIND("newunknown", DIFF_NEW);
	KIND("link", DIFF_CHANGED);
	KIND("linksame", DIFF_SAME);
	KIND("dir", DIFF_SAME);
	KIND("gone", DIFF_GONE);
	/* A size that became unknown: the listed time decides. */
	KIND("zero", DIFF_SAME);
	KIND("zerot", DIFF_CHANGED);
#undef KIND
	if ((s = seen_find(&sl, "same")) != NULL) {
		is_int(s->fs.listed.size, 100, "first of duplicate paths staged");
		ok(s->recorded, "same is recorded");
	}
	if ((s = seen_find(&sl, "new")) != NULL) {
		ok(!s->recorded, "new is not recorded");
		is_int(s->fs.upstream.size, -1, "new: up_size -1");
		is_int(s->fs.local.mtime, -1, "new: local_mtime -1");
		ok(s->etag == NULL, "new: no etag");
	}
	if ((s = seen_find(&sl, "unknown")) != NULL) {
		is_int(s->fs.listed.size, -1, "unknown: staged size -1");
		is_int(s->fs.listed.mtime, 0, "unknown: staged mtime 0");
		is_int(s->fs.listed.prec, MTIME_UNKNOWN, "unknown: prec 0");
		is_int(s->fs.upstream.size, 7, "unknown: recorded up_size");
		is_int(s->fs.upstream.mtime, 60 * NS, "unknown: recorded up_mtime");
		is_str(s->etag, "\"abc\"", "unknown: recorded etag");
		is_int(s->fs.local.size, 7, "unknown: recorded local_size");
	}
	if ((s = seen_find(&sl, "inexact")) != NULL)
		is_int(s->fs.upstream.size, 1500, "inexact: up_size from the GET");
	if ((s = seen_find(&sl, "link")) != NULL)
		is_str(s->target, "new", "link: staged target");
	if ((s = seen_find(&sl, "gone")) != NULL) {
		is_int(s->type, ENTRY_FILE, "gone: recorded type");
		is_int(s->fs.listed.size, 3, "gone: recorded list_size");
		ok(s->recorded, "gone: recorded");
	}
	if ((s = seen_find(&sl, "typechg")) != NULL)
		is_int(s->type, ENTRY_DIR, "typechg: listed type");
	seen_reset(&sl);

	sl.stop_at = 3;
	is_int(manifest_diff(m, diff_cb, &sl), 7,
	    "callback's non-zero value stops the walk");
	is_int(sl.n, 3, "walk stopped after 3 rows");
	seen_reset(&sl);
	is_int(manifest_diff(m, diff_cb, &sl), 0, "diff again after a stop");
	is_int(sl.n, 15, "statements were reset: all rows again");
	seen_reset(&sl);

	/* A diff writes nothing: seen_run stays the run that recorded. */
	is_int(manifest_ls(m, NULL, ls_cb, &sl), 0, "ls for seen_run");
	if ((s = seen_find(&sl, "same")) != NULL)
		is_int(s->seen_run, 1, "unchanged row keeps seen_run 1");
	if ((s = seen_find(&sl, "gone")) != NULL)
		is_int(s->seen_run, 1, "unstaged row keeps seen_run 1");
	seen_reset(&sl);

	/* An empty listing: everything is gone. */
	listing_free(l);
	if ((l = listing_new(1)) == NULL)
		tap_bail("setup failed");
	is_int(manifest_stage(m, l), 0, "stage an empty listing");
	is_int(manifest_diff(m, diff_cb, &sl), 0, "diff of empty listing");
	is_int(sl.n, 13, "every committed row is gone");
	for (i = 0; i < sl.n; i++)
		if (sl.v[i].kind != DIFF_GONE)
			break;
	is_int(i, sl.n, "all rows DIFF_GONE");
	seen_reset(&sl);
	listing_free(l);
	manifest_close(m);
}

static void
test_bytes_and_ls(const char *dir)
{
	static const char cafe[] = "caf\xe9";
	static const char cafe_sub[] = "d/caf\xe9/\xff\xfe";
	struct manifest		*m = NULL;
	struct listing		*l;
	struct seen_list	 sl;
	struct commit_rec	 c[8];
	char			 p[512], err[512];
	size_t			 i;

	memset(&sl, 0, sizeof(sl));
	join(p, sizeof(p), dir, "bytes.db");
	is_int(manifest_open(p, true, &m, err, sizeof(err)), 0,
	    "open bytes.db");
	if ((l = listing_new(10)) == NULL)
		tap_bail("setup failed");
	add(l, cafe, ENTRY_FILE, 4, true, 10, MTIME_SECOND, NULL);
	is_int(manifest_stage(m, l), 0, "stage a non-UTF-8 path");
	is_int(manifest_diff(m, diff_cb, &sl), 0, "diff it");
	is_int(sl.n, 1, "one row");
	if (sl.n == 1) {
		is_int(sl.v[0].pathlen, 4, "diff pathlen is 4 bytes");
		ok(memcmp(sl.v[0].path, cafe, 5) == 0,
		    "diff path bytes exact incl. NUL");
		is_int(sl.v[0].kind, DIFF_NEW, "non-UTF-8 path is new");
	}
	seen_reset(&sl);

	i = 0;
	c[i++] = rec(cafe, COMMIT_FETCHED, ENTRY_FILE, 4, 10, MTIME_SECOND);
	c[i++] = rec(cafe_sub, COMMIT_FETCHED, ENTRY_FILE, 1, 10,
	    MTIME_SECOND);
	c[i++] = rec("a", COMMIT_MKDIR, ENTRY_DIR, -1, 10, MTIME_SECOND);
	c[i++] = rec("a/x", COMMIT_FETCHED, ENTRY_FILE, 1, 10, MTIME_SECOND);
	c[i++] = rec("a/y/z", COMMIT_FETCHED, ENTRY_FILE, 1, 10,
	    MTIME_SECOND);
	c[i++] = rec("a.txt", COMMIT_FETCHED, ENTRY_FILE, 1, 10, MTIME_SECOND);
	c[i++] = rec("ab", COMMIT_FETCHED, ENTRY_FILE, 1, 10, MTIME_SECOND);
	c[i++] = rec("a0", COMMIT_FETCHED, ENTRY_FILE, 1, 10, MTIME_SECOND);
	is_int(manifest_commit(m, 1, c, i), 0, "commit byte paths");
	is_int(manifest_diff(m, diff_cb, &sl), 0, "diff after commit");
	if ((sl.n > 0))
		is_int(sl.v[0].kind, DIFF_SAME, "non-UTF-8 path now same");
	seen_reset(&sl);

	is_int(manifest_ls(m, "a", ls_cb, &sl), 0, "ls a");
	is_int(sl.n, 3, "ls a: a, a/x, a/y/z");
	if (sl.n == 3) {
		is_str(sl.v[0].path, "a", "ls a [0]");
		is_str(sl.v[1].path, "a/x", "ls a [1]");
		is_str(sl.v[2].path, "a/y/z", "ls a [2]");
		is_int(sl.v[0].type, ENTRY_DIR, "a is a directory");
	}
	seen_reset(&sl);
	is_int(manifest_ls(m, "a/", ls_cb, &sl), 0, "ls a/");
	is_int(sl.n, 3, "trailing slash ignored");
	seen_reset(&sl);
	is_int(manifest_ls(m, "d/caf\xe9", ls_cb, &sl), 0, "ls non-UTF-8 dir");
	is_int(sl.n, 1, "one row under d/caf\\xe9");
	if (sl.n == 1) {
		is_int(sl.v[0].pathlen, strlen(cafe_sub), "ls pathlen");
		ok(memcmp(sl.v[0].path, cafe_sub, sizeof(cafe_sub)) == 0,
		    "ls path bytes exact");
	}
	seen_reset(&sl);
	is_int(manifest_ls(m, "nothing", ls_cb, &sl), 0, "ls of no match");
	is_int(sl.n, 0, "no rows");
	seen_reset(&sl);
	is_int(manifest_ls(m, NULL, ls_cb, &sl), 0, "ls all");
	is_int(sl.n, 8, "all 8 rows");
	if (sl.n == 8) {
		is_str(sl.v[0].path, "a", "memcmp order [0]");
		is_str(sl.v[1].path, "a.txt", "memcmp order [1]");
		is_str(sl.v[2].path, "a/x", "memcmp order [2]");
		is_str(sl.v[4].path, "a0", "memcmp order [4]");
		ok(memcmp(sl.v[6].path, cafe, 5) == 0,
		    "memcmp order [6] caf\\xe9");
	}
	seen_reset(&sl);

	is_int(manifest_events(m, 1, ev_cb, &sl), 0, "events of run 1");
	is_int(sl.n, 8, "one event per record");
	if (sl.n > 0)
		ok(memcmp(sl.v[0].path, cafe, 5) == 0,
		    "event path bytes exact");
	seen_reset(&sl);
	listing_free(l);
	manifest_close(m);
}

static void
test_commit_ops(const char *dir)
{
	struct manifest		*m = NULL;
	struct seen_list	 sl;
	struct seen		*s;
	struct commit_rec	 c[8];
	char			 p[512], err[512];
	size_t			 i;
	int64_t			 t0;
	struct timespec		 ts;

	memset(&sl, 0, sizeof(sl));
	join(p, sizeof(p), dir, "ops.db");
	is_int(manifest_open(p, true, &m, err, sizeof(err)), 0, "open ops.db");
	i = 0;
	c[i] = rec("f", COMMIT_FETCHED, ENTRY_FILE, 100, 1000, MTIME_SECOND);
	c[i++].etag = "\"e1\"";
	c[i] = rec("nm", COMMIT_FETCHED, ENTRY_FILE, 100, 1000, MTIME_SECOND);
	c[i++].etag = "\"e2\"";
	c[i++] = rec("t", COMMIT_FETCHED, ENTRY_FILE, 100, 1000, MTIME_SECOND);
	c[i++] = rec("fail", COMMIT_FETCHED, ENTRY_FILE, 100, 1000,
	    MTIME_SECOND);
	c[i++] = rec("van", COMMIT_FETCHED, ENTRY_FILE, 100, 1000,
	    MTIME_SECOND);
	c[i++] = rec("del", COMMIT_FETCHED, ENTRY_FILE, 100, 1000,
	    MTIME_SECOND);
	is_int(manifest_commit(m, 1, c, i), 0, "commit run 1");

	(void)clock_gettime(CLOCK_REALTIME, &ts);
	t0 = (int64_t)ts.tv_sec * NS + ts.tv_nsec;
	i = 0;
	c[i] = rec("f", COMMIT_FETCHED, ENTRY_FILE, 200, 2000, MTIME_SECOND);
	c[i++].etag = NULL;
	c[i] = rec("nm", COMMIT_NOT_MODIFIED, ENTRY_FILE, 100, 1060,
	    MTIME_MINUTE);
	c[i].fs.upstream.size = -1;
	c[i].fs.upstream.mtime = -1;
	c[i].fs.local.size = -1;
	c[i].fs.local.mtime = -1;
	c[i++].etag = NULL;
	c[i] = rec("t", COMMIT_TOUCHED, ENTRY_FILE, 555, 3000, MTIME_SECOND);
	c[i].fs.local.size = -1;
	c[i++].fs.local.mtime = 3000 * NS;
	c[i] = rec("fail", COMMIT_FAILED, ENTRY_FILE, 999, 9999, MTIME_SECOND);
	c[i].bytes = 12;
	c[i++].reason = "size or checksum mismatch";
	c[i] = rec("van", COMMIT_VANISHED, ENTRY_FILE, 999, 9999,
	    MTIME_SECOND);
	c[i++].reason = "not found";
	c[i++] = rec("del", COMMIT_DELETED, ENTRY_FILE, 0, 0, MTIME_UNKNOWN);
	c[i++] = rec("notthere", COMMIT_TOUCHED, ENTRY_FILE, 1, 1,
	    MTIME_SECOND);
	is_int(manifest_commit(m, 2, c, i), 0, "commit run 2");

	is_int(manifest_ls(m, NULL, ls_cb, &sl), 0, "ls after run 2");
	is_int(sl.n, 5, "del removed, notthere not created");
	ok(seen_find(&sl, "del") == NULL, "deleted row is gone");
	ok(seen_find(&sl, "notthere") == NULL, "touch of no row is a no-op");
	if ((s = seen_find(&sl, "f")) != NULL) {
		is_int(s->fs.listed.size, 200, "fetched: list_size updated");
		is_int(s->fs.listed.mtime, 2000 * NS, "fetched: list_mtime");
		is_int(s->fs.upstream.size, 200, "fetched: up_size");
		is_int(s->fs.local.size, 200, "fetched: local_size");
		ok(s->etag == NULL, "fetched without ETag clears the old one");
		is_int(s->fetched_run, 2, "fetched: fetched_run = 2");
		is_int(s->seen_run, 2, "fetched: seen_run = 2");
	}
	if ((s = seen_find(&sl, "nm")) != NULL) {
		is_int(s->fs.listed.mtime, 1060 * NS, "not-modified: list_mtime");
		is_int(s->fs.listed.prec, MTIME_MINUTE, "not-modified: list_prec");
		is_int(s->fs.upstream.size, 100, "not-modified: up_size kept");
		is_int(s->fs.upstream.mtime, 1000 * NS, "not-modified: up_mtime kept");
		is_str(s->etag, "\"e2\"", "not-modified: etag kept");
		is_int(s->fs.local.mtime, 1000 * NS, "not-modified: local kept");
		is_int(s->fetched_run, 1, "not-modified: fetched_run kept");
		is_int(s->seen_run, 2, "not-modified: seen_run = 2");
	}
	if ((s = seen_find(&sl, "t")) != NULL) {
		is_int(s->fs.local.mtime, 3000 * NS, "touched: local_mtime set");
		is_int(s->fs.local.size, 100, "touched: local_size kept");
		is_int(s->fs.listed.size, 100, "touched: list_size untouched");
		is_int(s->fs.listed.mtime, 1000 * NS, "touched: list_mtime kept");
		is_int(s->seen_run, 2, "touched: seen_run = 2");
		is_int(s->fetched_run, 1, "touched: fetched_run kept");
	}
	if ((s = seen_find(&sl, "fail")) != NULL) {
		is_int(s->fs.listed.size, 100, "failed: old list_size kept");
		is_int(s->fs.listed.mtime, 1000 * NS, "failed: old list_mtime kept");
		is_int(s->seen_run, 1, "failed: seen_run unchanged");
	}
	if ((s = seen_find(&sl, "van")) != NULL)
		is_int(s->fs.listed.size, 100, "vanished: row kept unchanged");
	seen_reset(&sl);

	is_int(manifest_events(m, 2, ev_cb, &sl), 0, "events of run 2");
	is_int(sl.n, 7, "7 events in run 2");
	if (sl.n == 7) {
		is_str(sl.v[0].op, "fetched", "event 1 op");
		is_str(sl.v[1].op, "not-modified", "event 2 op");
		is_str(sl.v[2].op, "touched", "event 3 op");
		is_str(sl.v[3].op, "failed", "event 4 op");
		is_str(sl.v[3].path, "fail", "event 4 path");
		is_str(sl.v[3].reason, "size or checksum mismatch",
		    "event 4 reason");
		is_int(sl.v[3].bytes, 12, "event 4 bytes");
		is_int(sl.v[3].seen_run, 2, "event 4 run");
		is_str(sl.v[4].op, "vanished", "event 5 op");
		is_str(sl.v[5].op, "deleted", "event 6 op");
		ok(sl.v[5].reason == NULL, "event 6 without reason");
		is_str(sl.v[6].path, "notthere", "event 7 path");
		ok(sl.v[0].time_ns >= t0 && sl.v[0].time_ns < t0 + 60 * NS,
		    "event time is now (CLOCK_REALTIME ns)");
	}
	seen_reset(&sl);
	is_int(manifest_events(m, 1, ev_cb, &sl), 0, "events of run 1");
	is_int(sl.n, 6, "run 1 events separate");
	seen_reset(&sl);
	is_int(manifest_events(m, 9, ev_cb, &sl), 0, "events of no run");
	is_int(sl.n, 0, "none");
	seen_reset(&sl);

	/*
	 * DIGEST (resync --checksum) sets a missing checksum and nothing
	 * else; a recorded one stays; no row: a no-op; no checksum: EINVAL.
	 */
	i = 0;
	c[i] = rec("t", COMMIT_DIGEST, ENTRY_FILE, 9, 9, MTIME_SECOND);
	c[i++].checksum = "sha256:aa";
	c[i] = rec("nothere", COMMIT_DIGEST, ENTRY_FILE, 9, 9, MTIME_SECOND);
	c[i++].checksum = "sha256:cc";
	is_int(manifest_commit(m, 3, c, i), 0, "commit digests");
	c[0].checksum = "sha256:bb";
	is_int(manifest_commit(m, 4, c, 1), 0, "commit another digest");
	c[0].checksum = NULL;
	is_int(manifest_commit(m, 4, c, 1), BM_EINVAL, "digest without one");
	is_int(manifest_ls(m, NULL, ls_cb, &sl), 0, "ls after digests");
	is_int(sl.n, 5, "no row created by a digest");
	if ((s = seen_find(&sl, "t")) != NULL) {
		is_str(s->checksum, "sha256:aa", "digest: the first one kept");
		is_int(s->fs.local.mtime, 3000 * NS, "digest: local_mtime kept");
		is_int(s->fs.listed.size, 100, "digest: list_size kept");
		is_int(s->seen_run, 2, "digest: seen_run kept");
	}
	if ((s = seen_find(&sl, "f")) != NULL)
		ok(s->checksum == NULL, "digest of another row: none here");
	seen_reset(&sl);
	is_int(manifest_events(m, 3, ev_cb, &sl), 0, "events of run 3");
	is_int(sl.n, 2, "one event per digest record");
	if (sl.n == 2)
		is_str(sl.v[0].op, "digest", "event op digest");
	seen_reset(&sl);

	/* A bad record rejects the whole batch. */
	c[0] = rec("x", COMMIT_FETCHED, ENTRY_FILE, 1, 1, MTIME_SECOND);
	c[1] = rec("y", (enum commit_op)42, ENTRY_FILE, 1, 1, MTIME_SECOND);
	is_int(manifest_commit(m, 3, c, 2), BM_EINVAL, "unknown op: EINVAL");
	is_int(manifest_ls(m, "x", ls_cb, &sl), 0, "ls x");
	is_int(sl.n, 0, "nothing of the bad batch");
	seen_reset(&sl);
	manifest_close(m);
}

static void
test_runs(const char *dir)
{
	struct manifest		*m = NULL;
	struct run_record	 r, *v = NULL;
	size_t			 n = 99;
	int64_t			 id1 = 0, id2 = 0, id3 = 0;
	char			 p[512], err[512];

	join(p, sizeof(p), dir, "runs.db");
	is_int(manifest_open(p, true, &m, err, sizeof(err)), 0, "open runs.db");
	is_int(manifest_last_success(m, &r), BM_ENOENT,
	    "no successful run yet: BM_ENOENT");
	is_int(manifest_runs(m, 10, &v, &n), 0, "runs of an empty manifest");
	is_int(n, 0, "zero runs");
	free(v);
	v = NULL;

	is_int(manifest_run_begin(m, "sync", 1000, &id1), 0, "begin run 1");
	memset(&r, 0, sizeof(r));
	r.id = id1;
	r.end_ns = 2000;
	(void)snprintf(r.status, sizeof(r.status), "ok");
	r.listed = 10;
	r.fetched = 3;
	r.touched = 2;
	r.deleted = 1;
	r.failed = 0;
	r.bytes = 12345;
	is_int(manifest_run_end(m, &r), 0, "end run 1");
	is_int(manifest_run_begin(m, "plan", 3000, &id2), 0, "begin run 2");
	r.id = id2;
	(void)snprintf(r.status, sizeof(r.status), "failed");
	(void)snprintf(r.error, sizeof(r.error), "listing failed");
	is_int(manifest_run_end(m, &r), 0, "end run 2");
	is_int(manifest_run_begin(m, "resync", 4000, &id3), 0, "begin run 3");
	ok(id1 < id2 && id2 < id3, "run ids increase");
	r.id = 9999;
	is_int(manifest_run_end(m, &r), BM_ENOENT, "end of unknown run");

	is_int(manifest_runs(m, 2, &v, &n), 0, "newest 2 runs");
	is_int(n, 2, "2 runs returned");
	if (n == 2) {
		is_int(v[0].id, id3, "newest first");
		is_str(v[0].status, "running", "run 3 still running");
		is_str(v[0].command, "resync", "run 3 command");
		is_int(v[0].end_ns, 0, "running: end_ns 0");
		is_int(v[0].start_ns, 4000, "run 3 start");
		is_int(v[1].id, id2, "then run 2");
		is_str(v[1].error, "listing failed", "run 2 error");
		is_str(v[1].status, "failed", "run 2 status");
	}
	free(v);
	v = NULL;
	is_int(manifest_runs(m, 0, &v, &n), 0, "max 0");
	is_int(n, 0, "max 0 gives none");
	free(v);
	v = NULL;

	is_int(manifest_last_success(m, &r), 0, "last success");
	is_int(r.id, id1, "last success is run 1");
	is_str(r.command, "sync", "its command");
	is_int(r.listed, 10, "listed");
	is_int(r.fetched, 3, "fetched");
	is_int(r.touched, 2, "touched");
	is_int(r.deleted, 1, "deleted");
	is_int(r.bytes, 12345, "bytes");
	is_int(r.end_ns, 2000, "end_ns");
	is_str(r.error, "", "no error");
	manifest_close(m);
}

static void
test_bulk(const char *dir)
{
	struct manifest		*m = NULL;
	struct listing		*l;
	char			 p[512], err[512], name[64];
	size_t			 i, n = 100000;
	double			 t0, t1, t2;
	int			 rc = 0;

	join(p, sizeof(p), dir, "bulk.db");
	is_int(manifest_open(p, true, &m, err, sizeof(err)), 0, "open bulk.db");
	if ((l = listing_new(n)) == NULL)
		tap_bail("setup failed");
	for (i = 0; i < n; i++) {
		(void)snprintf(name, sizeof(name), "dir%03zu/file%06zu.gz",
		    i % 500, i);
		add(l, name, ENTRY_FILE, (int64_t)i, true, 1600000000,
		    MTIME_MINUTE, NULL);
	}
	t0 = now_s();
	rc = manifest_stage(m, l);
	t1 = now_s();
	is_int(rc, 0, "stage 100,000 entries");
	printf("# manifest_stage: 100000 entries in %.3f s\n", t1 - t0);
	rc = manifest_stage(m, l);
	t2 = now_s();
	is_int(rc, 0, "restage 100,000 entries (clears staging first)");
	printf("# manifest_stage again: 100000 entries in %.3f s\n", t2 - t1);
	listing_free(l);
	manifest_close(m);
}


/* partials rows (resume): migration 1 -> 2, put, walk, drop, commit. */
struct prow_list {
	char		 path[8][64];
	char		 tmp[8][64];
	char		 etag[8][64];
	int64_t		 up_mtime[8];
	size_t		 nranges[8];
	uint64_t	 r0[8][2];
	size_t		 n;
};

static int
prow_cb(void *ctx, const struct partial_rec *p)
{
	struct prow_list *pl = ctx;

	if (pl->n == 8)
		return 7;
	(void)snprintf(pl->path[pl->n], 64, "%s", p->path);
	(void)snprintf(pl->tmp[pl->n], 64, "%s", p->tmpname);
	(void)snprintf(pl->etag[pl->n], 64, "%s", p->etag ? p->etag : "");
	pl->up_mtime[pl->n] = p->up_mtime;
	pl->nranges[pl->n] = p->nranges;
	if (p->nranges > 0) {
		pl->r0[pl->n][0] = p->ranges[0];
		pl->r0[pl->n][1] = p->ranges[2 * p->nranges - 1];
	}
	pl->n++;
	return 0;
}

/* Intents: what a batch is about to publish, left when it is killed. */
struct intent_seen {
	char	 paths[4][32];
	int64_t	 local_size[4], local_mtime[4];
	int	 op[4];
	size_t	 n;
};

static int
intent_cb(void *ctx, const struct commit_rec *c)
{
	struct intent_seen *s = ctx;

	if (s->n < 4) {
		(void)snprintf(s->paths[s->n], sizeof(s->paths[0]), "%s",
		    c->path);
		s->local_size[s->n] = c->fs.local.size;
		s->local_mtime[s->n] = c->fs.local.mtime;
		s->op[s->n] = (int)c->op;
	}
	s->n++;
	return 0;
}

static void
test_intents(const char *dir)
{
	char			 p[512], err[600];
	struct manifest		*m = NULL;
	struct commit_rec	 c[2];
	struct intent_seen	 s;
	int64_t			 run = 0;

	join(p, sizeof(p), dir, "intents.db");
	is_int(manifest_open(p, true, &m, err, sizeof(err)), 0, "intents: open");
	(void)manifest_run_begin(m, "sync", 1, &run);
	c[0] = rec("a.txt", COMMIT_FETCHED, ENTRY_FILE, 11, 100, MTIME_SECOND);
	c[1] = rec("d/b.txt", COMMIT_FETCHED, ENTRY_FILE, 22, 200,
	    MTIME_MINUTE);
	is_int(manifest_intent(m, c, 2), 0, "intents: two recorded");
	memset(&s, 0, sizeof(s));
	is_int(manifest_intents(m, intent_cb, &s), 0, "intents: walk");
	is_int(s.n, 2, "intents: two left");
	is_str(s.paths[0], "a.txt", "intents: first path");
	is_int(s.local_size[1], 22, "intents: local size");
	is_int(s.local_mtime[1], 200 * NS, "intents: local mtime");
	is_int(s.op[0], COMMIT_ADOPTED, "intents: given as adoptions");
	/* The batch's transaction drops the intents it records. */
	is_int(manifest_commit(m, run, c, 1), 0, "intents: a.txt committed");
	memset(&s, 0, sizeof(s));
	is_int(manifest_intents(m, intent_cb, &s), 0, "intents: walk again");
	is_int(s.n, 1, "intents: the committed one dropped");
	is_str(s.paths[0], "d/b.txt", "intents: d/b.txt left");
	is_int(manifest_intents_clear(m), 0, "intents: clear");
	memset(&s, 0, sizeof(s));
	(void)manifest_intents(m, intent_cb, &s);
	is_int(s.n, 0, "intents: none after clear");
	manifest_close(m);
}

/* manifest_mismatches(): collect "path want got run" lines. */
static int
mism_cb(void *ctx, const struct mismatch_rec *r)
{
	char	*out = ctx;
	size_t	 n = strlen(out);

	(void)snprintf(out + n, 512 - n, "%s %s %s %lld %lld;", r->path,
	    r->want, r->got, (long long)r->run, (long long)r->fs.upstream.size);
	return 0;
}

/* manifest_ls(): collect "path sidecar" lines ("-" for NULL). */
static int
sidecar_cb(void *ctx, const struct file_row *f)
{
	char	*out = ctx;
	size_t	 n = strlen(out);

	(void)snprintf(out + n, 512 - n, "%s %s;", f->path,
	    f->sidecar ? f->sidecar : "-");
	return 0;
}

/* manifest_event_fn: "path net;" per event ("-" for none) into ctx. */
static int
net_cb(void *ctx, const struct event_row *e)
{
	char	*out = ctx;
	size_t	 n = strlen(out);

	(void)snprintf(out + n, 512 - n, "%s %s;", e->path,
	    e->net ? e->net : "-");
	return 0;
}

/*
 * Schema 5: the transport of each fetched file (events.net) and each
 * run's per-transport figures (runs_net), and the 4 -> 5 migration.
 */
static void
test_nets(const char *dir)
{
	char			 p[512], err[600], out[512];
	struct manifest		*m = NULL;
	struct commit_rec	 c[2];
	struct run_record	 r, *v = NULL;
	size_t			 n = 0;
	int64_t			 run = 0, run2 = 0;
	sqlite3			*db;

	join(p, sizeof(p), dir, "nets.db");
	is_int(manifest_open(p, true, &m, err, sizeof(err)), 0, "nets: open");
	manifest_close(m);
	m = NULL;
	/* A schema 4 manifest with a run and an event: open migrates it. */
	db = raw_open(p);
	raw_exec(db, "DROP TABLE zones; DROP TABLE runs_net;"
	    " ALTER TABLE events DROP COLUMN net;"
	    " INSERT INTO runs (command, start_ns, end_ns, status, fetched)"
	    " VALUES ('sync', 1, 2, 'ok', 1);"
	    " INSERT INTO events (run, seq, time_ns, path, op)"
	    " VALUES (1, 1, 2, 'old', 'fetched');"
	    " PRAGMA user_version = 4;");
	(void)sqlite3_close(db);
	is_int(manifest_open(p, true, &m, err, sizeof(err)), 0,
	    "nets: schema 4 is migrated: %s", err);
	is_int(manifest_last_success(m, &r), 0, "nets: the old run is kept");
	is_int(r.nnets, 0, "nets: ... with no transports");
	out[0] = '\0';
	(void)manifest_events(m, 1, net_cb, out);
	is_str(out, "old -;", "nets: an old event has no transport");
	(void)manifest_run_begin(m, "sync", 10, &run);
	c[0] = rec("a", COMMIT_FETCHED, ENTRY_FILE, 11, 100, MTIME_SECOND);
	c[0].net = "udt";
	c[1] = rec("b", COMMIT_DELETED, ENTRY_FILE, 0, 0, MTIME_UNKNOWN);
	is_int(manifest_commit(m, run, c, 2), 0, "nets: commit");
	out[0] = '\0';
	is_int(manifest_events(m, run, net_cb, out), 0, "nets: events");
	is_str(out, "a udt;b -;", "nets: the fetch's transport recorded");
	memset(&r, 0, sizeof(r));
	r.id = run;
	r.end_ns = 20;
	(void)snprintf(r.status, sizeof(r.status), "ok");
	r.nnets = 2;
	(void)snprintf(r.nets[0].net, sizeof(r.nets[0].net), "udt");
	r.nets[0].files = 3;
	r.nets[0].bytes = 3000;
	r.nets[0].ns = 1500000000;
	(void)snprintf(r.nets[1].net, sizeof(r.nets[1].net), "tcp");
	r.nets[1].files = 1;
	r.nets[1].bytes = 7;
	r.nets[1].ns = 1000;
	is_int(manifest_run_end(m, &r), 0, "nets: run end");
	(void)manifest_run_begin(m, "sync", 30, &run2);
	is_int(manifest_runs(m, 10, &v, &n), 0, "nets: runs");
	is_int(n, 3, "nets: three runs");
	if (n == 3) {
		is_int(v[0].nnets, 0, "nets: a running run has none");
		is_int(v[1].nnets, 2, "nets: two transports");
		/* In name order. */
		is_str(v[1].nets[0].net, "tcp", "nets: tcp first");
		is_int(v[1].nets[0].bytes, 7, "nets: tcp bytes");
		is_str(v[1].nets[1].net, "udt", "nets: then udt");
		is_int(v[1].nets[1].files, 3, "nets: udt files");
		is_int(v[1].nets[1].bytes, 3000, "nets: udt bytes");
		is_int(v[1].nets[1].ns, 1500000000, "nets: udt ns");
	}
	free(v);
	is_int(manifest_last_success(m, &r), 0, "nets: last success");
	is_int(r.nnets, 2, "nets: ... with its transports");
	r.id = 9999;
	is_int(manifest_run_end(m, &r), BM_ENOENT, "nets: unknown run");
	is_int(manifest_last_success(m, &r), 0, "nets: still there");
	is_int(r.id, run, "nets: ... unchanged by the failed end");
	manifest_close(m);
}

static void
test_sidecar_mismatch(const char *dir)
{
	char			 p[512], err[600], out[512];
	struct manifest		*m = NULL;
	struct commit_rec	 c[3];
	int64_t			 run = 0;

	join(p, sizeof(p), dir, "mism.db");
	is_int(manifest_open(p, true, &m, err, sizeof(err)), 0, "mism: open");
	(void)manifest_run_begin(m, "sync", 1, &run);
	c[0] = rec("a", COMMIT_FETCHED, ENTRY_FILE, 11, 100, MTIME_SECOND);
	c[0].sidecar = "md5:aa";
	c[1] = rec("b", COMMIT_FETCHED, ENTRY_FILE, 22, 200, MTIME_SECOND);
	is_int(manifest_commit(m, run, c, 2), 0, "mism: two fetched");
	out[0] = '\0';
	(void)manifest_ls(m, NULL, sidecar_cb, out);
	is_str(out, "a md5:aa;b -;", "mism: sidecar recorded with the fetch");
	/* A mismatch leaves the row; a SIDECAR "" records a failed check. */
	c[0] = rec("a", COMMIT_MISMATCH, ENTRY_FILE, 11, 100, MTIME_SECOND);
	c[0].sidecar = "md5:bb";
	c[0].checksum = "md5:aa";
	c[0].fs.upstream.size = 11;
	c[0].reason = "checksum mismatch";
	c[1] = rec("a", COMMIT_SIDECAR, ENTRY_FILE, 0, 0, MTIME_UNKNOWN);
	c[1].sidecar = "";
	c[2] = rec("new", COMMIT_MISMATCH, ENTRY_FILE, 5, 50, MTIME_SECOND);
	c[2].sidecar = "md5:cc";
	c[2].checksum = "md5:dd";
	c[2].fs.upstream.size = -1;
	is_int(manifest_commit(m, run, c, 3), 0, "mism: mismatches");
	out[0] = '\0';
	(void)manifest_ls(m, NULL, sidecar_cb, out);
	is_str(out, "a ;b -;", "mism: no row made, a's check recorded");
	out[0] = '\0';
	is_int(manifest_mismatches(m, mism_cb, out), 0, "mism: walk");
	is_str(out, "a md5:bb md5:aa 1 11;new md5:cc md5:dd 1 -1;",
	    "mism: both recorded");
	c[0] = rec("a", COMMIT_MISMATCH, ENTRY_FILE, 11, 100, MTIME_SECOND);
	c[0].checksum = "md5:aa";
	is_int(manifest_commit(m, run, c, 1), BM_EINVAL,
	    "mism: a mismatch needs both digests");
	/* A match or a fetch forgets the mismatch. */
	c[0] = rec("a", COMMIT_SIDECAR, ENTRY_FILE, 0, 0, MTIME_UNKNOWN);
	c[0].sidecar = "md5:bb";
	c[1] = rec("new", COMMIT_FETCHED, ENTRY_FILE, 5, 60, MTIME_SECOND);
	is_int(manifest_commit(m, run, c, 2), 0, "mism: fixed");
	out[0] = '\0';
	(void)manifest_mismatches(m, mism_cb, out);
	is_str(out, "", "mism: none left");
	out[0] = '\0';
	(void)manifest_ls(m, NULL, sidecar_cb, out);
	is_str(out, "a md5:bb;b -;new -;", "mism: a's match recorded");
	/* Content committed unchecked keeps a known mismatch; walked. */
	c[0] = rec("b", COMMIT_MISMATCH, ENTRY_FILE, 22, 200, MTIME_SECOND);
	c[0].sidecar = "md5:ee";
	c[0].checksum = "md5:ff";
	c[0].fs.upstream.size = 22;
	c[1] = rec("b", COMMIT_FETCHED, ENTRY_FILE, 22, 200, MTIME_SECOND);
	c[1].sidecar = MANIFEST_SIDECAR_UNCHECKED;
	is_int(manifest_commit(m, run, c, 2), 0, "mism: fetched unchecked");
	out[0] = '\0';
	(void)manifest_mismatches(m, mism_cb, out);
	is_str(out, "b md5:ee md5:ff 1 22;", "mism: kept by an unchecked fetch");
	out[0] = '\0';
	is_int(manifest_ls_unchecked(m, sidecar_cb, out), 0, "mism: unchecked walk");
	is_str(out, "b unchecked;", "mism: the unchecked row");
	c[0] = rec("b", COMMIT_FETCHED, ENTRY_FILE, 22, 300, MTIME_SECOND);
	c[0].sidecar = "md5:ee";
	is_int(manifest_commit(m, run, c, 1), 0, "mism: fetched and checked");
	out[0] = '\0';
	(void)manifest_mismatches(m, mism_cb, out);
	is_str(out, "", "mism: dropped by a checked fetch");
	out[0] = '\0';
	(void)manifest_ls_unchecked(m, sidecar_cb, out);
	is_str(out, "", "mism: no unchecked row left");
	manifest_close(m);
}

static void
test_partials(const char *dir)
{
	char			 p[512], err[600];
	struct manifest		*m = NULL;
	struct partial_rec	 pr[2];
	struct commit_rec	 c;
	struct prow_list	 pl;
	const uint64_t		 r1[] = { 0, 100, 200, 300 }, r2[] = { 5, 10 };
	sqlite3			*db;
	int64_t			 run = 0;

	join(p, sizeof(p), dir, "partials.db");
	is_int(manifest_open(p, true, &m, err, sizeof(err)), 0, "open (current schema)");
	manifest_close(m);
	m = NULL;
	/* Make it look like a schema 1 manifest: open migrates it. */
	db = raw_open(p);
	raw_exec(db, "DROP TABLE zones; DROP TABLE partials; DROP TABLE intents; "
	    "DROP TABLE mismatches; ALTER TABLE files DROP COLUMN sidecar; "
	    "DROP TABLE runs_net; ALTER TABLE events DROP COLUMN net; "
	    "PRAGMA user_version = 1;");
	(void)sqlite3_close(db);
	is_int(manifest_open(p, true, &m, err, sizeof(err)), 0,
	    "schema 1 is migrated: %s", err);
	memset(pr, 0, sizeof(pr));
	pr[0].path = "a/big.bin";
	pr[0].tmpname = ".biomirror-tmp.0011aabb";
	pr[0].size = 1000;
	pr[0].list_mtime = 5 * NS;
	pr[0].up_mtime = 7 * NS;
	pr[0].etag = "\"e1\"";
	pr[0].ranges = r1;
	pr[0].nranges = 2;
	pr[1] = pr[0];
	pr[1].path = "b.bin";
	pr[1].etag = NULL;
	pr[1].up_mtime = -1;
	pr[1].ranges = r2;
	pr[1].nranges = 1;
	(void)manifest_run_begin(m, "sync", 1, &run);
	is_int(manifest_partials_put(m, run, pr, 2), 0, "put two rows");
	memset(&pl, 0, sizeof(pl));
	is_int(manifest_partials(m, prow_cb, &pl), 0, "walk");
	is_int(pl.n, 2, "two rows");
	is_str(pl.path[0], "a/big.bin", "path order");
	is_str(pl.tmp[0], ".biomirror-tmp.0011aabb", "tmpname");
	is_str(pl.etag[0], "\"e1\"", "etag");
	is_int(pl.up_mtime[0], 7 * NS, "up_mtime");
	is_int(pl.nranges[0], 2, "ranges decoded");
	is_int(pl.r0[0][0], 0, "first start");
	is_int(pl.r0[0][1], 300, "last end");
	is_int(pl.up_mtime[1], -1, "NULL up_mtime reads -1");
	is_str(pl.etag[1], "", "NULL etag");

	/* Hostile ranges text decodes to nothing. */
	db = raw_open(p);
	raw_exec(db, "UPDATE partials SET ranges = '300-200' WHERE "
	    "CAST(path AS TEXT) = 'b.bin'");
	(void)sqlite3_close(db);
	memset(&pl, 0, sizeof(pl));
	(void)manifest_partials(m, prow_cb, &pl);
	is_int(pl.nranges[1], 0, "backwards range refused");
	db = raw_open(p);
	raw_exec(db, "UPDATE partials SET ranges = '0-10 5-20' WHERE "
	    "CAST(path AS TEXT) = 'b.bin'");
	(void)sqlite3_close(db);
	memset(&pl, 0, sizeof(pl));
	(void)manifest_partials(m, prow_cb, &pl);
	is_int(pl.nranges[1], 0, "overlapping ranges refused");
	db = raw_open(p);
	raw_exec(db, "UPDATE partials SET ranges = '0-1001' WHERE "
	    "CAST(path AS TEXT) = 'b.bin'");
	(void)sqlite3_close(db);
	memset(&pl, 0, sizeof(pl));
	(void)manifest_partials(m, prow_cb, &pl);
	is_int(pl.nranges[1], 0, "range past the size refused");

	/* Drop by a NULL tmpname; a FETCHED commit drops its path's row. */
	pr[1].tmpname = NULL;
	is_int(manifest_partials_put(m, run, &pr[1], 1), 0, "drop b.bin");
	memset(&c, 0, sizeof(c));
	c.path = "a/big.bin";
	c.op = COMMIT_FETCHED;
	c.type = ENTRY_FILE;
	c.fs.listed.size = 1000;
	c.fs.listed.size_exact = true;
	c.fs.upstream.size = c.fs.upstream.mtime = c.fs.local.size = c.fs.local.mtime = -1;
	is_int(manifest_commit(m, run, &c, 1), 0, "commit a/big.bin");
	memset(&pl, 0, sizeof(pl));
	(void)manifest_partials(m, prow_cb, &pl);
	is_int(pl.n, 0, "no rows left");
	manifest_close(m);
}

/* manifest_zones: count the rows, keep the last. */
static int
zone_cb(void *ctx, const struct zone_rec *z)
{
	struct zone_rec	*last = ctx;

	*last = *z;
	last->checked_ns++;	/* counts calls beyond the row's own value */
	return 0;
}

/* The zones table (schema 6): one row per host, replaced, walked. */
static void
test_zones(const char *dir)
{
	struct manifest	*m = NULL;
	struct zone_rec	 z, got, last;
	char		 p[512], err[512];

	join(p, sizeof(p), dir, "zones.db");
	is_int(manifest_open(p, true, &m, err, sizeof(err)), 0, "open zones.db");
	if (m == NULL)
		return;
	is_int(manifest_zone_get(m, "ftp://h", &got), BM_ENOENT,
	    "zone: none yet");
	memset(&z, 0, sizeof(z));
	(void)snprintf(z.host, sizeof(z.host), "ftp://h");
	z.offset = 3 * 3600;
	z.learnt_ns = 10;
	z.checked_ns = 20;
	is_int(manifest_zone_put(m, &z), 0, "zone: put");
	z.offset = 4 * 3600;
	z.mdtm_local = true;
	z.checked_ns = 30;
	is_int(manifest_zone_put(m, &z), 0, "zone: replaced");
	memset(&got, 0, sizeof(got));
	is_int(manifest_zone_get(m, "ftp://h", &got), 0, "zone: get");
	is_int(got.offset, 4 * 3600, "zone: offset");
	ok(got.mdtm_local, "zone: mdtm_local");
	is_int(got.learnt_ns, 10, "zone: learnt_ns");
	is_int(got.checked_ns, 30, "zone: checked_ns");
	memset(&last, 0, sizeof(last));
	is_int(manifest_zones(m, zone_cb, &last), 0, "zones: walk");
	is_str(last.host, "ftp://h", "zones: the one row");
	is_int(last.checked_ns, 31, "zones: one call");
	manifest_close(m);
}

/* PRAGMA user_version of the file at path, read with a connection of its own. */
static int64_t
raw_version(const char *path)
{
	sqlite3		*db = raw_open(path);
	sqlite3_stmt	*st = NULL;
	int64_t		 v = -1;

	if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL) ==
	    SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	(void)sqlite3_finalize(st);
	(void)sqlite3_close(db);
	return v;
}

/*
 * An older schema (5: no zones; 4: no events.net, no runs_net) is read as
 * it is by a reading open and by manifest_open_as_is: what it lacks reads
 * as none, a write it cannot take fails with BM_EDB, user_version stays;
 * manifest_open migrates it.
 */
static void
test_as_is(const char *dir)
{
	struct manifest		*m = NULL;
	struct run_record	*v = NULL;
	struct zone_rec		 z, last;
	struct seen_list	 sl;
	size_t			 n = 0;
	int64_t			 id = 0;
	sqlite3			*db;
	char			 p[512], err[512];

	join(p, sizeof(p), dir, "as_is.db");
	is_int(manifest_open(p, true, &m, err, sizeof(err)), 0, "open as_is.db");
	if (m == NULL)
		return;
	is_int(manifest_run_begin(m, "sync", NS, &id), 0, "as is: a run");
	manifest_close(m);
	m = NULL;
	db = raw_open(p);
	raw_exec(db, "INSERT INTO events (run, seq, time_ns, path, op, net)"
	    " VALUES (1, 1, 5, 'a', 'fetched', 'tcp');"
	    "DROP TABLE zones; PRAGMA user_version = 5;");
	(void)sqlite3_close(db);

	is_int(manifest_open_read(p, &m, err, sizeof(err)), 0,
	    "as is: schema 5 opens to read: %s", err);
	if (m == NULL)
		return;
	memset(&z, 0, sizeof(z));
	is_int(manifest_zone_get(m, "ftp://h", &z), BM_ENOENT,
	    "as is: no zones table: no zone");
	memset(&last, 0, sizeof(last));
	is_int(manifest_zones(m, zone_cb, &last), 0, "as is: zones walk");
	is_int(last.checked_ns, 0, "as is: no zone walked");
	(void)snprintf(z.host, sizeof(z.host), "ftp://h");
	is_int(manifest_zone_put(m, &z), BM_EDB, "as is: a zone not written");
	ok(strstr(manifest_errmsg(m), "schema version 5, opened as it is") != NULL,
	    "as is: why: %s", manifest_errmsg(m));
	is_int(manifest_runs(m, 10, &v, &n), 0, "as is: runs");
	is_int(n, 1, "as is: one run");
	free(v);
	v = NULL;
	manifest_close(m);
	m = NULL;
	is_int(raw_version(p), 5, "as is: a reader leaves schema 5");

	db = raw_open(p);
	raw_exec(db, "DROP TABLE runs_net; ALTER TABLE events DROP COLUMN net;"
	    " PRAGMA user_version = 4;");
	(void)sqlite3_close(db);
	is_int(manifest_open_as_is(p, false, &m, err, sizeof(err)), 0,
	    "as is: schema 4 opens as it is: %s", err);
	if (m == NULL)
		return;
	memset(&sl, 0, sizeof(sl));
	is_int(manifest_events(m, 1, ev_cb, &sl), 0, "as is: events");
	is_int(sl.n, 1, "as is: the one event");
	if (sl.n == 1)
		is_str(sl.v[0].op, "fetched", "as is: its op");
	seen_reset(&sl);
	is_int(manifest_runs(m, 10, &v, &n), 0, "as is: runs without runs_net");
	ok(n == 1 && v[0].nnets == 0, "as is: no transports");
	free(v);
	v = NULL;
	manifest_close(m);
	m = NULL;
	is_int(raw_version(p), 4, "as is: plan's open leaves schema 4");

	is_int(manifest_open(p, false, &m, err, sizeof(err)), 0,
	    "as is: a writer migrates: %s", err);
	manifest_close(m);
	is_int(raw_version(p), 6, "as is: now schema 6");
}

/*
 * A date only is a calendar day in the server's zone: the same day
 * resolved an hour earlier (daylight saving, ftp_timezone = auto) is
 * unchanged; the next day, or a day an hour off the next, is changed.
 */
static void
test_diff_day(const char *dir)
{
	struct manifest		*m = NULL;
	struct listing		*l;
	struct seen_list	 sl;
	struct seen		*s;
	struct commit_rec	 c[3];
	char			 p[512], err[512];
	const int64_t		 day = 1735686000;	/* 2025-01-01 in +1 */

	memset(&sl, 0, sizeof(sl));
	join(p, sizeof(p), dir, "diffday.db");
	is_int(manifest_open(p, true, &m, err, sizeof(err)), 0,
	    "open diffday.db");
	if (m == NULL)
		return;
	c[0] = rec("dst", COMMIT_FETCHED, ENTRY_FILE, 3, day, MTIME_DAY);
	c[1] = rec("next", COMMIT_FETCHED, ENTRY_FILE, 3, day, MTIME_DAY);
	c[2] = rec("nextdst", COMMIT_FETCHED, ENTRY_FILE, 3, day, MTIME_DAY);
	is_int(manifest_commit(m, 1, c, 3), 0, "commit day-precision rows");
	if ((l = listing_new(3)) == NULL)
		tap_bail("setup failed");
	add(l, "dst", ENTRY_FILE, 3, true, day - 3600, MTIME_DAY, NULL);
	add(l, "next", ENTRY_FILE, 3, true, day + 86400, MTIME_DAY, NULL);
	add(l, "nextdst", ENTRY_FILE, 3, true, day + 86400 - 3600, MTIME_DAY,
	    NULL);
	is_int(manifest_stage(m, l), 0, "stage the day listing");
	is_int(manifest_diff(m, diff_cb, &sl), 0, "diff the day listing");
	s = seen_find(&sl, "dst");
	ok(s != NULL && s->kind == DIFF_SAME,
	    "same day an hour earlier (zone offset change) is the same");
	s = seen_find(&sl, "next");
	ok(s != NULL && s->kind == DIFF_CHANGED, "the next day is changed");
	s = seen_find(&sl, "nextdst");
	ok(s != NULL && s->kind == DIFF_CHANGED,
	    "the next day an hour earlier is changed");
	seen_reset(&sl);
	listing_free(l);
	manifest_close(m);
}

/* manifest_staged_walk's rows, as seen. */
struct staged_seen {
	char		 path[64][16];
	int64_t		 mtime[64];
	char		 sum[64][80];
	size_t		 n;
};

static int
staged_cb(void *ctx, const struct staged_row *r)
{
	struct staged_seen *ss = ctx;

	if (ss->n < 64) {
		(void)snprintf(ss->path[ss->n], sizeof(ss->path[0]), "%.*s",
		    (int)r->pathlen, r->path);
		ss->mtime[ss->n] = r->mtime;
		(void)snprintf(ss->sum[ss->n], sizeof(ss->sum[0]), "%s",
		    r->checksum != NULL ? r->checksum : "-");
	}
	ss->n++;
	return 0;
}

/* What test_diff_merge's callback keeps of each row, in order. */
struct merge_row {
	char		 path[32];
	enum diff_kind	 kind;
	bool		 recorded;
	int64_t		 size;
};

struct merge_seen {
	struct merge_row v[512];
	size_t		 n;
};

static int
merge_cb(void *ctx, const struct diff_row *r)
{
	struct merge_seen *ms = ctx;

	if (ms->n == sizeof(ms->v) / sizeof(ms->v[0]) ||
	    r->pathlen >= sizeof(ms->v[0].path))
		return 9;
	memcpy(ms->v[ms->n].path, r->path, r->pathlen);
	ms->v[ms->n].path[r->pathlen] = '\0';
	ms->v[ms->n].kind = r->kind;
	ms->v[ms->n].recorded = r->recorded;
	ms->v[ms->n].size = r->fs.listed.size;
	ms->n++;
	return 0;
}

/*
 * The diff's merge of the staged and the committed paths (manifest.c,
 * diff_staged): 300 paths in and out of either side, names that are
 * prefixes of others or hold bytes over 0x7f (memcmp order), a listing
 * staged in reverse with repeats inside and across one multi-row insert
 * (the first kept): every staged row in path order with the right kind,
 * then every committed row not staged, in path order; none gone when
 * the listing holds every committed path; a path another program wrote
 * as TEXT is damage, to the diff and to the next open.
 */
static void
test_diff_merge(const char *dir)
{
	static const char *const odd[] = {
		"a", "a-b", "a.b", "a/b", "a/b/c", "ab", "\xc3\xa9t\xc3\xa9",
		"\xff", "z"
	};
	struct manifest		*m = NULL;
	struct listing		*l;
	struct merge_seen	*ms;
	struct commit_rec	 c[320];
	sqlite3			*db;
	char			 names[300][8], p[512], err[512];
	size_t			 i, nc = 0, nstaged = 0, ngone = 0, bad = 0;
	bool			 in_rec, in_list;

	if ((ms = calloc(1, sizeof(*ms))) == NULL)
		tap_bail("setup failed");
	join(p, sizeof(p), dir, "merge.db");
	is_int(manifest_open(p, true, &m, err, sizeof(err)), 0, "open merge.db");
	/* p%03d: i % 3 == 0 both sides, 1 listed only, 2 committed only. */
	for (i = 0; i < 300; i++) {
		(void)snprintf(names[i], sizeof(names[i]), "p%03zu", i);
		if (i % 3 != 1)
			c[nc++] = rec(names[i], COMMIT_FETCHED, ENTRY_FILE,
			    (int64_t)i, 60, MTIME_SECOND);
	}
	/* The odd names: even ones committed, every one but "a/b/c" listed. */
	for (i = 0; i < sizeof(odd) / sizeof(odd[0]); i++)
		if (i % 2 == 0)
			c[nc++] = rec(odd[i], COMMIT_FETCHED, ENTRY_FILE, 7, 60,
			    MTIME_SECOND);
	is_int(manifest_commit(m, 1, c, nc), 0, "commit %zu rows", nc);
	if ((l = listing_new(1000)) == NULL)
		tap_bail("setup failed");
	for (i = 300; i-- > 0;)
		if (i % 3 != 2) {
			add(l, names[i], ENTRY_FILE, (int64_t)i, true, 60,
			    MTIME_SECOND, NULL);
			nstaged++;
			/* A repeat in the same multi-row insert (rows 1, 2). */
			if (i == 297)
				add(l, names[i], ENTRY_FILE, 5, true, 60,
				    MTIME_SECOND, NULL);
		}
	/* A repeat far from the first, in another statement. */
	add(l, names[3], ENTRY_FILE, 5, true, 60, MTIME_SECOND, NULL);
	for (i = 0; i < sizeof(odd) / sizeof(odd[0]); i++)
		if (strcmp(odd[i], "a/b/c") != 0) {
			add(l, odd[i], ENTRY_FILE, 7, true, 60, MTIME_SECOND,
			    NULL);
			nstaged++;
		}
	is_int(manifest_stage(m, l), 0, "stage %zu entries in reverse",
	    listing_count(l));
	is_int(manifest_diff(m, merge_cb, ms), 0, "diff");
	for (i = 0; i < 300; i++)
		ngone += i % 3 == 2;
	ngone++;	/* "a/b/c" */
	is_int((int64_t)ms->n, (int64_t)(nstaged + ngone),
	    "every staged row and every gone one");
	for (i = 0; i < ms->n; i++) {
		const struct merge_row *r = &ms->v[i];
		size_t	 k;

		if (i + 1 < nstaged && strcmp(r->path, ms->v[i + 1].path) >= 0)
			bad++;
		if (i >= nstaged && i + 1 < ms->n &&
		    strcmp(r->path, ms->v[i + 1].path) >= 0)
			bad++;
		if (r->path[0] == 'p' && strlen(r->path) == 4) {
			k = (size_t)atoi(r->path + 1);
			in_rec = k % 3 != 1;
			in_list = k % 3 != 2;
		} else {
			for (k = 0; k < sizeof(odd) / sizeof(odd[0]); k++)
				if (strcmp(odd[k], r->path) == 0)
					break;
			if (k == sizeof(odd) / sizeof(odd[0])) {
				bad++;
				continue;
			}
			in_rec = k % 2 == 0;
			in_list = strcmp(odd[k], "a/b/c") != 0;
		}
		if ((i < nstaged) != in_list || r->recorded != in_rec ||
		    r->kind != (!in_list ? DIFF_GONE : !in_rec ? DIFF_NEW :
		    DIFF_SAME))
			bad++;
	}
	is_int((int64_t)bad, 0, "each row in order, of its kind");
	for (i = 0; i < ms->n; i++)
		if (strcmp(ms->v[i].path, "p297") == 0 ||
		    strcmp(ms->v[i].path, "p003") == 0)
			is_int(ms->v[i].size, strcmp(ms->v[i].path, "p297") == 0
			    ? 297 : 3, "%s: the first of its repeats staged",
			    ms->v[i].path);
	/* Every committed path listed: no gone row (the gone walk skipped). */
	listing_drain(l);
	for (i = 0; i < nc; i++)
		add(l, c[i].path, ENTRY_FILE, c[i].fs.listed.size, true, 60,
		    MTIME_SECOND, NULL);
	is_int(manifest_stage(m, l), 0, "stage the committed paths");
	ms->n = 0;
	is_int(manifest_diff(m, merge_cb, ms), 0, "diff again");
	is_int((int64_t)ms->n, (int64_t)nc, "one row each");
	for (i = 0, bad = 0; i < ms->n; i++)
		bad += ms->v[i].kind != DIFF_SAME || !ms->v[i].recorded;
	is_int((int64_t)bad, 0, "all the same, none gone");
	/* An empty listing: every committed row gone, in path order. */
	listing_drain(l);
	is_int(manifest_stage(m, l), 0, "stage nothing");
	ms->n = 0;
	is_int(manifest_diff(m, merge_cb, ms), 0, "diff of nothing");
	is_int((int64_t)ms->n, (int64_t)nc, "every committed row gone");
	for (i = 0, bad = 0; i < ms->n; i++)
		bad += ms->v[i].kind != DIFF_GONE || (i + 1 < ms->n &&
		    strcmp(ms->v[i].path, ms->v[i + 1].path) >= 0);
	is_int((int64_t)bad, 0, "gone, in path order");
	/* A path another program stored as TEXT: damaged, not new + gone. */
	db = raw_open(p);
	raw_exec(db, "UPDATE files SET path = CAST(path AS TEXT)"
	    " WHERE path = CAST('p150' AS BLOB)");
	(void)sqlite3_close(db);
	for (i = 0; i < nc; i++)
		add(l, c[i].path, ENTRY_FILE, c[i].fs.listed.size, true, 60,
		    MTIME_SECOND, NULL);
	is_int(manifest_stage(m, l), 0, "stage the committed paths again");
	ms->n = 0;
	is_int(manifest_diff(m, merge_cb, ms), BM_ECORRUPT,
	    "a TEXT path: the diff says damaged");
	is_int(manifest_fault(m), BM_ECORRUPT, "the fault is damage");
	ok(strstr(manifest_errmsg(m), "damaged: a files row's path is not a "
	    "BLOB") != NULL, "and says which: %s", manifest_errmsg(m));
	for (i = 0, bad = 0; i < ms->n; i++)
		bad += ms->v[i].kind != DIFF_SAME;
	is_int((int64_t)bad, 0, "no row before it was new or gone");
	listing_free(l);
	manifest_close(m);
	/* Opened again: damaged at the open, as resync --adopt rebuilds. */
	m = NULL;
	is_int(manifest_open(p, false, &m, err, sizeof(err)), BM_ECORRUPT,
	    "a TEXT path: the open says damaged");
	ok(m == NULL && strstr(err, "merge.db: damaged: a files row's path "
	    "is not a BLOB") != NULL, "and says which: %s", err);
	is_int(manifest_open_read(p, &m, err, sizeof(err)), BM_ECORRUPT,
	    "a reader's open too");
	free(ms);
}

/*
 * Staging in batches (issue 22): batches added in listing order stage
 * what one manifest_stage of the whole listing does, duplicates across
 * batches included (the first kept); the count and the walk read it back.
 */
static void
test_stage_batches(const char *dir)
{
	struct manifest		*m = NULL;
	struct listing		*l;
	struct seen_list	 sl;
	struct seen		*s;
	struct staged_seen	 ss;
	char			 p[512], err[512];
	int64_t			 n = -1;

	memset(&sl, 0, sizeof(sl));
	memset(&ss, 0, sizeof(ss));
	join(p, sizeof(p), dir, "batches.db");
	is_int(manifest_open(p, true, &m, err, sizeof(err)), 0,
	    "open batches.db");
	if ((l = listing_new(4)) == NULL)
		tap_bail("setup failed");
	/* What an earlier run staged is gone at manifest_stage_begin. */
	add(l, "old", ENTRY_FILE, 1, true, 60, MTIME_SECOND, NULL);
	is_int(manifest_stage(m, l), 0, "stage an earlier listing");
	listing_drain(l);
	is_int(manifest_stage_begin(m), 0, "stage begin");
	add(l, "b", ENTRY_FILE, 1, true, 60, MTIME_SECOND, NULL);
	add(l, "d", ENTRY_DIR, -1, false, 120, MTIME_MINUTE, NULL);
	add(l, "d/x.md5", ENTRY_FILE, 40, true, 60, MTIME_SECOND, NULL);
	listing_get_mut(l, 2)->checksum = strdup("sha256:00ff");
	is_int(manifest_stage_add(m, l), 0, "stage batch 1");
	listing_drain(l);
	is_int(listing_count(l), 0, "batch 1 drained");
	is_int(listing_total(l), 4, "drained entries still counted");
	is_int(listing_room(l), 0, "and they hold the cap");
	listing_free(l);
	if ((l = listing_new(10)) == NULL)
		tap_bail("setup failed");
	add(l, "b", ENTRY_FILE, 999, true, 1, MTIME_SECOND, NULL);
	add(l, "a", ENTRY_FILE, 2, true, 60, MTIME_SECOND, NULL);
	add(l, "e", ENTRY_DIR, -1, false, 0, MTIME_UNKNOWN, NULL);
	is_int(manifest_stage_add(m, l), 0, "stage batch 2 (b again)");
	is_int(manifest_staged_count(m, &n), 0, "staged count");
	is_int(n, 5, "5 staged: the earlier listing gone, the dup dropped");
	is_int(manifest_diff(m, diff_cb, &sl), 0, "diff");
	is_int(sl.n, 5, "5 rows");
	if ((s = seen_find(&sl, "b")) != NULL)
		is_int(s->fs.listed.size, 1, "b: the first batch's entry kept");
	ok(seen_find(&sl, "old") == NULL, "old: not staged now");
	is_int(manifest_staged_walk(m, false, staged_cb, &ss), 0, "walk dirs");
	is_int(ss.n, 1, "one directory with a known time");
	is_str(ss.path[0], "d", "d");
	is_int(ss.mtime[0], 120 * NS, "d's mtime");
	memset(&ss, 0, sizeof(ss));
	is_int(manifest_staged_walk(m, true, staged_cb, &ss), 0,
	    "walk dirs and files");
	is_int(ss.n, 4, "a, b, d, d/x.md5");
	if (ss.n == 4) {
		is_str(ss.path[0], "a", "path order: a");
		is_str(ss.path[3], "d/x.md5", "path order: d/x.md5 last");
		is_str(ss.sum[3], "sha256:00ff", "listed digest staged");
		is_str(ss.sum[0], "-", "none for a");
	}
	seen_reset(&sl);
	listing_free(l);

	/*
	 * A page that failed after handing entries on (issue 22): its
	 * directory's direct children leave staging, nothing else does.
	 */
	if ((l = listing_new(10)) == NULL)
		tap_bail("setup failed");
	add(l, "d/y", ENTRY_FILE, 1, true, 60, MTIME_SECOND, NULL);
	add(l, "d/e/z", ENTRY_FILE, 1, true, 60, MTIME_SECOND, NULL);
	add(l, "d0", ENTRY_FILE, 1, true, 60, MTIME_SECOND, NULL);
	add(l, "d-x", ENTRY_FILE, 1, true, 60, MTIME_SECOND, NULL);
	is_int(manifest_stage_add(m, l), 0, "stage batch 3");
	is_int(manifest_stage_drop(m, "d"), 0, "drop d's children");
	is_int(manifest_staged_count(m, &n), 0, "staged count");
	is_int(n, 7, "a b d d-x d0 d/e/z e: d/x.md5 and d/y dropped");
	memset(&ss, 0, sizeof(ss));
	is_int(manifest_staged_walk(m, true, staged_cb, &ss), 0, "walk");
	is_int(ss.n, 6, "files and d");
	if (ss.n == 6)
		is_str(ss.path[4], "d/e/z", "d/e/z kept (a grandchild)");
	is_int(manifest_stage_drop(m, ""), 0, "drop the root's children");
	is_int(manifest_staged_count(m, &n), 0, "staged count");
	is_int(n, 1, "d/e/z alone left");
	listing_free(l);
	manifest_close(m);
}

int
main(void)
{
	char	 dir[] = "/tmp/test_manifest.XXXXXX";
	char	 cmd[600];

	if (mkdtemp(dir) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	test_open(dir);
	test_create(dir);
	test_refuse(dir);
	test_damaged(dir);
	test_bad_wal(dir);
	test_not_a_file(dir);
	test_scratch_and_ids(dir);
	test_diff(dir);
	test_diff_day(dir);
	test_stage_batches(dir);
	test_diff_merge(dir);
	test_no_reprepare(dir);
	test_bytes_and_ls(dir);
	test_commit_ops(dir);
	test_runs(dir);
	test_bulk(dir);
	test_locked(dir);
	test_partials(dir);
	test_intents(dir);
	test_sidecar_mismatch(dir);
	test_nets(dir);
	test_zones(dir);
	test_as_is(dir);
	if ((size_t)snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir) <
	    sizeof(cmd))
		if (system(cmd) != 0)
			printf("# could not remove %s\n", dir);
	return done_testing();
}
