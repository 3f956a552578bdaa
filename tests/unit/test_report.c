/*
 * Unit tests for agent/report.c: the --json array built from run results
 * (names that are not UTF-8 escaped, test_text.c), also of mirrors not
 * run for config errors (status "error").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "biomirror/report.h"
#include "tap.h"

static void
test_json(void)
{
	struct mirror_result *r;
	char		*buf = NULL;
	size_t		 len = 0;
	FILE		*fp;
	json_t		*j;
	json_error_t	 err;

	if (!ok((r = result_new("m")) != NULL, "result_new"))
		return;
	r->fetched = 3;
	r->bytes = 12345;
	r->seconds = 1.23456789;
	ok(result_add_error(r, "\xed\xa0\x80 odd", "fetch", "HTTP 403") == 0,
	    "add an error with a surrogate in its path");
	ok(result_add_error(r, "caf\xe9", "vanished", "HTTP 404") == 0,
	    "add an error with a Latin-1 path");
	if ((fp = open_memstream(&buf, &len)) == NULL) {
		ok(0, "open_memstream");
		result_free(r);
		return;
	}
	ok(report_json(&r, 1, fp) == 0, "report_json");
	fclose(fp);
	j = json_loads(buf, 0, &err);
	if (ok(j != NULL, "the output is valid JSON")) {
		json_t *o = json_array_get(j, 0);
		is_int(json_integer_value(json_object_get(o, "fetched")), 3,
		    "fetched");
		is_str(json_string_value(json_object_get(json_array_get(
		    json_object_get(o, "errors"), 0), "path")),
		    "\\xED\\xA0\\x80 odd", "the surrogate path, escaped");
		is_str(json_string_value(json_object_get(json_array_get(
		    json_object_get(o, "errors"), 1), "path")),
		    "caf\\xE9", "the Latin-1 path, escaped");
		ok(json_real_value(json_object_get(o, "seconds")) == 1.235,
		    "seconds rounded to the millisecond");
		json_decref(j);
	}
	free(buf);
	result_free(r);
}

/* digest_recorded: in the summary and --json only when > 0. */
static void
test_digest_recorded(void)
{
	struct mirror_result *r;
	char		*buf = NULL;
	size_t		 len = 0;
	FILE		*fp;
	json_t		*j;
	json_error_t	 err;
	int		 pass;

	if (!ok((r = result_new("m")) != NULL, "result_new"))
		return;
	r->status = "ok";
	for (pass = 0; pass < 2; pass++) {
		r->digest_recorded = pass == 0 ? 0 : 4;
		buf = NULL;
		len = 0;
		if ((fp = open_memstream(&buf, &len)) == NULL)
			break;
		report_summary(r, fp);
		fclose(fp);
		is_str(buf, pass == 0 ? "m: ok: listed 0, fetched 0, touched 0, "
		    "deleted 0, failed 0, 0 B in 0s (0 B/s)\n" :
		    "m: ok: listed 0, fetched 0, touched 0, deleted 0, "
		    "failed 0, 0 B in 0s (0 B/s), digests recorded 4\n",
		    "summary with %d digests recorded", pass == 0 ? 0 : 4);
		free(buf);
		buf = NULL;
		if ((fp = open_memstream(&buf, &len)) == NULL)
			break;
		ok(report_json(&r, 1, fp) == 0, "report_json");
		fclose(fp);
		j = json_loads(buf, 0, &err);
		if (ok(j != NULL, "valid JSON")) {
			json_t *v = json_object_get(json_array_get(j, 0),
			    "digest_recorded");
			if (pass == 0)
				ok(v == NULL, "no digest_recorded when 0");
			else
				is_int(json_integer_value(v), 4,
				    "digest_recorded 4");
			json_decref(j);
		}
		free(buf);
		buf = NULL;
	}
	result_free(r);
}

/*
 * The transports that carried files: their rates in the summary, and the
 * "transports" object of --json (only those used; none for a plan).
 */
