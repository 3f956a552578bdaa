/*
 * The manifest: the one SQLite connection of a mirror (DESIGN.md, STYLE.md
 * rule 41); nothing else in biomirror links SQL.  Never logs: failures are
 * BM_E* codes plus "PATH: reason" in the caller's buffer (manifest_open)
 * or manifest_errmsg().  Invariants: paths are BLOBs (memcmp order, bytes
 * kept); an unchanged row is never rewritten; an existing file is never
 * deleted or recreated (damaged: BM_ECORRUPT); a callback of
 * manifest_diff/ls/events must not re-enter the same walk.  Column
 * meanings, commit ops and migrations: see docs/internals.md, "The
 * manifest".
 */
/*
 * Schema version 5 (application_id 0x424d4952 "BMIR"; WAL): tables files,
 * mismatches, runs, runs_net, events, partials, intents and
 * temp.staging.  Their columns and rules: docs/internals.md, "Schema".
 */
#include <sys/stat.h>
#include <sys/xattr.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "biomirror/digest.h"
#include "biomirror/error.h"
#include "biomirror/listing.h"
#include "biomirror/manifest.h"

#define MANIFEST_APP_ID		0x424d4952	/* "BMIR" */
#define MANIFEST_BUSY_MS	5000
/* A committed path another program wrote (manifest_check_paths, diff). */
#define PATH_NOT_BLOB	"damaged: a files row's path is not a BLOB " \
			"(written by another program)"
#define PATH_UNSAFE	"damaged: a files row's path is not a safe " \
			"relative path (a NUL byte, '..', an absolute or " \
			"empty path: written by another program)"

/* manifest_migrations[v]: schema v -> v + 1, ending by setting user_version. */
static const char *const manifest_migrations[] = {
	/* 0 -> 1 */
	"CREATE TABLE files ("
	" path BLOB PRIMARY KEY NOT NULL,"
	" type INTEGER NOT NULL,"
	" list_size INTEGER NOT NULL,"
	" list_size_exact INTEGER NOT NULL,"
	" list_mtime INTEGER NOT NULL,"
	" list_prec INTEGER NOT NULL,"
	" up_size INTEGER,"
	" up_mtime INTEGER,"
	" etag TEXT,"
	" target BLOB,"
	" checksum TEXT,"
	" local_size INTEGER,"
	" local_mtime INTEGER,"
	" seen_run INTEGER,"
	" fetched_run INTEGER"
	") WITHOUT ROWID;"
	"CREATE TABLE runs ("
	" id INTEGER PRIMARY KEY,"
	" command TEXT NOT NULL,"
	" start_ns INTEGER NOT NULL,"
	" end_ns INTEGER NOT NULL DEFAULT 0,"
	" status TEXT NOT NULL,"
	" listed INTEGER NOT NULL DEFAULT 0,"
	" fetched INTEGER NOT NULL DEFAULT 0,"
	" touched INTEGER NOT NULL DEFAULT 0,"
	" deleted INTEGER NOT NULL DEFAULT 0,"
	" failed INTEGER NOT NULL DEFAULT 0,"
	" bytes INTEGER NOT NULL DEFAULT 0,"
	" error TEXT NOT NULL DEFAULT ''"
	");"
	"CREATE TABLE events ("
	" run INTEGER NOT NULL,"
	" seq INTEGER NOT NULL,"
	" time_ns INTEGER NOT NULL,"
	" path BLOB NOT NULL,"
	" op TEXT NOT NULL,"
	" reason TEXT,"
	" bytes INTEGER NOT NULL DEFAULT 0"
	");"
	"CREATE INDEX events_run ON events(run, seq);"
	"PRAGMA application_id = 1112361298;"	/* 0x424d4952 */
	"PRAGMA user_version = 1;",
	/* 1 -> 2: finished ranges of temp files, for resume across runs */
	"CREATE TABLE partials ("
	" path BLOB PRIMARY KEY NOT NULL,"
	" tmpname TEXT NOT NULL,"
	" size INTEGER NOT NULL,"
	" list_mtime INTEGER NOT NULL,"
	" up_mtime INTEGER,"
	" etag TEXT,"
	" ranges TEXT NOT NULL,"
	" run INTEGER"
	") WITHOUT ROWID;"
	"PRAGMA user_version = 2;",
	/*
	 * 2 -> 3: files a batch commit is about to publish, written before
	 * its renames and dropped by its manifest transaction, so that a run
	 * killed in between leaves a record of what it published
	 * (manifest_intent)
	 */
	"CREATE TABLE intents ("
	" path BLOB PRIMARY KEY NOT NULL,"
	" list_size INTEGER NOT NULL,"
	" list_size_exact INTEGER NOT NULL,"
	" list_mtime INTEGER NOT NULL,"
	" list_prec INTEGER NOT NULL,"
	" local_size INTEGER NOT NULL,"
	" local_mtime INTEGER NOT NULL"
	") WITHOUT ROWID;"
	"PRAGMA user_version = 3;",
	/*
	 * 3 -> 4: the published digests each committed file last matched
	 * (files.sidecar), and the files whose upstream body kept failing
	 * its sidecar (mismatches), so that neither a changed sidecar nor a
	 * wrong upstream copy goes unnoticed or is fetched run after run
	 */
	"ALTER TABLE files ADD COLUMN sidecar TEXT;"
	"CREATE TABLE mismatches ("
	" path BLOB PRIMARY KEY NOT NULL,"
	" list_size INTEGER NOT NULL,"
	" list_size_exact INTEGER NOT NULL,"
	" list_mtime INTEGER NOT NULL,"
	" list_prec INTEGER NOT NULL,"
	" up_size INTEGER,"
	" up_mtime INTEGER,"
	" etag TEXT,"
	" want TEXT NOT NULL,"
	" got TEXT NOT NULL,"
	" run INTEGER"
	") WITHOUT ROWID;"
	"PRAGMA user_version = 4;",
	/*
	 * 4 -> 5: which transport (tcp, udt) carried each fetched file
	 * (events.net), and each run's files, bytes and time per transport
	 */
	"ALTER TABLE events ADD COLUMN net TEXT;"
	"CREATE TABLE runs_net ("
	" run INTEGER NOT NULL,"
	" net TEXT NOT NULL,"
	" files INTEGER NOT NULL,"
	" bytes INTEGER NOT NULL,"
	" ns INTEGER NOT NULL,"
	" PRIMARY KEY (run, net)"
	") WITHOUT ROWID;"
	"PRAGMA user_version = 5;",
	/*
	 * 5 -> 6: the time zone learnt of each upstream host (seconds east
	 * of UTC of its listed times; whether its MDTM is local time too),
	 * and when it was last checked (listing_timezone = auto, ftp_timezone)
	 */
	"CREATE TABLE zones ("
	" host TEXT PRIMARY KEY NOT NULL,"
	" offset INTEGER NOT NULL,"
	" mdtm_local INTEGER NOT NULL,"
	" learnt_ns INTEGER NOT NULL,"
	" checked_ns INTEGER NOT NULL"
	") WITHOUT ROWID;"
	"PRAGMA user_version = 6;",
};
#define MANIFEST_VERSION \
	((int)(sizeof(manifest_migrations) / sizeof(manifest_migrations[0])))

static const char manifest_staging_sql[] =
	"CREATE TEMP TABLE IF NOT EXISTS staging ("
	" path BLOB PRIMARY KEY NOT NULL,"
	" type INTEGER NOT NULL,"
	" size INTEGER NOT NULL,"
	" size_exact INTEGER NOT NULL,"
	" mtime INTEGER NOT NULL,"
	" prec INTEGER NOT NULL,"
	" target BLOB,"
	" checksum TEXT"
	") WITHOUT ROWID;";

/*
 * The staging table lives in a temp file, not in memory, with a bounded
 * page cache: a listing of millions of entries costs disk, not RSS
 * (set before the table is made: a temp_store change drops temp tables).
 */
static const char manifest_temp_sql[] =
	"PRAGMA temp_store = FILE;"
	"PRAGMA temp.cache_size = -8192;";

/* Column list shared by the queries that fill a struct file_row. */
#define FILE_COLS \
	"path, type, list_size, list_size_exact, list_mtime, list_prec," \
	" up_size, up_mtime, etag, local_size, local_mtime, seen_run," \
	" fetched_run, target, checksum, sidecar"
/* After FILE_COLS in manifest_ls: the end of the run that fetched it. */
#define FETCHED_END \
	"(SELECT r.end_ns FROM main.runs AS r WHERE r.id = fetched_run)"
#define RUN_COLS \
	"id, command, start_ns, end_ns, status, listed, fetched, touched," \
	" deleted, failed, bytes, error"

enum manifest_st {
	ST_BEGIN,
	ST_BEGIN_IMM,
	ST_COMMIT,
	ST_ROLLBACK,
	ST_STAGE_CLEAR,
	ST_STAGE_INSERT,
	ST_STAGE_INSERT_N,
	ST_STAGE_COUNT,
	ST_STAGE_WALK,
	ST_STAGE_DROP,
	ST_DIFF_STAGED,
	ST_DIFF_FILES,
	ST_RUN_START,
	ST_GONE,
	ST_FILE_COUNT,
	ST_UPSERT,
	ST_NOT_MODIFIED,
	ST_TOUCHED,
	ST_DIGEST,
	ST_DELETE,
	ST_EVENT,
	ST_RUN_BEGIN,
	ST_RUN_INTERRUPTED,
	ST_RUN_END,
	ST_RUN_NET_PUT,
	ST_RUN_NETS,
	ST_RUNS,
	ST_LAST_OK,
	ST_LS_ALL,
	ST_LS_PREFIX,
	ST_EVENTS,
	ST_PARTIAL_PUT,
	ST_PARTIAL_DEL,
	ST_PARTIALS_ANY,
	ST_PARTIALS,
	ST_INTENT_PUT,
	ST_INTENT_DEL,
	ST_INTENTS,
	ST_INTENT_CLEAR,
	ST_SIDECAR,
	ST_MISMATCH_PUT,
	ST_MISMATCH_DEL,
	ST_MISMATCHES_ANY,
	ST_MISMATCHES,
	ST_UNCHECKED,
	ST_ZONE_GET,
	ST_ZONE_PUT,
	ST_ZONES,
	ST__MAX
};

/* ST_STAGE_INSERT_N's rows: 4 x 4 of 8 parameters each, in order. */
#define STAGE_ROWS	16
#define STAGE_R1	"(?, ?, ?, ?, ?, ?, ?, ?)"
#define STAGE_R4	STAGE_R1 "," STAGE_R1 "," STAGE_R1 "," STAGE_R1

static const char *const manifest_st_sql[ST__MAX] = {
	[ST_BEGIN] = "BEGIN",
	[ST_BEGIN_IMM] = "BEGIN IMMEDIATE",
	[ST_COMMIT] = "COMMIT",
	[ST_ROLLBACK] = "ROLLBACK",
	[ST_STAGE_CLEAR] = "DELETE FROM temp.staging",
	[ST_STAGE_INSERT] =
	    "INSERT OR IGNORE INTO temp.staging"
	    " (path, type, size, size_exact, mtime, prec, target, checksum)"
	    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
	/* STAGE_ROWS rows in one step: one statement's overhead, not 16. */
	[ST_STAGE_INSERT_N] =
	    "INSERT OR IGNORE INTO temp.staging"
	    " (path, type, size, size_exact, mtime, prec, target, checksum)"
	    " VALUES " STAGE_R4 "," STAGE_R4 "," STAGE_R4 "," STAGE_R4,
	[ST_STAGE_COUNT] = "SELECT count(*) FROM temp.staging",
	[ST_STAGE_WALK] =
	    "SELECT path, type, mtime, prec, checksum FROM temp.staging"
	    " WHERE (type = 100 AND prec != 0) OR (?1 AND type = 102)"	/* 'd', 'f' */
	    " ORDER BY path",
	/* The direct children of ?1 (a prefix and '/', "" the root). */
	[ST_STAGE_DROP] =
	    "DELETE FROM temp.staging WHERE path >= ?1"
	    " AND (?2 IS NULL OR path < ?2)"
	    " AND instr(substr(path, length(?1) + 1), x'2f') = 0",
	/*
	 * The diff is a merge of two walks in path order (diff_staged), each
	 * the scan of its table's primary key: no seek per path.
	 */
	[ST_DIFF_STAGED] =
	    "SELECT path, type, size, size_exact, mtime, prec, target"
	    " FROM temp.staging ORDER BY path",
	[ST_DIFF_FILES] =
	    "SELECT path, type, list_size, list_size_exact, list_mtime,"
	    " list_prec, target, up_size, up_mtime, etag, local_size,"
	    " local_mtime, checksum, seen_run FROM main.files ORDER BY path",
	[ST_RUN_START] = "SELECT start_ns FROM main.runs WHERE id = ?1",
	[ST_GONE] =
	    "SELECT " FILE_COLS " FROM main.files AS f WHERE NOT EXISTS"
	    " (SELECT 1 FROM temp.staging AS s WHERE s.path = f.path)"
	    " ORDER BY f.path",
	[ST_FILE_COUNT] =
	    "SELECT count(*) FROM main.files WHERE type = 102",	/* 'f' */
	[ST_UPSERT] =
	    "INSERT INTO main.files (path, type, list_size, list_size_exact,"
	    " list_mtime, list_prec, up_size, up_mtime, etag, target,"
	    " checksum, local_size, local_mtime, seen_run, fetched_run,"
	    " sidecar)"
	    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?15, ?11,"
	    " ?12, ?13, ?14, ?16)"
	    " ON CONFLICT (path) DO UPDATE SET type = excluded.type,"
	    " list_size = excluded.list_size,"
	    " list_size_exact = excluded.list_size_exact,"
	    " list_mtime = excluded.list_mtime,"
	    " list_prec = excluded.list_prec, up_size = excluded.up_size,"
	    " up_mtime = excluded.up_mtime, etag = excluded.etag,"
	    " target = excluded.target, checksum = excluded.checksum,"
	    " sidecar = excluded.sidecar,"
	    " local_size = excluded.local_size,"
	    " local_mtime = excluded.local_mtime,"
	    " seen_run = excluded.seen_run,"
	    " fetched_run = coalesce(excluded.fetched_run, fetched_run)",
	[ST_NOT_MODIFIED] =
	    "INSERT INTO main.files (path, type, list_size, list_size_exact,"
	    " list_mtime, list_prec, up_size, up_mtime, etag, target,"
	    " local_size, local_mtime, seen_run, checksum)"
	    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13,"
	    " ?14)"
	    " ON CONFLICT (path) DO UPDATE SET type = excluded.type,"
	    " list_size = excluded.list_size,"
	    " list_size_exact = excluded.list_size_exact,"
	    " list_mtime = excluded.list_mtime,"
	    " list_prec = excluded.list_prec,"
	    " up_size = coalesce(excluded.up_size, up_size),"
	    " up_mtime = coalesce(excluded.up_mtime, up_mtime),"
	    " etag = coalesce(excluded.etag, etag),"
	    " target = excluded.target,"
	    " local_size = coalesce(excluded.local_size, local_size),"
	    " local_mtime = coalesce(excluded.local_mtime, local_mtime),"
	    " seen_run = excluded.seen_run,"
	    " checksum = coalesce(excluded.checksum, checksum)",
	[ST_TOUCHED] =
	    "UPDATE main.files SET local_mtime = coalesce(?2, local_mtime),"
	    " local_size = coalesce(?3, local_size), seen_run = ?4"
	    " WHERE path = ?1",
	[ST_DIGEST] =
	    "UPDATE main.files SET checksum = ?2"
	    " WHERE path = ?1 AND checksum IS NULL",
	[ST_DELETE] = "DELETE FROM main.files WHERE path = ?1",
	[ST_EVENT] =
	    "INSERT INTO main.events (run, seq, time_ns, path, op, reason,"
	    " bytes, net) SELECT ?1, coalesce(max(seq), 0) + 1, ?2, ?3, ?4, ?5,"
	    " ?6, ?7 FROM main.events WHERE run = ?1",
	[ST_RUN_BEGIN] =
	    "INSERT INTO main.runs (id, command, start_ns, status)"
	    " SELECT max(coalesce(max(id), 0) + 1, ?3), ?1, ?2, 'running'"
	    " FROM main.runs",
	[ST_RUN_INTERRUPTED] =
	    "UPDATE main.runs SET status = 'interrupted', error = CASE"
	    " WHEN error = '' THEN 'the run ended without recording its end"
	    " (killed, or the machine stopped)' ELSE error END"
	    " WHERE status = 'running'",
	[ST_RUN_END] =
	    "UPDATE main.runs SET end_ns = ?2, status = ?3, listed = ?4,"
	    " fetched = ?5, touched = ?6, deleted = ?7, failed = ?8,"
	    " bytes = ?9, error = ?10 WHERE id = ?1",
	[ST_RUN_NET_PUT] =
	    "INSERT OR REPLACE INTO main.runs_net (run, net, files, bytes, ns)"
	    " VALUES (?1, ?2, ?3, ?4, ?5)",
	[ST_RUN_NETS] =
	    "SELECT net, files, bytes, ns FROM main.runs_net WHERE run = ?1"
	    " ORDER BY net",
	[ST_RUNS] =
	    "SELECT " RUN_COLS " FROM main.runs ORDER BY id DESC LIMIT ?1",
	[ST_LAST_OK] =
	    "SELECT " RUN_COLS " FROM main.runs WHERE status = 'ok'"
	    " ORDER BY id DESC LIMIT 1",
	[ST_LS_ALL] = "SELECT " FILE_COLS ", " FETCHED_END
	    " FROM main.files ORDER BY path",
	[ST_LS_PREFIX] =
	    "SELECT " FILE_COLS ", " FETCHED_END
	    " FROM main.files WHERE path = ?1"
	    " OR (path >= ?2 AND path < ?3) ORDER BY path",
	[ST_EVENTS] =
	    "SELECT run, path, op, reason, bytes, time_ns, net"
	    " FROM main.events WHERE run = ?1 ORDER BY seq",
	[ST_PARTIAL_PUT] =
	    "INSERT OR REPLACE INTO main.partials (path, tmpname, size,"
	    " list_mtime, up_mtime, etag, ranges, run)"
	    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
	[ST_PARTIAL_DEL] = "DELETE FROM main.partials WHERE path = ?1",
	[ST_PARTIALS_ANY] = "SELECT EXISTS (SELECT 1 FROM main.partials)",
	[ST_PARTIALS] =
	    "SELECT path, tmpname, size, list_mtime, up_mtime, etag, ranges"
	    " FROM main.partials ORDER BY path",
	[ST_INTENT_PUT] =
	    "INSERT OR REPLACE INTO main.intents (path, list_size,"
	    " list_size_exact, list_mtime, list_prec, local_size, local_mtime)"
	    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
	[ST_INTENT_DEL] = "DELETE FROM main.intents WHERE path = ?1",
	[ST_INTENTS] =
	    "SELECT path, list_size, list_size_exact, list_mtime, list_prec,"
	    " local_size, local_mtime FROM main.intents ORDER BY path",
	[ST_INTENT_CLEAR] = "DELETE FROM main.intents",
	[ST_SIDECAR] = "UPDATE main.files SET sidecar = ?2 WHERE path = ?1",
	[ST_MISMATCH_PUT] =
	    "INSERT OR REPLACE INTO main.mismatches (path, list_size,"
	    " list_size_exact, list_mtime, list_prec, up_size, up_mtime, etag,"
	    " want, got, run) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10,"
	    " ?11)",
	[ST_MISMATCH_DEL] = "DELETE FROM main.mismatches WHERE path = ?1",
	[ST_MISMATCHES_ANY] = "SELECT EXISTS (SELECT 1 FROM main.mismatches)",
	[ST_MISMATCHES] =
	    "SELECT path, list_size, list_size_exact, list_mtime, list_prec,"
	    " up_size, up_mtime, etag, want, got, run FROM main.mismatches"
	    " ORDER BY path",
	[ST_UNCHECKED] =
	    "SELECT " FILE_COLS " FROM main.files WHERE sidecar = ?1"
	    " ORDER BY path",
	[ST_ZONE_GET] =
	    "SELECT host, offset, mdtm_local, learnt_ns, checked_ns"
	    " FROM main.zones WHERE host = ?1",
	[ST_ZONE_PUT] =
	    "INSERT OR REPLACE INTO main.zones (host, offset, mdtm_local,"
	    " learnt_ns, checked_ns) VALUES (?1, ?2, ?3, ?4, ?5)",
	[ST_ZONES] =
	    "SELECT host, offset, mdtm_local, learnt_ns, checked_ns"
	    " FROM main.zones ORDER BY host",
};

