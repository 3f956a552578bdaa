/*
 * Unit tests for the [serve] and [export NAME] sections of agent/config.c:
 * defaults, every key, allow ranges, listen forms; errors name FILE:LINE
 * and are of no mirror (a mirror beside them stays usable, the file is
 * not fatal); secret_file must be 0600 or stricter; an export needs path
 * or mirror (not both) and a mirror export a good mirror.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "biomirror/config.h"
#include "biomirror/error.h"
#include "tap.h"

static char	 dir[64], path[128], secret[128];

static struct config *
load(const char *text)
{
	struct config	*c = NULL;
	char		 err[512];
	FILE		*fp;

	if ((fp = fopen(path, "w")) == NULL)
		tap_bail("fopen");
	fputs(text, fp);
	fclose(fp);
	if (config_load_all(path, &c, err, sizeof(err)) != 0)
		tap_bail(err);
	return c;
}

/* The single error of text is at line with reason why. */
static void
one_error(const char *text, unsigned line, const char *why)
{
	struct config	*c = load(text);
	char		 where[160];

	(void)snprintf(where, sizeof(where), "%s:%u", path, line);
	ok(c->nerrors == 1, "one error: %s", why);
	if (c->nerrors >= 1) {
		is_str(c->errors[0].where, where, "where: %s", why);
		is_str(c->errors[0].reason, why, "reason");
		ok(c->errors[0].mirror == NULL && !c->fatal, "of no mirror");
	}
	config_free(c);
}

static void
test_keys(void)
{
	struct config		*c;
	struct export_conf	*e;
	char			 text[2048];

	c = load("[m]\nsource = http://h/\ndest = /srv/m\npublish = set\n");
	ok(c->nerrors == 0 && c->serve.max_clients == 16 &&
	    c->serve.max_connections == 8 && c->serve.idle_timeout == 300 &&
	    c->serve.drain_timeout == 30 && c->serve.listen == NULL &&
	    c->serve.max_per_address == 0 &&
	    c->serve.max_queued_bytes == 8 << 20,
	    "defaults without [serve]");
	config_free(c);
	(void)snprintf(text, sizeof(text),
	    "[serve]\nlisten = 127.0.0.1:7000\nmax_clients = 4\n"
	    "max_connections = 2\nidle_timeout = 9\ndrain_timeout = 0\n"
	    "secret_file = %s\nmetrics_file = /var/lib/x/serve.prom\n"
	    "max_per_address = 5\nmax_queued_bytes = 2M\n"
	    "[export pub]\npath = /srv/pub\nallow = 10.0.0.0/8, ::1\n"
	    "allow = 192.168.1.7\n"
	    "[m]\nsource = http://h/\ndest = /srv/m\n"
	    "[export m]\nmirror = m\nsecret_file = %s\n", secret, secret);
	c = load(text);
	is_int(c->nerrors, 0, "a full [serve] and two exports");
	ok(c->serve.max_clients == 4 && c->serve.max_connections == 2 &&
	    c->serve.idle_timeout == 9 && c->serve.drain_timeout == 0 &&
	    c->serve.max_per_address == 5 &&
	    c->serve.max_queued_bytes == 2 << 20, "numbers");
	is_str(c->serve.listen, "127.0.0.1:7000", "listen");
	is_int(c->nexports, 2, "exports");
	e = config_find_export(c, "pub");
	ok(e != NULL && e->nallow == 3 && e->allow[0].prefix == 8 &&
	    e->allow[1].family == AF_INET6 && e->allow[1].prefix == 128 &&
	    e->allow[2].prefix == 32, "allow ranges");
	e = config_find_export(c, "m");
	ok(e != NULL && e->mirror != NULL && strcmp(e->mirror, "m") == 0 &&
	    e->secret_file != NULL, "mirror export");
	ok(config_find(c, "m") != NULL && config_find(c, "serve") == NULL,
	    "[serve] is not a mirror");
	config_free(c);
}

