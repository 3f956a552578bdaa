/*
 * The configuration file (DESIGN.md "Config"): [global] and one section per
 * mirror, read with inih and checked key by key; conf_reader() feeds inih
 * one physical line at a time so that every error names its line, and the
 * parse records every error.  Invariants: a mirror in struct config has
 * passed mirror_conf_check() and has a dest of its own; mirror_conf_set()
 * alone interprets a mirror value (command-line overrides get the file's
 * checks).  Never logs (STYLE.md rule 24).  Why and how the lines are
 * fed: see docs/internals.md, "Reading the config file".
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ini.h>

#include "biomirror/bmproto.h"
#include "biomirror/config.h"
#include "biomirror/error.h"
#include "biomirror/fileio.h"
#include "biomirror/lister.h"
#include "biomirror/listing.h"
#include "biomirror/xfer.h"

#define CONF_MAX_FILE	(1024 * 1024)	/* bytes of config file read */
#define CONF_NAME_MAX	64		/* bytes of a mirror name */
#define CONF_SECRET_MAX	4096		/* bytes of a secret_file */
#define CONF_MAX_GLOBS	1024		/* include (or exclude) patterns */
#define CONF_REASON	512		/* bytes of a reason string */
#define CONF_MAX_ERRORS	1000		/* errors recorded, then the parse stops */
#ifdef BM_VERSION
#define BM_VERSION_TEXT	BM_VERSION
#else
#define BM_VERSION_TEXT	"0.0.0"
#endif
#define CONF_STR2(x)	#x
#define CONF_STR(x)	CONF_STR2(x)

enum mkey {
	MK_SOURCE, MK_DEST, MK_INCLUDE, MK_EXCLUDE, MK_CONCURRENCY,
	MK_STREAMS, MK_MIN_SPLIT, MK_MAX_CONNECTIONS, MK_TRANSPORT,
	MK_DELETE, MK_MAX_DELETE, MK_VERIFY, MK_PUBLISH, MK_BWLIMIT,
	MK_RETRIES, MK_TIMEOUT, MK_STALL_TIMEOUT, MK_LISTING_TZ, MK_FTP_TZ,
	MK_FILE_MODE, MK_DIR_MODE, MK_CA_FILE, MK_USER_AGENT, MK_POST_SYNC,
	MK_METRICS_FILE, MK_FTP_TLS, MK_USER, MK_PASSWORD_FILE,
	MK_FTP_ACTIVE, MK_FOLLOW_SYMLINKS, MK_HOOK_TIMEOUT, MK_FTP_MODE,
	MK_TCP_CONGESTION, MK_UDT_BUFFER, MK_SECRET_FILE, MK_PRE_PUBLISH,
	MK_MAX_ENTRIES,
	MK_COUNT
};

static const char *const mirror_keys[MK_COUNT] = {
	"source", "dest", "include", "exclude", "concurrency",
	"streams", "min_split", "max_connections", "transport",
	"delete", "max_delete", "verify", "publish", "bwlimit",
	"retries", "timeout", "stall_timeout", "listing_timezone",
	"ftp_timezone", "file_mode", "dir_mode", "ca_file", "user_agent",
	"post_sync", "metrics_file", "ftp_tls", "user", "password_file",
	"ftp_active", "follow_symlinks", "hook_timeout", "ftp_mode",
	"tcp_congestion", "udt_buffer", "secret_file", "pre_publish", "max_entries"
};

/* The built-in default of each mirror key, as check-config -v shows it. */
static const char *const mirror_key_defaults[MK_COUNT] = {
	"required", "required", "none", "none", "8",
	"4", "16M", "0 (by scheme: 8 http, 4 ftp)", "tcp",
	"no", "10%", "sidecar", "file", "0 (unlimited)",
	"5", "60", "120", "UTC",
	"UTC", "0644", "0755", "none (system trust)",
	"biomirror/" BM_VERSION_TEXT,
	"none", "none", "no (ftp://), require (ftps://)", "none (anonymous)",
	"none", "no", "no", "3600", "stream",
	"auto", "0 (sized by the transport)", "none (anonymous)", "none",
	"50000000"
};

enum gkey { GK_STATE_DIR, GK_LOG_LEVEL, GK_USER_AGENT, GK_COUNT };

static const char *const global_keys[GK_COUNT] = {
	"state_dir", "log_level", "user_agent"
};

/*
 * SECT_BROKEN: a malformed or duplicate section header; its keys go to a
 * scratch mirror, checked and dropped, their errors to owner.
 */
enum sect_kind { SECT_NONE = 0, SECT_GLOBAL, SECT_MIRROR, SECT_BROKEN,
    SECT_SERVE, SECT_EXPORT };

/* What conf_reader() hands inih for a line it has looked at. */
enum line_fate { LINE_KEEP = 0, LINE_BLANK, LINE_HEADER };

/* State of one config_load(): the file in memory, the reader, the result. */
struct conf_load {
	const char	*path;		/* borrowed: file name for messages */
	const char	*buf;		/* borrowed: file contents */
	size_t		 len;		/* bytes in buf */
	size_t		 pos;		/* offset of the next line in buf */
	const char	*line;		/* borrowed: that line in buf, no line end */
	size_t		 line_len;	/* its bytes */
	unsigned	 lineno;	/* line last handed to inih, 1-based */
	bool		 prev_name;	/* inih's prev_name: a key line seen in this section */
	char		 prev_key[CONF_NAME_MAX + 1]; /* that key, for messages */
	unsigned	 prev_line;	/* line of that key */
	struct config	*c;		/* borrowed: config being filled */
	enum sect_kind	 kind;		/* section the current line is in */
	struct mirror_conf *cur;	/* borrowed: the mirror of that section
					   (SECT_BROKEN: the scratch) */
	struct mirror_conf *owner;	/* borrowed: SECT_BROKEN: the mirror
					   its errors make bad, NULL if none */
	struct mirror_conf *scratch;	/* owned: SECT_BROKEN's mirror */
	struct export_conf *exp;	/* borrowed: SECT_EXPORT's export */
	struct export_conf *scratch_exp; /* owned: a repeated [export]'s */
	bool		 seen_global;	/* a [global] header was seen */
	unsigned	 global_line;	/* its line */
	unsigned	 seen[MK_COUNT]; /* line each key was set on, 0 = not yet */
	unsigned	 gseen[MK_COUNT]; /* the same for [global]'s defaults */
	struct mirror_conf *gscratch;	/* owned: checks [global]'s defaults */
	int		 rc;		/* BM_ENOMEM or BM_ELIMIT (too many
					   errors): the parse stops; else 0 */
};

static int	conf_fmt(char *, size_t, const char *, ...)
		    __attribute__((format(printf, 3, 4)));
static int	conf_bad(char *, size_t, const char *, const char *,
		    const char *, ...) __attribute__((format(printf, 5, 6)));
static void	load_fail(struct conf_load *, unsigned, int, const char *, ...)
		    __attribute__((format(printf, 4, 5)));
static void	open_serve(struct conf_load *, const char *);
static void	check_post_sync_line(struct conf_load *, const char *,
		    const char *);
static void	export_conf_free(struct export_conf *);
static void	mirror_fail(struct conf_load *, struct mirror_conf *, unsigned,
		    int, const char *, ...) __attribute__((format(printf, 5, 6)));

/* Write a reason into errbuf (if any); always returns BM_EINVAL. */
static int
conf_fmt(char *errbuf, size_t errlen, const char *fmt, ...)
{
	va_list	 ap;

	if (errbuf != NULL && errlen > 0) {
		va_start(ap, fmt);
		(void)vsnprintf(errbuf, errlen, fmt, ap);
		va_end(ap);
	}
	return BM_EINVAL;
}

/* Write "key = value: reason" into errbuf; returns BM_EINVAL. */
static int
conf_bad(char *errbuf, size_t errlen, const char *key, const char *value,
    const char *fmt, ...)
{
	char	 why[CONF_REASON];
	va_list	 ap;

	va_start(ap, fmt);
	(void)vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	return conf_fmt(errbuf, errlen, "%s = %s: %s", key, value, why);
}

/*
 * Record one error of a load: "FILE:LINE" and the reason, against mirror
 * m (made bad; NULL: none) or, when fatal, against the whole file.  Out
 * of memory, or CONF_MAX_ERRORS reached, stops the parse (ld->rc).
 */
static void
load_record(struct conf_load *ld, struct mirror_conf *m, bool fatal,
    unsigned line, int rc, const char *why)
{
	struct config		*c = ld->c;
	struct config_error	*v, *e;

	if (ld->rc != 0)
		return;
	if (rc == BM_ENOMEM) {
		ld->rc = BM_ENOMEM;
		return;
	}
	if (c->nerrors == CONF_MAX_ERRORS) {
		why = "more than " CONF_STR(CONF_MAX_ERRORS) " errors: the rest "
		    "of the file was not read";
		m = NULL;
		fatal = true;
		ld->rc = BM_ELIMIT;
	}
	if ((v = reallocarray(c->errors, c->nerrors + 1, sizeof(*v))) ==
	    NULL) {
		ld->rc = BM_ENOMEM;
		return;
	}
	c->errors = v;
	e = &v[c->nerrors];
	e->mirror = m;
	e->reason = strdup(why);
	if (asprintf(&e->where, "%s:%u", ld->path, line) < 0)
		e->where = NULL;
	if (e->reason == NULL || e->where == NULL) {
		free(e->reason);
		free(e->where);
		ld->rc = BM_ENOMEM;
		return;
	}
	c->nerrors++;
	if (m != NULL)
		m->bad = true;
	if (fatal)
		c->fatal = true;
}

/*
 * An error of the section being read: a mirror's makes it bad, a broken
 * section's its owner (if any); [global] and no section are fatal.
 */
static void
load_fail(struct conf_load *ld, unsigned line, int rc, const char *fmt, ...)
{
	char	 why[CONF_REASON * 2];
	va_list	 ap;

	va_start(ap, fmt);
	(void)vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	if (ld->kind == SECT_MIRROR)
		load_record(ld, ld->cur, false, line, rc, why);
	else if (ld->kind == SECT_SERVE || ld->kind == SECT_EXPORT) {
		load_record(ld, NULL, false, line, rc, why);
		if (ld->kind == SECT_SERVE)
			ld->c->serve.bad = true;
		else
			ld->exp->bad = true;
	} else if (ld->kind == SECT_BROKEN)
		load_record(ld, ld->owner, false, line, rc, why);
	else
		load_record(ld, NULL, true, line, rc, why);
}

/* An error of mirror m found after its section was read. */
static void
mirror_fail(struct conf_load *ld, struct mirror_conf *m, unsigned line,
    int rc, const char *fmt, ...)
{
	char	 why[CONF_REASON * 2];
	va_list	 ap;

	va_start(ap, fmt);
	(void)vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	load_record(ld, m, false, line, rc, why);
}

static bool
has_ctrl(const char *s)
{
	for (; *s != '\0'; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return true;
	return false;
}

/*
 * Parse a non-negative decimal integer in [min, max] (no sign, no blanks).
 * *ret is written only on success.  Returns 0 or BM_EINVAL.
 */
int
config_parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *ret)
{
	unsigned long long	 v;
	char			*end;

	if (s == NULL || !isdigit((unsigned char)s[0]))
		return BM_EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || *end != '\0' || v < min || v > max)
		return BM_EINVAL;
	*ret = (uint64_t)v;
	return 0;
}

/*
 * Parse a size: decimal digits and an optional K, M, G or T (either case,
 * powers of 1024).  "16M" -> 16777216.  *ret is written only on success.
 * Returns 0 or BM_EINVAL (empty, sign, garbage, more than 2^64-1 bytes).
 */
int
config_parse_size(const char *s, uint64_t *ret)
{
	unsigned long long	 v;
	char			*end;
	unsigned		 shift = 0;

	if (s == NULL || !isdigit((unsigned char)s[0]))
		return BM_EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0)
		return BM_EINVAL;
	if (*end != '\0') {
		switch (*end) {
		case 'K': case 'k': shift = 10; break;
		case 'M': case 'm': shift = 20; break;
		case 'G': case 'g': shift = 30; break;
		case 'T': case 't': shift = 40; break;
		default: return BM_EINVAL;
		}
		if (end[1] != '\0')
			return BM_EINVAL;
	}
	if (v > (UINT64_MAX >> shift))
		return BM_EINVAL;
	*ret = (uint64_t)v << shift;
	return 0;
}

/*
 * Parse a duration: decimal seconds with an optional unit s, m, h or d
 * (either case).  "90m" -> 5400.  *ret is written only on success.
 * Returns 0 or BM_EINVAL (empty, sign, garbage, past INT64_MAX seconds).
 */
int
parse_duration(const char *s, uint64_t *ret)
{
	unsigned long long	 v;
	uint64_t		 mul = 1;
	char			*end;

	if (s == NULL || !isdigit((unsigned char)s[0]))
		return BM_EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0)
		return BM_EINVAL;
	if (*end != '\0') {
		switch (*end) {
		case 's': case 'S': mul = 1; break;
		case 'm': case 'M': mul = 60; break;
		case 'h': case 'H': mul = 3600; break;
		case 'd': case 'D': mul = 86400; break;
		default: return BM_EINVAL;
		}
		if (end[1] != '\0')
			return BM_EINVAL;
	}
	if (v > (uint64_t)INT64_MAX / mul)
		return BM_EINVAL;
	*ret = (uint64_t)v * mul;
	return 0;
}

