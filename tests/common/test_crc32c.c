/* Tests for CRC-32C: the published check values, the hardware and table paths agreeing, TFRecord's mask. */
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "common/crc32c.h"

/* RFC 3720 (iSCSI) appendix B.4 vectors and the usual "123456789" check value. */
static void test_known_vectors(void **state)
{
	uint8_t buf[32];
	int i;

	(void)state;
	assert_int_equal(grist_crc32c(0, "123456789", 9), 0xe3069283u);
	assert_int_equal(grist_crc32c(0, "", 0), 0);
	memset(buf, 0, sizeof(buf));
	assert_int_equal(grist_crc32c(0, buf, 32), 0x8a9136aau);
	memset(buf, 0xff, sizeof(buf));
	assert_int_equal(grist_crc32c(0, buf, 32), 0x62a8ab43u);
	for (i = 0; i < 32; i++)
		buf[i] = (uint8_t)i;
	assert_int_equal(grist_crc32c(0, buf, 32), 0x46dd794eu);
	for (i = 0; i < 32; i++)
		buf[i] = (uint8_t)(31 - i);
	assert_int_equal(grist_crc32c(0, buf, 32), 0x113fdb5cu);
	assert_int_equal(grist_crc32c_portable(0, "123456789", 9), 0xe3069283u);
}

/* Every length and alignment: both paths agree, and chaining equals one pass. */
static void test_paths_agree_and_chain(void **state)
{
	uint8_t *buf = malloc(4096 + 8);
	size_t off, len, cut;

	(void)state;
	assert_non_null(buf);
	t_fill(buf, 4096 + 8, 11);
	for (off = 0; off < 8; off++)
		for (len = 0; len < 300; len++)
			assert_int_equal(grist_crc32c(0, buf + off, len), grist_crc32c_portable(0, buf + off, len));
	for (cut = 0; cut <= 4096; cut += 37) {
		uint32_t whole = grist_crc32c(0, buf, 4096);

		assert_int_equal(grist_crc32c(grist_crc32c(0, buf, cut), buf + cut, 4096 - cut), whole);
		assert_int_equal(grist_crc32c_portable(grist_crc32c_portable(0, buf, cut), buf + cut, 4096 - cut), whole);
	}
	free(buf);
}

/* TensorFlow's mask: rotate right 15, add 0xa282ead8 (the header of an empty record, by hand). */
static void test_mask(void **state)
{
	uint8_t zero[8] = { 0 };
	uint32_t c = grist_crc32c(0, zero, 8);

	(void)state;
	assert_int_equal(grist_crc32c_mask(0), 0xa282ead8u);
	assert_int_equal(grist_crc32c_mask(c), (uint32_t)(((c >> 15) | (c << 17)) + 0xa282ead8u));
	assert_int_equal(grist_crc32c_mask(0x12345678u), (uint32_t)(0xacf02468u + 0xa282ead8u));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_known_vectors),
		cmocka_unit_test(test_paths_agree_and_chain),
		cmocka_unit_test(test_mask),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
