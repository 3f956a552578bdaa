/*
 * Run results, summaries and --json output.  jansson builds the JSON
 * (STYLE.md: no hand-rolled escaping); byte strings that are not UTF-8
 * are first made safe by text_utf8_escape() so that jansson accepts
 * them and no name is dropped.
 */
#include <stdlib.h>
#include <string.h>

#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "biomirror/clock.h"
#include "biomirror/error.h"
#include "biomirror/log.h"
#include "biomirror/report.h"
#include "biomirror/text.h"

struct mirror_result *
result_new(const char *name)
{
	struct mirror_result *r;

	if ((r = calloc(1, sizeof(*r))) == NULL)
		return NULL;
	if (name != NULL && (r->mirror = strdup(name)) == NULL) {
		free(r);
		return NULL;
	}
	r->status = "ok";
	r->post_sync_status = -1;
	return r;
}

void
result_free(struct mirror_result *r)
{
	size_t	 i;

	if (r == NULL)
		return;
	for (i = 0; i < r->nerrors; i++) {
		free(r->errors[i].path);
		free(r->errors[i].op);
		free(r->errors[i].reason);
		free(r->errors[i].mirror);
	}
	free(r->errors);
	for (i = 0; i < r->nactions; i++)
		free(r->actions[i].path);
	free(r->actions);
	free(r->kept_manifest);
	free(r->mirror);
	free(r);
}

int
result_add_error(struct mirror_result *r, const char *path, const char *op,
    const char *reason)
{
	struct report_error *v, *e;
	size_t		 ncap;

	if (r->nerrors >= REPORT_MAX_ERRORS) {
		r->nerrors_dropped++;
		return 0;
	}
	if (r->nerrors == r->cap) {
		ncap = r->cap ? r->cap * 2 : 16;
		if ((v = reallocarray(r->errors, ncap, sizeof(*v))) == NULL)
			return BM_ENOMEM;
		r->errors = v;
		r->cap = ncap;
	}
	e = &r->errors[r->nerrors];
	e->path = strdup(path ? path : "");
	e->op = strdup(op ? op : "");
	e->reason = strdup(reason ? reason : "");
	e->mirror = NULL;
	if (e->path == NULL || e->op == NULL || e->reason == NULL) {
		free(e->path);
		free(e->op);
		free(e->reason);
		return BM_ENOMEM;
	}
	r->nerrors++;
	return 0;
}

int
result_add_mirror_error(struct mirror_result *r, const char *mirror,
    const char *path, const char *op, const char *reason)
{
	struct report_error *e;
	size_t		 n = r->nerrors;
	int		 rc;

	if ((rc = result_add_error(r, path, op, reason)) != 0 ||
	    r->nerrors == n || mirror == NULL)
		return rc;
	e = &r->errors[r->nerrors - 1];
	if ((e->mirror = strdup(mirror)) == NULL)
		return BM_ENOMEM;
	return 0;
}

int
result_add_action(struct mirror_result *r, const char *path, const char *op,
    int64_t bytes, const char *reason)
{
	struct report_action *v, *a;
	size_t		 ncap;

	if (r->nactions == r->actions_cap) {
		ncap = r->actions_cap ? r->actions_cap * 2 : 64;
		if ((v = reallocarray(r->actions, ncap, sizeof(*v))) == NULL)
			return BM_ENOMEM;
		r->actions = v;
		r->actions_cap = ncap;
	}
	a = &r->actions[r->nactions];
	if ((a->path = strdup(path)) == NULL)
		return BM_ENOMEM;
	a->op = op;
	a->bytes = bytes;
	a->reason = reason;
	r->nactions++;
	return 0;
}

void
report_human_bytes(uint64_t b, char *buf, size_t len)
{
	const char	*units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double		 v = (double)b;
	size_t		 u = 0;

	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		(void)snprintf(buf, len, "%llu B", (unsigned long long)b);
	else
		(void)snprintf(buf, len, "%.1f %s", v, units[u]);
}