/*
 * A mirror with every default of DESIGN.md's key table; name is copied.
 * Returns NULL only on out-of-memory.  Free with mirror_conf_free().
 */
struct mirror_conf *
mirror_conf_new(const char *name)
{
	struct mirror_conf	*m;

	if ((m = calloc(1, sizeof(*m))) == NULL)
		return NULL;
	if ((m->name = strdup(name != NULL ? name : "adhoc")) == NULL) {
		free(m);
		return NULL;
	}
	m->concurrency = 8;
	m->streams = 4;
	m->min_split = 16ULL << 20;
	m->max_connections = 0;
	m->max_entries = CONFIG_MAX_ENTRIES;
	m->transport = TRANSPORT_TCP;
	m->delete = false;
	m->max_delete = 10;
	m->max_delete_pct = true;
	m->verify = VERIFY_SIDECAR;
	m->publish = PUBLISH_FILE;
	m->bwlimit = 0;
	m->retries = 5;
	m->timeout = 60;
	m->stall_timeout = 120;
	m->hook_timeout = 3600;
	m->listing_tz.kind = TZ_UTC;
	m->ftp_tz.kind = TZ_UTC;
	m->file_mode = 0644;
	m->dir_mode = 0755;
	return m;
}

static void
settings_free(struct conf_setting *v, size_t n)
{
	size_t	 i;

	for (i = 0; i < n; i++)
		free(v[i].value);
	free(v);
}

/* Append (key, value, line, global) to *v; key must be static. */
static int
settings_add(struct conf_setting **v, size_t *n, const char *key,
    const char *value, unsigned line, bool global)
{
	struct conf_setting	*nv;
	char			*dup;

	if ((dup = strdup(value)) == NULL)
		return BM_ENOMEM;
	if ((nv = reallocarray(*v, *n + 1, sizeof(*nv))) == NULL) {
		free(dup);
		return BM_ENOMEM;
	}
	nv[*n].key = key;
	nv[*n].value = dup;
	nv[*n].line = line;
	nv[*n].global = global;
	*v = nv;
	(*n)++;
	return 0;
}

static void
free_globs(char **v, size_t n)
{
	size_t	 i;

	for (i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

/* Free a mirror config and every string it owns.  NULL is a no-op. */
void
mirror_conf_free(struct mirror_conf *m)
{
	if (m == NULL)
		return;
	free(m->name);
	free(m->source);
	free(m->dest);
	free_globs(m->include, m->ninclude);
	free_globs(m->exclude, m->nexclude);
	free(m->ca_file);
	free(m->user_agent);
	free(m->post_sync);
	free(m->pre_publish);
	free(m->metrics_file);
	free(m->user);
	free(m->password_file);
	free(m->secret_file);
	settings_free(m->settings, m->nsettings);
	free(m);
}

/* A config with no mirrors and built-in defaults.  NULL on ENOMEM. */
struct config *
config_new(void)
{
	struct config	*c;

	if ((c = calloc(1, sizeof(*c))) == NULL)
		return NULL;
	c->serve.max_clients = 16;
	c->serve.max_connections = 8;
	c->serve.idle_timeout = 300;
	c->serve.drain_timeout = 30;
	c->serve.max_queued_bytes = 8 << 20;
	return c;
}

static void
export_conf_free(struct export_conf *e)
{
	if (e == NULL)
		return;
	free(e->name);
	free(e->path);
	free(e->mirror);
	free(e->secret_file);
	free(e->allow);
	free(e);
}

/* See include/biomirror/config.h. */
void
config_clear_exports(struct config *c)
{
	size_t	 i;

	for (i = 0; i < c->nexports; i++)
		export_conf_free(c->exports[i]);
	free(c->exports);
	c->exports = NULL;
	c->nexports = 0;
}

/* Free a config and its mirrors.  NULL is a no-op. */
void
config_free(struct config *c)
{
	size_t	 i;

	if (c == NULL)
		return;
	for (i = 0; i < c->nmirrors; i++)
		mirror_conf_free(c->mirrors[i]);
	free(c->mirrors);
	for (i = 0; i < c->nerrors; i++) {
		free(c->errors[i].where);
		free(c->errors[i].reason);
	}
	free(c->errors);
	config_clear_exports(c);
	free(c->serve.listen);
	free(c->serve.secret_file);
	free(c->serve.metrics_file);
	free(c->path);
	free(c->state_dir);
	free(c->user_agent);
	settings_free(c->defaults, c->ndefaults);
	free(c);
}

/*
 * The mirror whose name is name (exact bytes), or NULL.  Borrowed: valid
 * until config_free(c).
 */
struct mirror_conf *
config_find(const struct config *c, const char *name)
{
	size_t	 i;

	if (c == NULL || name == NULL)
		return NULL;
	for (i = 0; i < c->nmirrors; i++)
		if (strcmp(c->mirrors[i]->name, name) == 0)
			return c->mirrors[i];
	return NULL;
}

/* Replace *dst with a copy of a non-empty string without control bytes. */
static int
set_str(const char *key, const char *v, char **dst, char *errbuf,
    size_t errlen)
{
	char	*s;

	if (v[0] == '\0')
		return conf_fmt(errbuf, errlen, "%s: empty value", key);
	if (has_ctrl(v))
		return conf_bad(errbuf, errlen, key, v,
		    "control characters are not allowed");
	if ((s = strdup(v)) == NULL)
		return BM_ENOMEM;
	free(*dst);
	*dst = s;
	return 0;
}

static int
set_uint(const char *key, const char *v, unsigned min, unsigned max,
    unsigned *dst, char *errbuf, size_t errlen)
{
	uint64_t	 n;

	if (config_parse_uint(v, min, max, &n) != 0)
		return conf_bad(errbuf, errlen, key, v,
		    "expected an integer from %u to %u", min, max);
	*dst = (unsigned)n;
	return 0;
}

/*
 * concurrency and streams: an integer from 1 to max, or "auto" (sized
 * from the measured path, agent/sched/autotune.c; the integer then keeps its
 * value as the starting point).
 */
static int
set_uint_auto(const char *key, const char *v, unsigned max, unsigned *dst,
    bool *is_auto, char *errbuf, size_t errlen)
{
	uint64_t	 n;

	if (strcmp(v, "auto") == 0) {
		*is_auto = true;
		return 0;
	}
	if (config_parse_uint(v, 1, max, &n) != 0)
		return conf_bad(errbuf, errlen, key, v,
		    "expected an integer from 1 to %u, or auto", max);
	*dst = (unsigned)n;
	*is_auto = false;
	return 0;
}

static int
set_size(const char *key, const char *v, uint64_t min, uint64_t *dst,
    char *errbuf, size_t errlen)
{
	uint64_t	 n;

	if (config_parse_size(v, &n) != 0)
		return conf_bad(errbuf, errlen, key, v, "expected a size in "
		    "bytes with an optional K, M, G or T suffix (powers of "
		    "1024), below 16 EiB");
	if (n < min)
		return conf_bad(errbuf, errlen, key, v,
		    "must be at least %llu", (unsigned long long)min);
	*dst = n;
	return 0;
}

static int
set_bool(const char *key, const char *v, bool *dst, char *errbuf,
    size_t errlen)
{
	static const char *const yes[] = { "yes", "true", "on", "1" };
	static const char *const no[] = { "no", "false", "off", "0" };
	size_t	 i;

	for (i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (strcasecmp(v, yes[i]) == 0) {
			*dst = true;
			return 0;
		}
		if (strcasecmp(v, no[i]) == 0) {
			*dst = false;
			return 0;
		}
	}
	return conf_bad(errbuf, errlen, key, v, "expected yes or no");
}

/* An octal mode up to 07777; need are bits the mode must have. */
static int
set_mode(const char *key, const char *v, mode_t need, mode_t forbid,
    mode_t *dst, char *errbuf, size_t errlen)
{
	unsigned long	 n;
	char		*end;
	size_t		 i;

	for (i = 0; v[i] != '\0'; i++)
		if (v[i] < '0' || v[i] > '7')
			break;
	if (i == 0 || v[i] != '\0' || i > 5)
		return conf_bad(errbuf, errlen, key, v,
		    "expected an octal mode from 0 to 07777");
	errno = 0;
	n = strtoul(v, &end, 8);
	if (errno != 0 || *end != '\0' || n > 07777)
		return conf_bad(errbuf, errlen, key, v,
		    "expected an octal mode from 0 to 07777");
	if ((n & need) != need)
		return conf_bad(errbuf, errlen, key, v,
		    "the owner needs at least %04o", (unsigned)need);
	if ((n & forbid) != 0)
		return conf_bad(errbuf, errlen, key, v, "set-user-ID and "
		    "set-group-ID bits are not allowed on mirrored files");
	*dst = (mode_t)n;
	return 0;
}

static int
set_max_delete(const char *v, struct mirror_conf *m, char *errbuf,
    size_t errlen)
{
	char		 num[32];
	size_t		 n = strlen(v);
	uint64_t	 x;

	if (n > 1 && n < sizeof(num) && v[n - 1] == '%') {
		memcpy(num, v, n - 1);
		num[n - 1] = '\0';
		if (config_parse_uint(num, 0, 100, &x) == 0) {
			m->max_delete = x;
			m->max_delete_pct = true;
			return 0;
		}
	} else if (config_parse_uint(v, 0, UINT64_MAX, &x) == 0) {
		m->max_delete = x;
		m->max_delete_pct = false;
		return 0;
	}
	return conf_bad(errbuf, errlen, "max_delete", v,
	    "expected a count or a percentage from 0%% to 100%%");
}

static int
set_bwlimit(const char *v, struct mirror_conf *m, char *errbuf,
    size_t errlen)
{
	char	 num[64];
	size_t	 n = strlen(v);

	/* "10M/s" reads as naturally as "10M" for a rate. */
	if (n > 2 && n < sizeof(num) && strcmp(v + n - 2, "/s") == 0) {
		memcpy(num, v, n - 2);
		num[n - 2] = '\0';
		if (config_parse_size(num, &m->bwlimit) == 0)
			return 0;
	}
	return set_size("bwlimit", v, 0, &m->bwlimit, errbuf, errlen);
}

static int
set_tz(const char *key, const char *v, struct tzspec *dst, char *errbuf,
    size_t errlen)
{
	struct tzspec	 tz;

	if (tzspec_parse(v, &tz) != 0)
		return conf_bad(errbuf, errlen, key, v, "unknown time zone "
		    "(use UTC, an offset such as +0100, a zone name such as "
		    "Europe/London, or auto)");
	*dst = tz;
	return 0;
}

/*
 * True when v has a user part (RFC 3986 section 3.2.1): an '@' before
 * the path, query or fragment of its authority (after "SCHEME://", or
 * from the start when v has none).  No host or port holds an '@', so
 * this needs no parser and comes before every check that repeats v.
 */
static bool
source_has_userinfo(const char *v)
{
	const char	*a = strstr(v, "://");

	a = a != NULL ? a + 3 : v;
	return memchr(a, '@', strcspn(a, "/?#")) != NULL;
}

/* The refusal of a source with a user part: it never repeats the URL. */
static int
source_userinfo(char *errbuf, size_t errlen)
{
	return conf_fmt(errbuf, errlen, "source: a source URL takes no user "
	    "or password (it is logged and stored with every run; an FTP "
	    "login goes in user and password_file)");
}

/*
 * True when the path of URL v (the part after "SCHEME://HOST") has a "."
 * or ".." segment, also percent-encoded ("%2e%2E"): RFC 3986 section
 * 5.2.4 removes them, so the server lists another directory than the
 * one written, and the crawl, which keeps to the source as written,
 * would refuse every link of it.
 */
static bool
source_has_dot_segment(const char *v)
{
	const char	*p, *e;
	size_t		 dots;

	if ((p = strstr(v, "://")) == NULL ||
	    (p = strchr(p + 3, '/')) == NULL)
		return false;
	for (; *p != '\0'; p = e) {
		p++;
		e = p + strcspn(p, "/");
		for (dots = 0; p < e; dots++) {
			if (*p == '.')
				p++;
			else if (e - p >= 3 && p[0] == '%' && p[1] == '2' &&
			    (p[2] == 'e' || p[2] == 'E'))
				p += 3;
			else
				break;
		}
		if (p == e && (dots == 1 || dots == 2))
			return true;
		p = e;
	}
	return false;
}

/*
 * Check an upstream URL: a scheme that a lister lists and a transport
 * carries (lister.h and xfer.h registries), with a host, no
 * query or fragment (the lister appends paths), no "." or ".." path
 * segment, and no user or password: the source is logged, stored in
 * every run's errors and shown by status and --json, so a password
 * there would leak (an FTP login goes in user and password_file).
 * The parser of the transport that takes it judges the syntax
 * (libcurl's; for bm:// the bm transport's rules, its path as the run
 * reads it).
 */
static int
check_source(const char *v, char *errbuf, size_t errlen)
{
	struct xfer_opts xo;
	char		 schemes[128];
	struct xfer_url_info ui;
	const char	*sep, *ex;
	size_t		 slen;
	bool		 bm;
	int		 rc = BM_EINVAL;

	lister_schemes(schemes, sizeof(schemes));
	/* First: every message below repeats v, and would its password. */
	if (source_has_userinfo(v)) {
		rc = source_userinfo(errbuf, errlen);
		goto out;
	}
	if ((sep = strstr(v, "://")) == NULL) {
		rc = conf_bad(errbuf, errlen, "source", v, "not a URL "
		    "(expected %sHOST/PATH)", schemes);
		goto out;
	}
	slen = (size_t)(sep - v);
	if (slen == 3 && strncasecmp(v, "udt", 3) == 0) {
		rc = conf_fmt(errbuf, errlen, "source scheme udt:// is retired: "
		    "a biomirror upstream is bm://HOST[:PORT]/EXPORT/ (UDT "
		    "data connections will be transport = udt)");
		goto out;
	}
	bm = lister_find(v) == &lister_bm_ops;
	/* A lister lists it and a transport carries it (the registries). */
	memset(&xo, 0, sizeof(xo));
	xo.net = XFER_NET_TCP;
	if (lister_find(v) == NULL || !xfer_handles(v, &xo)) {
		rc = conf_bad(errbuf, errlen, "source", v, "unsupported "
		    "scheme (use %s)", schemes);
		goto out;
	}
	if ((rc = xfer_url_inspect(v, &ui, errbuf, errlen)) != 0)
		goto out;
	/* A parser's own reading (source_has_userinfo() saw no '@'). */
	if (ui.userinfo) {
		rc = source_userinfo(errbuf, errlen);
		goto out;
	}
	/* libcurl reads "http:///x" as host "x"; we do not. */
	if (sep[3] == '/' || sep[3] == '\0' || !ui.host) {
		rc = conf_bad(errbuf, errlen, "source", v, "no host");
		goto out;
	}
	/* Before ui.bad: a transport that reads paths refuses them too. */
	if (source_has_dot_segment(v)) {
		rc = conf_bad(errbuf, errlen, "source", v, "'.' and '..' "
		    "path segments are not allowed (write the directory "
		    "without them)");
		goto out;
	}
	if (ui.bad != NULL) {
		rc = conf_bad(errbuf, errlen, "source", v, "bad URL (%s)",
		    ui.bad);
		goto out;
	}
	if (ui.query) {
		rc = conf_bad(errbuf, errlen, "source", v,
		    "a source URL takes no query or fragment");
		goto out;
	}
	/* bm://HOST[:PORT]/EXPORT/path/: the first segment names the export. */
	if (bm && ((ex = strchr(sep + 3, '/')) == NULL || ex[1] == '/' ||
	    ex[1] == '\0')) {
		rc = conf_bad(errbuf, errlen, "source", v, "no export (expected "
		    "bm://HOST[:PORT]/EXPORT/ or bm://HOST[:PORT]/EXPORT/PATH/)");
		goto out;
	}
	/*
	 * libcurl takes ";type=X" anywhere in an FTP URL's path as RFC 1738
	 * section 3.2.2's typecode: ";type=d" would make every fetch an
	 * NLST, ";type=a" every listing a LIST in ASCII.
	 */
	if (lister_find(v) == &lister_ftp_ops &&
	    strcasestr(sep + 3, ";type=") != NULL) {
		rc = conf_bad(errbuf, errlen, "source", v, "an FTP ;type= "
		    "typecode (RFC 1738 3.2.2) is not allowed: biomirror "
		    "chooses the commands and binary mode itself (write %%3B "
		    "for a ';' that is part of a name)");
		goto out;
	}
	rc = 0;
out:
	return rc;
}

static int
set_source(const char *v, struct mirror_conf *m, char *errbuf,
    size_t errlen)
{
	size_t	 n = strlen(v);
	char	*s;
	int	 rc;

	if (n == 0)
		return conf_fmt(errbuf, errlen, "source: empty value");
	if (has_ctrl(v))
		return conf_bad(errbuf, errlen, "source", v,
		    "control characters are not allowed");
	if ((rc = check_source(v, errbuf, errlen)) != 0)
		return rc;
	if ((s = malloc(n + 2)) == NULL)
		return BM_ENOMEM;
	memcpy(s, v, n + 1);
	if (s[n - 1] != '/') {
		s[n] = '/';
		s[n + 1] = '\0';
	}
	free(m->source);
	m->source = s;
	return 0;
}

/*
 * ca_file must name a regular file we can read now, holding at least one
 * PEM certificate (CURLOPT_CAINFO takes a PEM bundle: "-----BEGIN
 * CERTIFICATE-----" blocks, RFC 7468 section 5) within its first 8 MiB:
 * a typo or a wrong file (a key, an empty file, DER) would otherwise only
 * show as a TLS failure of every request, mid-run.
 */
#define PEM_CERT	"-----BEGIN CERTIFICATE-----"
#define PEM_TRUSTED	"-----BEGIN TRUSTED CERTIFICATE-----"

static int
set_ca_file(const char *v, struct mirror_conf *m, char *errbuf,
    size_t errlen)
{
	struct stat	 st;
	char		*pem = NULL;
	size_t		 len = 0;
	bool		 ok;
	int		 fd, err, rc;

	if (has_ctrl(v))
		return conf_bad(errbuf, errlen, "ca_file", v,
		    "control characters are not allowed");
	fd = open(v, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd == -1) {
		err = errno;
		return conf_bad(errbuf, errlen, "ca_file", v, "%s",
		    strerror(err));
	}
	if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode)) {
		(void)close(fd);
		return conf_bad(errbuf, errlen, "ca_file", v,
		    "not a regular file");
	}
	rc = fileio_read_all(fd, 8 * 1024 * 1024, &pem, &len);
	err = errno;
	(void)close(fd);
	if (rc == BM_ENOMEM)
		return rc;
	if (rc != 0)
		return conf_bad(errbuf, errlen, "ca_file", v, "%s",
		    rc == BM_ELIMIT ? "larger than 8 MiB" : strerror(err));
	ok = memmem(pem, len, PEM_CERT, strlen(PEM_CERT)) != NULL ||
	    memmem(pem, len, PEM_TRUSTED, strlen(PEM_TRUSTED)) != NULL;
	free(pem);
	if (!ok)
		return conf_bad(errbuf, errlen, "ca_file", v,
		    "no PEM certificate in it (want '-----BEGIN CERTIFICATE-----' "
		    "blocks)");
	return set_str("ca_file", v, &m->ca_file, errbuf, errlen);
}

