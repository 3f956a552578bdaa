/*
 * The configuration: [global] and one section per mirror, read with inih
 * (DESIGN.md "Config").  Defaults are filled in first, then the handler
 * overrides them.  Unknown sections and keys, bad values, missing
 * source/dest and values this build cannot honour yet are errors that name
 * the file and line.  An error inside a mirror's section makes only that
 * mirror unusable (config_load_all()); one outside every mirror section
 * ([global], before the first section) makes the whole file unusable.
 * [serve] and [export NAME] configure biomirror serve: their errors are
 * of no mirror and mark the section bad (serve refuses to start).  This
 * module never logs (STYLE.md rule 24).
 */
#ifndef BIOMIRROR_CONFIG_H
#define BIOMIRROR_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "biomirror/listing.h"

/* max_entries: its default, and the most it takes. */
#define CONFIG_MAX_ENTRIES	50000000U
#define CONFIG_MAX_ENTRIES_TOP	1000000000U

enum transport_kind { TRANSPORT_TCP = 0, TRANSPORT_UDT, TRANSPORT_AUTO };
enum verify_mode { VERIFY_SIZE = 0, VERIFY_SIDECAR, VERIFY_CHECKSUM };
enum publish_mode { PUBLISH_FILE = 0, PUBLISH_SET };
/* ftp_tls: explicit TLS (AUTH TLS, RFC 4217) on FTP control and data. */
enum ftp_tls { FTP_TLS_DEFAULT = 0, FTP_TLS_NO, FTP_TLS_TRY, FTP_TLS_REQUIRE };

/* One mirror (a config section, or an ad-hoc --source/--dest pair). */
/* One key line a mirror took: from its section, or [global]'s default. */
struct conf_setting {
	const char	*key;		/* static: the key's name */
	char		*value;		/* owned: its text */
	unsigned	 line;		/* line it was read on */
	bool		 global;	/* from [global] (a default) */
};

struct mirror_conf {
	char		*name;		/* owned: section name (ad-hoc: "adhoc") */
	char		*source;	/* owned: upstream URL, ends in '/' */
	char		*dest;		/* owned: local directory, absolute or relative */
	char		**include;	/* owned: NULL-free array of globs */
	size_t		 ninclude;
	char		**exclude;	/* owned */
	size_t		 nexclude;
	unsigned	 concurrency;	/* files in flight, 1..1024 (default 8) */
	unsigned	 streams;	/* ranges per large file, 1..64 (default 4) */
	bool		 concurrency_auto; /* concurrency = auto: sized from the
					   measured path (concurrency is then
					   the starting value) */
	bool		 streams_auto;	/* streams = auto: likewise */
	uint64_t	 min_split;	/* bytes (default 16M) */
	unsigned	 max_connections; /* per host; 0 = default by scheme */
	unsigned	 max_entries;	/* entries one directory may list
					   (default CONFIG_MAX_ENTRIES) */
	enum transport_kind transport;	/* udt: ftp:// with ftp_mode =
					   extended only; auto is tcp */
	bool		 delete;	/* delete files gone upstream */
	uint64_t	 max_delete;	/* count, or percent when max_delete_pct */
	bool		 max_delete_pct; /* max_delete is a percentage 0..100 */
	enum verify_mode verify;	/* size, sidecar (default) or checksum */
	bool		 verify_set;	/* verify was given (key or --verify):
					   a listed sidecar that answers 404
					   then fails the run */
	enum publish_mode publish;	/* only file in this build */
	uint64_t	 bwlimit;	/* bytes per second, 0 = unlimited */
	unsigned	 retries;	/* per request (default 5) */
	unsigned	 timeout;	/* connect timeout, seconds (default 60) */
	unsigned	 stall_timeout;	/* seconds without a byte (default 120) */
	struct tzspec	 listing_tz;	/* listing_timezone (default UTC) */
	struct tzspec	 ftp_tz;	/* ftp_timezone (default UTC) */
	mode_t		 file_mode;	/* default 0644 */
	mode_t		 dir_mode;	/* default 0755 */
	char		*ca_file;	/* owned, NULL = system trust */
	char		*user_agent;	/* owned, NULL = global or default */
	char		*post_sync;	/* owned, NULL if none */
	char		*pre_publish;	/* owned, NULL if none: the check run
					   in a staged snapshot (publish =
					   set) before the swap */
	unsigned	 hook_timeout;	/* seconds post_sync may run, 0 = no
					   limit (default 3600) */
	char		*metrics_file;	/* owned, NULL if none */
	enum ftp_tls	 ftp_tls;	/* ftp_tls; DEFAULT: no for ftp://,
					   require for ftps:// */
	char		*user;		/* owned: FTP login, NULL = anonymous */
	char		*password_file;	/* owned: file holding the FTP password
					   (not world-readable), NULL if none */
	char		*secret_file;	/* owned: bm://: the export's secret
					   (mode 0600 or stricter), NULL =
					   anonymous */
	bool		 ftp_active;	/* ftp_active: PORT/EPRT, not passive */
	bool		 follow_symlinks; /* fetch symlink targets (FTP) */
	bool		 ftp_mode_e;	/* ftp_mode = extended: GridFTP MODE E */
	char		 tcp_congestion[16]; /* TCP_CONGESTION of biomirror's
					   sockets, "" = auto (the kernel's
					   default) */
	uint64_t	 udt_buffer;	/* UDT/UDP receive buffer bytes,
					   0 = sized by the transport */
	unsigned	 line;		/* line of the section header, 0 ad-hoc */
	unsigned	 metrics_line;	/* line of metrics_file, 0 if not from a file */
	unsigned	 dest_line;	/* line of dest, 0 if not from a file */
	bool		 bad;		/* its section has errors (config
					   errors[]): never run or read */
	struct conf_setting *settings;	/* owned: the key lines it took,
					   section's and [global]'s, in the
					   order applied (check-config -v) */
	size_t		 nsettings;
};

