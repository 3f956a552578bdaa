/*
 * The bm:// protocol codec (include/biomirror/bmproto.h, docs/protocol.md):
 * frames to bytes and back, field by field, every length checked against
 * the bytes present; the handshake MACs and the per-item digest (OpenSSL
 * EVP, EVP_MAC for HMAC).  No sockets, no logging, no allocation except
 * the hash context.
 */
#include <stdlib.h>
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/evp.h>

#include "biomirror/bmproto.h"
#include "biomirror/error.h"

struct bmp_hash {
	EVP_MD_CTX	*md;		/* owned: plain SHA-256, or NULL */
	EVP_MAC_CTX	*mac;		/* owned: HMAC-SHA-256, or NULL */
};

/* v as n (1 to 8) big-endian bytes at p: every integer the frames write. */
static void
be_store(uint8_t *p, uint64_t v, size_t n)
{
	size_t	 i;

	for (i = n; i > 0; i--) {
		p[i - 1] = (uint8_t)v;
		v >>= 8;
	}
}

/* The n (1 to 8) big-endian bytes at p: every integer the frames read. */
static uint64_t
be_load(const uint8_t *p, size_t n)
{
	uint64_t	 v = 0;
	size_t		 i;

	for (i = 0; i < n; i++)
		v = v << 8 | p[i];
	return v;
}

int
bmp_header(const uint8_t *hdr, size_t cap, uint8_t *ret_type, size_t *ret_len)
{
	uint32_t	 len;

	len = (uint32_t)be_load(hdr, 4);
	if (cap > BMP_FRAME_MAX)
		cap = BMP_FRAME_MAX;
	if (len > cap)
		return BM_ELIMIT;
	if (hdr[4] == 0 || hdr[4] > BMP_TYPE_MAX)
		return BM_EPROTO;
	*ret_type = hdr[4];
	*ret_len = len;
	return 0;
}

void
bmp_wr_begin(struct bmp_wr *w, uint8_t *buf, size_t cap, uint8_t type)
{
	w->buf = buf;
	w->cap = cap;
	w->len = 0;
	w->over = cap < BMP_HDR_LEN;
	if (!w->over) {
		memset(buf, 0, 4);
		buf[4] = type;
		w->len = BMP_HDR_LEN;
	}
}

void
bmp_put_bytes(struct bmp_wr *w, const void *p, size_t len)
{
	if (w->over || len > w->cap - w->len ||
	    w->len + len - BMP_HDR_LEN > BMP_FRAME_MAX) {
		w->over = true;
		return;
	}
	if (len > 0)
		memcpy(w->buf + w->len, p, len);
	w->len += len;
}

/* v as n big-endian bytes at the frame's end. */
static void
put_be(struct bmp_wr *w, uint64_t v, size_t n)
{
	uint8_t	 b[8];

	be_store(b, v, n);
	bmp_put_bytes(w, b, n);
}

void
bmp_put_u8(struct bmp_wr *w, uint8_t v)
{
	put_be(w, v, 1);
}

void
bmp_put_u16(struct bmp_wr *w, uint16_t v)
{
	put_be(w, v, 2);
}

void
bmp_put_u32(struct bmp_wr *w, uint32_t v)
{
	put_be(w, v, 4);
}

void
bmp_put_u64(struct bmp_wr *w, uint64_t v)
{
	put_be(w, v, 8);
}

void
bmp_put_str(struct bmp_wr *w, const void *p, size_t len)
{
	if (len > BMP_STR_MAX) {
		w->over = true;
		return;
	}
	bmp_put_u16(w, (uint16_t)len);
	bmp_put_bytes(w, p, len);
}

int
bmp_wr_end(struct bmp_wr *w, size_t *ret_len)
{
	size_t	 n;

	if (w->over)
		return BM_ELIMIT;
	n = w->len - BMP_HDR_LEN;
	be_store(w->buf, n, 4);
	*ret_len = w->len;
	return 0;
}

void
bmp_rd_init(struct bmp_rd *r, const uint8_t *p, size_t len)
{
	r->p = p;
	r->len = len;
	r->off = 0;
	r->bad = false;
}

