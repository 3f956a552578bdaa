/*
 * The bm:// wire protocol, version 1 (docs/protocol.md; frame layout under
 * "Frames"): frame encoding and decoding, the handshake's HMAC-SHA-256
 * challenge/response and the digest after every file or range.  Shared
 * by the server (agent/serve/) and the client (lister and transport);
 * touches no socket, never logs: callers read and write the bytes.
 * Decoders check every length against the bytes present (STYLE.md rule
 * 43): BM_EPROTO for anything short, long or out of range; BM_ELIMIT for
 * a header over the reader's cap, before a byte of payload is read.
 */
#ifndef BIOMIRROR_BMPROTO_H
#define BIOMIRROR_BMPROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BMP_VERSION	1		/* highest version this build speaks */
#define BMP_PORT	7722		/* default TCP port */
#define BMP_MAGIC	0x424d5031u	/* "BMP1": first field of HELLO, ATTACH */
#define BMP_HDR_LEN	5		/* u32 length + u8 type */
#define BMP_FRAME_MAX	65536		/* payload cap of every frame */
#define BMP_STR_MAX	4096		/* bytes of a path, target, message */
#define BMP_NAME_MAX	64		/* bytes of an export name */
#define BMP_KEY_LEN	32		/* token, challenge, nonce, key, MAC */
#define BMP_DIGEST_LEN	32		/* SHA-256 / HMAC-SHA-256 */
#define BMP_GET_MAX	1024		/* items in one GET frame */
#define BMP_NO_INDEX	0xffffu		/* ERROR of a whole request */

/* Feature bits of HELLO and WELCOME: the session has those both set. */
#define BMP_F_DIGESTS	0x1u		/* LIST carries known digests */
#define BMP_F_RANGES	0x2u		/* GET items may be ranges */
#define BMP_F_ALL	(BMP_F_DIGESTS | BMP_F_RANGES)

enum bmp_type {
	BMP_HELLO = 1,		/* C->S control: open a session */
	BMP_WELCOME = 2,	/* S->C: version, features, challenge */
	BMP_AUTH = 3,		/* C->S: nonce and MAC (exports with a secret) */
	BMP_SESSION = 4,	/* S->C: token and limits: the session is up */
	BMP_ATTACH = 5,		/* C->S data: attach to a session by token */
	BMP_ATTACHED = 6,	/* S->C data: accepted */
	BMP_LIST = 7,		/* C->S: recursive listing below a path */
	BMP_ENTRY = 8,		/* S->C: one listing entry */
	BMP_LIST_END = 9,	/* S->C: listing complete */
	BMP_GET = 10,		/* C->S: a batch of (path, offset, length) */
	BMP_FILE = 11,		/* S->C data: item header, raw bytes follow */
	BMP_DIGEST = 12,	/* S->C data: the digest of those bytes */
	BMP_GET_END = 13,	/* S->C control: every item of a GET ended */
	BMP_ERROR = 14,		/* either way: a request, item or session failed */
	BMP_BYE = 15,		/* C->S: end the session */
	BMP_TYPE_MAX = 15
};

/* ERROR codes on the wire. */
enum bmp_err {
	BMP_E_PROTO = 1,	/* malformed or unexpected frame */
	BMP_E_VERSION = 2,	/* no common version */
	BMP_E_NOEXPORT = 3,	/* no such export */
	BMP_E_DENIED = 4,	/* address not allowed, wrong secret, bad token */
	BMP_E_LIMIT = 5,	/* a cap: clients, connections, frame, queue */
	BMP_E_NOENT = 6,	/* no such file or directory */
	BMP_E_UNSAFE = 7,	/* path escapes the export, or a bad name */
	BMP_E_INVAL = 8,	/* not a regular file, range past the end */
	BMP_E_IO = 9,		/* the server could not read */
	BMP_E_SHUTDOWN = 10,	/* the server is stopping */
	BMP_E_TIMEOUT = 11,	/* idle too long */
	BMP_E_MAX = 11
};

/* Entry types of LIST (the listing.h letters). */
#define BMP_T_FILE	'f'
#define BMP_T_DIR	'd'
#define BMP_T_LINK	'l'