/* A secret_file that serve or a sync would refuse fails at config time. */
static void
test_secret_forms(void)
{
	char	 text[1024], why[512], p[160];
	uint8_t	*sec = NULL;
	size_t	 len = 0;
	int	 fd;

	(void)snprintf(p, sizeof(p), "%s/link", dir);
	if (symlink(secret, p) != 0)
		tap_bail("symlink");
	(void)snprintf(text, sizeof(text), "[export p]\npath = /a\n"
	    "secret_file = %s\n", p);
	(void)snprintf(why, sizeof(why), "secret_file = %s: a symbolic link: "
	    "not allowed (name the file itself)", p);
	one_error(text, 3, why);
	(void)unlink(p);
	(void)snprintf(p, sizeof(p), "%s/empty", dir);
	if ((fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0600)) == -1 ||
	    write(fd, "\n\r\n", 3) != 3)
		tap_bail("empty secret");
	(void)close(fd);
	(void)snprintf(text, sizeof(text), "[serve]\nsecret_file = %s\n", p);
	(void)snprintf(why, sizeof(why), "secret_file = %s: empty (or only "
	    "newlines)", p);
	one_error(text, 2, why);
	(void)unlink(p);
	ok(config_read_secret(secret, &sec, &len, why, sizeof(why)) == 0 &&
	    len == 1 && sec[0] == 'k', "the secret without its newline");
	free(sec);
}

static void
test_errors(void)
{
	char	 text[1024];

	one_error("[serve]\nlisten = localhost:7722\n", 2, "listen = "
	    "localhost:7722: expected ADDR:PORT with a numeric address "
	    "([::1]:7722, 127.0.0.1:7722, :7722)");
	one_error("[serve]\nmax_clients = 0\n", 2,
	    "max_clients = 0: expected an integer from 1 to 1024");
	one_error("[serve]\nmax_queued_bytes = 2G\n", 2,
	    "max_queued_bytes = 2G: must be at most 1G");
	one_error("[serve]\nmax_per_address = 0\n", 2,
	    "max_per_address = 0: expected an integer from 1 to 65535");
	one_error("[serve]\nbogus = 1\n", 2,
	    "unknown key 'bogus' in section [serve]");
	one_error("[serve]\nudt_cc = rate\n", 2, "udt_cc is not supported "
	    "by this build yet (UDT data connections come later)");
	one_error("[serve]\n[serve]\n", 2,
	    "duplicate section [serve] (first on line 1)");
	one_error("[export p]\npath = rel\n", 2,
	    "path = rel: must be an absolute path");
	one_error("[export p]\npath = /a\nallow = 10.0.0.0/33\n", 3,
	    "allow = 10.0.0.0/33: bad address range '10.0.0.0/33' "
	    "(expected ADDR or ADDR/BITS)");
	one_error("[export p]\n", 1,
	    "section [export] needs path = DIR or mirror = NAME");
	one_error("[export p]\npath = /a\nmirror = m\n", 1,
	    "section [export] takes path or mirror, not both");
	one_error("[export p]\nmirror = nosuch\n", 1, "section [export]: "
	    "mirror = NAME names no configured mirror");
	one_error("[export p]\npath = /a\n[export p]\npath = /b\n", 3,
	    "duplicate section [export p] (first on line 1)");
	one_error("[export]\n", 1, "bad export section '[export]' (expected "
	    "[export NAME], NAME 1 to 64 letters, digits, '.', '_' or '-')");
	(void)chmod(secret, 0640);
	(void)snprintf(text, sizeof(text), "[export p]\npath = /a\n"
	    "secret_file = %s\n", secret);
	{
		char	 why[512];

		(void)snprintf(why, sizeof(why), "secret_file = %s: mode "
		    "0640: must be 0600 or stricter (chmod go= it)", secret);
		one_error(text, 3, why);
	}
	(void)chmod(secret, 0600);
	test_secret_forms();
	/* A bad export leaves a mirror beside it usable. */
	{
		struct config *c = load("[m]\nsource = http://h/\ndest = /srv/m\n"
		    "[export p]\npath = x\n");

		ok(c->nerrors == 1 && !c->fatal && !c->mirrors[0]->bad &&
		    c->exports[0]->bad, "the mirror stays good");
		config_free(c);
	}
}