static void
test_nets(void)
{
	struct mirror_result *r;
	char		*buf = NULL;
	size_t		 len = 0;
	FILE		*fp;
	json_t		*j, *t, *u;
	json_error_t	 err;

	if (!ok((r = result_new("m")) != NULL, "result_new"))
		return;
	r->fetched = 3;
	r->bytes = 3000000;
	r->seconds = 2;
	r->nets[REPORT_NET_UDT].files = 2;
	r->nets[REPORT_NET_UDT].bytes = 2000000;
	r->nets[REPORT_NET_UDT].seconds = 0.5;
	r->nets[REPORT_NET_TCP].files = 1;
	r->nets[REPORT_NET_TCP].bytes = 1000000;
	r->nets[REPORT_NET_TCP].seconds = 1;
	if ((fp = open_memstream(&buf, &len)) == NULL)
		goto out;
	report_summary(r, fp);
	fclose(fp);
	is_str(buf, "m: ok: listed 0, fetched 3, touched 0, deleted 0, "
	    "failed 0, 2.9 MiB in 2s (1.5 MB/s); tcp 1 file, 976.6 KiB in "
	    "1s (1.0 MB/s), udt 2 files, 1.9 MiB in 0.5s (4.0 MB/s)\n",
	    "summary: the rate of each transport");
	free(buf);
	buf = NULL;
	if ((fp = open_memstream(&buf, &len)) == NULL)
		goto out;
	ok(report_json(&r, 1, fp) == 0, "report_json");
	fclose(fp);
	j = json_loads(buf, 0, &err);
	t = json_object_get(json_array_get(j, 0), "transports");
	is_int(json_object_size(t), 2, "json: two transports");
	u = json_object_get(t, "udt");
	is_int(json_integer_value(json_object_get(u, "files")), 2, "udt files");
	is_int(json_integer_value(json_object_get(u, "bytes")), 2000000,
	    "udt bytes");
	ok(json_real_value(json_object_get(u, "seconds")) == 0.5,
	    "udt seconds");
	is_int(json_integer_value(json_object_get(u, "rate")), 4000000,
	    "udt rate, bytes/s");
	json_decref(j);
	free(buf);
	buf = NULL;
	/* Nothing carried: an empty object; no time: rate null. */
	r->nets[REPORT_NET_TCP].files = 0;
	r->nets[REPORT_NET_UDT].seconds = 0;
	if ((fp = open_memstream(&buf, &len)) == NULL)
		goto out;
	(void)report_json(&r, 1, fp);
	fclose(fp);
	j = json_loads(buf, 0, &err);
	t = json_object_get(json_array_get(j, 0), "transports");
	is_int(json_object_size(t), 1, "json: tcp left out");
	ok(json_is_null(json_object_get(json_object_get(t, "udt"), "rate")),
	    "json: rate null without a time");
	json_decref(j);
	is_str(report_net_name(REPORT_NETS), "?", "name out of range");
out:
	free(buf);
	result_free(r);
}

/* A result of config errors: {"mirror" if named, "status", "errors"}. */
static void
test_error_result(void)
{
	struct mirror_result *r;
	const char	*key;
	json_t		*o, *v, *e;
	size_t		 n = 0;

	if (!ok((r = result_new(NULL)) != NULL, "result_new(NULL)"))
		return;
	r->status = "error";
	ok(result_add_error(r, "/etc/b.conf:7", "config", "bad") == 0,
	    "add a config error");
	ok(result_add_mirror_error(r, "nt", "/etc/b.conf:9", "config",
	    "worse") == 0, "add a section's config error");
	if (ok((o = report_result_json(r)) != NULL, "report_result_json")) {
		json_object_foreach(o, key, v)
			n++;
		is_int(n, 2, "only status and errors, no mirror");
		is_str(json_string_value(json_object_get(o, "status")),
		    "error", "status error");
		e = json_array_get(json_object_get(o, "errors"), 0);
		is_str(json_string_value(json_object_get(e, "path")),
		    "/etc/b.conf:7", "path FILE:LINE");
		is_str(json_string_value(json_object_get(e, "op")), "config",
		    "op config");
		ok(json_object_get(e, "mirror") == NULL, "an error of no mirror");
		e = json_array_get(json_object_get(o, "errors"), 1);
		is_str(json_string_value(json_object_get(e, "mirror")), "nt",
		    "a section's error names its mirror");
		is_str(json_string_value(json_object_get(e, "path")),
		    "/etc/b.conf:9", "its path");
		json_decref(o);
	}
	result_free(r);
	if (!ok((r = result_new("blast")) != NULL, "result_new(blast)"))
		return;
	r->status = "error";
	if (ok((o = report_result_json(r)) != NULL, "named error result")) {
		is_str(json_string_value(json_object_get(o, "mirror")),
		    "blast", "mirror named");
		ok(json_object_get(o, "run") == NULL, "no run counts");
		json_decref(o);
	}
	result_free(r);
}

/* A plan's "actions": in --json only for a dry run; bytes null unknown. */
static void
test_actions(void)
{
	struct mirror_result *r;
	char		*buf = NULL;
	size_t		 len = 0;
	FILE		*fp;
	json_t		*j, *o, *a;
	json_error_t	 err;
	int		 pass;

	if (!ok((r = result_new("m")) != NULL, "result_new"))
		return;
	r->status = "refused";
	ok(result_add_action(r, "a/x.bin", "fetch", 300, "new") == 0,
	    "add a fetch");
	ok(result_add_action(r, "caf\xe9", "delete", 100, "gone upstream") == 0,
	    "add a delete with a Latin-1 path");
	ok(result_add_action(r, "plain", "fetch", -1, "new") == 0,
	    "add a fetch of unknown size");
	is_int(r->nactions, 3, "three actions kept");
	for (pass = 0; pass < 2; pass++) {
		r->dry_run = pass == 1;
		buf = NULL;
		len = 0;
		if ((fp = open_memstream(&buf, &len)) == NULL)
			break;
		ok(report_json(&r, 1, fp) == 0, "report_json");
		fclose(fp);
		j = json_loads(buf, 0, &err);
		free(buf);
		if (!ok(j != NULL, "valid JSON"))
			continue;
		o = json_array_get(j, 0);
		a = json_object_get(o, "actions");
		if (pass == 0) {
			ok(a == NULL, "no actions when not a dry run");
			json_decref(j);
			continue;
		}
		is_int(json_array_size(a), 3, "dry run: three actions");
		is_str(json_string_value(json_object_get(json_array_get(a, 0),
		    "path")), "a/x.bin", "action 0 path");
		is_str(json_string_value(json_object_get(json_array_get(a, 0),
		    "op")), "fetch", "action 0 op");
		is_int(json_integer_value(json_object_get(json_array_get(a, 0),
		    "bytes")), 300, "action 0 bytes");
		is_str(json_string_value(json_object_get(json_array_get(a, 0),
		    "reason")), "new", "action 0 reason");
		is_str(json_string_value(json_object_get(json_array_get(a, 1),
		    "path")), "caf\\xE9", "action 1 path escaped");
		is_str(json_string_value(json_object_get(json_array_get(a, 1),
		    "op")), "delete", "action 1 op");
		ok(json_is_null(json_object_get(json_array_get(a, 2), "bytes")),
		    "action 2: bytes null when unknown");
		json_decref(j);
	}
	result_free(r);
}

