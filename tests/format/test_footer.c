/* Tests for varints and the footer/postscript protobufs, against bytes from an official file. */
#include <errno.h>
#include <string.h>

#include "helpers.h"
#include "format/footer.h"
#include "format/varint.h"

static void test_varint(void **state)
{
	static const uint64_t values[] = { 0, 1, 127, 128, 300, 1ull << 35, UINT64_MAX };
	uint8_t buf[10];
	const uint8_t *p;
	uint64_t v;
	size_t i, n;

	(void)state;
	for (i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
		n = grist_varint_write(buf, values[i]);
		assert_int_equal(n, grist_varint_len(values[i]));
		p = buf;
		assert_int_equal(grist_varint_read(&p, buf + n, &v), 0);
		assert_true(v == values[i]);
		assert_ptr_equal(p, buf + n);
		/* Cut short: an error, never a read past the end. */
		p = buf;
		assert_int_equal(grist_varint_read(&p, buf + n - 1, &v), -EBADMSG);
	}
	/* Non-shortest forms are accepted, as Riegeli does. */
	memcpy(buf, "\x81\x80\x00", 3);
	p = buf;
	assert_int_equal(grist_varint_read(&p, buf + 3, &v), 0);
	assert_int_equal(v, 1);
	/* Eleven bytes, or a tenth byte above 1, overflow. */
	memset(buf, 0xff, 10);
	p = buf;
	assert_int_equal(grist_varint_read(&p, buf + 10, &v), -EBADMSG);
	buf[9] = 0x02;
	p = buf;
	assert_int_equal(grist_varint_read(&p, buf + 10, &v), -EBADMSG);
}

static const char opts[] = "group_size:1,transpose:false,pad_to_block_boundary:false,uncompressed,max_parallelism:1";

static void test_official_bytes(void **state)
{
	static const uint8_t entry[] = { 0x08, 0x40, 0x10, 0x01, 0x18, 0x01 };
	static const uint8_t ps_bytes[] = { 0x08, 0x9c, 0x02, 0x10, 0xde, 0xc0, 0xeb, 0xfe,
					    0x84, 0xce, 0xc3, 0xc9, 0x71 };
	struct grist_footer_metadata m = { 1, 5, 5, (const uint8_t *)opts, sizeof(opts) - 1 }, m2;
	struct grist_footer_entry e = { 64, 1, 1, true }, e2;
	struct grist_postscript ps = { 284, GRIST_POSTSCRIPT_MAGIC }, ps2;
	struct grist_buf b = { 0 };

	(void)state;
	assert_int_equal(grist_footer_metadata_append(&b, &m), 0);
	assert_int_equal(b.len, 2 + 0x5f);
	assert_memory_equal(b.data, "\x0a\x5f\x08\x01\x10\x05\x18\x05\x22\x57", 10);
	assert_memory_equal(b.data + 10, opts, sizeof(opts) - 1);
	assert_int_equal(grist_footer_metadata_parse(b.data, b.len, &m2), 0);
	assert_int_equal(m2.version, 1);
	assert_int_equal(m2.num_chunks, 5);
	assert_int_equal(m2.writer_options_len, sizeof(opts) - 1);
	b.len = 0;
	assert_int_equal(grist_footer_entry_append(&b, &e), 0);
	assert_int_equal(b.len, sizeof(entry));
	assert_memory_equal(b.data, entry, sizeof(entry));
	assert_int_equal(grist_footer_entry_parse(entry, sizeof(entry), &e2), 0);
	assert_true(e2.has_chunk_offset && e2.chunk_offset == 64 && e2.num_records == 1);
	b.len = 0;
	assert_int_equal(grist_postscript_append(&b, &ps), 0);
	assert_int_equal(b.len, sizeof(ps_bytes));
	assert_memory_equal(b.data, ps_bytes, sizeof(ps_bytes));
	assert_int_equal(grist_postscript_parse(ps_bytes, sizeof(ps_bytes), &ps2), 0);
	assert_int_equal(ps2.footer_offset, 284);
	grist_buf_free(&b);
}

static void test_bad_protos(void **state)
{
	struct grist_footer_metadata m;
	struct grist_footer_entry e;
	struct grist_postscript ps;

	(void)state;
	/* Missing magic; truncated length; wire type 7; field number 0. */
	assert_int_equal(grist_postscript_parse((const uint8_t *)"\x08\x01", 2, &ps), -EBADMSG);
	assert_int_equal(grist_footer_metadata_parse((const uint8_t *)"\x0a\x05\x08", 3, &m), -EBADMSG);
	assert_int_equal(grist_footer_entry_parse((const uint8_t *)"\x0f\x01", 2, &e), -EBADMSG);
	assert_int_equal(grist_footer_entry_parse((const uint8_t *)"\x00\x01", 2, &e), -EBADMSG);
	/* No array_record_metadata at all. */
	assert_int_equal(grist_footer_metadata_parse((const uint8_t *)"\x10\x01", 2, &m), -EBADMSG);
	/* Unknown fields are skipped. */
	assert_int_equal(grist_footer_entry_parse((const uint8_t *)"\x21\x01\x02\x03\x04\x05\x06\x07\x08\x08\x07", 11, &e), 0);
	assert_int_equal(e.chunk_offset, 7);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_varint),
		cmocka_unit_test(test_official_bytes),
		cmocka_unit_test(test_bad_protos),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