/* One error found in a config file (config_load_all()). */
struct config_error {
	char		*where;		/* owned: "FILE:LINE" */
	char		*reason;	/* owned: what is wrong there */
	struct mirror_conf *mirror;	/* borrowed: the mirror whose section
					   holds it (made bad), NULL if none */
};

/* One address range of an export's allow list ("10.0.0.0/8", "::1"). */
struct net_range {
	int		 family;	/* AF_INET or AF_INET6 */
	uint8_t		 addr[16];	/* network address, 4 or 16 bytes used */
	unsigned	 prefix;	/* bits of addr that must match */
};

/* [export NAME]: one tree biomirror serve offers. */
struct export_conf {
	char		*name;		/* owned: NAME of the section */
	char		*path;		/* owned: path = DIR, NULL with mirror */
	char		*mirror;	/* owned: mirror = NAME, NULL with path */
	char		*secret_file;	/* owned: NULL = [serve]'s, if any */
	struct net_range *allow;	/* owned: allow ranges, none = anyone */
	size_t		 nallow;
	unsigned	 line;		/* line of the section header */
	bool		 bad;		/* its section has errors */
};

/* [serve]: the server's own keys, defaults when the section is absent. */
struct serve_conf {
	char		*listen;	/* owned: ADDR:PORT, NULL = 0.0.0.0:7722 */
	unsigned	 max_clients;	/* sessions at once (default 16) */
	unsigned	 max_connections; /* data connections per session (8) */
	unsigned	 idle_timeout;	/* seconds without a request (300) */
	unsigned	 drain_timeout;	/* seconds SIGTERM waits for transfers (30) */
	unsigned	 max_per_address; /* connections from one address, 0 =
					   2 * (max_connections + 1) */
	uint64_t	 max_queued_bytes; /* GET items' bytes queued per
					   session (8 MiB) */
	char		*secret_file;	/* owned: default secret, NULL = anonymous */
	char		*metrics_file;	/* owned: Prometheus textfile, NULL none */
	unsigned	 line;		/* line of [serve], 0 if absent */
	bool		 bad;		/* its section has errors */
};

