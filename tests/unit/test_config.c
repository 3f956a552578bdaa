/*
 * Unit tests for agent/config.c: defaults, every key with good and bad
 * values, exact "FILE:LINE: reason" messages, inih's traps (long lines,
 * continuation lines, keys outside sections), the size parser and the
 * per-run override path (mirror_conf_set, mirror_conf_clear), and
 * config_load_all(): every error listed, a bad section spoiling only its
 * own mirror.  Config files are written into
 * a mkdtemp(3) directory that is removed at the end.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "biomirror/config.h"
#include "biomirror/error.h"
#include "biomirror/listing.h"
#include "tap.h"

#define HEAD	"[m]\nsource = https://h.example/x/\ndest = /srv/m\n"

struct ctx {
	char	 dir[64];		/* the mkdtemp directory */
	char	 path[128];		/* dir/t.conf */
	char	 err[1024];		/* last error message */
};

static void
write_file(const char *path, const char *text)
{
	int	 fd;

	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd == -1 ||
	    write(fd, text, strlen(text)) != (ssize_t)strlen(text)) {
		perror(path);
		exit(1);
	}
	(void)close(fd);
}

static void
write_conf(struct ctx *t, const char *text, size_t len)
{
	int	 fd;

	fd = open(t->path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd == -1 || write(fd, text, len) != (ssize_t)len) {
		perror(t->path);
		exit(1);
	}
	(void)close(fd);
}

/* Load text as a config file; *ret only set on success. */
static int
load(struct ctx *t, const char *text, struct config **ret)
{
	write_conf(t, text, strlen(text));
	t->err[0] = '\0';
	return config_load(t->path, ret, t->err, sizeof(t->err));
}

/* Expect text to fail with exactly "PATH:line: msg". */
static void
fails(struct ctx *t, const char *text, unsigned line, const char *msg)
{
	struct config	*c = NULL;
	char		 want[1024];
	int		 rc;

	rc = load(t, text, &c);
	snprintf(want, sizeof(want), "%s:%u: %s", t->path, line, msg);
	is_int(rc, BM_EINVAL, "rejected: %s", msg);
	is_str(t->err, want, "message: %s", msg);
	ok(c == NULL, "no config returned: %s", msg);
	config_free(c);
}

/* Expect HEAD + "key = value" to fail on line 4 with msg. */
static void
bad_value(struct ctx *t, const char *key, const char *value, const char *msg)
{
	char	 text[1024];

	snprintf(text, sizeof(text), HEAD "%s = %s\n", key, value);
	fails(t, text, 4, msg);
}

/* Load HEAD + "key = value"; return the mirror (caller frees *cp). */
static struct mirror_conf *
good_value(struct ctx *t, const char *key, const char *value,
    struct config **cp)
{
	char	 text[1024];
	int	 rc;

	snprintf(text, sizeof(text), HEAD "%s = %s\n", key, value);
	*cp = NULL;
	rc = load(t, text, cp);
	if (!ok(rc == 0 && *cp != NULL && (*cp)->nmirrors == 1,
	    "accepted %s = %s", key, value)) {
		printf("#   rc %d: %s\n", rc, t->err);
		return NULL;
	}
	return (*cp)->mirrors[0];
}

static void
test_defaults(struct ctx *t)
{
	struct config		*c = NULL;
	struct mirror_conf	*m;

	is_int(load(t, "[m]\nsource = https://h.example/x\ndest = /srv/d\n",
	    &c), 0, "minimal mirror loads");
	if (c == NULL)
		return;
	is_str(c->path, t->path, "path recorded");
	ok(c->state_dir == NULL, "state_dir default NULL");
	is_int(c->log_level, 0, "log_level default info (0)");
	ok(c->user_agent == NULL, "global user_agent default NULL");
	is_int(c->nmirrors, 1, "one mirror");
	m = c->mirrors[0];
	is_str(m->name, "m", "name from section");
	is_int(m->line, 1, "header line");
	is_str(m->source, "https://h.example/x/", "trailing / added");
	is_str(m->dest, "/srv/d", "dest kept");
	is_int(m->ninclude, 0, "no include");
	is_int(m->nexclude, 0, "no exclude");
	is_int(m->concurrency, 8, "concurrency 8");
	is_int(m->streams, 4, "streams 4");
	ok(!m->concurrency_auto && !m->streams_auto, "auto is opt-in");
	is_int(m->min_split, 16777216, "min_split 16M");
	is_int(m->max_connections, 0, "max_connections 0 (by scheme)");
	is_int(m->transport, TRANSPORT_TCP, "transport tcp");
	is_int(m->delete, 0, "delete no");
	is_int(m->max_delete, 10, "max_delete 10");
	is_int(m->max_delete_pct, 1, "max_delete is 10%%");
	is_int(m->verify, VERIFY_SIDECAR, "verify sidecar by default");
	ok(!m->verify_set, "verify not given");
	is_int(m->publish, PUBLISH_FILE, "publish file");
	is_int(m->bwlimit, 0, "bwlimit 0");
	is_int(m->retries, 5, "retries 5");
	is_int(m->timeout, 60, "timeout 60");
	is_int(m->stall_timeout, 120, "stall_timeout 120");
	is_int(m->hook_timeout, 3600, "hook_timeout 3600");
	is_int(m->listing_tz.kind, TZ_UTC, "listing_timezone UTC");
	is_int(m->ftp_tz.kind, TZ_UTC, "ftp_timezone UTC");
	is_int(m->file_mode, 0644, "file_mode 0644");
	is_int(m->dir_mode, 0755, "dir_mode 0755");
	ok(m->ca_file == NULL && m->user_agent == NULL &&
	    m->post_sync == NULL && m->metrics_file == NULL,
	    "optional strings NULL");
	ok(config_find(c, "m") == m, "config_find finds m");
	ok(config_find(c, "M") == NULL, "config_find is exact");
	ok(config_find(c, "nope") == NULL, "config_find NULL for unknown");
	config_free(c);
}

static const char full_conf[] =
    "; every key\n"
    "[global]\n"
    "state_dir = /var/lib/bm   ; inline comment\n"
    "log_level = debug\n"
    "user_agent = biomirror/1.0 (+mailto:a@example.org)\n"
    "\n"
    "# hash comment\n"
    "[blast.db_2-x]\n"
    "source = http://ftp.example.org:8080/blast/db\n"
    "dest = /srv/mirror/blast/db\n"
    "include = *.tar.gz\n"
    "exclude = tmp/\n"
    "include = *.tar.gz.md5\n"
    "include = README\n"
    "concurrency = 1024\n"
    "streams = 64\n"
    "min_split = 1G\n"
    "max_connections = 256\n"
    "transport = TCP\n"
    "delete = on\n"
    "max_delete = 25\n"
    "verify = size\n"
    "publish = file\n"
    "bwlimit = 10M/s\n"
    "retries = 0\n"
    "timeout = 3600\n"
    "stall_timeout = 86400\n"
    "listing_timezone = Europe/London\n"
    "file_mode = 444\n"
    "dir_mode = 02775\n"
    "ca_file = %s\n"
    "user_agent = mirror-bot\n"
    "key;semi = x\n";

static void
test_every_key(struct ctx *t)
{
	struct config		*c = NULL;
	struct mirror_conf	*m;
	char			 text[sizeof(full_conf) + 256];
	char			 ca[160];

	/* ca_file must name a readable regular file. */
	snprintf(ca, sizeof(ca), "%s/ca.pem", t->dir);
	write_file(ca, "-----BEGIN CERTIFICATE-----\n");
	snprintf(text, sizeof(text), full_conf, ca);
	is_int(load(t, text, &c), BM_EINVAL, "unknown key on the last line");
	/* Drop the last line (an unknown key) for the good case. */
	*strstr(text, "key;semi") = '\0';
	is_int(load(t, text, &c), 0, "full config loads");
	if (c == NULL) {
		printf("#   %s\n", t->err);
		return;
	}
	is_str(c->state_dir, "/var/lib/bm", "state_dir, comment stripped");
	is_int(c->log_level, 2, "log_level debug = 2");
	is_str(c->user_agent, "biomirror/1.0 (+mailto:a@example.org)",
	    "global user_agent");
	m = config_find(c, "blast.db_2-x");
	ok(m != NULL, "mirror with . _ - in its name");
	if (m == NULL)
		goto out;
	is_int(m->line, 8, "header on line 8");
	is_str(m->source, "http://ftp.example.org:8080/blast/db/", "source");
	is_str(m->dest, "/srv/mirror/blast/db", "dest");
	is_int(m->ninclude, 3, "three includes");
	if (m->ninclude == 3) {
		is_str(m->include[0], "*.tar.gz", "include order 1");
		is_str(m->include[1], "*.tar.gz.md5", "include order 2");
		is_str(m->include[2], "README", "include order 3");
	}
	is_int(m->nexclude, 1, "one exclude");
	if (m->nexclude == 1)
		is_str(m->exclude[0], "tmp/", "exclude kept with /");
	is_int(m->concurrency, 1024, "concurrency max");
	is_int(m->streams, 64, "streams max");
	is_int(m->min_split, 1073741824, "min_split 1G");
	is_int(m->max_connections, 256, "max_connections max");
	is_int(m->transport, TRANSPORT_TCP, "transport TCP any case");
	is_int(m->delete, 1, "delete on");
	is_int(m->max_delete, 25, "max_delete 25");
	is_int(m->max_delete_pct, 0, "max_delete 25 is a count");
	is_int(m->bwlimit, 10485760, "bwlimit 10M/s");
	is_int(m->retries, 0, "retries 0");
	is_int(m->timeout, 3600, "timeout max");
	is_int(m->stall_timeout, 86400, "stall_timeout max");
	is_int(m->listing_tz.kind, TZ_NAMED, "listing_timezone named");
	is_str(m->listing_tz.name, "Europe/London", "zone name");
	is_int(m->ftp_tz.kind, TZ_UTC, "ftp_timezone UTC (an HTTP source)");
	is_int(m->file_mode, 0444, "file_mode 444 is octal");
	is_int(m->dir_mode, 02775, "dir_mode 02775");
	is_str(m->ca_file, ca, "ca_file");
	is_str(m->user_agent, "mirror-bot", "mirror user_agent");
	ok(m->post_sync == NULL && m->metrics_file == NULL,
	    "post_sync, metrics_file unset");
out:
	config_free(c);
	snprintf(text, sizeof(text), full_conf, ca);
	fails(t, text, 33, "unknown key 'key;semi' in section "
	    "[blast.db_2-x]");
	(void)unlink(ca);
}

static void
test_global(struct ctx *t)
{
	static const struct { const char *v; int want; } lv[] = {
		{ "error", -1 }, { "warning", -1 }, { "info", 0 },
		{ "verbose", 1 }, { "DEBUG", 2 },
	};
	struct config	*c;
	char		 text[256];
	size_t		 i;

	for (i = 0; i < sizeof(lv) / sizeof(lv[0]); i++) {
		c = NULL;
		snprintf(text, sizeof(text), "[global]\nlog_level = %s\n",
		    lv[i].v);
		is_int(load(t, text, &c), 0, "log_level = %s loads", lv[i].v);
		if (c != NULL)
			is_int(c->log_level, lv[i].want, "log_level %s -> %d",
			    lv[i].v, lv[i].want);
		config_free(c);
	}
	fails(t, "[global]\nlog_level = loud\n", 2, "log_level = loud: "
	    "expected error, warning, info, verbose or debug");
	fails(t, "[global]\nstate_dir = var/lib\n", 2,
	    "state_dir = var/lib: must be an absolute path");
	fails(t, "[global]\nconcurrency_max = 4\n", 2,
	    "unknown key 'concurrency_max' in section [global]");
	fails(t, "[global]\n\n[global]\n", 3,
	    "duplicate section [global] (first on line 1)");
	fails(t, "[global]\nuser_agent = a\nuser_agent = b\n", 3,
	    "duplicate key 'user_agent' in section [global] "
	    "(first on line 2)");
	fails(t, "[Global]\nsource = http://h/\n", 1, "mirror name 'Global' "
	    "is reserved (the global section is [global])");

	/* Empty and comment-only files are valid configs. */
	c = NULL;
	is_int(load(t, "", &c), 0, "empty file loads");
	ok(c != NULL && c->nmirrors == 0 && c->log_level == 0,
	    "empty file: no mirrors, defaults");
	config_free(c);
	c = NULL;
	is_int(load(t, "; nothing\n\n[global]\n# still nothing\n", &c), 0,
	    "comments and an empty [global] load");
	ok(c != NULL && c->nmirrors == 0, "no mirrors");
	config_free(c);
}

