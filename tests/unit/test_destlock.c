/*
 * Unit tests for agent/destlock.c: the destination's kind checked before
 * it is locked (a publish = set tree, a dest inside a snapshot, another
 * mirror's plain tree; a dest that is, lies in or contains a
 * DEST.biomirror, or lies inside another mirror's tree; a set tree whose
 * first snapshot is pending; a symlinked dest), one lock per destination
 * (flock conflicts between
 * open files, also within one process), the owner record and where it
 * lives, and what a refused publish = set run leaves (nothing).
 */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "biomirror/destlock.h"
#include "biomirror/error.h"
#include "tap.h"

static char	 root[256];

/* root/rel as a path into buf (PATH_MAX bytes). */
static const char *
at(char *buf, const char *rel)
{
	(void)snprintf(buf, PATH_MAX, "%s/%s", root, rel);
	return buf;
}

static bool
exists(const char *rel)
{
	char		 p[PATH_MAX];
	struct stat	 st;

	return lstat(at(p, rel), &st) == 0;
}

/* Whether file rel holds the line want. */
static bool
has_line(const char *rel, const char *want)
{
	char	 p[PATH_MAX], line[PATH_MAX + 32];
	FILE	*fp;
	bool	 found = false;

	if ((fp = fopen(at(p, rel), "r")) == NULL)
		return false;
	while (!found && fgets(line, sizeof(line), fp) != NULL) {
		line[strcspn(line, "\n")] = '\0';
		found = strcmp(line, want) == 0;
	}
	(void)fclose(fp);
	return found;
}

static void
test_plain(const struct dest_who *a, const struct dest_who *b,
    const struct dest_who *bset)
{
	struct dest_lock *l = NULL, *l2 = NULL;
	char		 d[PATH_MAX], err[1024], want[PATH_MAX * 2];

	at(d, "p/db");
	is_int(dest_lock_take(d, a, DEST_LOCK_SHARED, 0755, &l, err,
	    sizeof(err)), 0, "plain: a read-only run on a missing DEST");
	ok(!exists("p/db") && !exists("p"), "plain: nothing made read-only");
	dest_lock_free(l);
	is_int(dest_lock_take(d, a, DEST_LOCK_CREATE, 0750, &l, err,
	    sizeof(err)), 0, "plain: a publish = file run makes DEST");
	ok(exists("p/db") && !exists("p/db.biomirror"),
	    "plain: DEST made, no DEST.biomirror");
	is_int(dest_lock_record(l), 0, "plain: record");
	ok(has_line("p/.db.biomirror-owner", "mirror a") &&
	    has_line("p/.db.biomirror-owner", "publish file"),
	    "plain: the record is beside DEST");
	ok(!exists("p/db/.db.biomirror-owner") && !exists("p/db/owner"),
	    "plain: nothing inside the tree");
	is_int(dest_lock_take(d, b, DEST_LOCK_CREATE, 0755, &l2, err,
	    sizeof(err)), BM_ELOCKED, "plain: a second writer is locked out");
	(void)snprintf(want, sizeof(want), "the destination %.300s is in use "
	    "by another run: mirror a of %s/a.conf (state directory %s/sa, "
	    "pid %ld, running)", d, root, root, (long)getpid());
	is_str(err, want, "plain: the holder named");
	is_int(dest_lock_take(d, b, DEST_LOCK_SHARED, 0755, &l2, err,
	    sizeof(err)), BM_ELOCKED, "plain: a reader is locked out");
	dest_lock_free(l);
	is_int(dest_lock_take(d, bset, DEST_LOCK_CREATE, 0755, &l2, err,
	    sizeof(err)), BM_EUNSAFE,
	    "plain: a set run of another mirror is refused");
	ok(strstr(err, "is a plain tree of mirror a of ") != NULL &&
	    strstr(err, "not running now") != NULL &&
	    strstr(err, "remove ") != NULL, "plain: says whose and how: %s",
	    err);
	ok(!exists("p/db.biomirror"), "plain: refused, nothing made");
	ok(l2 == NULL, "plain: no lock when refused");
	is_int(dest_lock_take(d, b, DEST_LOCK_CREATE, 0755, &l2, err,
	    sizeof(err)), 0, "plain: another publish = file run may go");
	dest_lock_free(l2);
}