void
report_duration(double secs, char *buf, size_t len)
{
	static const char	 unit[] = "dhms";
	static const long long	 size[] = { 86400, 3600, 60, 1 };
	long long		 s, v;
	size_t			 o = 0, i;
	int			 w;

	if (!(secs > 0))
		secs = 0;
	if (secs < 10 && secs != (double)(long long)secs) {
		(void)snprintf(buf, len, "%.1fs", secs);
		return;
	}
	s = (long long)(secs + 0.5);
	if (s == 0) {
		(void)snprintf(buf, len, "0s");
		return;
	}
	buf[0] = '\0';
	/* The largest unit as is, the next ones in two digits, to the last not 0. */
	for (i = 0; i < 4 && s > 0; i++) {
		v = s / size[i];
		s %= size[i];
		if (v == 0 && o == 0)
			continue;
		w = snprintf(buf + o, len - o, o == 0 ? "%lld%c" : "%02lld%c",
		    v, unit[i]);
		if (w < 0 || (size_t)w >= len - o)
			return;
		o += (size_t)w;
	}
}

const char *
report_net_name(unsigned n)
{
	static const char *const names[REPORT_NETS] = { "tcp", "udt" };

	return n < REPORT_NETS ? names[n] : "?";
}

void
report_rate(uint64_t b, double secs, char *buf, size_t len)
{
	double	 r = secs > 0 ? (double)b / secs : 0;

	if (r >= 1e6)
		(void)snprintf(buf, len, "%.1f MB/s", r / 1e6);
	else if (r >= 1e3)
		(void)snprintf(buf, len, "%.1f KB/s", r / 1e3);
	else
		(void)snprintf(buf, len, "%.0f B/s", r);
}

/* "; udt 3 files, 4.2 MiB in 1.1s (3.8 MB/s)" per transport used. */
static void
summary_nets(const struct mirror_result *r, FILE *fp)
{
	const struct report_net_use *u;
	char		 hb[32], d[32], rt[32];
	const char	*sep = "; ";
	unsigned	 i;

	for (i = 0; i < REPORT_NETS; i++) {
		u = &r->nets[i];
		if (u->files == 0)
			continue;
		report_human_bytes(u->bytes, hb, sizeof(hb));
		report_duration(u->seconds, d, sizeof(d));
		report_rate(u->bytes, u->seconds, rt, sizeof(rt));
		fprintf(fp, "%s%s %lld file%s, %s in %s (%s)", sep,
		    report_net_name(i), (long long)u->files,
		    u->files == 1 ? "" : "s", hb, d, rt);
		sep = ", ";
	}
}

void
report_summary(const struct mirror_result *r, FILE *fp)
{
	char		 hb[64], d[32], rt[32];
	const char	*why = NULL;
	size_t		 i;

	if (strcmp(r->status, "error") == 0) {
		fprintf(fp, "%s: error: not run (%zu error%s)\n",
		    r->mirror != NULL ? r->mirror : "config", r->nerrors,
		    r->nerrors == 1 ? "" : "s");
		return;
	}
	report_human_bytes(r->bytes, hb, sizeof(hb));
	if (r->dry_run) {
		/*
		 * Checks (fetched if changed: a sizeless index) apart; the
		 * bytes known, and how many files have no size.
		 */
		if (r->unsized > 0 && r->unsized >= r->fetched - r->checks)
			(void)snprintf(hb, sizeof(hb), "size unknown");
		else if (r->unsized > 0)
			(void)snprintf(hb + strlen(hb), sizeof(hb) -
			    strlen(hb), " and %lld of unknown size",
			    (long long)r->unsized);
		fprintf(fp, "%s: plan %s: listed %lld, would fetch %lld (%s), ",
		    r->mirror, r->status, (long long)r->listed,
		    (long long)(r->fetched - r->checks), hb);
		if (r->checks > 0)
			fprintf(fp, "check %lld (fetched if changed), ",
			    (long long)r->checks);
		fprintf(fp, "touch %lld, delete %lld\n",
		    (long long)r->touched, (long long)r->deleted);
		return;
	}
	report_duration(r->seconds, d, sizeof(d));
	report_rate(r->bytes, r->seconds, rt, sizeof(rt));
	/* Not ok with no file failed: the run's own reason (pre_publish). */
	for (i = 0; r->failed == 0 && strcmp(r->status, "ok") != 0 &&
	    i < r->nerrors; i++)
		if (r->errors[i].path == NULL || r->errors[i].path[0] == '\0') {
			why = r->errors[i].reason;
			break;
		}
	fprintf(fp, "%s: %s%s%s%s: listed %lld, fetched %lld, touched %lld, "
	    "deleted %lld, failed %lld, %s in %s (%s)",
	    r->mirror, r->status, why != NULL ? " (" : "",
	    why != NULL ? why : "", why != NULL ? ")" : "",
	    (long long)r->listed, (long long)r->fetched,
	    (long long)r->touched, (long long)r->deleted,
	    (long long)r->failed, hb, d, rt);
	summary_nets(r, fp);
	if (r->adopted > 0)
		fprintf(fp, ", adopted %lld", (long long)r->adopted);
	if (r->digest_recorded > 0)
		fprintf(fp, ", digests recorded %lld",
		    (long long)r->digest_recorded);
	fputc('\n', fp);
}