void
bmp_get_bytes(struct bmp_rd *r, void *out, size_t len)
{
	if (r->bad || len > r->len - r->off) {
		r->bad = true;
		memset(out, 0, len);
		return;
	}
	memcpy(out, r->p + r->off, len);
	r->off += len;
}

/* The next n big-endian bytes of the payload (0 past its end). */
static uint64_t
get_be(struct bmp_rd *r, size_t n)
{
	uint8_t	 b[8];

	bmp_get_bytes(r, b, n);
	return be_load(b, n);
}

uint8_t
bmp_get_u8(struct bmp_rd *r)
{
	return (uint8_t)get_be(r, 1);
}

uint16_t
bmp_get_u16(struct bmp_rd *r)
{
	return (uint16_t)get_be(r, 2);
}

uint32_t
bmp_get_u32(struct bmp_rd *r)
{
	return (uint32_t)get_be(r, 4);
}

uint64_t
bmp_get_u64(struct bmp_rd *r)
{
	return get_be(r, 8);
}

void
bmp_get_str(struct bmp_rd *r, size_t max, struct bmp_str *ret)
{
	size_t	 n = bmp_get_u16(r);

	ret->p = NULL;
	ret->len = 0;
	if (r->bad || n > max || n > r->len - r->off) {
		r->bad = true;
		return;
	}
	if (n > 0)
		ret->p = r->p + r->off;
	ret->len = n;
	r->off += n;
}

int
bmp_rd_end(struct bmp_rd *r)
{
	return (r->bad || r->off != r->len) ? BM_EPROTO : 0;
}

int
bmp_enc_hello(const struct bmp_hello *m, uint8_t *buf, size_t cap,
    size_t *ret_len)
{
	struct bmp_wr	 w;

	bmp_wr_begin(&w, buf, cap, BMP_HELLO);
	bmp_put_u32(&w, BMP_MAGIC);
	bmp_put_u16(&w, m->version);
	bmp_put_u32(&w, m->features);
	bmp_put_str(&w, m->export.p, m->export.len);
	return bmp_wr_end(&w, ret_len);
}

int
bmp_dec_hello(const uint8_t *p, size_t len, struct bmp_hello *ret)
{
	struct bmp_rd	 r;
	struct bmp_hello h;

	bmp_rd_init(&r, p, len);
	if (bmp_get_u32(&r) != BMP_MAGIC)
		return BM_EPROTO;
	h.version = bmp_get_u16(&r);
	h.features = bmp_get_u32(&r);
	bmp_get_str(&r, BMP_NAME_MAX, &h.export);
	if (bmp_rd_end(&r) != 0 || h.version == 0 || h.export.len == 0)
		return BM_EPROTO;
	*ret = h;
	return 0;
}

int
bmp_enc_welcome(const struct bmp_welcome *m, uint8_t *buf, size_t cap,
    size_t *ret_len)
{
	struct bmp_wr	 w;

	bmp_wr_begin(&w, buf, cap, BMP_WELCOME);
	bmp_put_u16(&w, m->version);
	bmp_put_u32(&w, m->features);
	bmp_put_u8(&w, m->auth ? 1 : 0);
	bmp_put_bytes(&w, m->challenge, BMP_KEY_LEN);
	return bmp_wr_end(&w, ret_len);
}

int
bmp_dec_welcome(const uint8_t *p, size_t len, struct bmp_welcome *ret)
{
	struct bmp_rd	 r;
	struct bmp_welcome m;
	uint8_t		 a;

	bmp_rd_init(&r, p, len);
	m.version = bmp_get_u16(&r);
	m.features = bmp_get_u32(&r);
	a = bmp_get_u8(&r);
	bmp_get_bytes(&r, m.challenge, BMP_KEY_LEN);
	if (bmp_rd_end(&r) != 0 || m.version == 0 || a > 1)
		return BM_EPROTO;
	m.auth = a == 1;
	*ret = m;
	return 0;
}