/*
 * metrics_file: an absolute path (a timer's working directory is not the
 * admin's), not a directory name nor an existing directory.  The file is
 * written whole by agent/metrics.c, so its directory must exist when a run
 * ends; that is checked then (a missing directory is a logged failure,
 * not a config error, as under systemd it may be mounted later).
 */
static int
set_metrics_file(const char *v, struct mirror_conf *m, char *errbuf,
    size_t errlen)
{
	struct stat	 st;
	size_t		 n = strlen(v);

	if (v[0] != '/')
		return conf_bad(errbuf, errlen, "metrics_file", v,
		    "not an absolute path");
	if (v[n - 1] == '/')
		return conf_bad(errbuf, errlen, "metrics_file", v,
		    "a directory, not a file name");
	if (stat(v, &st) == 0 && S_ISDIR(st.st_mode))
		return conf_bad(errbuf, errlen, "metrics_file", v,
		    "an existing directory, not a file name");
	return set_str("metrics_file", v, &m->metrics_file, errbuf, errlen);
}

/* ftp_tls = require | try | no */
static int
set_ftp_tls(const char *v, struct mirror_conf *m, char *errbuf,
    size_t errlen)
{
	if (strcasecmp(v, "require") == 0)
		m->ftp_tls = FTP_TLS_REQUIRE;
	else if (strcasecmp(v, "try") == 0)
		m->ftp_tls = FTP_TLS_TRY;
	else if (strcasecmp(v, "no") == 0)
		m->ftp_tls = FTP_TLS_NO;
	else
		return conf_bad(errbuf, errlen, "ftp_tls", v,
		    "expected require, try or no");
	return 0;
}

static int	check_secret_file(const char *, char *, size_t);

/*
 * password_file must be a regular file that others cannot read (the
 * password itself never goes into the config); it is read at run time.
 */
static int
set_password_file(const char *v, struct mirror_conf *m, char *errbuf,
    size_t errlen)
{
	struct stat	 st;
	int		 err;

	if (has_ctrl(v))
		return conf_bad(errbuf, errlen, "password_file", v,
		    "control characters are not allowed");
	if (stat(v, &st) == -1) {
		err = errno;
		return conf_bad(errbuf, errlen, "password_file", v, "%s",
		    strerror(err));
	}
	if (!S_ISREG(st.st_mode))
		return conf_bad(errbuf, errlen, "password_file", v,
		    "not a regular file");
	if (st.st_mode & S_IROTH)
		return conf_bad(errbuf, errlen, "password_file", v,
		    "readable by everyone (chmod o-r it)");
	return set_str("password_file", v, &m->password_file, errbuf,
	    errlen);
}

/* follow_symlinks = yes | no */
static int
set_follow(const char *v, struct mirror_conf *m, char *errbuf,
    size_t errlen)
{
	bool	 b;
	int	 rc;

	if ((rc = set_bool("follow_symlinks", v, &b, errbuf, errlen)) != 0)
		return rc;
	m->follow_symlinks = b;
	return 0;
}

static int
add_glob(const char *key, const char *v, char ***list, size_t *n,
    char *errbuf, size_t errlen)
{
	char	**nl, *s;

	if (v[0] == '\0')
		return conf_fmt(errbuf, errlen, "%s: empty value", key);
	if (*n >= CONF_MAX_GLOBS)
		return conf_bad(errbuf, errlen, key, v,
		    "more than %d patterns", CONF_MAX_GLOBS);
	if ((s = strdup(v)) == NULL)
		return BM_ENOMEM;
	if ((nl = reallocarray(*list, *n + 1, sizeof(*nl))) == NULL) {
		free(s);
		return BM_ENOMEM;
	}
	nl[(*n)++] = s;
	*list = nl;
	return 0;
}

static int
key_index(const char *const *keys, size_t nkeys, const char *key)
{
	size_t	 i;

	for (i = 0; i < nkeys; i++)
		if (strcmp(keys[i], key) == 0)
			return (int)i;
	return -1;
}

/*
 * tcp_congestion = auto (the kernel's default) or the name of a Linux
 * congestion control module (tcp(7) TCP_CONGESTION; TCP_CA_NAME_MAX is
 * 16 bytes with the NUL): letters, digits, '_' and '-'.  Whether this
 * kernel has it is for the run to find out (sync.c), not the config.
 */
static int
set_tcp_congestion(const char *v, struct mirror_conf *m, char *errbuf,
    size_t errlen)
{
	size_t	 n = strlen(v);

	if (strcasecmp(v, "auto") == 0) {
		m->tcp_congestion[0] = '\0';
		return 0;
	}
	if (n == 0 || n >= sizeof(m->tcp_congestion) ||
	    strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	    "0123456789_-") != n)
		return conf_bad(errbuf, errlen, "tcp_congestion", v,
		    "expected auto or an algorithm name (bbr, cubic, reno, "
		    "...) of at most %zu letters, digits, '_' or '-'",
		    sizeof(m->tcp_congestion) - 1);
	memcpy(m->tcp_congestion, v, n + 1);
	return 0;
}

static int
set_enum_key(struct mirror_conf *m, int k, const char *v, char *errbuf,
    size_t errlen)
{
	const char	*key = mirror_keys[k];

	if (k == MK_TRANSPORT) {
		if (strcasecmp(v, "tcp") == 0) {
			m->transport = TRANSPORT_TCP;
			return 0;
		}
		/* udt: checked against the source in check_ftp_keys(). */
		if (strcasecmp(v, "udt") == 0) {
			m->transport = TRANSPORT_UDT;
			return 0;
		}
		/* auto: TCP for every source of this build. */
		if (strcasecmp(v, "auto") == 0) {
			m->transport = TRANSPORT_AUTO;
			return 0;
		}
		return conf_bad(errbuf, errlen, key, v,
		    "expected tcp, udt or auto");
	} else if (k == MK_VERIFY) {
		m->verify_set = true;
		if (strcasecmp(v, "size") == 0)
			m->verify = VERIFY_SIZE;
		else if (strcasecmp(v, "sidecar") == 0)
			m->verify = VERIFY_SIDECAR;
		else if (strcasecmp(v, "checksum") == 0)
			m->verify = VERIFY_CHECKSUM;
		else
			return conf_bad(errbuf, errlen, key, v,
			    "expected size, sidecar or checksum");
		return 0;
	} else if (k == MK_FTP_MODE) {
		/* RFC 959 MODE S (stream); GridFTP's MODE E (GFD.20 3.4). */
		if (strcasecmp(v, "stream") == 0)
			m->ftp_mode_e = false;
		else if (strcasecmp(v, "extended") == 0)
			m->ftp_mode_e = true;
		else
			return conf_bad(errbuf, errlen, key, v,
			    "expected stream or extended");
		return 0;
	} else {
		if (strcasecmp(v, "file") == 0) {
			m->publish = PUBLISH_FILE;
			return 0;
		}
		if (strcasecmp(v, "set") == 0) {
			m->publish = PUBLISH_SET;
			return 0;
		}
		return conf_bad(errbuf, errlen, key, v, "expected file or set");
	}
	return conf_fmt(errbuf, errlen,
	    "%s = %s is not supported by this build yet", key, v);
}

