/* Threat: a corrupt or hand-edited manifest row must give an error or be ignored, never crash biomirror or decode to impossible resume ranges. */
/*
 * Target for the row decoding of manifest/manifest.c: the readers that
 * turn stored rows into structs (run_from_row, file_from_row, the diff
 * rows, ranges_decode of partials).  The input is text, one row per
 * line, TAB-separated:
 *   files|runs|events|partials <TAB> value <TAB> value ...
 *   version <TAB> N		PRAGMA user_version = N
 *   appid <TAB> N		PRAGMA application_id = N
 * A value "\N" is NULL, a decimal integer is an INTEGER, "x:BYTES" is a
 * BLOB of BYTES ("\0" in it a NUL byte), anything else is TEXT; missing
 * columns are NULL.  The rows go into a fresh manifest (a copy of one
 * made by manifest_open() at start-up, on /dev/shm) through a plain
 * SQLite connection, as an editor would write them; then the manifest is
 * opened and every reader run over it.  Seeds: tests/fuzz/corpus/manifest/.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "biomirror/error.h"
#include "biomirror/listing.h"
#include "biomirror/manifest.h"
#include "fuzz.h"

#define MAX_COLS	16

static char	 dir[64];
static char	 dbpath[96];
static uint8_t	*tmpl;		/* bytes of an empty current-schema manifest */
static size_t	 tmpl_len;

static void
rm_db(void)
{
	char	 p[128];

	(void)unlink(dbpath);
	(void)snprintf(p, sizeof(p), "%s-wal", dbpath);
	(void)unlink(p);
	(void)snprintf(p, sizeof(p), "%s-shm", dbpath);
	(void)unlink(p);
	(void)snprintf(p, sizeof(p), "%s-journal", dbpath);
	(void)unlink(p);
}

static void
cleanup(void)
{
	rm_db();
	(void)rmdir(dir);
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct manifest	*m = NULL;
	char		 err[512];
	FILE		*f;
	long		 n;

	(void)argc;
	(void)argv;
	(void)snprintf(dir, sizeof(dir), "%s/bm-fuzz-manifest.%ld",
	    access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp",
	    (long)getpid());
	FUZZ_CHECK(mkdir(dir, 0700) == 0 || errno == EEXIST);
	(void)snprintf(dbpath, sizeof(dbpath), "%s/m.db", dir);
	rm_db();
	FUZZ_CHECK(manifest_open(dbpath, true, &m, err, sizeof(err)) == 0);
	manifest_close(m);
	FUZZ_CHECK((f = fopen(dbpath, "rb")) != NULL);
	FUZZ_CHECK(fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0);
	rewind(f);
	FUZZ_CHECK((tmpl = malloc((size_t)n)) != NULL);
	FUZZ_CHECK(fread(tmpl, 1, (size_t)n, f) == (size_t)n);
	(void)fclose(f);
	tmpl_len = (size_t)n;
	(void)atexit(cleanup);
	return 0;
}

/* Bind one field (len bytes, may hold NUL) as NULL, INTEGER, BLOB or TEXT. */
static void
bind_field(sqlite3_stmt *st, int i, const char *v, size_t len)
{
	char		 num[32], *end, *blob;
	long long	 x;
	size_t		 j, k;

	if (len == 2 && memcmp(v, "\\N", 2) == 0) {
		(void)sqlite3_bind_null(st, i);
		return;
	}
	if (len > 0 && len < sizeof(num) && memchr(v, '\0', len) == NULL) {
		memcpy(num, v, len);
		num[len] = '\0';
		errno = 0;
		x = strtoll(num, &end, 10);
		if (*end == '\0' && errno == 0 && (num[0] == '-' ||
		    (num[0] >= '0' && num[0] <= '9'))) {
			(void)sqlite3_bind_int64(st, i, x);
			return;
		}
	}
	if (len >= 2 && memcmp(v, "x:", 2) == 0) {
		FUZZ_CHECK((blob = malloc(len)) != NULL);
		for (j = 2, k = 0; j < len; j++) {
			if (v[j] == '\\' && j + 1 < len && v[j + 1] == '0') {
				blob[k++] = '\0';
				j++;
			} else
				blob[k++] = v[j];
		}
		(void)sqlite3_bind_blob(st, i, blob, (int)k, free);
		return;
	}
	(void)sqlite3_bind_text(st, i, v, (int)len, SQLITE_TRANSIENT);
}

