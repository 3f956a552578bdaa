/*
 * Reading a whole small file (a config, a metrics file, a sidecar
 * checksum file) from an open descriptor: one loop for every caller; and
 * the one canonical spelling of a local path, for comparing paths.
 */
#ifndef BIOMIRROR_FILEIO_H
#define BIOMIRROR_FILEIO_H

#include <stddef.h>

/*
 * Read fd (borrowed, not closed; read(2) from its current offset) to end
 * of file into *ret (malloc'd, owned by the caller, NUL-terminated; may
 * hold NUL bytes) of *ret_len bytes.  max is the most bytes accepted.
 * Retries EINTR.  Returns 0, BM_ELIMIT (more than max bytes), BM_ENOMEM,
 * or BM_EIO (errno kept from read(2)); *ret is NULL unless 0.
 */
int	fileio_read_all(int fd, size_t max, char **ret, size_t *ret_len);

/*
 * Spell path p (a NUL-terminated string, changed in place; at least 2
 * bytes of room) canonically: runs of '/' collapsed, "." components and
 * a trailing '/' dropped; "/" stays "/", a relative path that empties
 * becomes ".".  ".." is kept as written: resolving it by text would be
 * wrong across symlinks.  So "/srv//x/./" is "/srv/x".  Never fails.
 */
void	fileio_path_canon(char *p);
/*
 * Where path (absolute, or relative to the working directory) is: made
 * absolute and canonical (fileio_path_canon()), then its longest prefix
 * that exists resolved through symlinks (realpath(3)) and the rest
 * appended, so a directory not made yet still compares by where it will
 * be.  ".." components are resolved only inside the existing prefix.
 * Returns a malloc'd string; NULL on ENOMEM or when the working
 * directory is gone (errno says which).
 */
char	*fileio_path_resolve(const char *path);

#endif