static void
test_structure(struct ctx *t)
{
	char	 text[512];
	char	 lng[256];

	fails(t, "[blast]\nsource = https://h/\ndest = /d\nconcurency = 4\n",
	    4, "unknown key 'concurency' in section [blast]");
	fails(t, "; c\nsource = https://h/\n[m]\n", 2, "key 'source' outside "
	    "any section (put it under [global] or a [mirror] section)");
	fails(t, HEAD "\n; c\nnoequals\n", 6, "missing '=' (expected "
	    "'key = value', a [section] or a ; comment)");
	fails(t, HEAD "[m2\n", 4, "section header without closing ']'");
	fails(t, HEAD "[m2] junk\n", 4,
	    "unexpected text after ']' in section header");
	fails(t, HEAD "[a b]\n", 4, "bad mirror name 'a b' (1 to 64 letters, "
	    "digits, '.', '_' or '-', starting with a letter or digit)");
	fails(t, HEAD "[]\n", 4, "bad mirror name '' (1 to 64 letters, "
	    "digits, '.', '_' or '-', starting with a letter or digit)");
	fails(t, HEAD "[..]\n", 4, "bad mirror name '..' (1 to 64 letters, "
	    "digits, '.', '_' or '-', starting with a letter or digit)");
	fails(t, HEAD "[-x]\n", 4, "bad mirror name '-x' (1 to 64 letters, "
	    "digits, '.', '_' or '-', starting with a letter or digit)");
	/* 64 bytes is fine (inih alone would cut it to 49), 65 is not. */
	memset(lng, 'a', 65);
	lng[65] = '\0';
	snprintf(text, sizeof(text), "[%.65s]\nsource = http://h/\n", lng);
	fails(t, text, 1, "bad mirror name 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa' (1 to 64 letters, digits, "
	    "'.', '_' or '-', starting with a letter or digit)");
	fails(t, HEAD "[other]\nsource = http://h/\ndest = /o\n[m]\n", 7,
	    "duplicate section [m] (first on line 1)");
	fails(t, HEAD "dest = /other\n", 4,
	    "duplicate key 'dest' in section [m] (first on line 3)");
	fails(t, "[m]\nsource = http://h/\n  dest = /d\n", 3, "indented line "
	    "would continue key 'source' from line 2 (continuation lines "
	    "are not supported: remove the indentation)");
	fails(t, "\n\n[blast]\ndest = /d\n\n[b2]\nsource = http://h/\n"
	    "dest = /d\n", 3, "missing key 'source' in section [blast]");
	fails(t, "[a]\nsource = http://h/\ndest = /d\n[blast]\n"
	    "source = http://h/\n", 4,
	    "missing key 'dest' in section [blast]");
	fails(t, HEAD "ca_file = \n", 4, "ca_file: empty value");
	fails(t, HEAD "include =\n", 4, "include: empty value");
}

static void
test_long_lines(struct ctx *t)
{
	struct config	*c = NULL;
	char		 text[1024];
	char		 val[400];
	size_t		 n;

	/* "dest = " is 7 bytes: a 190-byte value makes a 197-byte line. */
	memset(val, 'v', sizeof(val));
	val[0] = '/';
	val[190] = '\0';
	snprintf(text, sizeof(text),
	    "[m]\nsource = http://h/\ndest = %s\r\n", val);
	is_int(load(t, text, &c), 0, "197-byte line with CRLF is accepted");
	if (c != NULL) {
		n = strlen(c->mirrors[0]->dest);
		is_int(n, 190, "value not truncated");
	}
	config_free(c);
	val[190] = 'v';
	val[191] = '\0';
	snprintf(text, sizeof(text),
	    "[m]\nsource = http://h/\ndest = %s\n", val);
	fails(t, text, 3, "line longer than 197 bytes");
	val[191] = 'v';
	val[300] = '\0';
	snprintf(text, sizeof(text),
	    "[m]\nsource = http://h/\n; %s\ndest = /d\n", val);
	fails(t, text, 3, "line longer than 197 bytes");

	/* A NUL byte would cut the line short inside inih. */
	write_conf(t, "[m]\nsource = http://h/\ndest = /d\0x\n", 33);
	is_int(config_load(t->path, &c, t->err, sizeof(t->err)), BM_EINVAL,
	    "NUL byte rejected");
	snprintf(text, sizeof(text), "%s:3: NUL byte in line", t->path);
	is_str(t->err, text, "NUL byte message");

	/* A UTF-8 BOM and CRLF line ends are fine. */
	c = NULL;
	is_int(load(t, "\xEF\xBB\xBF[m]\r\nsource = http://h/\r\n"
	    "dest = /d\r\n", &c), 0, "BOM and CRLF accepted");
	if (c != NULL)
		is_str(c->mirrors[0]->dest, "/d", "CR stripped");
	config_free(c);
}

static void
test_publish(struct ctx *t)
{
	struct config		*c = NULL;
	struct mirror_conf	*m;

	if ((m = good_value(t, "publish", "set", &c)) != NULL)
		is_int(m->publish, PUBLISH_SET, "publish = set");
	config_free(c);
	if ((m = good_value(t, "publish", "File", &c)) != NULL)
		is_int(m->publish, PUBLISH_FILE, "publish = File");
	config_free(c);
}

static void
test_unsupported(struct ctx *t)
{
	struct config		*uc = NULL;

	fails(t, HEAD "transport = udt\n", 1, "transport = udt needs an "
	    "ftp:// source with ftp_mode = extended (UDT carries GridFTP's "
	    "extended block mode only) in section [m]");
	fails(t, "[m]\nsource = ftp://h.example/x/\ndest = /srv/m\n"
	    "transport = udt\n", 1, "transport = udt needs an ftp:// source "
	    "with ftp_mode = extended (UDT carries GridFTP's extended block "
	    "mode only) in section [m]");
	is_int(load(t, "[m]\nsource = ftp://h.example/x/\ndest = /srv/m\n"
	    "transport = udt\nftp_mode = extended\nudt_buffer = 8M\n", &uc), 0,
	    "transport = udt with ftp_mode = extended: %s", t->err);
	ok(uc != NULL && uc->mirrors[0]->transport == TRANSPORT_UDT &&
	    uc->mirrors[0]->udt_buffer == 8ULL << 20, "udt, udt_buffer 8M");
	config_free(uc);
	bad_value(t, "udt_buffer", "1K",
	    "udt_buffer = 1K: must be 0 (sized from the round trip) or at "
	    "least 64K");
	bad_value(t, "transport", "quic",
	    "transport = quic: expected tcp, udt or auto");
	bad_value(t, "verify", "md5",
	    "verify = md5: expected size, sidecar or checksum");
	{
		struct mirror_conf *m = mirror_conf_new("v");
		char err[256];

		is_int(mirror_conf_set(m, "verify", "sidecar", err,
		    sizeof(err)), 0, "verify = sidecar accepted");
		is_int(m ? (int)m->verify : -1, VERIFY_SIDECAR, "verify sidecar");
		ok(m != NULL && m->verify_set, "verify = sidecar is explicit");
		is_int(mirror_conf_set(m, "verify", "Checksum", err,
		    sizeof(err)), 0, "verify = checksum accepted");
		is_int(m ? (int)m->verify : -1, VERIFY_CHECKSUM, "verify checksum");
		mirror_conf_free(m);
	}
	bad_value(t, "publish", "tree",
	    "publish = tree: expected file or set");
	fails(t, "[m]\nsource = udt://h:9000/\n", 2,
	    "source scheme udt:// is retired: a biomirror upstream is "
	    "bm://HOST[:PORT]/EXPORT/ (UDT data connections will be "
	    "transport = udt)");
	fails(t, "[m]\nsource = bm://h:7722/\n", 2, "source = bm://h:7722/: "
	    "no export (expected bm://HOST[:PORT]/EXPORT/ or "
	    "bm://HOST[:PORT]/EXPORT/PATH/)");
	fails(t, "[m]\nsource = bm://h/pub/\ndest = /srv/m\ntransport = udt\n",
	    1, "transport = udt for a bm:// source (UDT data connections) is "
	    "not supported by this build yet in section [m]");
	fails(t, "[m]\nsource = bm://h/pub/\ndest = /srv/m\nbwlimit = 1M\n", 1,
	    "bwlimit for a bm:// source is not supported by this build yet "
	    "in section [m]");
	fails(t, "[m]\nsource = gopher://h/\n", 2, "source = gopher://h/: "
	    "unsupported scheme (use http://, https://, ftp://, ftps:// or bm://)");
	fails(t, "[m]\nsource = /srv/data\n", 2, "source = /srv/data: not a "
	    "URL (expected http://, https://, ftp://, ftps:// or bm://HOST/PATH)");
	fails(t, "[m]\nsource = http:///x/\n", 2,
	    "source = http:///x/: no host");
	fails(t, "[m]\nsource = https://\n", 2, "source = https://: no host");
	fails(t, "[m]\nsource = http://h/x?y=1\n", 2, "source = "
	    "http://h/x?y=1: a source URL takes no query or fragment");
	/* A password in the URL would be logged and stored: refused,
	 * and the message does not repeat it. */
	fails(t, "[m]\nsource = https://u:s3cret@h/x/\n", 2, "source: a "
	    "source URL takes no user or password (it is logged and stored "
	    "with every run; an FTP login goes in user and password_file)");
	fails(t, "[m]\nsource = ftp://anonymous@h/pub/\n", 2, "source: a "
	    "source URL takes no user or password (it is logged and stored "
	    "with every run; an FTP login goes in user and password_file)");
	/* Also where no parser reads the URL: the '@' is enough. */
	{
		static const char *const pw[] = {
			"http://u:SECRETPW@127.0.0.1:4:99999/x/",
			"http://u:SECRETPW@[::1/x/",
			"https://u:SECRETPW@ho^st/x/",
			"ftp://u:SECRETPW@h:99999/x/",
			"bmx://u:SECRETPW@h/x/",
			"u:SECRETPW@host/x/",
		};
		char	 conf[256];
		size_t	 i;

		for (i = 0; i < sizeof(pw) / sizeof(pw[0]); i++) {
			(void)snprintf(conf, sizeof(conf),
			    "[m]\nsource = %s\n", pw[i]);
			fails(t, conf, 2, "source: a source URL takes no user "
			    "or password (it is logged and stored with every "
			    "run; an FTP login goes in user and password_file)");
		}
	}
	/* Dot segments: the server would list another directory. */
	fails(t, "[m]\nsource = http://h/x/../y/\n", 2, "source = "
	    "http://h/x/../y/: '.' and '..' path segments are not allowed "
	    "(write the directory without them)");
	fails(t, "[m]\nsource = ftp://h/%2Fpub/%2e%2E\n", 2, "source = "
	    "ftp://h/%2Fpub/%2e%2E: '.' and '..' path segments are not "
	    "allowed (write the directory without them)");
	fails(t, "[m]\nsource = http://h/./x/\n", 2, "source = "
	    "http://h/./x/: '.' and '..' path segments are not allowed "
	    "(write the directory without them)");
	/* RFC 1738 FTP typecodes: libcurl would obey them. */
	fails(t, "[m]\nsource = ftp://h/pub/;type=d\n", 2, "source = "
	    "ftp://h/pub/;type=d: an FTP ;type= typecode (RFC 1738 3.2.2) "
	    "is not allowed: biomirror chooses the commands and binary mode "
	    "itself (write %3B for a ';' that is part of a name)");
	fails(t, "[m]\nsource = ftps://h/a;TYPE=A/b/\n", 2, "source = "
	    "ftps://h/a;TYPE=A/b/: an FTP ;type= typecode (RFC 1738 3.2.2) "
	    "is not allowed: biomirror chooses the commands and binary mode "
	    "itself (write %3B for a ';' that is part of a name)");
	{
		struct config	*c = NULL;

		is_int(load(t, "[m]\nsource = http://h/x;type=d/\n"
		    "dest = /srv/d\n", &c), 0, "';type=' in an HTTP path is a "
		    "name");
		config_free(c);
	}
	{
		struct config	*c = NULL;

		is_int(load(t, "[m]\nsource = http://h/x/.../.d/d./\n"
		    "dest = /srv/d\n", &c), 0, "'...', '.d', 'd.' are names");
		config_free(c);
	}
	{
		struct config		*c = NULL;
		struct mirror_conf	*m;

		if ((m = good_value(t, "post_sync",
		    "/usr/local/bin/reindex --all", &c)) != NULL)
			is_str(m->post_sync, "/usr/local/bin/reindex --all",
			    "post_sync stored");
		config_free(c);
		c = NULL;
		if ((m = good_value(t, "metrics_file",
		    "/var/lib/node_exporter/bm.prom", &c)) != NULL)
			is_str(m->metrics_file, "/var/lib/node_exporter/bm.prom",
			    "metrics_file stored");
		config_free(c);
	}
	bad_value(t, "metrics_file", "bm.prom",
	    "metrics_file = bm.prom: not an absolute path");
	bad_value(t, "metrics_file", "/var/lib/node_exporter/",
	    "metrics_file = /var/lib/node_exporter/: a directory, not a "
	    "file name");
}

