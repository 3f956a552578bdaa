/* Threat: a hostile FTP server's LIST/MLSD/FEAT reply must not crash or hang biomirror, nor make it accept an unsafe name or an impossible size or time. */
/*
 * Target for list_ftp_parse() and list_ftp_feat_has() (agent/lister/ftp.c).
 * The input is one reply: parsed as MLSD and as LIST (the crawl picks
 * one by FEAT, a hostile server answers either way), and as a FEAT
 * reply.  Seeds: the FTP fixtures of tests/fixtures/ and the FEAT
 * replies in tests/fuzz/corpus/list_ftp/ (tests/fuzz/seeds.sh).
 */
#include <stdbool.h>
#include <string.h>

#include "biomirror/error.h"
#include "biomirror/list_ftp.h"
#include "biomirror/listing.h"
#include "fuzz.h"

/* 2026-11-30 12:00:00 read as UTC: "now" for LIST year inference. */
#define FUZZ_NOW	1796040000LL

static void
parse_one(const uint8_t *data, size_t size, bool mlsd, const char *prefix)
{
	struct listing	*l;
	size_t		 skipped = 0;
	int		 rc;

	FUZZ_CHECK((l = listing_new(100000)) != NULL);
	rc = list_ftp_parse(data, size, mlsd, FUZZ_NOW, prefix, l, &skipped);
	FUZZ_CHECK(rc == 0 || rc == BM_ENOMEM || rc == BM_ELIMIT);
	if (rc == 0)
		fuzz_check_listing(l, prefix);
	listing_free(l);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t	*nl;
	const char	*why;
	size_t		 n;
	bool		 mlst, has;

	parse_one(data, size, true, "");
	parse_one(data, size, false, "pub/x");
	/* the first line, judged alone: a reason is a non-empty string */
	nl = size > 0 ? memchr(data, '\n', size) : NULL;
	n = nl != NULL ? (size_t)(nl - data) : size;
	if ((why = list_ftp_line_why(data, n, false, FUZZ_NOW)) != NULL)
		FUZZ_CHECK(why[0] != '\0');
	if ((why = list_ftp_line_why(data, n, true, FUZZ_NOW)) != NULL)
		FUZZ_CHECK(why[0] != '\0');
	mlst = list_ftp_feat_mlst(data, size);
	FUZZ_CHECK(mlst == list_ftp_feat_has(data, size, "MLST"));
	FUZZ_CHECK(mlst == list_ftp_feat_has(data, size, "mlst"));
	has = list_ftp_feat_has(data, size, "DCAU");
	(void)has;
	/* a feature is a keyword: never found inside an empty reply */
	if (size == 0)
		FUZZ_CHECK(!mlst && !has);
	return 0;
}