int
bmp_enc_auth(const struct bmp_auth *m, uint8_t *buf, size_t cap,
    size_t *ret_len)
{
	struct bmp_wr	 w;

	bmp_wr_begin(&w, buf, cap, BMP_AUTH);
	bmp_put_bytes(&w, m->nonce, BMP_KEY_LEN);
	bmp_put_bytes(&w, m->mac, BMP_DIGEST_LEN);
	return bmp_wr_end(&w, ret_len);
}

int
bmp_dec_auth(const uint8_t *p, size_t len, struct bmp_auth *ret)
{
	struct bmp_rd	 r;
	struct bmp_auth	 m;

	bmp_rd_init(&r, p, len);
	bmp_get_bytes(&r, m.nonce, BMP_KEY_LEN);
	bmp_get_bytes(&r, m.mac, BMP_DIGEST_LEN);
	if (bmp_rd_end(&r) != 0)
		return BM_EPROTO;
	*ret = m;
	return 0;
}

int
bmp_enc_session(const struct bmp_session *m, uint8_t *buf, size_t cap,
    size_t *ret_len)
{
	struct bmp_wr	 w;

	bmp_wr_begin(&w, buf, cap, BMP_SESSION);
	bmp_put_bytes(&w, m->token, BMP_KEY_LEN);
	bmp_put_bytes(&w, m->proof, BMP_DIGEST_LEN);
	bmp_put_u16(&w, m->max_connections);
	bmp_put_u32(&w, m->max_queued);
	bmp_put_u32(&w, m->idle_timeout);
	bmp_put_u64(&w, (uint64_t)m->snapshot);
	return bmp_wr_end(&w, ret_len);
}

int
bmp_dec_session(const uint8_t *p, size_t len, struct bmp_session *ret)
{
	struct bmp_rd	 r;
	struct bmp_session m;

	bmp_rd_init(&r, p, len);
	bmp_get_bytes(&r, m.token, BMP_KEY_LEN);
	bmp_get_bytes(&r, m.proof, BMP_DIGEST_LEN);
	m.max_connections = bmp_get_u16(&r);
	m.max_queued = bmp_get_u32(&r);
	m.idle_timeout = bmp_get_u32(&r);
	m.snapshot = (int64_t)bmp_get_u64(&r);
	if (bmp_rd_end(&r) != 0 || m.max_connections == 0)
		return BM_EPROTO;
	*ret = m;
	return 0;
}

int
bmp_enc_attach(const struct bmp_attach *m, uint8_t *buf, size_t cap,
    size_t *ret_len)
{
	struct bmp_wr	 w;

	bmp_wr_begin(&w, buf, cap, BMP_ATTACH);
	bmp_put_u32(&w, BMP_MAGIC);
	bmp_put_u16(&w, m->version);
	bmp_put_bytes(&w, m->token, BMP_KEY_LEN);
	return bmp_wr_end(&w, ret_len);
}

int
bmp_dec_attach(const uint8_t *p, size_t len, struct bmp_attach *ret)
{
	struct bmp_rd	 r;
	struct bmp_attach m;

	bmp_rd_init(&r, p, len);
	if (bmp_get_u32(&r) != BMP_MAGIC)
		return BM_EPROTO;
	m.version = bmp_get_u16(&r);
	bmp_get_bytes(&r, m.token, BMP_KEY_LEN);
	if (bmp_rd_end(&r) != 0 || m.version == 0)
		return BM_EPROTO;
	*ret = m;
	return 0;
}

int
bmp_enc_list(uint32_t id, const void *path, size_t plen, uint8_t *buf,
    size_t cap, size_t *ret_len)
{
	struct bmp_wr	 w;

	bmp_wr_begin(&w, buf, cap, BMP_LIST);
	bmp_put_u32(&w, id);
	bmp_put_str(&w, path, plen);
	return bmp_wr_end(&w, ret_len);
}

int
bmp_dec_list(const uint8_t *p, size_t len, uint32_t *ret_id,
    struct bmp_str *ret_path)
{
	struct bmp_rd	 r;
	struct bmp_str	 s;
	uint32_t	 id;