/* Durations as an admin reads them: "9m19s", not "559 s". */
static void
test_duration(void)
{
	static const struct { double s; const char *want; } cases[] = {
		{ 0, "0s" }, { 0.44, "0.4s" }, { 2, "2s" }, { 45.4, "45s" },
		{ 559, "9m19s" }, { 600, "10m" }, { 3600, "1h" },
		{ 7199, "1h59m59s" }, { 7260, "2h01m" }, { 604800, "7d" },
		{ 90061, "1d01h01m01s" }, { -3, "0s" }
	};
	char	 buf[32];
	size_t	 i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		report_duration(cases[i].s, buf, sizeof(buf));
		is_str(buf, cases[i].want, "duration %g", cases[i].s);
	}
}

/* Rates: MB/s from 1 MB/s, KB/s from 1 kB/s, else B/s. */
static void
test_rate(void)
{
	static const struct { uint64_t b; double s; const char *want; }
	    cases[] = {
		{ 3800000, 1, "3.8 MB/s" }, { 1000000, 1, "1.0 MB/s" },
		{ 5018, 0.2, "25.1 KB/s" }, { 999, 1, "999 B/s" },
		{ 4, 0.1, "40 B/s" }, { 5, 0, "0 B/s" }, { 0, 2, "0 B/s" }
	};
	char	 buf[32];
	size_t	 i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		report_rate(cases[i].b, cases[i].s, buf, sizeof(buf));
		is_str(buf, cases[i].want, "rate %llu B in %g s",
		    (unsigned long long)cases[i].b, cases[i].s);
	}
}

/* The summary of r into a new string (free it), NULL on failure. */
static char *
summary_of(const struct mirror_result *r)
{
	char	*buf = NULL;
	size_t	 len = 0;
	FILE	*fp;

	if ((fp = open_memstream(&buf, &len)) == NULL)
		return NULL;
	report_summary(r, fp);
	fclose(fp);
	return buf;
}

/*
 * A plan's checks apart from its fetches, a sizeless fetch as such; a
 * failed run with no file failed says the run's reason.
 */
static void
test_plan_words(void)
{
	struct mirror_result *r;
	char		*s;

	if (!ok((r = result_new("m")) != NULL, "result_new"))
		return;
	r->status = "ok";
	r->dry_run = true;
	r->listed = 12;
	r->fetched = 11;
	r->checks = 11;
	s = summary_of(r);
	is_str(s, "m: plan ok: listed 12, would fetch 0 (0 B), check 11 "
	    "(fetched if changed), touch 0, delete 0\n", "plan of checks");
	free(s);
	r->checks = 0;
	r->unsized = 11;
	s = summary_of(r);
	is_str(s, "m: plan ok: listed 12, would fetch 11 (size unknown), "
	    "touch 0, delete 0\n", "plan of sizeless fetches");
	free(s);
	r->unsized = 2;
	r->bytes = 300;
	s = summary_of(r);
	is_str(s, "m: plan ok: listed 12, would fetch 11 (300 B and 2 of "
	    "unknown size), touch 0, delete 0\n", "plan, 2 sizeless");
	free(s);
	r->dry_run = false;
	r->status = "failed";
	r->fetched = 0;
	r->bytes = 0;
	r->seconds = 1;
	ok(result_add_error(r, "", "publish", "pre_publish: exited with "
	    "status 1: snapshot not published") == 0, "result_add_error");
	s = summary_of(r);
	is_str(s, "m: failed (pre_publish: exited with status 1: snapshot not "
	    "published): listed 12, fetched 0, touched 0, deleted 0, failed "
	    "0, 0 B in 1s (0 B/s)\n", "failed run: its reason");
	free(s);
	result_free(r);
}

int
main(void)
{
	test_rate();
	test_plan_words();
	test_json();
	test_duration();
	test_digest_recorded();
	test_nets();
	test_error_result();
	test_actions();
	return done_testing();
}