/* Apply one input line to the raw connection; bad lines are ignored. */
static void
apply_line(sqlite3 *db, const char *line, size_t len)
{
	static const struct { const char *name; int ncols; } tables[] = {
		{ "files", 15 }, { "runs", 12 }, { "events", 7 },
		{ "partials", 8 },
	};
	const char	*f[MAX_COLS + 1], *p, *e = line + len;
	size_t		 fl[MAX_COLS + 1], nf = 0, t, c;
	sqlite3_stmt	*st = NULL;
	char		 sql[256];
	int		 w;

	for (p = line; nf <= MAX_COLS; ) {
		const char *tab = memchr(p, '\t', (size_t)(e - p));

		f[nf] = p;
		fl[nf++] = (size_t)((tab != NULL ? tab : e) - p);
		if (tab == NULL)
			break;
		p = tab + 1;
	}
	if (nf >= 2 && ((fl[0] == 7 && memcmp(f[0], "version", 7) == 0) ||
	    (fl[0] == 5 && memcmp(f[0], "appid", 5) == 0))) {
		char	 num[32];

		c = fl[1] < sizeof(num) ? fl[1] : sizeof(num) - 1;
		memcpy(num, f[1], c);
		num[c] = '\0';
		(void)snprintf(sql, sizeof(sql), "PRAGMA %s = %lld",
		    fl[0] == 7 ? "user_version" : "application_id",
		    strtoll(num, NULL, 10));
		(void)sqlite3_exec(db, sql, NULL, NULL, NULL);
		return;
	}
	for (t = 0; t < sizeof(tables) / sizeof(tables[0]); t++)
		if (fl[0] == strlen(tables[t].name) &&
		    memcmp(f[0], tables[t].name, fl[0]) == 0)
			break;
	if (t == sizeof(tables) / sizeof(tables[0]))
		return;
	w = snprintf(sql, sizeof(sql), "INSERT OR REPLACE INTO %s VALUES (?",
	    tables[t].name);
	for (c = 1; c < (size_t)tables[t].ncols; c++)
		w += snprintf(sql + w, sizeof(sql) - (size_t)w, ",?");
	(void)snprintf(sql + w, sizeof(sql) - (size_t)w, ")");
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
		sqlite3_finalize(st);
		return;
	}
	for (c = 1; c < nf && c <= (size_t)tables[t].ncols; c++)
		bind_field(st, (int)c, f[c], fl[c]);
	c = (size_t)sqlite3_step(st);
	if (getenv("FUZZ_VERBOSE") != NULL)
		(void)fprintf(stderr, "%s: %d %s\n", tables[t].name, (int)c,
		    sqlite3_errmsg(db));
	(void)sqlite3_finalize(st);
}

static int
on_run_file(void *ctx, const struct file_row *r)
{
	(void)ctx;
	FUZZ_CHECK(r->path != NULL);
	FUZZ_CHECK(r->path[r->pathlen] == '\0');
	return 0;
}

static int
on_event(void *ctx, const struct event_row *r)
{
	(void)ctx;
	FUZZ_CHECK(r->path != NULL && r->op != NULL);
	return 0;
}

static int
on_partial(void *ctx, const struct partial_rec *p)
{
	size_t	 i;

	(void)ctx;
	FUZZ_CHECK(p->path != NULL && p->tmpname != NULL);
	FUZZ_CHECK(p->nranges <= MANIFEST_MAX_RANGES);
	for (i = 0; i < p->nranges; i++) {
		FUZZ_CHECK(p->ranges[2 * i] < p->ranges[2 * i + 1]);
		FUZZ_CHECK(p->size > 0 &&
		    p->ranges[2 * i + 1] <= (uint64_t)p->size);
		if (i > 0)
			FUZZ_CHECK(p->ranges[2 * i] >=
			    p->ranges[2 * i - 1]);
	}
	return 0;
}