	bmp_rd_init(&r, p, len);
	id = bmp_get_u32(&r);
	bmp_get_str(&r, BMP_STR_MAX, &s);
	if (bmp_rd_end(&r) != 0)
		return BM_EPROTO;
	*ret_id = id;
	*ret_path = s;
	return 0;
}

int
bmp_enc_entry(uint32_t id, const struct bmp_entry *e, uint8_t *buf,
    size_t cap, size_t *ret_len)
{
	struct bmp_wr	 w;

	bmp_wr_begin(&w, buf, cap, BMP_ENTRY);
	bmp_put_u32(&w, id);
	bmp_put_str(&w, e->path.p, e->path.len);
	bmp_put_u8(&w, e->type);
	bmp_put_u64(&w, e->size);
	bmp_put_u64(&w, (uint64_t)e->mtime_ns);
	bmp_put_u32(&w, e->mode);
	bmp_put_str(&w, e->target.p, e->target.len);
	bmp_put_u8(&w, e->digest_kind);
	if (e->digest_kind != BMP_D_NONE)
		bmp_put_bytes(&w, e->digest, BMP_DIGEST_LEN);
	return bmp_wr_end(&w, ret_len);
}

int
bmp_dec_entry(const uint8_t *p, size_t len, uint32_t *ret_id,
    struct bmp_entry *ret)
{
	struct bmp_rd	 r;
	struct bmp_entry e;
	uint32_t	 id;

	memset(&e, 0, sizeof(e));
	bmp_rd_init(&r, p, len);
	id = bmp_get_u32(&r);
	bmp_get_str(&r, BMP_STR_MAX, &e.path);
	e.type = bmp_get_u8(&r);
	e.size = bmp_get_u64(&r);
	e.mtime_ns = (int64_t)bmp_get_u64(&r);
	e.mode = bmp_get_u32(&r);
	bmp_get_str(&r, BMP_STR_MAX, &e.target);
	e.digest_kind = bmp_get_u8(&r);
	if (e.digest_kind == BMP_D_SHA256)
		bmp_get_bytes(&r, e.digest, BMP_DIGEST_LEN);
	if (bmp_rd_end(&r) != 0 || e.path.len == 0 ||
	    (e.type != BMP_T_FILE && e.type != BMP_T_DIR &&
	    e.type != BMP_T_LINK) || e.digest_kind > BMP_D_SHA256 ||
	    e.mode > 07777 || (e.type == BMP_T_LINK) != (e.target.len > 0))
		return BM_EPROTO;
	*ret_id = id;
	*ret = e;
	return 0;
}

int
bmp_enc_list_end(uint32_t id, uint64_t count, uint8_t *buf, size_t cap,
    size_t *ret_len)
{
	struct bmp_wr	 w;

	bmp_wr_begin(&w, buf, cap, BMP_LIST_END);
	bmp_put_u32(&w, id);
	bmp_put_u64(&w, count);
	return bmp_wr_end(&w, ret_len);
}

int
bmp_dec_list_end(const uint8_t *p, size_t len, uint32_t *ret_id,
    uint64_t *ret_count)
{
	struct bmp_rd	 r;
	uint32_t	 id;
	uint64_t	 n;

	bmp_rd_init(&r, p, len);
	id = bmp_get_u32(&r);
	n = bmp_get_u64(&r);
	if (bmp_rd_end(&r) != 0)
		return BM_EPROTO;
	*ret_id = id;
	*ret_count = n;
	return 0;
}

void
bmp_get_begin(struct bmp_wr *w, uint8_t *buf, size_t cap, uint32_t id)
{
	bmp_wr_begin(w, buf, cap, BMP_GET);
	bmp_put_u32(w, id);
	bmp_put_u16(w, 0);	/* item count, filled in by bmp_get_add */
}

