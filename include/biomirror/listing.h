/*
 * The listing: what upstream says it holds.  One struct entry per file,
 * directory or symlink, with every field's precision recorded ("listings
 * are data, not truth", DESIGN.md).  Names are bytes (never re-encoded);
 * paths are relative to the source root, '/'-separated, without a leading
 * or trailing '/'.  This module also owns path validation (STYLE.md rule
 * 35), percent-decoding, include/exclude filtering and time-zone
 * resolution of listed times.  It knows nothing of where entries come from.
 */
#ifndef BIOMIRROR_LISTING_H
#define BIOMIRROR_LISTING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum entry_type {
	ENTRY_FILE = 'f',
	ENTRY_DIR = 'd',
	ENTRY_SYMLINK = 'l',
};

/* How precise a listed mtime is.  Ordered: a larger value is finer. */
enum mtime_prec {
	MTIME_UNKNOWN = 0,	/* the listing shows no time at all */
	MTIME_DAY = 1,		/* a date only ("Mon DD YYYY", "2001-06-04") */
	MTIME_MINUTE = 2,	/* "HH:MM" */
	MTIME_SECOND = 3,	/* "HH:MM:SS" */
	MTIME_NS = 4,		/* sub-second (MLSD fractions, our UDT peer) */
};

#define ENTRY_SIZE_UNKNOWN	(-1)

/*
 * The prefix of the store's temp files (STORE_TMP_PREFIX): no component
 * of a safe path starts with it (path_is_safe).
 */
#define LISTING_TMP_PREFIX	".biomirror-tmp."

struct entry {
	/* Laid out without padding: a huge page holds millions of them. */
	char		*path;		/* owned: decoded relative path bytes, NUL-terminated */
	char		*href;		/* owned: raw href as listed, NULL if none */
	char		*size_display;	/* owned: size as the page prints it, NULL if none */
	char		*target;	/* owned: symlink target, NULL if none or unknown */
	char		*unique;	/* owned: MLSD unique= fact (RFC 3659 7.5.2), NULL if none */
	char		*checksum;	/* owned: "ALG:HEX" digest the listing
					   states (bm://: the server's
					   manifest), NULL if none */
	int64_t		 size;		/* bytes: exact, or the shown value's midpoint; -1 unknown */
	int64_t		 size_min;	/* smallest byte count the shown size stands for; -1 unknown */
	int64_t		 size_max;	/* largest; equals size_min when exact; -1 unknown */
	int64_t		 mtime_wall;	/* listed wall-clock time as seconds, read as if UTC (timegm) */
	int64_t		 mtime;		/* ns since the epoch, UTC; set by listing_resolve_times() */
	enum entry_type	 type;		/* file, directory or symlink */
	enum entry_type	 target_type;	/* symlink: its target's type where the listing
					   states it (GridFTP MLSD: Type= beside
					   UNIX.slink), 0 if not stated */
	int32_t		 mtime_nsec;	/* sub-second part of the listed time, 0..999999999 */
	enum mtime_prec	 mtime_prec;	/* MTIME_UNKNOWN: mtime_wall and mtime are meaningless */
	int32_t		 zone_offset;	/* stated offset east of UTC in seconds, when zone_stated */
	bool		 size_exact;	/* true when size is the exact byte count */
	bool		 zone_stated;	/* the listing states the zone (Z, +02:00, GMT) */
};

struct listing;

/*
 * Make an empty listing that refuses to grow past max_entries entries
 * (rule 31).  Returns NULL only on out-of-memory.  Free with listing_free().
 */
struct listing	*listing_new(size_t max_entries);
/* Free a listing and every entry it owns.  NULL is a no-op. */
void		 listing_free(struct listing *l);
/* Number of entries. */
size_t		 listing_count(const struct listing *l);
/* Entry i (0 <= i < listing_count); borrowed, valid until the listing changes. */
const struct entry *listing_get(const struct listing *l, size_t i);
/* Mutable entry i, for parsers and the lister that fill it in. */
struct entry	*listing_get_mut(struct listing *l, size_t i);

/*
 * Append a zeroed entry (size -1, size_min/max -1, MTIME_UNKNOWN) owned by
 * the listing and store a borrowed pointer to it in *ret.  Every string the
 * caller then puts into it must be malloc'd; the listing frees them.
 * Returns 0, BM_ENOMEM, or BM_ELIMIT when max_entries is reached.
 */
int		 listing_append(struct listing *l, struct entry **ret);
/*
 * Append e, moving its strings into the listing (e is left zeroed).
 * Returns 0, BM_ENOMEM or BM_ELIMIT (e kept as it was).
 */
int		 listing_move_in(struct listing *l, struct entry *e);
/*
 * Copy src into dst, each string duplicated (dst's own; what dst held
 * is not freed).  Returns 0, or BM_ENOMEM with dst zeroed.
 */
int		 listing_entry_copy(struct entry *dst, const struct entry *src);
/*
 * Entries l can still take before listing_append gives BM_ELIMIT (the
 * drained ones count).
 */
size_t		 listing_room(const struct listing *l);
/*
 * Free every entry of l after a consumer took them (a batch staged:
 * listing_count is 0 again); they still count against max_entries.
 */
