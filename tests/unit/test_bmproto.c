/*
 * Unit tests for agent/proto/bm.c: every frame encodes and decodes back to
 * the same fields; headers over the cap and unknown types are refused;
 * truncated and padded payloads are refused; GET batching stops at the
 * frame cap and at BMP_GET_MAX items; integers go on the wire big-endian,
 * byte for byte, and a get past the end reads 0; the digests match independent
 * computations (SHA-256 of "abc"; OpenSSL's one-shot HMAC()).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "tap.h"

#include "biomirror/bmproto.h"
#include "biomirror/error.h"

static uint8_t	 buf[BMP_HDR_LEN + BMP_FRAME_MAX];

static const uint8_t sha_abc[32] = {
	0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01, 0xcf, 0xea, 0x41, 0x41, 0x40,
	0xde, 0x5d, 0xae, 0x22, 0x23, 0xb0, 0x03, 0x61, 0xa3, 0x96, 0x17,
	0x7a, 0x9c, 0xb4, 0x10, 0xff, 0x61, 0xf2, 0x00, 0x15, 0xad
};

/* The payload of the frame in buf, after checking its header. */
static const uint8_t *
payload(size_t n, uint8_t want, size_t *ret_len)
{
	uint8_t	 type = 0;
	size_t	 len = 0;

	if (bmp_header(buf, BMP_FRAME_MAX, &type, &len) != 0 ||
	    type != want || len + BMP_HDR_LEN != n)
		return NULL;
	*ret_len = len;
	return buf + BMP_HDR_LEN;
}

static void
test_header(void)
{
	uint8_t	 h[5] = { 0, 1, 0, 0, BMP_LIST }, type;
	size_t	 len;

	is_int(bmp_header(h, BMP_FRAME_MAX, &type, &len), 0, "64 KiB frame");
	is_int(len, 65536, "its length");
	h[1] = 1;
	h[3] = 1;
	is_int(bmp_header(h, BMP_FRAME_MAX, &type, &len), BM_ELIMIT,
	    "64 KiB + 1 is over the cap");
	h[0] = h[1] = h[3] = 0;
	h[2] = 2;
	is_int(bmp_header(h, 256, &type, &len), BM_ELIMIT,
	    "a smaller cap of the reader holds");
	h[2] = 0;
	h[4] = 0;
	is_int(bmp_header(h, BMP_FRAME_MAX, &type, &len), BM_EPROTO,
	    "type 0 is refused");
	h[4] = BMP_TYPE_MAX + 1;
	is_int(bmp_header(h, BMP_FRAME_MAX, &type, &len), BM_EPROTO,
	    "unknown type is refused");
}

static void
test_ints(void)
{
	static const uint8_t want[] = { 0, 0, 0, 15, BMP_ERROR, 0xa1, 0xb2,
	    0xc3, 0x01, 0x02, 0x03, 0x04, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06,
	    0x07, 0x08 };
	struct bmp_wr	 w;
	struct bmp_rd	 r;
	size_t		 n = 0;

	bmp_wr_begin(&w, buf, sizeof(buf), BMP_ERROR);
	bmp_put_u8(&w, 0xa1);
	bmp_put_u16(&w, 0xb2c3);
	bmp_put_u32(&w, 0x01020304);
	bmp_put_u64(&w, 0x0102030405060708ULL);
	ok(bmp_wr_end(&w, &n) == 0 && n == sizeof(want) &&
	    memcmp(buf, want, sizeof(want)) == 0,
	    "u8, u16, u32, u64 and the length: big-endian bytes");
	bmp_rd_init(&r, want + BMP_HDR_LEN, sizeof(want) - BMP_HDR_LEN);
	ok(bmp_get_u8(&r) == 0xa1 && bmp_get_u16(&r) == 0xb2c3 &&
	    bmp_get_u32(&r) == 0x01020304 &&
	    bmp_get_u64(&r) == 0x0102030405060708ULL && bmp_rd_end(&r) == 0,
	    "... read back from those bytes");
	bmp_rd_init(&r, want + BMP_HDR_LEN, 3);
	ok(bmp_get_u16(&r) == 0xa1b2 && bmp_get_u32(&r) == 0 &&
	    bmp_rd_end(&r) == BM_EPROTO, "a get past the end reads 0, bad");
}