struct config {
	char		*path;		/* owned: file read, NULL if none */
	char		*state_dir;	/* owned: NULL = built-in default */
	int		 log_level;	/* -1 quiet .. 2 debug (log_level key) */
	char		*user_agent;	/* owned: global User-Agent, NULL = default */
	struct mirror_conf **mirrors;	/* owned: in file order, bad ones too */
	size_t		 nmirrors;
	struct serve_conf serve;	/* [serve], defaults if absent */
	struct export_conf **exports;	/* owned: [export NAME] sections, in
					   file order, bad ones too */
	size_t		 nexports;
	struct config_error *errors;	/* owned: every error, in the order
					   found */
	size_t		 nerrors;
	bool		 fatal;		/* an error outside every mirror
					   section: no mirror may be used */
	struct conf_setting *defaults;	/* owned: [global]'s mirror keys */
	size_t		 ndefaults;
};

/*
 * Read and validate the INI file at path into a new struct config (*ret,
 * free with config_free()).  Returns 0; BM_ENOENT when the file cannot be
 * opened; BM_EINVAL with "FILE:LINE: reason" in errbuf for any error;
 * BM_ENOMEM.  Lines are limited to inih's INI_MAX_LINE bytes (longer
 * lines are an error naming the line).
 */
int	config_load(const char *path, struct config **ret,
	    char *errbuf, size_t errlen);
/*
 * Read the INI file at path as config_load() does, but go on past errors:
 * every error is in (*ret)->errors ("FILE:LINE" and reason); which mark a
 * mirror bad and which set (*ret)->fatal: docs/internals.md, "Reading the
 * config file".  Returns 0 with *ret for any file that could be read;
 * BM_ENOENT, BM_EIO, BM_EINVAL (not a regular file, over 1 MiB) with
 * "FILE: reason" in errbuf; BM_ENOMEM.
 */
int	config_load_all(const char *path, struct config **ret,
	    char *errbuf, size_t errlen);
/*
 * Whether mirror m can have its transport here (check-config, for each
 * mirror): the curl module loads for an HTTP or FTP source, the UDT
 * module too for transport = udt (xfer_ready).  Returns 0, or BM_EINVAL
 * with "curl module PATH: reason" or "UDT module PATH: reason" in errbuf.
 */
int	mirror_conf_transport_ready(const struct mirror_conf *m,
	    char *errbuf, size_t errlen);
/*
 * Parse "ADDR:PORT", "[V6ADDR]:PORT", "ADDR" or ":PORT" (numeric
 * addresses only; the port defaults to 7722, the address to 0.0.0.0)
 * into family, 16 address bytes and port.  Returns 0 or BM_EINVAL.
 */
int	parse_listen(const char *s, int *ret_family, uint8_t ret_addr[16],
	    uint16_t *ret_port);
/*
 * Read secret_file v (an absolute path; a regular file of mode 0600 or
 * stricter, not a symlink, 1 to 4096 bytes once trailing newlines are
 * removed) into *ret (the caller's, to cleanse and free; ret NULL: only
 * checked).  Returns 0, BM_ENOMEM, or BM_EINVAL with "secret_file = v:
 * why" in errbuf.
 */
int	config_read_secret(const char *v, uint8_t **ret, size_t *ret_len,
	    char *errbuf, size_t errlen);
/* Parse one allow range ("10.0.0.0/8", "::1") into *ret.  0 or BM_EINVAL. */
int	parse_net_range(const char *s, struct net_range *ret);
/*
 * Whether addr (family AF_INET: 4 bytes used, of 16; AF_INET6: 16) lies in
 * r.  An IPv4 address also matches an IPv6 range holding its v4-mapped
 * form (::ffff:a.b.c.d: "::/0", "::ffff:10.0.0.0/104").
 */
bool	net_range_match(const struct net_range *r, int family,
	    const uint8_t *addr);
/* The export named name, or NULL (borrowed). */
struct export_conf *config_find_export(const struct config *c,
	    const char *name);
/*
 * Add an export name = path (a --export NAME=DIR of the command line;
 * anonymous, no allow list) to c.  Returns 0, BM_EINVAL with a reason in
 * errbuf (bad name, relative path, a duplicate), or BM_ENOMEM.
 */
int	config_add_export(struct config *c, const char *name, const char *path,
	    char *errbuf, size_t errlen);