/* Destinations: absolute, not "/", not shared or nested between mirrors. */
static void
test_dests(struct ctx *t)
{
	struct config	*c = NULL;

	fails(t, "[global]\nstate_dir = /srv/m/state\n[a]\nsource = "
	    "http://h/\ndest = /srv/m\n", 5, "dest /srv/m of [a] contains "
	    "state_dir /srv/m/state: the manifests must stay out of the "
	    "mirror");
	fails(t, "[global]\nstate_dir = /srv\n[a]\nsource = http://h/\n"
	    "dest = /srv/m/\n", 5, "dest /srv/m/ of [a] is inside state_dir "
	    "/srv: the manifests must stay out of the mirror");
	fails(t, "[m]\nsource = http://h/\ndest = d\n", 3, "dest must be "
	    "an absolute path (got 'd'; a relative path would resolve "
	    "against the working directory)");
	fails(t, "[m]\nsource = http://h/\ndest = ./srv/m\n", 3, "dest must "
	    "be an absolute path (got './srv/m'; a relative path would "
	    "resolve against the working directory)");
	fails(t, "[m]\nsource = http://h/\ndest = /\n", 3,
	    "dest = /: the root directory cannot be a mirror's destination");
	fails(t, "[m]\nsource = http://h/\ndest = ///\n", 3,
	    "dest = ///: the root directory cannot be a mirror's "
	    "destination");
	fails(t, "[m]\nsource = http://h/\ndest = /./\n", 3,
	    "dest = /./: the root directory cannot be a mirror's "
	    "destination");
	/* ".." is refused; repeated '/' and "." components are dropped. */
	fails(t, "[m]\nsource = http://h/\npublish = set\ndest = /x/y/..\n",
	    4, "dest = /x/y/..: '..' components are not allowed (write the "
	    "directory without them: they resolve differently across "
	    "symlinks)");
	fails(t, "[m]\nsource = http://h/\ndest = /x/../y\n", 3,
	    "dest = /x/../y: '..' components are not allowed (write the "
	    "directory without them: they resolve differently across "
	    "symlinks)");
	c = NULL;
	is_int(load(t, "[m]\nsource = http://h/\npublish = set\n"
	    "dest = /x/sub//y//.\n", &c), 0, "dest with '//' and '.' loads");
	if (c != NULL)
		is_str(c->mirrors[0]->dest, "/x/sub/y", "dest made canonical");
	config_free(c);
	c = NULL;
	is_int(load(t, "[m]\nsource = http://h/\ndest = /x/..y/.z/\n", &c),
	    0, "names merely starting with dots load");
	if (c != NULL)
		is_str(c->mirrors[0]->dest, "/x/..y/.z", "dotted names kept");
	config_free(c);
	c = NULL;
	fails(t, HEAD "[b]\nsource = http://h/\ndest = /srv/m/\n", 6,
	    "dest /srv/m/ of [b] is the same directory as dest /srv/m of [m] "
	    "(section on line 1): mirrors must not share or nest "
	    "destinations");
	fails(t, HEAD "[b]\nsource = http://h/\ndest = /srv//m\n", 6,
	    "dest /srv//m of [b] is the same directory as dest /srv/m of [m] "
	    "(section on line 1): mirrors must not share or nest "
	    "destinations");
	fails(t, HEAD "[b]\nsource = http://h/\ndest = /srv/m/sub\n", 6,
	    "dest /srv/m/sub of [b] is inside dest /srv/m of [m] (section "
	    "on line 1): mirrors must not share or nest destinations");
	fails(t, "[a]\nsource = http://h/\ndest = /srv/m/a/b\n"
	    "[c]\nsource = http://h/\ndest = /x\n"
	    "[b]\ndest = //srv/m/\nsource = http://h/\n", 8,
	    "dest //srv/m/ of [b] contains dest /srv/m/a/b of [a] (section "
	    "on line 1): mirrors must not share or nest destinations");
	/* NAME.biomirror beside a dest holds publish = set snapshots. */
	fails(t, HEAD "[b]\nsource = http://h/\ndest = /srv/m.biomirror\n", 6,
	    "dest /srv/m.biomirror of [b] is inside the snapshot directory "
	    "(NAME.biomirror) of dest /srv/m of [m] (section on line 1): "
	    "mirrors must not share or nest destinations");
	fails(t, HEAD "[b]\nsource = http://h/\ndest = /srv/m.biomirror/x\n",
	    6, "dest /srv/m.biomirror/x of [b] is inside the snapshot "
	    "directory (NAME.biomirror) of dest /srv/m of [m] (section on "
	    "line 1): mirrors must not share or nest destinations");
	fails(t, "[a]\nsource = http://h/\ndest = /srv/m.biomirror/s\n"
	    "[b]\nsource = http://h/\ndest = /srv/m\n", 6,
	    "dest /srv/m of [b] has its snapshot directory (NAME.biomirror) "
	    "around dest /srv/m.biomirror/s of [a] (section on line 1): "
	    "mirrors must not share or nest destinations");
	fails(t, "[global]\nstate_dir = /srv/m.biomirror/state\n[a]\nsource "
	    "= http://h/\ndest = /srv/m\n", 5, "dest /srv/m of [a] has its "
	    "snapshot directory (NAME.biomirror) around state_dir "
	    "/srv/m.biomirror/state: the manifests must stay out of the "
	    "mirror");
	/* A shared prefix that is not a '/' boundary is fine. */
	is_int(load(t, HEAD "[b]\nsource = http://h/\ndest = /srv/mm\n"
	    "[c]\nsource = http://h/\ndest = /srv/m.old\n", &c), 0,
	    "/srv/m, /srv/mm and /srv/m.old are distinct");
	ok(c != NULL && c->nmirrors == 3, "three mirrors");
	config_free(c);
}

