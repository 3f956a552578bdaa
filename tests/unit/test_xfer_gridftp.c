/*
 * Unit tests for agent/xfer/gridftp.c's parsers: MODE E block headers
 * (GFD.20 section 3.4.1) and the framing of FTP replies (RFC 959 section
 * 4.2), with the hostile cases a server could send.  The engine itself
 * runs against real globus-gridftp-server and our fault server in
 * tests/functional (t_47, t_48).
 */
#include <stdint.h>
#include <string.h>

#include "biomirror/error.h"
#include "biomirror/ftp_proto.h"
#include "biomirror/xfer_gridftp.h"

#include "tap.h"

static void
hdr(uint8_t p[GRIDFTP_HDRLEN], uint8_t desc, uint64_t count, uint64_t off)
{
	int	 i;

	p[0] = desc;
	for (i = 0; i < 8; i++) {
		p[1 + i] = (uint8_t)(count >> (56 - 8 * i));
		p[9 + i] = (uint8_t)(off >> (56 - 8 * i));
	}
}

static void
test_blocks(void)
{
	uint8_t			 p[GRIDFTP_HDRLEN];
	struct gridftp_block	 b;

	hdr(p, 0, 262144, 524288);
	is_int(gridftp_block_parse(p, &b), 0, "data block");
	is_int(b.desc, 0, "descriptor");
	is_int(b.count, 262144, "count, network order");
	is_int(b.offset, 524288, "offset, network order");

	/* What globus-gridftp-server ends every file with. */
	hdr(p, GRIDFTP_D_EOF | GRIDFTP_D_EOD, 0, 1);
	is_int(gridftp_block_parse(p, &b), 0, "EOF|EOD, one connection");
	ok(b.desc & GRIDFTP_D_EOD, "EOD flag");
	is_int(b.offset, 1, "EOD count in the offset field");

	hdr(p, GRIDFTP_D_EOD | GRIDFTP_D_CLOSE, 0, 0);
	is_int(gridftp_block_parse(p, &b), 0, "EOD with close");

	hdr(p, GRIDFTP_D_RESTART, 12, 0);
	is_int(gridftp_block_parse(p, &b), 0, "restart marker block");

	hdr(p, GRIDFTP_D_EOF, 0, 0);
	is_int(gridftp_block_parse(p, &b), BM_EPROTO, "EOF with EOD count 0");
	hdr(p, GRIDFTP_D_ERRORS, 10, 0);
	is_int(gridftp_block_parse(p, &b), BM_EPROTO, "suspected errors");
	hdr(p, GRIDFTP_D_EOR, 10, 0);
	is_int(gridftp_block_parse(p, &b), BM_EPROTO, "end of record");
	hdr(p, 0, (uint64_t)1 << 63, 0);
	is_int(gridftp_block_parse(p, &b), BM_EPROTO, "count past 2^63");
	hdr(p, 0, 1, UINT64_MAX);
	is_int(gridftp_block_parse(p, &b), BM_EPROTO, "offset past 2^63");
}

static void
reply(const char *text, long want_len, int want_code, const char *what)
{
	int	 code = -1;
	long	 n;

	n = ftp_reply_end(text, strlen(text), &code);
	is_int(n, want_len, "%s: length", what);
	if (want_len > 0)
		is_int(code, want_code, "%s: code", what);
}

static void
test_replies(void)
{
	char	 big[8192];

	reply("226 Transfer Complete.\r\n", 24, 226, "one line");
	reply("226 Transfer Complete.\n", 23, 226, "LF only");
	reply("226 Transfer Comp", 0, 0, "incomplete line");
	reply("", 0, 0, "nothing yet");
	reply("125 Beginning transfer; reusing existing data connection."
	    "\r\n226 Transfer Complete.\r\n", 59, 125, "two replies: first");
	reply("211-Extensions supported\r\n DCAU\r\n MLSD\r\n211 End.\r\n", 50,
	    211, "multi-line FEAT");
	reply("211-Extensions supported\r\n DCAU\r\n", 0, 0,
	    "multi-line, end not yet here");
	reply("500-Command failed.\r\n500-globus_xio: Unable to open file\r\n"
	    "500 End.\r\n", 68, 500, "multi-line error");
	reply("211-a\r\n211-b\r\n212 c\r\n211 d\r\n", 28, 211,
	    "only the same code with a space ends it");
	reply("230\r\n", 5, 230, "code without text");
	reply("hello\r\n", -1, 0, "no code");
	reply("22 short\r\n", -1, 0, "two digits");
	reply("600 bad class\r\n", -1, 0, "class 6");
	reply("226xyz\r\n", -1, 0, "no separator");
	/* A server that never ends a line is cut off, not buffered forever. */
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	reply(big, -1, 0, "a line longer than the buffer");
	memcpy(big, "211-", 4);
	big[4000] = '\n';
	reply(big, -1, 0, "a multi-line reply longer than the buffer");
}