/*
 * Set one mirror key from its string value, exactly as the config file
 * does: key is a name of DESIGN.md's table, value is the text after '='
 * (both borrowed, NUL-terminated).  include and exclude append; every
 * other key replaces its value.  On error m is unchanged and errbuf
 * (errlen bytes, may be NULL) holds the reason, without file or line:
 * "unknown key 'x'", "concurrency = 0: expected an integer from 1 to
 * 1024", "transport = udt is not supported by this build yet".  Returns
 * 0, BM_EINVAL or BM_ENOMEM.
 */
int
mirror_conf_set(struct mirror_conf *m, const char *key, const char *value,
    char *errbuf, size_t errlen)
{
	int	 k, rc;

	if (m == NULL || key == NULL || value == NULL)
		return conf_fmt(errbuf, errlen, "missing key or value");
	if ((k = key_index(mirror_keys, MK_COUNT, key)) < 0)
		return conf_fmt(errbuf, errlen, "unknown key '%s'", key);
	if (value[0] == '\0')
		return conf_fmt(errbuf, errlen, "%s: empty value", key);
	switch (k) {
	case MK_SOURCE:
		return set_source(value, m, errbuf, errlen);
	case MK_DEST:
		return set_str(key, value, &m->dest, errbuf, errlen);
	case MK_INCLUDE:
		return add_glob(key, value, &m->include, &m->ninclude,
		    errbuf, errlen);
	case MK_EXCLUDE:
		return add_glob(key, value, &m->exclude, &m->nexclude,
		    errbuf, errlen);
	case MK_CONCURRENCY:
		return set_uint_auto(key, value, 1024, &m->concurrency,
		    &m->concurrency_auto, errbuf, errlen);
	case MK_STREAMS:
		return set_uint_auto(key, value, 64, &m->streams,
		    &m->streams_auto, errbuf, errlen);
	case MK_MIN_SPLIT:
		return set_size(key, value, 1, &m->min_split, errbuf, errlen);
	case MK_UDT_BUFFER:
		/* 0 sizes it; below 64K libudt clamps to 32 packets silently. */
		if ((rc = set_size(key, value, 0, &m->udt_buffer, errbuf,
		    errlen)) == 0 && m->udt_buffer != 0 &&
		    m->udt_buffer < 64 * 1024)
			return conf_bad(errbuf, errlen, key, value, "must be 0 "
			    "(sized from the round trip) or at least 64K");
		return rc;
	case MK_MAX_CONNECTIONS:
		return set_uint(key, value, 0, 256, &m->max_connections,
		    errbuf, errlen);
	case MK_MAX_ENTRIES:
		return set_uint(key, value, 1, CONFIG_MAX_ENTRIES_TOP,
		    &m->max_entries, errbuf, errlen);
	case MK_TRANSPORT:
	case MK_VERIFY:
	case MK_PUBLISH:
	case MK_FTP_MODE:
		return set_enum_key(m, k, value, errbuf, errlen);
	case MK_TCP_CONGESTION:
		return set_tcp_congestion(value, m, errbuf, errlen);
	case MK_DELETE:
		return set_bool(key, value, &m->delete, errbuf, errlen);
	case MK_MAX_DELETE:
		return set_max_delete(value, m, errbuf, errlen);
	case MK_BWLIMIT:
		return set_bwlimit(value, m, errbuf, errlen);
	case MK_RETRIES:
		return set_uint(key, value, 0, 100, &m->retries, errbuf,
		    errlen);
	case MK_TIMEOUT:
		return set_uint(key, value, 1, 3600, &m->timeout, errbuf,
		    errlen);
	case MK_STALL_TIMEOUT:
		return set_uint(key, value, 1, 86400, &m->stall_timeout,
		    errbuf, errlen);
	case MK_LISTING_TZ:
		return set_tz(key, value, &m->listing_tz, errbuf, errlen);
	case MK_FTP_TZ:
		return set_tz(key, value, &m->ftp_tz, errbuf, errlen);
	case MK_FTP_TLS:
		return set_ftp_tls(value, m, errbuf, errlen);
	case MK_USER:
		return set_str(key, value, &m->user, errbuf, errlen);
	case MK_PASSWORD_FILE:
		return set_password_file(value, m, errbuf, errlen);
	case MK_SECRET_FILE:
		/* The export's secret (bm://): as [export]'s, mode 0600. */
		if ((rc = check_secret_file(value, errbuf, errlen)) != 0)
			return rc;
		return set_str(key, value, &m->secret_file, errbuf, errlen);
	case MK_FTP_ACTIVE:
		return set_bool(key, value, &m->ftp_active, errbuf, errlen);
	case MK_FOLLOW_SYMLINKS:
		return set_follow(value, m, errbuf, errlen);
	case MK_FILE_MODE:
		return set_mode(key, value, 0400, 06000, &m->file_mode,
		    errbuf, errlen);
	case MK_DIR_MODE:
		return set_mode(key, value, 0700, 0, &m->dir_mode, errbuf,
		    errlen);
	case MK_CA_FILE:
		return set_ca_file(value, m, errbuf, errlen);
	case MK_USER_AGENT:
		return set_str(key, value, &m->user_agent, errbuf, errlen);
	case MK_POST_SYNC:
		/* Run through /bin/sh -c: any shell command line. */
		return set_str(key, value, &m->post_sync, errbuf, errlen);
	case MK_PRE_PUBLISH:
		/* Same shell rules; publish = set only (mirror_conf_check). */
		return set_str(key, value, &m->pre_publish, errbuf, errlen);
	case MK_HOOK_TIMEOUT:
		/* 0: no limit (agent/run/sync.c run_post_sync()). */
		return set_uint(key, value, 0, 86400, &m->hook_timeout,
		    errbuf, errlen);
	case MK_METRICS_FILE:
		return set_metrics_file(value, m, errbuf, errlen);
	default:
		return conf_fmt(errbuf, errlen, "unknown key '%s'", key);
	}
}

/* Whether m took key from its own section (or the command line). */
static bool
has_own(const struct mirror_conf *m, const char *key)
{
	size_t	 i;

	for (i = 0; i < m->nsettings; i++)
		if (!m->settings[i].global &&
		    strcmp(m->settings[i].key, key) == 0)
			return true;
	return false;
}

/* Whether a default of key applies to m's kind of source. */
static bool
default_applies(const struct mirror_conf *m, int k)
{
	bool	 ftp = m->source != NULL && mirror_is_ftp(m);

	switch (k) {
	case MK_FTP_TLS:
	case MK_USER:
	case MK_PASSWORD_FILE:
	case MK_FTP_ACTIVE:
	case MK_FOLLOW_SYMLINKS:
	case MK_FTP_MODE:
	case MK_FTP_TZ:
		return ftp;
	case MK_LISTING_TZ:
		return !ftp;
	case MK_SECRET_FILE:
		return m->source != NULL &&
		    lister_find(m->source) == &lister_bm_ops;
	default:
		return true;
	}
}

/* See include/biomirror/config.h. */
int
config_apply_defaults(const struct config *c, struct mirror_conf *m,
    char *errbuf, size_t errlen, unsigned *ret_line)
{
	const struct conf_setting *d;
	size_t		 i;
	int		 k, rc;

	for (i = 0; c != NULL && i < c->ndefaults; i++) {
		d = &c->defaults[i];
		if ((k = key_index(mirror_keys, MK_COUNT, d->key)) < 0 ||
		    has_own(m, d->key) || !default_applies(m, k))
			continue;
		*ret_line = d->line;
		if ((rc = mirror_conf_set(m, d->key, d->value, errbuf,
		    errlen)) != 0)
			return rc;
		if (k == MK_METRICS_FILE)
			m->metrics_line = d->line;
		if (settings_add(&m->settings, &m->nsettings, d->key,
		    d->value, d->line, true) != 0) {
			(void)conf_fmt(errbuf, errlen, "out of memory");
			return BM_ENOMEM;
		}
	}
	return 0;
}

/* See include/biomirror/config.h. */
const char *const *
config_mirror_keys(size_t *ret_n)
{
	*ret_n = MK_COUNT;
	return mirror_keys;
}

/* See include/biomirror/config.h. */
const char *
config_key_default(const char *key)
{
	int	 k = key_index(mirror_keys, MK_COUNT, key);

	return k < 0 ? "" : mirror_key_defaults[k];
}

/*
 * Empty the include or exclude list of m (command-line options replace
 * the config's list), or drop its post_sync (--no-hook).  Returns 0, or
 * BM_EINVAL for any other key.
 */
int
mirror_conf_clear(struct mirror_conf *m, const char *key)
{
	if (m == NULL || key == NULL)
		return BM_EINVAL;
	if (strcmp(key, "include") == 0) {
		free_globs(m->include, m->ninclude);
		m->include = NULL;
		m->ninclude = 0;
	} else if (strcmp(key, "exclude") == 0) {
		free_globs(m->exclude, m->nexclude);
		m->exclude = NULL;
		m->nexclude = 0;
	} else if (strcmp(key, "post_sync") == 0) {
		free(m->post_sync);
		m->post_sync = NULL;
	} else
		return BM_EINVAL;
	return 0;
}

/*
 * dest spelled canonically (fileio_path_canon()), for comparing
 * destinations.  Returns a malloc'd string, or NULL on ENOMEM.
 */
static char *
dest_canon(const char *dest)
{
	char	*out;
	size_t	 n = strlen(dest);

	if ((out = malloc(n + 2)) == NULL)
		return NULL;
	memcpy(out, dest, n + 1);
	fileio_path_canon(out);
	return out;
}

/* True when dest has a ".." component. */
static bool
dest_has_dotdot(const char *dest)
{
	const char	*p, *e;

	for (p = dest; *p != '\0'; p = e) {
		while (*p == '/')
			p++;
		e = p + strcspn(p, "/");
		if (e - p == 2 && p[0] == '.' && p[1] == '.')
			return true;
	}
	return false;
}

bool
mirror_is_ftp(const struct mirror_conf *m)
{
	return lister_find(m->source) == &lister_ftp_ops;
}

/* FTP-only keys with an HTTP source, and ftps:// with ftp_tls = no. */
static int
check_ftp_keys(const struct mirror_conf *m, char *errbuf, size_t errlen)
{
	const char	*key = NULL;

	if (lister_find(m->source) == &lister_bm_ops) {
		if (m->transport == TRANSPORT_UDT)
			return conf_fmt(errbuf, errlen, "transport = udt for a "
			    "bm:// source (UDT data connections) is not "
			    "supported by this build yet");
		if (m->bwlimit > 0)
			return conf_fmt(errbuf, errlen, "bwlimit for a bm:// "
			    "source is not supported by this build yet");
	} else if (m->secret_file != NULL)
		return conf_fmt(errbuf, errlen, "secret_file applies only to "
		    "bm:// sources");
	/* UDT carries GridFTP's MODE E data only (stream mode: libcurl). */
	if (m->transport == TRANSPORT_UDT && (!mirror_is_ftp(m) ||
	    !m->ftp_mode_e))
		return conf_fmt(errbuf, errlen, "transport = udt needs an "
		    "ftp:// source with ftp_mode = extended (UDT carries "
		    "GridFTP's extended block mode only)");
	if (!mirror_is_ftp(m)) {
		if (m->ftp_tls != FTP_TLS_DEFAULT)
			key = "ftp_tls";
		else if (m->user != NULL)
			key = "user";
		else if (m->password_file != NULL)
			key = "password_file";
		else if (m->ftp_active)
			key = "ftp_active";
		else if (m->follow_symlinks)
			key = "follow_symlinks";
		else if (m->ftp_mode_e)
			key = "ftp_mode";
		else if (m->ftp_tz.kind != TZ_UTC)
			key = "ftp_timezone";
		if (key != NULL)
			return conf_fmt(errbuf, errlen, "%s applies only to "
			    "ftp:// and ftps:// sources", key);
		return 0;
	}
	/* The FTP lister reads LIST times in ftp_timezone, never this. */
	if (m->listing_tz.kind != TZ_UTC)
		return conf_fmt(errbuf, errlen, "listing_timezone applies "
		    "only to http:// and https:// sources (an FTP server's "
		    "LIST times take ftp_timezone)");
	/* Else the secret would go out as the anonymous login's password. */
	if (m->password_file != NULL && m->user == NULL)
		return conf_fmt(errbuf, errlen, "password_file needs user "
		    "(without it the password would be sent as the anonymous "
		    "login's)");
	if (strncasecmp(m->source, "ftps://", 7) == 0 &&
	    m->ftp_tls != FTP_TLS_DEFAULT && m->ftp_tls != FTP_TLS_REQUIRE)
		return conf_fmt(errbuf, errlen, "an ftps:// source requires "
		    "TLS: ftp_tls must be require (or unset)");
	if (m->ftp_mode_e && (strncasecmp(m->source, "ftps://", 7) == 0 ||
	    m->ftp_tls == FTP_TLS_REQUIRE || m->ftp_tls == FTP_TLS_TRY))
		return conf_fmt(errbuf, errlen, "ftp_mode = extended needs an "
		    "ftp:// source without TLS (its data connections carry "
		    "none here)");
	return 0;
}