/* FTP and FTPS sources and their keys (issue 4). */
static void
test_ftp(struct ctx *t)
{
	struct config	*c = NULL;
	struct mirror_conf *m;
	char		 text[1024], pw[160], msg[512];
	int		 rc;

	rc = load(t, "[m]\nsource = ftp://ftp.example.org/pub\n"
	    "dest = /srv/m\n", &c);
	is_int(rc, 0, "ftp:// source accepted");
	if (c != NULL) {
		m = c->mirrors[0];
		is_str(m->source, "ftp://ftp.example.org/pub/", "ftp source "
		    "normalised");
		ok(mirror_is_ftp(m), "ftp source is FTP");
		is_int(m->ftp_tls, FTP_TLS_DEFAULT, "ftp_tls default");
		ok(m->user == NULL && m->password_file == NULL,
		    "anonymous by default");
		ok(!m->ftp_active, "passive by default");
		is_int(m->max_connections, 0, "max_connections by scheme");
	}
	config_free(c);
	c = NULL;
	rc = load(t, "[m]\nsource = ftp://h/\ndest = /srv/m\n"
	    "ftp_timezone = -05:30\n", &c);
	is_int(rc, 0, "ftp_timezone = -05:30 accepted");
	if (c != NULL) {
		is_int(c->mirrors[0]->ftp_tz.kind, TZ_FIXED,
		    "ftp_timezone fixed");
		is_int(c->mirrors[0]->ftp_tz.offset, -(5 * 3600 + 30 * 60),
		    "offset -05:30");
	}
	config_free(c);
	c = NULL;
	/* Each zone key for its own kind of source: never ignored. */
	fails(t, HEAD "ftp_timezone = +0100\n", 1, "ftp_timezone applies "
	    "only to ftp:// and ftps:// sources in section [m]");
	fails(t, "[m]\nsource = ftp://h/\ndest = /srv/m\n"
	    "listing_timezone = +0100\n", 1, "listing_timezone applies only "
	    "to http:// and https:// sources (an FTP server's LIST times "
	    "take ftp_timezone) in section [m]");
	rc = load(t, "[m]\nsource = ftps://h/%2Fdata/\ndest = /srv/m\n"
	    "ftp_tls = require\nuser = mirror\nftp_active = yes\n"
	    "ftp_timezone = Europe/Berlin\nfollow_symlinks = no\n", &c);
	is_int(rc, 0, "ftps:// with keys accepted");
	if (c != NULL) {
		m = c->mirrors[0];
		is_str(m->source, "ftps://h/%2Fdata/", "%%2F kept (RFC 1738)");
		is_int(m->ftp_tls, FTP_TLS_REQUIRE, "ftp_tls require");
		is_str(m->user, "mirror", "user");
		ok(m->ftp_active, "ftp_active yes");
		is_int(m->ftp_tz.kind, TZ_NAMED, "ftp_timezone named");
	}
	config_free(c);
	c = NULL;
	bad_value(t, "ftp_tls", "maybe",
	    "ftp_tls = maybe: expected require, try or no");
	fails(t, HEAD "ftp_tls = try\n", 1,
	    "ftp_tls applies only to ftp:// and ftps:// sources in section [m]");
	fails(t, HEAD "user = bob\n", 1,
	    "user applies only to ftp:// and ftps:// sources in section [m]");
	fails(t, "[m]\nsource = ftps://h/\ndest = /srv/m\nftp_tls = no\n",
	    1, "an ftps:// source requires TLS: ftp_tls must be require "
	    "(or unset) in section [m]");
	rc = load(t, "[m]\nsource = ftp://h/\ndest = /srv/m\n"
	    "follow_symlinks = yes\n", &c);
	is_int(rc, 0, "follow_symlinks = yes accepted");
	if (c != NULL)
		ok(c->mirrors[0]->follow_symlinks, "follow_symlinks = yes set");
	config_free(c);
	c = NULL;
	fails(t, HEAD "follow_symlinks = yes\n", 1, "follow_symlinks "
	    "applies only to ftp:// and ftps:// sources in section [m]");
	/* ftp_mode: stream (RFC 959) or GridFTP's extended block mode. */
	rc = load(t, "[m]\nsource = ftp://h/\ndest = /srv/m\n", &c);
	if (c != NULL)
		ok(!c->mirrors[0]->ftp_mode_e, "ftp_mode stream by default");
	config_free(c);
	c = NULL;
	rc = load(t, "[m]\nsource = ftp://h/\ndest = /srv/m\n"
	    "ftp_mode = Extended\n", &c);
	is_int(rc, 0, "ftp_mode = extended accepted");
	if (c != NULL)
		ok(c->mirrors[0]->ftp_mode_e, "ftp_mode = extended set");
	config_free(c);
	c = NULL;
	fails(t, "[m]\nsource = ftp://h/\ndest = /srv/m\nftp_mode = e\n", 4,
	    "ftp_mode = e: expected stream or extended");
	fails(t, HEAD "ftp_mode = extended\n", 1, "ftp_mode applies only to "
	    "ftp:// and ftps:// sources in section [m]");
	fails(t, "[m]\nsource = ftps://h/\ndest = /srv/m\n"
	    "ftp_mode = extended\n", 1, "ftp_mode = extended needs an ftp:// "
	    "source without TLS (its data connections carry none here) in "
	    "section [m]");
	fails(t, "[m]\nsource = ftp://h/\ndest = /srv/m\nftp_tls = try\n"
	    "ftp_mode = extended\n", 1, "ftp_mode = extended needs an ftp:// "
	    "source without TLS (its data connections carry none here) in "
	    "section [m]");
	/* tcp_congestion: auto or a tcp(7) TCP_CONGESTION name. */
	rc = load(t, HEAD, &c);
	if (c != NULL)
		is_str(c->mirrors[0]->tcp_congestion, "",
		    "tcp_congestion auto by default");
	config_free(c);
	c = NULL;
	rc = load(t, HEAD "tcp_congestion = bbr\n", &c);
	is_int(rc, 0, "tcp_congestion = bbr accepted");
	if (c != NULL)
		is_str(c->mirrors[0]->tcp_congestion, "bbr",
		    "tcp_congestion = bbr set");
	config_free(c);
	c = NULL;
	rc = load(t, HEAD "tcp_congestion = abcdefghijklmn_\n", &c);
	is_int(rc, 0, "tcp_congestion of 15 bytes accepted");
	if (c != NULL)
		is_str(c->mirrors[0]->tcp_congestion, "abcdefghijklmn_",
		    "tcp_congestion of 15 bytes set");
	config_free(c);
	c = NULL;
	rc = load(t, HEAD "tcp_congestion = Auto\n", &c);
	is_int(rc, 0, "tcp_congestion = Auto accepted");
	if (c != NULL)
		is_str(c->mirrors[0]->tcp_congestion, "",
		    "tcp_congestion = Auto: the kernel's default");
	config_free(c);
	c = NULL;
	fails(t, HEAD "tcp_congestion = abcdefghijklmnop\n", 4,
	    "tcp_congestion = abcdefghijklmnop: expected auto or an "
	    "algorithm name (bbr, cubic, reno, ...) of at most 15 letters, "
	    "digits, '_' or '-'");
	fails(t, HEAD "tcp_congestion = bbr/2\n", 4,
	    "tcp_congestion = bbr/2: expected auto or an algorithm name "
	    "(bbr, cubic, reno, ...) of at most 15 letters, digits, '_' or "
	    "'-'");
	/* password_file: exists, regular, not world-readable. */
	(void)snprintf(pw, sizeof(pw), "%s/pw", t->dir);
	write_file(pw, "s3cret\n");
	(void)chmod(pw, 0644);
	(void)snprintf(text, sizeof(text), "[m]\nsource = ftp://h/\n"
	    "dest = /srv/m\nuser = u\npassword_file = %s\n", pw);
	(void)snprintf(msg, sizeof(msg), "password_file = %s: readable by "
	    "everyone (chmod o-r it)", pw);
	fails(t, text, 5, msg);
	(void)chmod(pw, 0640);
	(void)snprintf(text, sizeof(text), "[m]\nsource = ftp://h/\n"
	    "dest = /srv/m\npassword_file = %s\n", pw);
	fails(t, text, 1, "password_file needs user (without it the "
	    "password would be sent as the anonymous login's) in section [m]");
	(void)snprintf(text, sizeof(text), "[m]\nsource = ftp://h/\n"
	    "dest = /srv/m\nuser = u\npassword_file = %s\n", pw);
	rc = load(t, text, &c);
	is_int(rc, 0, "password_file 0640 accepted");
	if (c != NULL)
		is_str(c->mirrors[0]->password_file, pw, "password_file set");
	config_free(c);
	(void)unlink(pw);
	(void)snprintf(msg, sizeof(msg), "password_file = %s: No such file "
	    "or directory", pw);
	fails(t, text, 5, msg);
	/* secret_file (bm://): mode 0600 or stricter, bm:// sources only. */
	write_file(pw, "s3cret\n");
	(void)chmod(pw, 0640);
	(void)snprintf(text, sizeof(text), "[m]\nsource = bm://h/pub/\n"
	    "dest = /srv/m\nsecret_file = %s\n", pw);
	(void)snprintf(msg, sizeof(msg), "secret_file = %s: mode 0640: must "
	    "be 0600 or stricter (chmod go= it)", pw);
	fails(t, text, 4, msg);
	(void)chmod(pw, 0600);
	rc = load(t, text, &c);
	is_int(rc, 0, "secret_file 0600 accepted");
	if (c != NULL)
		is_str(c->mirrors[0]->secret_file, pw, "secret_file set");
	config_free(c);
	c = NULL;
	(void)snprintf(text, sizeof(text), "[m]\nsource = http://h/pub/\n"
	    "dest = /srv/m\nsecret_file = %s\n", pw);
	fails(t, text, 1, "secret_file applies only to bm:// sources in "
	    "section [m]");
	(void)unlink(pw);
}

/*
 * mirror_conf_set(m, "ca_file", p) in a child running as nobody (when we
 * are root, which reads everything): its return code, or -1.
 */
