/*
 * The UDT module's table (folder-private): libbiomirror-udt.so, built
 * from udt_shim.cpp, exports only udt_shim_module(); the loader
 * (udt_load.c) dlopen()s it on the first udt_shim_startup() and calls
 * through this table, so that libudt (whose static initializer sleeps
 * 100 ms) is loaded only by runs that use UDT.  Bump UDT_SHIM_ABI when
 * the table or udt_shim.h changes.
 */
#ifndef BIOMIRROR_UDT_SHIM_INT_H
#define BIOMIRROR_UDT_SHIM_INT_H

#include "biomirror/udt_shim.h"

#ifdef __cplusplus
extern "C" {
#endif

#define UDT_SHIM_ABI		2
#define UDT_SHIM_MODULE_SYM	"udt_shim_module"
#define UDT_SHIM_MODULE_FILE	"libbiomirror-udt.so"

/* One pointer per udt_shim.h function, same meaning. */
struct udt_shim_ops {
	int	  abi;		/* UDT_SHIM_ABI of the module */
	int	(*startup)(char *, size_t);
	void	(*cleanup)(void);
	int	(*sock_listen)(const struct sockaddr *, socklen_t,
		    const struct udt_bufs *, udt_sock **, struct udt_bufs *,
		    char *, size_t);
	int	(*sock_name)(const udt_sock *, struct sockaddr *, socklen_t *);
	int	(*sock_accept)(udt_sock *, udt_sock **, struct sockaddr *,
		    socklen_t *, char *, size_t);
	int	(*sock_connect)(const struct sockaddr *, socklen_t,
		    udt_sock **, char *, size_t);
	long	(*sock_recv)(udt_sock *, void *, size_t, char *, size_t);
	long	(*sock_recv_pwrite)(udt_sock *, int, uint64_t, size_t,
		    void *, size_t, char *, size_t);
	int	(*sock_send)(udt_sock *, const void *, size_t, char *, size_t);
	int	(*sock_set_maxbw)(udt_sock *, int64_t);
	int64_t	(*sock_maxbw)(const udt_sock *);
	int	(*sock_set_nonblock)(udt_sock *, bool);
	bool	(*sock_linger_off)(const udt_sock *);
	int64_t	(*sock_idle_ms)(const udt_sock *);
	bool	(*sock_connected)(const udt_sock *);
	void	(*sock_close)(udt_sock *);
	int	(*poll_new)(udt_poll **, char *, size_t);
	int	(*poll_add)(udt_poll *, udt_sock *);
	void	(*poll_del)(udt_poll *, udt_sock *);
	int	(*poll_wait)(udt_poll *, int, udt_sock **, size_t, size_t *,
		    char *, size_t);
	int	(*poll_arm)(udt_poll *, int, char *, size_t);
	void	(*poll_free)(udt_poll *);
};

/* The module's one export: its table (static, never NULL). */
const struct udt_shim_ops *udt_shim_module(void);

#ifdef __cplusplus
}
#endif

#endif
