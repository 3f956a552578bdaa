/*
 * Argument parsing and dispatch (DESIGN.md "Command line").  Global
 * options go before or after the command (parse_globals() takes them out
 * first, for every command alike); per-run overrides are applied
 * through mirror_conf_set(), so that they share the config file's checks.
 * The exit status of a call over several mirrors is the first that
 * applies of 2, 4, 3, 1, 75, 0.
 */
#include <dirent.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <jansson.h>

#include "biomirror/cli.h"
#include "biomirror/clock.h"
#include "biomirror/config.h"
#include "biomirror/error.h"
#include "biomirror/listing.h"
#include "biomirror/log.h"
#include "biomirror/manifest.h"
#include "biomirror/report.h"
#include "biomirror/serve.h"
#include "biomirror/state.h"
#include "biomirror/sync.h"
#include "biomirror/text.h"
#include "biomirror/zone.h"

#ifndef BM_VERSION
#define BM_VERSION "0.0.0"
#endif
#define DEFAULT_CONFIG	"/etc/biomirror/biomirror.conf"
#define NS		1000000000LL

struct cli {
	const char	*config_path;	/* borrowed: -c, NULL = default */
	const char	*state_dir_opt;	/* borrowed: --state-dir */
	char		 state_dir[PATH_MAX]; /* resolved state directory */
	int		 verbosity;	/* -1 .. 2 */
	bool		 json;		/* --json */
	bool		 check_only;	/* -n */
	bool		 json_done;	/* the --json array is printed */
	bool		 state_full;	/* status: the state directory's file
					   system is full (warn_state_full) */
	bool		 state_ro;	/* status: ... mounted read-only */
	struct config	*conf;		/* owned */
	volatile sig_atomic_t *stop;	/* borrowed */
};

static void
usage(FILE *fp)
{
	fprintf(fp,
"usage: biomirror [-c FILE] [--state-dir DIR] [-v|-vv|-q] [--json] COMMAND ...\n"
"  (the global options may also follow the command)\n"
"commands:\n"
"  sync [NAME...]                 one run of the named mirrors (default: all)\n"
"  sync --source URL --dest DIR [--name NAME]\n"
"                                 ad-hoc mirror without a config file\n"
"  plan [NAME...]                 what a sync would do (same as sync --dry-run)\n"
"  status [--max-age DURATION] [NAME...]\n"
"                                 last runs and age of the last success; exit 1\n"
"                                 when a last finished run is not ok, or the last\n"
"                                 success is older than DURATION (90m, 36h, 7d)\n"
"  ls NAME [PATH]                 what the manifest holds\n"
"  history NAME [--runs N | --run ID]  runs, or the files one run changed\n"
"  resync NAME|--source URL --dest DIR [--checksum] [--adopt] [--dry-run]\n"
"                                 full re-check and repair of a mirror\n"
"  verify NAME|--source URL --dest DIR [--repair]\n"
"                                 re-hash local files against their digests\n"
"  serve [--listen ADDR:PORT] [--export NAME=DIR]...\n"
"                                 serve the [export] trees (or those given)\n"
"                                 read-only over bm:// until SIGTERM\n"
"  check-config                   validate the config and exit (also: -n;\n"
"                                 --json: {config, ok, mirrors or error};\n"
"                                 -v: each mirror's settings and their origin)\n"
"sync and plan options (each overrides the config key of the same name;\n"
"--include and --exclude replace the config's list, they do not add to it):\n"
"  --concurrency N|auto  --max-connections N  --include GLOB  --exclude GLOB\n"
"  --delete  --max-delete N|P%%  --bwlimit RATE  --retries N  --timeout S\n"
"  --no-delete  --[no-]ftp-active  --[no-]follow-symlinks  --no-hook\n"
"  --stall-timeout S  --listing-timezone TZ  --ftp-timezone TZ\n"
"  --transport tcp|udt|auto  --udt-buffer SIZE  --verify size|sidecar|checksum\n"
"  --ca-file PEM\n"
"  --ftp-mode stream|extended  --tcp-congestion auto|NAME\n"
"  --streams N|auto  --min-split SIZE  --dry-run  --progress  --no-progress\n"
"  --allow-empty  (no config key) an empty listing is not refused: for an\n"
"                 upstream that really was emptied; max_delete still applies\n"
"-q: nothing but errors; -v: one line per file acted on; -vv: and requests\n"
"exit status: 0 ok, 1 some files failed or interrupted, 2 usage/config/\n"
"manifest error, 3 listing failed or incomplete, 4 refused by a safety\n"
"guard, 75 another run holds the lock.\n");
}

/* Exit status precedence over several mirrors: 2, 4, 3, 1, 75, 0. */
static int
exit_rank(int code)
{
	switch (code) {
	case 2:		return 6;
	case 4:		return 5;
	case 3:		return 4;
	case 1:		return 3;
	case 75:	return 2;
	default:	return code == 0 ? 0 : 1;
	}
}

/*
 * The config errors of mirror m (NULL: those in no mirror's section; all:
 * every one) as a result with status "error", exit 2; each is logged,
 * "NAME: skipped, config error at FILE:LINE: reason" for a mirror's.  NULL on ENOMEM.
 */
static struct mirror_result *
config_errors(struct cli *c, const struct mirror_conf *m, bool all)
{
	struct mirror_result	*r;
	const struct config_error *e;
	size_t			 i;

	if ((r = result_new(m != NULL ? m->name : NULL)) == NULL)
		return NULL;
	r->status = "error";
	r->exit_code = 2;
	for (i = 0; i < c->conf->nerrors; i++) {
		e = &c->conf->errors[i];
		if (!all && e->mirror != m)
			continue;
		if (m != NULL && !all)
			log_errx("%s: skipped, config error at %s: %s",
			    m->name, e->where, e->reason);
		else
			log_errx("%s: %s", e->where, e->reason);
		/* A list of several mirrors' errors says whose each is. */
		if (result_add_mirror_error(r, m == NULL && e->mirror != NULL ?
		    e->mirror->name : NULL, e->where, "config",
		    e->reason) != 0) {
			result_free(r);
			return NULL;
		}
	}
	return r;
}

/* Print results[0..n) as the --json array (once per command). */
static void
json_results(struct cli *c, struct mirror_result *const *results, size_t n)
{
	if (!c->json || c->json_done)
		return;
	(void)report_json(results, n, stdout);
	c->json_done = true;
}

/*
 * An error of mirror name (NULL: of none) for --json: one object
 * {mirror, status "error", errors [{path, op, reason}]} appended to arr,
 * or with arr NULL printed as the command's array.  Not logged here.
 */
static void
json_error(struct cli *c, json_t *arr, const char *name, const char *path,
    const char *op, const char *reason)
{
	struct mirror_result	*r;

	if (!c->json || (r = result_new(name)) == NULL)
		return;
	r->status = "error";
	r->exit_code = 2;
	if (result_add_error(r, path, op, reason) == 0) {
		if (arr != NULL)
			(void)json_array_append_new(arr,
			    report_result_json(r));
		else
			json_results(c, &r, 1);
	}
	result_free(r);
}

/*
 * Mirror name is neither configured nor has a manifest: logged, and an
 * error object (op usage) for --json (arr as json_error()).  Returns 2.
 */
static int
no_such_mirror(struct cli *c, json_t *arr, const char *name)
{
	char	 why[PATH_MAX + 256];

	if (c->conf->path != NULL)
		(void)snprintf(why, sizeof(why), "no such mirror (not in %s, "
		    "and no manifest in %s/manifests)", c->conf->path,
		    c->state_dir);
	else
		(void)snprintf(why, sizeof(why), "no such mirror (no config "
		    "file was read, and no manifest in %s/manifests)",
		    c->state_dir);
	log_errx("%s: %s", name, why);
	json_error(c, arr, name, "", "usage", why);
	return 2;
}

/*
 * Load the config (optional unless required: without -c a missing
 * default file is no config).  A mirror's errors make only it unusable
 * (the commands check m->bad); an unreadable file or an error outside
 * the mirror sections is fatal: every error is logged, --json gets the
 * one error object, and 2 is returned.
 */
static int
load_config(struct cli *c, bool required)
{
	char			 err[1024], open_why[1100];
	const char		*path = c->config_path ? c->config_path :
				    DEFAULT_CONFIG, *why;
	struct mirror_result	*r = NULL;
	struct stat		 st;
	size_t			 n = strlen(path);
	int			 rc;

	if (c->conf != NULL)
		return c->conf->fatal ? 2 : 0;
	if (!required && c->config_path == NULL && stat(path, &st) == -1) {
		if ((c->conf = config_new()) == NULL)
			return 2;
		return 0;
	}
	err[0] = '\0';
	if ((rc = config_load_all(path, &c->conf, err, sizeof(err))) != 0) {
		why = err[0] ? err : bm_strerror(rc);
		/* "FILE: reason": the path goes in its own field. */
		if (strncmp(why, path, n) == 0 && strncmp(why + n, ": ", 2) == 0)
			why += n + 2;
		if (rc == BM_ENOENT) {
			(void)snprintf(open_why, sizeof(open_why), "cannot open "
			    "config file: %s", why);
			why = open_why;
		}
		log_errx("%s: %s", path, why);
		if ((r = result_new(NULL)) != NULL) {
			r->status = "error";
			if (result_add_error(r, path, "config", why) == 0)
				json_results(c, &r, 1);
		}
		result_free(r);
		return 2;
	}
	if (c->conf->fatal) {
		if ((r = config_errors(c, NULL, true)) != NULL)
			json_results(c, &r, 1);
		result_free(r);
		return 2;
	}
	return 0;
}

static int
resolve_state_dir(struct cli *c)
{
	const char	*d = c->state_dir_opt;

	if (d == NULL && c->conf != NULL)
		d = c->conf->state_dir;
	if (d != NULL) {
		if ((size_t)snprintf(c->state_dir, sizeof(c->state_dir), "%s",
		    d) >= sizeof(c->state_dir))
			return 2;
		return 0;
	}
	if (state_default_dir(c->state_dir, sizeof(c->state_dir)) != 0) {
		log_errx("no state directory: set --state-dir or HOME");
		return 2;
	}
	return 0;
}

/* Per-run override options: option name = config key. */
static const struct option sync_longopts[] = {
	{ "source",		required_argument, NULL, 's' },
	{ "dest",		required_argument, NULL, 'd' },
	{ "dry-run",		no_argument,	   NULL, 'N' },
	{ "delete",		no_argument,	   NULL, 'D' },
	{ "no-delete",		no_argument,	   NULL, 'n' },
	{ "ftp-active",		no_argument,	   NULL, 'D' },
	{ "no-ftp-active",	no_argument,	   NULL, 'n' },
	{ "follow-symlinks",	no_argument,	   NULL, 'D' },
	{ "no-follow-symlinks",	no_argument,	   NULL, 'n' },
	{ "no-hook",		no_argument,	   NULL, 'H' },
	{ "name",		required_argument, NULL, 'm' },
	{ "progress",		no_argument,	   NULL, 'P' },
	{ "no-progress",	no_argument,	   NULL, 'Q' },
	{ "concurrency",	required_argument, NULL, 'o' },
	{ "streams",		required_argument, NULL, 'o' },
	{ "min-split",		required_argument, NULL, 'o' },
	{ "max-connections",	required_argument, NULL, 'o' },
	{ "transport",		required_argument, NULL, 'o' },
	{ "include",		required_argument, NULL, 'o' },
	{ "exclude",		required_argument, NULL, 'o' },
	{ "max-delete",		required_argument, NULL, 'o' },
	{ "bwlimit",		required_argument, NULL, 'o' },
	{ "retries",		required_argument, NULL, 'o' },
	{ "timeout",		required_argument, NULL, 'o' },
	{ "stall-timeout",	required_argument, NULL, 'o' },
	{ "verify",		required_argument, NULL, 'o' },
	{ "listing-timezone",	required_argument, NULL, 'o' },
	{ "ftp-timezone",	required_argument, NULL, 'o' },
	{ "ca-file",		required_argument, NULL, 'o' },
	{ "ftp-mode",		required_argument, NULL, 'o' },
	{ "tcp-congestion",	required_argument, NULL, 'o' },
	{ "udt-buffer",		required_argument, NULL, 'o' },
	{ "max-entries",	required_argument, NULL, 'o' },
	{ "checksum",		no_argument,	   NULL, 'C' },
	{ "adopt",		no_argument,	   NULL, 'A' },
	{ "allow-empty",	no_argument,	   NULL, 'E' },
	{ "help",		no_argument,	   NULL, 'h' },
	{ NULL, 0, NULL, 0 }
};