/* FILE_COLS of a schema before 4 (no files.sidecar). */
#define FILE_COLS_V3 \
	"path, type, list_size, list_size_exact, list_mtime, list_prec," \
	" up_size, up_mtime, etag, local_size, local_mtime, seen_run," \
	" fetched_run, target, checksum, NULL"

/*
 * The statements that need schema version "since" or later: a manifest
 * opened as it is (not migrated, open_any) with an older one prepares
 * "old" instead, the same columns read as nothing where the table or
 * column is missing, or nothing (NULL) for a write.
 */
static const struct {
	int		 since;
	const char	*old;
} manifest_st_old[ST__MAX] = {
	[ST_PARTIAL_PUT] = { 2, NULL },
	[ST_PARTIAL_DEL] = { 2, NULL },
	[ST_PARTIALS_ANY] = { 2, "SELECT 0" },
	[ST_PARTIALS] = { 2, "SELECT '', '', 0, 0, NULL, NULL, '' WHERE 0" },
	[ST_INTENT_PUT] = { 3, NULL },
	[ST_INTENT_DEL] = { 3, NULL },
	[ST_INTENT_CLEAR] = { 3, NULL },
	[ST_INTENTS] = { 3, "SELECT '', 0, 0, 0, 0, 0, 0 WHERE 0" },
	[ST_UPSERT] = { 4, NULL },
	[ST_SIDECAR] = { 4, NULL },
	[ST_MISMATCH_PUT] = { 4, NULL },
	[ST_MISMATCH_DEL] = { 4, NULL },
	[ST_MISMATCHES_ANY] = { 4, "SELECT 0" },
	[ST_MISMATCHES] = { 4, "SELECT '', 0, 0, 0, 0, NULL, NULL, NULL, '',"
	    " '', NULL WHERE 0" },
	[ST_GONE] = { 4, "SELECT " FILE_COLS_V3 " FROM main.files AS f WHERE"
	    " NOT EXISTS (SELECT 1 FROM temp.staging AS s WHERE s.path ="
	    " f.path) ORDER BY f.path" },
	[ST_LS_ALL] = { 4, "SELECT " FILE_COLS_V3 ", " FETCHED_END
	    " FROM main.files ORDER BY path" },
	[ST_LS_PREFIX] = { 4, "SELECT " FILE_COLS_V3 ", " FETCHED_END
	    " FROM main.files WHERE path = ?1 OR (path >= ?2 AND path < ?3)"
	    " ORDER BY path" },
	[ST_UNCHECKED] = { 4, "SELECT " FILE_COLS_V3 " FROM main.files"
	    " WHERE 0 AND ?1" },
	[ST_EVENT] = { 5, NULL },
	[ST_RUN_NET_PUT] = { 5, NULL },
	[ST_EVENTS] = { 5, "SELECT run, path, op, reason, bytes, time_ns,"
	    " NULL FROM main.events WHERE run = ?1 ORDER BY seq" },
	[ST_RUN_NETS] = { 5, "SELECT '', 0, 0, 0 WHERE 0 AND ?1" },
	[ST_ZONE_PUT] = { 6, NULL },
	[ST_ZONE_GET] = { 6, "SELECT ?1, 0, 0, 0, 0 WHERE 0" },
	[ST_ZONES] = { 6, "SELECT '', 0, 0, 0, 0 WHERE 0" },
};

struct manifest {
	sqlite3		*db;		/* owned: the connection */
	char		*path;		/* owned: the database file name */
	sqlite3_stmt	*st[ST__MAX];	/* owned: prepared at open */
	char		 err[512];	/* last error "PATH: reason", or "" */
	int		 src;		/* last SQLite result code (db_fail) */
	int		 fault;		/* BM_ECORRUPT, BM_ENOSPC once
					   SQLite said so (db_fail), or 0 */
	bool		 readonly;	/* opened read-only: no set-up writes */
	bool		 as_is;		/* never migrated (a reading open) */
	int64_t		 version;	/* schema version as opened */
	int64_t		 run_floor;	/* lowest id of a new run, 0 none */
	char		 warn[1024];	/* a warning of open ("" none) */
	char		*wal_copy;	/* owned: a kept copy of a WAL that
					   could not be read, NULL none */
	/*
	 * In manifest_commit's transaction: partials or mismatches known
	 * to hold no row, so a record's delete of its row is skipped (two
	 * statements per fetched file saved: both are empty but after
	 * trouble).  False outside it.
	 */
	bool		 no_partials;
	bool		 no_mismatches;
	/*
	 * The deferred quick_check (manifest_open_run): asked for, and the
	 * file fit for it (WAL header, current schema, no -wal before);
	 * its thread running (chk_run); its outcome (chk_rc, chk_err).
	 * Until it is joined sound, nothing is checkpointed into the file
	 * (autocheckpoint off, no checkpoint at close); found damaged
	 * (chk_bad), the close removes the -wal and -shm this open made.
	 */
	bool		 defer;
	bool		 hdr_wal;	/* the header says WAL (bytes 18, 19) */
	bool		 had_wal;	/* a -wal was there before the open */
	bool		 chk_run;
	bool		 chk_bad;
	bool		 chk_ckpt;	/* sound: checkpoint at close */
	pthread_t	 chk;
	int		 chk_rc;
	char		 chk_err[512];
	/*
	 * The check stamp (see STAMP_XATTR): when the last full check was
	 * (checked, Unix seconds; 0 none known); the file found sound this
	 * run, by the stamp or a check, so the close may stamp what it
	 * leaves (sound).
	 */
	bool		 sound;
	bool		 paths_sound;	/* every files row's path scanned and
					   found sound on this connection
					   (manifest_check_paths_all) */
	int64_t		 checked;
	char		 stamp_want[DIGEST_TEXT_MAX];	/* a fresh stamp's
					   digest, not yet compared ("" none) */
	bool		 chk_stamped;	/* the deferred check found it stamped */
	/*
	 * What a close may vouch for (writers): the file's ctime when the
	 * open read it, or after this connection's last checkpoint (ct;
	 * ct_known): a file whose ctime is still that when the close begins
	 * was written by nothing but this run's checkpoints.  autockpt:
	 * wal_hook checkpoints (SQLite's autocheckpoint, off until a
	 * deferred check says the file is sound).
	 */
	bool		 want_ct;
	bool		 ct_known;
	struct timespec	 ct;
	bool		 autockpt;
};

/*
 * The check stamp: an extended attribute on the manifest, "sha256:HEX
 * UNIX": the SHA-256 of the whole file as a writer's close left it (no
 * -wal beside it) and when quick_check last read it whole.  An open that
 * finds the file's digest equal, within STAMP_MAX_S of that check,
 * skips quick_check: any write by another program, a restored copy, a
 * damaged sector changes the digest.  No attribute (a file system
 * without user xattrs, a copied file): every open checks.
 */
#define STAMP_XATTR	"user.biomirror.check"
#define STAMP_MAX_S	(7 * 86400)

static bool	stamp_verify(const struct manifest *);

/*
 * The library's settings, once, before its first use: no memory
 * statistics (SQLITE_CONFIG_MEMSTATUS: nothing here reads them, and
 * each allocation took a global mutex for them).  Ignored (SQLITE_MISUSE)
 * when something initialised SQLite first.
 */
static pthread_once_t	db_lib_once = PTHREAD_ONCE_INIT;

static void
db_lib_init(void)
{
	(void)sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

/*
 * Every connection of this file is opened here: sqlite3_open_v2(path,
 * flags) in multi-thread mode (SQLITE_OPEN_NOMUTEX: no mutex per API
 * call).  That holds because a connection is used by one thread at a
 * time: the opener's, the deferred check's own (check_main), or the
 * scheduler's committer while it holds a batch (agent/sched/sched.c,
 * "The manifest is the committer thread's while it has a batch").
 * Returns an SQLite code; *db may be set on failure (sqlite3_close it).
 */
static int
db_open(const char *path, sqlite3 **db, int flags)
{
	(void)pthread_once(&db_lib_once, db_lib_init);
	return sqlite3_open_v2(path, db, flags | SQLITE_OPEN_NOMUTEX, NULL);
}

/* Map an SQLite result code to a BM_E* code. */
static int
db_code(int src)
{
	return (src & 0xff) == SQLITE_NOMEM ? BM_ENOMEM : BM_EDB;
}

/*
 * Record "PATH: reason" (the connection's message) as the last error, and
 * whether it says the file is damaged or the disk full (manifest_fault).
 */
static int
db_fail(struct manifest *m, int src)
{
	const char	*msg;
	int		 c = src & 0xff, e = 0;

	msg = m->db != NULL ? sqlite3_errmsg(m->db) : sqlite3_errstr(src);
	(void)snprintf(m->err, sizeof(m->err), "%s: %s", m->path, msg);
	/* A write an as-is older schema has no statement for. */
	if (c == SQLITE_MISUSE && m->as_is && m->version > 0 &&
	    m->version < MANIFEST_VERSION)
		(void)snprintf(m->err, sizeof(m->err), "%s: not written: "
		    "schema version %lld, opened as it is (a sync migrates "
		    "it)", m->path, (long long)m->version);
	m->src = src;
	/* "disk I/O error" when the WAL index could not grow, say. */
	if (m->db != NULL && (c == SQLITE_IOERR || c == SQLITE_CANTOPEN))
		e = sqlite3_system_errno(m->db);
	/*
	 * A header whose schema format (byte 44) or file format bytes are
	 * garbage is SQLITE_ERROR "unsupported file format": as damaged.
	 */
	if (c == SQLITE_CORRUPT || c == SQLITE_NOTADB || (c == SQLITE_ERROR &&
	    strcmp(msg, "unsupported file format") == 0))
		m->fault = BM_ECORRUPT;
	else if ((c == SQLITE_FULL || e == ENOSPC || e == EDQUOT) &&
	    m->fault == 0)
		m->fault = BM_ENOSPC;
	return db_code(src);
}

/*
 * db_fail() for SQL of the schema itself (a migration step, a statement
 * prepared at open): one that fails as an SQL error ("no such table:
 * main.files") means the tables are not what the schema version says,
 * a damaged manifest (BM_ECORRUPT).
 */
static int
schema_fail(struct manifest *m, int src)
{
	int	 rc = db_fail(m, src);

	if ((src & 0xff) != SQLITE_ERROR)
		return rc;
	(void)snprintf(m->err, sizeof(m->err), "%s: damaged schema: %s",
	    m->path, sqlite3_errmsg(m->db));
	m->fault = BM_ECORRUPT;
	return BM_ECORRUPT;
}

/*
 * Reset a hot statement after use and drop its (borrowed) bindings.  NULL
 * (a write an as-is older schema lacks, manifest_st_old) is a no-op.
 */
static void
st_done(sqlite3_stmt *st)
{
	if (st == NULL)
		return;
	(void)sqlite3_reset(st);	/* step errors are handled */
	(void)sqlite3_clear_bindings(st);
}

/* Bind bytes of a C string as a BLOB (NULL s binds NULL). */
static int
bind_path(sqlite3_stmt *st, int i, const char *s)
{
	if (s == NULL)
		return sqlite3_bind_null(st, i);
	return sqlite3_bind_blob(st, i, s, (int)strlen(s), SQLITE_STATIC);
}

/* Bind a text value, NULL s binds NULL. */
static int
bind_text(sqlite3_stmt *st, int i, const char *s)
{
	if (s == NULL)
		return sqlite3_bind_null(st, i);
	return sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC);
}

/* Bind an optional integer: -1 (unknown) is stored as NULL. */
static int
bind_opt(sqlite3_stmt *st, int i, int64_t v)
{
	if (v == -1)
		return sqlite3_bind_null(st, i);
	return sqlite3_bind_int64(st, i, v);
}

/* Read an optional integer column: NULL reads as -1. */
static int64_t
col_opt(sqlite3_stmt *st, int i)
{
	if (sqlite3_column_type(st, i) == SQLITE_NULL)
		return -1;
	return sqlite3_column_int64(st, i);
}

/* Read a BLOB or TEXT column as NUL-terminated bytes (NULL for NULL). */
static const char *
col_str(sqlite3_stmt *st, int i, size_t *ret_len)
{
	const char	*s;

	if (sqlite3_column_type(st, i) == SQLITE_NULL) {
		if (ret_len != NULL)
			*ret_len = 0;
		return NULL;
	}
	s = (const char *)sqlite3_column_text(st, i);
	if (ret_len != NULL)
		*ret_len = (size_t)sqlite3_column_bytes(st, i);
	return s != NULL ? s : "";
}

/* Copy a text column into a fixed buffer, truncating. */
static void
col_copy(sqlite3_stmt *st, int i, char *buf, size_t bufsz)
{
	const char	*s;

	s = col_str(st, i, NULL);
	(void)snprintf(buf, bufsz, "%s", s != NULL ? s : "");
}

/*
 * Run every statement of a constant SQL script (DDL, pragmas), stepping
 * each to SQLITE_DONE and ignoring rows.  Returns an SQLite code.
 */
static int
db_exec_script(sqlite3 *db, const char *sql)
{
	sqlite3_stmt	*st = NULL;
	const char	*tail = sql;
	int		 src = SQLITE_OK;

	while (tail != NULL && *tail != '\0') {
		src = sqlite3_prepare_v2(db, tail, -1, &st, &tail);
		if (src != SQLITE_OK)
			goto out;
		if (st == NULL)		/* whitespace or comment only */
			continue;
		while ((src = sqlite3_step(st)) == SQLITE_ROW)
			continue;
		if (src != SQLITE_DONE)
			goto out;
		(void)sqlite3_finalize(st);
		st = NULL;
	}
	src = SQLITE_OK;
out:
	/* finalize would overwrite the error message with nothing new */
	(void)sqlite3_finalize(st);
	return src;
}

/* Read the single integer result of a query (a pragma). */
static int
db_query_int(sqlite3 *db, const char *sql, int64_t *ret)
{
	sqlite3_stmt	*st = NULL;
	int		 src;

	src = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
	if (src != SQLITE_OK)
		goto out;
	src = sqlite3_step(st);
	if (src != SQLITE_ROW)
		goto out;
	*ret = sqlite3_column_int64(st, 0);
	src = SQLITE_OK;
out:
	(void)sqlite3_finalize(st);
	return src;
}