/* Digest kinds of DIGEST and ENTRY. */
#define BMP_D_NONE	0
#define BMP_D_SHA256	1		/* SHA-256 of the bytes */
#define BMP_D_HMAC	2		/* HMAC-SHA-256, session key */

/* Bytes borrowed from a frame: not NUL-terminated. */
struct bmp_str {
	const uint8_t	*p;		/* borrowed, NULL when len is 0 */
	size_t		 len;
};

/* Writes one frame into a caller's buffer of fixed size. */
struct bmp_wr {
	uint8_t		*buf;		/* borrowed */
	size_t		 cap;		/* bytes of buf */
	size_t		 len;		/* bytes written, header included */
	bool		 over;		/* a put did not fit */
};

/* Reads the payload of one frame. */
struct bmp_rd {
	const uint8_t	*p;		/* borrowed payload */
	size_t		 len;
	size_t		 off;		/* next byte */
	bool		 bad;		/* a get ran past the end */
};

struct bmp_hello {
	uint16_t	 version;	/* highest the client speaks */
	uint32_t	 features;	/* BMP_F_* it wants */
	struct bmp_str	 export;	/* export name, 1..BMP_NAME_MAX */
};

struct bmp_welcome {
	uint16_t	 version;	/* the session's: min of both */
	uint32_t	 features;	/* both sides' bits */
	bool		 auth;		/* AUTH must follow */
	uint8_t		 challenge[BMP_KEY_LEN]; /* random; zeros without auth */
};

struct bmp_auth {
	uint8_t		 nonce[BMP_KEY_LEN];	/* client's random */
	uint8_t		 mac[BMP_DIGEST_LEN];	/* bmp_auth_mac() */
};

struct bmp_session {
	uint8_t		 token[BMP_KEY_LEN];	/* data connections send it */
	uint8_t		 proof[BMP_DIGEST_LEN];	/* server's bmp_auth_mac(),
						   zeros without auth */
	uint16_t	 max_connections;	/* data connections allowed */
	uint32_t	 max_queued;		/* GET items queued at once */
	uint32_t	 idle_timeout;		/* seconds */
	int64_t		 snapshot;		/* publish = set id, -1 none */
};

struct bmp_attach {
	uint16_t	 version;
	uint8_t		 token[BMP_KEY_LEN];
};

/* One listing entry, path relative to the LIST's path. */
struct bmp_entry {
	struct bmp_str	 path;		/* borrowed */
	uint8_t		 type;		/* BMP_T_* */
	uint64_t	 size;		/* exact bytes (files, links) */
	int64_t		 mtime_ns;	/* nanoseconds since the epoch */
	uint32_t	 mode;		/* permission bits (07777) */
	struct bmp_str	 target;	/* links: the target, else empty */
	uint8_t		 digest_kind;	/* BMP_D_NONE or BMP_D_SHA256 */
	uint8_t		 digest[BMP_DIGEST_LEN];
};

/* One GET item: len 0 means from off to the end of the file. */
struct bmp_item {
	struct bmp_str	 path;		/* borrowed */
	uint64_t	 off;
	uint64_t	 len;
};

/* The header of an item's bytes on a data connection. */
struct bmp_file {
	uint32_t	 id;		/* the GET's request id */
	uint16_t	 index;		/* the item's place in that GET */
	uint64_t	 off;		/* first byte */
	uint64_t	 len;		/* raw bytes that follow */
	uint64_t	 size;		/* the file's size when opened */
	int64_t		 mtime_ns;	/* its mtime then */
};

struct bmp_digest {
	uint32_t	 id;
	uint16_t	 index;
	uint8_t		 kind;		/* BMP_D_SHA256 or BMP_D_HMAC */
	uint8_t		 digest[BMP_DIGEST_LEN];
};

struct bmp_error {
	uint32_t	 id;		/* request id, 0 = the session */
	uint16_t	 index;		/* item, BMP_NO_INDEX = whole request */
	uint16_t	 code;		/* enum bmp_err */
	struct bmp_str	 msg;		/* borrowed, human-readable */
};

/*
 * Decode a frame header (BMP_HDR_LEN bytes) into its type and payload
 * length.  Returns 0; BM_ELIMIT when the length is over cap (at most
 * BMP_FRAME_MAX); BM_EPROTO for a type outside 1..BMP_TYPE_MAX.
 */