/* One override as a (key, value) pair, kept until mirrors are known. */
struct override {
	char		 key[32];	/* config key ("max_delete") */
	const char	*option;	/* static: option name ("max-delete") */
	const char	*value;		/* borrowed from argv */
};

struct sync_args {
	const char	*source, *dest;	/* borrowed: ad-hoc pair */
	bool		 dry_run;
	int		 progress;	/* 1 --progress, -1 --no-progress, 0 default */
	bool		 checksum;	/* resync --checksum */
	bool		 adopt;		/* resync --adopt */
	bool		 allow_empty;	/* --allow-empty */
	bool		 no_hook;	/* --no-hook: post_sync not run */
	const char	*name;		/* borrowed: --name of an ad-hoc mirror */
	const char	*label;		/* borrowed: name, else the recorded one */
	const char	*command;	/* static: "sync", "plan" or "resync" */
	struct override	*ov;		/* owned */
	size_t		 nov;
	char		**names;	/* borrowed: mirror names */
	int		 nnames;
};

static int
parse_sync_args(int argc, char **argv, struct sync_args *a)
{
	int		 ch, idx = 0;
	size_t		 i;

	optind = 0;	/* 0: GNU getopt starts over (and permutes) */
	opterr = 0;	/* said below, once, so that --json carries it */
	/* Options may follow the mirror names (getopt permutes). */
	while ((ch = getopt_long(argc, argv, ":h", sync_longopts,
	    &idx)) != -1) {
		switch (ch) {
		case 's':
			a->source = optarg;
			break;
		case 'd':
			a->dest = optarg;
			break;
		case 'N':
			a->dry_run = true;
			break;
		case 'P':
			a->progress = 1;
			break;
		case 'Q':
			a->progress = -1;
			break;
		case 'C':
			a->checksum = true;
			break;
		case 'A':
			a->adopt = true;
			break;
		case 'E':
			a->allow_empty = true;
			break;
		case 'H':
			a->no_hook = true;
			break;
		case 'm':
			a->name = optarg;
			break;
		case 'D':
		case 'n':
		case 'o':
			a->ov = reallocarray(a->ov, a->nov + 1, sizeof(*a->ov));
			if (a->ov == NULL)
				return 2;
			/* --no-KEY: KEY = no */
			(void)snprintf(a->ov[a->nov].key,
			    sizeof(a->ov[a->nov].key), "%s",
			    sync_longopts[idx].name + (ch == 'n' ? 3 : 0));
			for (i = 0; a->ov[a->nov].key[i]; i++)
				if (a->ov[a->nov].key[i] == '-')
					a->ov[a->nov].key[i] = '_';
			a->ov[a->nov].option = sync_longopts[idx].name;
			a->ov[a->nov].value = ch == 'D' ? "yes" : ch == 'n' ?
			    "no" : optarg;
			a->nov++;
			break;
		case 'h':
			usage(stdout);
			return -1;
		case ':':
			log_errx("%s: option %s needs a value (try --help)",
			    argv[0], argv[optind - 1]);
			return 2;
		default:
			/* optopt is the option's val (an internal code) */
			if (strncmp(argv[optind - 1], "--", 2) == 0 &&
			    optopt != 0 && strchr(argv[optind - 1], '=') != NULL)
				log_errx("%s: %s: takes no value (try --help)",
				    argv[0], argv[optind - 1]);
			else if (strncmp(argv[optind - 1], "--", 2) == 0 ||
			    optopt == 0)
				log_errx("%s: unknown option %s (try --help)",
				    argv[0], argv[optind - 1]);
			else
				log_errx("%s: unknown option -%c (try --help)",
				    argv[0], optopt);
			return 2;
		}
		idx = 0;
	}
	a->names = argv + optind;
	a->nnames = argc - optind;
	return 0;
}

/*
 * Apply the command-line overrides to m.  --include and --exclude
 * replace the config's list (the first of them empties it), as every
 * other option replaces its key.
 */
static int
apply_overrides(struct mirror_conf *m, const struct sync_args *a)
{
	char	 err[512];
	bool	 inc = false, exc = false;
	size_t	 i;

	for (i = 0; i < a->nov; i++) {
		if (strcmp(a->ov[i].key, "include") == 0 && !inc) {
			(void)mirror_conf_clear(m, "include");
			inc = true;
		} else if (strcmp(a->ov[i].key, "exclude") == 0 && !exc) {
			(void)mirror_conf_clear(m, "exclude");
			exc = true;
		}
		err[0] = '\0';
		if (mirror_conf_set(m, a->ov[i].key, a->ov[i].value, err,
		    sizeof(err)) != 0) {
			log_errx("--%s %s: %s", a->ov[i].option,
			    a->ov[i].value, err);
			return 2;
		}
	}
	if (a->no_hook)
		(void)mirror_conf_clear(m, "post_sync");
	return 0;
}

/*
 * Run ms[0..n) in turn (keys: their manifest names).  A bad mirror (an
 * error in its section) is not run: its errors come after the runs of
 * the others, and with all (a sync of every mirror) so do the errors in
 * no mirror's section.  Prints the summaries or the --json array.
 */
static int
run_mirrors(struct cli *c, struct mirror_conf **ms, const char **keys,
    size_t n, const struct sync_args *a, bool progress, bool all)
{
	bool		 dry_run = a->dry_run;
	struct mirror_result **results;
	struct sync_opts so;
	size_t		 i, k = 0;
	int		 status = 0;

	if ((results = calloc(n + 1, sizeof(*results))) == NULL)
		return 2;
	for (i = 0; i < n; i++) {
		if (ms[i]->bad)
			continue;
		memset(&so, 0, sizeof(so));
		so.state_dir = c->state_dir;
		so.key = keys[i];
		so.label = a->source != NULL ? a->label : NULL;
		so.config_file = a->source != NULL ? NULL : c->conf->path;
		so.user_agent = c->conf->user_agent ? c->conf->user_agent :
		    "biomirror/" BM_VERSION;
		so.dry_run = dry_run;
		so.progress = progress;
		/* -q: resync's findings are no error (a plan's are asked for) */
		so.plan_out = c->json || (c->verbosity < 0 && !dry_run) ?
		    NULL : stdout;
		so.stop = c->stop;
		so.command = a->command;
		so.checksum = a->checksum;
		so.adopt = a->adopt;
		so.allow_empty = a->allow_empty;
		so.actions = c->json && dry_run;
		so.conf = c->conf;
		if (*c->stop)
			break;
		if (sync_mirror(&so, ms[i], &results[k]) != 0) {
			log_errx("%s: out of memory", ms[i]->name);
			status = 2;
			break;
		}
		/* -q: nothing but errors (cron mails nothing on success). */
		if (!c->json && (c->verbosity >= 0 ||
		    results[k]->exit_code != 0))
			report_summary(results[k], stdout);
		if (exit_rank(results[k]->exit_code) > exit_rank(status))
			status = results[k]->exit_code;
		k++;
	}
	/* The bad ones last: the others ran first. */
	for (i = 0; i < n; i++) {
		if (!ms[i]->bad)
			continue;
		status = 2;
		if ((results[k] = config_errors(c, ms[i], false)) != NULL)
			k++;
	}
	for (i = 0; all && i < c->conf->nerrors; i++)
		if (c->conf->errors[i].mirror == NULL) {
			status = 2;
			if ((results[k] = config_errors(c, NULL, false)) !=
			    NULL)
				k++;
			break;
		}
	json_results(c, results, k);
	(void)fflush(stdout);
	for (i = 0; i < k; i++)
		result_free(results[i]);
	free(results);
	return status;
}

/*
 * An ad-hoc mirror's record beside its manifest, STATE/manifests/KEY.adhoc
 * (JSON: name, source, dest), so that status and history can show what
 * the key stands for.  Written into path (PATH_MAX bytes); 0 or 2.
 */
static int
adhoc_info_path(struct cli *c, const char *key, char *path)
{
	if ((size_t)snprintf(path, PATH_MAX, "%s/manifests/%s.adhoc",
	    c->state_dir, key) >= PATH_MAX)
		return 2;
	return 0;
}

/* The record of ad-hoc mirror key (a new reference), NULL if none. */
static json_t *
adhoc_info_read(struct cli *c, const char *key)
{
	char	 path[PATH_MAX];
	json_t	*o;

	if (strncmp(key, "adhoc-", 6) != 0 || adhoc_info_path(c, key, path))
		return NULL;
	if ((o = json_load_file(path, 0, NULL)) != NULL && !json_is_object(o)) {
		json_decref(o);
		o = NULL;
	}
	return o;
}

/* String field f of record o, or dflt. */
static const char *
adhoc_field(const json_t *o, const char *f, const char *dflt)
{
	const char	*v = json_string_value(json_object_get(o, f));

	return v != NULL ? v : dflt;
}

/*
 * The key of the ad-hoc mirror labelled name (--name) into key (keylen
 * bytes).  Returns true when one has it.
 */
static bool
adhoc_find_name(struct cli *c, const char *name, char *key, size_t keylen)
{
	char		 dir[PATH_MAX];
	struct dirent	*de;
	DIR		*d;
	json_t		*o;
	size_t		 len;
	bool		 found = false;

	if ((size_t)snprintf(dir, sizeof(dir), "%s/manifests", c->state_dir) >=
	    sizeof(dir) || (d = opendir(dir)) == NULL)
		return false;
	while (!found && (de = readdir(d)) != NULL) {
		len = strlen(de->d_name);
		if (strncmp(de->d_name, "adhoc-", 6) != 0 || len < 7 ||
		    strcmp(de->d_name + len - 6, ".adhoc") != 0 ||
		    len - 6 >= keylen)
			continue;
		memcpy(key, de->d_name, len - 6);
		key[len - 6] = '\0';
		if ((o = adhoc_info_read(c, key)) == NULL)
			continue;
		found = strcmp(adhoc_field(o, "name", ""), name) == 0;
		json_decref(o);
	}
	(void)closedir(d);
	return found;
}

/*
 * Record ad-hoc mirror key's source, dest and name (NULL: keep the one
 * recorded, if any), once its manifest exists.  Failures only warn.
 */
static void
adhoc_info_write(struct cli *c, const char *key, const char *source,
    const char *dest, const char *name)
{
	char		 path[PATH_MAX], tmp[PATH_MAX + 8];
	struct stat	 st;
	json_t		*old = NULL, *o = NULL;

	if (adhoc_info_path(c, key, path) != 0 ||
	    state_manifest_path(c->state_dir, key, tmp, sizeof(tmp)) != 0 ||
	    stat(tmp, &st) != 0)
		return;
	if ((old = adhoc_info_read(c, key)) != NULL && name == NULL)
		name = adhoc_field(old, "name", NULL);
	if (old != NULL && strcmp(adhoc_field(old, "source", source),
	    source) != 0)
		log_info("%s: %s: its source was %s, now %s", key, dest,
		    adhoc_field(old, "source", ""), source);
	o = json_pack("{s:s,s:s}", "source", source, "dest", dest);
	if (o != NULL && name != NULL)
		(void)json_object_set_new(o, "name", json_string(name));
	/* Every run of it: rewritten only when it says something new. */
	if (o != NULL && old != NULL && json_equal(o, old)) {
		json_decref(o);
		json_decref(old);
		return;
	}
	(void)snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	if (o == NULL || json_dump_file(o, tmp, JSON_SORT_KEYS) != 0 ||
	    rename(tmp, path) != 0) {
		log_warn("%s: cannot record its source and dest in %s", key,
		    path);
		(void)unlink(tmp);
	}
	json_decref(o);
	json_decref(old);
}

/*
 * A --name for an ad-hoc mirror (key): a section name's characters, not
 * a configured mirror's name nor another ad-hoc mirror's.  0 or 2 after
 * logging why.
 */
