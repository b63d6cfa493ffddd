/*
 * SigV4 against the AWS documented test vectors: the Signature Version 4 test suite
 * (AKIDEXAMPLE, region us-east-1, service "service", 20150830T123600Z) and the S3
 * developer guide's signed GET object example (a Range header, x-amz-content-sha256),
 * plus the URL encoding of odd object keys the signer relies on.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "io/s3_sign.h"
#include "io/url.h"

#define SUITE_AK "AKIDEXAMPLE"
#define SUITE_SK "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
#define SUITE_DATE "20150830T123600Z"

/* Sign a suite request: GET @raw_path (encoded here) with @query, host + x-amz-date, empty body. */
static void suite_sign(const char *raw_path, const struct grist_sigv4_pair *q, size_t nq, char sig[65],
		       struct grist_buf *creq, struct grist_buf *sts, struct grist_buf *authz)
{
	struct grist_sigv4_pair h[] = { { "host", "example.amazonaws.com" }, { "x-amz-date", SUITE_DATE } };
	struct grist_buf path = { 0 };
	struct grist_sigv4 in = {
		.method = "GET", .query = q, .nquery = nq, .headers = h, .nheaders = 2,
		.payload_hash = GRIST_SHA256_EMPTY, .amz_date = SUITE_DATE, .region = "us-east-1",
		.service = "service", .access_key = SUITE_AK, .secret_key = SUITE_SK,
	};

	assert_int_equal(grist_uri_encode(&path, raw_path, strlen(raw_path), true), 0);
	assert_int_equal(grist_buf_append(&path, "", 1), 0);
	in.canonical_uri = (const char *)path.data;
	assert_int_equal(grist_sigv4_sign(&in, creq, sts, sig, authz), 0);
	grist_buf_free(&path);
}

static void test_get_vanilla(void **state)
{
	struct grist_buf creq = { 0 }, sts = { 0 }, authz = { 0 };
	char sig[65];

	(void)state;
	suite_sign("/", NULL, 0, sig, &creq, &sts, &authz);
	assert_string_equal((const char *)creq.data,
			    "GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\n"
			    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	assert_string_equal((const char *)sts.data,
			    "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n"
			    "bb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63");
	assert_string_equal((const char *)authz.data,
			    "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
			    "SignedHeaders=host;x-amz-date, "
			    "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
	grist_buf_free(&creq);
	grist_buf_free(&sts);
	grist_buf_free(&authz);
}

/* Paths: unicode, a space, the unreserved set (the encodings several clients got wrong). */
static void test_paths(void **state)
{
	static const struct {
		const char *path, *sig;
	} v[] = {
		{ "/\xe1\x88\xb4", "8318018e0b0f223aa2bbf98705b62bb787dc9c0e678f255a891fd03141be5d85" },
		{ "/example space/", "652487583200325589f1fba4c7e578f72c47cb61beeca81406b39ddec1366741" },
		{ "/-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
		  "07ef7494c76fa4850883e2b006601f940f8a34d404d0cfa977f52a65bbf5f24f" },
	};
	struct grist_buf creq = { 0 };
	char sig[65];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		creq.len = 0;
		suite_sign(v[i].path, NULL, 0, sig, &creq, NULL, NULL);
		assert_string_equal(sig, v[i].sig);
	}
	/* get-utf8's canonical URI */
	creq.len = 0;
	suite_sign("/\xe1\x88\xb4", NULL, 0, sig, &creq, NULL, NULL);
	assert_non_null(strstr((const char *)creq.data, "GET\n/%E1%88%B4\n\n"));
	grist_buf_free(&creq);
}

/* Query strings: sorted by name, names and values encoded (unicode, the unreserved set). */
static void test_queries(void **state)
{
	static const char unreserved[] = "-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
	struct grist_sigv4_pair order[] = { { "Param2", "value2" }, { "Param1", "value1" } };
	struct grist_sigv4_pair utf8[] = { { "\xe1\x88\xb4", "bar" } };
	struct grist_sigv4_pair unres[] = { { unreserved, unreserved } };
	struct grist_buf creq = { 0 };
	char sig[65];

	(void)state;
	suite_sign("/", order, 2, sig, &creq, NULL, NULL);
	assert_string_equal(sig, "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500");
	assert_non_null(strstr((const char *)creq.data, "\nParam1=value1&Param2=value2\n"));
	suite_sign("/", utf8, 1, sig, NULL, NULL, NULL);
	assert_string_equal(sig, "2cdec8eed098649ff3a119c94853b13c643bcf08f8b0a1d91e12c9027818dd04");
	suite_sign("/", unres, 1, sig, NULL, NULL, NULL);
	assert_string_equal(sig, "9c3e54bfcdf0b19771a7f523ee5669cdf59bc7cc0884027167c21bb143a40197");
	grist_buf_free(&creq);
}

/* The S3 guide's example: GET /test.txt with Range, x-amz-content-sha256, service s3. */
static void test_s3_get_object(void **state)
{
	struct grist_sigv4_pair h[] = {
		{ "host", "examplebucket.s3.amazonaws.com" },
		{ "range", "bytes=0-9" },
		{ "x-amz-content-sha256", GRIST_SHA256_EMPTY },
		{ "x-amz-date", "20130524T000000Z" },
	};
	struct grist_sigv4 in = {
		.method = "GET", .canonical_uri = "/test.txt", .headers = h, .nheaders = 4,
		.payload_hash = GRIST_SHA256_EMPTY, .amz_date = "20130524T000000Z", .region = "us-east-1",
		.service = "s3", .access_key = "AKIAIOSFODNN7EXAMPLE",
		.secret_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
	};
	char sig[65];

	(void)state;
	assert_int_equal(grist_sigv4_sign(&in, NULL, NULL, sig, NULL), 0);
	assert_string_equal(sig, "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

/* Keys as S3 signs them: each byte outside the unreserved set as %XX, '/' kept, '+' encoded. */
static void test_key_encoding(void **state)
{
	static const struct {
		const char *raw, *enc;
	} v[] = {
		{ "a b+c/d", "a%20b%2Bc/d" },
		{ "caf\xc3\xa9/\xe6\x97\xa5.ar", "caf%C3%A9/%E6%97%A5.ar" },
		{ "x=1&y?#%", "x%3D1%26y%3F%23%25" },
		{ "dir//./..", "dir//./.." },
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		struct grist_buf b = { 0 };

		assert_int_equal(grist_uri_encode(&b, v[i].raw, strlen(v[i].raw), true), 0);
		assert_int_equal(grist_buf_append(&b, "", 1), 0);
		assert_string_equal((const char *)b.data, v[i].enc);
		grist_buf_free(&b);
	}
}

/* Header names must be lower case: the canonical form is not the caller's to guess. */
static void test_rejects_upper_case(void **state)
{
	struct grist_sigv4_pair h[] = { { "Host", "x" } };
	struct grist_sigv4 in = {
		.method = "GET", .canonical_uri = "/", .headers = h, .nheaders = 1, .payload_hash = "UNSIGNED-PAYLOAD",
		.amz_date = SUITE_DATE, .region = "r", .service = "s3", .access_key = "a", .secret_key = "s",
	};

	(void)state;
	assert_int_equal(grist_sigv4_sign(&in, NULL, NULL, NULL, NULL), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_get_vanilla),
		cmocka_unit_test(test_paths),
		cmocka_unit_test(test_queries),
		cmocka_unit_test(test_s3_get_object),
		cmocka_unit_test(test_key_encoding),
		cmocka_unit_test(test_rejects_upper_case),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