static int
on_diff(void *ctx, const struct diff_row *r)
{
	(void)ctx;
	FUZZ_CHECK(r->path != NULL);
	FUZZ_CHECK(r->kind >= DIFF_NEW && r->kind <= DIFF_GONE);
	return 0;
}

static void
check_run(const struct run_record *r)
{
	FUZZ_CHECK(memchr(r->command, '\0', sizeof(r->command)) != NULL);
	FUZZ_CHECK(memchr(r->status, '\0', sizeof(r->status)) != NULL);
	FUZZ_CHECK(memchr(r->error, '\0', sizeof(r->error)) != NULL);
}

/* Run every reader over the manifest at dbpath. */
static void
read_all(void)
{
	struct manifest		*m = NULL;
	struct run_record	*runs = NULL, last;
	struct listing		*l;
	struct entry		*e;
	char			 err[512];
	size_t			 nruns = 0, i;
	int64_t			 n, run;
	int			 rc;

	err[0] = '\0';
	rc = manifest_open(dbpath, false, &m, err, sizeof(err));
	if (getenv("FUZZ_VERBOSE") != NULL)
		(void)fprintf(stderr, "manifest_open: %d %s\n", rc, err);
	if (rc != 0) {
		FUZZ_CHECK(m == NULL);
		FUZZ_CHECK(rc == BM_EDB || rc == BM_ECORRUPT || rc == BM_ENOMEM);
		FUZZ_CHECK(strncmp(err, dbpath, strlen(dbpath)) == 0);
		return;
	}
	(void)manifest_set_busy_timeout(m, 0);
	if (manifest_runs(m, 1000, &runs, &nruns) == 0) {
		for (i = 0; i < nruns; i++) {
			check_run(&runs[i]);
			(void)manifest_events(m, runs[i].id, on_event, NULL);
		}
		free(runs);
	}
	if (manifest_last_success(m, &last) == 0)
		check_run(&last);
	(void)manifest_ls(m, NULL, on_run_file, NULL);
	(void)manifest_ls(m, "a", on_run_file, NULL);
	(void)manifest_file_count(m, &n);
	(void)manifest_partials(m, on_partial, NULL);
	/* a small staged listing, diffed against the rows */
	FUZZ_CHECK((l = listing_new(16)) != NULL);
	if (listing_append(l, &e) == 0) {
		e->path = strdup("a");
		e->type = ENTRY_FILE;
		e->size = 1;
		e->size_exact = true;
		e->size_min = e->size_max = 1;
	}
	if (listing_append(l, &e) == 0) {
		e->path = strdup("a/b");
		e->type = ENTRY_DIR;
	}
	if (manifest_stage(m, l) == 0)
		(void)manifest_diff(m, on_diff, NULL);
	listing_free(l);
	/* writers that read rows first: a new run marks "running" ones */
	(void)manifest_run_begin(m, "sync", 1, &run);
	manifest_close(m);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	sqlite3		*db = NULL;
	const char	*p = (const char *)data, *e = p + size, *nl;
	int		 fd;

	rm_db();
	FUZZ_CHECK((fd = open(dbpath, O_WRONLY | O_CREAT | O_TRUNC, 0600))
	    != -1);
	FUZZ_CHECK(write(fd, tmpl, tmpl_len) == (ssize_t)tmpl_len);
	(void)close(fd);
	if (sqlite3_open_v2(dbpath, &db, SQLITE_OPEN_READWRITE, NULL) ==
	    SQLITE_OK) {
		(void)sqlite3_exec(db, "PRAGMA synchronous = OFF; BEGIN",
		    NULL, NULL, NULL);
		while (p < e) {
			nl = memchr(p, '\n', (size_t)(e - p));
			apply_line(db, p, (size_t)((nl != NULL ? nl : e) - p));
			p = nl != NULL ? nl + 1 : e;
		}
		(void)sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
	}
	(void)sqlite3_close(db);
	read_all();
	return 0;
}