static int
adhoc_check_name(struct cli *c, const char *cmd, const char *name,
    const char *key)
{
	char	 other[256];
	size_t	 i, n = strlen(name);
	bool	 ok = n > 0 && n <= 64 && (name[0] != '.' && name[0] != '-' &&
		    name[0] != '_');

	for (i = 0; ok && i < n; i++)
		ok = (name[i] >= 'a' && name[i] <= 'z') || (name[i] >= 'A' &&
		    name[i] <= 'Z') || (name[i] >= '0' && name[i] <= '9') ||
		    name[i] == '.' || name[i] == '_' || name[i] == '-';
	if (!ok || strncmp(name, "adhoc-", 6) == 0) {
		log_errx("%s: --name %s: expected 1 to 64 letters, digits, "
		    "'.', '_' or '-', starting with a letter or digit (and not "
		    "adhoc-)", cmd, name);
		return 2;
	}
	if (config_find(c->conf, name) != NULL) {
		log_errx("%s: --name %s: a mirror in %s has that name", cmd,
		    name, c->conf->path ? c->conf->path : DEFAULT_CONFIG);
		return 2;
	}
	if (adhoc_find_name(c, name, other, sizeof(other)) &&
	    strcmp(other, key) != 0) {
		log_errx("%s: --name %s: the ad-hoc mirror %s has that name",
		    cmd, name, other);
		return 2;
	}
	return 0;
}

/*
 * name as the user gave it (a mirror, an ad-hoc key, or an ad-hoc
 * mirror's --name) to the name its manifest goes by, in key (keylen).
 */
static const char *
resolve_name(struct cli *c, const char *name, char *key, size_t keylen)
{
	if (config_find(c->conf, name) != NULL ||
	    strncmp(name, "adhoc-", 6) == 0 ||
	    !adhoc_find_name(c, name, key, keylen))
		return name;
	return key;
}

/*
 * The mirror of an ad-hoc --source/--dest pair for command cmd ("sync",
 * "plan", "resync", "verify"): its destination checked against the
 * configured ones, its name the key of the destination (written into
 * key, keylen bytes).  NULL after logging why (a usage error: exit 2).
 */
static struct mirror_conf *
adhoc_mirror(struct cli *c, const char *cmd, const char *source,
    const char *dest, char *key, size_t keylen)
{
	struct mirror_conf *m;
	char		 err[512], abs[PATH_MAX];
	unsigned	 line = 0;

	err[0] = '\0';
	if (config_check_adhoc_dest(c->conf, dest, err, sizeof(err)) != 0) {
		log_errx("%s: %s", cmd, err[0] ? err : "out of memory");
		return NULL;
	}
	/* The path the key is made from, whatever the working directory. */
	if (state_abs_path(dest, abs, sizeof(abs)) != 0 ||
	    state_adhoc_key(abs, key, keylen) != 0) {
		log_errx("%s: cannot make an ad-hoc key", dest);
		return NULL;
	}
	dest = abs;
	/* The key names the run too, so two ad-hoc mirrors differ. */
	if ((m = mirror_conf_new(key)) == NULL)
		return NULL;
	err[0] = '\0';
	if (mirror_conf_set(m, "source", source, err, sizeof(err)) != 0 ||
	    mirror_conf_set(m, "dest", dest, err, sizeof(err)) != 0) {
		log_errx("%s: %s", cmd, err);
		mirror_conf_free(m);
		return NULL;
	}
	/* The config's [global] defaults, as a configured mirror's. */
	if (config_apply_defaults(c->conf, m, err, sizeof(err), &line) != 0) {
		log_errx("%s: %s:%u: %s", cmd, c->conf->path ? c->conf->path :
		    DEFAULT_CONFIG, line, err);
		mirror_conf_free(m);
		return NULL;
	}
	return m;
}

static int
cmd_sync(struct cli *c, int argc, char **argv, const char *cmd)
{
	bool		 plan = strcmp(cmd, "plan") == 0;
	struct sync_args a;
	struct mirror_conf **ms = NULL, *adhoc = NULL;
	json_t		*info = NULL;	/* the ad-hoc record: a.label */
	const char	**keys = NULL;
	char		 key[64], err[512];
	size_t		 i, j, n = 0;
	int		 status = 2, rc;

	memset(&a, 0, sizeof(a));
	if ((rc = parse_sync_args(argc, argv, &a)) != 0) {
		status = rc < 0 ? 0 : rc;
		goto out;
	}
	if (plan)
		a.dry_run = true;
	a.command = cmd;
	if ((a.checksum || a.adopt) && strcmp(cmd, "resync") != 0) {
		log_errx("%s: --checksum and --adopt are options of resync",
		    cmd);
		goto out;
	}
	if (strcmp(cmd, "resync") == 0 && (a.source != NULL ? a.nnames != 0 :
	    a.nnames != 1)) {
		log_errx("usage: biomirror resync NAME|--source URL --dest DIR "
		    "[--checksum] [--adopt] [--dry-run]");
		goto out;
	}
	if ((a.source != NULL) != (a.dest != NULL)) {
		log_errx("%s: --source and --dest go together", cmd);
		goto out;
	}
	if (a.name != NULL && a.source == NULL) {
		log_errx("%s: --name labels an ad-hoc mirror (--source, --dest)",
		    cmd);
		goto out;
	}
	if ((status = load_config(c, a.source == NULL)) != 0 ||
	    (status = resolve_state_dir(c)) != 0)
		goto out;
	status = 2;
	if (a.source != NULL) {
		if (a.nnames > 0) {
			log_errx("sync: mirror names and --source exclude "
			    "each other");
			goto out;
		}
		if ((adhoc = adhoc_mirror(c, cmd, a.source, a.dest, key,
		    sizeof(key))) == NULL)
			goto out;
		if (a.name != NULL && adhoc_check_name(c, cmd, a.name, key))
			goto out;
		if ((a.label = a.name) == NULL &&
		    (info = adhoc_info_read(c, key)) != NULL)
			a.label = adhoc_field(info, "name", NULL);
		n = 1;
		ms = calloc(1, sizeof(*ms));
		keys = calloc(1, sizeof(*keys));
		if (ms == NULL || keys == NULL)
			goto out;
		ms[0] = adhoc;
		keys[0] = key;
	} else {
		n = a.nnames > 0 ? (size_t)a.nnames : c->conf->nmirrors;
		if (n == 0) {
			log_errx("%s: no mirrors configured: nothing to %s "
			    "(add a [NAME] section with source and dest: "
			    "biomirror.conf(5))", c->conf->path ?
			    c->conf->path : DEFAULT_CONFIG, cmd);
			goto out;
		}
		ms = calloc(n, sizeof(*ms));
		keys = calloc(n, sizeof(*keys));
		if (ms == NULL || keys == NULL)
			goto out;
		for (i = 0; i < n; i++) {
			ms[i] = a.nnames > 0 ? config_find(c->conf,
			    a.names[i]) : c->conf->mirrors[i];
			if (ms[i] == NULL) {
				log_errx("%s: no such mirror in %s",
				    a.names[i], c->conf->path);
				goto out;
			}
			keys[i] = ms[i]->name;
			for (j = 0; j < i; j++)
				if (ms[j] == ms[i]) {
					log_errx("%s: named twice", keys[i]);
					goto out;
				}
		}
	}
	for (i = 0; i < n; i++) {
		if (ms[i]->bad)
			continue;	/* not run: run_mirrors() says why */
		if (apply_overrides(ms[i], &a) != 0)
			goto out;
		err[0] = '\0';
		if (mirror_conf_check(ms[i], err, sizeof(err)) != 0) {
			log_errx("%s: %s", ms[i]->name, err);
			goto out;
		}
	}
	/* The line shows on a terminal only; -q or --no-progress hide it. */
	status = run_mirrors(c, ms, keys, n, &a, a.progress > 0 ||
	    (a.progress == 0 && c->verbosity >= 0), a.source == NULL &&
	    a.nnames == 0);
	if (adhoc != NULL)
		adhoc_info_write(c, key, adhoc->source, adhoc->dest, a.name);
out:
	json_decref(info);
	mirror_conf_free(adhoc);
	free(ms);
	free(keys);
	free(a.ov);
	return status;
}

/* A recorded time (ns; 0 or less: none) for display, "-" for none. */
static void
fmt_time(int64_t ns, char *buf, size_t len)
{
	clock_fmt_utc(ns > 0 ? ns / NS : -1, buf, len);
}

/*
 * The "transports" object of run r: {"udt": {files, bytes, seconds, rate
 * (bytes/s, null when no time was measured)}}.  NULL on out-of-memory.
 */
static json_t *
run_nets_json(const struct run_record *r)
{
	const struct run_net *n;
	json_t	*o, *t;
	size_t	 i;

	if ((o = json_object()) == NULL)
		return NULL;
	for (i = 0; i < r->nnets; i++) {
		n = &r->nets[i];
		t = json_pack("{s:I,s:I,s:f,s:o}", "files",
		    (json_int_t)n->files, "bytes", (json_int_t)n->bytes,
		    "seconds", (double)(n->ns / 1000000) / 1000, "rate",
		    n->ns > 0 ? json_integer((json_int_t)((double)n->bytes *
		    1e9 / (double)n->ns)) : json_null());
		if (t == NULL || json_object_set_new(o, n->net, t) != 0) {
			json_decref(o);
			return NULL;
		}
	}
	return o;
}

/* "; udt 7 files at 55.1 MB/s, tcp 1 file at 95.0 KB/s" for run r. */
static void
fmt_nets(const struct run_record *r, char *buf, size_t len)
{
	const struct run_net *n;
	char	 rt[32];
	size_t	 i, o = 0;
	int	 w;

	buf[0] = '\0';
	for (i = 0; i < r->nnets; i++) {
		n = &r->nets[i];
		report_rate(n->bytes > 0 ? (uint64_t)n->bytes : 0,
		    (double)n->ns / 1e9, rt, sizeof(rt));
		w = snprintf(buf + o, len - o, "%s%s %lld file%s at %s",
		    i == 0 ? "; " : ", ", n->net, (long long)n->files,
		    n->files == 1 ? "" : "s", rt);
		if (w < 0 || (size_t)w >= len - o)
			return;
		o += (size_t)w;
	}
}

/* A recorded time as a JSON string, or null for none. */
static json_t *
time_json(int64_t ns)
{
	char	 t[32];

	if (ns <= 0)
		return json_null();
	fmt_time(ns, t, sizeof(t));
	return json_string(t);
}

/*
 * Run r as a JSON object (new reference, NULL on ENOMEM).  A run with no
 * recorded end (going on, or died unrecorded) has "end" and "seconds"
 * null, not a made-up time.
 */