/*
 * Check a finished mirror (after the last mirror_conf_set()): source and
 * dest present, dest not the root directory, source an http or https URL
 * with a host; a missing trailing '/' is added to m->source.  A relative
 * dest is accepted here (ad-hoc runs); config_load() requires absolute,
 * distinct destinations.  Returns 0, BM_EINVAL with "missing key
 * 'source'" and the like in errbuf, or BM_ENOMEM.
 */
int
mirror_conf_check(struct mirror_conf *m, char *errbuf, size_t errlen)
{
	char	*src;
	int	 rc;

	if (m == NULL)
		return conf_fmt(errbuf, errlen, "no mirror");
	if (m->source == NULL)
		return conf_fmt(errbuf, errlen, "missing key 'source'");
	if (m->dest == NULL)
		return conf_fmt(errbuf, errlen, "missing key 'dest'");
	if ((src = dest_canon(m->dest)) == NULL)
		return BM_ENOMEM;
	rc = strcmp(src, "/") == 0;
	free(src);
	if (rc)
		return conf_bad(errbuf, errlen, "dest", m->dest, "the root "
		    "directory cannot be a mirror's destination");
	/* Re-run the checks: a caller may have filled source in directly. */
	if ((src = strdup(m->source)) == NULL)
		return BM_ENOMEM;
	rc = set_source(src, m, errbuf, errlen);
	free(src);
	if (rc != 0)
		return rc;
	if (m->pre_publish != NULL && m->publish != PUBLISH_SET)
		return conf_fmt(errbuf, errlen, "pre_publish needs publish = "
		    "set (it checks the staged snapshot before the swap)");
	return check_ftp_keys(m, errbuf, errlen);
}

/* The name of a mirror section: [A-Za-z0-9][A-Za-z0-9._-]*, 1..64 bytes. */
static bool
mirror_name_ok(const char *s, size_t n)
{
	size_t	 i;

	if (n == 0 || n > CONF_NAME_MAX || !isalnum((unsigned char)s[0]))
		return false;
	for (i = 0; i < n; i++)
		if (!(isascii((unsigned char)s[i]) &&
		    isalnum((unsigned char)s[i])) &&
		    s[i] != '.' && s[i] != '_' && s[i] != '-')
			return false;
	return true;
}

/*
 * End of the section being read: check the mirror it described (unless
 * a bad source or dest line already said what is missing), and drop a
 * broken section's scratch mirror (its header's error says enough).
 */
static void
close_section(struct conf_load *ld)
{
	struct mirror_conf	*m = ld->cur;
	char			 why[CONF_REASON];
	unsigned		 line = 0;
	int			 rc;

	if (ld->kind == SECT_MIRROR && m->source != NULL) {
		rc = config_apply_defaults(ld->c, m, why, sizeof(why), &line);
		if (rc != 0)
			load_fail(ld, line, rc, "%s (the [global] default, "
			    "for section [%s])", rc == BM_ENOMEM ?
			    "out of memory" : why, m->name);
	}
	if (ld->kind == SECT_MIRROR && !m->bad &&
	    !(m->source == NULL && ld->seen[MK_SOURCE] != 0) &&
	    !(m->dest == NULL && ld->seen[MK_DEST] != 0)) {
		rc = mirror_conf_check(m, why, sizeof(why));
		if (rc == BM_ENOMEM)
			load_fail(ld, m->line, rc, "out of memory");
		else if (rc != 0)
			load_fail(ld, m->line, rc, "%s in section [%s]", why,
			    m->name);
	}
	mirror_conf_free(ld->scratch);
	ld->scratch = NULL;
	export_conf_free(ld->scratch_exp);
	ld->scratch_exp = NULL;
	ld->owner = NULL;
	ld->kind = SECT_NONE;
	ld->cur = NULL;
	ld->exp = NULL;
	ld->prev_name = false;
	memset(ld->seen, 0, sizeof(ld->seen));
}

/*
 * A section whose keys are checked into a scratch mirror and dropped:
 * a malformed header (the n bytes at s as its name, for messages) or a
 * repeated [NAME] (owner: the first, which its errors make bad).
 */
static void
open_broken(struct conf_load *ld, const char *s, size_t n,
    struct mirror_conf *owner)
{
	char	 name[CONF_NAME_MAX + 1];

	if (n > CONF_NAME_MAX)
		n = CONF_NAME_MAX;
	memcpy(name, s, n);
	name[n] = '\0';
	if ((ld->scratch = mirror_conf_new(name)) == NULL) {
		ld->rc = BM_ENOMEM;
		return;
	}
	ld->scratch->line = ld->lineno;
	ld->cur = ld->scratch;
	ld->owner = owner;
	ld->kind = SECT_BROKEN;
}

static void
open_mirror(struct conf_load *ld, const char *name)
{
	struct mirror_conf	**nv, *m, *old;

	if ((old = config_find(ld->c, name)) != NULL) {
		open_broken(ld, name, strlen(name), old);
		load_fail(ld, ld->lineno, BM_EINVAL, "duplicate section [%s] "
		    "(first on line %u)", name, old->line);
		return;
	}
	if ((m = mirror_conf_new(name)) == NULL) {
		ld->rc = BM_ENOMEM;
		return;
	}
	nv = reallocarray(ld->c->mirrors, ld->c->nmirrors + 1, sizeof(*nv));
	if (nv == NULL) {
		mirror_conf_free(m);
		ld->rc = BM_ENOMEM;
		return;
	}
	m->line = ld->lineno;
	nv[ld->c->nmirrors++] = m;
	ld->c->mirrors = nv;
	ld->cur = m;
	ld->kind = SECT_MIRROR;
}

/* A section header line: the name is the n bytes at s. */
static void
open_section(struct conf_load *ld, const char *s, size_t n)
{
	char	 name[CONF_NAME_MAX + 1];

	close_section(ld);
	if (n == 6 && strncmp(s, "global", 6) == 0) {
		ld->kind = SECT_GLOBAL;
		if (ld->seen_global) {
			load_fail(ld, ld->lineno, BM_EINVAL, "duplicate "
			    "section [global] (first on line %u)",
			    ld->global_line);
			return;
		}
		ld->seen_global = true;
		ld->global_line = ld->lineno;
		return;
	}
	if (n == 5 && strncmp(s, "serve", 5) == 0) {
		open_serve(ld, NULL);
		return;
	}
	if ((n == 6 || (n > 6 && s[6] == ' ')) && strncmp(s, "export", 6) ==
	    0 && !(n > 7 && mirror_name_ok(s + 7, n - 7))) {
		open_broken(ld, s, n, NULL);
		load_fail(ld, ld->lineno, BM_EINVAL, "bad export section "
		    "'[%.*s]' (expected [export NAME], NAME 1 to 64 letters, "
		    "digits, '.', '_' or '-')", (int)n, s);
		return;
	}
	if (n > 7 && strncmp(s, "export ", 7) == 0) {
		memcpy(name, s + 7, n - 7);
		name[n - 7] = '\0';
		open_serve(ld, name);
		return;
	}
	if (!mirror_name_ok(s, n)) {
		open_broken(ld, s, n, NULL);
		load_fail(ld, ld->lineno, BM_EINVAL, "bad mirror name '%.*s' "
		    "(1 to 64 letters, digits, '.', '_' or '-', starting with "
		    "a letter or digit)", (int)n, s);
		return;
	}
	memcpy(name, s, n);
	name[n] = '\0';
	if (strcasecmp(name, "global") == 0) {
		open_broken(ld, s, n, NULL);
		load_fail(ld, ld->lineno, BM_EINVAL, "mirror name '%s' is "
		    "reserved (the global section is [global])", name);
		return;
	}
	open_mirror(ld, name);
}

/*
 * inih's find_chars_or_comment() on [s, e): the first byte in chars, or
 * an inline comment prefix after whitespace, or e.
 */
static const char *
find_chars_or_comment(const char *s, const char *e, const char *chars)
{
	bool	 was_space = false;

	for (; s < e; s++) {
		if (chars != NULL && strchr(chars, *s) != NULL)
			break;
		if (ini_allow_inline_comments && was_space &&
		    strchr(ini_inline_comment_prefixes, *s) != NULL)
			break;
		was_space = isspace((unsigned char)*s) != 0;
	}
	return s;
}

/*
 * A line that starts a section (at s, after the '[') but cannot be
 * read as one: the section it starts is broken (its keys must not fall
 * into the section before), and inih gets "[]" for it.
 */
static enum line_fate
header_fail(struct conf_load *ld, const char *s, const char *e,
    const char *why)
{
	close_section(ld);
	open_broken(ld, s, (size_t)(e - s), NULL);
	load_fail(ld, ld->lineno, BM_EINVAL, "%s", why);
	return LINE_HEADER;
}

static enum line_fate
classify_header(struct conf_load *ld, const char *start, const char *e)
{
	const char	*end, *p;

	end = find_chars_or_comment(start + 1, e, "]");
	if (end == e || *end != ']')
		return header_fail(ld, start + 1, end,
		    "section header without closing ']'");
	for (p = end + 1; p < e && isspace((unsigned char)*p); p++)
		continue;
	if (p < e && *p != ';' && *p != '#')
		return header_fail(ld, start + 1, end,
		    "unexpected text after ']' in section header");
	open_section(ld, start + 1, (size_t)(end - start - 1));
	return ld->kind == SECT_BROKEN ? LINE_HEADER : LINE_KEEP;
}

static enum line_fate
classify_key(struct conf_load *ld, const char *start, const char *e)
{
	const char	*end, *ke;
	size_t		 n;

	end = find_chars_or_comment(start, e, "=:");
	if (end == e || (*end != '=' && *end != ':')) {
		load_fail(ld, ld->lineno, BM_EINVAL, "missing '=' "
		    "(expected 'key = value', a [section] or a ; comment)");
		return LINE_BLANK;
	}
	for (ke = end; ke > start && isspace((unsigned char)ke[-1]); ke--)
		continue;
	n = (size_t)(ke - start);
	if (n > CONF_NAME_MAX)
		n = CONF_NAME_MAX;
	memcpy(ld->prev_key, start, n);
	ld->prev_key[n] = '\0';
	ld->prev_line = ld->lineno;
	ld->prev_name = true;
	return LINE_KEEP;
}

/*
 * Classify one line as inih's parser will (ini.c, release 55) and act on
 * what inih leaves to us: section headers, continuation lines (refused)
 * and syntax errors.  Key lines reach conf_handler() through inih.
 */
static enum line_fate
classify_line(struct conf_load *ld, const char *line)
{
	const char	*start = line, *e;

	if (ld->lineno == 1 && ini_allow_bom &&
	    strncmp(start, "\xEF\xBB\xBF", 3) == 0)
		start += 3;
	e = start + strlen(start);
	while (e > start && isspace((unsigned char)e[-1]))
		e--;
	while (start < e && isspace((unsigned char)*start))
		start++;
	if (start == e || strchr(ini_start_comment_prefixes, *start) != NULL)
		return LINE_KEEP;
	if (ini_allow_multiline && ld->prev_name && start > line) {
		load_fail(ld, ld->lineno, BM_EINVAL, "indented line would "
		    "continue key '%s' from line %u (continuation lines are "
		    "not supported: remove the indentation)", ld->prev_key,
		    ld->prev_line);
		return LINE_BLANK;
	}
	if (*start == '[')
		return classify_header(ld, start, e);
	return classify_key(ld, start, e);
}

/*
 * A line that cannot be handed over (NUL byte, too long): an error of
 * the section it is in, or of the broken one it starts.
 */
static enum line_fate
line_fail(struct conf_load *ld, const char *p, size_t n, const char *why)
{
	const char	*e = p + n, *end;

	while (p < e && isspace((unsigned char)*p))
		p++;
	if (p < e && *p == '[') {
		if ((end = memchr(p + 1, ']', (size_t)(e - p - 1))) == NULL)
			end = e;
		return header_fail(ld, p + 1, end, why);
	}
	load_fail(ld, ld->lineno, BM_EINVAL, "%s", why);
	return LINE_BLANK;
}

/*
 * inih's reader: hand over exactly one physical line of the file per
 * call, so that inih's line count is ours, after refusing lines that do
 * not fit in inih's buffer of num bytes (it would split them) and NUL
 * bytes (it would cut the line short).  A line in error goes over blank
 * (or as "[]", a section inih can start, for a header).  NULL ends the
 * parse: at the end of the file, out of memory, or too many errors.
 */
static char *
conf_reader(char *str, int num, void *stream)
{
	struct conf_load	*ld = stream;
	const char		*p, *nl;
	char			 why[64];
	size_t			 n, body;
	enum line_fate		 fate;

	if (ld->rc != 0 || ld->pos >= ld->len || num < 4)
		return NULL;
	p = ld->buf + ld->pos;
	nl = memchr(p, '\n', ld->len - ld->pos);
	n = nl != NULL ? (size_t)(nl - p) + 1 : ld->len - ld->pos;
	ld->pos += n;
	ld->lineno++;
	body = n;
	if (body > 0 && p[body - 1] == '\n')
		body--;
	if (body > 0 && p[body - 1] == '\r')
		body--;
	if (memchr(p, '\0', n) != NULL)
		fate = line_fail(ld, p, strnlen(p, body), "NUL byte in line");
	else if (body > (size_t)num - 3) {
		/* inih needs room for "\r\n\0" after the longest line. */
		(void)snprintf(why, sizeof(why), "line longer than %d bytes",
		    num - 3);
		fate = line_fail(ld, p, body, why);
	} else {
		memcpy(str, p, n);
		str[n] = '\0';
		ld->line = p;
		ld->line_len = body;
		fate = classify_line(ld, str);
	}
	if (fate == LINE_BLANK)
		(void)snprintf(str, (size_t)num, "\n");
	else if (fate == LINE_HEADER)
		(void)snprintf(str, (size_t)num, "[]\n");
	return ld->rc == 0 ? str : NULL;
}