static void
test_parsers(void)
{
	uint8_t		 a[16];
	uint16_t	 port;
	int		 fam;
	struct net_range r;

	ok(parse_listen(":7000", &fam, a, &port) == 0 && fam == AF_INET &&
	    port == 7000 && a[0] == 0, ":PORT");
	ok(parse_listen("[::1]:8", &fam, a, &port) == 0 && fam == AF_INET6 &&
	    port == 8 && a[15] == 1, "[v6]:PORT");
	ok(parse_listen("10.1.2.3", &fam, a, &port) == 0 && port == 7722 &&
	    a[0] == 10, "ADDR alone: port 7722");
	ok(parse_listen("[::1]", &fam, a, &port) == 0 && port == 7722,
	    "[v6] alone");
	ok(parse_listen("1.2.3.4:0", &fam, a, &port) == BM_EINVAL, "port 0");
	ok(parse_listen("1.2.3.4:x", &fam, a, &port) == BM_EINVAL, "port x");
	ok(parse_net_range("fe80::/10", &r) == 0 && r.prefix == 10,
	    "v6 range");
	ok(parse_net_range("/8", &r) == BM_EINVAL, "no address");
	ok(parse_net_range("127.0.0.1/07", &r) == BM_EINVAL,
	    "a prefix with a leading zero");
	ok(parse_net_range("10.0.0.0/0", &r) == 0 && r.prefix == 0, "/0");
	/* An IPv4 peer against v6 ranges: its v4-mapped form. */
	memset(a, 0, sizeof(a));
	a[0] = 127;
	a[3] = 1;
	ok(parse_net_range("::ffff:127.0.0.1/128", &r) == 0 &&
	    net_range_match(&r, AF_INET, a), "::ffff:127.0.0.1 holds 127.0.0.1");
	ok(parse_net_range("::ffff:127.0.0.0/104", &r) == 0 &&
	    net_range_match(&r, AF_INET, a), "::ffff:127.0.0.0/104");
	ok(parse_net_range("::/0", &r) == 0 && net_range_match(&r, AF_INET, a),
	    "::/0 holds IPv4 too");
	ok(parse_net_range("::1", &r) == 0 && !net_range_match(&r, AF_INET, a),
	    "::1 does not hold 127.0.0.1");
	ok(parse_net_range("127.0.0.0/8", &r) == 0 &&
	    net_range_match(&r, AF_INET, a) &&
	    !net_range_match(&r, AF_INET6, a), "v4 range: v4 peers only");
	a[3] = 2;
	ok(parse_net_range("::ffff:127.0.0.1", &r) == 0 &&
	    !net_range_match(&r, AF_INET, a), "127.0.0.2 is not in it");
}

int
main(void)
{
	int	 fd;

	(void)snprintf(dir, sizeof(dir), "/tmp/test_serve_config.XXXXXX");
	if (mkdtemp(dir) == NULL)
		tap_bail("mkdtemp");
	(void)snprintf(path, sizeof(path), "%s/t.conf", dir);
	(void)snprintf(secret, sizeof(secret), "%s/secret", dir);
	if ((fd = open(secret, O_WRONLY | O_CREAT | O_CLOEXEC, 0600)) == -1 ||
	    write(fd, "k\n", 2) != 2)
		tap_bail("secret");
	(void)close(fd);
	test_keys();
	test_errors();
	test_parsers();
	(void)unlink(secret);
	(void)unlink(path);
	(void)rmdir(dir);
	return done_testing();
}