static json_t *
run_json(const struct run_record *r)
{
	char	*err = NULL;
	json_t	*o;

	/* The error names a path, which need not be UTF-8. */
	if (text_utf8_escape(r->error, &err) != 0)
		return NULL;
	o = json_pack("{s:I,s:s,s:o,s:o,s:o,s:I,s:I,s:I,s:I,s:I,s:I,s:s}",
	    "run", (json_int_t)r->id, "status", r->status, "start",
	    time_json(r->start_ns), "end", time_json(r->end_ns), "seconds",
	    r->end_ns <= 0 ? json_null() : json_real(r->end_ns > r->start_ns ?
	    (double)((r->end_ns - r->start_ns) / 1000000) / 1000 : 0.0),
	    "listed", (json_int_t)r->listed, "fetched", (json_int_t)r->fetched,
	    "touched", (json_int_t)r->touched, "deleted",
	    (json_int_t)r->deleted, "failed", (json_int_t)r->failed,
	    "bytes", (json_int_t)r->bytes, "error", err);
	free(err);
	if (o != NULL && json_object_set_new(o, "transports",
	    run_nets_json(r)) != 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/*
 * A run recorded as "running" whose process is gone (kill -9, a crash, a
 * power cut: nothing recorded its end) is shown as "interrupted": only
 * the newest run can still be going on, and only while a process holds
 * the mirror's lock.  The next run of the mirror records the same in the
 * manifest (manifest_run_begin()).  The live holder's PID is returned
 * (0 if none or unknown).
 */
static long
fix_running(struct cli *c, const char *name, struct run_record *runs,
    size_t n)
{
	long	 holder = 0;
	size_t	 i;

	for (i = 0; i < n; i++) {
		if (strcmp(runs[i].status, "running") != 0)
			continue;
		if (i == 0 && state_lock_held(c->state_dir, name, &holder))
			continue;
		(void)snprintf(runs[i].status, sizeof(runs[i].status),
		    "interrupted");
		if (runs[i].error[0] == '\0')
			(void)snprintf(runs[i].error, sizeof(runs[i].error),
			    "the run ended without recording its end (killed, "
			    "or the machine stopped)");
	}
	return holder;
}

/*
 * How long ago (now, ns) run r ended, or started when no end is
 * recorded, in seconds (0 for a time ahead of the clock).
 */
static int64_t
run_age(const struct run_record *r, int64_t now)
{
	int64_t	 t = r->end_ns > 0 ? r->end_ns : r->start_ns;

	return now > t ? (now - t) / NS : 0;
}

/* An age in seconds, rounded down to two units: "45s", "12m05s", "3h00m", "2d04h". */
static void
fmt_age(int64_t s, char *buf, size_t len)
{
	long long	 v = s > 0 ? (long long)s : 0;

	if (v < 3600)
		report_duration((double)v, buf, len);
	else if (v < 86400)
		(void)snprintf(buf, len, "%lldh%02lldm", v / 3600, v % 3600 / 60);
	else
		(void)snprintf(buf, len, "%lldd%02lldh", v / 86400,
		    v % 86400 / 3600);
}

/*
 * The text of status NAME: the last recorded run with when it started
 * and how long ago it ended (a run that could not be recorded, as on a
 * full state disk, is not shown: the age says nothing ran since), then
 * the last success, when it ended and how long ago.
 */
static void
status_text(const char *name, const struct run_record *last,
    const struct run_record *ok, int64_t now)
{
	char	 ts[32], age[32], nets[160], d[32], hb[32], rt[32];
	double	 secs;

	if (last == NULL) {
		printf("%s: never run\n", name);
		return;
	}
	fmt_time(last->start_ns, ts, sizeof(ts));
	fmt_age(run_age(last, now), age, sizeof(age));
	if (last->end_ns <= 0) {
		/*
		 * No end recorded: running now (its time so far), or
		 * interrupted (no time, no counts: they are recorded at the
		 * end).
		 */
		if (strcmp(last->status, "running") == 0) {
			fmt_age(now > last->start_ns ? (now - last->start_ns) /
			    NS : 0, d, sizeof(d));
			printf("%s: last run %lld at %s: running for %s\n",
			    name, (long long)last->id, ts, d);
		} else
			printf("%s: last run %lld at %s (%s ago): %s%s%s\n",
			    name, (long long)last->id, ts, age, last->status,
			    last->error[0] ? "; " : "", last->error);
	} else {
		secs = last->end_ns > last->start_ns ?
		    (double)(last->end_ns - last->start_ns) / 1e9 : 0;
		report_rate(last->bytes > 0 ? (uint64_t)last->bytes : 0, secs,
		    rt, sizeof(rt));
		fmt_nets(last, nets, sizeof(nets));
		report_duration(secs, d, sizeof(d));
		report_human_bytes(last->bytes > 0 ? (uint64_t)last->bytes :
		    0, hb, sizeof(hb));
		printf("%s: last run %lld at %s (ended %s ago): %s in %s, "
		    "fetched %lld file%s (%s, %s%s), touched "
		    "%lld, deleted %lld, failed %lld%s%s\n", name,
		    (long long)last->id, ts, age, last->status, d,
		    (long long)last->fetched, last->fetched == 1 ? "" : "s",
		    hb, rt, nets, (long long)last->touched,
		    (long long)last->deleted, (long long)last->failed,
		    last->error[0] ? "; " : "", last->error);
	}
	if (ok == NULL) {
		printf("%s: no successful run yet\n", name);
		return;
	}
	fmt_time(ok->end_ns, ts, sizeof(ts));
	fmt_age(run_age(ok, now), age, sizeof(age));
	printf("%s: last success %s ago (run %lld, ended %s)\n", name, age,
	    (long long)ok->id, ts);
}

/*
 * With publish = set: the snapshot DEST points at (readlink(2) of the
 * configured dest, copied into buf of len bytes), or NULL when the mirror
 * is not in set mode or DEST is not (yet) a symlink.  *ret_dest gets the
 * dest (borrowed from the config) and *ret_missing whether the symlink
 * dangles (its snapshot is gone), both only when a snapshot is returned.
 */
static const char *
published_snapshot(struct cli *c, const char *name, char *buf, size_t len,
    const char **ret_dest, bool *ret_missing)
{
	const struct mirror_conf *m;
	struct stat	 st;
	ssize_t		 n;

	if (c->conf == NULL || (m = config_find(c->conf, name)) == NULL ||
	    m->publish != PUBLISH_SET || len == 0)
		return NULL;
	if ((n = readlink(m->dest, buf, len - 1)) <= 0)
		return NULL;
	buf[n] = '\0';
	*ret_dest = m->dest;
	*ret_missing = stat(m->dest, &st) == -1 || !S_ISDIR(st.st_mode);
	return buf;
}

/*
 * Mirror name's manifest could not be read (why: "PATH: reason"; fault
 * BM_ECORRUPT when it is damaged): log it once, a damaged one with the
 * command that rebuilds it, and keep the text in buf (len bytes; may be
 * why itself) for --json.
 */
static void
manifest_failed(struct cli *c, const char *name, int fault, const char *why,
    char *buf, size_t len)
{
	char	 w[PATH_MAX + 512], msg[PATH_MAX + 3072];

	(void)snprintf(w, sizeof(w), "%s", why);
	if (fault == BM_ECORRUPT) {
		sync_fault_msg(BM_ECORRUPT, w, c->conf, c->state_dir, name,
		    NULL, NULL, msg, sizeof(msg));
		log_errx("%s: %s", name, msg);
	} else {
		(void)snprintf(msg, sizeof(msg), "%s", w);
		log_errx("%s: %s", name, msg);
	}
	(void)snprintf(buf, len, "%s", msg);
}


/* Runs status reads: the newest, and those before it when it is going on. */
#define STATUS_RUNS	8

/*
 * The newest finished run of runs[0..n) (newest first; "running" and
 * "locked" are not finished), or NULL.
 */
static const struct run_record *
last_finished(const struct run_record *runs, size_t n)
{
	size_t	 i;

	for (i = 0; i < n; i++)
		if (strcmp(runs[i].status, "running") != 0 &&
		    strcmp(runs[i].status, "locked") != 0)
			return &runs[i];
	return NULL;
}

/*
 * status's verdict on one mirror: 1 when its last finished run fin (NULL:
 * none) is not ok, or with max_age >= 0 when the last success ok (NULL:
 * none) ended more than max_age seconds before now (ns); else 0.  Why
 * ("NAME: ...") goes into why (len bytes), "" for 0; the caller logs it.
 */
static int
status_verdict(const char *name, const struct run_record *fin,
    const struct run_record *ok, int64_t now, int64_t max_age, char *why,
    size_t len)
{
	int64_t	 age;
	char	 a[32], m[32];

	why[0] = '\0';
	if (fin != NULL && strcmp(fin->status, "ok") != 0) {
		(void)snprintf(why, len, "%s: the last finished run (%lld) is "
		    "%s", name, (long long)fin->id, fin->status);
		return 1;
	}
	if (max_age < 0)
		return 0;
	report_duration((double)max_age, m, sizeof(m));
	if (ok == NULL) {
		(void)snprintf(why, len, "%s: no successful run (--max-age "
		    "%s)", name, m);
		return 1;
	}
	if ((age = (now - ok->end_ns) / NS) > max_age) {
		report_duration((double)age, a, sizeof(a));
		(void)snprintf(why, len, "%s: last success %s ago (run "
		    "%lld), more than --max-age %s", name, a,
		    (long long)ok->id, m);
		return 1;
	}
	return 0;
}

/* What status_zone() prints for. */
struct status_zones {
	const char	*name;		/* borrowed: the mirror */
	json_t		*arr;		/* borrowed: --json's "zones", or NULL */
};

/* manifest_zone_fn: one learnt or checked zone, as text or JSON. */
static int
status_zone(void *ctx, const struct zone_rec *z)
{
	struct status_zones *sz = ctx;
	char		 off[32], learnt[32], checked[32];

	zone_fmt_offset(z->offset, off, sizeof(off));
	clock_fmt_utc(z->learnt_ns / NS, learnt, sizeof(learnt));
	clock_fmt_utc(z->checked_ns / NS, checked, sizeof(checked));
	if (sz->arr != NULL)
		(void)json_array_append_new(sz->arr, json_pack(
		    "{s:s,s:i,s:b,s:s,s:s}", "host", z->host, "offset_seconds",
		    (json_int_t)z->offset, "mdtm_local", z->mdtm_local,
		    "learnt", learnt, "checked", checked));
	else
		printf("%s: zone: %s %s%s (learnt %s, checked %s)\n", sz->name,
		    z->host, off, z->mdtm_local ? ", MDTM in local time" : "",
		    learnt, checked);
	return 0;
}

/*
 * status of mirror name: the text, or with arr (--json) one object
 * appended to it, then the verdict (status_verdict) logged.  Returns 0,
 * 1 or 2 (the manifest cannot be read).
 */
static int
status_one(struct cli *c, const char *name, json_t *arr,
    int64_t max_age)
{
	char		 path[PATH_MAX], snap[PATH_MAX];
	char		 err[PATH_MAX + 3072], why[512];
	char		*esc;
	const char	*published, *dest = NULL, *reason = NULL;
	const struct run_record *fin = NULL;
	struct manifest	*m = NULL;
	struct run_record *runs = NULL, ok;
	size_t		 nruns = 0;
	bool		 have_ok = false, published_missing = false;
	struct timespec	 now;
	int64_t		 now_ns;
	json_t		*o, *rj, *info;
	long		 holder = 0;
	struct status_zones zs = { name, NULL };
	int		 rc, status = 0;

	(void)clock_gettime(CLOCK_REALTIME, &now);
	now_ns = (int64_t)now.tv_sec * NS + now.tv_nsec;
	if (state_manifest_path(c->state_dir, name, path, sizeof(path)) != 0)
		return 2;
	info = adhoc_info_read(c, name);
	err[0] = '\0';
	rc = manifest_open_read(path, &m, err, sizeof(err));
	if (rc == 0 && manifest_warning(m)[0] != '\0')
		log_warnx("%s: %s", name, manifest_warning(m));
	if (rc == 0) {
		if (manifest_runs(m, STATUS_RUNS, &runs, &nruns) != 0 ||
		    (rc = manifest_last_success(m, &ok)) == BM_EDB) {
			manifest_failed(c, name, manifest_fault(m),
			    manifest_errmsg(m), err, sizeof(err));
			status = 2;
		} else
			holder = fix_running(c, name, runs, nruns);
		have_ok = status == 0 && rc == 0;
	} else if (rc != BM_ENOENT) {
		manifest_failed(c, name, rc, err, err, sizeof(err));
		status = 2;
	}
	/*
	 * The lock is held past the run's recorded end (the post_sync hook,
	 * the metrics file) and before its begin: running all the same.
	 */
	if (holder == 0)
		(void)state_lock_held(c->state_dir, name, &holder);
	published = published_snapshot(c, name, snap, sizeof(snap), &dest,
	    &published_missing);
	why[0] = '\0';
	if (status == 0) {
		fin = last_finished(runs, nruns);
		status = status_verdict(name, fin, have_ok ? &ok : NULL, now_ns,
		    max_age, why, sizeof(why));
		reason = why[0] != '\0' ? why : NULL;
	} else
		reason = err;
	if (arr != NULL) {
		/*
		 * exit and reason: this mirror's part of the exit status and
		 * why it is not 0; last_finished_run: the run that verdict
		 * is on (the newest one may be going on).
		 */
		rj = json_null();
		if (reason != NULL && text_utf8_escape(reason, &esc) == 0) {
			rj = json_string(esc);
			free(esc);
		}
		o = json_pack("{s:s,s:o,s:o,s:o,s:i,s:o,s:b,s:b}", "mirror",
		    name, "last_run", nruns ? run_json(&runs[0]) : json_null(),
		    "last_finished_run", fin != NULL ? run_json(fin) :
		    json_null(),
		    "last_success", have_ok ? run_json(&ok) : json_null(),
		    "exit", status, "reason", rj, "state_dir_full",
		    c->state_full, "state_dir_read_only", c->state_ro);
		if (o != NULL && holder > 0)
			(void)json_object_set_new(o, "pid",
			    json_integer((json_int_t)holder));
		/* An ad-hoc mirror: its name (--name), source and dest. */
		if (o != NULL && info != NULL)
			(void)json_object_update(o, info);
		/* The manifest could not be read: not a mirror never run. */
		if (o != NULL && status == 2 &&
		    text_utf8_escape(err, &esc) == 0) {
			(void)json_object_set_new(o, "error",
			    json_string(esc));
			free(esc);
		}
		if (o != NULL && published != NULL)
			(void)json_object_set_new(o, "published",
			    json_string(published));
		if (o != NULL && published != NULL)
			(void)json_object_set_new(o, "published_missing",
			    json_boolean(published_missing));
		if (o != NULL && have_ok)
			(void)json_object_set_new(o, "last_success_age_seconds",
			    json_integer((json_int_t)((now_ns - ok.end_ns) /
			    NS)));
		/* Since the last recorded run ended (or began: no end). */
		if (o != NULL && nruns > 0)
			(void)json_object_set_new(o, "last_run_age_seconds",
			    json_integer((json_int_t)run_age(&runs[0],
			    now_ns)));
		/* The zones runs learnt or checked (ftp_timezone, auto). */
		if (o != NULL && m != NULL && status != 2 &&
		    (zs.arr = json_array()) != NULL) {
			(void)manifest_zones(m, status_zone, &zs);
			(void)json_object_set_new(o, "zones", zs.arr);
		}
		if (o != NULL)
			(void)json_array_append_new(arr, o);
	} else if (status != 2) {
		if (info != NULL)
			printf("%s: ad-hoc mirror%s%s: %s -> %s\n", name,
			    json_object_get(info, "name") ? " " : "",
			    adhoc_field(info, "name", ""),
			    adhoc_field(info, "source", "?"),
			    adhoc_field(info, "dest", "?"));
		status_text(name, nruns ? &runs[0] : NULL, have_ok ? &ok : NULL,
		    now_ns);
		if (holder > 0 && nruns > 0 &&
		    strcmp(runs[0].status, "running") != 0)
			printf("%s: running now (pid %ld): run %lld has ended, "
			    "its post_sync hook or a new run is going on\n",
			    name, holder, (long long)runs[0].id);
		else if (holder > 0)
			printf("%s: running now (pid %ld)\n", name, holder);
		if (published != NULL && !published_missing)
			printf("%s: published snapshot %s\n", name, published);
		else if (published != NULL)
			printf("%s: published snapshot %s is missing (%s "
			    "points at nothing)\n", name, published, dest);
		if (m != NULL)
			(void)manifest_zones(m, status_zone, &zs);
	}
	if (why[0] != '\0')
		log_warnx("%s", why);
	json_decref(info);
	free(runs);
	manifest_close(m);
	return status;
}

/*
 * A mirror name that status and ls accept: configured, or with a
 * manifest in the state directory (ad-hoc mirrors: "adhoc-...").
 */
static bool
known_mirror(struct cli *c, const char *name)
{
	char		 path[PATH_MAX];
	struct stat	 st;

	if (config_find(c->conf, name) != NULL)
		return true;
	if (strchr(name, '/') != NULL || name[0] == '.' ||
	    state_manifest_path(c->state_dir, name, path, sizeof(path)) != 0)
		return false;
	return stat(path, &st) == 0;
}

/*
 * status of every manifest in the state directory that no configured
 * mirror claims: ad-hoc mirrors, and mirrors of a config file not read
 * this time (the demo's, with --state-dir only).  *ret_n counts them.
 */
static int
status_unclaimed(struct cli *c, json_t *arr, int64_t max_age, size_t *ret_n)
{
	char		 dir[PATH_MAX], name[256];
	struct dirent	*de;
	DIR		*d;
	size_t		 len;
	int		 status = 0, s;

	*ret_n = 0;
	if ((size_t)snprintf(dir, sizeof(dir), "%s/manifests", c->state_dir) >=
	    sizeof(dir) || (d = opendir(dir)) == NULL)
		return 0;
	while ((de = readdir(d)) != NULL) {
		len = strlen(de->d_name);
		if (de->d_name[0] == '.' || len < 4 ||
		    strcmp(de->d_name + len - 3, ".db") != 0 ||
		    len - 3 >= sizeof(name))
			continue;
		memcpy(name, de->d_name, len - 3);
		name[len - 3] = '\0';
		if (config_find(c->conf, name) != NULL)
			continue;
		(*ret_n)++;
		if (exit_rank(s = status_one(c, name, arr, max_age)) >
		    exit_rank(status))
			status = s;
	}
	(void)closedir(d);
	return status;
}

/*
 * status of a mirror whose section has errors (m), or with m NULL of the
 * errors in no mirror's section: logged, an error object in arr.
 */
static int
status_bad(struct cli *c, const struct mirror_conf *m, json_t *arr)
{
	struct mirror_result	*r;

	if ((r = config_errors(c, m, false)) != NULL && arr != NULL)
		(void)json_array_append_new(arr, report_result_json(r));
	result_free(r);
	return 2;
}

/*
 * A state directory on a full file system (under 64 KiB, or no inode,
 * left for this user) or a read-only one: no run can take its lock or
 * record itself there, so the runs status shows stay the last ones; say
 * so once, and note it in c for --json.
 */
static void
warn_state_full(struct cli *c)
{
	struct statvfs	 sv;
	uint64_t	 blocks;

	if (statvfs(c->state_dir, &sv) == -1)
		return;
	blocks = geteuid() == 0 ? sv.f_bfree : sv.f_bavail;
	c->state_full = blocks * sv.f_frsize < 64 * 1024 || (sv.f_files > 0 &&
	    (geteuid() == 0 ? sv.f_ffree : sv.f_favail) == 0);
	c->state_ro = (sv.f_flag & ST_RDONLY) != 0;
	if (c->state_full)
		log_warnx("%s: the state directory is full: no run can start "
		    "or be recorded until space is freed (the runs shown are "
		    "the last recorded)", c->state_dir);
	if (c->state_ro)
		log_warnx("%s: the state directory is on a read-only file "
		    "system: no run can start or be recorded until it is "
		    "writable (the runs shown are the last recorded)",
		    c->state_dir);
}

/*
 * status [--max-age DURATION] [NAME...]: exit 1 when a mirror's last
 * finished run is not ok or its last success is older than DURATION,
 * 2 for a mirror that cannot be read (or a config error).
 */
static int
cmd_status(struct cli *c, int argc, char **argv)
{
	const struct mirror_conf *m;
	char		 why[PATH_MAX + 128], key[256];
	json_t		*arr = NULL;
	const char	*v;
	uint64_t	 u;
	int64_t		 max_age = -1;
	size_t		 i, n;
	int		 status, s, nn = 1;

	for (i = 1; i < (size_t)argc; i++) {
		if (strcmp(argv[i], "--max-age") == 0 && i + 1 < (size_t)argc)
			v = argv[++i];
		else if (strncmp(argv[i], "--max-age=", 10) == 0)
			v = argv[i] + 10;
		else if (argv[i][0] == '-') {
			log_errx("usage: biomirror status [--max-age DURATION] "
			    "[NAME...]");
			return 2;
		} else {
			argv[nn++] = argv[i];
			continue;
		}
		if (parse_duration(v, &u) != 0) {
			log_errx("status: --max-age %s: expected seconds, or a "
			    "number with s, m, h or d (90m, 36h, 7d)", v);
			return 2;
		}
		max_age = (int64_t)u;
	}
	argc = nn;
	if ((status = load_config(c, false)) != 0 ||
	    (status = resolve_state_dir(c)) != 0)
		return status;
	if (c->json && (arr = json_array()) == NULL)
		return 2;
	warn_state_full(c);
	if (argc > 1) {
		for (i = 1; i < (size_t)argc; i++) {
			/* An ad-hoc mirror's --name stands for its key. */
			v = resolve_name(c, argv[i], key, sizeof(key));
			if (!known_mirror(c, v)) {
				status = no_such_mirror(c, arr, argv[i]);
				continue;
			}
			m = config_find(c->conf, v);
			s = m != NULL && m->bad ? status_bad(c, m, arr) :
			    status_one(c, v, arr, max_age);
			if (exit_rank(s) > exit_rank(status))
				status = s;
		}
	} else {
		for (i = 0; i < c->conf->nmirrors; i++) {
			m = c->conf->mirrors[i];
			s = m->bad ? status_bad(c, m, arr) :
			    status_one(c, m->name, arr, max_age);
			if (exit_rank(s) > exit_rank(status))
				status = s;
		}
		for (i = 0; i < c->conf->nerrors; i++)
			if (c->conf->errors[i].mirror == NULL) {
				status = status_bad(c, NULL, arr);
				break;
			}
		if (exit_rank(s = status_unclaimed(c, arr, max_age, &n)) >
		    exit_rank(status))
			status = s;
		if (c->conf->nmirrors == 0 && n == 0) {
			/* A typo in --state-dir must not look like all-clear. */
			(void)snprintf(why, sizeof(why), "no mirrors: %s, and "
			    "no manifest in %s/manifests", c->conf->path !=
			    NULL ? "the config file has none" : "no config "
			    "file was read", c->state_dir);
			log_errx("status: %s", why);
			json_error(c, arr, NULL, "", "usage", why);
			status = 2;
		}
	}
	if (arr != NULL) {
		(void)json_dumpf(arr, stdout, JSON_INDENT(2) |
		    JSON_ENSURE_ASCII | JSON_REAL_PRECISION(12));
		fputc('\n', stdout);
		json_decref(arr);
		c->json_done = true;
	}
	return status;
}

struct ls_ctx {
	json_t	*arr;		/* borrowed: --json output, NULL for text */
};

static int
ls_row(void *arg, const struct file_row *row)
{
	struct ls_ctx	*x = arg;
	char		 ts[32], type[2], *safe = NULL;

	fmt_time(row->fs.local.mtime, ts, sizeof(ts));
	if (text_utf8_escape(row->path, &safe) != 0)
		return BM_ENOMEM;
	type[0] = (char)row->type;
	type[1] = '\0';
	if (x->arr != NULL)
		(void)json_array_append_new(x->arr, json_pack(
		    "{s:s,s:s,s:I,s:s}", "path", safe, "type", type, "size",
		    (json_int_t)row->fs.local.size, "mtime", ts));
	else if (row->type == ENTRY_FILE)
		printf("%c %12lld %s %s\n", (char)row->type,
		    (long long)row->fs.local.size, ts, safe);
	else
		printf("%c %12s %s %s\n", (char)row->type, "-", ts, safe);
	free(safe);
	return 0;
}

/*
 * Load the config (optional), resolve the state directory and open the
 * manifest of mirror name (configured, or ad-hoc with a manifest) for
 * reading; path (PATH_MAX bytes) gets the manifest's file name.  Logs
 * the reason (with --json also prints it as the error object: op usage,
 * config or manifest) and returns 2 on any failure, else 0 with *ret
 * open.
 */
static int
open_mirror(struct cli *c, const char *name, char path[PATH_MAX],
    struct manifest **ret)
{
	char			 err[PATH_MAX + 3072], key[256];
	struct mirror_result	*r;
	int			 status, rc;

	if ((status = load_config(c, false)) != 0 ||
	    (status = resolve_state_dir(c)) != 0)
		return status;
	name = resolve_name(c, name, key, sizeof(key));
	if (!known_mirror(c, name))
		return no_such_mirror(c, NULL, name);
	if (config_find(c->conf, name) != NULL &&
	    config_find(c->conf, name)->bad) {
		r = config_errors(c, config_find(c->conf, name), false);
		if (r != NULL)
			json_results(c, &r, 1);
		result_free(r);
		return 2;
	}
	if (state_manifest_path(c->state_dir, name, path, PATH_MAX) != 0)
		return 2;
	if ((rc = manifest_open_read(path, ret, err, sizeof(err))) != 0) {
		if (rc == BM_ENOENT) {
			(void)snprintf(err, sizeof(err), "no manifest yet "
			    "(never synced)");
			log_errx("%s: %s", name, err);
		} else
			manifest_failed(c, name, rc, err, err, sizeof(err));
		json_error(c, NULL, name, path, "manifest", err);
		return 2;
	}
	if (manifest_warning(*ret)[0] != '\0')
		log_warnx("%s: %s", name, manifest_warning(*ret));
	return 0;
}

/*
 * A read of mirror name's open manifest m (file path) failed: say so,
 * with --json as the error object (op manifest).  Returns 2.
 */
static int
read_failed(struct cli *c, const char *name, const char *path,
    struct manifest *m)
{
	char	 err[PATH_MAX + 3072];

	manifest_failed(c, name, manifest_fault(m), manifest_errmsg(m), err,
	    sizeof(err));
	json_error(c, NULL, name, path, "manifest", err);
	return 2;
}

static int
cmd_ls(struct cli *c, int argc, char **argv)
{
	char		 path[PATH_MAX], prefix[PATH_MAX] = "";
	struct manifest	*m = NULL;
	struct ls_ctx	 x = { NULL };
	size_t		 n;
	int		 status;

	if (argc < 2 || argc > 3) {
		log_errx("usage: biomirror ls NAME [PATH]");
		return 2;
	}
	if (argc == 3) {
		/* A mirror path: relative, no ".." (STYLE.md rule 35). */
		(void)snprintf(prefix, sizeof(prefix), "%s", argv[2]);
		for (n = strlen(prefix); n > 0 && prefix[n - 1] == '/'; n--)
			prefix[n - 1] = '\0';
		if (strcmp(prefix, ".") == 0)
			prefix[0] = '\0';
		if (strlen(argv[2]) >= sizeof(prefix) || (prefix[0] != '\0' &&
		    !path_is_safe(prefix, strlen(prefix))) ||
		    (argv[2][0] == '/')) {
			log_errx("ls: %s: not a relative path inside the "
			    "mirror", argv[2]);
			return 2;
		}
	}
	if ((status = open_mirror(c, argv[1], path, &m)) != 0)
		return status;
	if (c->json && (x.arr = json_array()) == NULL) {
		manifest_close(m);
		return 2;
	}
	status = 0;
	if (manifest_ls(m, prefix, ls_row, &x) != 0)
		status = read_failed(c, argv[1], path, m);
	if (x.arr != NULL && status != 0)
		json_decref(x.arr);
	else if (x.arr != NULL) {
		(void)json_dumpf(x.arr, stdout, JSON_INDENT(2) |
		    JSON_ENSURE_ASCII);
		fputc('\n', stdout);
		json_decref(x.arr);
		c->json_done = true;
	}
	manifest_close(m);
	return status;
}

struct history_ctx {
	json_t	*arr;		/* borrowed: --json output, NULL for text */
	size_t	 n;		/* events shown */
};

static int
history_event(void *arg, const struct event_row *e)
{
	struct history_ctx *x = arg;
	char		 ts[32], *path = NULL, *why = NULL;
	int		 rc = BM_ENOMEM;

	fmt_time(e->time_ns, ts, sizeof(ts));
	if (text_utf8_escape(e->path, &path) != 0 ||
	    text_utf8_escape(e->reason ? e->reason : "", &why) != 0)
		goto out;
	if (x->arr != NULL)
		(void)json_array_append_new(x->arr, json_pack(
		    "{s:s,s:s,s:s,s:I,s:s,s:o}", "time", ts, "op", e->op, "path",
		    path, "bytes", (json_int_t)e->bytes, "reason", why,
		    "transport", e->net ? json_string(e->net) : json_null()));
	else
		printf("%s %-12s %-4s%s%s%s\n", ts, e->op, e->net ? e->net : "-",
		    path, why[0] ? ": " : "", why);
	x->n++;
	rc = 0;
out:
	free(path);
	free(why);
	return rc;
}

/* history NAME [--runs N | --run ID]: runs, or the events of one run. */
/* Counts the "adopted" events of a run (manifest_events() callback). */
static int
count_adopted(void *arg, const struct event_row *e)
{
	int64_t	*n = arg;

	if (strcmp(e->op, "adopted") == 0)
		(*n)++;
	return 0;
}

/*
 * One line of history NAME: id, start, status, the command when it was
 * not a sync (a resync says how many files it adopted), counts, bytes.
 */
static void
history_line(struct manifest *m, const struct run_record *r)
{
	char	 ts[32], nets[160], hb[32], cmd[64];
	int64_t	 adopted = 0;

	fmt_time(r->start_ns, ts, sizeof(ts));
	fmt_nets(r, nets, sizeof(nets));
	report_human_bytes(r->bytes > 0 ? (uint64_t)r->bytes : 0, hb,
	    sizeof(hb));
	cmd[0] = '\0';
	if (strcmp(r->command, "resync") == 0) {
		(void)manifest_events(m, r->id, count_adopted, &adopted);
		if (adopted == 0)
			(void)snprintf(cmd, sizeof(cmd), "resync: ");
		else
			(void)snprintf(cmd, sizeof(cmd), "resync, adopted %lld "
			    "file%s: ", (long long)adopted, adopted == 1 ? "" :
			    "s");
	} else if (strcmp(r->command, "sync") != 0 && r->command[0] != '\0')
		(void)snprintf(cmd, sizeof(cmd), "%s: ", r->command);
	/* Width of the longest status word, "interrupted". */
	printf("%6lld %s %-11s %slisted %lld, fetched %lld, touched %lld, "
	    "deleted %lld, failed %lld, %s%s%s%s\n", (long long)r->id, ts,
	    r->status, cmd, (long long)r->listed, (long long)r->fetched,
	    (long long)r->touched, (long long)r->deleted,
	    (long long)r->failed, hb, nets, r->error[0] ? "; " : "",
	    r->error);
}

static int
cmd_history(struct cli *c, int argc, char **argv)
{
	char		 path[PATH_MAX], key[256];
	struct manifest	*m = NULL;
	struct run_record *runs = NULL;
	struct history_ctx x = { NULL, 0 };
	json_t		*info;
	uint64_t	 nruns = 20, run = 0;
	size_t		 n = 0, i;
	int		 status;

	if (argc == 4 && strcmp(argv[2], "--runs") == 0) {
		if (config_parse_uint(argv[3], 1, 100000, &nruns) != 0) {
			log_errx("history: --runs %s: expected 1 to 100000",
			    argv[3]);
			return 2;
		}
	} else if (argc == 4 && strcmp(argv[2], "--run") == 0) {
		if (config_parse_uint(argv[3], 1, INT64_MAX, &run) != 0) {
			log_errx("history: --run %s: not a run id", argv[3]);
			return 2;
		}
	} else if (argc != 2) {
		log_errx("usage: biomirror history NAME [--runs N | --run ID]");
		return 2;
	}
	if ((status = open_mirror(c, argv[1], path, &m)) != 0)
		return status;
	if (c->json && (x.arr = json_array()) == NULL) {
		status = 2;
		goto out;
	}
	if (run > 0) {
		/* Runs are never deleted: ids 1 to the newest all exist. */
		if (manifest_runs(m, 1, &runs, &n) != 0) {
			status = read_failed(c, argv[1], path, m);
			goto out;
		}
		if (n == 0 || (uint64_t)runs[0].id < run) {
			log_errx("%s: run %llu: no such run", argv[1],
			    (unsigned long long)run);
			status = 2;
			goto out;
		}
		if (manifest_events(m, (int64_t)run, history_event, &x) != 0)
			status = read_failed(c, argv[1], path, m);
		else if (x.n == 0 && x.arr == NULL)
			printf("run %llu: no files fetched, touched, deleted or "
			    "failed\n", (unsigned long long)run);
	} else if (manifest_runs(m, (size_t)nruns, &runs, &n) != 0)
		status = read_failed(c, argv[1], path, m);
	else {
		(void)fix_running(c, argv[1], runs, n);
		/* An ad-hoc mirror: what its key stands for, first. */
		info = adhoc_info_read(c, resolve_name(c, argv[1], key,
		    sizeof(key)));
		if (info != NULL && x.arr == NULL)
			printf("%s: ad-hoc mirror%s%s: %s -> %s\n",
			    resolve_name(c, argv[1], key, sizeof(key)),
			    json_object_get(info, "name") ? " " : "",
			    adhoc_field(info, "name", ""),
			    adhoc_field(info, "source", "?"),
			    adhoc_field(info, "dest", "?"));
		json_decref(info);
		for (i = 0; i < n; i++) {
			if (x.arr != NULL) {
				(void)json_array_append_new(x.arr,
				    run_json(&runs[i]));
				continue;
			}
			history_line(m, &runs[i]);
		}
	}
	if (x.arr != NULL && status == 0) {
		(void)json_dumpf(x.arr, stdout, JSON_INDENT(2) |
		    JSON_ENSURE_ASCII | JSON_REAL_PRECISION(12));
		fputc('\n', stdout);
		c->json_done = true;
	}
out:
	json_decref(x.arr);
	free(runs);
	manifest_close(m);
	return status;
}

/*
 * Print verify's findings: one line per differing file, then a summary
 * (not when quiet and all matched: -q).  An error of the whole run (path
 * "": the lock, the state directory, the manifest) is no differing file;
 * sync_verify() logged it.
 */
static void
verify_text(const struct mirror_result *r, bool quiet)
{
	size_t	 i;
	char	*p = NULL;

	for (i = 0; i < r->nerrors; i++) {
		if (r->errors[i].path[0] == '\0')
			continue;
		if (text_utf8_escape(r->errors[i].path, &p) != 0)
			continue;
		printf("differs %s: %s\n", p, r->errors[i].reason);
		free(p);
		p = NULL;
	}
	if (quiet && r->exit_code == 0)
		return;
	/* Say how many were hashed: size and mtime alone prove no content. */
	printf("%s: verify %s: checked %lld file%s against digests, ",
	    r->mirror, r->status, (long long)r->digest_checked,
	    r->digest_checked == 1 ? "" : "s");
	if (r->size_only > 0)
		printf("%lld file%s no recorded digest or sidecar (size "
		    "and mtime only), ", (long long)r->size_only,
		    r->size_only == 1 ? " has" : "s have");
	printf("%lld differ\n", (long long)r->failed);
}

/*
 * verify NAME [--repair]: re-hash the local files (sync_verify); with
 * --repair, a resync --checksum then fetches the ones that differ again.
 * Exit 0 when none differ (or all were repaired), else as DESIGN.md.
 */
static int
cmd_verify(struct cli *c, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "repair",	no_argument,	   NULL, 'r' },
		{ "source",	required_argument, NULL, 's' },
		{ "dest",	required_argument, NULL, 'd' },
		{ NULL, 0, NULL, 0 }
	};
	struct mirror_result *res = NULL;
	struct mirror_conf *m, *adhoc = NULL;
	struct sync_args a;
	struct sync_opts so;
	const char	*key, *source = NULL, *dest = NULL;
	char		 err[512], akey[64];
	bool		 repair = false;
	int		 status, ch;

	optind = 0;
	opterr = 1;
	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		if (ch == 'r')
			repair = true;
		else if (ch == 's')
			source = optarg;
		else if (ch == 'd')
			dest = optarg;
		else
			break;		/* getopt said why: a usage error */
	}
	if (ch != -1 || (source != NULL) != (dest != NULL) ||
	    argc - optind != (source != NULL ? 0 : 1)) {
		log_errx("usage: biomirror verify NAME|--source URL --dest DIR "
		    "[--repair]");
		return 2;
	}
	if ((status = load_config(c, source == NULL)) != 0 ||
	    (status = resolve_state_dir(c)) != 0)
		return status;
	if (source != NULL) {
		if ((adhoc = adhoc_mirror(c, "verify", source, dest, akey,
		    sizeof(akey))) == NULL)
			return 2;
		m = adhoc;
	} else if ((m = config_find(c->conf, argv[optind])) == NULL) {
		log_errx("%s: no such mirror in %s", argv[optind],
		    c->conf->path);
		return 2;
	} else if (m->bad) {
		res = config_errors(c, m, false);
		if (res != NULL)
			json_results(c, &res, 1);
		result_free(res);
		return 2;
	}
	err[0] = '\0';
	if (mirror_conf_check(m, err, sizeof(err)) != 0) {
		log_errx("%s: %s", m->name, err);
		mirror_conf_free(adhoc);
		return 2;
	}
	memset(&so, 0, sizeof(so));
	so.state_dir = c->state_dir;
	so.key = m->name;
	so.config_file = source != NULL ? NULL : c->conf->path;
	so.stop = c->stop;
	so.conf = c->conf;
	if (sync_verify(&so, m, &res) != 0) {
		result_free(res);
		mirror_conf_free(adhoc);
		return 2;
	}
	if (c->json && !repair)
		json_results(c, &res, 1);
	else if (!c->json)
		verify_text(res, c->verbosity < 0);
	status = res->exit_code;
	if (repair && res->failed > 0 && status == 1) {
		memset(&a, 0, sizeof(a));
		a.command = "resync";
		a.checksum = true;
		a.source = source;	/* ad-hoc: no config file */
		a.dest = dest;
		key = m->name;
		status = run_mirrors(c, &m, &key, 1, &a,
		    c->verbosity >= 0, false);
	} else if (repair && c->json)
		json_results(c, &res, 1);
	result_free(res);
	mirror_conf_free(adhoc);
	return status;
}