int	bmp_header(const uint8_t *hdr, size_t cap, uint8_t *ret_type,
	    size_t *ret_len);

/*
 * Start a frame of type in buf (cap bytes, borrowed).  The puts append
 * big-endian integers and raw bytes; one that does not fit marks the
 * frame over, which bmp_wr_end() reports (no put fails on its own).
 */
void	bmp_wr_begin(struct bmp_wr *w, uint8_t *buf, size_t cap, uint8_t type);
void	bmp_put_u8(struct bmp_wr *w, uint8_t v);
void	bmp_put_u16(struct bmp_wr *w, uint16_t v);
void	bmp_put_u32(struct bmp_wr *w, uint32_t v);
void	bmp_put_u64(struct bmp_wr *w, uint64_t v);
void	bmp_put_bytes(struct bmp_wr *w, const void *p, size_t len);
/* A string; over BMP_STR_MAX bytes marks the frame over. */
void	bmp_put_str(struct bmp_wr *w, const void *p, size_t len);
/*
 * Finish the frame: write its length into the header.  Returns 0 with the
 * frame's bytes in *ret_len, or BM_ELIMIT when something did not fit (in
 * buf, or the payload over BMP_FRAME_MAX).
 */
int	bmp_wr_end(struct bmp_wr *w, size_t *ret_len);

/*
 * Read the payload p (len bytes, borrowed for r's use).  The gets take
 * big-endian integers and raw bytes in order; one past the end marks r
 * bad and yields zeros, which bmp_rd_end() reports.
 */
void	bmp_rd_init(struct bmp_rd *r, const uint8_t *p, size_t len);
uint8_t	bmp_get_u8(struct bmp_rd *r);
uint16_t bmp_get_u16(struct bmp_rd *r);
uint32_t bmp_get_u32(struct bmp_rd *r);
uint64_t bmp_get_u64(struct bmp_rd *r);
void	bmp_get_bytes(struct bmp_rd *r, void *out, size_t len);
/* A string of at most max bytes (longer marks r bad). */
void	bmp_get_str(struct bmp_rd *r, size_t max, struct bmp_str *ret);
/* 0 when every get fit and the payload is used up, else BM_EPROTO. */
int	bmp_rd_end(struct bmp_rd *r);

/*
 * Encoders: one whole frame into buf (cap bytes); its length in *ret_len.
 * Return 0 or BM_ELIMIT (does not fit).  Decoders: the payload p (len
 * bytes, borrowed; the result's strings point into it) into *ret.  Return
 * 0 or BM_EPROTO (short, trailing bytes, a field out of range).
 */
int	bmp_enc_hello(const struct bmp_hello *m, uint8_t *buf, size_t cap,
	    size_t *ret_len);
int	bmp_dec_hello(const uint8_t *p, size_t len, struct bmp_hello *ret);
int	bmp_enc_welcome(const struct bmp_welcome *m, uint8_t *buf, size_t cap,
	    size_t *ret_len);
int	bmp_dec_welcome(const uint8_t *p, size_t len, struct bmp_welcome *ret);
int	bmp_enc_auth(const struct bmp_auth *m, uint8_t *buf, size_t cap,
	    size_t *ret_len);
int	bmp_dec_auth(const uint8_t *p, size_t len, struct bmp_auth *ret);
int	bmp_enc_session(const struct bmp_session *m, uint8_t *buf, size_t cap,
	    size_t *ret_len);
int	bmp_dec_session(const uint8_t *p, size_t len, struct bmp_session *ret);
int	bmp_enc_attach(const struct bmp_attach *m, uint8_t *buf, size_t cap,
	    size_t *ret_len);
int	bmp_dec_attach(const uint8_t *p, size_t len, struct bmp_attach *ret);
/* LIST: request id and path ("" = the export's root). */
int	bmp_enc_list(uint32_t id, const void *path, size_t plen, uint8_t *buf,
	    size_t cap, size_t *ret_len);
int	bmp_dec_list(const uint8_t *p, size_t len, uint32_t *ret_id,
	    struct bmp_str *ret_path);
int	bmp_enc_entry(uint32_t id, const struct bmp_entry *e, uint8_t *buf,
	    size_t cap, size_t *ret_len);