static void
test_set(const struct dest_who *a, const struct dest_who *aset,
    const struct dest_who *b)
{
	struct dest_lock *l = NULL, *l2 = NULL;
	char		 d[PATH_MAX], p[PATH_MAX], err[1024];

	/* Its own plain tree: the set run goes, and locks both. */
	at(d, "p/db");
	is_int(dest_lock_take(d, aset, DEST_LOCK_CREATE, 0755, &l, err,
	    sizeof(err)), 0, "set: its own plain tree");
	ok(exists("p/db.biomirror"), "set: DEST.biomirror made");
	is_int(dest_lock_take(d, a, DEST_LOCK_CREATE, 0755, &l2, err,
	    sizeof(err)), BM_ELOCKED, "set: DEST locked while converting");
	dest_lock_free(l);
	ok(!exists("p/db.biomirror"),
	    "set: an empty DEST.biomirror made here goes (store refused)");

	/* Converted: DEST is our symlink into DEST.biomirror/snapshots. */
	if (mkdir(at(p, "p/db.biomirror"), 0755) == -1 ||
	    mkdir(at(p, "p/db.biomirror/snapshots"), 0755) == -1 ||
	    rename(at(d, "p/db"), at(p, "p/db.biomirror/snapshots/1")) == -1 ||
	    symlink("db.biomirror/snapshots/1", at(d, "p/db")) == -1)
		tap_bail("set: making a set tree");
	is_int(dest_lock_take(d, aset, DEST_LOCK_CREATE, 0755, &l, err,
	    sizeof(err)), 0, "set: a set run on its set tree");
	is_int(dest_lock_record(l), 0, "set: record");
	ok(has_line("p/db.biomirror/owner", "mirror a") &&
	    has_line("p/db.biomirror/owner", "publish set") &&
	    !exists("p/.db.biomirror-owner"),
	    "set: the record in DEST.biomirror, the plain one gone");
	is_int(dest_lock_take(d, b, DEST_LOCK_CREATE, 0755, &l2, err,
	    sizeof(err)), BM_EUNSAFE, "set: a publish = file run is refused");
	ok(strstr(err, "is a publish = set tree") != NULL &&
	    strstr(err, "running): a publish = file or ad-hoc run would "
	    "write into its published snapshot: refused (sync that mirror "
	    "instead;") != NULL, "set: says whose: %s", err);
	is_int(dest_lock_take(d, a, DEST_LOCK_SHARED, 0755, &l2, err,
	    sizeof(err)), BM_EUNSAFE, "set: also a read-only one");
	ok(strstr(err, "(set publish = set again;") != NULL,
	    "set: its own mirror is told to set publish = set: %s", err);
	at(p, "p/db/sub");
	is_int(dest_lock_take(p, aset, DEST_LOCK_CREATE, 0755, &l2, err,
	    sizeof(err)), BM_EUNSAFE, "set: a dest inside the snapshot");
	ok(strstr(err, "lies inside a snapshot of the publish = set tree ") !=
	    NULL, "set: says so: %s", err);
	ok(!exists("p/db.biomirror/snapshots/1/sub"),
	    "set: nothing made inside the snapshot");
	is_int(dest_lock_take(d, aset, DEST_LOCK_CREATE, 0755, &l2, err,
	    sizeof(err)), BM_ELOCKED, "set: a second set run is locked out");
	dest_lock_free(l);
	is_int(dest_lock_take(d, b, 0, 0755, &l2, err, sizeof(err)),
	    BM_EUNSAFE, "set: refused whether or not the owner runs");
	ok(strstr(err, "not running now") != NULL, "set: not running: %s",
	    err);
}

/* Write text into file rel. */
static void
put(const char *rel, const char *text)
{
	char	 p[PATH_MAX];
	FILE	*fp;

	if ((fp = fopen(at(p, rel), "w")) == NULL || fputs(text, fp) == EOF ||
	    fclose(fp) != 0)
		tap_bail("put");
}