/*
 * check-config: every error of the file, each "FILE:LINE: reason", exit
 * 2; else "configuration OK".  --json: {"config", "ok", "mirrors"}, or
 * {"config", "ok": false, "error" (the first), "errors": [{path, op,
 * reason}]}.
 */
/*
 * check-config -v: m's effective value of every key, and where it came
 * from: its section, [global] (a default) or the built-in default.
 */
static void
print_settings(const struct mirror_conf *m)
{
	const char *const *keys;
	const struct conf_setting *s, *last;
	size_t		 nkeys, i, j;
	bool		 own;

	keys = config_mirror_keys(&nkeys);
	printf("[%s]\n", m->name);
	for (i = 0; i < nkeys; i++) {
		last = NULL;
		own = false;
		for (j = 0; j < m->nsettings; j++) {
			s = &m->settings[j];
			if (strcmp(s->key, keys[i]) == 0) {
				last = s;
				own = own || !s->global;
			}
		}
		if (last == NULL) {
			printf("  %s = %s  (built-in default)\n", keys[i],
			    config_key_default(keys[i]));
			continue;
		}
		/* include, exclude: every line of the winning origin. */
		for (j = 0; j < m->nsettings; j++) {
			s = &m->settings[j];
			if (strcmp(s->key, keys[i]) != 0 || s->global == own ||
			    (s != last && strcmp(keys[i], "include") != 0 &&
			    strcmp(keys[i], "exclude") != 0))
				continue;
			if (s->global)
				printf("  %s = %s  ([global], line %u)\n",
				    s->key, s->value, s->line);
			else
				printf("  %s = %s  ([%s], line %u)\n", s->key,
				    s->value, m->name, s->line);
		}
	}
}