/*
 * Decide what the open file is: *ret_version is its schema version, 0 for
 * an empty database that may be initialized.  The first read here is
 * where a non-database, corrupt or locked file fails.
 */
static int
manifest_identify(struct manifest *m, int64_t *ret_version)
{
	int64_t	 app_id = 0, version = 0, nobj = 0;
	int	 src;

	if ((src = db_query_int(m->db, "PRAGMA application_id",
	    &app_id)) != SQLITE_OK ||
	    (src = db_query_int(m->db, "PRAGMA user_version",
	    &version)) != SQLITE_OK ||
	    (src = db_query_int(m->db, "SELECT count(*) FROM sqlite_master",
	    &nobj)) != SQLITE_OK)
		return db_fail(m, src);
	if (app_id == 0 && version == 0 && nobj == 0) {
		*ret_version = 0;
		return 0;
	}
	if (app_id != MANIFEST_APP_ID || version < 1) {
		/* Damaged for us: resync --adopt moves it aside. */
		(void)snprintf(m->err, sizeof(m->err),
		    "%s: not a biomirror manifest (application_id 0x%08llx)",
		    m->path, (unsigned long long)(uint32_t)app_id);
		m->fault = BM_ECORRUPT;
		return BM_ECORRUPT;
	}
	if (version > MANIFEST_VERSION) {
		(void)snprintf(m->err, sizeof(m->err), "%s: manifest schema "
		    "version %lld is newer than this biomirror knows (%d)",
		    m->path, (long long)version, MANIFEST_VERSION);
		return BM_EDB;
	}
	*ret_version = version;
	return 0;
}

/*
 * Bring the schema to MANIFEST_VERSION in one IMMEDIATE transaction,
 * re-identifying under the write lock in case another connection
 * migrated first.
 */
static int
manifest_migrate(struct manifest *m)
{
	int64_t	 version = 0;
	int	 rc = BM_EDB, src, intx = 0;

	if ((src = db_exec_script(m->db, "BEGIN IMMEDIATE")) != SQLITE_OK) {
		rc = db_fail(m, src);
		goto out;
	}
	intx = 1;
	if ((rc = manifest_identify(m, &version)) != 0)
		goto out;
	for (; version < MANIFEST_VERSION; version++) {
		src = db_exec_script(m->db, manifest_migrations[version]);
		if (src != SQLITE_OK) {
			rc = schema_fail(m, src);
			goto out;
		}
	}
	if ((src = db_query_int(m->db, "PRAGMA user_version",
	    &version)) != SQLITE_OK) {
		rc = db_fail(m, src);
		goto out;
	}
	if (version != MANIFEST_VERSION) {
		(void)snprintf(m->err, sizeof(m->err),
		    "%s: migration left schema version %lld", m->path,
		    (long long)version);
		rc = BM_EDB;
		goto out;
	}
	if ((src = db_exec_script(m->db, "COMMIT")) != SQLITE_OK) {
		rc = db_fail(m, src);
		goto out;
	}
	intx = 0;
	rc = 0;
out:
	if (intx)
		(void)db_exec_script(m->db, "ROLLBACK");
	return rc;
}

/*
 * Why a files row's path (SQLite type, n bytes at p) is one no run
 * could have committed (bind_path binds a BLOB of a path_is_safe path,
 * which has no NUL): PATH_NOT_BLOB or PATH_UNSAFE, or NULL.
 */
static const char *
path_row_fault(int type, const void *p, size_t n)
{
	if (type != SQLITE_BLOB)
		return PATH_NOT_BLOB;
	if (p == NULL || memchr(p, '\0', n) != NULL || !path_is_safe(p, n))
		return PATH_UNSAFE;
	return NULL;
}

/* m's file is damaged: a files row's path (why).  BM_ECORRUPT. */
static int
paths_damaged(struct manifest *m, const char *why)
{
	(void)snprintf(m->err, sizeof(m->err), "%s: %s", m->path, why);
	m->fault = BM_ECORRUPT;
	return BM_ECORRUPT;
}

/*
 * Is every files row's path a BLOB?  Only another program writes one
 * that is not (bind_path binds BLOBs), and no staged path could ever
 * match it (the run would fetch the file as new and delete it as gone,
 * every run).  SQLite orders a column's values NULL, numbers, TEXT,
 * BLOB, so the first row in path order (one descent of the table's
 * b-tree, no scan) is not a BLOB when any row is not.  0, or
 * BM_ECORRUPT (PATH_NOT_BLOB: resync --adopt rebuilds) or BM_E* with
 * m->err.
 */
static int
manifest_check_paths(struct manifest *m)
{
	sqlite3_stmt	*st = NULL;
	int		 rc = 0, src;

	/* main.files: a dropped table is named as manifest_prepare does. */
	if ((src = sqlite3_prepare_v2(m->db, "SELECT path FROM main.files "
	    "ORDER BY path LIMIT 1", -1, &st, NULL)) != SQLITE_OK) {
		rc = schema_fail(m, src);
		goto out;
	}
	if ((src = sqlite3_step(st)) == SQLITE_ROW &&
	    sqlite3_column_type(st, 0) != SQLITE_BLOB)
		rc = paths_damaged(m, PATH_NOT_BLOB);
	else if (src != SQLITE_ROW && src != SQLITE_DONE)
		rc = db_fail(m, src);	/* m->fault says when damaged */
out:
	(void)sqlite3_finalize(st);
	return rc;
}

/* See manifest.h; once per connection (the open's check may have). */
int
manifest_check_paths_all(struct manifest *m)
{
	sqlite3_stmt	*st = NULL;
	const char	*why;
	int		 rc = 0, src;

	if (m->paths_sound)
		return 0;
	if ((src = sqlite3_prepare_v2(m->db, "SELECT path FROM main.files",
	    -1, &st, NULL)) != SQLITE_OK) {
		rc = schema_fail(m, src);
		goto out;
	}
	while ((src = sqlite3_step(st)) == SQLITE_ROW)
		if ((why = path_row_fault(sqlite3_column_type(st, 0),
		    sqlite3_column_blob(st, 0),
		    (size_t)sqlite3_column_bytes(st, 0))) != NULL) {
			rc = paths_damaged(m, why);
			goto out;
		}
	if (src != SQLITE_DONE)
		rc = db_fail(m, src);
	else
		m->paths_sound = true;
out:
	(void)sqlite3_finalize(st);
	return rc == BM_EDB && m->fault == BM_ECORRUPT ? BM_ECORRUPT : rc;
}

/*
 * PRAGMA quick_check(1): every page of every b-tree read and checked
 * (not index against table), stopping at the first fault; about 0.1 s a
 * 100 MB file; then every committed path (manifest_check_paths_all).
 * 0, or BM_ECORRUPT with "PATH: quick_check: FAULT" (or the paths'
 * fault).
 */
static int
manifest_check(struct manifest *m)
{
	static const char banner[] = "*** in database main ***\n";
	sqlite3_stmt	*st = NULL;
	const char	*res;
	char		*nl;
	int		 rc = BM_EDB, src;

	if ((src = sqlite3_prepare_v2(m->db, "PRAGMA quick_check(1)", -1,
	    &st, NULL)) != SQLITE_OK || (src = sqlite3_step(st)) !=
	    SQLITE_ROW) {
		rc = db_fail(m, src);
		goto out;
	}
	res = (const char *)sqlite3_column_text(st, 0);
	if (res == NULL || strcmp(res, "ok") != 0) {
		if (res != NULL &&
		    strncmp(res, banner, sizeof(banner) - 1) == 0)
			res += sizeof(banner) - 1;
		(void)snprintf(m->err, sizeof(m->err), "%s: quick_check: %s",
		    m->path, res != NULL ? res : "failed");
		/* One line: the first fault. */
		if ((nl = strchr(m->err, '\n')) != NULL)
			*nl = '\0';
		m->fault = BM_ECORRUPT;
		goto out;
	}
	rc = manifest_check_paths_all(m);
out:
	(void)sqlite3_finalize(st);
	return rc == BM_EDB && m->fault == BM_ECORRUPT ? BM_ECORRUPT : rc;
}

/*
 * The deferred check's thread: manifest_check() on a read-only
 * connection of its own (SQLite connections in two threads), its outcome
 * in m->chk_rc and m->chk_err.  BM_EDB there (no second connection, say)
 * is not a verdict: manifest_check_join() then checks on m's own.
 */
static void *
check_main(void *arg)
{
	struct manifest	*m = arg, c;
	int		 src;

	m->chk_stamped = stamp_verify(m);
	if (m->chk_stamped) {
		m->chk_rc = 0;
		return NULL;
	}
	memset(&c, 0, sizeof(c));
	c.path = m->path;
	src = db_open(m->path, &c.db, SQLITE_OPEN_READONLY);
	if (src == SQLITE_OK) {
		(void)sqlite3_db_config(c.db,
		    SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL);
		(void)sqlite3_extended_result_codes(c.db, 1);
		(void)sqlite3_busy_timeout(c.db, MANIFEST_BUSY_MS);
		m->chk_rc = manifest_check(&c);
	} else
		m->chk_rc = BM_EDB;
	(void)snprintf(m->chk_err, sizeof(m->chk_err), "%s", c.err);
	(void)sqlite3_close(c.db);
	return NULL;
}

/*
 * Note the file's ctime (fd, or m->path when fd is -1) as what this run
 * left it (ct): at the open, and after each of its checkpoints.
 */
static void
ct_note(struct manifest *m, int fd)
{
	struct stat	 sb;

	m->ct_known = m->want_ct && (fd != -1 ? fstat(fd, &sb) :
	    stat(m->path, &sb)) == 0;
	if (m->ct_known)
		m->ct = sb.st_ctim;
}

/*
 * sqlite3_wal_hook: SQLite's autocheckpoint (a passive checkpoint once
 * the WAL holds 1,000 pages, its default), noting that the file changed.
 */
