/*
 * Unit tests for agent/metrics.c: the merge keeps other mirrors' samples
 * and replaces ours, keeps our last-success sample when it is unknown,
 * escapes label values, keeps other programs' lines, drops samples of
 * mirrors no longer configured; metrics_write()
 * from several processes at once (the PATH.lock flock) loses no mirror.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "biomirror/metrics.h"
#include "tap.h"

#define NPROC	6
#define NITER	40

static struct metrics_run
run_of(const char *mirror, int64_t fetched)
{
	struct metrics_run r;

	memset(&r, 0, sizeof(r));
	r.mirror = mirror;
	r.end_ns = 1700000000123456789LL;
	r.seconds = 1.5;
	r.ok = 1;
	r.fetched = fetched;
	r.bytes = 1000;
	r.last_success_ns = r.end_ns;
	return r;
}

static int
count(const char *hay, const char *needle)
{
	int	 n = 0;

	while ((hay = strstr(hay, needle)) != NULL) {
		n++;
		hay++;
	}
	return n;
}

static void
test_merge(void)
{
	struct metrics_run r = run_of("b", 7);
	char	*a = NULL, *ab = NULL, *ab2 = NULL, *x = NULL;
	size_t	 alen, ablen, ab2len, xlen;

	is_int(metrics_merge(NULL, 0, &r, &a, &alen), 0, "merge into nothing");
	is_int(count(a, "{mirror=\"b\"}"), 11, "11 samples of b");
	is_int(count(a, "# HELP "), 11, "11 HELP lines");
	is_int(count(a, "# TYPE "), 11, "11 TYPE lines");
	ok(strstr(a, "biomirror_last_run_timestamp_seconds{mirror=\"b\"} "
	    "1700000000.123\n") != NULL, "timestamp in seconds, ms precision");
	ok(strstr(a, "biomirror_last_run_fetched_files{mirror=\"b\"} 7\n") !=
	    NULL, "fetched files");
	ok(strstr(a, "biomirror_last_run_duration_seconds{mirror=\"b\"} "
	    "1.500\n") != NULL, "duration");
	ok(strstr(a, "# HELP biomirror_last_run_fetched_files ") <
	    strstr(a, "biomirror_last_run_fetched_files{"),
	    "HELP before samples");
	is_int(a[alen - 1], '\n', "ends with a newline");

	r = run_of("a", 3);
	is_int(metrics_merge(a, alen, &r, &ab, &ablen), 0, "merge a into b's");
	is_int(count(ab, "{mirror=\"b\"}"), 11, "b kept");
	is_int(count(ab, "{mirror=\"a\"}"), 11, "a added");
	is_int(count(ab, "# HELP "), 11, "still one HELP per family");
	ok(strstr(ab, "biomirror_last_run_fetched_files{mirror=\"a\"} 3\n"
	    "biomirror_last_run_fetched_files{mirror=\"b\"} 7\n") != NULL,
	    "samples sorted by mirror within a family");

	/* a again, failed, last success unknown: its old one is kept. */
	r = run_of("a", 0);
	r.ok = 0;
	r.exit_code = 3;
	r.end_ns = 1700000100000000000LL;
	r.last_success_ns = -1;
	is_int(metrics_merge(ab, ablen, &r, &ab2, &ab2len), 0, "merge again");
	is_int(count(ab2, "{mirror=\"a\"}"), 11, "a replaced, not doubled");
	ok(strstr(ab2, "biomirror_last_success_timestamp_seconds{mirror=\"a\"}"
	    " 1700000000.123\n") != NULL, "unknown last success kept");
	ok(strstr(ab2, "biomirror_last_run_exit_code{mirror=\"a\"} 3\n") !=
	    NULL, "exit code replaced");
	ok(strstr(ab2, "biomirror_last_run_success{mirror=\"a\"} 0\n") !=
	    NULL, "success 0");
	free(a);
	free(ab);
	free(ab2);

	/*
	 * Lines of other programs are kept, first and in order; broken
	 * samples of our families and our old HELP/TYPE lines are dropped.
	 */
	{
		static const char old[] =
		    "# a comment of the admin's\n"
		    "# HELP other_metric x\n# TYPE other_metric gauge\n"
		    "other_metric{job=\"n\"} 1\n"
		    "\n"
		    "# HELP biomirror_last_run_success old help\n"
		    "# TYPE biomirror_last_run_success gauge\n"
		    "biomirror_last_run_success{mirror=\"z\"} 1\n"
		    "biomirror_last_run_success{mirror=\"y\"} one\n"
		    "biomirror_last_run_success{mirror=\"w\\q\"} 1\n"
		    "biomirror_last_run_success{mirror=\"v\"}\n"
		    "biomirror_last_run_success 5\n"
		    "biomirror_last_run_successor 5\n"
		    "biomirror_last_run_success{mirror=\"u\"} 1";
		static const char head[] = "# a comment of the admin's\n"
		    "# HELP other_metric x\n# TYPE other_metric gauge\n"
		    "other_metric{job=\"n\"} 1\n\n"
		    "biomirror_last_run_successor 5\n# HELP biomirror_";
		r = run_of("q\"\\\nq", 1);
		is_int(metrics_merge(old, sizeof(old) - 1, &r, &x, &xlen), 0,
		    "merge into a shared file");
		ok(strncmp(x, head, sizeof(head) - 1) == 0,
		    "foreign lines kept first, in order");
		ok(strstr(x, "{mirror=\"z\"} 1\n") != NULL, "good line kept");
		ok(strstr(x, "{mirror=\"u\"} 1\n") != NULL,
		    "a last line without newline kept");
		ok(strstr(x, "\"y\"") == NULL && strstr(x, "\"v\"") == NULL &&
		    strstr(x, "w\\q") == NULL && strstr(x, "success 5") ==
		    NULL, "broken lines of our families dropped");
		ok(strstr(x, "old help") == NULL, "our old HELP line dropped");
		is_int(count(x, "# HELP "), 12, "one HELP per family, and "
		    "other_metric's");
		ok(strstr(x, "{mirror=\"q\\\"\\\\\\nq\"}") != NULL,
		    "label value escaped (quote, backslash, newline)");
		free(x);
	}

	/* Samples of mirrors no longer in the config are dropped. */
	{
		static const char *const names[] = { "a", "c" };
		char	*abc = NULL;
		size_t	 abclen;

		r = run_of("b", 1);
		is_int(metrics_merge(NULL, 0, &r, &a, &alen), 0, "b");
		r = run_of("gone", 1);
		is_int(metrics_merge(a, alen, &r, &ab, &ablen), 0, "gone");
		r = run_of("a", 1);
		r.mirrors = names;
		r.nmirrors = 2;
		is_int(metrics_merge(ab, ablen, &r, &abc, &abclen), 0,
		    "a, with the config's names");
		is_int(count(abc, "{mirror=\"a\"}"), 11, "a written");
		is_int(count(abc, "{mirror=\"b\"}"), 0, "b (not configured) "
		    "dropped");
		is_int(count(abc, "{mirror=\"gone\"}"), 0, "gone dropped");
		free(a);
		free(ab);
		free(abc);
	}
}