/*
 * check-config: every mirror whose transport cannot be set up here
 * (mirror_conf_transport_ready: a module missing or broken), each one
 * logged as "FILE: mirror NAME: reason", or with r added to r's errors
 * (that mirror's, op config) instead; the first message into first.
 * Returns how many, or -1 on ENOMEM.
 */
static int
check_transports(struct cli *c, const char *path, struct mirror_result *r,
    char *first, size_t firstlen)
{
	const struct mirror_conf *m;
	char		 why[512], msg[1100];
	size_t		 i;
	int		 n = 0;

	for (i = 0; i < c->conf->nmirrors; i++) {
		m = c->conf->mirrors[i];
		if (mirror_conf_transport_ready(m, why, sizeof(why)) == 0)
			continue;
		(void)snprintf(msg, sizeof(msg), "%s: mirror %s: %s", path,
		    m->name, why);
		if (r == NULL)
			log_errx("%s", msg);
		else if (result_add_mirror_error(r, m->name, path, "config",
		    msg) != 0)
			return -1;
		if (n++ == 0)
			(void)snprintf(first, firstlen, "%s", msg);
	}
	return n;
}

static int
cmd_check_config(struct cli *c)
{
	char		 err[1024], msg[1100];
	const char	*path = c->config_path ? c->config_path : DEFAULT_CONFIG;
	const char	*why;
	struct mirror_result *r = NULL;
	json_t		*o = NULL, *errs = NULL;
	size_t		 n;
	int		 status = 2, rc;

	if (!c->json) {
		if ((status = load_config(c, true)) != 0)
			return status;
		if (c->conf->nerrors > 0) {
			result_free(config_errors(c, NULL, true));
			return 2;
		}
		if (check_transports(c, path, NULL, msg, sizeof(msg)) != 0)
			return 2;
		if (c->verbosity >= 0)
			printf("%s: configuration OK (%zu mirror%s)\n", path,
			    c->conf->nmirrors, c->conf->nmirrors == 1 ? "" :
			    "s");
		for (n = 0; c->verbosity > 0 && n < c->conf->nmirrors; n++)
			print_settings(c->conf->mirrors[n]);
		return 0;
	}
	err[0] = '\0';
	if ((rc = config_load_all(path, &c->conf, err, sizeof(err))) != 0) {
		n = strlen(path);
		/* As load_config() says it: the reason, with its errno. */
		why = err[0] == '\0' ? bm_strerror(rc) : strncmp(err, path, n)
		    == 0 && strncmp(err + n, ": ", 2) == 0 ? err + n + 2 : err;
		(void)snprintf(msg, sizeof(msg), "%s%s",
		    rc == BM_ENOENT ? "cannot open config file: " : "", why);
		o = json_pack("{s:s,s:b,s:s,s:[{s:s,s:s,s:s}]}", "config",
		    path, "ok", 0, "error", msg, "errors", "path", path, "op",
		    "config", "reason", msg);
	} else if (c->conf->nerrors > 0) {
		(void)snprintf(err, sizeof(err), "%s: %s",
		    c->conf->errors[0].where, c->conf->errors[0].reason);
		if ((r = config_errors(c, NULL, true)) != NULL &&
		    (o = report_result_json(r)) != NULL)
			errs = json_incref(json_object_get(o, "errors"));
		json_decref(o);
		o = json_pack("{s:s,s:b,s:s,s:o*}", "config", path, "ok", 0,
		    "error", err, "errors", errs);
		result_free(r);
	} else if ((r = result_new(NULL)) == NULL ||
	    (rc = check_transports(c, path, r, msg, sizeof(msg))) < 0) {
		result_free(r);
		return 2;
	} else if (rc > 0) {
		r->status = "error";	/* as config_errors() makes it */
		r->exit_code = 2;
		if ((o = report_result_json(r)) != NULL)
			errs = json_incref(json_object_get(o, "errors"));
		json_decref(o);
		o = json_pack("{s:s,s:b,s:s,s:o*}", "config", path, "ok", 0,
		    "error", msg, "errors", errs);
		result_free(r);
	} else {
		result_free(r);
		o = json_pack("{s:s,s:b,s:I}", "config", path, "ok", 1,
		    "mirrors", (json_int_t)c->conf->nmirrors);
		status = 0;
	}
	if (o == NULL)
		return 2;
	(void)json_dumpf(o, stdout, JSON_INDENT(2) | JSON_ENSURE_ASCII);
	fputc('\n', stdout);
	json_decref(o);
	return status;
}

