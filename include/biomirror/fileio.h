/*
 * Reading a whole small file (a config, a metrics file, a sidecar
 * checksum file) from an open descriptor: one loop for every caller.
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

#endif