void		 listing_drain(struct listing *l);
/* Entries l held: those it holds now plus every one drained. */
size_t		 listing_total(const struct listing *l);
/*
 * A consumer of a listing's entries in batches, as a crawl makes them:
 * it takes what it needs of l's entries and calls listing_drain(l).
 * Returns 0 or a BM_E* code that stops the crawl.
 */
typedef int	(*listing_drain_fn)(void *ctx, struct listing *l);
/*
 * Take back what a drain took of the direct children of directory
 * prefix ("" the root): their page failed after handing some on.
 * Returns 0 or a BM_E* code that stops the crawl.
 */
typedef int	(*listing_retract_fn)(void *ctx, const char *prefix);
/*
 * Move every entry of src, in order and with the strings it owns, to the
 * end of dst; src is left empty (still to be freed).  Returns 0,
 * BM_ELIMIT (not room for all of them in dst: nothing moved) or BM_ENOMEM.
 */
int		 listing_take(struct listing *dst, struct listing *src);
/*
 * The most entries l ever held (listing_pop does not lower it): what a
 * parser needed room for, duplicates it appended and dropped included.
 */
size_t		 listing_peak(const struct listing *l);
/* Drop the last entry (after a parser decided it was not wanted). */
void		 listing_pop(struct listing *l);
/* Sort entries by path bytes (memcmp order) and drop exact duplicate paths,
 * keeping the first.  Returns 0 or BM_ENOMEM. */
int		 listing_sort(struct listing *l);
/* listing_sort(), with the number of duplicates dropped in *ret_dropped
 * (may be NULL). */
int		 listing_sort_count(struct listing *l, size_t *ret_dropped);
/* Index of the entry with path (len bytes, no NUL needed) in l sorted by
 * listing_sort(), or -1 when none. */
ssize_t		 listing_find(const struct listing *l, const char *path,
		    size_t len);

/* Free the strings owned by one entry and zero it. */
void		 entry_clear(struct entry *e);

/*
 * True when path (len bytes, not NUL-terminated necessarily) is a safe
 * relative path: not empty, not absolute, no "." or ".." or empty
 * component, no NUL or control byte (0x01-0x1f, 0x7f), no component over
 * 255 bytes, no component starting with the store's temp-file prefix
 * (LISTING_TMP_PREFIX), total under PATH_MAX.  Rejects, never repairs
 * (rule 35).
 */
bool		 path_is_safe(const char *path, size_t len);
/* Same for a single name (no '/' allowed). */
bool		 name_is_safe(const char *name, size_t len);

/*
 * Percent-decode src (len bytes) exactly once (RFC 3986 section 2.1);
 * '+' stays '+'.  A '%' not followed by two hex digits is an error.
 * A decoded NUL is an error.  On success *ret is a malloc'd NUL-terminated
 * string and *ret_len its length (may be NULL).  Returns 0, BM_EINVAL or
 * BM_ENOMEM.
 */
int		 path_decode(const char *src, size_t len, char **ret, size_t *ret_len);
/*
 * Percent-encode a relative path for use in a URL: every byte outside
 * RFC 3986 unreserved characters and '/' is written %XX.  *ret is malloc'd.
 * Returns 0 or BM_ENOMEM.
 */
int		 path_encode(const char *path, size_t len, char **ret);

/*
 * include/exclude rules (DESIGN.md key table): fnmatch(3) globs on the
 * path relative to the source; a pattern without '/' matches the last
 * component; a file is taken when it matches an include (or there is
 * none) and no exclude; a directory is skipped only when an exclude ending
 * in '/' matches it.  Both arrays are borrowed.
 */
struct filter {
	const char *const *include;	/* borrowed: include globs */
	size_t		 ninclude;
	const char *const *exclude;	/* borrowed: exclude globs */
	size_t		 nexclude;
};
/* True when the file at path is taken by the filter. */
bool		 filter_file(const struct filter *f, const char *path);
/* True when the crawl descends into the directory at path. */
bool		 filter_dir(const struct filter *f, const char *path);

/*
 * A time zone for listed wall-clock times (listing_timezone key):
 * "UTC", a fixed offset "+0100"/"-05:30", or an IANA name
 * ("Europe/London", looked up in the system zoneinfo), or "auto".
 */
struct tzspec {
	int		 kind;		/* TZ_UTC, TZ_FIXED, TZ_NAMED, TZ_AUTO */
	int32_t		 offset;	/* TZ_FIXED: seconds east of UTC */
	char		 name[64];	/* TZ_NAMED: the IANA name */
};
#define TZ_UTC		0
#define TZ_FIXED	1
#define TZ_NAMED	2
#define TZ_AUTO		3

/* Parse a listing_timezone value.  Returns 0 or BM_EINVAL (unknown zone). */
int		 tzspec_parse(const char *s, struct tzspec *ret);
/*
 * Convert a wall-clock time (seconds read as if UTC) in zone tz to UTC
 * seconds.  TZ_AUTO with a learned offset is passed as TZ_FIXED.
 * Returns 0 or BM_EINVAL.  Not thread-safe for TZ_NAMED (uses TZ/tzset).
 */
int		 tzspec_to_utc(const struct tzspec *tz, int64_t wall, int64_t *ret);
/*
 * Fill e->mtime for every entry with a known mtime: stated zones use their
 * offset, the others use tz.  Returns 0 or BM_EINVAL.
 */
int		 listing_resolve_times(struct listing *l, const struct tzspec *tz);

#endif