/*
 * serve [--listen ADDR:PORT] [--export NAME=DIR]...: the config's
 * exports, or only those given (the config file is then optional).
 * Refuses to start on a config error outside the mirror sections
 * ([global], [serve], [export]: logged).  Exit 0 after a drained stop,
 * 1 when transfers were cut, 2 for usage, config or setup errors.
 */
static int
cmd_serve(struct cli *c, int argc, char **argv)
{
	static const struct option lo[] = {
		{ "listen",	required_argument, NULL, 'l' },
		{ "export",	required_argument, NULL, 'e' },
		{ NULL, 0, NULL, 0 }
	};
	struct serve_opts o = { NULL };
	char		 err[1024], *eq;
	const struct config_error *e;
	bool		 given = false;
	size_t		 i;
	int		 ch, rc, bad = 0;

	optind = 1;
	for (i = 1; i < (size_t)argc; i++)
		if (strcmp(argv[i], "--export") == 0 ||
		    strncmp(argv[i], "--export=", 9) == 0)
			given = true;
	if (load_config(c, !given) != 0)
		return 2;
	if (given)
		config_clear_exports(c->conf);
	while ((ch = getopt_long(argc, argv, "+", lo, NULL)) != -1) {
		if (ch == 'l')
			o.listen = optarg;
		else if (ch == 'e' && ((eq = strchr(optarg, '=')) == NULL ||
		    eq == optarg)) {
			log_errx("serve: --export %s: expected NAME=DIR",
			    optarg);
			return 2;
		} else if (ch == 'e') {
			*eq = '\0';
			rc = config_add_export(c->conf, optarg, eq + 1, err,
			    sizeof(err));
			*eq = '=';
			if (rc != 0) {
				log_errx("serve: --export: %s", rc ==
				    BM_ENOMEM ? "out of memory" : err);
				return 2;
			}
		} else
			return 2;
	}
	if (optind < argc) {
		log_errx("serve: unexpected argument %s", argv[optind]);
		return 2;
	}
	for (i = 0; i < c->conf->nerrors; i++) {
		e = &c->conf->errors[i];
		if (e->mirror == NULL) {
			log_errx("%s: %s", e->where, e->reason);
			bad++;
		}
	}
	if (bad > 0) {
		log_errx("serve: not started: %d config error%s", bad,
		    bad == 1 ? "" : "s");
		return 2;
	}
	if (resolve_state_dir(c) == 0)
		o.state_dir = c->state_dir;
	return serve_run(c->conf, &o, c->stop);
}

/*
 * An entry's mtime shown to its precision, UTC: "2024-01-02T03:04:05Z",
 * "...T03:04Z", "2024-01-02", nanoseconds as ".123456789Z"; "-" unknown.
 */
static void
list_fmt_mtime(const struct entry *e, char *buf, size_t len)
{
	struct tm	 tm;
	time_t		 t;
	size_t		 n;

	t = (time_t)(e->mtime / NS - (e->mtime % NS < 0 ? 1 : 0));
	if (e->mtime_prec == MTIME_UNKNOWN || gmtime_r(&t, &tm) == NULL ||
	    (n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm)) != 19) {
		(void)snprintf(buf, len, "-");
		return;
	}
	/* Cut to what the listing said: a day, a minute, or more. */
	if (e->mtime_prec == MTIME_DAY)
		buf[10] = '\0';
	else if (e->mtime_prec == MTIME_MINUTE)
		(void)snprintf(buf + 16, len - 16, "Z");
	else if (e->mtime_prec == MTIME_NS)
		(void)snprintf(buf + n, len - n, ".%09lldZ",
		    (long long)((e->mtime % NS + NS) % NS));
	else
		(void)snprintf(buf + n, len - n, "Z");
}

static const char *
list_prec_name(enum mtime_prec p)
{
	return p == MTIME_DAY ? "day" : p == MTIME_MINUTE ? "minute" :
	    p == MTIME_SECOND ? "second" : p == MTIME_NS ? "nanosecond" :
	    "unknown";
}

static const char *
list_type_name(enum entry_type t)
{
	return t == ENTRY_DIR ? "dir" : t == ENTRY_SYMLINK ? "symlink" :
	    "file";
}