/* Which 530 replies are a server's limit (retried) and which a wrong login. */
static void
test_530(void)
{
	/* ProFTPD MaxClientsPerHost, Pure-FTPd, wu-ftpd wordings. */
	ok(ftp_530_is_limit("530 Sorry, the maximum number of clients (2) "
	    "from your host are already connected.", false, false),
	    "ProFTPD's per-host limit is a limit");
	ok(ftp_530_is_limit("530 Too many users, try later", false, false),
	    "too many users");
	ok(ftp_530_is_limit("530 Server OVERLOADED", false, false),
	    "case is ignored");
	ok(ftp_530_is_limit("530-Sorry , you are not allowed to connect more "
	    "than 2 times / 530 .", false, false) == false,
	    "text outside lftp's expression is a refusal");
	ok(!ftp_530_is_limit("530 Login incorrect.", false, false),
	    "a wrong password (vsftpd) is no limit");
	ok(!ftp_530_is_limit("530 Login authentication failed", false, false),
	    "a wrong password (Pure-FTPd) is no limit");
	ok(ftp_530_is_limit("530 Login incorrect.", true, false),
	    "... but for an anonymous login it is (lftp's "
	    "retry-530-anonymous)");
	ok(!ftp_530_is_limit("530 This FTP server is anonymous only.", true,
	    false), "anonymous refused outright");
	ok(ftp_530_is_limit("530 Login incorrect.", false, true),
	    "after a login of this run was taken, a 530 is a limit");
	ok(!ftp_530_is_limit("", false, false), "an empty text is a refusal");
}

/* The UDT receive buffers split the 1 Gbit/s x RTT window over streams. */
static void
test_udt_bufs(void)
{
	uint64_t	 udt, udp;

	gridftp_udt_bufs(270000, 8, 1, &udt, &udp);
	is_int((long long)udp, 38400000, "270 ms: UDP buffer, the flow window");
	is_int((long long)udt, 4218750, "270 ms, 8 streams: an eighth of "
	    "33,750,000 each");
	gridftp_udt_bufs(65000, 4, 1, &udt, &udp);
	is_int((long long)udt, 2031250, "65 ms, 4 streams: a quarter");
	gridftp_udt_bufs(65000, 1, 1, &udt, &udp);
	is_int((long long)udt, 8125000, "65 ms, 1 stream: the whole product");
	gridftp_udt_bufs(65000, 2, 2, &udt, &udp);
	is_int((long long)udt, 2031250, "2 sessions of 2 streams share it");
	gridftp_udt_bufs(100, 4, 1, &udt, &udp);
	is_int((long long)udt, 4194304, "loopback: 4 MiB each, not split");
	gridftp_udt_bufs(100, 1, 64, &udt, &udp);
	is_int((long long)udt, 4194304, "loopback, 64 sessions: still 4 MiB "
	    "(brk2: 256 KiB made a lone file crawl)");
	gridftp_udt_bufs(25000, 8, 8, &udt, &udp);
	is_int((long long)udt, 262144, "25 ms, 64 connections: the WAN floor");
	is_int((long long)udp, 38400000, "loopback: UDP buffer not below "
	    "the flow window");
	gridftp_udt_bufs(65000, 8, 8, &udt, &udp);
	is_int((long long)udt, 262144, "64 connections: 256 KiB floor");
	gridftp_udt_bufs(3000000, 1, 1, &udt, &udp);
	is_int((long long)udp, 268435456, "3 s: UDP buffer at most 256 MiB");
	is_int((long long)udt, 37683200, "3 s: at most 25,600 packets");
	gridftp_udt_bufs(UINT64_MAX, 0, 0, &udt, &udp);
	is_int((long long)udp, 268435456, "no overflow on a huge RTT");
	is_int((long long)udt, 37683200, "0 streams and sessions count 1");
}

int
main(void)
{
	test_blocks();
	test_replies();
	test_530();
	test_udt_bufs();
	return done_testing();
}