/* Drop every export of c (the command line's --export replace them). */
void	config_clear_exports(struct config *c);
/* Make a config holding no mirrors and all defaults (for ad-hoc runs). */
struct config *config_new(void);
/* Free a config.  NULL is a no-op. */
void	config_free(struct config *c);

/* A mirror with all defaults and the given name (owned copy). NULL on ENOMEM. */
struct mirror_conf *mirror_conf_new(const char *name);
/* Free one mirror config.  NULL is a no-op. */
void	mirror_conf_free(struct mirror_conf *m);
/*
 * Set one mirror key from a string, exactly as the INI handler does (so
 * that command-line overrides share its checks).  Repeatable keys
 * (include, exclude) append.  Returns 0, BM_EINVAL with a reason in
 * errbuf ("unknown key", "bad size", "transport = udt is not supported by
 * this build yet"), or BM_ENOMEM.
 */
int	mirror_conf_set(struct mirror_conf *m, const char *key,
	    const char *value, char *errbuf, size_t errlen);
/*
 * Check a finished mirror: source and dest present, source scheme
 * supported (http, https, ftp, ftps), source normalised to end in '/',
 * dest not the root directory, FTP-only keys only with an FTP source.
 * Returns 0 or BM_EINVAL with a reason in errbuf.
 */
int	mirror_conf_check(struct mirror_conf *m, char *errbuf, size_t errlen);
/* True when the mirror's source is the FTP lister's (ftp://, ftps://). */
bool	mirror_is_ftp(const struct mirror_conf *m);
/* The mirror named name, or NULL (borrowed). */
struct mirror_conf *config_find(const struct config *c, const char *name);
/*
 * Check an ad-hoc run's dest (borrowed; relative to the working directory
 * when not absolute) against config c (borrowed; no mirrors is fine) as
 * config_load() checks its mirrors against each other; the rules:
 * docs/internals.md, "Checking an ad-hoc dest".  Returns 0, BM_EINVAL
 * (the reason in errbuf), BM_EIO (a relative dest and no working
 * directory; the reason in errbuf) or BM_ENOMEM.
 */
int	config_check_adhoc_dest(const struct config *c, const char *dest,
	    char *errbuf, size_t errlen);

/*
 * Parse a size with optional K, M, G, T suffix (powers of 1024), e.g.
 * "16M" -> 16777216.  Returns 0 or BM_EINVAL (garbage, overflow).
 */
int	config_parse_size(const char *s, uint64_t *ret);
/* Parse a non-negative decimal integer in [min, max].  0 or BM_EINVAL. */
int	config_parse_uint(const char *s, uint64_t min, uint64_t max,
	    uint64_t *ret);
/*
 * Parse a duration in seconds with an optional unit s, m, h or d ("3600",
 * "90m", "36h", "7d") into *ret (seconds; 0 is allowed).  Returns 0 or
 * BM_EINVAL (empty, garbage, more than 2^63 - 1 seconds).
 */
int	parse_duration(const char *s, uint64_t *ret);
/*
 * Empty a repeatable key's list (include or exclude) of m, so that the
 * next mirror_conf_set() of it starts a new list (command-line options
 * replace the config's), or drop post_sync (--no-hook).  Returns 0 or
 * BM_EINVAL (another key).
 */
int	mirror_conf_clear(struct mirror_conf *m, const char *key);

/*
 * Give m each [global] default of c whose key m's settings lack (an
 * include or exclude line of m's replaces all of [global]'s); keys that
 * m's kind of source does not take (FTP keys for http://, secret_file
 * but for bm://) are left out.  Returns 0, or the error of
 * mirror_conf_set() with its reason in errbuf and the default's line in
 * *ret_line.
 */
int	config_apply_defaults(const struct config *c, struct mirror_conf *m,
	    char *errbuf, size_t errlen, unsigned *ret_line);
/* The mirror keys, in the order of docs (n of them in *ret_n); static. */
const char *const *config_mirror_keys(size_t *ret_n);
/* The built-in default of mirror key key as text ("8", "none"); static. */
const char *config_key_default(const char *key);

#endif