static void
test_handshake(void)
{
	struct bmp_hello	 h = { 9, BMP_F_ALL, { (const uint8_t *)"pub", 3 } },
				 h2;
	struct bmp_welcome	 w = { 1, BMP_F_DIGESTS, true, { 0 } }, w2;
	struct bmp_session	 s, s2;
	struct bmp_attach	 a, a2;
	const uint8_t		*p;
	size_t			 n, len;

	is_int(bmp_enc_hello(&h, buf, sizeof(buf), &n), 0, "hello encodes");
	p = payload(n, BMP_HELLO, &len);
	ok(p != NULL && bmp_dec_hello(p, len, &h2) == 0, "hello decodes");
	ok(h2.version == 9 && h2.features == BMP_F_ALL && h2.export.len == 3 &&
	    memcmp(h2.export.p, "pub", 3) == 0, "hello fields");
	is_int(bmp_dec_hello(p, len - 1, &h2), BM_EPROTO, "short hello");
	buf[BMP_HDR_LEN] ^= 1;
	is_int(bmp_dec_hello(p, len, &h2), BM_EPROTO, "bad magic");
	h.export.len = 0;
	(void)bmp_enc_hello(&h, buf, sizeof(buf), &n);
	p = payload(n, BMP_HELLO, &len);
	is_int(bmp_dec_hello(p, len, &h2), BM_EPROTO, "empty export name");

	memset(w.challenge, 0xab, sizeof(w.challenge));
	is_int(bmp_enc_welcome(&w, buf, sizeof(buf), &n), 0, "welcome");
	p = payload(n, BMP_WELCOME, &len);
	ok(p != NULL && bmp_dec_welcome(p, len, &w2) == 0 && w2.auth &&
	    w2.version == 1 && w2.features == BMP_F_DIGESTS &&
	    w2.challenge[31] == 0xab, "welcome round trip");

	memset(&s, 0, sizeof(s));
	memset(s.token, 7, sizeof(s.token));
	s.max_connections = 4;
	s.max_queued = 65536;
	s.idle_timeout = 300;
	s.snapshot = -1;
	is_int(bmp_enc_session(&s, buf, sizeof(buf), &n), 0, "session");
	p = payload(n, BMP_SESSION, &len);
	ok(p != NULL && bmp_dec_session(p, len, &s2) == 0 &&
	    s2.max_connections == 4 && s2.max_queued == 65536 &&
	    s2.snapshot == -1 && s2.token[0] == 7, "session round trip");

	a.version = 1;
	memset(a.token, 9, sizeof(a.token));
	is_int(bmp_enc_attach(&a, buf, sizeof(buf), &n), 0, "attach");
	p = payload(n, BMP_ATTACH, &len);
	ok(p != NULL && bmp_dec_attach(p, len, &a2) == 0 &&
	    a2.token[31] == 9, "attach round trip");
	is_int(bmp_dec_attach(p, len + 1, &a2), BM_EPROTO, "trailing byte");
}

static void
test_list(void)
{
	struct bmp_entry	 e, e2;
	struct bmp_str		 path;
	const uint8_t		*p;
	uint64_t		 count;
	uint32_t		 id;
	size_t			 n, len;

	is_int(bmp_enc_list(5, "a/b", 3, buf, sizeof(buf), &n), 0, "list");
	p = payload(n, BMP_LIST, &len);
	ok(p != NULL && bmp_dec_list(p, len, &id, &path) == 0 && id == 5 &&
	    path.len == 3, "list round trip");
	is_int(bmp_enc_list(5, "", 0, buf, sizeof(buf), &n), 0, "list of root");

	memset(&e, 0, sizeof(e));
	e.path.p = (const uint8_t *)"d/\xc3\xa9t\xc3\xa9";
	e.path.len = 7;
	e.type = BMP_T_LINK;
	e.size = 5;
	e.mtime_ns = 1700000000123456789LL;
	e.mode = 0777;
	e.target.p = (const uint8_t *)"../x";
	e.target.len = 4;
	is_int(bmp_enc_entry(5, &e, buf, sizeof(buf), &n), 0, "entry");
	p = payload(n, BMP_ENTRY, &len);
	ok(p != NULL && bmp_dec_entry(p, len, &id, &e2) == 0 &&
	    e2.mtime_ns == 1700000000123456789LL && e2.type == BMP_T_LINK &&
	    e2.target.len == 4 && e2.path.len == 7, "entry round trip");
	e.type = BMP_T_FILE;
	e.target.len = 0;
	e.digest_kind = BMP_D_SHA256;
	memcpy(e.digest, sha_abc, 32);
	(void)bmp_enc_entry(5, &e, buf, sizeof(buf), &n);
	p = payload(n, BMP_ENTRY, &len);
	ok(p != NULL && bmp_dec_entry(p, len, &id, &e2) == 0 &&
	    e2.digest_kind == BMP_D_SHA256 && e2.digest[0] == 0xba,
	    "entry with digest");
	e.type = 'x';
	(void)bmp_enc_entry(5, &e, buf, sizeof(buf), &n);
	p = payload(n, BMP_ENTRY, &len);
	is_int(bmp_dec_entry(p, len, &id, &e2), BM_EPROTO, "bad entry type");

	is_int(bmp_enc_list_end(5, 2001, buf, sizeof(buf), &n), 0, "list end");
	p = payload(n, BMP_LIST_END, &len);
	ok(p != NULL && bmp_dec_list_end(p, len, &id, &count) == 0 &&
	    count == 2001, "list end round trip");
}