int
bmp_get_add(struct bmp_wr *w, const struct bmp_item *it)
{
	size_t		 save = w->len;
	uint16_t	 n;

	if (w->over || w->len < BMP_HDR_LEN + 6)
		return BM_ELIMIT;
	n = (uint16_t)be_load(w->buf + BMP_HDR_LEN + 4, 2);
	if (n >= BMP_GET_MAX || it->path.len == 0)
		return n >= BMP_GET_MAX ? BM_ELIMIT : BM_EINVAL;
	bmp_put_str(w, it->path.p, it->path.len);
	bmp_put_u64(w, it->off);
	bmp_put_u64(w, it->len);
	if (w->over) {
		w->over = false;
		w->len = save;
		return BM_ELIMIT;
	}
	be_store(w->buf + BMP_HDR_LEN + 4, (uint64_t)n + 1, 2);
	return 0;
}

int
bmp_get_end(struct bmp_wr *w, size_t *ret_len)
{
	return bmp_wr_end(w, ret_len);
}

int
bmp_dec_get(const uint8_t *p, size_t len, uint32_t *ret_id,
    uint16_t *ret_n, struct bmp_rd *r)
{
	uint32_t	 id;
	uint16_t	 n;

	bmp_rd_init(r, p, len);
	id = bmp_get_u32(r);
	n = bmp_get_u16(r);
	if (r->bad || n == 0 || n > BMP_GET_MAX)
		return BM_EPROTO;
	*ret_id = id;
	*ret_n = n;
	return 0;
}

int
bmp_dec_item(struct bmp_rd *r, struct bmp_item *ret)
{
	struct bmp_item	 it;

	bmp_get_str(r, BMP_STR_MAX, &it.path);
	it.off = bmp_get_u64(r);
	it.len = bmp_get_u64(r);
	if (r->bad || it.path.len == 0 || it.off > INT64_MAX ||
	    it.len > INT64_MAX - it.off)
		return BM_EPROTO;
	*ret = it;
	return 0;
}

int
bmp_enc_file(const struct bmp_file *m, uint8_t *buf, size_t cap,
    size_t *ret_len)
{
	struct bmp_wr	 w;

	bmp_wr_begin(&w, buf, cap, BMP_FILE);
	bmp_put_u32(&w, m->id);
	bmp_put_u16(&w, m->index);
	bmp_put_u64(&w, m->off);
	bmp_put_u64(&w, m->len);
	bmp_put_u64(&w, m->size);
	bmp_put_u64(&w, (uint64_t)m->mtime_ns);
	return bmp_wr_end(&w, ret_len);
}

int
bmp_dec_file(const uint8_t *p, size_t len, struct bmp_file *ret)
{
	struct bmp_rd	 r;
	struct bmp_file	 m;

	bmp_rd_init(&r, p, len);
	m.id = bmp_get_u32(&r);
	m.index = bmp_get_u16(&r);
	m.off = bmp_get_u64(&r);
	m.len = bmp_get_u64(&r);
	m.size = bmp_get_u64(&r);
	m.mtime_ns = (int64_t)bmp_get_u64(&r);
	if (bmp_rd_end(&r) != 0 || m.off > m.size || m.len > m.size - m.off)
		return BM_EPROTO;
	*ret = m;
	return 0;
}

int
bmp_enc_digest(const struct bmp_digest *m, uint8_t *buf, size_t cap,
    size_t *ret_len)
{
	struct bmp_wr	 w;

	bmp_wr_begin(&w, buf, cap, BMP_DIGEST);
	bmp_put_u32(&w, m->id);
	bmp_put_u16(&w, m->index);
	bmp_put_u8(&w, m->kind);
	bmp_put_bytes(&w, m->digest, BMP_DIGEST_LEN);
	return bmp_wr_end(&w, ret_len);
}

int
bmp_dec_digest(const uint8_t *p, size_t len, struct bmp_digest *ret)
{
	struct bmp_rd	 r;
	struct bmp_digest m;

	bmp_rd_init(&r, p, len);
	m.id = bmp_get_u32(&r);
	m.index = bmp_get_u16(&r);
	m.kind = bmp_get_u8(&r);
	bmp_get_bytes(&r, m.digest, BMP_DIGEST_LEN);
	if (bmp_rd_end(&r) != 0 || (m.kind != BMP_D_SHA256 &&
	    m.kind != BMP_D_HMAC))
		return BM_EPROTO;
	*ret = m;
	return 0;
}