int	bmp_dec_entry(const uint8_t *p, size_t len, uint32_t *ret_id,
	    struct bmp_entry *ret);
int	bmp_enc_list_end(uint32_t id, uint64_t count, uint8_t *buf, size_t cap,
	    size_t *ret_len);
int	bmp_dec_list_end(const uint8_t *p, size_t len, uint32_t *ret_id,
	    uint64_t *ret_count);
/*
 * GET: bmp_get_begin() starts a frame in w, bmp_get_add() appends an item
 * (BM_ELIMIT, frame unchanged, when it would not fit or holds
 * BMP_GET_MAX items: send it and start another), bmp_get_end() finishes.
 */
void	bmp_get_begin(struct bmp_wr *w, uint8_t *buf, size_t cap, uint32_t id);
int	bmp_get_add(struct bmp_wr *w, const struct bmp_item *it);
int	bmp_get_end(struct bmp_wr *w, size_t *ret_len);
/*
 * Decode a GET's id and item count; the items follow in r, one
 * bmp_dec_item() each, then bmp_rd_end(r).  Returns 0 or BM_EPROTO (no
 * items, more than BMP_GET_MAX).
 */
int	bmp_dec_get(const uint8_t *p, size_t len, uint32_t *ret_id,
	    uint16_t *ret_n, struct bmp_rd *r);
int	bmp_dec_item(struct bmp_rd *r, struct bmp_item *ret);
int	bmp_enc_file(const struct bmp_file *m, uint8_t *buf, size_t cap,
	    size_t *ret_len);
int	bmp_dec_file(const uint8_t *p, size_t len, struct bmp_file *ret);
int	bmp_enc_digest(const struct bmp_digest *m, uint8_t *buf, size_t cap,
	    size_t *ret_len);
int	bmp_dec_digest(const uint8_t *p, size_t len, struct bmp_digest *ret);
int	bmp_enc_get_end(uint32_t id, uint16_t done, uint16_t failed,
	    uint8_t *buf, size_t cap, size_t *ret_len);
int	bmp_dec_get_end(const uint8_t *p, size_t len, uint32_t *ret_id,
	    uint16_t *ret_done, uint16_t *ret_failed);
int	bmp_enc_error(const struct bmp_error *m, uint8_t *buf, size_t cap,
	    size_t *ret_len);
int	bmp_dec_error(const uint8_t *p, size_t len, struct bmp_error *ret);
/* A frame without payload (BYE, ATTACHED). */
int	bmp_enc_empty(uint8_t type, uint8_t *buf, size_t cap, size_t *ret_len);

/* The text of a wire error code ("no such export"); never NULL. */
const char *bmp_strerror(unsigned code);

/*
 * The handshake (docs/protocol.md "Authentication"): with the export's
 * secret (slen bytes), the client's MAC is HMAC-SHA-256(secret, "bm1
 * client" | challenge | nonce | export), the server's proof the same
 * over "bm1 server", and the session key HMAC-SHA-256(secret, "bm1 key"
 * | challenge | nonce).  role is 'c', 's' or 'k'.  Returns 0 or BM_EIO
 * (OpenSSL failed).
 */
int	bmp_auth_mac(const uint8_t *secret, size_t slen, char role,
	    const uint8_t challenge[BMP_KEY_LEN],
	    const uint8_t nonce[BMP_KEY_LEN], const void *export, size_t elen,
	    uint8_t out[BMP_DIGEST_LEN]);

/*
 * The digest after an item's bytes: SHA-256 of the bytes, or with a
 * session key HMAC-SHA-256(key, u32 id | u16 index | u64 off | u64 len
 * | bytes).  Opaque; bmp_hash_new() returns NULL only on ENOMEM or an
 * OpenSSL failure.
 */
struct bmp_hash;
struct bmp_hash *bmp_hash_new(const uint8_t *key, const struct bmp_file *f);
int	bmp_hash_update(struct bmp_hash *h, const void *p, size_t len);
/* The digest into out and its kind (BMP_D_*) into *ret_kind. */
int	bmp_hash_final(struct bmp_hash *h, uint8_t out[BMP_DIGEST_LEN],
	    uint8_t *ret_kind);
void	bmp_hash_free(struct bmp_hash *h);

#endif