static void
test_get(void)
{
	static char	 longp[BMP_STR_MAX];
	struct bmp_wr	 w;
	struct bmp_rd	 r;
	struct bmp_item	 it, it2;
	const uint8_t	*p;
	uint32_t	 id;
	uint16_t	 cnt;
	size_t		 n, len, i;
	int		 rc = 0;

	bmp_get_begin(&w, buf, sizeof(buf), 77);
	it.path.p = (const uint8_t *)"big";
	it.path.len = 3;
	it.off = 1 << 20;
	it.len = 1 << 20;
	is_int(bmp_get_add(&w, &it), 0, "first item");
	for (i = 1; i < BMP_GET_MAX && rc == 0; i++)
		rc = bmp_get_add(&w, &it);
	is_int(rc, 0, "BMP_GET_MAX items fit");
	is_int(bmp_get_add(&w, &it), BM_ELIMIT, "one more does not");
	is_int(bmp_get_end(&w, &n), 0, "get ends");
	p = payload(n, BMP_GET, &len);
	ok(p != NULL && bmp_dec_get(p, len, &id, &cnt, &r) == 0 && id == 77 &&
	    cnt == BMP_GET_MAX, "get decodes");
	for (i = 0, rc = 0; i < cnt && rc == 0; i++)
		rc = bmp_dec_item(&r, &it2);
	ok(rc == 0 && bmp_rd_end(&r) == 0 && it2.off == 1 << 20,
	    "every item decodes");

	memset(longp, 'a', sizeof(longp));
	bmp_get_begin(&w, buf, sizeof(buf), 78);
	it.path.p = (const uint8_t *)longp;
	it.path.len = sizeof(longp);
	for (i = 0, rc = 0; rc == 0; i++)
		rc = bmp_get_add(&w, &it);
	is_int(rc, BM_ELIMIT, "the frame cap stops long items");
	ok(i - 1 == BMP_FRAME_MAX / (sizeof(longp) + 18), "as many as fit");
	ok(bmp_get_end(&w, &n) == 0 && n <= BMP_HDR_LEN + BMP_FRAME_MAX,
	    "the frame stays under the cap");

	/* A forged count larger than the items present. */
	bmp_get_begin(&w, buf, sizeof(buf), 79);
	it.path.len = 3;
	(void)bmp_get_add(&w, &it);
	(void)bmp_get_end(&w, &n);
	buf[BMP_HDR_LEN + 5] = 2;
	p = payload(n, BMP_GET, &len);
	ok(p != NULL && bmp_dec_get(p, len, &id, &cnt, &r) == 0 &&
	    bmp_dec_item(&r, &it2) == 0 && bmp_dec_item(&r, &it2) ==
	    BM_EPROTO, "a short GET is refused");
	buf[BMP_HDR_LEN + 4] = 0xff;
	is_int(bmp_dec_get(p, len, &id, &cnt, &r), BM_EPROTO,
	    "over BMP_GET_MAX items is refused");
}