/*
 * A mirror key k in [global]: every mirror's default (source and dest
 * excepted), checked here on a scratch mirror and applied when each
 * mirror section ends (close_section()), so it must come before them.
 */
static int
conf_global_default(struct conf_load *ld, int k, const char *value)
{
	const char	*name = mirror_keys[k];
	char		 why[CONF_REASON];
	int		 rc;

	if (k == MK_SOURCE || k == MK_DEST) {
		load_fail(ld, ld->lineno, BM_EINVAL, "%s belongs in a mirror's "
		    "section, not in [global]", name);
		return 1;
	}
	if (ld->c->nmirrors > 0) {
		load_fail(ld, ld->lineno, BM_EINVAL, "%s in [global] after "
		    "section [%s]: [global]'s mirror defaults go before the "
		    "mirror sections", name, ld->c->mirrors[0]->name);
		return 1;
	}
	if (k != MK_INCLUDE && k != MK_EXCLUDE && ld->gseen[k] != 0) {
		load_fail(ld, ld->lineno, BM_EINVAL, "duplicate key '%s' in "
		    "section [global] (first on line %u)", name, ld->gseen[k]);
		return 1;
	}
	ld->gseen[k] = ld->lineno;
	if ((k == MK_CA_FILE || k == MK_PASSWORD_FILE) && value[0] != '/') {
		load_fail(ld, ld->lineno, BM_EINVAL, "%s must be an absolute "
		    "path (got '%s'; a relative path would resolve against "
		    "the working directory)", name, value);
		return 1;
	}
	if (ld->gscratch == NULL &&
	    (ld->gscratch = mirror_conf_new("global")) == NULL) {
		ld->rc = BM_ENOMEM;
		return 1;
	}
	if ((rc = mirror_conf_set(ld->gscratch, name, value, why,
	    sizeof(why))) != 0) {
		load_fail(ld, ld->lineno, rc, "%s",
		    rc == BM_ENOMEM ? "out of memory" : why);
		return 1;
	}
	if (k == MK_POST_SYNC || k == MK_PRE_PUBLISH)
		check_post_sync_line(ld, name, value);
	if (settings_add(&ld->c->defaults, &ld->c->ndefaults, name, value,
	    ld->lineno, true) != 0)
		ld->rc = BM_ENOMEM;
	return 1;
}

static int
conf_global_key(struct conf_load *ld, const char *name, const char *value)
{
	static const char *const levels[] = {
		"error", "warning", "info", "verbose", "debug"
	};
	static const int level_val[] = { -1, -1, 0, 1, 2 };
	struct config	*c = ld->c;
	char		 why[CONF_REASON];
	size_t		 i;
	int		 k, rc = 0;

	k = key_index(mirror_keys, MK_COUNT, name);
	if (k >= 0 && k != MK_USER_AGENT)
		return conf_global_default(ld, k, value);
	if ((k = key_index(global_keys, GK_COUNT, name)) < 0) {
		load_fail(ld, ld->lineno, BM_EINVAL,
		    "unknown key '%s' in section [global]", name);
		return 1;
	}
	if (ld->seen[k] != 0) {
		load_fail(ld, ld->lineno, BM_EINVAL, "duplicate key '%s' in "
		    "section [global] (first on line %u)", name, ld->seen[k]);
		return 1;
	}
	ld->seen[k] = ld->lineno;
	if (k == GK_STATE_DIR) {
		if (value[0] != '/')
			rc = conf_bad(why, sizeof(why), name, value,
			    "must be an absolute path");
		else
			rc = set_str(name, value, &c->state_dir, why,
			    sizeof(why));
	} else if (k == GK_USER_AGENT) {
		rc = set_str(name, value, &c->user_agent, why, sizeof(why));
		/* Also a mirror default, for check-config -v. */
		if (rc == 0 && settings_add(&c->defaults, &c->ndefaults,
		    "user_agent", value, ld->lineno, true) != 0)
			rc = BM_ENOMEM;
	} else {
		for (i = 0; i < sizeof(levels) / sizeof(levels[0]); i++)
			if (strcasecmp(value, levels[i]) == 0)
				break;
		if (i < sizeof(levels) / sizeof(levels[0]))
			c->log_level = level_val[i];
		else
			rc = conf_bad(why, sizeof(why), name, value, "expected "
			    "error, warning, info, verbose or debug");
	}
	if (rc != 0)
		load_fail(ld, ld->lineno, rc, "%s",
		    rc == BM_ENOMEM ? "out of memory" : why);
	return 1;
}

/*
 * How destination a relates to destination b (both canonical, absolute,
 * not "/"): 0 apart, 1 the same, 2 a is inside b, 3 b is inside a.
 */
static int
dest_relation(const char *a, const char *b)
{
	size_t	 la = strlen(a), lb = strlen(b);

	if (strcmp(a, b) == 0)
		return 1;
	if (la > lb && strncmp(a, b, lb) == 0 && a[lb] == '/')
		return 2;
	if (lb > la && strncmp(b, a, la) == 0 && b[la] == '/')
		return 3;
	return 0;
}

/* What dest_relation_set()'s value r says of a, as "A <words> B". */
static const char *const dest_rel_words[] = {
	"", "is the same directory as", "is inside", "contains",
	"is inside the snapshot directory (NAME.biomirror) of",
	"has its snapshot directory (NAME.biomirror) around"
};

/*
 * dest_relation(), also counting a inside (or the same as) b's snapshot
 * directory b.biomirror (publish = set keeps it beside b, so the name is
 * reserved for every mirror), or b inside a.biomirror: 4, or 5 for a
 * state directory b inside a.biomirror.
 */
static int
dest_relation_set(const char *a, const char *b)
{
	char	*ma = NULL, *mb = NULL;
	int	 r;

	if ((r = dest_relation(a, b)) != 0)
		return r;
	if (asprintf(&ma, "%s.biomirror", a) < 0) {
		ma = NULL;
		return 0;	/* out of memory: the run's check remains */
	}
	if (asprintf(&mb, "%s.biomirror", b) < 0)
		mb = NULL;
	if (mb != NULL && (r = dest_relation(a, mb)) != 0 && r != 3)
		r = 4;
	else if ((r = dest_relation(b, ma)) != 0 && r != 3)
		r = 5;
	else
		r = 0;
	free(ma);
	free(mb);
	return r;
}


/*
 * The dest just read from the file, on the current line: it must be
 * absolute (a relative one would resolve against the working directory,
 * which is / under systemd), not the root, and neither the same as nor
 * nested with the dest of an earlier mirror (one run's deletes or temp
 * clean-up would hit the other's files).  A clash makes both mirrors bad,
 * each error naming the other: which of the two was meant is unknown, so
 * neither runs.  Paths are compared as written, after dest_canon();
 * symlinks are not resolved.
 */
static void
check_file_dest(struct conf_load *ld)
{
	struct mirror_conf	*m = ld->cur, *o;
	char			*a = NULL, *b = NULL;
	size_t			 i;
	int			 r;

	if (m->dest[0] != '/') {
		load_fail(ld, ld->lineno, BM_EINVAL, "dest must be an absolute "
		    "path (got '%s'; a relative path would resolve against "
		    "the working directory)", m->dest);
		goto drop;
	}
	if (dest_has_dotdot(m->dest)) {
		load_fail(ld, ld->lineno, BM_EINVAL, "dest = %s: '..' "
		    "components are not allowed (write the directory without "
		    "them: they resolve differently across symlinks)",
		    m->dest);
		goto drop;
	}
	if ((a = dest_canon(m->dest)) == NULL)
		goto nomem;
	if (strcmp(a, "/") == 0) {
		load_fail(ld, ld->lineno, BM_EINVAL, "dest = %s: the root "
		    "directory cannot be a mirror's destination", m->dest);
		goto drop;
	}

	/* The state directory (manifests) must not share the tree either. */
	if (ld->c->state_dir != NULL) {
		if ((b = dest_canon(ld->c->state_dir)) == NULL)
			goto nomem;
		if ((r = dest_relation_set(a, b)) != 0) {
			load_fail(ld, ld->lineno, BM_EINVAL, "dest %s of [%s] "
			    "%s state_dir %s: the manifests must stay out of "
			    "the mirror", m->dest, m->name, dest_rel_words[r],
			    ld->c->state_dir);
			goto drop;
		}
		free(b);
		b = NULL;
	}
	/* A repeated section is not compared with its first. */
	for (i = 0; i < ld->c->nmirrors; i++) {
		if ((o = ld->c->mirrors[i]) == m || o == ld->owner ||
		    o->dest == NULL)
			continue;
		if ((b = dest_canon(o->dest)) == NULL)
			goto nomem;
		if ((r = dest_relation_set(a, b)) != 0) {
			load_fail(ld, ld->lineno, BM_EINVAL, "dest %s of [%s] "
			    "%s dest %s of [%s] (section on line %u): mirrors "
			    "must not share or nest destinations", m->dest,
			    m->name, dest_rel_words[r], o->dest, o->name, o->line);
			r = dest_relation_set(b, a);
			mirror_fail(ld, o, o->dest_line != 0 ? o->dest_line :
			    o->line, BM_EINVAL, "dest %s of [%s] %s dest %s of "
			    "[%s] (section on line %u): mirrors must not share "
			    "or nest destinations", o->dest, o->name,
			    dest_rel_words[r], m->dest, m->name, m->line);
		}
		free(b);
		b = NULL;
	}
	/*
	 * Used canonical from now on: "/srv/db/." is "/srv/db".  A clashing
	 * dest is kept, so that a later mirror sharing its tree is refused
	 * too.
	 */
	free(m->dest);
	m->dest = a;
	a = NULL;
	m->dest_line = ld->lineno;
	goto out;
nomem:
	ld->rc = BM_ENOMEM;
	goto out;
drop:
	/* Compared with no later mirror; its line said what is wrong. */
	free(m->dest);
	m->dest = NULL;
out:
	free(a);
	free(b);
}

int
config_check_adhoc_dest(const struct config *c, const char *dest,
    char *errbuf, size_t errlen)
{
	char		*cwd = NULL, *abs = NULL, *a = NULL, *b = NULL;
	char		*ra = NULL, *rb = NULL;
	size_t		 i;
	int		 r, rc = 0, saved;

	if (dest_has_dotdot(dest))
		return conf_fmt(errbuf, errlen, "--dest %s: '..' components "
		    "are not allowed (write the directory without them: they "
		    "resolve differently across symlinks)", dest);
	if (dest[0] != '/') {
		if ((cwd = getcwd(NULL, 0)) == NULL) {
			saved = errno;
			if (saved == ENOMEM)
				return BM_ENOMEM;
			(void)conf_fmt(errbuf, errlen, "--dest %s: a relative "
			    "path, and no working directory to resolve it "
			    "against: %s", dest, strerror(saved));
			return BM_EIO;
		}
		if (asprintf(&abs, "%s/%s", cwd, dest) < 0) {
			abs = NULL;
			rc = BM_ENOMEM;
			goto out;
		}
	}
	if ((a = dest_canon(abs != NULL ? abs : dest)) == NULL) {
		rc = BM_ENOMEM;
		goto out;
	}
	if ((ra = fileio_path_resolve(a)) == NULL) {
		rc = BM_ENOMEM;
		goto out;
	}
	for (i = 0; c != NULL && i < c->nmirrors && rc == 0; i++) {
		if (c->mirrors[i]->dest == NULL)
			continue;
		if ((b = dest_canon(c->mirrors[i]->dest)) == NULL ||
		    (rb = fileio_path_resolve(b)) == NULL) {
			rc = BM_ENOMEM;
			goto out;
		}
		if ((r = dest_relation_set(a, b)) != 0)
			rc = conf_fmt(errbuf, errlen, "--dest %s %s dest %s of "
			    "[%s]: mirrors must not share or nest "
			    "destinations", dest, dest_rel_words[r],
			    c->mirrors[i]->dest, c->mirrors[i]->name);
		else if ((r = dest_relation_set(ra, rb)) != 0)
			rc = conf_fmt(errbuf, errlen, "--dest %s %s dest %s of "
			    "[%s] through symlinks (%s and %s): mirrors must "
			    "not share or nest destinations", dest,
			    dest_rel_words[r], c->mirrors[i]->dest,
			    c->mirrors[i]->name, ra, rb);
		free(b);
		free(rb);
		b = rb = NULL;
	}
out:
	free(cwd);
	free(abs);
	free(a);
	free(ra);
	free(b);
	free(rb);
	return rc;
}

/*
 * post_sync on the current line: inih ends a value at an inline comment
 * (a ';' after whitespace), so "echo a ; echo b" would silently become
 * "echo a".  A shell command line is full of such text: refuse any line
 * where inih found one, rather than guess which part was meant.
 */