/* NPROC processes write their mirror NITER times each, at once. */
static void
test_concurrent(void)
{
	char	 dir[] = "/tmp/bm-metrics.XXXXXX", path[256], name[16];
	char	 cmd[300], *buf = NULL;
	struct stat st;
	struct metrics_run r;
	FILE	*fp;
	size_t	 len = 0;
	pid_t	 pids[NPROC];
	int	 i, j, wst, bad = 0;

	if (!ok(mkdtemp(dir) != NULL, "mkdtemp"))
		return;
	(void)snprintf(path, sizeof(path), "%s/bm.prom", dir);
	for (i = 0; i < NPROC; i++) {
		if ((pids[i] = fork()) == 0) {
			char	 err[512];

			(void)snprintf(name, sizeof(name), "m%d", i);
			for (j = 0; j < NITER; j++) {
				r = run_of(name, j);
				if (metrics_write(path, &r, err,
				    sizeof(err)) != 0)
					_exit(1);
			}
			_exit(0);
		}
	}
	for (i = 0; i < NPROC; i++)
		if (pids[i] < 0 || waitpid(pids[i], &wst, 0) == -1 ||
		    !WIFEXITED(wst) || WEXITSTATUS(wst) != 0)
			bad++;
	is_int(bad, 0, "every writer succeeded");
	if ((fp = fopen(path, "r")) != NULL) {
		buf = calloc(1, 1 << 20);
		if (buf != NULL)
			len = fread(buf, 1, (1 << 20) - 1, fp);
		(void)fclose(fp);
	}
	ok(buf != NULL && len > 0, "file written");
	for (i = 0; buf != NULL && i < NPROC; i++) {
		char	 want[128];

		(void)snprintf(want, sizeof(want), "biomirror_last_run_fetched_"
		    "files{mirror=\"m%d\"} %d\n", i, NITER - 1);
		ok(strstr(buf, want) != NULL, "m%d's last write kept", i);
	}
	ok(stat(path, &st) == 0 && (st.st_mode & 0777) == 0644, "mode 0644");
	free(buf);
	(void)unlink(path);
	(void)snprintf(cmd, sizeof(cmd), "%s.lock", path);
	(void)unlink(cmd);
	ok(rmdir(dir) == 0, "no temp file left beside the file");
}

int
main(void)
{
	test_merge();
	test_concurrent();
	return done_testing();
}