/* Set key to a string that may not be UTF-8. */
static int
json_set_bytes(json_t *obj, const char *key, const char *s)
{
	char	*safe = NULL;
	json_t	*v;
	int	 rc;

	if ((rc = text_utf8_escape(s, &safe)) != 0)
		return rc;
	v = json_string(safe);
	free(safe);
	if (v == NULL || json_object_set_new(obj, key, v) != 0)
		return BM_ENOMEM;
	return 0;
}

/* The "auto" object: what concurrency/streams = auto chose.  NULL: ENOMEM. */
static json_t *
tuned_json(const struct mirror_result *r)
{
	json_t	*a;

	if ((a = json_object()) == NULL)
		return NULL;
	if (json_object_set_new(a, "concurrency",
	    json_integer(r->tuned_concurrency)) != 0 ||
	    json_object_set_new(a, "streams",
	    json_integer(r->tuned_streams)) != 0 ||
	    json_object_set_new(a, "rtt_ms", r->tuned_rtt_ms < 0 ? json_null() :
	    json_real((double)(int64_t)(r->tuned_rtt_ms * 1000 + 0.5) /
	    1000)) != 0 ||
	    json_object_set_new(a, "rate_per_connection",
	    r->tuned_conn_rate > 0 ?
	    json_integer((json_int_t)r->tuned_conn_rate) : json_null()) != 0) {
		json_decref(a);
		return NULL;
	}
	return a;
}

/* The "transports" object of r.  NULL on out-of-memory. */
static json_t *
nets_json(const struct mirror_result *r)
{
	const struct report_net_use *u;
	json_t		*o, *t;
	unsigned	 i;

	if ((o = json_object()) == NULL)
		return NULL;
	for (i = 0; i < REPORT_NETS; i++) {
		u = &r->nets[i];
		if (u->files == 0)
			continue;
		t = json_pack("{s:I,s:I,s:f,s:o}", "files",
		    (json_int_t)u->files, "bytes", (json_int_t)u->bytes,
		    "seconds", (double)(int64_t)(u->seconds * 1000 + 0.5) /
		    1000, "rate", u->seconds > 0 ? json_integer((json_int_t)
		    ((double)u->bytes / u->seconds)) : json_null());
		if (t == NULL || json_object_set_new(o, report_net_name(i),
		    t) != 0) {
			json_decref(o);
			return NULL;
		}
	}
	return o;
}

/* The "actions" array of a plan.  NULL on out-of-memory. */
static json_t *
actions_json(const struct mirror_result *r)
{
	const struct report_action *a;
	json_t	*arr, *o;
	size_t	 i;

	if ((arr = json_array()) == NULL)
		return NULL;
	for (i = 0; i < r->nactions; i++) {
		a = &r->actions[i];
		if ((o = json_object()) == NULL ||
		    json_array_append_new(arr, o) != 0 ||
		    json_set_bytes(o, "path", a->path) != 0 ||
		    json_object_set_new(o, "op", json_string(a->op)) != 0 ||
		    json_object_set_new(o, "bytes", a->bytes < 0 ?
		    json_null() : json_integer((json_int_t)a->bytes)) != 0 ||
		    json_object_set_new(o, "reason",
		    json_string(a->reason)) != 0) {
			json_decref(arr);
			return NULL;
		}
	}
	return arr;
}

/* The "errors" array of r.  NULL on ENOMEM. */
static json_t *
errors_json(const struct mirror_result *r)
{
	json_t	*errs, *e;
	size_t	 i;

	if ((errs = json_array()) == NULL)
		return NULL;
	for (i = 0; i < r->nerrors; i++) {
		if ((e = json_object()) == NULL ||
		    json_array_append_new(errs, e) != 0)
			goto fail;
		if (json_set_bytes(e, "path", r->errors[i].path) != 0 ||
		    json_set_bytes(e, "op", r->errors[i].op) != 0 ||
		    json_set_bytes(e, "reason", r->errors[i].reason) != 0 ||
		    (r->errors[i].mirror != NULL && json_set_bytes(e,
		    "mirror", r->errors[i].mirror) != 0))
			goto fail;
	}
	return errs;
fail:
	json_decref(errs);
	return NULL;
}

