/*
 * Logging (STYLE.md rule 25).  Lines go to stderr; when JOURNAL_STREAM is
 * set (we run under systemd) each line gets a "<N>" syslog priority prefix.
 * Messages follow "object: operation: reason".  Besides the verbosity, the
 * module keeps one flag: whether a progress line must be erased first, and
 * the text of the last error line (for --json, which must say something).
 */
#ifndef BIOMIRROR_LOG_H
#define BIOMIRROR_LOG_H

#include <stdbool.h>

/* Verbosity: -1 quiet (errors only), 0 normal (info), 1 verbose, 2 debug. */
void	log_init(bool foreground, int verbosity);
/* Current verbosity as set by log_init(). */
int	log_verbosity(void);
/* True when log lines go to the journal (JOURNAL_STREAM set). */
bool	log_to_journal(void);
/*
 * Tell the logger that a progress line is (or is no longer) on the
 * terminal, so that the next log line erases it first.
 */
void	log_progress_drawn(bool drawn);

/* Error (priority 3) with ": strerror(errno)" appended. */
void	log_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Error (priority 3), no errno. */
void	log_errx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Warning (priority 4) with ": strerror(errno)" appended. */
void	log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Warning (priority 4), no errno. */
void	log_warnx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Informational (priority 6); hidden with -q. */
void	log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/*
 * The last error (log_err, log_errx) logged, without the "biomirror: "
 * prefix; "" if none.  Borrowed: valid until the next error.
 */
const char *log_last_error(void);
/* Debug (priority 7); shown with -v -v. */
/* Shown from -v on (verbosity 1): one line per file acted on. */
void	log_verbose(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void	log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