int
bmp_enc_get_end(uint32_t id, uint16_t done, uint16_t failed, uint8_t *buf,
    size_t cap, size_t *ret_len)
{
	struct bmp_wr	 w;

	bmp_wr_begin(&w, buf, cap, BMP_GET_END);
	bmp_put_u32(&w, id);
	bmp_put_u16(&w, done);
	bmp_put_u16(&w, failed);
	return bmp_wr_end(&w, ret_len);
}

int
bmp_dec_get_end(const uint8_t *p, size_t len, uint32_t *ret_id,
    uint16_t *ret_done, uint16_t *ret_failed)
{
	struct bmp_rd	 r;
	uint32_t	 id;
	uint16_t	 d, f;

	bmp_rd_init(&r, p, len);
	id = bmp_get_u32(&r);
	d = bmp_get_u16(&r);
	f = bmp_get_u16(&r);
	if (bmp_rd_end(&r) != 0)
		return BM_EPROTO;
	*ret_id = id;
	*ret_done = d;
	*ret_failed = f;
	return 0;
}

int
bmp_enc_error(const struct bmp_error *m, uint8_t *buf, size_t cap,
    size_t *ret_len)
{
	struct bmp_wr	 w;

	bmp_wr_begin(&w, buf, cap, BMP_ERROR);
	bmp_put_u32(&w, m->id);
	bmp_put_u16(&w, m->index);
	bmp_put_u16(&w, m->code);
	bmp_put_str(&w, m->msg.p, m->msg.len > 512 ? 512 : m->msg.len);
	return bmp_wr_end(&w, ret_len);
}

int
bmp_dec_error(const uint8_t *p, size_t len, struct bmp_error *ret)
{
	struct bmp_rd	 r;
	struct bmp_error m;

	bmp_rd_init(&r, p, len);
	m.id = bmp_get_u32(&r);
	m.index = bmp_get_u16(&r);
	m.code = bmp_get_u16(&r);
	bmp_get_str(&r, BMP_STR_MAX, &m.msg);
	if (bmp_rd_end(&r) != 0 || m.code == 0 || m.code > BMP_E_MAX)
		return BM_EPROTO;
	*ret = m;
	return 0;
}

int
bmp_enc_empty(uint8_t type, uint8_t *buf, size_t cap, size_t *ret_len)
{
	struct bmp_wr	 w;

	bmp_wr_begin(&w, buf, cap, type);
	return bmp_wr_end(&w, ret_len);
}

const char *
bmp_strerror(unsigned code)
{
	static const char *const s[BMP_E_MAX + 1] = {
		"unknown error", "protocol error", "no common version",
		"no such export", "access denied", "limit reached",
		"no such file or directory", "path outside the export",
		"not a regular file or range past its end", "read error",
		"server shutting down", "idle timeout"
	};

	return code <= BMP_E_MAX ? s[code] : s[0];
}

/* HMAC-SHA-256 with key over the n parts (p[i], len[i]) into out. */
static int
bmp_hmac(const uint8_t *key, size_t klen, const void *const *p,
    const size_t *len, size_t n, uint8_t out[BMP_DIGEST_LEN])
{
	EVP_MAC		*mac = NULL;
	EVP_MAC_CTX	*ctx = NULL;
	OSSL_PARAM	 params[2];
	size_t		 i, olen = 0;
	int		 rc = BM_EIO;

	params[0] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST,
	    (char *)(uintptr_t)"SHA256", 0);
	params[1] = OSSL_PARAM_construct_end();
	if ((mac = EVP_MAC_fetch(NULL, "HMAC", NULL)) == NULL ||
	    (ctx = EVP_MAC_CTX_new(mac)) == NULL ||
	    EVP_MAC_init(ctx, key, klen, params) != 1)
		goto out;
	for (i = 0; i < n; i++)
		if (EVP_MAC_update(ctx, p[i], len[i]) != 1)
			goto out;
	if (EVP_MAC_final(ctx, out, &olen, BMP_DIGEST_LEN) != 1 ||
	    olen != BMP_DIGEST_LEN)
		goto out;
	rc = 0;