static int
set_ca_as_nobody(const char *p)
{
	struct mirror_conf	*m;
	char			 err[512];
	pid_t			 pid;
	int			 st, rc;

	if ((pid = fork()) == -1)
		return -1;
	if (pid == 0) {
		if (setgid(65534) != 0 || setuid(65534) != 0)
			_exit(200);
		if ((m = mirror_conf_new("adhoc")) == NULL)
			_exit(201);
		rc = mirror_conf_set(m, "ca_file", p, err, sizeof(err));
		_exit(rc == BM_EINVAL && strstr(err, "Permission denied") ?
		    0 : 202);
	}
	if (waitpid(pid, &st, 0) == -1 || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

/*
 * ca_file must name a readable regular file holding a PEM certificate,
 * and in a config file an absolute path.
 */
static void
test_ca_file(struct ctx *t)
{
	struct mirror_conf	*m;
	char			 p[160], msg[512], err[512];
	static const char *const notpem[] = {
		"", "x", "-----BEGIN PRIVATE KEY-----\nMIIE\n"
		    "-----END PRIVATE KEY-----\n", "\x30\x82\x03\x0d"
	};
	size_t			 i;

	snprintf(p, sizeof(p), "%s/nope.pem", t->dir);
	snprintf(msg, sizeof(msg), "ca_file = %s: No such file or directory",
	    p);
	bad_value(t, "ca_file", p, msg);
	snprintf(msg, sizeof(msg), "ca_file = %s: not a regular file", t->dir);
	bad_value(t, "ca_file", t->dir, msg);
	fails(t, HEAD "ca_file = ca.pem\n", 4, "ca_file must be an absolute "
	    "path (got 'ca.pem'; a relative path would resolve against the "
	    "working directory)");
	fails(t, HEAD "password_file = pw\n", 4, "password_file must be an "
	    "absolute path (got 'pw'; a relative path would resolve against "
	    "the working directory)");
	if ((m = mirror_conf_new("adhoc")) == NULL)
		tap_bail("out of memory");
	is_int(mirror_conf_set(m, "ca_file", p, err, sizeof(err)), BM_EINVAL,
	    "--ca-file missing file");
	snprintf(msg, sizeof(msg), "ca_file = %s: No such file or directory",
	    p);
	is_str(err, msg, "missing ca_file reason");
	ok(m->ca_file == NULL, "ca_file unchanged");
	for (i = 0; i < sizeof(notpem) / sizeof(notpem[0]); i++) {
		write_file(p, notpem[i]);
		is_int(mirror_conf_set(m, "ca_file", p, err, sizeof(err)),
		    BM_EINVAL, "not a PEM certificate (%zu)", i);
		snprintf(msg, sizeof(msg), "ca_file = %s: no PEM certificate "
		    "in it (want '-----BEGIN CERTIFICATE-----' blocks)", p);
		is_str(err, msg, "not a PEM certificate: reason (%zu)", i);
		ok(m->ca_file == NULL, "ca_file unchanged (%zu)", i);
	}
	write_file(p, "# bundle\n-----BEGIN CERTIFICATE-----\nMIIB\n"
	    "-----END CERTIFICATE-----\n");
	(void)chmod(p, 0600);
	if (geteuid() != 0) {
		is_int(chmod(p, 0), 0, "chmod 0");
		is_int(mirror_conf_set(m, "ca_file", p, err, sizeof(err)),
		    BM_EINVAL, "unreadable ca_file");
		snprintf(msg, sizeof(msg), "ca_file = %s: Permission denied",
		    p);
		is_str(err, msg, "unreadable ca_file reason");
		(void)chmod(p, 0600);
	} else
		is_int(set_ca_as_nobody(p), 0,
		    "unreadable ca_file (mode 0600, as nobody): Permission denied");
	is_int(mirror_conf_set(m, "ca_file", p, err, sizeof(err)), 0,
	    "readable PEM ca_file");
	is_str(m->ca_file, p, "ca_file set");
	mirror_conf_free(m);
	(void)unlink(p);
}

static void
test_values(struct ctx *t)
{
	struct config		*c;
	struct mirror_conf	*m;

	bad_value(t, "concurrency", "0",
	    "concurrency = 0: expected an integer from 1 to 1024, or auto");
	bad_value(t, "concurrency", "1025",
	    "concurrency = 1025: expected an integer from 1 to 1024, or auto");
	bad_value(t, "concurrency", "-1",
	    "concurrency = -1: expected an integer from 1 to 1024, or auto");
	bad_value(t, "concurrency", "4x",
	    "concurrency = 4x: expected an integer from 1 to 1024, or auto");
	bad_value(t, "streams", "65",
	    "streams = 65: expected an integer from 1 to 64, or auto");
	bad_value(t, "streams", "Auto",
	    "streams = Auto: expected an integer from 1 to 64, or auto");
	bad_value(t, "concurrency", "auto8",
	    "concurrency = auto8: expected an integer from 1 to 1024, or auto");
	if ((m = good_value(t, "concurrency", "auto", &c)) != NULL) {
		ok(m->concurrency_auto, "concurrency = auto");
		is_int(m->concurrency, 8, "concurrency auto starts from 8");
		ok(!m->streams_auto, "streams stays fixed");
	}
	config_free(c);
	if ((m = good_value(t, "streams", "auto", &c)) != NULL) {
		ok(m->streams_auto, "streams = auto");
		is_int(m->streams, 4, "streams auto starts from 4");
		ok(!m->concurrency_auto, "concurrency stays fixed");
	}
	config_free(c);
	bad_value(t, "max_connections", "257",
	    "max_connections = 257: expected an integer from 0 to 256");
	bad_value(t, "retries", "101",
	    "retries = 101: expected an integer from 0 to 100");
	bad_value(t, "timeout", "0",
	    "timeout = 0: expected an integer from 1 to 3600");
	bad_value(t, "stall_timeout", "86401",
	    "stall_timeout = 86401: expected an integer from 1 to 86400");
	bad_value(t, "hook_timeout", "-1",
	    "hook_timeout = -1: expected an integer from 0 to 86400");
	bad_value(t, "hook_timeout", "10s",
	    "hook_timeout = 10s: expected an integer from 0 to 86400");
	bad_value(t, "hook_timeout", "86401",
	    "hook_timeout = 86401: expected an integer from 0 to 86400");
	if ((m = good_value(t, "hook_timeout", "0", &c)) != NULL)
		is_int(m->hook_timeout, 0, "hook_timeout = 0: no limit");
	config_free(c);
	if ((m = good_value(t, "hook_timeout", "86400", &c)) != NULL)
		is_int(m->hook_timeout, 86400, "hook_timeout max");
	config_free(c);
	bad_value(t, "delete", "maybe", "delete = maybe: expected yes or no");
	bad_value(t, "min_split", "12X", "min_split = 12X: expected a size "
	    "in bytes with an optional K, M, G or T suffix (powers of 1024), "
	    "below 16 EiB");
	bad_value(t, "min_split", "99999999999T", "min_split = 99999999999T: "
	    "expected a size in bytes with an optional K, M, G or T suffix "
	    "(powers of 1024), below 16 EiB");
	bad_value(t, "min_split", "0", "min_split = 0: must be at least 1");
	bad_value(t, "bwlimit", "fast", "bwlimit = fast: expected a size in "
	    "bytes with an optional K, M, G or T suffix (powers of 1024), "
	    "below 16 EiB");
	bad_value(t, "max_delete", "101%", "max_delete = 101%: expected a "
	    "count or a percentage from 0% to 100%");
	bad_value(t, "max_delete", "x%", "max_delete = x%: expected a "
	    "count or a percentage from 0% to 100%");
	bad_value(t, "max_delete", "%", "max_delete = %: expected a "
	    "count or a percentage from 0% to 100%");
	bad_value(t, "file_mode", "8888",
	    "file_mode = 8888: expected an octal mode from 0 to 07777");
	bad_value(t, "file_mode", "010000",
	    "file_mode = 010000: expected an octal mode from 0 to 07777");
	bad_value(t, "file_mode", "rw-r--r--",
	    "file_mode = rw-r--r--: expected an octal mode from 0 to 07777");
	bad_value(t, "file_mode", "4755", "file_mode = 4755: set-user-ID and "
	    "set-group-ID bits are not allowed on mirrored files");
	bad_value(t, "file_mode", "0200",
	    "file_mode = 0200: the owner needs at least 0400");
	bad_value(t, "dir_mode", "0644",
	    "dir_mode = 0644: the owner needs at least 0700");
	bad_value(t, "listing_timezone", "Mars/Olympus_Mons",
	    "listing_timezone = Mars/Olympus_Mons: unknown time zone (use "
	    "UTC, an offset such as +0100, a zone name such as "
	    "Europe/London, or auto)");
	bad_value(t, "ftp_timezone", "../../etc/passwd",
	    "ftp_timezone = ../../etc/passwd: unknown time zone (use "
	    "UTC, an offset such as +0100, a zone name such as "
	    "Europe/London, or auto)");

	if ((m = good_value(t, "max_delete", "10%", &c)) != NULL) {
		is_int(m->max_delete, 10, "max_delete 10%%: 10");
		is_int(m->max_delete_pct, 1, "max_delete 10%%: percent");
	}
	config_free(c);
	if ((m = good_value(t, "max_delete", "0", &c)) != NULL)
		ok(m->max_delete == 0 && !m->max_delete_pct, "max_delete 0");
	config_free(c);
	if ((m = good_value(t, "min_split", "1048576", &c)) != NULL)
		is_int(m->min_split, 1048576, "min_split plain bytes");
	config_free(c);
	if ((m = good_value(t, "delete", "Yes", &c)) != NULL)
		is_int(m->delete, 1, "delete Yes");
	config_free(c);
	if ((m = good_value(t, "delete", "0", &c)) != NULL)
		is_int(m->delete, 0, "delete 0");
	config_free(c);
	if ((m = good_value(t, "listing_timezone", "+0100", &c)) != NULL) {
		is_int(m->listing_tz.kind, TZ_FIXED, "+0100 fixed");
		is_int(m->listing_tz.offset, 3600, "+0100 = 3600 s");
	}
	config_free(c);
	/* auto: the run learns the offset (agent/run/zone.c). */
	if ((m = good_value(t, "listing_timezone", "auto", &c)) != NULL)
		is_int(m->listing_tz.kind, TZ_AUTO, "listing_timezone auto");
	config_free(c);
	if ((m = good_value(t, "file_mode", "0640", &c)) != NULL)
		is_int(m->file_mode, 0640, "file_mode 0640");
	config_free(c);
}

static void
test_sizes(void)
{
	uint64_t	 v = 7;

	ok(config_parse_size("16M", &v) == 0 && v == 16777216,
	    "16M = 16777216");
	ok(config_parse_size("1G", &v) == 0 && v == 1073741824, "1G");
	ok(config_parse_size("1k", &v) == 0 && v == 1024, "1k lower case");
	ok(config_parse_size("2T", &v) == 0 && v == 2199023255552ULL, "2T");
	ok(config_parse_size("0", &v) == 0 && v == 0, "0");
	ok(config_parse_size("18446744073709551615", &v) == 0 &&
	    v == UINT64_MAX, "2^64-1 bytes");
	v = 7;
	is_int(config_parse_size("18446744073709551616", &v), BM_EINVAL,
	    "2^64 overflows");
	is_int(config_parse_size("99999999999T", &v), BM_EINVAL, "99999999999T "
	    "overflows");
	is_int(config_parse_size("16777216T", &v), BM_EINVAL, "2^64 via T");
	ok(config_parse_size("16777215T", &v) == 0 && v == 16777215ULL << 40,
	    "largest T");
	is_int(config_parse_size("12X", &v), BM_EINVAL, "12X");
	is_int(config_parse_size("12MB", &v), BM_EINVAL, "12MB");
	is_int(config_parse_size("", &v), BM_EINVAL, "empty");
	is_int(config_parse_size("M", &v), BM_EINVAL, "suffix alone");
	is_int(config_parse_size("-1", &v), BM_EINVAL, "negative");
	is_int(config_parse_size(" 1", &v), BM_EINVAL, "leading blank");
	is_int(config_parse_size("1.5G", &v), BM_EINVAL, "fraction");
	is_int(v, 16777215ULL << 40, "ret untouched on failure");
	ok(config_parse_uint("42", 1, 100, &v) == 0 && v == 42,
	    "parse_uint 42");
	is_int(config_parse_uint("0", 1, 100, &v), BM_EINVAL, "below min");
	is_int(config_parse_uint("101", 1, 100, &v), BM_EINVAL, "above max");
	is_int(config_parse_uint("+5", 1, 100, &v), BM_EINVAL, "sign");
	is_int(config_parse_uint("99999999999999999999", 0, UINT64_MAX, &v),
	    BM_EINVAL, "ERANGE");
}

static void
test_set(void)
{
	struct mirror_conf	*m;
	char			 err[256];

	m = mirror_conf_new("adhoc");
	ok(m != NULL, "mirror_conf_new");
	if (m == NULL)
		return;
	is_int(mirror_conf_check(m, err, sizeof(err)), BM_EINVAL,
	    "check without source");
	is_str(err, "missing key 'source'", "missing source reason");
	is_int(mirror_conf_set(m, "source", "http://h", err, sizeof(err)), 0,
	    "set source");
	is_int(mirror_conf_check(m, err, sizeof(err)), BM_EINVAL,
	    "check without dest");
	is_str(err, "missing key 'dest'", "missing dest reason");
	is_int(mirror_conf_set(m, "dest", "out", err, sizeof(err)), 0,
	    "set dest");
	is_int(mirror_conf_check(m, err, sizeof(err)), 0, "check passes");
	is_str(m->source, "http://h/", "source normalised");
	is_int(mirror_conf_set(m, "concurrency", "4", err, sizeof(err)), 0,
	    "--concurrency 4");
	is_int(m->concurrency, 4, "override applied");
	is_int(mirror_conf_set(m, "concurrency", "5", err, sizeof(err)), 0,
	    "a second override replaces");
	is_int(m->concurrency, 5, "last override wins");
	is_int(mirror_conf_set(m, "concurrency", "0", err, sizeof(err)),
	    BM_EINVAL, "--concurrency 0");
	is_str(err, "concurrency = 0: expected an integer from 1 to 1024, or auto",
	    "override reason");
	is_int(m->concurrency, 5, "unchanged after a bad value");
	is_int(mirror_conf_set(m, "concurrency", "auto", err, sizeof(err)),
	    0, "--concurrency auto");
	ok(m->concurrency_auto, "override sets auto");
	is_int(mirror_conf_set(m, "concurrency", "6", err, sizeof(err)), 0,
	    "--concurrency 6 after auto");
	ok(!m->concurrency_auto && m->concurrency == 6, "a number ends auto");
	is_int(mirror_conf_set(m, "streams", "auto", err, sizeof(err)), 0,
	    "--streams auto");
	ok(m->streams_auto && m->streams == 4, "streams auto, start 4");
	is_int(mirror_conf_set(m, "concurency", "4", err, sizeof(err)),
	    BM_EINVAL, "unknown key");
	is_str(err, "unknown key 'concurency'", "unknown key reason");
	is_int(mirror_conf_set(m, "transport", "udt", err, sizeof(err)),
	    0, "--transport udt (checked against the source at the end)");
	ok(m->transport == TRANSPORT_UDT, "transport udt set");
	is_int(mirror_conf_set(m, "transport", "auto", err, sizeof(err)),
	    0, "--transport auto");
	is_int(mirror_conf_set(m, "transport", "tcp", err, sizeof(err)),
	    0, "--transport tcp");
	is_int(mirror_conf_set(m, "post_sync", "reindex \"$BIOMIRROR_DEST\"",
	    err, sizeof(err)), 0, "post_sync");
	is_str(m->post_sync, "reindex \"$BIOMIRROR_DEST\"", "post_sync kept "
	    "as written");
	is_int(mirror_conf_set(m, "metrics_file", "/tmp/m.prom", err,
	    sizeof(err)), 0, "metrics_file");
	is_str(m->metrics_file, "/tmp/m.prom", "metrics_file stored");
	is_int(mirror_conf_set(m, "metrics_file", "m.prom", err,
	    sizeof(err)), BM_EINVAL, "relative metrics_file");
	is_str(m->metrics_file, "/tmp/m.prom", "unchanged after a bad value");
	/* Ad-hoc runs may use a relative dest, never the root. */
	is_int(mirror_conf_set(m, "dest", "//", err, sizeof(err)), 0,
	    "--dest //");
	is_int(mirror_conf_check(m, err, sizeof(err)), BM_EINVAL,
	    "check refuses dest /");
	is_str(err, "dest = //: the root directory cannot be a mirror's "
	    "destination", "root dest reason");
	is_int(mirror_conf_set(m, "dest", "./out", err, sizeof(err)), 0,
	    "--dest ./out");
	is_int(mirror_conf_check(m, err, sizeof(err)), 0,
	    "check accepts a relative dest");
	is_int(mirror_conf_set(m, "exclude", "*.tmp", err, sizeof(err)), 0,
	    "--exclude");
	is_int(mirror_conf_set(m, "exclude", "old/", err, sizeof(err)), 0,
	    "--exclude again");
	ok(m->nexclude == 2 && strcmp(m->exclude[0], "*.tmp") == 0 &&
	    strcmp(m->exclude[1], "old/") == 0, "excludes appended in order");
	is_int(mirror_conf_set(m, "max_delete", "5", err, sizeof(err)), 0,
	    "--max-delete 5");
	ok(m->max_delete == 5 && !m->max_delete_pct, "max_delete count");
	is_int(mirror_conf_set(m, "user_agent", "a\tb", err, sizeof(err)),
	    BM_EINVAL, "control byte in user_agent");
	mirror_conf_free(m);
	mirror_conf_free(NULL);
	config_free(NULL);
}

static void
test_files(struct ctx *t)
{
	struct config	*c = NULL;
	char		 p[160], want[256];

	snprintf(p, sizeof(p), "%s/missing.conf", t->dir);
	is_int(config_load(p, &c, t->err, sizeof(t->err)), BM_ENOENT,
	    "missing file is BM_ENOENT");
	snprintf(want, sizeof(want), "%s: No such file or directory", p);
	is_str(t->err, want, "missing file message");
	is_int(config_load(t->dir, &c, t->err, sizeof(t->err)), BM_ENOENT,
	    "directory rejected, as a file that cannot be opened");
	snprintf(want, sizeof(want), "%s: Is a directory", t->dir);
	is_str(t->err, want, "directory message: its errno");
	is_int(config_load("/dev/null", &c, t->err, sizeof(t->err)), BM_EINVAL,
	    "a device rejected");
	is_str(t->err, "/dev/null: not a regular file", "device message");
	ok(c == NULL, "no config on failure");
}

/* The shipped example configs must load (run from the source tree). */
static void
test_examples(void)
{
	static const char *const files[] = {
		"conf/biomirror.conf", "conf/ncbi-blast.conf"
	};
	struct config	*c;
	char		 err[1024];
	size_t		 i;

	for (i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		c = NULL;
		if (access(files[i], R_OK) != 0) {
			ok(1, "# SKIP %s not found (not run from the tree)",
			    files[i]);
			continue;
		}
		if (!ok(config_load(files[i], &c, err, sizeof(err)) == 0,
		    "%s loads", files[i]))
			printf("#   %s\n", err);
		ok(c != NULL && c->nmirrors >= 1, "%s has a mirror", files[i]);
		config_free(c);
	}
}

/*
 * post_sync: a line where inih sees an inline comment is refused (the
 * command would be cut short); metrics_file: not an existing directory,
 * not inside a dest (or its snapshot directory), not in the state dir.
 */
static void
test_hook_metrics_paths(struct ctx *t)
{
	struct config		*c = NULL;
	struct mirror_conf	*m;
	char			 text[1024], msg[512];

	bad_value(t, "post_sync", "echo first ; echo second",
	    "post_sync: ' ;' starts a comment in this file, so the command "
	    "would be cut to 'echo first': put the command in a script and "
	    "name the script here (a comment goes on a line of its own)");
	bad_value(t, "post_sync", "/usr/local/bin/reindex ; the indexer",
	    "post_sync: ' ;' starts a comment in this file, so the command "
	    "would be cut to '/usr/local/bin/reindex': put the command in a "
	    "script and name the script here (a comment goes on a line of "
	    "its own)");
	/* ';' not after whitespace is no comment for inih: kept whole. */
	if ((m = good_value(t, "post_sync", "echo first; echo second",
	    &c)) != NULL)
		is_str(m->post_sync, "echo first; echo second",
		    "post_sync with ';' glued to a word kept whole");
	config_free(c);
	c = NULL;

	snprintf(msg, sizeof(msg), "metrics_file = %s: an existing "
	    "directory, not a file name", t->dir);
	bad_value(t, "metrics_file", t->dir, msg);
	fails(t, HEAD "metrics_file = /srv/m/metrics/bm.prom\n", 4,
	    "metrics_file /srv/m/metrics/bm.prom of [m] is inside dest "
	    "/srv/m of [m]: a sync would delete it or leave it behind");
	fails(t, HEAD "metrics_file = /srv/m.biomirror/bm.prom\n", 4,
	    "metrics_file /srv/m.biomirror/bm.prom of [m] is inside dest "
	    "/srv/m of [m] (its snapshot directory): a sync would delete it "
	    "or leave it behind");
	/* Another mirror's dest, even one defined later in the file. */
	fails(t, HEAD "metrics_file = /srv/n//bm.prom\n"
	    "[n]\nsource = https://h.example/y/\ndest = /srv/n\n", 4,
	    "metrics_file /srv/n//bm.prom of [m] is inside dest /srv/n of "
	    "[n]: a sync would delete it or leave it behind");
	fails(t, "[global]\nstate_dir = /var/lib/bm\n" HEAD
	    "metrics_file = /var/lib/bm/metrics.prom\n", 6,
	    "metrics_file /var/lib/bm/metrics.prom of [m] is inside "
	    "state_dir /var/lib/bm: the state directory holds only "
	    "biomirror's manifests and locks");
	/* Beside them is fine: /srv/m2 is not inside /srv/m. */
	snprintf(text, sizeof(text), "[global]\nstate_dir = /var/lib/bm\n"
	    HEAD "metrics_file = /srv/m2/bm.prom\n");
	is_int(load(t, text, &c), 0, "metrics_file beside dest and state_dir");
	config_free(c);
}

/*
 * config_check_adhoc_dest with a relative dest and no working directory
 * (removed under the process): the reason, not a bare code ("out of
 * memory" in the CLI before).  The working directory is restored.
 */
static void
test_adhoc_dest_nocwd(struct ctx *t, const struct config *c)
{
	char	 gone[PATH_MAX], err[512];
	int	 here;

	(void)snprintf(gone, sizeof(gone), "%s/gone", t->dir);
	if ((here = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1 ||
	    mkdir(gone, 0700) != 0 || chdir(gone) != 0 || rmdir(gone) != 0) {
		ok(0, "adhoc dest: no working directory set up");
	} else {
		err[0] = '\0';
		is_int(config_check_adhoc_dest(c, "rel", err, sizeof(err)),
		    BM_EIO, "a relative dest without a working directory");
		is_str(err, "--dest rel: a relative path, and no working "
		    "directory to resolve it against: No such file or "
		    "directory", "no working directory: message");
	}
	if (here != -1) {
		ok(fchdir(here) == 0, "adhoc dest: working directory restored");
		(void)close(here);
	}
}

/* config_check_adhoc_dest: --dest against the configured destinations. */
static void
test_adhoc_dest(struct ctx *t)
{
	struct config	*c = NULL;
	char		 err[512];

	if (load(t, HEAD "[set]\nsource = http://h/s/\ndest = /srv/s\n"
	    "publish = set\n", &c) != 0) {
		ok(0, "adhoc dest: config loads (%s)", t->err);
		return;
	}
	is_int(config_check_adhoc_dest(c, "/srv/other", err, sizeof(err)), 0,
	    "a dest apart is fine");
	is_int(config_check_adhoc_dest(c, "/srv/mm", err, sizeof(err)), 0,
	    "/srv/mm is not inside /srv/m");
	is_int(config_check_adhoc_dest(c, "/srv//m/.", err, sizeof(err)),
	    BM_EINVAL, "the same dest, spelled otherwise");
	is_str(err, "--dest /srv//m/. is the same directory as dest /srv/m "
	    "of [m]: mirrors must not share or nest destinations",
	    "same: message");
	is_int(config_check_adhoc_dest(c, "/srv/m/sub", err, sizeof(err)),
	    BM_EINVAL, "inside a dest");
	is_int(config_check_adhoc_dest(c, "/srv", err, sizeof(err)),
	    BM_EINVAL, "around a dest");
	is_str(err, "--dest /srv contains dest /srv/m of [m]: mirrors must "
	    "not share or nest destinations", "around: message");
	is_int(config_check_adhoc_dest(c, "/srv/s.biomirror/snapshots", err,
	    sizeof(err)), BM_EINVAL, "inside DEST.biomirror");
	is_int(config_check_adhoc_dest(c, "/srv/x/../m", err, sizeof(err)),
	    BM_EINVAL, "'..'");
	is_str(err, "--dest /srv/x/../m: '..' components are not allowed "
	    "(write the directory without them: they resolve differently "
	    "across symlinks)", "'..': message");
	is_int(config_check_adhoc_dest(NULL, "/srv/m", err, sizeof(err)), 0,
	    "no config: nothing to overlap");
	test_adhoc_dest_nocwd(t, c);
	config_free(c);
}

/* Load text with config_load_all(); *ret set when the file was read. */
static int
load_all(struct ctx *t, const char *text, struct config **ret)
{
	write_conf(t, text, strlen(text));
	t->err[0] = '\0';
	return config_load_all(t->path, ret, t->err, sizeof(t->err));
}

/* Error i of c is at line of t's file, in mirror name (NULL: none). */
static void
is_error(struct ctx *t, const struct config *c, size_t i, unsigned line,
    const char *name, const char *reason)
{
	char	 where[160];

	snprintf(where, sizeof(where), "%s:%u", t->path, line);
	if (!ok(i < c->nerrors, "error %zu exists (%s)", i, reason))
		return;
	is_str(c->errors[i].where, where, "error %zu: where", i);
	is_str(c->errors[i].reason, reason, "error %zu: reason", i);
	if (name == NULL)
		ok(c->errors[i].mirror == NULL, "error %zu: no mirror", i);
	else
		ok(c->errors[i].mirror != NULL &&
		    strcmp(c->errors[i].mirror->name, name) == 0,
		    "error %zu: mirror %s", i, name);
}

/*
 * config_load_all(): an error in one mirror's section makes that mirror
 * bad and leaves the others usable; every error is listed, each with
 * its line; errors outside mirror sections are fatal; a broken header's
 * keys never reach the section before it.
 */
static void
test_load_all(struct ctx *t)
{
	struct config	*c = NULL;
	struct mirror_conf *m;

	is_int(load_all(t, "[good]\nsource = https://h/a/\ndest = /srv/a\n"
	    "[bad]\nsource = https://h/b/\ndest = /srv/b\nconcurrency = 0\n"
	    "bogus = 1\n[good2]\nsource = https://h/c/\ndest = /srv/c\n",
	    &c), 0, "load_all: a file with a bad section loads");
	if (c != NULL) {
		is_int(c->nmirrors, 3, "three mirrors, the bad one too");
		ok(!c->fatal, "not fatal");
		is_int(c->nerrors, 2, "both errors of [bad] listed");
		is_error(t, c, 0, 7, "bad", "concurrency = 0: expected an "
		    "integer from 1 to 1024, or auto");
		is_error(t, c, 1, 8, "bad", "unknown key 'bogus' in section "
		    "[bad]");
		m = config_find(c, "good");
		ok(m != NULL && !m->bad && strcmp(m->dest, "/srv/a") == 0,
		    "[good] usable");
		m = config_find(c, "good2");
		ok(m != NULL && !m->bad && strcmp(m->source, "https://h/c/") ==
		    0, "[good2] after the bad one usable");
		ok(config_find(c, "bad") != NULL && config_find(c, "bad")->bad,
		    "[bad] is bad");
	}
	config_free(c);
	c = NULL;

	/* The same file through config_load(): the first error fails it. */
	is_int(load(t, "[good]\nsource = https://h/a/\ndest = /srv/a\n"
	    "[bad]\nsource = https://h/b/\ndest = /srv/b\nconcurrency = 0\n",
	    &c), BM_EINVAL, "config_load still refuses the file");
	ok(c == NULL, "config_load returns no config");

	/* Missing source at the header's line; errors in two sections. */
	c = NULL;
	is_int(load_all(t, "[a]\ndest = /srv/a\n[b]\nsource = https://h/\n"
	    "dest = relative\n[c]\nsource = https://h/\ndest = /srv/c\n",
	    &c), 0, "two bad sections load");
	if (c != NULL) {
		is_int(c->nerrors, 2, "two errors");
		is_error(t, c, 0, 1, "a", "missing key 'source' in section "
		    "[a]");
		is_error(t, c, 1, 5, "b", "dest must be an absolute path (got "
		    "'relative'; a relative path would resolve against the "
		    "working directory)");
		ok(!config_find(c, "c")->bad, "[c] usable");
	}
	config_free(c);
	c = NULL;

	/*
	 * A shared or nested dest: both mirrors bad, each naming the other,
	 * and a third inside the later one's tree is refused as well.
	 */
	is_int(load_all(t, "[new]\nsource = https://h/a/\ndest = /srv/p/x\n"
	    "[prod]\nsource = https://h/b/\ndest = /srv/p\n"
	    "[ok]\nsource = https://h/c/\ndest = /srv/q\n", &c), 0,
	    "nested dests load");
	if (c != NULL) {
		is_int(c->nerrors, 2, "nested: one error for each mirror");
		is_error(t, c, 0, 6, "prod", "dest /srv/p of [prod] contains "
		    "dest /srv/p/x of [new] (section on line 1): mirrors must "
		    "not share or nest destinations");
		is_error(t, c, 1, 3, "new", "dest /srv/p/x of [new] is inside "
		    "dest /srv/p of [prod] (section on line 4): mirrors must "
		    "not share or nest destinations");
		ok(config_find(c, "new")->bad, "nested: the earlier one is bad");
		ok(config_find(c, "prod")->bad, "nested: the later one is bad");
		ok(!config_find(c, "ok")->bad, "nested: [ok] usable");
	}
	config_free(c);
	c = NULL;
	is_int(load_all(t, "[a]\nsource = https://h/a/\ndest = /srv/p\n"
	    "[b]\nsource = https://h/b/\ndest = /srv/p/\n"
	    "[c]\nsource = https://h/c/\ndest = /srv/p/c\n", &c), 0,
	    "one dest three times loads");
	if (c != NULL) {
		is_int(c->nerrors, 6, "each pair twice");
		is_error(t, c, 1, 3, "a", "dest /srv/p of [a] is the same "
		    "directory as dest /srv/p/ of [b] (section on line 4): "
		    "mirrors must not share or nest destinations");
		is_error(t, c, 4, 9, "c", "dest /srv/p/c of [c] is inside dest "
		    "/srv/p of [b] (section on line 4): mirrors must not share "
		    "or nest destinations");
		ok(config_find(c, "a")->bad && config_find(c, "b")->bad &&
		    config_find(c, "c")->bad, "all three bad");
	}
	config_free(c);
	c = NULL;

	/* A bad source value is reported once, not again as missing. */
	is_int(load_all(t, "[a]\nsource = gopher://h/\ndest = /srv/a\n", &c),
	    0, "bad source loads");
	if (c != NULL) {
		is_int(c->nerrors, 1, "one error for a bad source");
		ok(c->nerrors == 1 && c->errors[0].mirror != NULL,
		    "in [a]");
	}
	config_free(c);
	c = NULL;

	/* [global] errors are fatal; the mirrors' errors still listed. */
	is_int(load_all(t, "[global]\nlog_level = loud\n[a]\nsource = "
	    "https://h/\ndest = /srv/a\nretries = x\n", &c), 0,
	    "global error loads");
	if (c != NULL) {
		ok(c->fatal, "a [global] error is fatal");
		is_int(c->nerrors, 2, "both errors");
		is_error(t, c, 0, 2, NULL, "log_level = loud: expected error, "
		    "warning, info, verbose or debug");
		is_error(t, c, 1, 6, "a", "retries = x: expected an integer "
		    "from 0 to 100");
	}
	config_free(c);
	c = NULL;
	is_int(load_all(t, "x = 1\n[a]\nsource = https://h/\ndest = /srv/a\n",
	    &c), 0, "key before any section loads");
	ok(c != NULL && c->fatal && c->nerrors == 1 &&
	    c->errors[0].mirror == NULL, "a key outside sections is fatal");
	config_free(c);
	c = NULL;

	/*
	 * A malformed header: an error of no mirror; its keys are checked,
	 * and never added to the section before (include would append).
	 */
	is_int(load_all(t, "[a]\nsource = https://h/\ndest = /srv/a\n"
	    "[b c]\ninclude = *.x\nconcurrency = 0\n[d\ninclude = *.y\n"
	    "[e]\nsource = https://h/e/\ndest = /srv/e\n", &c), 0,
	    "broken headers load");
	if (c != NULL) {
		ok(!c->fatal, "broken headers are not fatal");
		is_int(c->nmirrors, 2, "only [a] and [e] are mirrors");
		m = config_find(c, "a");
		ok(m != NULL && !m->bad && m->ninclude == 0,
		    "[a] usable, no include from a broken section");
		ok(config_find(c, "e") != NULL && !config_find(c, "e")->bad,
		    "[e] usable");
		is_int(c->nerrors, 3, "three errors");
		is_error(t, c, 0, 4, NULL, "bad mirror name 'b c' (1 to 64 "
		    "letters, digits, '.', '_' or '-', starting with a letter "
		    "or digit)");
		is_error(t, c, 1, 6, NULL, "concurrency = 0: expected an "
		    "integer from 1 to 1024, or auto");
		is_error(t, c, 2, 7, NULL, "section header without closing "
		    "']'");
	}
	config_free(c);
	c = NULL;

	/* A repeated section makes the first bad; its keys are checked. */
	is_int(load_all(t, "[a]\nsource = https://h/\ndest = /srv/a\n"
	    "[b]\nsource = https://h/b/\ndest = /srv/b\n"
	    "[a]\nsource = https://h/\ndest = /srv/a2\nretries = -1\n", &c),
	    0, "a duplicate section loads");
	if (c != NULL) {
		is_int(c->nmirrors, 2, "one [a], one [b]");
		ok(config_find(c, "a")->bad, "[a] is bad");
		ok(!config_find(c, "b")->bad, "[b] usable");
		is_int(c->nerrors, 2, "two errors");
		is_error(t, c, 0, 7, "a", "duplicate section [a] (first on "
		    "line 1)");
		is_error(t, c, 1, 10, "a", "retries = -1: expected an integer "
		    "from 0 to 100");
		is_str(config_find(c, "a")->dest, "/srv/a",
		    "the first [a]'s dest kept");
	}
	config_free(c);
	c = NULL;

	/* A continuation line and a missing '=' are the section's. */
	is_int(load_all(t, "[a]\nsource = https://h/\ndest = /srv/a\n"
	    "  more\n[b]\nsource = https://h/b/\nnothing here\n"
	    "dest = /srv/b\n[c]\nsource = https://h/c/\ndest = /srv/c\n", &c),
	    0, "line errors load");
	if (c != NULL) {
		ok(config_find(c, "a")->bad && config_find(c, "b")->bad &&
		    !config_find(c, "c")->bad, "[a], [b] bad, [c] usable");
		is_int(c->nerrors, 2, "two errors");
		ok(c->nerrors == 2 && strstr(c->errors[0].reason,
		    "indented line") != NULL, "continuation");
		is_error(t, c, 1, 7, "b", "missing '=' (expected 'key = "
		    "value', a [section] or a ; comment)");
	}
	config_free(c);
	c = NULL;

	/* A metrics_file inside another mirror's dest: that mirror's. */
	is_int(load_all(t, "[a]\nsource = https://h/\ndest = /srv/a\n"
	    "metrics_file = /srv/b/m.prom\n[b]\nsource = https://h/b/\n"
	    "dest = /srv/b\n", &c), 0, "metrics in a dest loads");
	ok(c != NULL && config_find(c, "a")->bad &&
	    !config_find(c, "b")->bad && c->nerrors == 1 &&
	    strstr(c->errors[0].where, ":4") != NULL,
	    "metrics_file error on its line, against [a]");
	config_free(c);
	c = NULL;

	/* An over-long header line: a broken section, not [a]'s keys. */
	{
		char	 text[1024];
		char	 name[300];

		memset(name, 'n', sizeof(name) - 1);
		name[sizeof(name) - 1] = '\0';
		snprintf(text, sizeof(text), "[a]\nsource = https://h/\n"
		    "dest = /srv/a\n[%s]\ninclude = *.z\n", name);
		is_int(load_all(t, text, &c), 0, "long header loads");
		ok(c != NULL && !config_find(c, "a")->bad &&
		    config_find(c, "a")->ninclude == 0 && c->nerrors >= 1 &&
		    c->errors[0].mirror == NULL, "long header: its own "
		    "broken section");
		config_free(c);
		c = NULL;
	}
}

static void
test_duration_clear(void)
{
	struct mirror_conf *m;
	uint64_t	 v = 0;

	ok(parse_duration("3600", &v) == 0 && v == 3600, "3600");
	ok(parse_duration("90m", &v) == 0 && v == 5400, "90m");
	ok(parse_duration("36h", &v) == 0 && v == 129600, "36h");
	ok(parse_duration("7d", &v) == 0 && v == 604800, "7d");
	ok(parse_duration("1s", &v) == 0 && v == 1, "1s");
	ok(parse_duration("0", &v) == 0 && v == 0, "0");
	is_int(parse_duration("", &v), BM_EINVAL, "empty");
	is_int(parse_duration("-1", &v), BM_EINVAL, "negative");
	is_int(parse_duration("5w", &v), BM_EINVAL, "unknown unit");
	is_int(parse_duration("5mm", &v), BM_EINVAL, "two units");
	is_int(parse_duration("h", &v), BM_EINVAL, "no number");
	is_int(parse_duration("200000000000000000d", &v), BM_EINVAL,
	    "overflow");

	if ((m = mirror_conf_new("x")) == NULL)
		return;
	ok(mirror_conf_set(m, "include", "*.a", NULL, 0) == 0 &&
	    mirror_conf_set(m, "include", "*.b", NULL, 0) == 0 &&
	    m->ninclude == 2, "two includes");
	is_int(mirror_conf_clear(m, "include"), 0, "clear include");
	ok(m->ninclude == 0 && m->include == NULL, "includes gone");
	ok(mirror_conf_set(m, "include", "*.c", NULL, 0) == 0 &&
	    m->ninclude == 1 && strcmp(m->include[0], "*.c") == 0,
	    "a new list");
	ok(mirror_conf_set(m, "exclude", "*.d", NULL, 0) == 0 &&
	    mirror_conf_clear(m, "exclude") == 0 && m->nexclude == 0,
	    "clear exclude");
	is_int(mirror_conf_clear(m, "dest"), BM_EINVAL, "not a list key");
	mirror_conf_free(m);
}

/* [global] holds every mirror key but source and dest as defaults. */
static void
test_global_defaults(struct ctx *t)
{
	struct config		*c = NULL;
	const struct mirror_conf *a, *b;
	unsigned		 line = 0;
	char			 err[256];
	struct mirror_conf	*m;
	size_t			 i, nglobal = 0;

	is_int(load(t, "[global]\ndelete = yes\nconcurrency = 3\n"
	    "include = *.gz\ninclude = *.md5\nbwlimit = 1M\n"
	    "ftp_active = yes\n"
	    "[a]\nsource = http://h/a/\ndest = /srv/a\n"
	    "[b]\nsource = ftp://h/b/\ndest = /srv/b\nconcurrency = 5\n"
	    "include = *.tar\ndelete = no\n", &c), 0, "defaults load");
	if (c == NULL)
		return;
	a = config_find(c, "a");
	b = config_find(c, "b");
	ok(a != NULL && b != NULL, "two mirrors");
	if (a == NULL || b == NULL)
		goto out;
	ok(a->delete && a->concurrency == 3 && a->bwlimit == 1 << 20,
	    "a takes [global]'s delete, concurrency, bwlimit");
	ok(a->ninclude == 2 && strcmp(a->include[1], "*.md5") == 0,
	    "a takes both global includes");
	ok(!a->ftp_active, "an FTP-only default skips an http:// mirror");
	ok(b->ftp_active, "... and applies to an ftp:// one");
	ok(!b->delete && b->concurrency == 5, "a section key replaces");
	ok(b->ninclude == 1 && strcmp(b->include[0], "*.tar") == 0,
	    "a section's include lines replace the global ones");
	for (i = 0; i < a->nsettings; i++)
		if (a->settings[i].global)
			nglobal++;
	is_int(nglobal, 5, "a's settings from [global]");
	is_str(config_key_default("concurrency"), "8", "built-in default");
	/* An ad-hoc mirror takes them too. */
	if ((m = mirror_conf_new("adhoc")) != NULL) {
		(void)mirror_conf_set(m, "source", "http://h/x/", NULL, 0);
		is_int(config_apply_defaults(c, m, err, sizeof(err), &line), 0,
		    "ad-hoc defaults");
		ok(m->delete && m->concurrency == 3, "ad-hoc takes them");
		mirror_conf_free(m);
	}
out:
	config_free(c);
	c = NULL;
	fails(t, "[global]\nsource = http://h/\n", 2,
	    "source belongs in a mirror's section, not in [global]");
	fails(t, "[global]\nconcurrency = 0\n", 2,
	    "concurrency = 0: expected an integer from 1 to 1024, or auto");
	fails(t, "[global]\ndelete = yes\ndelete = no\n", 3,
	    "duplicate key 'delete' in section [global] (first on line 2)");
	fails(t, "[a]\nsource = http://h/a/\ndest = /srv/a\n[global]\n"
	    "delete = yes\n", 5, "delete in [global] after section [a]: "
	    "[global]'s mirror defaults go before the mirror sections");
	fails(t, "[global]\ntransport = udt\n[a]\nsource = http://h/a/\n"
	    "dest = /srv/a\n", 3, "transport = udt needs an ftp:// source "
	    "with ftp_mode = extended (UDT carries GridFTP's extended block "
	    "mode only) in section [a]");
}

/*
 * transport = udt needs the UDT module (agent/xfer/udt_load.c), which
 * check-config loads for such a mirror only; tcp and auto (TCP in this
 * build) do not.  Only missing or broken modules here: loading libudt
 * would sleep 100 ms and start its threads in every run of this test.
 */
static void
test_udt_module(struct ctx *t)
{
	static const char *const nets[] = { "udt", "auto", "tcp" };
	struct config	*c = NULL;
	char		 keep[PATH_MAX] = "", err[1024], text[256], junk[128];
	const char	*env = getenv("BM_UDT_MODULE");
	size_t		 i;

	if (env != NULL)
		(void)snprintf(keep, sizeof(keep), "%s", env);
	(void)setenv("BM_UDT_MODULE", "/nonexistent/libbiomirror-udt.so", 1);
	for (i = 0; i < sizeof(nets) / sizeof(nets[0]); i++) {
		(void)snprintf(text, sizeof(text), "[m]\nsource = ftp://h/pub/\n"
		    "dest = /srv/m\nftp_mode = extended\ntransport = %s\n",
		    nets[i]);
		is_int(load(t, text, &c), 0, "transport = %s loads", nets[i]);
		err[0] = '\0';
		is_int(c != NULL ? mirror_conf_transport_ready(c->mirrors[0],
		    err, sizeof(err)) : -1, i == 0 ? BM_EINVAL : 0,
		    "transport = %s without the UDT module: %s", nets[i],
		    i == 0 ? "not ready" : "ready");
		if (i == 0)
			is_str(err, "UDT module /nonexistent/libbiomirror-udt.so: "
			    "cannot open shared object file: No such file or "
			    "directory", "check-config's reason (UDT)");
		config_free(c);
		c = NULL;
	}
	/* A file that is no shared object. */
	(void)snprintf(junk, sizeof(junk), "%s/libbiomirror-udt.so", t->dir);
	write_file(junk, "not an ELF file\n");
	(void)setenv("BM_UDT_MODULE", junk, 1);
	is_int(load(t, "[m]\nsource = ftp://h/pub/\ndest = /srv/m\n"
	    "ftp_mode = extended\ntransport = udt\n", &c), 0,
	    "transport = udt loads");
	err[0] = '\0';
	is_int(c != NULL ? mirror_conf_transport_ready(c->mirrors[0], err,
	    sizeof(err)) : -1, BM_EINVAL, "a broken UDT module: not ready");
	(void)snprintf(text, sizeof(text), "UDT module %s: ", junk);
	ok(strncmp(err, text, strlen(text)) == 0, "check-config's reason "
	    "names the broken module: %s", err);
	config_free(c);
	(void)unlink(junk);
	if (keep[0] != '\0')
		(void)setenv("BM_UDT_MODULE", keep, 1);
	else
		(void)unsetenv("BM_UDT_MODULE");
}

/*
 * Before anything loads the curl module (agent/xfer/curl_load.c): a
 * bm:// source is checked by the bm transport's own URL rules without
 * it; an http:// source needs it, and a missing one is said.  Then the
 * bm:// URL rules (bx_inspect), as libcurl's parser gave them before.
 */
static void
test_modules(struct ctx *t)
{
	struct config	*c = NULL;
	char		 keep[PATH_MAX] = "", err[1024];
	const char	*env = getenv("BM_CURL_MODULE");

	if (env != NULL)
		(void)snprintf(keep, sizeof(keep), "%s", env);
	(void)setenv("BM_CURL_MODULE", "/nonexistent/libbiomirror-curl.so", 1);
	is_int(load(t, "[m]\nsource = bm://h:7722/pub/\ndest = /srv/m\n", &c),
	    0, "a bm:// source without the curl module");
	config_free(c);
	c = NULL;
	/* status, ls, history need no transport: the config still loads */
	is_int(load(t, "[m]\nsource = http://h/pub/\ndest = /srv/m\n", &c),
	    0, "an http:// source without the curl module");
	err[0] = '\0';
	is_int(c != NULL ? mirror_conf_transport_ready(c->mirrors[0], err,
	    sizeof(err)) : -1, BM_EINVAL, "its transport is not ready");
	is_str(err, "curl module /nonexistent/libbiomirror-curl.so: "
	    "cannot open shared object file: No such file or directory",
	    "check-config's reason");
	config_free(c);
	c = NULL;
	/* UDT's mirror needs the curl module too (gridftp is stacked on it). */
	is_int(load(t, "[m]\nsource = ftp://h/pub/\ndest = /srv/m\n"
	    "ftp_mode = extended\ntransport = udt\n", &c), 0,
	    "a UDT source without the curl module");
	err[0] = '\0';
	is_int(c != NULL ? mirror_conf_transport_ready(c->mirrors[0], err,
	    sizeof(err)) : -1, BM_EINVAL, "its transport is not ready");
	is_str(err, "curl module /nonexistent/libbiomirror-curl.so: "
	    "cannot open shared object file: No such file or directory",
	    "check-config's reason: the curl module first");
	config_free(c);
	c = NULL;
	if (keep[0] != '\0')
		(void)setenv("BM_CURL_MODULE", keep, 1);
	else
		(void)unsetenv("BM_CURL_MODULE");
	test_udt_module(t);
	fails(t, "[m]\nsource = bm://user@h/pub/\n", 2, "source: a source URL "
	    "takes no user or password (it is logged and stored with every "
	    "run; an FTP login goes in user and password_file)");
	fails(t, "[m]\nsource = bm://h/pub/?x=1\n", 2, "source = "
	    "bm://h/pub/?x=1: a source URL takes no query or fragment");
	fails(t, "[m]\nsource = bm://h:99999/pub/\n", 2, "source = "
	    "bm://h:99999/pub/: bad URL (Port number was not a decimal "
	    "number between 0 and 65535)");
	fails(t, "[m]\nsource = bm://h:7x/pub/\n", 2, "source = "
	    "bm://h:7x/pub/: bad URL (Port number was not a decimal "
	    "number between 0 and 65535)");
	fails(t, "[m]\nsource = bm://[::1/pub/\n", 2, "source = "
	    "bm://[::1/pub/: bad URL (Bad IPv6 address)");
	fails(t, "[m]\nsource = bm://h<x/pub/\n", 2, "source = "
	    "bm://h<x/pub/: bad URL (Bad hostname)");
	{
		/* The run holds a host of at most 127 bytes (bx_parse). */
		char	 conf[512], want[512], host[129];

		memset(host, 'h', 128);
		host[128] = '\0';
		(void)snprintf(conf, sizeof(conf), "[m]\nsource = bm://%s/p/\n",
		    host);
		(void)snprintf(want, sizeof(want), "source = bm://%s/p/: bad "
		    "URL (Bad hostname: over 127 bytes)", host);
		fails(t, conf, 2, want);
	}
	/*
	 * The path as the run reads it (bx_parse, bx_url_path): it refused
	 * these when it listed (exit 3) or opened the transport.
	 */
	fails(t, "[m]\nsource = bm://h/up/a%00b/\n", 2, "source = "
	    "bm://h/up/a%00b/: bad URL (Bad path: a percent-escape that is "
	    "not %XX, or %00)");
	fails(t, "[m]\nsource = bm://h/up/a%zzb/\n", 2, "source = "
	    "bm://h/up/a%zzb/: bad URL (Bad path: a percent-escape that is "
	    "not %XX, or %00)");
	fails(t, "[m]\nsource = bm://h/up//x/\n", 2, "source = "
	    "bm://h/up//x/: bad URL (Bad path: an empty segment)");
	fails(t, "[m]\nsource = bm://h/up/x//\n", 2, "source = "
	    "bm://h/up/x//: bad URL (Bad path: an empty segment)");
	fails(t, "[m]\nsource = bm://h/up/a%01b/\n", 2, "source = "
	    "bm://h/up/a%01b/: bad URL (Bad path: a segment that is '.' or "
	    "'..', over 255 bytes, holds a control byte or starts with "
	    ".biomirror-tmp.)");
	fails(t, "[m]\nsource = bm://h/u%2Fp/x/\n", 2, "source = "
	    "bm://h/u%2Fp/x/: bad URL (Bad export name)");
	fails(t, "[m]\nsource = bm://h/up/../x/\n", 2, "source = "
	    "bm://h/up/../x/: '.' and '..' path segments are not allowed "
	    "(write the directory without them)");
	/* A bad path with a password: the message does not repeat it. */
	fails(t, "[m]\nsource = bm://u:pw@h/up//x/\n", 2, "source: a "
	    "source URL takes no user or password (it is logged and stored "
	    "with every run; an FTP login goes in user and password_file)");
	is_int(load(t, "[m]\nsource = bm://h/up/a%2Fb%20c\ndest = /srv/m\n",
	    &c), 0, "a bm:// path with escapes that decode to a safe path");
	config_free(c);
	c = NULL;
	is_int(load(t, "[m]\nsource = bm://[::1]:7722/pub/\ndest = /srv/m\n",
	    &c), 0, "a bm:// source of an IPv6 literal and a port");
	is_int(c != NULL ? mirror_conf_transport_ready(c->mirrors[0], err,
	    sizeof(err)) : -1, 0, "a bm:// transport is ready");
	config_free(c);
	c = NULL;
	is_int(load(t, "[m]\nsource = http://h/pub/\ndest = /srv/m\n", &c),
	    0, "an http:// source with the curl module");
	is_int(c != NULL ? mirror_conf_transport_ready(c->mirrors[0], err,
	    sizeof(err)) : -1, 0, "its transport is ready");
	config_free(c);
}

int
main(void)
{
	struct ctx	 t;

	memset(&t, 0, sizeof(t));
	snprintf(t.dir, sizeof(t.dir), "/tmp/test_config.XXXXXX");
	if (mkdtemp(t.dir) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(t.path, sizeof(t.path), "%s/t.conf", t.dir);

	test_modules(&t);	/* first: before the curl module is loaded */
	test_defaults(&t);
	test_every_key(&t);
	test_publish(&t);
	test_global(&t);
	test_global_defaults(&t);
	test_structure(&t);
	test_long_lines(&t);
	test_unsupported(&t);
	test_dests(&t);
	test_ca_file(&t);
	test_ftp(&t);
	test_values(&t);
	test_sizes();
	test_set();
	test_files(&t);
	test_hook_metrics_paths(&t);
	test_adhoc_dest(&t);
	test_examples();
	test_load_all(&t);
	test_duration_clear();

	(void)unlink(t.path);
	(void)rmdir(t.dir);
	return done_testing();
}
