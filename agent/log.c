/*
 * Log lines to stderr (STYLE.md rule 25, after OpenBSD ntpd's log.c).
 * Under systemd (JOURNAL_STREAM set) each line starts with a "<N>" syslog
 * priority so that the journal files it at the right level.  The verbosity
 * is the one allowed global besides signal flags (rule 18).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "biomirror/log.h"
#include "biomirror/text.h"

static int	log_level;	/* -1 quiet .. 2 debug */
static bool	log_journal;	/* JOURNAL_STREAM was set at log_init() */
static bool	log_dirty;	/* a progress line is on the terminal */
static char	log_last[512];	/* the last error line, for --json */

void
log_progress_drawn(bool drawn)
{
	log_dirty = drawn;
}

void
log_init(bool foreground, int verbosity)
{
	(void)foreground;
	log_level = verbosity;
	log_journal = getenv("JOURNAL_STREAM") != NULL;
}

int
log_verbosity(void)
{
	return log_level;
}

bool
log_to_journal(void)
{
	return log_journal;
}

static void
log_emit(int prio, int errnum, const char *fmt, va_list ap)
{
	char	 raw[4096], msg[4 * sizeof(raw)], buf[sizeof(msg) + 256];
	char	*line = buf + 4;	/* buf: room for the erase before it */
	const char *sep = errnum ? ": " : "", *why = errnum ? strerror(errnum) :
		    "";
	int	 n;

	(void)vsnprintf(raw, sizeof(raw), fmt, ap);
	/* Upstream names are hostile: no control or reordering bytes out. */
	text_term_escape(raw, msg, sizeof(msg));
	/* The whole line in one write(2): serve logs one per file served. */
	if (log_journal)
		n = snprintf(line, sizeof(buf) - 4, "<%d>%s%s%s\n", prio, msg,
		    sep, why);
	else
		n = snprintf(line, sizeof(buf) - 4, "biomirror: %s%s%s\n", msg,
		    sep, why);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(buf) - 4)
		buf[sizeof(buf) - 2] = '\n';	/* cut short, still a line */
	flockfile(stderr);	/* one whole line at a time (serve's threads) */
	if (log_dirty) {
		/* Erase the progress line; it is drawn again on its next update. */
		memcpy(buf, "\r\033[K", 4);
		fputs(buf, stderr);
		log_dirty = false;
	} else
		fputs(line, stderr);
	funlockfile(stderr);
	/* Cut short when long: it only says what went wrong. */
	if (prio <= 3 && snprintf(log_last, sizeof(log_last), "%s%s%s", raw,
	    sep, why) < 0)
		log_last[0] = '\0';
}

const char *
log_last_error(void)
{
	return log_last;
}

void
log_err(const char *fmt, ...)
{
	va_list	 ap;
	int	 saved = errno;

	va_start(ap, fmt);
	log_emit(3, saved, fmt, ap);
	va_end(ap);
	errno = saved;
}

void
log_errx(const char *fmt, ...)
{
	va_list	 ap;

	va_start(ap, fmt);
	log_emit(3, 0, fmt, ap);
	va_end(ap);
}

void
log_warn(const char *fmt, ...)
{
	va_list	 ap;
	int	 saved = errno;

	va_start(ap, fmt);
	log_emit(4, saved, fmt, ap);
	va_end(ap);
	errno = saved;
}

void
log_warnx(const char *fmt, ...)
{
	va_list	 ap;

	va_start(ap, fmt);
	log_emit(4, 0, fmt, ap);
	va_end(ap);
}

void
log_info(const char *fmt, ...)
{
	va_list	 ap;

	if (log_level < 0)
		return;
	va_start(ap, fmt);
	log_emit(6, 0, fmt, ap);
	va_end(ap);
}

void
log_verbose(const char *fmt, ...)
{
	va_list	 ap;

	if (log_level < 1)
		return;
	va_start(ap, fmt);
	log_emit(6, 0, fmt, ap);
	va_end(ap);
}

void
log_debug(const char *fmt, ...)
{
	va_list	 ap;

	if (log_level < 2)
		return;
	va_start(ap, fmt);
	log_emit(7, 0, fmt, ap);
	va_end(ap);
}