static void
check_post_sync_line(struct conf_load *ld, const char *key,
    const char *value)
{
	const char	*s = ld->line, *e = ld->line + ld->line_len, *c;

	s = find_chars_or_comment(s, e, "=:");
	if (s == e)
		return;
	c = find_chars_or_comment(s + 1, e, NULL);
	if (c == e)
		return;
	load_fail(ld, ld->lineno, BM_EINVAL, "%s: ' %c' starts a "
	    "comment in this file, so the command would be cut to '%s': put "
	    "the command in a script and name the script here (a comment "
	    "goes on a line of its own)", key, *c, value);
}

static int
conf_mirror_key(struct conf_load *ld, const char *name, const char *value)
{
	char	 why[CONF_REASON];
	int	 k, rc;

	if ((k = key_index(mirror_keys, MK_COUNT, name)) < 0) {
		load_fail(ld, ld->lineno, BM_EINVAL,
		    "unknown key '%s' in section [%s]", name, ld->cur->name);
		return 1;
	}
	if (k != MK_INCLUDE && k != MK_EXCLUDE && ld->seen[k] != 0) {
		load_fail(ld, ld->lineno, BM_EINVAL, "duplicate key '%s' in "
		    "section [%s] (first on line %u)", name, ld->cur->name,
		    ld->seen[k]);
		return 1;
	}
	ld->seen[k] = ld->lineno;
	if ((k == MK_CA_FILE || k == MK_PASSWORD_FILE) && value[0] != '\0' &&
	    value[0] != '/') {
		load_fail(ld, ld->lineno, BM_EINVAL, "%s must be an absolute "
		    "path (got '%s'; a relative path would resolve against "
		    "the working directory)", name, value);
		return 1;
	}
	if ((rc = mirror_conf_set(ld->cur, name, value, why,
	    sizeof(why))) != 0) {
		load_fail(ld, ld->lineno, rc, "%s",
		    rc == BM_ENOMEM ? "out of memory" : why);
		return 1;
	}
	if (settings_add(&ld->cur->settings, &ld->cur->nsettings,
	    mirror_keys[k], value, ld->lineno, false) != 0) {
		ld->rc = BM_ENOMEM;
		return 1;
	}
	if (k == MK_DEST)
		check_file_dest(ld);
	else if (k == MK_POST_SYNC || k == MK_PRE_PUBLISH)
		check_post_sync_line(ld, name, value);
	else if (k == MK_METRICS_FILE)
		ld->cur->metrics_line = ld->lineno;
	return 1;
}

/*
 * Every metrics_file of the file, once all sections are read: not inside
 * (or the same as) any mirror's dest or its snapshot directory
 * DEST.biomirror, where a sync would delete it or a snapshot leave it
 * behind, and not inside the state directory, which is biomirror's own
 * (manifests, locks).  Paths are compared after dest_canon(), as dests
 * are.  The error names the metrics_file line.
 */
static void
check_metrics_files(struct conf_load *ld)
{
	struct mirror_conf	*m;
	const struct mirror_conf *o;
	char		*a = NULL, *b = NULL;
	size_t		 i, j;
	int		 r;

	for (i = 0; i < ld->c->nmirrors && ld->rc == 0; i++) {
		m = ld->c->mirrors[i];
		if (m->metrics_file == NULL)
			continue;
		if ((a = dest_canon(m->metrics_file)) == NULL)
			goto nomem;
		for (j = 0; j < ld->c->nmirrors && ld->rc == 0; j++) {
			o = ld->c->mirrors[j];
			if (o->dest == NULL || (b = dest_canon(o->dest)) == NULL)
				continue;
			r = dest_relation_set(a, b);
			if (r == 1 || r == 2 || r == 4)
				mirror_fail(ld, m, m->metrics_line, BM_EINVAL,
				    "metrics_file %s of [%s] is inside dest %s "
				    "of [%s]%s: a sync would delete it or "
				    "leave it behind", m->metrics_file,
				    m->name, o->dest, o->name, r == 4 ?
				    " (its snapshot directory)" : "");
			free(b);
			b = NULL;
		}
		if (ld->rc == 0 && ld->c->state_dir != NULL) {
			if ((b = dest_canon(ld->c->state_dir)) == NULL)
				goto nomem;
			r = dest_relation(a, b);
			if (r == 1 || r == 2)
				mirror_fail(ld, m, m->metrics_line, BM_EINVAL,
				    "metrics_file %s of [%s] is inside "
				    "state_dir %s: the state directory holds "
				    "only biomirror's manifests and locks",
				    m->metrics_file, m->name,
				    ld->c->state_dir);
			free(b);
			b = NULL;
		}
		free(a);
		a = NULL;
	}
	return;
nomem:
	free(a);
	ld->rc = BM_ENOMEM;
}

/* See include/biomirror/config.h. */
int
parse_listen(const char *s, int *ret_family, uint8_t ret_addr[16],
    uint16_t *ret_port)
{
	char		 host[INET6_ADDRSTRLEN + 1];
	const char	*colon, *hs = s;
	uint64_t	 port = BMP_PORT;
	size_t		 hl;
	int		 fam;

	if (s[0] == '[') {
		if ((colon = strchr(s, ']')) == NULL)
			return BM_EINVAL;
		hs = s + 1;
		hl = (size_t)(colon - hs);
		colon = colon[1] == ':' ? colon + 1 : colon[1] == '\0' ?
		    NULL : colon + 1;
		if (colon != NULL && *colon != ':')
			return BM_EINVAL;
		fam = AF_INET6;
	} else {
		colon = strrchr(s, ':');
		hl = colon != NULL ? (size_t)(colon - s) : strlen(s);
		fam = AF_INET;
	}
	if (hl >= sizeof(host))
		return BM_EINVAL;
	memcpy(host, hs, hl);
	host[hl] = '\0';
	if (colon != NULL && config_parse_uint(colon + 1, 1, 65535, &port) != 0)
		return BM_EINVAL;
	memset(ret_addr, 0, 16);
	if (hl > 0 && inet_pton(fam, host, ret_addr) != 1)
		return BM_EINVAL;
	*ret_family = fam;
	*ret_port = (uint16_t)port;
	return 0;
}

/* See include/biomirror/config.h. */
bool
net_range_match(const struct net_range *r, int family, const uint8_t *addr)
{
	uint8_t		 a[16];
	size_t		 full, bits;

	memcpy(a, addr, 16);
	if (family == AF_INET && r->family == AF_INET6) {
		/* ::ffff:a.b.c.d, as a dual-stack socket would see it */
		memset(a, 0, 10);
		a[10] = a[11] = 0xff;
		memcpy(a + 12, addr, 4);
	} else if (family != r->family)
		return false;
	full = r->prefix / 8;
	bits = r->prefix % 8;
	if (memcmp(r->addr, a, full) != 0)
		return false;
	return bits == 0 || ((r->addr[full] ^ a[full]) &
	    (0xff << (8 - bits))) == 0;
}

/* See include/biomirror/config.h. */
int
parse_net_range(const char *s, struct net_range *ret)
{
	char		 host[INET6_ADDRSTRLEN + 1];
	const char	*slash = strchr(s, '/');
	struct net_range r;
	uint64_t	 bits;
	size_t		 hl = slash != NULL ? (size_t)(slash - s) : strlen(s);

	if (hl == 0 || hl >= sizeof(host))
		return BM_EINVAL;
	memcpy(host, s, hl);
	host[hl] = '\0';
	memset(&r, 0, sizeof(r));
	r.family = strchr(host, ':') != NULL ? AF_INET6 : AF_INET;
	if (inet_pton(r.family, host, r.addr) != 1)
		return BM_EINVAL;
	bits = r.family == AF_INET ? 32 : 128;
	/* "/07": a leading zero is a typo, not a prefix length. */
	if (slash != NULL && ((slash[1] == '0' && slash[2] != '\0') ||
	    config_parse_uint(slash + 1, 0, bits, &bits) != 0))
		return BM_EINVAL;
	r.prefix = (unsigned)bits;
	*ret = r;
	return 0;
}

/* See include/biomirror/config.h. */
int
config_read_secret(const char *v, uint8_t **ret, size_t *ret_len,
    char *errbuf, size_t errlen)
{
	struct stat	 st;
	char		*buf = NULL;
	size_t		 len = 0;
	int		 fd = -1, err, rc = BM_EINVAL;

	if (v[0] != '/') {
		(void)conf_bad(errbuf, errlen, "secret_file", v,
		    "must be an absolute path");
		goto out;
	}
	if (has_ctrl(v)) {
		(void)conf_bad(errbuf, errlen, "secret_file", v,
		    "control characters are not allowed");
		goto out;
	}
	if (lstat(v, &st) == 0 && S_ISLNK(st.st_mode)) {
		(void)conf_bad(errbuf, errlen, "secret_file", v, "a symbolic "
		    "link: not allowed (name the file itself)");
		goto out;
	}
	if ((fd = open(v, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)) ==
	    -1 || fstat(fd, &st) == -1) {
		err = errno;
		(void)conf_bad(errbuf, errlen, "secret_file", v, "%s",
		    strerror(err));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		(void)conf_bad(errbuf, errlen, "secret_file", v,
		    "not a regular file");
		goto out;
	}
	if ((st.st_mode & 077) != 0) {
		(void)conf_bad(errbuf, errlen, "secret_file", v, "mode %04o: "
		    "must be 0600 or stricter (chmod go= it)",
		    (unsigned)(st.st_mode & 07777));
		goto out;
	}
	if ((rc = fileio_read_all(fd, CONF_SECRET_MAX, &buf, &len)) != 0) {
		if (rc != BM_ENOMEM)
			(void)conf_bad(errbuf, errlen, "secret_file", v, "%s",
			    rc == BM_ELIMIT ? "over 4096 bytes" :
			    bm_strerror(rc));
		rc = rc == BM_ENOMEM ? rc : BM_EINVAL;
		goto out;
	}
	while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
		len--;
	if (len == 0) {
		rc = conf_bad(errbuf, errlen, "secret_file", v, "empty (or "
		    "only newlines)");
		goto out;
	}
	if (ret != NULL) {
		*ret = (uint8_t *)buf;
		*ret_len = len;
		buf = NULL;
	}
	rc = 0;
out:
	if (buf != NULL) {
		explicit_bzero(buf, len);
		free(buf);
	}
	if (fd != -1)
		(void)close(fd);
	return rc;
}

/*
 * secret_file: checked as config_read_secret() reads it (the secret
 * itself is read again at start, and dropped here).
 */
static int
check_secret_file(const char *v, char *errbuf, size_t errlen)
{
	return config_read_secret(v, NULL, NULL, errbuf, errlen);
}

/* The keys of a later issue's UDT data connections. */
static bool
serve_udt_key(const char *name)
{
	return strcmp(name, "udt_cc") == 0 || strcmp(name, "udt_mss") == 0 ||
	    strcmp(name, "udt_maxbw") == 0;
}

/* A key of [serve] or [export NAME] seen twice: an error naming both. */
static bool
serve_dup(struct conf_load *ld, int k, const char *name, const char *sect)
{
	if (ld->seen[k] != 0) {
		load_fail(ld, ld->lineno, BM_EINVAL, "duplicate key '%s' in "
		    "section [%s] (first on line %u)", name, sect,
		    ld->seen[k]);
		return true;
	}
	ld->seen[k] = ld->lineno;
	return false;
}

static int
serve_value(struct serve_conf *sv, int k, const char *name, const char *v,
    char *why, size_t wl)
{
	static const unsigned lo[] = { 0, 1, 1, 1, 0, 0, 0, 1 },
	    hi[] = { 0, 1024, 64, 86400, 3600, 0, 0, 65535 };
	unsigned	*u[] = { NULL, &sv->max_clients, &sv->max_connections,
			    &sv->idle_timeout, &sv->drain_timeout, NULL, NULL,
			    &sv->max_per_address };
	int		 fam, rc;
	uint8_t		 a[16];
	uint16_t	 port;

	if (k == 0) {
		if (parse_listen(v, &fam, a, &port) != 0)
			return conf_bad(why, wl, name, v, "expected ADDR:PORT "
			    "with a numeric address ([::1]:7722, "
			    "127.0.0.1:7722, :7722)");
		return set_str(name, v, &sv->listen, why, wl);
	}
	if (k <= 4 || k == 7)
		return set_uint(name, v, lo[k], hi[k], u[k], why, wl);
	if (k == 8) {
		if ((rc = set_size(name, v, 65536, &sv->max_queued_bytes, why,
		    wl)) != 0)
			return rc;
		if (sv->max_queued_bytes > (1ULL << 30))
			return conf_bad(why, wl, name, v, "must be at most 1G");
		return 0;
	}
	if (k == 5) {
		if ((rc = check_secret_file(v, why, wl)) != 0)
			return rc;
		return set_str(name, v, &sv->secret_file, why, wl);
	}
	if (v[0] != '/')
		return conf_bad(why, wl, name, v, "must be an absolute path");
	return set_str(name, v, &sv->metrics_file, why, wl);
}