out:
	EVP_MAC_CTX_free(ctx);
	EVP_MAC_free(mac);
	return rc;
}

int
bmp_auth_mac(const uint8_t *secret, size_t slen, char role,
    const uint8_t challenge[BMP_KEY_LEN], const uint8_t nonce[BMP_KEY_LEN],
    const void *export, size_t elen, uint8_t out[BMP_DIGEST_LEN])
{
	const char	*label;
	const void	*p[4];
	size_t		 len[4], n = 4;

	if (role == 'c')
		label = "bm1 client";
	else if (role == 's')
		label = "bm1 server";
	else {
		label = "bm1 key";
		n = 3;
	}
	p[0] = label;
	len[0] = strlen(label);
	p[1] = challenge;
	len[1] = BMP_KEY_LEN;
	p[2] = nonce;
	len[2] = BMP_KEY_LEN;
	p[3] = export;
	len[3] = elen;
	return bmp_hmac(secret, slen, p, len, n, out);
}

struct bmp_hash *
bmp_hash_new(const uint8_t *key, const struct bmp_file *f)
{
	struct bmp_hash	*h;
	struct bmp_wr	 w;
	uint8_t		 hdr[BMP_HDR_LEN + 22];
	OSSL_PARAM	 params[2];
	EVP_MAC		*mac = NULL;

	if ((h = calloc(1, sizeof(*h))) == NULL)
		return NULL;
	if (key == NULL) {
		if ((h->md = EVP_MD_CTX_new()) == NULL ||
		    EVP_DigestInit_ex(h->md, EVP_sha256(), NULL) != 1)
			goto fail;
		return h;
	}
	params[0] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST,
	    (char *)(uintptr_t)"SHA256", 0);
	params[1] = OSSL_PARAM_construct_end();
	if ((mac = EVP_MAC_fetch(NULL, "HMAC", NULL)) == NULL ||
	    (h->mac = EVP_MAC_CTX_new(mac)) == NULL ||
	    EVP_MAC_init(h->mac, key, BMP_KEY_LEN, params) != 1)
		goto fail;
	EVP_MAC_free(mac);
	mac = NULL;
	/* The item's identity is under the MAC: a range cannot be replayed. */
	bmp_wr_begin(&w, hdr, sizeof(hdr), 0);
	bmp_put_u32(&w, f->id);
	bmp_put_u16(&w, f->index);
	bmp_put_u64(&w, f->off);
	bmp_put_u64(&w, f->len);
	if (w.over || EVP_MAC_update(h->mac, hdr + BMP_HDR_LEN,
	    w.len - BMP_HDR_LEN) != 1)
		goto fail;
	return h;
fail:
	EVP_MAC_free(mac);
	bmp_hash_free(h);
	return NULL;
}

int
bmp_hash_update(struct bmp_hash *h, const void *p, size_t len)
{
	if (len == 0)
		return 0;
	if (h->md != NULL)
		return EVP_DigestUpdate(h->md, p, len) == 1 ? 0 : BM_EIO;
	return EVP_MAC_update(h->mac, p, len) == 1 ? 0 : BM_EIO;
}

int
bmp_hash_final(struct bmp_hash *h, uint8_t out[BMP_DIGEST_LEN],
    uint8_t *ret_kind)
{
	unsigned	 ml = 0;
	size_t		 olen = 0;

	if (h->md != NULL) {
		if (EVP_DigestFinal_ex(h->md, out, &ml) != 1 ||
		    ml != BMP_DIGEST_LEN)
			return BM_EIO;
		*ret_kind = BMP_D_SHA256;
		return 0;
	}
	if (EVP_MAC_final(h->mac, out, &olen, BMP_DIGEST_LEN) != 1 ||
	    olen != BMP_DIGEST_LEN)
		return BM_EIO;
	*ret_kind = BMP_D_HMAC;
	return 0;
}

void
bmp_hash_free(struct bmp_hash *h)
{
	if (h == NULL)
		return;
	EVP_MD_CTX_free(h->md);
	EVP_MAC_CTX_free(h->mac);
	free(h);
}