/* Take d as who, expecting BM_EUNSAFE and want in the message. */
static void
refused(const char *d, const struct dest_who *who, const char *want,
    const char *what)
{
	struct dest_lock *l = NULL;
	char		 err[2048];

	is_int(dest_lock_take(d, who, DEST_LOCK_CREATE, 0755, &l, err,
	    sizeof(err)), BM_EUNSAFE, "%s: refused", what);
	ok(strstr(err, want) != NULL, "%s: says \"%s\": %s", what, want, err);
	dest_lock_free(l);
}

/* Around the set tree p/db of a (test_set): its DEST.biomirror, ... */
static void
test_around(const struct dest_who *a, const struct dest_who *aset,
    const struct dest_who *b, const struct dest_who *bset)
{
	struct dest_lock *l = NULL, *l2 = NULL;
	char		 d[PATH_MAX], p[PATH_MAX], err[2048], want[PATH_MAX * 2];

	refused(at(d, "p/db.biomirror"), b, "p/db.biomirror holds the "
	    "snapshots and owner record of the publish = set tree ",
	    "around: DEST.biomirror");
	refused(at(d, "p/db.biomirror/snapshots"), b, "p/db.biomirror/"
	    "snapshots lies inside ", "around: DEST.biomirror/snapshots");
	refused(at(d, "p/db.biomirror/new/x"), b, "lies inside ",
	    "around: a new directory in DEST.biomirror");
	ok(!exists("p/db.biomirror/new"), "around: nothing made there");
	refused(at(d, "p"), b, "p contains ", "around: DEST's parent");
	refused(at(d, "p"), bset, "p contains ", "around: also a set run");
	refused(at(d, "p/db"), bset, "a publish = set run of another mirror "
	    "would take over its snapshots: refused (if that mirror no longer "
	    "uses it, remove ", "around: another set mirror on the set tree");

	/* A tree named X.biomirror that is no DEST.biomirror: a tree. */
	is_int(dest_lock_take(at(d, "p/x.biomirror"), b, DEST_LOCK_CREATE,
	    0755, &l, err, sizeof(err)), 0, "around: a plain x.biomirror");
	dest_lock_free(l);

	/* Inside another mirror's plain tree; inside its own. */
	if (mkdir(at(p, "q"), 0755) == -1)
		tap_bail("mkdir q");
	is_int(dest_lock_take(at(d, "q/t"), a, DEST_LOCK_CREATE, 0755, &l,
	    err, sizeof(err)), 0, "inside: a's plain tree");
	is_int(dest_lock_record(l), 0, "inside: record");
	dest_lock_free(l);
	(void)snprintf(want, sizeof(want), "q/t/sub lies inside %s/q/t, the "
	    "plain tree of mirror a of ", root);
	refused(at(d, "q/t/sub"), b, want, "inside: another's run in a's tree");
	ok(!exists("q/t/sub") && !exists("q/t/.sub.biomirror-owner"),
	    "inside: nothing made, no record in a's tree");
	is_int(dest_lock_take(at(d, "q/t/sub"), a, DEST_LOCK_CREATE, 0755,
	    &l, err, sizeof(err)), 0, "inside: a itself may");
	dest_lock_free(l);

	/* A symlinked dest: the real tree's lock and record. */
	if (symlink("t", at(p, "q/alias")) == -1)
		tap_bail("symlink");
	is_int(dest_lock_take(at(d, "q/t"), a, DEST_LOCK_CREATE, 0755, &l,
	    err, sizeof(err)), 0, "alias: a holds its tree");
	is_int(dest_lock_take(at(d, "q/alias"), b, DEST_LOCK_CREATE, 0755,
	    &l2, err, sizeof(err)), BM_ELOCKED, "alias: locked out");
	ok(strstr(err, "is in use by another run: mirror a of ") != NULL,
	    "alias: the real holder named: %s", err);
	dest_lock_free(l);
	(void)snprintf(want, sizeof(want), "remove %s/q/.t.biomirror-owner)",
	    root);
	refused(at(d, "q/alias"), bset, want, "alias: the real record");
	ok(!exists("q/.alias.biomirror-owner") &&
	    !exists("q/alias.biomirror"), "alias: nothing beside the link");

	/* A set tree not published yet, or a conversion cut short. */
	if (mkdir(at(p, "q/pend.biomirror"), 0755) == -1 ||
	    mkdir(at(p, "q/conv"), 0755) == -1 ||
	    mkdir(at(p, "q/conv.biomirror"), 0755) == -1)
		tap_bail("mkdir pend");
	(void)snprintf(want, sizeof(want), "pid 1\nmirror a\nconfig %s/a.conf"
	    "\nstate_dir %s/sa\npublish set\n", root, root);
	put("q/pend.biomirror/owner", want);
	put("q/conv.biomirror/owner", want);
	refused(at(d, "q/pend"), b, "not published or not converted yet: a "
	    "publish = file or ad-hoc run would take it over: refused (sync "
	    "that mirror instead;", "pending: a file run, DEST missing");
	ok(!exists("q/pend"), "pending: DEST not made");
	refused(at(d, "q/conv"), b, "would take it over",
	    "pending: a file run, DEST plain");
	refused(at(d, "q/pend"), bset, "would take over its snapshots",
	    "pending: another set mirror");
	refused(at(d, "q/pend.biomirror"), b, "holds the snapshots",
	    "pending: its DEST.biomirror");
	refused(at(d, "q"), b, "contains ", "pending: its parent");
	is_int(dest_lock_take(at(d, "q/pend"), a, 0, 0755, &l, err,
	    sizeof(err)), BM_EUNSAFE, "pending: its own mirror as file");
	ok(strstr(err, "(set publish = set again;") != NULL,
	    "pending: told to set publish = set: %s", err);
	dest_lock_free(l);

	/* A conversion killed before any record in DEST.biomirror. */
	if (mkdir(at(p, "q/kill"), 0755) == -1 ||
	    mkdir(at(p, "q/kill.biomirror"), 0755) == -1 ||
	    mkdir(at(p, "q/kill.biomirror/snapshots"), 0755) == -1)
		tap_bail("mkdir kill");
	(void)snprintf(want, sizeof(want), "pid 1\nmirror a\nconfig %s/a.conf"
	    "\nstate_dir %s/sa\npublish file\n", root, root);
	put("q/.kill.biomirror-owner", want);
	(void)snprintf(want, sizeof(want), "q/kill is the destination of the "
	    "publish = set tree %s/q/kill.biomirror of mirror a of ", root);
	refused(at(d, "q/kill"), b, want, "killed: a file run");
	ok(exists("q/.kill.biomirror-owner"), "killed: the record kept");
	is_int(dest_lock_take(at(d, "q/kill"), aset, DEST_LOCK_CREATE, 0755,
	    &l, err, sizeof(err)), 0, "killed: its own set run goes on");
	dest_lock_free(l);

	/* A record left beside a tree that is gone: no tree to protect. */
	put("q/.gone.biomirror-owner", want);
	is_int(dest_lock_take(at(d, "q/gone"), bset, DEST_LOCK_CREATE, 0755,
	    &l, err, sizeof(err)), 0, "gone: a set run on a missing DEST: %s",
	    err);
	dest_lock_free(l);
}

int
main(void)
{
	struct dest_who	 a, aset, b, bset;
	char		 sa[PATH_MAX], sb[PATH_MAX], ca[PATH_MAX];
	char		 cmd[PATH_MAX + 16];

	(void)snprintf(root, sizeof(root), "/tmp/test_destlock.XXXXXX");
	if (mkdtemp(root) == NULL)
		tap_bail("mkdtemp");
	if (mkdir(at(sa, "sa"), 0755) == -1 || mkdir(at(sb, "sb"), 0755) == -1)
		tap_bail("mkdir");
	at(ca, "a.conf");
	a = (struct dest_who){ "a", ca, sa, false };
	aset = a;
	aset.set = true;
	b = (struct dest_who){ "adhoc-1234", NULL, sb, false };
	bset = (struct dest_who){ "b", ca, sb, true };
	test_plain(&a, &b, &bset);
	test_set(&a, &aset, &b);
	test_around(&a, &aset, &b, &bset);
	(void)snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	if (system(cmd) != 0)
		printf("# could not remove %s\n", root);
	printf("1..%d\n", tap_n);
	return tap_failed ? 1 : 0;
}