static int
wal_hook(void *arg, sqlite3 *db, const char *name, int frames)
{
	struct manifest	*m = arg;

	if (m->autockpt && frames >= 1000) {
		(void)sqlite3_wal_checkpoint_v2(db, name,
		    SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
		ct_note(m, -1);
	}
	return SQLITE_OK;
}

/*
 * Start the deferred check when m may take one (see struct manifest):
 * true when it runs, false to check now.
 */
static bool
check_defer(struct manifest *m, int64_t version)
{
	if (!m->defer || !m->hdr_wal || m->had_wal || m->readonly ||
	    m->as_is || version != MANIFEST_VERSION || m->wal_copy != NULL)
		return false;
	if (pthread_create(&m->chk, NULL, check_main, m) != 0)
		return false;
	m->chk_run = true;
	/* Nothing reaches the file before the check says it is sound. */
	m->autockpt = false;
	return true;
}

/*
 * Wait for the deferred check of manifest_open_run (see manifest.h).
 * 0 (sound, or no check deferred), BM_ECORRUPT with m->err, or what
 * manifest_check() on m's own connection returns when the thread could
 * not judge.  Again after a verdict: the same verdict.
 */
int
manifest_check_join(struct manifest *m)
{
	int	 rc;

	if (m == NULL)
		return 0;
	if (!m->chk_run)
		return m->chk_bad ? BM_ECORRUPT : 0;
	(void)pthread_join(m->chk, NULL);
	m->chk_run = false;
	if ((rc = m->chk_rc) == BM_EDB)
		rc = manifest_check(m);
	else if (rc != 0) {
		(void)snprintf(m->err, sizeof(m->err), "%s", m->chk_err);
		m->fault = BM_ECORRUPT;
	}
	if (rc != 0) {
		m->chk_bad = true;
		m->sound = false;
		return rc == BM_EDB && m->fault == BM_ECORRUPT ? BM_ECORRUPT :
		    rc;
	}
	m->chk_ckpt = true;
	m->sound = true;
	if (!m->chk_stamped)
		m->checked = (int64_t)time(NULL);
	m->autockpt = true;
	return 0;
}

/*
 * Validate, migrate and set up an open connection (statements: see
 * manifest_prepare).  0 or BM_E* (m->err).
 */
static int
manifest_setup(struct manifest *m)
{
	int64_t	 version = 0;
	int	 rc, src;

	if ((rc = manifest_identify(m, &version)) != 0)
		return rc;
	if (version == 0) {
		/* A new manifest is renamed into place with its schema. */
		(void)snprintf(m->err, sizeof(m->err), "%s: an empty database "
		    "(no manifest tables in it)", m->path);
		return BM_ECORRUPT;
	}
	if (!check_defer(m, version)) {
		/*
		 * As the last close left it, or checked now; the paths
		 * always (one b-tree descent): resync --adopt then finds
		 * their damage at its open, as what it rebuilds.
		 */
		if (m->had_wal || m->wal_copy != NULL || !stamp_verify(m)) {
			if ((rc = manifest_check(m)) != 0)
				return rc;
			m->checked = (int64_t)time(NULL);
		} else if ((rc = manifest_check_paths(m)) != 0)
			return rc;
		m->sound = true;
	}
	m->version = version;
	if (m->readonly && !m->as_is && version < MANIFEST_VERSION) {
		(void)snprintf(m->err, sizeof(m->err), "%s: schema version "
		    "%lld, read-only here: a run with write access to the "
		    "file migrates it", m->path, (long long)version);
		return BM_EDB;
	}
	/* Only now that the file is ours (or empty) may anything write it. */
	if (!m->readonly && !m->as_is && (src = db_exec_script(m->db,
	    "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;")) !=
	    SQLITE_OK)
		return db_fail(m, src);
	/* A header that said otherwise was just rewritten, by us. */
	if (!m->readonly && !m->as_is && !m->hdr_wal)
		ct_note(m, -1);
	/* Only a writer migrates; an as-is open reads the old schema. */
	if (!m->as_is && version < MANIFEST_VERSION) {
		if ((rc = manifest_migrate(m)) != 0)
			return rc;
		m->version = MANIFEST_VERSION;
	}
	if ((src = db_exec_script(m->db, manifest_temp_sql)) != SQLITE_OK ||
	    (src = db_exec_script(m->db, manifest_staging_sql)) != SQLITE_OK)
		return db_fail(m, src);
	return 0;
}

/*
 * Prepare every statement of a set-up connection: a table or column
 * the schema lacks is a damaged schema (BM_ECORRUPT).  Called after the
 * last sqlite3_db_config() flag change, which expires (re-prepares on
 * next use) every prepared statement.
 */
static int
manifest_prepare(struct manifest *m)
{
	const char	*sql;
	int		 i, src;

	for (i = 0; i < ST__MAX; i++) {
		sql = manifest_st_sql[i];
		if (m->version < manifest_st_old[i].since &&
		    (sql = manifest_st_old[i].old) == NULL)
			continue;	/* a write the old schema cannot take */
		src = sqlite3_prepare_v3(m->db, sql, -1,
		    SQLITE_PREPARE_PERSISTENT, &m->st[i], NULL);
		if (src != SQLITE_OK)
			return schema_fail(m, src);
	}
	return 0;
}

/*
 * "file:" URI of path opened immutable (RFC 8089 file URI; SQLite's URI
 * filenames, https://sqlite.org/uri.html): '%', '?' and '#' escaped.
 * NULL when out of memory.
 */
static char *
immutable_uri(const char *path)
{
	static const char hex[] = "0123456789ABCDEF";
	char		*u;
	const char	*p;
	size_t		 n, len = strlen(path) * 3 + sizeof("file:?immutable=1");

	if ((u = malloc(len)) == NULL)
		return NULL;
	n = (size_t)snprintf(u, len, "file:");
	for (p = path; *p != '\0'; p++)
		if (*p == '%' || *p == '?' || *p == '#') {
			u[n++] = '%';
			u[n++] = hex[(unsigned char)*p >> 4];
			u[n++] = hex[(unsigned char)*p & 15];
		} else
			u[n++] = *p;
	(void)snprintf(u + n, len - n, "?immutable=1");
	return u;
}

/*
 * Would a reader's failed open succeed immutable?  When the file could
 * only be opened read-only, or its WAL index (PATH-shm) could not be made
 * (a read-only directory, a full disk), and no PATH-wal holds commits
 * the file lacks (none, or an empty one): reading the file alone then
 * gives every commit.
 */
static bool
open_immutable_ok(struct manifest *m)
{
	struct stat	 sb;
	char		 wal[PATH_MAX];
	size_t		 n;
	int		 c = m->src & 0xff;

	if (c != SQLITE_CANTOPEN && c != SQLITE_READONLY && c != SQLITE_IOERR &&
	    c != SQLITE_FULL)
		return false;
	if (snprintf(wal, sizeof(wal), "%s-wal", m->path) >= (int)sizeof(wal))
		return false;
	/* The failed open itself may have made an empty one. */
	if (stat(wal, &sb) == -1)
		return errno == ENOENT;
	if (S_ISREG(sb.st_mode) && sb.st_size == 0)
		return true;
	/*
	 * Commits only a writer can apply (a run killed with its WAL
	 * index gone): say so, "unable to open database file" alone
	 * names a file the caller can read.
	 */
	n = strlen(m->err);
	(void)snprintf(m->err + n, sizeof(m->err) - n, " (%s holds commits "
	    "not yet in the file, which only a process that may write the "
	    "state directory can apply: any biomirror command run as the "
	    "manifest's owner does)", wal);
	return false;
}

/* 32-bit word i of a WAL page or header: big-endian, or little (le). */
static uint32_t
wal_word(const uint8_t *p, size_t i, bool le)
{
	p += 4 * i;
	if (le)
		return (uint32_t)p[0] | (uint32_t)p[1] << 8 |
		    (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	    (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/*
 * SQLite's WAL checksum of n bytes (a multiple of 8), continuing s[2]
 * (https://sqlite.org/fileformat.html, "Checksum Algorithm").
 */
static void
wal_sum(const uint8_t *p, size_t n, bool le, uint32_t s[2])
{
	size_t	 i;

	for (i = 0; i < n / 4; i += 2) {
		s[0] += wal_word(p, i, le) + s[1];
		s[1] += wal_word(p, i + 1, le) + s[0];
	}
}

/*
 * Would SQLite read the WAL open at fd (borrowed; size bytes, > 0): a
 * sound header and first frame (salts and checksums as SQLite's recovery
 * checks them)?  NULL when it would (a header alone holds nothing), else
 * what is wrong (a static string).
 */
static const char *
wal_fault(int fd, int64_t size)
{
	uint8_t		 hdr[32], fh[24], *page = NULL;
	uint32_t	 s[2] = { 0, 0 }, magic, pgsz;
	const char	*why = "a bad header";
	bool		 le;

	if (size < 32 || pread(fd, hdr, 32, 0) != 32)
		goto out;
	magic = wal_word(hdr, 0, false);
	pgsz = wal_word(hdr, 2, false);
	le = magic == 0x377f0682;
	if ((magic != 0x377f0682 && magic != 0x377f0683) ||
	    wal_word(hdr, 1, false) != 3007000 || pgsz < 512 ||
	    pgsz > 65536 || (pgsz & (pgsz - 1)) != 0)
		goto out;
	wal_sum(hdr, 24, le, s);
	if (s[0] != wal_word(hdr, 6, false) || s[1] != wal_word(hdr, 7, false))
		goto out;
	why = NULL;
	if (size == 32)
		goto out;
	why = "a bad first frame";
	if (size < 32 + 24 + (int64_t)pgsz || (page = malloc(pgsz)) == NULL ||
	    pread(fd, fh, 24, 32) != 24 || pread(fd, page, pgsz, 56) !=
	    (ssize_t)pgsz)
		goto out;
	wal_sum(fh, 8, le, s);
	wal_sum(page, pgsz, le, s);
	if (wal_word(fh, 0, false) != 0 && memcmp(fh + 8, hdr + 16, 8) == 0 &&
	    s[0] == wal_word(fh, 4, false) && s[1] == wal_word(fh, 5, false))
		why = NULL;
out:
	free(page);
	return why;
}

/*
 * A free name "base.corrupt-YYYYMMDDTHHMMSSZ" (UTC; "-N" added should
 * that exist) into ret (len bytes).  0, or ENAMETOOLONG or lstat's errno.
 */
static int
aside_name(const char *base, char *ret, size_t len)
{
	struct stat	 sb;
	struct tm	 tm;
	time_t		 now = time(NULL);
	char		 ts[32];
	int		 n;

	if (gmtime_r(&now, &tm) == NULL ||
	    strftime(ts, sizeof(ts), "%Y%m%dT%H%M%SZ", &tm) == 0)
		return ENAMETOOLONG;
	for (n = 1; n < 100; n++) {
		if ((n == 1 ? snprintf(ret, len, "%s.corrupt-%s", base, ts) :
		    snprintf(ret, len, "%s.corrupt-%s-%d", base, ts, n)) >=
		    (int)len)
			return ENAMETOOLONG;
		if (lstat(ret, &sb) == -1)
			return errno == ENOENT ? 0 : errno;
	}
	return ENAMETOOLONG;
}

/* Copy the open file in (size bytes) to the new file to.  0 or errno. */
static int
copy_file(int in, int64_t size, const char *to)
{
	char		 buf[65536];
	ssize_t		 n = 0;
	int64_t		 off;
	int		 out, e = 0;

	if ((out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC |
	    O_NOFOLLOW, 0600)) == -1)
		return errno;
	for (off = 0; off < size && e == 0; off += n) {
		if ((n = pread(in, buf, sizeof(buf), (off_t)off)) <= 0)
			e = n == 0 ? EIO : errno;
		else if (write(out, buf, (size_t)n) != n)
			e = errno != 0 ? errno : ENOSPC;
	}
	if (e == 0 && fsync(out) == -1)
		e = errno;
	(void)close(out);
	if (e != 0)
		(void)unlink(to);
	return e;
}

/*
 * Look at m->path's -wal before SQLite opens it: *ret_had says whether
 * there is one.  One that is not empty but SQLite cannot read (a bad
 * header or first frame: it would read the file without it, and a
 * writer would overwrite it) goes into m->warn; with keep (a writer) a
 * copy is kept as PATH-wal.corrupt-TIMESTAMP (m->wal_copy), which the
 * warning names.  0, or BM_E* with m->err (a copy that failed).
 */
static int
wal_inspect(struct manifest *m, bool keep, bool *ret_had)
{
	struct stat	 sb;
	char		 wal[PATH_MAX], copy[PATH_MAX];
	const char	*why;
	int		 fd = -1, e = 0, rc = BM_EIO;

	*ret_had = false;
	if (snprintf(wal, sizeof(wal), "%s-wal", m->path) >= (int)sizeof(wal))
		return 0;	/* SQLite fails on the name itself */
	if ((fd = open(wal, O_RDONLY | O_CLOEXEC | O_NOFOLLOW |
	    O_NONBLOCK)) == -1 || fstat(fd, &sb) == -1) {
		*ret_had = errno != ENOENT;
		rc = 0;
		goto out;
	}
	*ret_had = true;
	rc = 0;
	if (!S_ISREG(sb.st_mode) || sb.st_size == 0 ||
	    (why = wal_fault(fd, sb.st_size)) == NULL)
		goto out;
	if (keep && ((e = aside_name(wal, copy, sizeof(copy))) != 0 ||
	    (e = copy_file(fd, sb.st_size, copy)) != 0)) {
		(void)snprintf(m->err, sizeof(m->err), "%s-wal: %s: keep a "
		    "copy: %s", m->path, why, strerror(e));
		if (e == ENOSPC || e == EDQUOT)
			m->fault = BM_ENOSPC;
		rc = BM_EIO;
		goto out;
	}
	if (keep && (m->wal_copy = strdup(copy)) == NULL) {
		(void)unlink(copy);
		rc = BM_ENOMEM;
		goto out;
	}
	(void)snprintf(m->warn, sizeof(m->warn), "%s-wal: %s: the commits in "
	    "it, if any, cannot be read, and the manifest is read without "
	    "them; %s%s", m->path, why, keep ? "a copy is kept as " :
	    "it is left as it is", keep ? m->wal_copy : "");
out:
	if (fd != -1)
		(void)close(fd);
	return rc;
}

/* unlink(2) base + suffix, a missing file being fine.  0 or errno. */
static int
unlink_sfx(const char *base, const char *suffix)
{
	char	 p[PATH_MAX];

	if (snprintf(p, sizeof(p), "%s%s", base, suffix) >= (int)sizeof(p))
		return ENAMETOOLONG;
	return unlink(p) == -1 && errno != ENOENT ? errno : 0;
}

/* fsync(2) the directory that holds path.  0 or errno. */
static int
fsync_parent(const char *path)
{
	char		 dir[PATH_MAX];
	char		*slash;
	int		 fd, e = 0;

	if (snprintf(dir, sizeof(dir), "%s", path) >= (int)sizeof(dir))
		return ENAMETOOLONG;
	if ((slash = strrchr(dir, '/')) == NULL)
		(void)snprintf(dir, sizeof(dir), ".");
	else
		slash[slash == dir ? 1 : 0] = '\0';
	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1)
		return errno;
	if (fsync(fd) == -1)
		e = errno;
	(void)close(fd);
	return e;
}

/*
 * Make a new manifest at m->path: the schema is committed in PATH.new
 * (a rollback journal, synchronous = FULL: durable at COMMIT), which is
 * then renamed to PATH, so that a run killed meanwhile leaves no PATH.
 * What a killed creation left under PATH.new goes first, and so does a
 * PATH-wal or PATH-shm without its PATH (SQLite would read that WAL into
 * the new file).  The caller holds the run lock.  0 or BM_E* (m->err).
 */
static int
manifest_create(struct manifest *m)
{
	static const char *const sfx[] = { "-journal", "-wal", "-shm", "" };
	char		 tmp[PATH_MAX];
	size_t		 i;
	int		 rc = BM_EDB, src, e = 0;

	if (snprintf(tmp, sizeof(tmp), "%s.new", m->path) >= (int)sizeof(tmp)) {
		e = ENAMETOOLONG;
		goto out;
	}
	for (i = 0; i < sizeof(sfx) / sizeof(sfx[0]) && e == 0; i++)
		e = unlink_sfx(tmp, sfx[i]);
	for (i = 1; i < 3 && e == 0; i++)
		e = unlink_sfx(m->path, sfx[i]);
	if (e != 0)
		goto out;
	src = db_open(tmp, &m->db, SQLITE_OPEN_READWRITE |
	    SQLITE_OPEN_CREATE);
	if (src != SQLITE_OK) {
		rc = db_fail(m, src);
		goto out;
	}
	(void)sqlite3_extended_result_codes(m->db, 1);
	(void)sqlite3_busy_timeout(m->db, MANIFEST_BUSY_MS);
	if ((rc = manifest_migrate(m)) != 0)
		goto out;
	rc = BM_EDB;
	if ((src = sqlite3_close(m->db)) != SQLITE_OK) {
		rc = db_fail(m, src);
		goto out;
	}
	m->db = NULL;
	if (rename(tmp, m->path) == -1 || (e = fsync_parent(m->path)) != 0) {
		e = e != 0 ? e : errno;
		goto out;
	}
	rc = 0;
out:
	if (e != 0) {
		(void)snprintf(m->err, sizeof(m->err), "%s: create: %s",
		    m->path, strerror(e));
		if (e == ENOSPC || e == EDQUOT)
			m->fault = BM_ENOSPC;
	}
	(void)sqlite3_close(m->db);	/* NULL: a no-op */
	m->db = NULL;
	if (rc != 0)
		for (i = 0; i < sizeof(sfx) / sizeof(sfx[0]); i++)
			(void)unlink_sfx(tmp, sfx[i]);
	return rc;
}

/* The file's SHA-256 as "sha256:HEX" into buf (DIGEST_TEXT_MAX).  0 or BM_E*. */
static int
stamp_digest(int fd, char *buf, size_t len)
{
	struct digest		*d = NULL;
	struct digest_value	 v;
	int			 rc;

	if ((rc = digest_new(DIGEST_BIT(DIGEST_SHA256), &d)) == 0 &&
	    (rc = digest_fd(d, fd, 0, UINT64_MAX, NULL)) == 0 &&
	    (rc = digest_final(d, DIGEST_SHA256, &v)) == 0)
		rc = digest_to_text(&v, buf, len);
	digest_free(d);
	return rc;
}

/*
 * Read fd's check stamp into m: m->checked (0 without one) and, when its
 * check is recent, its digest in m->stamp_want for stamp_verify().
 */
static void
stamp_read(struct manifest *m, int fd)
{
	char		 val[DIGEST_TEXT_MAX + 32];
	long long	 at;
	ssize_t		 n;
	int64_t		 now = (int64_t)time(NULL);

	m->checked = 0;
	m->stamp_want[0] = '\0';
	ct_note(m, fd);
	if ((n = fgetxattr(fd, STAMP_XATTR, val, sizeof(val) - 1)) <= 0)
		return;
	val[n] = '\0';
	if (sscanf(val, "%79s %lld", m->stamp_want, &at) != 2 || at <= 0 ||
	    at > now + 86400) {
		m->stamp_want[0] = '\0';
		return;
	}
	m->checked = at;
	if (now - at > STAMP_MAX_S)
		m->stamp_want[0] = '\0';
}

/*
 * True when the file is what its fresh stamp names (stamp_read), read
 * whole with no write to it meanwhile (its ctime the one the open noted,
 * when known).  Runs on the deferred check's thread or the opener's.
 */
static bool
stamp_verify(const struct manifest *m)
{
	char		 have[DIGEST_TEXT_MAX];
	struct stat	 a, b;
	int		 fd;
	bool		 ok;

	if (m->stamp_want[0] == '\0' ||
	    (fd = open(m->path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) == -1)
		return false;
	ok = fstat(fd, &a) == 0 && stamp_digest(fd, have, sizeof(have)) == 0 &&
	    fstat(fd, &b) == 0 && a.st_ctim.tv_sec == b.st_ctim.tv_sec &&
	    a.st_ctim.tv_nsec == b.st_ctim.tv_nsec &&
	    strcmp(have, m->stamp_want) == 0;
	if (ok && m->ct_known)
		ok = a.st_ctim.tv_sec == m->ct.tv_sec &&
		    a.st_ctim.tv_nsec == m->ct.tv_nsec;
	(void)close(fd);
	return ok;
}

/*
 * Before a writer's close: true when the file may be stamped after it:
 * found sound this run, and written since its open by nothing but this
 * connection's checkpoints (its ctime is the one ct_note took last).
 * Anything else (a program that wrote it while the run held it) goes
 * unstamped, and the next open checks.
 */
static bool
stamp_due(const struct manifest *m)
{
	struct stat	 sb;

	if (!m->sound || m->readonly || m->as_is || m->fault != 0 ||
	    !m->ct_known || stat(m->path, &sb) != 0)
		return false;
	return sb.st_ctim.tv_sec == m->ct.tv_sec &&
	    sb.st_ctim.tv_nsec == m->ct.tv_nsec;
}

/*
 * After a writer's close: stamp the file it left, if the run found it
 * sound and SQLite removed the -wal (everything is in the file).  Best
 * effort: a failure leaves no stamp, and the next open checks.
 */
static void
stamp_write(const struct manifest *m)
{
	struct stat	 sb;
	char		 wal[PATH_MAX], sum[DIGEST_TEXT_MAX],
			 val[DIGEST_TEXT_MAX + 32];
	int		 fd, n;

	if (snprintf(wal, sizeof(wal), "%s-wal", m->path) >= (int)sizeof(wal) ||
	    lstat(wal, &sb) == 0 || errno != ENOENT)
		return;
	if ((fd = open(m->path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) == -1)
		return;
	if (stamp_digest(fd, sum, sizeof(sum)) == 0 &&
	    (n = snprintf(val, sizeof(val), "%s %lld", sum,
	    (long long)m->checked)) > 0 && (size_t)n < sizeof(val))
		(void)fsetxattr(fd, STAMP_XATTR, val, (size_t)n, 0);
	else
		(void)fremovexattr(fd, STAMP_XATTR);
	(void)close(fd);
}

/*
 * What is at m->path, before SQLite opens it: a missing file is made
 * (create; else BM_ENOENT); a symlink to nothing, a directory or other
 * non-file, or a file this process may not read is named with its errno
 * (BM_EDB), never replaced; a 0-byte file is damaged (BM_ECORRUPT).
 */
static int
open_precheck(struct manifest *m, bool create)
{
	struct stat	 sb;
	char		 to[256];	/* enough to name it */
	unsigned char	 hdr[2];
	ssize_t		 n;
	int		 fd, e;

	if (lstat(m->path, &sb) == -1) {
		if ((e = errno) == ENOENT && create) {
			if ((e = manifest_create(m)) == 0)
				ct_note(m, -1);	/* ours, whole */
			return e;
		}
		(void)snprintf(m->err, sizeof(m->err), "%s: %s", m->path,
		    strerror(e));
		return e == ENOENT ? BM_ENOENT : BM_EDB;
	}
	if (S_ISLNK(sb.st_mode) && stat(m->path, &sb) == -1) {
		e = errno;
		n = readlink(m->path, to, sizeof(to) - 1);
		to[n > 0 ? n : 0] = '\0';
		(void)snprintf(m->err, sizeof(m->err), "%s: a symlink to %s: "
		    "%s", m->path, to, strerror(e));
		return BM_EDB;
	}
	if (!S_ISREG(sb.st_mode)) {
		(void)snprintf(m->err, sizeof(m->err), "%s: %s", m->path,
		    S_ISDIR(sb.st_mode) ? strerror(EISDIR) :
		    "not a regular file");
		return BM_EDB;
	}
	/* SQLite says only "unable to open database file". */
	if ((fd = open(m->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)) == -1) {
		e = errno;
		(void)snprintf(m->err, sizeof(m->err), "%s: %s", m->path,
		    strerror(e));
		return BM_EDB;
	}
	/*
	 * The whole file is read next (manifest_check), in b-tree order,
	 * mostly backwards: one readahead now instead of a disk read a page.
	 */
	(void)posix_fadvise(fd, 0, 0, POSIX_FADV_WILLNEED);
	/* File format numbers 2, 2: WAL (https://sqlite.org/fileformat.html). */
	m->hdr_wal = pread(fd, hdr, sizeof(hdr), 18) == (ssize_t)sizeof(hdr) &&
	    hdr[0] == 2 && hdr[1] == 2;
	stamp_read(m, fd);
	(void)close(fd);
	if (sb.st_size == 0) {
		/* Never one of ours (manifest_create): truncated. */
		(void)snprintf(m->err, sizeof(m->err), "%s: empty (0 bytes)",
		    m->path);
		return BM_ECORRUPT;
	}
	return 0;
}

/*
 * A reader's open failed where an immutable one is exact
 * (open_immutable_ok): open the same file again that way, read as it is
 * without its WAL index.  0 or BM_E* (m->err).
 */
static int
open_immutable(struct manifest *m)
{
	char	*uri;
	int	 src;

	/* No statement is prepared yet (manifest_prepare comes after). */
	(void)sqlite3_close(m->db);
	m->db = NULL;
	if ((uri = immutable_uri(m->path)) == NULL)
		return BM_ENOMEM;
	src = db_open(uri, &m->db, SQLITE_OPEN_READONLY |
	    SQLITE_OPEN_URI);
	free(uri);
	if (src != SQLITE_OK)
		return db_fail(m, src);
	(void)sqlite3_extended_result_codes(m->db, 1);
	m->readonly = true;
	m->fault = 0;
	return manifest_setup(m);
}

/*
 * Open the manifest at path (see manifest.h).  path is borrowed and
 * copied; errbuf (errlen bytes, may be 0) gets "PATH: reason" on failure.
 * Returns 0 and *ret (free with manifest_close), BM_ENOENT when the file
 * is missing and !create, BM_ENOMEM, BM_ECORRUPT, BM_ENOSPC (SQLite: the
 * disk is full) or BM_EDB.  An existing file is opened without
 * SQLITE_OPEN_CREATE and is never removed.  reader: a read-only open may
 * fall back to an immutable one (open_immutable_ok), and never lets
 * SQLite apply and remove a -wal that was there before; a failed open
 * leaves no -wal or -shm that was not there before it.  as_is: an older
 * schema is read as it is (manifest_st_old), never migrated.
 */
static int
open_any(const char *path, bool create, bool reader, bool as_is,
    bool defer, struct manifest **ret, char *errbuf, size_t errlen)
{
	struct manifest	*m = NULL;
	bool		 had_wal = true;
	int		 rc = BM_ENOMEM, src;

	if (errlen > 0)
		errbuf[0] = '\0';
	if ((m = calloc(1, sizeof(*m))) == NULL ||
	    (m->path = strdup(path)) == NULL) {
		if (errlen > 0)
			(void)snprintf(errbuf, errlen, "%s: %s", path,
			    bm_strerror(BM_ENOMEM));
		goto out;
	}
	m->as_is = as_is;
	m->defer = defer;
	m->want_ct = !reader && !as_is;
	m->autockpt = true;
	if ((rc = open_precheck(m, create)) != 0 ||
	    (rc = wal_inspect(m, !reader, &had_wal)) != 0)
		goto out;
	m->had_wal = had_wal;
	src = db_open(path, &m->db, SQLITE_OPEN_READWRITE);
	if (src != SQLITE_OK) {
		rc = db_fail(m, src);
		goto out;
	}
	/*
	 * Until the file proved sound, a close must not checkpoint PATH-wal
	 * into it and delete the WAL (SQLite opens one whatever the header
	 * says): a damaged file is kept as it was, with its WAL.
	 */
	(void)sqlite3_db_config(m->db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1,
	    NULL);
	(void)sqlite3_extended_result_codes(m->db, 1);
	(void)sqlite3_busy_timeout(m->db, MANIFEST_BUSY_MS);
	/* Our autocheckpoint, which tells the close a checkpoint ran. */
	(void)sqlite3_wal_hook(m->db, wal_hook, m);
	m->readonly = sqlite3_db_readonly(m->db, "main") == 1;
	if ((rc = manifest_setup(m)) != 0 && (!reader ||
	    !open_immutable_ok(m) || (rc = open_immutable(m)) != 0))
		goto out;
	/*
	 * A reader leaves a -wal as it found it (the next writer applies
	 * it), and removes only one its own open made.
	 */
	if ((!reader || !had_wal) && !m->chk_run)
		(void)sqlite3_db_config(m->db,
		    SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 0, NULL);
	if ((rc = manifest_prepare(m)) != 0)
		goto out;
	m->err[0] = '\0';
	m->fault = 0;
	*ret = m;
	m = NULL;
	rc = 0;
out:
	if (m != NULL && errlen > 0 && m->err[0] != '\0')
		(void)snprintf(errbuf, errlen, "%s", m->err);
	/* What SQLite said of the file decides: damaged, or a full disk. */
	if (m != NULL && rc == BM_EDB && m->fault != 0)
		rc = m->fault;
	/*
	 * A -wal (and -shm) this failed open made, with nothing in it:
	 * SQLite's close removes them (under its exclusive lock, so never
	 * while another connection uses them).
	 */
	if (m != NULL && m->db != NULL && !had_wal && !m->chk_run)
		(void)sqlite3_db_config(m->db,
		    SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 0, NULL);
	if (m != NULL && m->wal_copy != NULL)
		(void)unlink(m->wal_copy);
	manifest_close(m);
	return rc;
}

int
manifest_open(const char *path, bool create, struct manifest **ret,
    char *errbuf, size_t errlen)
{
	return open_any(path, create, false, false, false, ret, errbuf,
	    errlen);
}

int
manifest_open_run(const char *path, bool create, struct manifest **ret,
    char *errbuf, size_t errlen)
{
	return open_any(path, create, false, false, true, ret, errbuf,
	    errlen);
}

int
manifest_open_as_is(const char *path, bool create, struct manifest **ret,
    char *errbuf, size_t errlen)
{
	return open_any(path, create, false, true, false, ret, errbuf,
	    errlen);
}

int
manifest_open_read(const char *path, struct manifest **ret, char *errbuf,
    size_t errlen)
{
	return open_any(path, false, true, true, false, ret, errbuf,
	    errlen);
}

/*
 * A new manifest of the current schema in memory (see manifest.h): a
 * dry run's stand-in for one a rebuild would make.  0 or BM_E*.
 */
int
manifest_open_scratch(struct manifest **ret, char *errbuf, size_t errlen)
{
	struct manifest	*m = NULL;
	int		 rc = BM_ENOMEM, src;

	if (errlen > 0)
		errbuf[0] = '\0';
	if ((m = calloc(1, sizeof(*m))) == NULL ||
	    (m->path = strdup(":memory:")) == NULL)
		goto out;
	if ((src = db_open(":memory:", &m->db, SQLITE_OPEN_READWRITE |
	    SQLITE_OPEN_CREATE)) != SQLITE_OK) {
		rc = db_fail(m, src);
		goto out;
	}
	(void)sqlite3_extended_result_codes(m->db, 1);
	if ((rc = manifest_migrate(m)) != 0 || (rc = manifest_setup(m)) != 0 ||
	    (rc = manifest_prepare(m)) != 0)
		goto out;
	*ret = m;
	m = NULL;
out:
	if (m != NULL && errlen > 0)
		(void)snprintf(errbuf, errlen, "%s", m->err[0] != '\0' ? m->err :
		    bm_strerror(rc));
	manifest_close(m);
	return rc;
}

/*
 * The highest run id the manifest at path records, read as the file
 * holds it (immutable: no -wal read, nothing written beside it), into
 * *ret_id (0 none).  For a damaged file, what of it can be read:
 * BM_ECORRUPT or BM_EDB when not even that (no message; it is damaged).
 */
int
manifest_peek_last_run(const char *path, int64_t *ret_id)
{
	sqlite3		*db = NULL;
	char		*uri;
	int64_t		 app_id = 0, id = 0;
	int		 rc = BM_ENOMEM;

	if ((uri = immutable_uri(path)) == NULL)
		return BM_ENOMEM;
	rc = BM_ECORRUPT;
	if (db_open(uri, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI) != SQLITE_OK ||
	    db_query_int(db, "PRAGMA application_id", &app_id) != SQLITE_OK ||
	    app_id != MANIFEST_APP_ID ||
	    db_query_int(db, "SELECT coalesce(max(id), 0) FROM main.runs",
	    &id) != SQLITE_OK)
		goto out;
	*ret_id = id;
	rc = 0;
out:
	(void)sqlite3_close(db);
	free(uri);
	return rc;
}

/*
 * New runs of m get ids from next on (the first one next, when the
 * manifest's own are lower): a rebuilt manifest carries on the run ids
 * of the one it replaces.  Never fails.
 */
void
manifest_run_ids_from(struct manifest *m, int64_t next)
{
	m->run_floor = next;
}

/* A warning of the open ("" none), borrowed from m. */
const char *
manifest_warning(const struct manifest *m)
{
	return m->warn;
}

/* See manifest.h. */
int64_t
manifest_reprepares(const struct manifest *m)
{
	int64_t	 n = 0;
	int	 i;

	for (i = 0; i < ST__MAX; i++)
		if (m->st[i] != NULL)
			n += sqlite3_stmt_status(m->st[i],
			    SQLITE_STMTSTATUS_REPREPARE, 0);
	return n;
}

/* Finalize every statement and close the connection.  NULL is a no-op. */
void
manifest_close(struct manifest *m)
{
	bool	 due;
	int	 i;

	if (m == NULL)
		return;
	(void)manifest_check_join(m);
	due = m->db != NULL && stamp_due(m);
	for (i = 0; i < ST__MAX; i++)
		(void)sqlite3_finalize(m->st[i]);
	/* Found sound late (manifest_open_run): the close checkpoints now. */
	if (m->chk_ckpt)
		(void)sqlite3_db_config(m->db,
		    SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 0, NULL);
	/* sqlite3_close(NULL) is a no-op; the last close checkpoints the WAL */
	(void)sqlite3_close(m->db);
	/*
	 * Found damaged late: what this run wrote is only in the -wal and
	 * -shm its open made (there were none before); the file stays as
	 * it was.
	 */
	if (m->chk_bad && m->db != NULL) {
		(void)unlink_sfx(m->path, "-wal");
		(void)unlink_sfx(m->path, "-shm");
	}
	if (due)
		stamp_write(m);
	else if (m->db != NULL && m->want_ct && !m->readonly)
		(void)removexattr(m->path, STAMP_XATTR);	/* may be none */
	free(m->wal_copy);
	free(m->path);
	free(m);
}

/* The last error as "PATH: reason", "" if none; borrowed from m. */
const char *
manifest_errmsg(const struct manifest *m)
{
	return m->err;
}

/*
 * Set the busy timeout of the connection to ms milliseconds (open sets
 * MANIFEST_BUSY_MS, 5 s).  A write that waits longer fails with BM_EDB.
 * Returns 0 or BM_EDB.
 */
int
manifest_set_busy_timeout(struct manifest *m, int ms)
{
	int	 src;

	if ((src = sqlite3_busy_timeout(m->db, ms)) != SQLITE_OK)
		return db_fail(m, src);
	return 0;
}

/*
 * BM_ECORRUPT once SQLite found the file damaged, else BM_ENOSPC once it
 * found the disk full, else 0 (the connection's failures so far).
 */
int
manifest_fault(const struct manifest *m)
{
	return m->fault;
}

/*
 * Move the manifest at path aside as PATH.corrupt-YYYYMMDDTHHMMSSZ (a
 * "-N" added should that exist), its -wal and -shm first under the same
 * name (so that the kept copy opens with its WAL, and no WAL is left for
 * a new PATH to read), then the file; then fsync the directory.  The
 * new name goes into ret_name (len bytes).  0, or BM_ELIMIT, BM_EIO
 * (errno kept) with "PATH: reason" in errbuf.
 */
int
manifest_set_aside(const char *path, char *ret_name, size_t len,
    char *errbuf, size_t errlen)
{
	static const char *const sfx[] = { "-wal", "-shm", "" };
	char		 name[PATH_MAX], from[PATH_MAX], to[PATH_MAX + 8];
	size_t		 i;
	int		 rc = BM_ELIMIT, e;

	if ((e = aside_name(path, name, sizeof(name))) != 0) {
		rc = e == ENAMETOOLONG ? BM_ELIMIT : BM_EIO;
		goto out;
	}
	e = ENAMETOOLONG;
	if (strlen(name) >= len)
		goto out;
	rc = BM_EIO;
	for (i = 0; i < sizeof(sfx) / sizeof(sfx[0]); i++) {
		if (snprintf(from, sizeof(from), "%s%s", path, sfx[i]) >=
		    (int)sizeof(from))
			goto out;
		(void)snprintf(to, sizeof(to), "%s%s", name, sfx[i]);
		if (rename(from, to) == -1 && (errno != ENOENT ||
		    sfx[i][0] == '\0')) {
			e = errno;
			goto out;
		}
	}
	(void)snprintf(ret_name, len, "%s", name);
	if ((e = fsync_parent(path)) != 0)
		goto out;
	rc = 0;
out:
	if (rc != 0 && errlen > 0)
		(void)snprintf(errbuf, errlen, "%s: move aside: %s", path,
		    strerror(e));
	errno = e;
	return rc;
}

/* Step a statement that returns no row; reset it.  Returns 0 or BM_E*. */
static int
st_run(struct manifest *m, sqlite3_stmt *st)
{
	int	 src, rc = 0;

	if ((src = sqlite3_step(st)) != SQLITE_DONE)
		rc = db_fail(m, src);
	st_done(st);
	return rc;
}

/* Begin a transaction (IMMEDIATE when it will write the main database). */
static int
tx_begin(struct manifest *m, bool immediate)
{
	return st_run(m, m->st[immediate ? ST_BEGIN_IMM : ST_BEGIN]);
}

/* Commit; on failure roll back (the error text of the commit is kept). */
static int
tx_commit(struct manifest *m)
{
	int	 rc;

	if ((rc = st_run(m, m->st[ST_COMMIT])) != 0 &&
	    sqlite3_get_autocommit(m->db) == 0)
		(void)sqlite3_step(m->st[ST_ROLLBACK]);
	st_done(m->st[ST_ROLLBACK]);
	return rc;
}

/* Roll back an open transaction, if any, keeping the earlier error text. */
static void
tx_rollback(struct manifest *m)
{
	if (sqlite3_get_autocommit(m->db) == 0)
		(void)sqlite3_step(m->st[ST_ROLLBACK]);
	st_done(m->st[ST_ROLLBACK]);
}

/* Fill a run_record from a RUN_COLS row. */
static void
run_from_row(sqlite3_stmt *st, struct run_record *r)
{
	memset(r, 0, sizeof(*r));
	r->id = sqlite3_column_int64(st, 0);
	col_copy(st, 1, r->command, sizeof(r->command));
	r->start_ns = sqlite3_column_int64(st, 2);
	r->end_ns = sqlite3_column_int64(st, 3);
	col_copy(st, 4, r->status, sizeof(r->status));
	r->listed = sqlite3_column_int64(st, 5);
	r->fetched = sqlite3_column_int64(st, 6);
	r->touched = sqlite3_column_int64(st, 7);
	r->deleted = sqlite3_column_int64(st, 8);
	r->failed = sqlite3_column_int64(st, 9);
	r->bytes = sqlite3_column_int64(st, 10);
	col_copy(st, 11, r->error, sizeof(r->error));
}

/*
 * Insert a run with status "running": command (borrowed, e.g. "sync"),
 * start_ns (ns since the epoch).  *ret_id gets the new run id.  The
 * caller holds the mirror's run lock, so any run still "running" died
 * without recording its end: it becomes "interrupted" first.
 * Returns 0 or BM_EDB.
 */
int
manifest_run_begin(struct manifest *m, const char *command, int64_t start_ns,
    int64_t *ret_id)
{
	sqlite3_stmt	*st = m->st[ST_RUN_BEGIN];
	int		 rc;

	if ((rc = st_run(m, m->st[ST_RUN_INTERRUPTED])) != 0)
		return rc;
	(void)bind_text(st, 1, command);
	(void)sqlite3_bind_int64(st, 2, start_ns);
	(void)sqlite3_bind_int64(st, 3, m->run_floor);
	if ((rc = st_run(m, st)) != 0)
		return rc;
	*ret_id = sqlite3_last_insert_rowid(m->db);
	return 0;
}

/*
 * Store end time, status, counts, error and per-transport figures of run
 * r->id (r borrowed) in one transaction.  Returns 0, BM_ENOENT when no
 * run has that id, or BM_EDB.
 */
int
manifest_run_end(struct manifest *m, const struct run_record *r)
{
	sqlite3_stmt	*st = m->st[ST_RUN_END], *nt = m->st[ST_RUN_NET_PUT];
	size_t		 i;
	int		 rc;

	if ((rc = tx_begin(m, true)) != 0)
		return rc;
	(void)sqlite3_bind_int64(st, 1, r->id);
	(void)sqlite3_bind_int64(st, 2, r->end_ns);
	(void)bind_text(st, 3, r->status);
	(void)sqlite3_bind_int64(st, 4, r->listed);
	(void)sqlite3_bind_int64(st, 5, r->fetched);
	(void)sqlite3_bind_int64(st, 6, r->touched);
	(void)sqlite3_bind_int64(st, 7, r->deleted);
	(void)sqlite3_bind_int64(st, 8, r->failed);
	(void)sqlite3_bind_int64(st, 9, r->bytes);
	(void)bind_text(st, 10, r->error);
	if ((rc = st_run(m, st)) != 0)
		goto out;
	if (sqlite3_changes(m->db) == 0) {
		(void)snprintf(m->err, sizeof(m->err), "%s: no run %lld",
		    m->path, (long long)r->id);
		rc = BM_ENOENT;
		goto out;
	}
	for (i = 0; i < r->nnets && i < RUN_NETS_MAX; i++) {
		(void)sqlite3_bind_int64(nt, 1, r->id);
		(void)bind_text(nt, 2, r->nets[i].net);
		(void)sqlite3_bind_int64(nt, 3, r->nets[i].files);
		(void)sqlite3_bind_int64(nt, 4, r->nets[i].bytes);
		(void)sqlite3_bind_int64(nt, 5, r->nets[i].ns);
		if ((rc = st_run(m, nt)) != 0)
			goto out;
	}
	return tx_commit(m);
out:
	tx_rollback(m);
	return rc;
}

/* Fill r->nets from the runs_net rows of run r->id.  0 or BM_EDB. */
static int
run_nets(struct manifest *m, struct run_record *r)
{
	sqlite3_stmt	*st = m->st[ST_RUN_NETS];
	struct run_net	*n;
	int		 rc = 0, src;

	r->nnets = 0;
	(void)sqlite3_bind_int64(st, 1, r->id);
	while ((src = sqlite3_step(st)) == SQLITE_ROW) {
		if (r->nnets == RUN_NETS_MAX)
			continue;
		n = &r->nets[r->nnets++];
		col_copy(st, 0, n->net, sizeof(n->net));
		n->files = sqlite3_column_int64(st, 1);
		n->bytes = sqlite3_column_int64(st, 2);
		n->ns = sqlite3_column_int64(st, 3);
	}
	if (src != SQLITE_DONE)
		rc = db_fail(m, src);
	st_done(st);
	return rc;
}

/*
 * The newest max runs, newest first: *ret is a malloc'd array of *ret_n
 * records owned by the caller (NULL when *ret_n is 0).  Returns 0,
 * BM_ENOMEM or BM_EDB; *ret and *ret_n are written only on success.
 */
int
manifest_runs(struct manifest *m, size_t max, struct run_record **ret,
    size_t *ret_n)
{
	sqlite3_stmt		*st = m->st[ST_RUNS];
	struct run_record	*v = NULL, *nv;
	size_t			 n = 0, cap = 0, i;
	int			 rc = BM_EDB, src;

	(void)sqlite3_bind_int64(st, 1,
	    max > (size_t)INT64_MAX ? INT64_MAX : (int64_t)max);
	while ((src = sqlite3_step(st)) == SQLITE_ROW) {
		if (n == cap) {
			cap = cap == 0 ? 16 : cap * 2;
			if ((nv = reallocarray(v, cap, sizeof(*v))) == NULL) {
				rc = BM_ENOMEM;
				goto out;
			}
			v = nv;
		}
		run_from_row(st, &v[n++]);
	}
	if (src != SQLITE_DONE) {
		rc = db_fail(m, src);
		goto out;
	}
	st_done(st);
	for (i = 0; i < n; i++)
		if ((rc = run_nets(m, &v[i])) != 0)
			goto out;
	*ret = v;
	*ret_n = n;
	v = NULL;
	rc = 0;
out:
	st_done(st);
	free(v);
	return rc;
}

/*
 * The newest run whose status is "ok" into *ret.  Returns 0, BM_ENOENT
 * when there is none, or BM_EDB.
 */
int
manifest_last_success(struct manifest *m, struct run_record *ret)
{
	sqlite3_stmt	*st = m->st[ST_LAST_OK];
	struct run_record r;
	int		 rc, src;

	src = sqlite3_step(st);
	if (src == SQLITE_ROW) {
		run_from_row(st, &r);
		rc = 0;
	} else if (src == SQLITE_DONE)
		rc = BM_ENOENT;
	else
		rc = db_fail(m, src);
	st_done(st);
	if (rc == 0 && (rc = run_nets(m, &r)) == 0)
		*ret = r;
	return rc;
}

/* Bind entry e to the 8 parameters of one staging row from base on. */
static void
stage_bind(sqlite3_stmt *st, int base, const struct entry *e)
{
	bool	 known = e->mtime_prec != MTIME_UNKNOWN;

	(void)bind_path(st, base, e->path);
	(void)sqlite3_bind_int(st, base + 1, (int)e->type);
	(void)sqlite3_bind_int64(st, base + 2, e->size < 0 ? -1 : e->size);
	(void)sqlite3_bind_int(st, base + 3, e->size >= 0 && e->size_exact);
	(void)sqlite3_bind_int64(st, base + 4, known ? e->mtime : 0);
	(void)sqlite3_bind_int(st, base + 5, known ? (int)e->mtime_prec : 0);
	(void)bind_path(st, base + 6, e->target);
	if (e->type == ENTRY_FILE && e->checksum != NULL)
		(void)sqlite3_bind_text(st, base + 7, e->checksum, -1,
		    SQLITE_STATIC);
	else
		(void)sqlite3_bind_null(st, base + 7);
}

/*
 * Insert the entries of l into staging (a transaction is open), in
 * order: STAGE_ROWS at a time, then one at a time (a repeated path keeps
 * its first entry either way: INSERT OR IGNORE takes a statement's rows
 * in order).
 */
static int
stage_rows(struct manifest *m, const struct listing *l)
{
	sqlite3_stmt	*st = m->st[ST_STAGE_INSERT];
	sqlite3_stmt	*mst = m->st[ST_STAGE_INSERT_N];
	size_t		 i = 0, k, n;
	int		 rc = 0, src = SQLITE_DONE;

	n = listing_count(l);
	for (; mst != NULL && i + STAGE_ROWS <= n && src == SQLITE_DONE;
	    i += STAGE_ROWS) {
		for (k = 0; k < STAGE_ROWS; k++)
			stage_bind(mst, 1 + 8 * (int)k, listing_get(l, i + k));
		src = sqlite3_step(mst);
		(void)sqlite3_reset(mst);
	}
	for (; i < n && src == SQLITE_DONE; i++) {
		stage_bind(st, 1, listing_get(l, i));
		src = sqlite3_step(st);
		(void)sqlite3_reset(st);
	}
	if (src != SQLITE_DONE)
		rc = db_fail(m, src);
	st_done(mst);
	st_done(st);
	return rc;
}

/*
 * Replace the staging table with the entries of l (borrowed) in one
 * transaction: path and target as BLOBs, size -1 (never exact) when
 * unknown, mtime 0 and prec MTIME_UNKNOWN when the listing shows no
 * time.  A repeated path keeps its first entry, as listing_sort()
 * does.  Only the TEMP database is written, so a writer holding the main
 * database does not block this.  Returns 0, BM_ENOMEM or BM_EDB
 * (staging then unchanged).
 */
int
manifest_stage(struct manifest *m, const struct listing *l)
{
	int	 rc;

	if ((rc = tx_begin(m, false)) != 0)
		return rc;
	if ((rc = st_run(m, m->st[ST_STAGE_CLEAR])) == 0 &&
	    (rc = stage_rows(m, l)) == 0)
		rc = tx_commit(m);
	if (rc != 0)
		tx_rollback(m);
	return rc;
}

/* Empty the staging table.  0 or BM_EDB. */
int
manifest_stage_begin(struct manifest *m)
{
	return st_run(m, m->st[ST_STAGE_CLEAR]);
}

/*
 * Add the entries of l to staging in one transaction, as manifest_stage
 * does (a path staged already keeps its first entry).  0 or BM_EDB (none
 * of l added).
 */
int
manifest_stage_add(struct manifest *m, const struct listing *l)
{
	int	 rc;

	if (listing_count(l) == 0)
		return 0;
	if ((rc = tx_begin(m, false)) != 0)
		return rc;
	if ((rc = stage_rows(m, l)) == 0)
		rc = tx_commit(m);
	if (rc != 0)
		tx_rollback(m);
	return rc;
}

/*
 * Drop the staged direct children of directory prefix ("" the root):
 * its page failed after some of its entries were staged.  0 or BM_EDB.
 */
int
manifest_stage_drop(struct manifest *m, const char *prefix)
{
	sqlite3_stmt	*st = m->st[ST_STAGE_DROP];
	char		*lo = NULL, *hi = NULL;
	int		 rc;

	if (prefix[0] != '\0' && (asprintf(&lo, "%s/", prefix) == -1 ||
	    asprintf(&hi, "%s0", prefix) == -1)) {	/* '0' follows '/' */
		free(lo);
		return BM_ENOMEM;
	}
	(void)sqlite3_bind_blob(st, 1, lo != NULL ? lo : "",
	    lo != NULL ? (int)strlen(lo) : 0, SQLITE_STATIC);
	(void)bind_path(st, 2, hi);
	rc = st_run(m, st);
	free(lo);
	free(hi);
	return rc;
}

/* Number of staged paths into *ret.  0 or BM_EDB. */
int
manifest_staged_count(struct manifest *m, int64_t *ret)
{
	sqlite3_stmt	*st = m->st[ST_STAGE_COUNT];
	int		 rc = 0, src;

	if ((src = sqlite3_step(st)) == SQLITE_ROW)
		*ret = sqlite3_column_int64(st, 0);
	else
		rc = db_fail(m, src);
	st_done(st);
	return rc;
}

/*
 * Walk the staged directories with a known mtime and, with files, every
 * staged file, in path order.  0, fn's non-zero value, or BM_EDB.
 */
int
manifest_staged_walk(struct manifest *m, bool files, manifest_staged_fn fn,
    void *ctx)
{
	sqlite3_stmt	*st = m->st[ST_STAGE_WALK];
	struct staged_row r;
	int		 rc = 0, src;

	(void)sqlite3_bind_int(st, 1, files);
	while ((src = sqlite3_step(st)) == SQLITE_ROW) {
		memset(&r, 0, sizeof(r));
		r.path = col_str(st, 0, &r.pathlen);
		r.type = (enum entry_type)sqlite3_column_int(st, 1);
		r.mtime = sqlite3_column_int64(st, 2);
		r.prec = (enum mtime_prec)sqlite3_column_int(st, 3);
		r.checksum = col_str(st, 4, NULL);
		if ((rc = fn(ctx, &r)) != 0)
			goto out;
	}
	if (src != SQLITE_DONE)
		rc = db_fail(m, src);
out:
	st_done(st);
	return rc;
}

/* Byte-compare two optional strings of known lengths. */
static bool
bytes_equal(const char *a, size_t alen, const char *b, size_t blen)
{
	if (a == NULL || b == NULL)
		return a == b;
	return alen == blen && memcmp(a, b, alen) == 0;
}

/* ns of one unit of a listed time's precision, 0 for MTIME_UNKNOWN. */
static int64_t
prec_ns(int prec)
{
	switch (prec) {
	case MTIME_DAY:		return 86400LL * 1000000000LL;
	case MTIME_MINUTE:	return 60LL * 1000000000LL;
	case MTIME_SECOND:	return 1000000000LL;
	case MTIME_NS:		return 1;
	default:		return 0;
	}
}

/*
 * True when listed times a (precision pa) and b (pb), both known, can be
 * the same time: compared at the coarser precision, the finer one lies
 * in the coarser one's unit ("Jun  1  2026" holds "Jun  1 10:00").
 * Units start at the listed (zone-resolved) time, so a zone's offset
 * does not split a day.  Two dates only are calendar days in the
 * server's zone: resolved with another offset (a daylight-saving change
 * under ftp_timezone = auto) the day's start moves by hours, while two
 * different days lie a day apart, so under half a day apart is the same.
 */
static bool
same_time(int64_t a, int pa, int64_t b, int pb)
{
	int64_t	 u;

	if (pa == pb && pa == MTIME_DAY)
		return (a >= b ? (uint64_t)a - (uint64_t)b :
		    (uint64_t)b - (uint64_t)a) < (uint64_t)(43200LL *
		    1000000000LL);
	if (pa == pb)
		return a == b;
	if (pa > pb)
		return same_time(b, pb, a, pa);
	u = prec_ns(pa);
	return b >= a && (uint64_t)b - (uint64_t)a < (uint64_t)u;
}

/*
 * The recorded side of a staged path in diff_staged's merge: the
 * ST_DIFF_FILES row that matched it (fst), and the start of the run
 * that last saw it, looked up once per run id (seen_run is mostly the
 * same id for every row).
 */
struct diff_rec {
	struct manifest	*m;		/* borrowed */
	sqlite3_stmt	*fst;		/* borrowed: ST_DIFF_FILES, on the row */
	int64_t		 run_id;	/* the run of run_start, or -1 */
	int64_t		 run_start;	/* its start_ns, -1 if no such run */
	const char	*bad;		/* static: why the row is damaged */
};

/* Start (ns) of the run that last saw the matched row, -1 if unknown. */
static int64_t
diff_seen_start(struct diff_rec *dr)
{
	sqlite3_stmt	*st = dr->m->st[ST_RUN_START];
	int64_t		 id = col_opt(dr->fst, 13);

	if (id < 0)
		return -1;
	if (id != dr->run_id) {
		dr->run_id = id;
		dr->run_start = -1;
		(void)sqlite3_bind_int64(st, 1, id);
		if (sqlite3_step(st) == SQLITE_ROW)
			dr->run_start = col_opt(st, 0);
		st_done(st);
	}
	return dr->run_start;
}

/*
 * Classify one staged row r, its recorded side in dr when r->recorded
 * (DESIGN.md: listings are data; an inexact value is compared as shown,
 * so equal shown values are unchanged).  Times are compared at the
 * coarser of the two precisions.  A file listed without a time (none,
 * or one that could not be read) is asked for conditionally
 * (DIFF_UNKNOWN) unless its listed size changed: its size alone cannot
 * show a same-size rewrite.  A listed size that is now unknown is
 * compared by its time alone.
 */
static enum diff_kind
diff_kind_of(struct diff_rec *dr, const struct diff_row *r)
{
	const char	*rtarget;
	size_t		 tlen, rtlen;
	int64_t		 seen;

	if (!r->recorded)
		return DIFF_NEW;
	if (r->type != r->rec_type)
		return DIFF_CHANGED;
	if (r->type == ENTRY_FILE && r->fs.listed.size == -1 &&
	    r->fs.listed.prec == MTIME_UNKNOWN)
		return DIFF_UNKNOWN;
	/*
	 * A size that became unknown (a listed 0, recorded as exact before
	 * issue 22 made it a hint) is no change by itself: the time
	 * decides, as for a listing without sizes.
	 */
	if (!(r->type == ENTRY_FILE && r->fs.listed.size == -1) &&
	    (r->fs.listed.size != r->rec_listed.size ||
	    r->fs.listed.size_exact != r->rec_listed.size_exact))
		return DIFF_CHANGED;
	if (r->type == ENTRY_FILE && r->fs.listed.prec == MTIME_UNKNOWN)
		return DIFF_UNKNOWN;
	if ((r->rec_listed.prec == MTIME_UNKNOWN) !=
	    (r->fs.listed.prec == MTIME_UNKNOWN))
		return DIFF_CHANGED;
	if (r->rec_listed.prec != MTIME_UNKNOWN && !same_time(
	    r->fs.listed.mtime, (int)r->fs.listed.prec, r->rec_listed.mtime,
	    (int)r->rec_listed.prec))
		return DIFF_CHANGED;
	if (r->type == ENTRY_SYMLINK) {
		tlen = r->target != NULL ? strlen(r->target) : 0;
		rtarget = col_str(dr->fst, 6, &rtlen);
		if (!bytes_equal(r->target, tlen, rtarget, rtlen))
			return DIFF_CHANGED;
	}
	/*
	 * A time listed to the minute (or day) that had not ended when the
	 * run that recorded the file started: a same-size rewrite later in
	 * that minute shows the same listing, so the file is asked for once
	 * more, conditionally (DIFF_UNKNOWN); the run that does so records
	 * it after the minute ended, which settles it.
	 */
	if (r->type == ENTRY_FILE && (r->fs.listed.prec == MTIME_MINUTE ||
	    r->fs.listed.prec == MTIME_DAY) && (seen = diff_seen_start(dr)) >=
	    0 && seen < r->fs.listed.mtime + (r->fs.listed.prec == MTIME_DAY ?
	    86400LL : 60LL) * 1000000000LL)
		return DIFF_UNKNOWN;
	return DIFF_SAME;
}

/*
 * A path column's sort key as SQLite orders it (datatype3.html, "Sort
 * Order"): its storage class (numbers, then TEXT, then BLOB; the path
 * columns are NOT NULL), then its bytes by memcmp, the shorter first.
 * Paths are BLOBs (bind_path); only a hand-edited file holds others,
 * and those never equal a staged path, as under the join's "=".
 */
struct diff_key {
	int		 cls;		/* 1 number, 2 TEXT, 3 BLOB */
	const char	*p;		/* borrowed: the column's bytes */
	size_t		 n;
};

static void
diff_key_of(sqlite3_stmt *st, struct diff_key *k)
{
	int	 t = sqlite3_column_type(st, 0);	/* before any conversion */

	k->cls = t == SQLITE_BLOB ? 3 : t == SQLITE_TEXT ? 2 : 1;
	k->p = col_str(st, 0, &k->n);
}

static int
diff_key_cmp(const struct diff_key *a, const struct diff_key *b)
{
	int	 c;

	if (a->cls != b->cls)
		return a->cls < b->cls ? -1 : 1;
	if ((c = memcmp(a->p, b->p, a->n < b->n ? a->n : b->n)) != 0)
		return c;
	return a->n < b->n ? -1 : a->n > b->n;
}

/*
 * Step ST_DIFF_FILES (dr->fst), its row's key into *fk.  An SQLite code,
 * or -1 with dr->bad set for a committed path no run could have written
 * (path_row_fault: not a BLOB, which the open's check found none of, so
 * one another program wrote since or one a stamped file's deferred check
 * did not look for; or a NUL byte, an unsafe path), which no staged path
 * matches and whose deletion the store refuses.
 */
static int
diff_files_next(struct diff_rec *dr, struct diff_key *fk)
{
	int	 src;

	if ((src = sqlite3_step(dr->fst)) == SQLITE_ROW) {
		diff_key_of(dr->fst, fk);
		if ((dr->bad = path_row_fault(fk->cls == 3 ? SQLITE_BLOB :
		    SQLITE_TEXT, fk->p, fk->n)) != NULL)
			return -1;
	}
	return src;
}

/*
 * Walk the staged rows (first half of manifest_diff): a merge of the
 * staging table and main.files, both walked in SQLite's path order (so
 * diff_key_cmp agrees with it), each staged row matched as the join
 * f.path = s.path did; the committed rows that no staged path matched
 * are counted in *ngone.  0, fn's non-zero value, BM_EDB, or
 * BM_ECORRUPT for a committed path no run could have written.
 */
static int
diff_staged(struct manifest *m, manifest_diff_fn fn, void *ctx,
    int64_t *ngone)
{
	sqlite3_stmt	*st = m->st[ST_DIFF_STAGED];
	struct diff_rec	 dr = { m, m->st[ST_DIFF_FILES], -1, -1, NULL };
	struct diff_key	 sk, fk = { 0, NULL, 0 };
	struct diff_row	 r;
	int		 rc = 0, src = SQLITE_DONE, fsrc, c;

	*ngone = 0;
	fsrc = diff_files_next(&dr, &fk);
	while (fsrc == SQLITE_ROW || fsrc == SQLITE_DONE) {
		if ((src = sqlite3_step(st)) != SQLITE_ROW)
			break;
		diff_key_of(st, &sk);
		/* The committed rows before this path: not staged. */
		c = -1;
		while (fsrc == SQLITE_ROW && (c = diff_key_cmp(&fk, &sk)) < 0) {
			(*ngone)++;
			fsrc = diff_files_next(&dr, &fk);
		}
		if (fsrc != SQLITE_ROW && fsrc != SQLITE_DONE)
			break;
		memset(&r, 0, sizeof(r));
		r.path = sk.p;
		r.pathlen = sk.n;
		r.type = (enum entry_type)sqlite3_column_int(st, 1);
		r.fs.listed.size = sqlite3_column_int64(st, 2);
		r.fs.listed.size_exact = sqlite3_column_int(st, 3) != 0;
		r.fs.listed.mtime = sqlite3_column_int64(st, 4);
		r.fs.listed.prec = (enum mtime_prec)sqlite3_column_int(st, 5);
		r.target = col_str(st, 6, NULL);
		r.recorded = fsrc == SQLITE_ROW && c == 0;
		r.rec_type = r.type;
		r.fs.upstream.size = r.fs.upstream.mtime = -1;
		r.fs.local.size = r.fs.local.mtime = -1;
		if (r.recorded) {
			r.rec_type = (enum entry_type)sqlite3_column_int(dr.fst,
			    1);
			r.rec_listed.size = sqlite3_column_int64(dr.fst, 2);
			r.rec_listed.size_exact =
			    sqlite3_column_int(dr.fst, 3) != 0;
			r.rec_listed.mtime = sqlite3_column_int64(dr.fst, 4);
			r.rec_listed.prec =
			    (enum mtime_prec)sqlite3_column_int(dr.fst, 5);
			r.fs.upstream.size = col_opt(dr.fst, 7);
			r.fs.upstream.mtime = col_opt(dr.fst, 8);
			r.etag = col_str(dr.fst, 9, NULL);
			r.fs.local.size = col_opt(dr.fst, 10);
			r.fs.local.mtime = col_opt(dr.fst, 11);
			r.checksum = col_str(dr.fst, 12, NULL);
		}
		r.kind = diff_kind_of(&dr, &r);
		if ((rc = fn(ctx, &r)) != 0)
			goto out;
		if (r.recorded)
			fsrc = diff_files_next(&dr, &fk);
	}
	if (fsrc == SQLITE_ROW || fsrc == SQLITE_DONE) {
		if (src != SQLITE_DONE) {
			rc = db_fail(m, src);
			goto out;
		}
		/* The committed rows after the last staged path. */
		while (fsrc == SQLITE_ROW) {
			(*ngone)++;
			fsrc = diff_files_next(&dr, &fk);
		}
	}
	if (fsrc == -1)
		rc = paths_damaged(m, dr.bad);
	else if (fsrc != SQLITE_DONE)
		rc = db_fail(m, fsrc);
out:
	st_done(st);
	st_done(dr.fst);
	return rc;
}

/* Fill a file_row from a FILE_COLS row. */
static void
file_from_row(sqlite3_stmt *st, struct file_row *f)
{
	memset(f, 0, sizeof(*f));
	f->path = col_str(st, 0, &f->pathlen);
	f->type = (enum entry_type)sqlite3_column_int(st, 1);
	f->fs.listed.size = sqlite3_column_int64(st, 2);
	f->fs.listed.size_exact = sqlite3_column_int(st, 3) != 0;
	f->fs.listed.mtime = sqlite3_column_int64(st, 4);
	f->fs.listed.prec = (enum mtime_prec)sqlite3_column_int(st, 5);
	f->fs.upstream.size = col_opt(st, 6);
	f->fs.upstream.mtime = col_opt(st, 7);
	f->etag = col_str(st, 8, NULL);
	f->fs.local.size = col_opt(st, 9);
	f->fs.local.mtime = col_opt(st, 10);
	f->seen_run = col_opt(st, 11);
	f->fetched_run = col_opt(st, 12);
	f->target = col_str(st, 13, NULL);
	f->checksum = col_str(st, 14, NULL);
	f->sidecar = col_str(st, 15, NULL);
}

/* Walk the committed rows that are not staged (DIFF_GONE). */
static int
diff_gone(struct manifest *m, manifest_diff_fn fn, void *ctx)
{
	sqlite3_stmt	*st = m->st[ST_GONE];
	struct file_row	 f;
	struct diff_row	 r;
	int		 rc = 0, src;

	while ((src = sqlite3_step(st)) == SQLITE_ROW) {
		memset(&r, 0, sizeof(r));
		file_from_row(st, &f);
		r.target = f.target;
		r.path = f.path;
		r.pathlen = f.pathlen;
		r.kind = DIFF_GONE;
		r.type = f.type;
		r.rec_type = f.type;
		r.fs = f.fs;
		r.recorded = true;
		r.etag = f.etag;
		r.checksum = f.checksum;
		if ((rc = fn(ctx, &r)) != 0)
			goto out;
	}
	if (src != SQLITE_DONE)
		rc = db_fail(m, src);
out:
	st_done(st);
	return rc;
}

/*
 * Walk the diff of staging against files: each staged path in path order
 * (NEW, UNKNOWN, CHANGED or SAME; list_* and target are the staged
 * values), then each unstaged committed path in path order (GONE; list_*
 * and target are the recorded values).  Row strings are borrowed until
 * fn returns; fn must not run another diff.  Returns 0, fn's non-zero
 * value, or BM_EDB.
 */
int
manifest_diff(struct manifest *m, manifest_diff_fn fn, void *ctx)
{
	int64_t	 ngone;
	int	 rc;

	if ((rc = diff_staged(m, fn, ctx, &ngone)) != 0)
		return rc;
	/* Most runs: every committed path was listed again, none gone. */
	return ngone > 0 ? diff_gone(m, fn, ctx) : 0;
}

/* Number of committed rows of type file into *ret.  0 or BM_EDB. */
int
manifest_file_count(struct manifest *m, int64_t *ret)
{
	sqlite3_stmt	*st = m->st[ST_FILE_COUNT];
	int		 rc = 0, src;

	if ((src = sqlite3_step(st)) == SQLITE_ROW)
		*ret = sqlite3_column_int64(st, 0);
	else
		rc = db_fail(m, src);
	st_done(st);
	return rc;
}

/* Bind ?1..?13 shared by ST_UPSERT and ST_NOT_MODIFIED. */
static void
bind_rec(sqlite3_stmt *st, const struct commit_rec *c, int64_t run)
{
	bool	 known = c->fs.listed.prec != MTIME_UNKNOWN;

	(void)bind_path(st, 1, c->path);
	(void)sqlite3_bind_int(st, 2, (int)c->type);
	(void)sqlite3_bind_int64(st, 3, c->fs.listed.size < 0 ? -1 :
	    c->fs.listed.size);
	(void)sqlite3_bind_int(st, 4, c->fs.listed.size >= 0 &&
	    c->fs.listed.size_exact);
	(void)sqlite3_bind_int64(st, 5, known ? c->fs.listed.mtime : 0);
	(void)sqlite3_bind_int(st, 6, known ? (int)c->fs.listed.prec : 0);
	(void)bind_opt(st, 7, c->fs.upstream.size);
	(void)bind_opt(st, 8, c->fs.upstream.mtime);
	(void)bind_text(st, 9, c->etag);
	(void)bind_path(st, 10, c->type == ENTRY_SYMLINK ? c->target : NULL);
	(void)bind_opt(st, 11, c->fs.local.size);
	(void)bind_opt(st, 12, c->fs.local.mtime);
	(void)sqlite3_bind_int64(st, 13, run);
}

/* Event op name of a commit op. */
static const char *
commit_op_name(enum commit_op op)
{
	switch (op) {
	case COMMIT_FETCHED:		return "fetched";
	case COMMIT_NOT_MODIFIED:	return "not-modified";
	case COMMIT_TOUCHED:		return "touched";
	case COMMIT_MKDIR:		return "mkdir";
	case COMMIT_SYMLINK:		return "symlink";
	case COMMIT_DELETED:		return "deleted";
	case COMMIT_FAILED:		return "failed";
	case COMMIT_VANISHED:		return "vanished";
	case COMMIT_ADOPTED:		return "adopted";
	case COMMIT_DIGEST:		return "digest";
	case COMMIT_RELEASED:		return "released";
	case COMMIT_SIDECAR:		return "checked";
	case COMMIT_MISMATCH:		return "failed";
	default:			return NULL;
	}
}

/* Drop the intents row of path, if any. */
static int
intent_del(struct manifest *m, const char *path)
{
	sqlite3_stmt	*st = m->st[ST_INTENT_DEL];

	(void)bind_path(st, 1, path);
	return st_run(m, st);
}

/* Drop the partials row of path, if any. */
static int
partial_del(struct manifest *m, const char *path)
{
	sqlite3_stmt	*st = m->st[ST_PARTIAL_DEL];

	if (m->no_partials)
		return 0;
	(void)bind_path(st, 1, path);
	return st_run(m, st);
}

/* Drop the mismatches row of path, if any. */
static int
mismatch_del(struct manifest *m, const char *path)
{
	sqlite3_stmt	*st = m->st[ST_MISMATCH_DEL];

	if (m->no_mismatches)
		return 0;
	(void)bind_path(st, 1, path);
	return st_run(m, st);
}

/* Record c (COMMIT_MISMATCH) in mismatches: want c->sidecar, got c->checksum. */
static int
mismatch_put(struct manifest *m, int64_t run, const struct commit_rec *c)
{
	sqlite3_stmt	*st = m->st[ST_MISMATCH_PUT];
	bool		 known = c->fs.listed.prec != MTIME_UNKNOWN;

	if (c->sidecar == NULL || c->checksum == NULL)
		return BM_EINVAL;
	m->no_mismatches = false;
	(void)bind_path(st, 1, c->path);
	(void)sqlite3_bind_int64(st, 2, c->fs.listed.size < 0 ? -1 :
	    c->fs.listed.size);
	(void)sqlite3_bind_int(st, 3, c->fs.listed.size >= 0 &&
	    c->fs.listed.size_exact);
	(void)sqlite3_bind_int64(st, 4, known ? c->fs.listed.mtime : 0);
	(void)sqlite3_bind_int(st, 5, known ? (int)c->fs.listed.prec : 0);
	(void)bind_opt(st, 6, c->fs.upstream.size);
	(void)bind_opt(st, 7, c->fs.upstream.mtime);
	(void)bind_text(st, 8, c->etag);
	(void)bind_text(st, 9, c->sidecar);
	(void)bind_text(st, 10, c->checksum);
	(void)sqlite3_bind_int64(st, 11, run);
	return st_run(m, st);
}

/* Apply one record's row change (see the file comment). */
static int
commit_row(struct manifest *m, int64_t run, const struct commit_rec *c)
{
	sqlite3_stmt	*st;
	int		 rc;

	/* Content committed unchecked does not clear a known mismatch. */
	if (((c->op == COMMIT_FETCHED && (c->sidecar == NULL ||
	    strcmp(c->sidecar, MANIFEST_SIDECAR_UNCHECKED) != 0)) ||
	    c->op == COMMIT_ADOPTED ||
	    c->op == COMMIT_DELETED || c->op == COMMIT_RELEASED ||
	    c->op == COMMIT_VANISHED || (c->op == COMMIT_SIDECAR &&
	    c->sidecar != NULL && c->sidecar[0] != '\0')) &&
	    (rc = mismatch_del(m, c->path)) != 0)
		return rc;

	if ((c->op == COMMIT_FETCHED || c->op == COMMIT_NOT_MODIFIED ||
	    c->op == COMMIT_DELETED || c->op == COMMIT_RELEASED ||
	    c->op == COMMIT_VANISHED) &&
	    (rc = partial_del(m, c->path)) != 0)
		return rc;
	/* The batch's outcome is recorded: its intent is done with. */
	if ((c->op == COMMIT_FETCHED || c->op == COMMIT_FAILED) &&
	    (rc = intent_del(m, c->path)) != 0)
		return rc;
	switch (c->op) {
	case COMMIT_FETCHED:
	case COMMIT_MKDIR:
	case COMMIT_SYMLINK:
		st = m->st[ST_UPSERT];
		bind_rec(st, c, run);
		if (c->op == COMMIT_FETCHED) {
			(void)sqlite3_bind_int64(st, 14, run);
			(void)bind_text(st, 15, c->checksum);
			(void)bind_text(st, 16, c->sidecar);
		}
		return st_run(m, st);
	case COMMIT_NOT_MODIFIED:
	case COMMIT_ADOPTED:
		st = m->st[ST_NOT_MODIFIED];
		bind_rec(st, c, run);
		(void)bind_text(st, 14, c->checksum);
		return st_run(m, st);
	case COMMIT_TOUCHED:
		st = m->st[ST_TOUCHED];
		(void)bind_path(st, 1, c->path);
		(void)bind_opt(st, 2, c->fs.local.mtime);
		(void)bind_opt(st, 3, c->fs.local.size);
		(void)sqlite3_bind_int64(st, 4, run);
		return st_run(m, st);
	case COMMIT_DIGEST:
		if (c->checksum == NULL)
			return BM_EINVAL;
		st = m->st[ST_DIGEST];
		(void)bind_path(st, 1, c->path);
		(void)bind_text(st, 2, c->checksum);
		return st_run(m, st);
	case COMMIT_DELETED:
	case COMMIT_RELEASED:
		st = m->st[ST_DELETE];
		(void)bind_path(st, 1, c->path);
		return st_run(m, st);
	case COMMIT_SIDECAR:
		if (c->sidecar == NULL)
			return BM_EINVAL;
		st = m->st[ST_SIDECAR];
		(void)bind_path(st, 1, c->path);
		(void)bind_text(st, 2, c->sidecar);
		return st_run(m, st);
	case COMMIT_MISMATCH:
		return mismatch_put(m, run, c);
	case COMMIT_FAILED:
	case COMMIT_VANISHED:
		return 0;
	}
	return BM_EINVAL;
}

/* Append the event of one record, time-stamped now (CLOCK_REALTIME). */
static int
commit_event(struct manifest *m, int64_t run, const struct commit_rec *c)
{
	sqlite3_stmt	*st = m->st[ST_EVENT];
	struct timespec	 ts;

	if (clock_gettime(CLOCK_REALTIME, &ts) == -1)
		ts.tv_sec = ts.tv_nsec = 0;
	(void)sqlite3_bind_int64(st, 1, run);
	(void)sqlite3_bind_int64(st, 2,
	    (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec);
	(void)bind_path(st, 3, c->path);
	(void)bind_text(st, 4, commit_op_name(c->op));
	(void)bind_text(st, 5, c->reason);
	(void)sqlite3_bind_int64(st, 6, c->bytes);
	(void)bind_text(st, 7, c->net);
	return st_run(m, st);
}

/*
 * Record n outcomes (recs borrowed) of run in one IMMEDIATE transaction:
 * each record changes its row as the file comment says and appends one
 * event.  Returns 0, BM_EINVAL (unknown op or NULL path), or BM_EDB
 * (e.g. locked past the busy timeout); on failure nothing of the batch
 * is recorded.
 */
/* *ret: does the SELECT EXISTS statement st_id find no row?  0 or BM_EDB. */
static int
table_none(struct manifest *m, int st_id, bool *ret)
{
	sqlite3_stmt	*st = m->st[st_id];
	int		 rc = 0, src;

	if ((src = sqlite3_step(st)) == SQLITE_ROW)
		*ret = sqlite3_column_int(st, 0) == 0;
	else
		rc = db_fail(m, src);
	st_done(st);
	return rc;
}

int
manifest_commit(struct manifest *m, int64_t run,
    const struct commit_rec *recs, size_t n)
{
	size_t	 i;
	int	 rc;

	for (i = 0; i < n; i++) {
		if (recs[i].path == NULL ||
		    commit_op_name(recs[i].op) == NULL) {
			(void)snprintf(m->err, sizeof(m->err),
			    "%s: commit record %zu: invalid", m->path, i);
			return BM_EINVAL;
		}
	}
	if ((rc = tx_begin(m, true)) != 0)
		return rc;
	if ((rc = table_none(m, ST_PARTIALS_ANY, &m->no_partials)) != 0 ||
	    (rc = table_none(m, ST_MISMATCHES_ANY, &m->no_mismatches)) != 0)
		goto out;
	for (i = 0; i < n; i++) {
		if ((rc = commit_row(m, run, &recs[i])) != 0 ||
		    (rc = commit_event(m, run, &recs[i])) != 0)
			goto out;
	}
	rc = tx_commit(m);
out:
	if (rc != 0)
		tx_rollback(m);
	m->no_partials = m->no_mismatches = false;
	return rc;
}

int
manifest_intent(struct manifest *m, const struct commit_rec *recs, size_t n)
{
	sqlite3_stmt	*st = m->st[ST_INTENT_PUT];
	size_t		 i;
	int		 rc;

	if (n == 0)
		return 0;
	if ((rc = tx_begin(m, true)) != 0)
		return rc;
	for (i = 0; i < n; i++) {
		(void)bind_path(st, 1, recs[i].path);
		(void)sqlite3_bind_int64(st, 2, recs[i].fs.listed.size);
		(void)sqlite3_bind_int(st, 3, recs[i].fs.listed.size_exact);
		(void)sqlite3_bind_int64(st, 4, recs[i].fs.listed.mtime);
		(void)sqlite3_bind_int(st, 5, (int)recs[i].fs.listed.prec);
		(void)sqlite3_bind_int64(st, 6, recs[i].fs.local.size);
		(void)sqlite3_bind_int64(st, 7, recs[i].fs.local.mtime);
		if ((rc = st_run(m, st)) != 0)
			goto out;
	}
	rc = tx_commit(m);
out:
	if (rc != 0)
		tx_rollback(m);
	return rc;
}

int
manifest_intents(struct manifest *m, manifest_intent_fn fn, void *ctx)
{
	sqlite3_stmt	*st = m->st[ST_INTENTS];
	struct commit_rec c;
	int		 rc = 0, src;

	while ((src = sqlite3_step(st)) == SQLITE_ROW) {
		memset(&c, 0, sizeof(c));
		c.op = COMMIT_ADOPTED;
		c.type = ENTRY_FILE;
		c.path = col_str(st, 0, NULL);
		c.fs.listed.size = sqlite3_column_int64(st, 1);
		c.fs.listed.size_exact = sqlite3_column_int(st, 2) != 0;
		c.fs.listed.mtime = sqlite3_column_int64(st, 3);
		c.fs.listed.prec = (enum mtime_prec)sqlite3_column_int(st, 4);
		c.fs.upstream.size = c.fs.upstream.mtime = -1;
		c.fs.local.size = sqlite3_column_int64(st, 5);
		c.fs.local.mtime = sqlite3_column_int64(st, 6);
		c.bytes = 0;
		if (c.path == NULL) {
			rc = BM_EDB;
			goto out;
		}
		if ((rc = fn(ctx, &c)) != 0)
			goto out;
	}
	if (src != SQLITE_DONE)
		rc = db_fail(m, src);
out:
	st_done(st);
	return rc;
}

int
manifest_intents_clear(struct manifest *m)
{
	return st_run(m, m->st[ST_INTENT_CLEAR]);
}

/* Walk the rows of a FILE_COLS statement already bound. */
static int
ls_walk(struct manifest *m, sqlite3_stmt *st, manifest_file_fn fn, void *ctx)
{
	struct file_row	 f;
	int		 rc = 0, src;

	while ((src = sqlite3_step(st)) == SQLITE_ROW) {
		file_from_row(st, &f);
		f.fetched_end_ns = sqlite3_column_count(st) > 16 ?
		    col_opt(st, 16) : -1;
		if ((rc = fn(ctx, &f)) != 0)
			goto out;
	}
	if (src != SQLITE_DONE)
		rc = db_fail(m, src);
out:
	st_done(st);
	return rc;
}

/* Walk the rows committed unchecked (see the file comment). */
int
manifest_ls_unchecked(struct manifest *m, manifest_file_fn fn, void *ctx)
{
	sqlite3_stmt	*st = m->st[ST_UNCHECKED];

	(void)bind_text(st, 1, MANIFEST_SIDECAR_UNCHECKED);
	return ls_walk(m, st, fn, ctx);
}

/*
 * Walk the committed rows whose path is prefix or lies under prefix/
 * (prefix borrowed; "" or NULL for all; trailing '/' ignored) in path
 * order.  The range prefix + "/" <= path < prefix + "0" ('0' follows
 * '/') selects the subtree by BLOB order.  Returns 0, fn's non-zero
 * value, BM_ENOMEM or BM_EDB.
 */
int
manifest_ls(struct manifest *m, const char *prefix, manifest_file_fn fn,
    void *ctx)
{
	sqlite3_stmt	*st;
	char		*lo = NULL, *hi = NULL;
	size_t		 len;
	int		 rc;

	len = prefix != NULL ? strlen(prefix) : 0;
	while (len > 0 && prefix[len - 1] == '/')
		len--;
	if (len == 0)
		return ls_walk(m, m->st[ST_LS_ALL], fn, ctx);
	if ((lo = malloc(len + 1)) == NULL || (hi = malloc(len + 1)) == NULL) {
		rc = BM_ENOMEM;
		goto out;
	}
	memcpy(lo, prefix, len);
	memcpy(hi, prefix, len);
	lo[len] = '/';
	hi[len] = '0';
	st = m->st[ST_LS_PREFIX];
	(void)sqlite3_bind_blob(st, 1, prefix, (int)len, SQLITE_STATIC);
	(void)sqlite3_bind_blob(st, 2, lo, (int)len + 1, SQLITE_STATIC);
	(void)sqlite3_bind_blob(st, 3, hi, (int)len + 1, SQLITE_STATIC);
	rc = ls_walk(m, st, fn, ctx);
out:
	free(lo);
	free(hi);
	return rc;
}

/*
 * Walk the events of run in the order they were committed; row strings
 * are borrowed until fn returns.  Returns 0, fn's non-zero value or
 * BM_EDB.
 */
int
manifest_events(struct manifest *m, int64_t run, manifest_event_fn fn,
    void *ctx)
{
	sqlite3_stmt		*st = m->st[ST_EVENTS];
	struct event_row	 ev;
	int			 rc = 0, src;

	(void)sqlite3_bind_int64(st, 1, run);
	while ((src = sqlite3_step(st)) == SQLITE_ROW) {
		memset(&ev, 0, sizeof(ev));
		ev.run = sqlite3_column_int64(st, 0);
		ev.path = col_str(st, 1, NULL);
		ev.op = col_str(st, 2, NULL);
		ev.reason = col_str(st, 3, NULL);
		ev.bytes = sqlite3_column_int64(st, 4);
		ev.time_ns = sqlite3_column_int64(st, 5);
		ev.net = col_str(st, 6, NULL);
		if ((rc = fn(ctx, &ev)) != 0)
			goto out;
	}
	if (src != SQLITE_DONE)
		rc = db_fail(m, src);
out:
	st_done(st);
	return rc;
}

/*
 * Encode n ranges (pairs) as "START-END START-END ..." into a new
 * malloc'd string.  Returns NULL on out-of-memory.
 */
static char *
ranges_encode(const uint64_t *r, size_t n)
{
	char	*s, *p;
	size_t	 i, cap = n * 42 + 1;
	int	 w;

	if ((s = malloc(cap)) == NULL)
		return NULL;
	p = s;
	*p = '\0';
	for (i = 0; i < n; i++) {
		w = snprintf(p, cap - (size_t)(p - s), "%s%llu-%llu",
		    i ? " " : "", (unsigned long long)r[2 * i],
		    (unsigned long long)r[2 * i + 1]);
		if (w < 0 || (size_t)w >= cap - (size_t)(p - s)) {
			free(s);
			return NULL;
		}
		p += w;
	}
	return s;
}

/*
 * Decode a ranges column (hostile: the file may have been edited) into
 * out (MANIFEST_MAX_RANGES pairs).  Ranges must be non-empty, sorted,
 * disjoint and end at most at size.  Returns the number of pairs, or 0
 * when the text is not valid.
 */
static size_t
ranges_decode(const char *s, int64_t size, uint64_t *out)
{
	unsigned long long a, b;
	uint64_t	 last = 0;
	size_t		 n = 0;
	char		*end;

	if (s == NULL || size <= 0)
		return 0;
	while (*s != '\0') {
		if (n == MANIFEST_MAX_RANGES || *s < '0' || *s > '9')
			return 0;
		errno = 0;
		a = strtoull(s, &end, 10);
		if (errno != 0 || *end != '-' || end[1] < '0' || end[1] > '9')
			return 0;
		b = strtoull(end + 1, &end, 10);
		if (errno != 0 || (*end != ' ' && *end != '\0'))
			return 0;
		if (a >= b || b > (uint64_t)size || (n > 0 && a < last))
			return 0;
		out[2 * n] = a;
		out[2 * n + 1] = b;
		last = b;
		n++;
		s = *end == ' ' ? end + 1 : end;
	}
	return n;
}

/*
 * Record (or drop) the finished ranges of temp files, n records (recs
 * borrowed) of run in one IMMEDIATE transaction: a record with a
 * tmpname replaces the row of its path, one with tmpname NULL deletes
 * it.  The caller must have made the ranges' bytes durable first
 * (fdatasync): a recorded range is a promise that they are on disk.
 * Returns 0, BM_EINVAL (NULL path, more than MANIFEST_MAX_RANGES ranges),
 * BM_ENOMEM or BM_EDB (then nothing is recorded).
 */
int
manifest_partials_put(struct manifest *m, int64_t run,
    const struct partial_rec *recs, size_t n)
{
	sqlite3_stmt	*st = m->st[ST_PARTIAL_PUT];
	char		*text = NULL;
	size_t		 i;
	int		 rc;

	for (i = 0; i < n; i++)
		if (recs[i].path == NULL ||
		    recs[i].nranges > MANIFEST_MAX_RANGES) {
			(void)snprintf(m->err, sizeof(m->err),
			    "%s: partial record %zu: invalid", m->path, i);
			return BM_EINVAL;
		}
	if ((rc = tx_begin(m, true)) != 0)
		return rc;
	for (i = 0; i < n; i++) {
		if (recs[i].tmpname == NULL) {
			if ((rc = partial_del(m, recs[i].path)) != 0)
				goto out;
			continue;
		}
		if ((text = ranges_encode(recs[i].ranges,
		    recs[i].nranges)) == NULL) {
			rc = BM_ENOMEM;
			goto out;
		}
		(void)bind_path(st, 1, recs[i].path);
		(void)bind_text(st, 2, recs[i].tmpname);
		(void)sqlite3_bind_int64(st, 3, recs[i].size);
		(void)sqlite3_bind_int64(st, 4, recs[i].list_mtime);
		(void)bind_opt(st, 5, recs[i].up_mtime);
		(void)bind_text(st, 6, recs[i].etag);
		(void)bind_text(st, 7, text);
		(void)sqlite3_bind_int64(st, 8, run);
		rc = st_run(m, st);
		free(text);
		text = NULL;
		if (rc != 0)
			goto out;
	}
	rc = tx_commit(m);
out:
	if (rc != 0)
		tx_rollback(m);
	return rc;
}

/*
 * Walk the partials rows in path order.  Row strings and ranges are
 * borrowed until fn returns; a row whose ranges do not decode (see
 * ranges_decode) comes with nranges 0.  Returns 0, fn's non-zero value
 * or BM_EDB.
 */
int
manifest_partials(struct manifest *m, manifest_partial_fn fn, void *ctx)
{
	sqlite3_stmt		*st = m->st[ST_PARTIALS];
	struct partial_rec	 p;
	uint64_t		 r[2 * MANIFEST_MAX_RANGES];
	int			 rc = 0, src;

	while ((src = sqlite3_step(st)) == SQLITE_ROW) {
		memset(&p, 0, sizeof(p));
		p.path = col_str(st, 0, NULL);
		p.tmpname = col_str(st, 1, NULL);
		p.size = sqlite3_column_int64(st, 2);
		p.list_mtime = sqlite3_column_int64(st, 3);
		p.up_mtime = col_opt(st, 4);
		p.etag = col_str(st, 5, NULL);
		p.nranges = ranges_decode(col_str(st, 6, NULL), p.size, r);
		p.ranges = r;
		if (p.path == NULL || p.tmpname == NULL)
			continue;
		if ((rc = fn(ctx, &p)) != 0)
			goto out;
	}
	if (src != SQLITE_DONE)
		rc = db_fail(m, src);
out:
	st_done(st);
	return rc;
}

/*
 * Walk the mismatches rows in path order (strings borrowed until fn
 * returns).  Returns 0, fn's non-zero value or BM_EDB.
 */

int
manifest_mismatches(struct manifest *m, manifest_mismatch_fn fn, void *ctx)
{
	sqlite3_stmt		*st = m->st[ST_MISMATCHES];
	struct mismatch_rec	 r;
	int			 rc = 0, src;

	while ((src = sqlite3_step(st)) == SQLITE_ROW) {
		memset(&r, 0, sizeof(r));
		r.path = col_str(st, 0, NULL);
		r.fs.listed.size = sqlite3_column_int64(st, 1);
		r.fs.listed.size_exact = sqlite3_column_int(st, 2) != 0;
		r.fs.listed.mtime = sqlite3_column_int64(st, 3);
		r.fs.listed.prec = (enum mtime_prec)sqlite3_column_int(st, 4);
		r.fs.upstream.size = col_opt(st, 5);
		r.fs.upstream.mtime = col_opt(st, 6);
		r.etag = col_str(st, 7, NULL);
		r.want = col_str(st, 8, NULL);
		r.got = col_str(st, 9, NULL);
		r.run = col_opt(st, 10);
		if (r.path == NULL || r.want == NULL || r.got == NULL)
			continue;
		if ((rc = fn(ctx, &r)) != 0)
			goto out;
	}
	if (src != SQLITE_DONE)
		rc = db_fail(m, src);
out:
	st_done(st);
	return rc;
}

/* Fill z from a zones row (host borrowed from the statement). */
static void
zone_from_row(sqlite3_stmt *st, struct zone_rec *z)
{
	const unsigned char *h = sqlite3_column_text(st, 0);

	(void)snprintf(z->host, sizeof(z->host), "%s",
	    h != NULL ? (const char *)h : "");
	z->offset = (int32_t)sqlite3_column_int64(st, 1);
	z->mdtm_local = sqlite3_column_int64(st, 2) != 0;
	z->learnt_ns = sqlite3_column_int64(st, 3);
	z->checked_ns = sqlite3_column_int64(st, 4);
}

int
manifest_zone_get(struct manifest *m, const char *host, struct zone_rec *ret)
{
	sqlite3_stmt	*st = m->st[ST_ZONE_GET];
	int		 rc, src;

	if ((src = sqlite3_bind_text(st, 1, host, -1, SQLITE_STATIC)) !=
	    SQLITE_OK) {
		rc = db_fail(m, src);
		goto out;
	}
	src = sqlite3_step(st);
	if (src == SQLITE_ROW) {
		zone_from_row(st, ret);
		rc = 0;
	} else if (src == SQLITE_DONE)
		rc = BM_ENOENT;
	else
		rc = db_fail(m, src);
out:
	st_done(st);
	return rc;
}

int
manifest_zone_put(struct manifest *m, const struct zone_rec *z)
{
	sqlite3_stmt	*st = m->st[ST_ZONE_PUT];
	int		 rc = 0, src;

	if ((src = sqlite3_bind_text(st, 1, z->host, -1, SQLITE_STATIC)) !=
	    SQLITE_OK ||
	    (src = sqlite3_bind_int64(st, 2, z->offset)) != SQLITE_OK ||
	    (src = sqlite3_bind_int64(st, 3, z->mdtm_local)) != SQLITE_OK ||
	    (src = sqlite3_bind_int64(st, 4, z->learnt_ns)) != SQLITE_OK ||
	    (src = sqlite3_bind_int64(st, 5, z->checked_ns)) != SQLITE_OK ||
	    (src = sqlite3_step(st)) != SQLITE_DONE)
		rc = db_fail(m, src);
	st_done(st);
	return rc;
}

int
manifest_zones(struct manifest *m, manifest_zone_fn fn, void *ctx)
{
	sqlite3_stmt	*st = m->st[ST_ZONES];
	struct zone_rec	 z;
	int		 rc = 0, src;

	while ((src = sqlite3_step(st)) == SQLITE_ROW) {
		zone_from_row(st, &z);
		if ((rc = fn(ctx, &z)) != 0)
			goto out;
	}
	if (src != SQLITE_DONE)
		rc = db_fail(m, src);
out:
	st_done(st);
	return rc;
}
