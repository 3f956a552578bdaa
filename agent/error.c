/*
 * Error strings for the BM_E* codes of include/biomirror/error.h.  These
 * are the reasons recorded in the manifest's events and printed in
 * "path: operation: reason" log lines.
 */
#include "biomirror/error.h"

const char *
bm_strerror(int rc)
{
	switch (rc) {
	case BM_OK:		return "ok";
	case BM_ENOMEM:		return "out of memory";
	case BM_EIO:		return "I/O error";
	case BM_ENET:		return "network error";
	case BM_EPROTO:		return "protocol error";
	case BM_ECHECKSUM:	return "size or checksum mismatch";
	case BM_EDB:		return "manifest error";
	case BM_ELIMIT:		return "limit exceeded";
	case BM_EINVAL:		return "invalid argument";
	case BM_ENOENT:		return "not found";
	case BM_ECHANGED:	return "upstream changed during transfer";
	case BM_ENOSPC:		return "no space left on device";
	case BM_ELOCKED:	return "locked by another run";
	case BM_EUNSAFE:	return "unsafe path";
	case BM_EHTTP:		return "HTTP error";
	case BM_EINTR:		return "interrupted";
	case BM_ECORRUPT:	return "damaged manifest";
	default:		return "unknown error";
	}
}