/* One key of [serve]. */
static int
conf_serve_key(struct conf_load *ld, const char *name, const char *value)
{
	static const char *const keys[] = { "listen", "max_clients",
	    "max_connections", "idle_timeout", "drain_timeout",
	    "secret_file", "metrics_file", "max_per_address",
	    "max_queued_bytes" };
	char	 why[CONF_REASON];
	int	 k, rc;

	if (serve_udt_key(name)) {
		load_fail(ld, ld->lineno, BM_EINVAL, "%s is not supported by "
		    "this build yet (UDT data connections come later)", name);
		return 1;
	}
	if ((k = key_index(keys, sizeof(keys) / sizeof(keys[0]), name)) < 0) {
		load_fail(ld, ld->lineno, BM_EINVAL,
		    "unknown key '%s' in section [serve]", name);
		return 1;
	}
	if (serve_dup(ld, k, name, "serve"))
		return 1;
	if ((rc = serve_value(&ld->c->serve, k, name, value, why,
	    sizeof(why))) != 0)
		load_fail(ld, ld->lineno, rc, "%s",
		    rc == BM_ENOMEM ? "out of memory" : why);
	return 1;
}

/* allow = RANGE [RANGE...] (repeatable; spaces or commas between). */
static int
export_allow(struct export_conf *e, const char *v, char *why, size_t wl)
{
	struct net_range *nv, r;
	char		 one[INET6_ADDRSTRLEN + 8];
	const char	*p = v;
	size_t		 n;

	while (*p != '\0') {
		while (*p == ' ' || *p == '\t' || *p == ',')
			p++;
		if (*p == '\0')
			break;
		n = strcspn(p, " \t,");
		if (n >= sizeof(one))
			return conf_bad(why, wl, "allow", v, "bad address "
			    "range");
		memcpy(one, p, n);
		one[n] = '\0';
		p += n;
		if (parse_net_range(one, &r) != 0)
			return conf_bad(why, wl, "allow", v, "bad address "
			    "range '%s' (expected ADDR or ADDR/BITS)", one);
		if (e->nallow == 1024)
			return conf_bad(why, wl, "allow", v, "more than 1024 "
			    "ranges");
		if ((nv = reallocarray(e->allow, e->nallow + 1,
		    sizeof(*nv))) == NULL)
			return BM_ENOMEM;
		e->allow = nv;
		e->allow[e->nallow++] = r;
	}
	return 0;
}

/* One key of [export NAME]. */
static int
conf_export_key(struct conf_load *ld, const char *name, const char *value)
{
	static const char *const keys[] = { "path", "mirror", "secret_file",
	    "allow" };
	struct export_conf *e = ld->exp;
	char		 why[CONF_REASON], sect[CONF_NAME_MAX + 8];
	int		 k, rc = 0;

	(void)snprintf(sect, sizeof(sect), "export %s", e->name);
	if (serve_udt_key(name)) {
		load_fail(ld, ld->lineno, BM_EINVAL, "%s is not supported by "
		    "this build yet (UDT data connections come later)", name);
		return 1;
	}
	if ((k = key_index(keys, sizeof(keys) / sizeof(keys[0]), name)) < 0) {
		load_fail(ld, ld->lineno, BM_EINVAL,
		    "unknown key '%s' in section [%s]", name, sect);
		return 1;
	}
	if (k != 3 && serve_dup(ld, k, name, sect))
		return 1;
	if (k == 0 && value[0] != '/')
		rc = conf_bad(why, sizeof(why), name, value, "must be an "
		    "absolute path");
	else if (k == 0)
		rc = set_str(name, value, &e->path, why, sizeof(why));
	else if (k == 1 && !mirror_name_ok(value, strlen(value)))
		rc = conf_bad(why, sizeof(why), name, value, "not a mirror "
		    "name");
	else if (k == 1)
		rc = set_str(name, value, &e->mirror, why, sizeof(why));
	else if (k == 2 && (rc = check_secret_file(value, why,
	    sizeof(why))) == 0)
		rc = set_str(name, value, &e->secret_file, why, sizeof(why));
	else if (k == 3)
		rc = export_allow(e, value, why, sizeof(why));
	if (rc != 0)
		load_fail(ld, ld->lineno, rc, "%s",
		    rc == BM_ENOMEM ? "out of memory" : why);
	return 1;
}

/* See include/biomirror/config.h. */
struct export_conf *
config_find_export(const struct config *c, const char *name)
{
	size_t	 i;

	for (i = 0; c != NULL && i < c->nexports; i++)
		if (strcmp(c->exports[i]->name, name) == 0)
			return c->exports[i];
	return NULL;
}

/* A new export named name appended to c; NULL on ENOMEM. */
static struct export_conf *
export_append(struct config *c, const char *name)
{
	struct export_conf **nv, *e;

	if ((e = calloc(1, sizeof(*e))) == NULL ||
	    (e->name = strdup(name)) == NULL) {
		export_conf_free(e);
		return NULL;
	}
	nv = reallocarray(c->exports, c->nexports + 1, sizeof(*nv));
	if (nv == NULL) {
		export_conf_free(e);
		return NULL;
	}
	nv[c->nexports++] = e;
	c->exports = nv;
	return e;
}

/* See include/biomirror/config.h. */
int
config_add_export(struct config *c, const char *name, const char *path,
    char *errbuf, size_t errlen)
{
	struct export_conf *e;

	if (!mirror_name_ok(name, strlen(name)))
		return conf_fmt(errbuf, errlen, "bad export name '%s' (1 to 64 "
		    "letters, digits, '.', '_' or '-')", name);
	if (path[0] != '/')
		return conf_fmt(errbuf, errlen, "export %s: %s must be an "
		    "absolute path", name, path);
	if (config_find_export(c, name) != NULL)
		return conf_fmt(errbuf, errlen, "export %s given twice", name);
	if ((e = export_append(c, name)) == NULL ||
	    (e->path = strdup(path)) == NULL)
		return BM_ENOMEM;
	return 0;
}

/*
 * After the whole file: every export has path or mirror (not both), and
 * a mirror export names a mirror of the file without errors.
 */
static void
check_exports(struct conf_load *ld)
{
	struct export_conf	*e;
	struct mirror_conf	*m = NULL;
	size_t			 i;

	for (i = 0; i < ld->c->nexports && ld->rc == 0; i++) {
		e = ld->c->exports[i];
		if ((e->path == NULL) == (e->mirror == NULL) && !e->bad)
			load_record(ld, NULL, false, e->line, BM_EINVAL,
			    e->path == NULL ? "section [export] needs path = "
			    "DIR or mirror = NAME" : "section [export] takes "
			    "path or mirror, not both");
		else if (e->mirror != NULL &&
		    (m = config_find(ld->c, e->mirror)) == NULL)
			load_record(ld, NULL, false, e->line, BM_EINVAL,
			    "section [export]: mirror = NAME names no "
			    "configured mirror");
		else if (e->mirror != NULL && m->bad)
			load_record(ld, NULL, false, e->line, BM_EINVAL,
			    "section [export]: its mirror has config errors");
		else
			continue;
		e->bad = true;
	}
}

/* [serve] or [export NAME] (name NULL for [serve]). */
static void
open_serve(struct conf_load *ld, const char *name)
{
	struct export_conf *e;

	if (name == NULL) {
		ld->kind = SECT_SERVE;
		if (ld->c->serve.line != 0) {
			load_fail(ld, ld->lineno, BM_EINVAL, "duplicate "
			    "section [serve] (first on line %u)",
			    ld->c->serve.line);
			return;
		}
		ld->c->serve.line = ld->lineno;
		return;
	}
	if ((e = config_find_export(ld->c, name)) != NULL) {
		/* Its keys are checked into a scratch export and dropped. */
		if ((ld->scratch_exp = calloc(1, sizeof(*e))) == NULL ||
		    (ld->scratch_exp->name = strdup(name)) == NULL) {
			ld->rc = BM_ENOMEM;
			return;
		}
		ld->exp = ld->scratch_exp;
		ld->kind = SECT_EXPORT;
		load_fail(ld, ld->lineno, BM_EINVAL, "duplicate section "
		    "[export %s] (first on line %u)", name, e->line);
		e->bad = true;
		return;
	}
	if ((e = export_append(ld->c, name)) == NULL) {
		ld->rc = BM_ENOMEM;
		return;
	}
	e->line = ld->lineno;
	ld->exp = e;
	ld->kind = SECT_EXPORT;
}

/* inih's handler: one key line, in the section conf_reader() saw. */
static int
conf_handler(void *user, const char *section, const char *name,
    const char *value)
{
	struct conf_load	*ld = user;

	(void)section;	/* inih truncates it; ld->kind is exact */
	if (ld->rc != 0)
		return 1;
	switch (ld->kind) {
	case SECT_GLOBAL:
		return conf_global_key(ld, name, value);
	case SECT_MIRROR:
	case SECT_BROKEN:
		return conf_mirror_key(ld, name, value);
	case SECT_SERVE:
		return conf_serve_key(ld, name, value);
	case SECT_EXPORT:
		return conf_export_key(ld, name, value);
	default:
		load_fail(ld, ld->lineno, BM_EINVAL, "key '%s' outside any "
		    "section (put it under [global] or a [mirror] section)",
		    name);
		return 1;
	}
}

/* Read a whole regular file of at most CONF_MAX_FILE bytes. */
static int
read_file(const char *path, char **ret, size_t *ret_len, char *errbuf,
    size_t errlen)
{
	struct stat	 st;
	int		 fd, rc;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)) == -1) {
		(void)conf_fmt(errbuf, errlen, "%s: %s", path, strerror(errno));
		return BM_ENOENT;
	}
	if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
		/* Said as an open error: "cannot open config file: EISDIR". */
		(void)conf_fmt(errbuf, errlen, "%s: %s", path, strerror(EISDIR));
		rc = BM_ENOENT;
	} else if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode))
		rc = conf_fmt(errbuf, errlen, "%s: not a regular file", path);
	else if ((rc = fileio_read_all(fd, CONF_MAX_FILE, ret, ret_len)) ==
	    BM_ELIMIT)
		rc = conf_fmt(errbuf, errlen, "%s: larger than %d bytes",
		    path, CONF_MAX_FILE);
	else if (rc == BM_EIO) {
		(void)conf_fmt(errbuf, errlen, "%s: read: %s", path,
		    strerror(errno));
	}
	(void)close(fd);
	return rc;
}

/*
 * See include/biomirror/config.h.  The transport is asked over the
 * options the run opens it with (run_open_xfer() in agent/run/sync.c):
 * transport = udt is UDT, auto is TCP in this build.
 */
int
mirror_conf_transport_ready(const struct mirror_conf *m, char *errbuf,
    size_t errlen)
{
	struct xfer_opts xo;

	if (m->source == NULL)
		return 0;
	memset(&xo, 0, sizeof(xo));
	xo.net = m->transport == TRANSPORT_UDT ? XFER_NET_UDT : XFER_NET_TCP;
	xo.ftp.mode_e = m->ftp_mode_e;
	return xfer_ready(m->source, &xo, errbuf, errlen);
}

/*
 * Read and check the config file at path (borrowed) into a new struct
 * config (*ret, owned by the caller, free with config_free()), recording
 * every error in it rather than stopping at the first (config.h).  A file
 * without mirrors is valid; the checks beyond mirror_conf_check():
 * docs/internals.md, "Reading the config file".  Returns 0; BM_ENOENT
 * when the file cannot be opened ("FILE: strerror" in errbuf); BM_EINVAL
 * with "FILE: reason" for a file that is not regular or over 1 MiB;
 * BM_EIO on a read error; BM_ENOMEM.
 */
int
config_load_all(const char *path, struct config **ret, char *errbuf,
    size_t errlen)
{
	struct conf_load	 ld;
	struct config		*c = NULL;
	char			*buf = NULL;
	size_t			 len = 0;
	int			 irc, rc;

	if (errbuf != NULL && errlen > 0)
		errbuf[0] = '\0';
	if ((rc = read_file(path, &buf, &len, errbuf, errlen)) != 0)
		goto out;
	rc = BM_ENOMEM;
	if ((c = config_new()) == NULL || (c->path = strdup(path)) == NULL)
		goto out;
	memset(&ld, 0, sizeof(ld));
	ld.path = path;
	ld.buf = buf;
	ld.len = len;
	ld.c = c;
	irc = ini_parse_stream(conf_reader, &ld, conf_handler, &ld);
	/* inih's own verdict, in case it disagrees with our classifier. */
	if (irc == -2)
		ld.rc = BM_ENOMEM;
	else if (irc > 0)
		load_record(&ld, NULL, true, (unsigned)irc, BM_EINVAL,
		    "syntax error");
	close_section(&ld);
	mirror_conf_free(ld.gscratch);
	check_metrics_files(&ld);
	check_exports(&ld);
	if (ld.rc == BM_ENOMEM)
		goto out;
	*ret = c;
	c = NULL;
	rc = 0;
out:
	if (rc == BM_ENOMEM)
		(void)conf_fmt(errbuf, errlen, "%s: out of memory", path);
	config_free(c);
	free(buf);
	return rc;
}

/*
 * config_load_all(), and any error in the file fails the load: BM_EINVAL
 * with the first one, "FILE:LINE: reason", in errbuf; *ret is then left
 * alone.  Other returns as config_load_all().
 */
int
config_load(const char *path, struct config **ret, char *errbuf,
    size_t errlen)
{
	struct config	*c = NULL;
	int		 rc;

	if ((rc = config_load_all(path, &c, errbuf, errlen)) != 0)
		return rc;
	if (c->nerrors > 0) {
		(void)conf_fmt(errbuf, errlen, "%s: %s", c->errors[0].where,
		    c->errors[0].reason);
		config_free(c);
		return BM_EINVAL;
	}
	*ret = c;
	return 0;
}