/* The --json object of entry e (path and target escaped), NULL: ENOMEM. */
static json_t *
list_entry_json(const struct entry *e, const char *path, const char *target,
    const char *ts)
{
	json_t	*o;

	if ((o = json_pack("{s:s,s:s,s:o,s:b,s:s,s:o}", "path", path, "type",
	    list_type_name(e->type), "size", e->size < 0 ? json_null() :
	    json_integer((json_int_t)e->size), "size_exact", e->size_exact,
	    "mtime_precision", list_prec_name(e->mtime_prec), "mtime",
	    e->mtime_prec == MTIME_UNKNOWN ? json_null() :
	    json_string(ts))) == NULL)
		return NULL;
	if ((!e->size_exact && e->size_min >= 0 &&
	    (json_object_set_new(o, "size_min",
	    json_integer((json_int_t)e->size_min)) != 0 ||
	    json_object_set_new(o, "size_max",
	    json_integer((json_int_t)e->size_max)) != 0)) ||
	    (e->size_display != NULL && json_object_set_new(o, "size_shown",
	    json_string(e->size_display)) != 0) ||
	    (target != NULL && json_object_set_new(o, "target",
	    json_string(target)) != 0)) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/*
 * One entry of list: a JSON object appended to arr, or with arr NULL a
 * line on stdout, "TYPE SIZE MTIME PATH[ -> TARGET]" (SIZE: exact bytes,
 * "~" and the size the page shows when inexact, "-" unknown).  Returns 0
 * or BM_ENOMEM.
 */
static int
list_entry(json_t *arr, const struct entry *e)
{
	char		 ts[48], sz[64], *path = NULL, *target = NULL;
	int		 rc = BM_ENOMEM;

	list_fmt_mtime(e, ts, sizeof(ts));
	if (text_utf8_escape(e->path, &path) != 0 || (e->target != NULL &&
	    text_utf8_escape(e->target, &target) != 0))
		goto out;
	if (arr != NULL) {
		if (json_array_append_new(arr, list_entry_json(e, path, target,
		    ts)) != 0)
			goto out;
	} else {
		if (e->size < 0)
			(void)snprintf(sz, sizeof(sz), "-");
		else if (e->size_exact)
			(void)snprintf(sz, sizeof(sz), "%lld",
			    (long long)e->size);
		else
			(void)snprintf(sz, sizeof(sz), "~%.40s",
			    e->size_display ? e->size_display : "?");
		printf("%c %12s %-20s %s%s%s\n", (char)e->type, sz, ts, path,
		    target ? " -> " : "", target ? target : "");
	}
	rc = 0;
out:
	free(path);
	free(target);
	return rc;
}

#define LIST_USAGE	"usage: biomirror list URL [-r] [--include GLOB] " \
			"[--exclude GLOB] [--max-entries N]"

/* list's --json error object {status "error", errors [{url, list, why}]}. */
static void
list_json_error(struct cli *c, const char *url, const char *why)
{
	struct mirror_result *r;

	if ((r = result_new(NULL)) == NULL)
		return;
	r->status = "error";
	if (result_add_error(r, url, "list", why) == 0)
		json_results(c, &r, 1);
	result_free(r);
}

/*
 * list URL [-r] [--include GLOB] [--exclude GLOB] [--max-entries N]: an
 * upstream's listing through the lister registry, without a mirror, a
 * manifest or a destination.  Exit 0; 2 (usage); 3 (the listing failed or was cut:
 * nothing printed but the error); 1 (stopped by a signal).
 */
static int
cmd_list(struct cli *c, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "recursive",	no_argument,	   NULL, 'r' },
		{ "include",	required_argument, NULL, 'i' },
		{ "exclude",	required_argument, NULL, 'x' },
		{ "max-entries", required_argument, NULL, 'M' },
		{ "help",	no_argument,	   NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	struct mirror_conf *m = NULL;
	struct listing	*l = NULL;
	struct sync_opts so;
	json_t		*arr = NULL;
	char		 err[1024];
	bool		 recursive = false, logged;
	size_t		 i;
	int		 ch, rc, status = 2;

	if ((m = mirror_conf_new("list")) == NULL)
		goto out;
	optind = 0;	/* 0: GNU getopt starts over (and permutes) */
	while ((ch = getopt_long(argc, argv, ":rh", longopts, NULL)) != -1) {
		err[0] = '\0';
		switch (ch) {
		case 'r':
			recursive = true;
			break;
		case 'i':
		case 'x':
		case 'M':
			if (mirror_conf_set(m, ch == 'i' ? "include" :
			    ch == 'x' ? "exclude" : "max_entries", optarg, err,
			    sizeof(err)) != 0) {
				log_errx("list: %s", err);
				goto out;
			}
			break;
		case 'h':
			printf("%s\n", LIST_USAGE);
			status = 0;
			goto out;
		default:
			log_errx("list: %s: unknown option or missing value "
			    "(%s)", argv[optind - 1], LIST_USAGE);
			goto out;
		}
	}
	if (argc - optind != 1) {
		log_errx("list: %s", LIST_USAGE);
		goto out;
	}
	if (load_config(c, false) != 0)
		goto out;
	err[0] = '\0';
	if (mirror_conf_set(m, "source", argv[optind], err,
	    sizeof(err)) != 0) {
		log_errx("list: %s", err[0] ? err : "out of memory");
		goto out;
	}
	memset(&so, 0, sizeof(so));
	so.user_agent = c->conf->user_agent ? c->conf->user_agent :
	    "biomirror/" BM_VERSION;
	so.stop = c->stop;
	so.command = "list";
	if ((rc = sync_list(&so, m, recursive, &l, &logged, err,
	    sizeof(err))) != 0) {
		if (!logged)
			log_errx("list: %s", err);
		status = rc == BM_ENOMEM || rc == BM_EINTR ? 1 : 3;
		list_json_error(c, m->source, err);
		goto out;
	}
	status = 1;
	if (c->json && (arr = json_array()) == NULL)
		goto out;
	for (i = 0; i < listing_count(l); i++)
		if (list_entry(arr, listing_get(l, i)) != 0) {
			log_errx("list: out of memory");
			goto out;
		}
	if (arr != NULL) {
		(void)json_dumpf(arr, stdout, JSON_INDENT(2) |
		    JSON_ENSURE_ASCII);
		(void)putchar('\n');
		c->json_done = true;
	}
	status = fflush(stdout) == 0 ? 0 : 1;
out:
	json_decref(arr);
	listing_free(l);
	mirror_conf_free(m);
	return status;
}

/*
 * The value of global option opt at argv[*i] ("-cFILE", "--config=FILE"
 * or the next argument, then *i steps over it); NULL after logging why
 * when the value is missing.  long_name: NULL for a short-only option.
 */
static const char *
global_value(int argc, char **argv, int *i, const char *short_name,
    const char *long_name)
{
	const char	*a = argv[*i];
	size_t		 n;

	if (short_name != NULL && strcmp(a, short_name) != 0 &&
	    strncmp(a, short_name, 2) == 0)
		return a + 2;
	n = long_name != NULL ? strlen(long_name) : 0;
	if (n > 0 && strncmp(a, long_name, n) == 0 && a[n] == '=')
		return a + n + 1;
	if (*i + 1 >= argc) {
		log_errx("option %s needs a value (try --help)", a);
		return NULL;
	}
	/* "--state-dir --json": the value is most likely missing */
	if (argv[*i + 1][0] == '-' && argv[*i + 1][1] != '\0') {
		log_errx("option %s needs a value, not the option %s (for a "
		    "path that starts with '-': %s=%s or ./%s)", a,
		    argv[*i + 1], long_name != NULL ? long_name : a,
		    argv[*i + 1], argv[*i + 1]);
		return NULL;
	}
	return argv[++(*i)];
}

/* Whether argument a is global option short_name or long_name. */
static bool
is_global(const char *a, const char *short_name, const char *long_name)
{
	size_t	 n = strlen(long_name);

	if (short_name != NULL && strncmp(a, short_name, 2) == 0)
		return true;
	return strncmp(a, long_name, n) == 0 && (a[n] == '\0' || a[n] == '=');
}

/*
 * Take the global options (-c, --state-dir, --json, -v, -vv, -q and their
 * long forms) out of argv wherever they stand, before or after the
 * command, and apply them; -n, -h, --help and --version count only
 * before the command (after it, they are the command's).  Everything
 * else is kept in order for the command, from the first "--" on
 * untouched ("--" itself is kept when keep_dashdash is set, for getopt).
 * An unknown option before the command is a usage error.  Returns the
 * new argc (argv[0] is the command, if any), -1 after --help or
 * --version, or -2 after logging a usage error.
 */
static int
parse_globals(struct cli *c, int argc, char **argv)
{
	const char	*a;
	bool		 seen_cmd = false, dashdash;
	int		 i, j, n = 0;

	for (i = 1; i < argc; i++) {
		a = argv[i];
		if (strcmp(a, "--") == 0) {
			dashdash = seen_cmd && (strcmp(argv[0], "sync") == 0 ||
			    strcmp(argv[0], "plan") == 0 ||
			    strcmp(argv[0], "resync") == 0);
			if (!dashdash)
				i++;
			while (i < argc)
				argv[n++] = argv[i++];
			break;
		}
		if (a[0] != '-' || a[1] == '\0') {
			argv[n++] = argv[i];
			seen_cmd = true;
			continue;
		}
		if (is_global(a, "-c", "--config")) {
			if ((c->config_path = global_value(argc, argv, &i,
			    "-c", "--config")) == NULL)
				return -2;
		} else if (is_global(a, NULL, "--state-dir")) {
			if ((c->state_dir_opt = global_value(argc, argv, &i,
			    NULL, "--state-dir")) == NULL)
				return -2;
		} else if (strcmp(a, "--json") == 0)
			c->json = true;
		else if (strcmp(a, "--verbose") == 0)
			c->verbosity = c->verbosity < 0 ? 1 : c->verbosity + 1;
		else if (strcmp(a, "--quiet") == 0)
			c->verbosity = -1;
		else if (a[1] == 'v' || a[1] == 'q') {
			/* -v, -vv, -q: a run of v and q letters */
			for (j = 1; a[j] == 'v' || a[j] == 'q'; j++)
				;
			if (a[j] != '\0')
				goto other;
			for (j = 1; a[j] != '\0'; j++)
				c->verbosity = a[j] == 'q' ? -1 :
				    c->verbosity < 0 ? 1 : c->verbosity + 1;
		} else
			goto other;
		continue;
other:
		if (seen_cmd) {
			argv[n++] = argv[i];
			continue;
		}
		if (strcmp(a, "-n") == 0)
			c->check_only = true;
		else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			usage(stdout);
			return -1;
		} else if (strcmp(a, "--version") == 0) {
			printf("biomirror %s\n", BM_VERSION);
			return -1;
		} else {
			log_errx("unknown option %s (try --help)", a);
			return -2;
		}
	}
	argv[n] = NULL;
	return n;
}

/*
 * --json always prints one array: a command that failed before printing
 * it (a usage error, an unknown mirror, no state directory) prints one
 * error object with the last error logged.
 */
static void
json_usage_error(struct cli *c)
{
	struct mirror_result	*r;

	if ((r = result_new(NULL)) == NULL)
		return;
	r->status = "error";
	if (result_add_error(r, "", "usage", log_last_error()) == 0)
		json_results(c, &r, 1);
	result_free(r);
}

int
cli_main(int argc, char **argv, volatile sig_atomic_t *stop)
{
	struct cli	 c;
	const char	*cmd;
	int		 status = 2;

	memset(&c, 0, sizeof(c));
	c.stop = stop;
	log_init(true, 0);	/* parse_globals() may say why it failed */
	argc = parse_globals(&c, argc, argv);
	log_init(true, c.verbosity);
	if (argc < 0) {
		if (argc == -2 && c.json)
			json_usage_error(&c);
		return argc == -1 ? 0 : 2;
	}
	if (c.check_only && argc > 0) {
		log_errx("-n validates the config and takes no command (for "
		    "a dry run: sync --dry-run or plan)");
		return 2;
	}
	if (c.check_only)
		cmd = "check-config";
	else if (argc < 1) {
		log_errx("no command given (try --help)");
		return 2;
	} else
		cmd = argv[0];
	if (strcmp(cmd, "check-config") == 0 && argc > 1) {
		log_errx("check-config takes no arguments");
		return 2;
	}
	if (strcmp(cmd, "sync") == 0 || strcmp(cmd, "plan") == 0 ||
	    strcmp(cmd, "resync") == 0)
		status = cmd_sync(&c, argc, argv, cmd);
	else if (strcmp(cmd, "verify") == 0)
		status = cmd_verify(&c, argc, argv);
	else if (strcmp(cmd, "status") == 0)
		status = cmd_status(&c, argc, argv);
	else if (strcmp(cmd, "ls") == 0)
		status = cmd_ls(&c, argc, argv);
	else if (strcmp(cmd, "check-config") == 0)
		status = cmd_check_config(&c);
	else if (strcmp(cmd, "history") == 0)
		status = cmd_history(&c, argc, argv);
	else if (strcmp(cmd, "serve") == 0)
		status = cmd_serve(&c, argc, argv);
	else if (strcmp(cmd, "list") == 0)
		status = cmd_list(&c, argc, argv);
	else if (strcmp(cmd, "help") == 0) {
		usage(stdout);
		status = 0;
	} else {
		log_errx("%s: unknown command (try --help)", cmd);
		status = 2;
	}
	if (c.json && !c.json_done && status != 0 &&
	    strcmp(cmd, "check-config") != 0)
		json_usage_error(&c);
	config_free(c.conf);
	return status;
}