/* A mirror not run (status "error"): its name, if any, and the errors. */
static json_t *
error_json(const struct mirror_result *r)
{
	json_t	*o;

	if ((o = json_object()) == NULL)
		return NULL;
	if ((r->mirror != NULL && json_set_bytes(o, "mirror", r->mirror) != 0) ||
	    json_object_set_new(o, "status", json_string(r->status)) != 0 ||
	    json_object_set_new(o, "errors", errors_json(r)) != 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

int64_t
report_peak_rss_kib(void)
{
	struct rusage	 ru;

	if (getrusage(RUSAGE_SELF, &ru) != 0)
		return -1;
	return (int64_t)ru.ru_maxrss;
}

json_t *
report_result_json(const struct mirror_result *r)
{
	json_t	*o, *errs;

	if (strcmp(r->status, "error") == 0)
		return error_json(r);
	if ((o = json_object()) == NULL)
		return NULL;
	if ((errs = errors_json(r)) == NULL)
		goto fail;
	if (json_set_bytes(o, "mirror", r->mirror) != 0 ||
	    json_object_set_new(o, "run", json_integer(r->run)) ||
	    json_object_set_new(o, "status", json_string(r->status)) ||
	    json_object_set_new(o, "dry_run", json_boolean(r->dry_run)) ||
	    json_object_set_new(o, "listed", json_integer(r->listed)) ||
	    json_object_set_new(o, "fetched", json_integer(r->fetched)) ||
	    json_object_set_new(o, "touched", json_integer(r->touched)) ||
	    json_object_set_new(o, "deleted", json_integer(r->deleted)) ||
	    json_object_set_new(o, "failed", json_integer(r->failed)) ||
	    json_object_set_new(o, "bytes",
	    json_integer((json_int_t)r->bytes)) ||
	    json_object_set_new(o, "seconds",
	    json_real((double)(int64_t)(r->seconds * 1000 + 0.5) / 1000)) ||
	    json_object_set_new(o, "peak_rss_kib",
	    json_integer(report_peak_rss_kib()))) {
		json_decref(errs);
		goto fail;
	}
	/* Only resync --adopt adopts: other runs keep DESIGN.md's keys. */
	if (r->adopted > 0 && json_object_set_new(o, "adopted",
	    json_integer(r->adopted)) != 0) {
		json_decref(errs);
		goto fail;
	}
	/* A rebuilt manifest: where the damaged one (and its history) is. */
	if (r->kept_manifest != NULL && json_set_bytes(o, "kept_manifest",
	    r->kept_manifest) != 0) {
		json_decref(errs);
		goto fail;
	}
	/* Only resync --checksum records digests without a fetch. */
	if (r->digest_recorded > 0 && json_object_set_new(o,
	    "digest_recorded", json_integer(r->digest_recorded)) != 0) {
		json_decref(errs);
		goto fail;
	}
	if (r->verify && (json_object_set_new(o, "digest_checked",
	    json_integer(r->digest_checked)) != 0 ||
	    json_object_set_new(o, "size_only",
	    json_integer(r->size_only)) != 0)) {
		json_decref(errs);
		goto fail;
	}
	if (r->tuned && json_object_set_new(o, "auto", tuned_json(r)) != 0) {
		json_decref(errs);
		goto fail;
	}
	if (!r->dry_run && json_object_set_new(o, "transports",
	    nets_json(r)) != 0) {
		json_decref(errs);
		goto fail;
	}
	if (r->dry_run && json_object_set_new(o, "actions",
	    actions_json(r)) != 0) {
		json_decref(errs);
		goto fail;
	}
	if (json_object_set_new(o, "errors", errs) != 0)
		goto fail;
	if (json_object_set_new(o, "post_sync", r->post_sync_status < 0 ?
	    json_null() : json_integer(r->post_sync_status)) != 0)
		goto fail;
	return o;
fail:
	json_decref(o);
	return NULL;
}

int
report_json(struct mirror_result *const *results, size_t n, FILE *fp)
{
	json_t	*arr, *o;
	size_t	 i;
	int	 rc = BM_ENOMEM;

	if ((arr = json_array()) == NULL)
		return BM_ENOMEM;
	for (i = 0; i < n; i++) {
		if ((o = report_result_json(results[i])) == NULL)
			goto out;
		if (json_array_append_new(arr, o) != 0)
			goto out;
	}
	if (json_dumpf(arr, fp, JSON_INDENT(2) | JSON_ENSURE_ASCII |
	    JSON_REAL_PRECISION(12)) != 0)
		goto out;
	fputc('\n', fp);
	rc = 0;
out:
	json_decref(arr);
	return rc;
}

struct progress {
	char		*name;		/* owned: mirror name */
	int64_t		 total_files;
	uint64_t	 total_bytes;
	int64_t		 start_ns;	/* monotonic */
	int64_t		 last_ns;	/* last redraw, monotonic */
	bool		 drawn;		/* a line is on the screen */
	unsigned	 nets;		/* bit n: transport n carried a file */
	bool		 redraw;	/* a new transport: draw at once */
	int64_t		 files_base;	/* files done in passes that ended */
	uint64_t	 bytes_base;	/* bytes done in passes that ended */
	int64_t		 files_pass;	/* this pass's, as last reported */
	uint64_t	 bytes_pass;
};

struct progress *
progress_new(const char *name, int64_t total_files, uint64_t total_bytes,
    bool enabled)
{
	struct progress	*p;

	if ((p = calloc(1, sizeof(*p))) == NULL)
		return NULL;
	if (!enabled || !isatty(STDERR_FILENO) || log_to_journal()) {
		p->name = NULL;	/* disabled */
		return p;
	}
	if ((p->name = strdup(name)) == NULL) {
		free(p);
		return NULL;
	}
	p->total_files = total_files;
	p->total_bytes = total_bytes;
	p->start_ns = clock_mono_ns();
	return p;
}

void
progress_net(struct progress *p, unsigned n)
{
	if (p == NULL || p->name == NULL || n >= REPORT_NETS ||
	    (p->nets & (1u << n)) != 0)
		return;
	p->nets |= 1u << n;
	p->redraw = true;
}

/* ", over tcp and udt": the transports that carried files so far. */
static void
progress_nets(const struct progress *p)
{
	const char	*sep = ", over ";
	unsigned	 i, left = (unsigned)__builtin_popcount(p->nets);

	for (i = 0; i < REPORT_NETS; i++) {
		if ((p->nets & (1u << i)) == 0)
			continue;
		fprintf(stderr, "%s%s", sep, report_net_name(i));
		sep = --left == 1 ? " and " : ", ";
	}
}

void
progress_update(struct progress *p, int64_t files_done, uint64_t bytes_done)
{
	char	 done[32], total[32], eta[32];
	int64_t	 now;
	double	 secs, rate;

	if (p == NULL || p->name == NULL)
		return;
	p->files_pass = files_done;
	p->bytes_pass = bytes_done;
	files_done += p->files_base;
	bytes_done += p->bytes_base;
	now = clock_mono_ns();
	if (p->drawn && !p->redraw && now - p->last_ns < 500000000LL)
		return;
	p->redraw = false;
	p->last_ns = now;
	secs = (double)(now - p->start_ns) / 1e9;
	rate = secs > 0 ? (double)bytes_done / secs : 0;
	report_human_bytes(bytes_done, done, sizeof(done));
	report_human_bytes(p->total_bytes, total, sizeof(total));
	if (rate > 0 && p->total_bytes > bytes_done) {
		long s = (long)((double)(p->total_bytes - bytes_done) / rate);
		(void)snprintf(eta, sizeof(eta), "%ld:%02ld:%02ld", s / 3600,
		    s / 60 % 60, s % 60);
	} else
		(void)snprintf(eta, sizeof(eta), "-");
	fprintf(stderr, "\r\033[K%s: %lld/%lld files, %s/%s, %.1f MB/s, "
	    "ETA %s", p->name, (long long)files_done,
	    (long long)p->total_files, done, total, rate / 1e6, eta);
	progress_nets(p);
	(void)fflush(stderr);
	p->drawn = true;
	log_progress_drawn(true);
}

void
progress_pass_end(struct progress *p)
{
	if (p == NULL)
		return;
	p->files_base += p->files_pass;
	p->bytes_base += p->bytes_pass;
	p->files_pass = 0;
	p->bytes_pass = 0;
}

void
progress_free(struct progress *p)
{
	if (p == NULL)
		return;
	if (p->drawn) {
		fputs("\r\033[K", stderr);
		(void)fflush(stderr);
		log_progress_drawn(false);
	}
	free(p->name);
	free(p);
}