static void
test_data(void)
{
	struct bmp_file		 f = { 3, 2, 10, 20, 100, 5 }, f2;
	struct bmp_digest	 d = { 3, 2, BMP_D_HMAC, { 1 } }, d2;
	struct bmp_error	 e = { 3, BMP_NO_INDEX, BMP_E_LIMIT,
				    { (const uint8_t *)"too many", 8 } }, e2;
	const uint8_t		*p;
	size_t			 n, len;
	uint32_t		 id;
	uint16_t		 dn, fl;

	is_int(bmp_enc_file(&f, buf, sizeof(buf), &n), 0, "file");
	p = payload(n, BMP_FILE, &len);
	ok(p != NULL && bmp_dec_file(p, len, &f2) == 0 && f2.off == 10 &&
	    f2.len == 20 && f2.size == 100 && f2.index == 2, "file round trip");
	f.len = 91;
	(void)bmp_enc_file(&f, buf, sizeof(buf), &n);
	p = payload(n, BMP_FILE, &len);
	is_int(bmp_dec_file(p, len, &f2), BM_EPROTO, "range past the size");
	is_int(bmp_enc_digest(&d, buf, sizeof(buf), &n), 0, "digest");
	p = payload(n, BMP_DIGEST, &len);
	ok(p != NULL && bmp_dec_digest(p, len, &d2) == 0 &&
	    d2.kind == BMP_D_HMAC && d2.digest[0] == 1, "digest round trip");
	is_int(bmp_enc_error(&e, buf, sizeof(buf), &n), 0, "error");
	p = payload(n, BMP_ERROR, &len);
	ok(p != NULL && bmp_dec_error(p, len, &e2) == 0 &&
	    e2.code == BMP_E_LIMIT && e2.msg.len == 8, "error round trip");
	is_int(bmp_enc_get_end(3, 1000, 2, buf, sizeof(buf), &n), 0, "get end");
	p = payload(n, BMP_GET_END, &len);
	ok(p != NULL && bmp_dec_get_end(p, len, &id, &dn, &fl) == 0 &&
	    dn == 1000 && fl == 2, "get end round trip");
	is_str(bmp_strerror(BMP_E_UNSAFE), "path outside the export",
	    "error text");
	is_str(bmp_strerror(999), "unknown error", "unknown code");
}

static void
test_hash(void)
{
	struct bmp_file	 f = { 1, 0, 0, 3, 3, 0 };
	struct bmp_hash	*h;
	uint8_t		 out[32], out2[32], ch[32], nonce[32], key[32];
	uint8_t		 kind = 0, msg[7 + 64];
	unsigned	 mlen = 0;

	h = bmp_hash_new(NULL, &f);
	ok(h != NULL && bmp_hash_update(h, "ab", 2) == 0 &&
	    bmp_hash_update(h, "c", 1) == 0 &&
	    bmp_hash_final(h, out, &kind) == 0, "sha-256 runs");
	ok(kind == BMP_D_SHA256 && memcmp(out, sha_abc, 32) == 0,
	    "sha-256 of abc");
	bmp_hash_free(h);

	memset(key, 0x11, sizeof(key));
	h = bmp_hash_new(key, &f);
	ok(h != NULL && bmp_hash_update(h, "abc", 3) == 0 &&
	    bmp_hash_final(h, out, &kind) == 0 && kind == BMP_D_HMAC,
	    "hmac runs");
	bmp_hash_free(h);
	f.index = 1;
	h = bmp_hash_new(key, &f);
	ok(h != NULL && bmp_hash_update(h, "abc", 3) == 0 &&
	    bmp_hash_final(h, out2, &kind) == 0 && memcmp(out, out2, 32) != 0,
	    "the item's identity is under the mac");
	bmp_hash_free(h);

	memset(ch, 0, sizeof(ch));
	memset(nonce, 0, sizeof(nonce));
	ok(bmp_auth_mac((const uint8_t *)"Jefe", 4, 'c', ch, nonce, "x", 1,
	    out) == 0 && bmp_auth_mac((const uint8_t *)"Jefe", 4, 's', ch,
	    nonce, "x", 1, out2) == 0 && memcmp(out, out2, 32) != 0,
	    "client and server MACs differ");
	ok(bmp_auth_mac((const uint8_t *)"Jefd", 4, 'c', ch, nonce, "x", 1,
	    out2) == 0 && memcmp(out, out2, 32) != 0, "secret matters");
	/* The session key against OpenSSL's one-shot HMAC(). */
	memcpy(msg, "bm1 key", 7);
	memset(msg + 7, 0, 64);
	ok(bmp_auth_mac((const uint8_t *)"Jefe", 4, 'k', ch, nonce, "x", 1,
	    out) == 0 && HMAC(EVP_sha256(), "Jefe", 4, msg, sizeof(msg), out2,
	    &mlen) != NULL && mlen == 32 && memcmp(out, out2, 32) == 0,
	    "session key is HMAC-SHA-256(secret, label | challenge | nonce)");
}

int
main(void)
{
	test_header();
	test_ints();
	test_handshake();
	test_list();
	test_get();
	test_data();
	test_hash();
	return done_testing();
}
