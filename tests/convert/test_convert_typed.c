/*
 * Tests for grist_convert()'s typed inputs (grist/convert.h): csv rows and ImageFolder trees
 * into tf.train.Example records. Expected records are built here with grist_example_* from
 * the values the test wrote, so what is checked is the reading, typing, order, labels and
 * sharding (the encoder's bytes are checked against protobuf in tests/features and the
 * Python interop test). Images are made with libspng's and TurboJPEG's encoders.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <spng.h>
#include <turbojpeg.h>

#include "helpers.h"
#include "convert/image_shrink.h"
#include "grist/convert.h"
#include "grist/features.h"
#include "grist/format.h"

/* The records of ArrayRecord file @path, each checked against @want[i] (lens @wlen). */
static void expect_records(const char *path, uint8_t **want, size_t *wlen, size_t n)
{
	struct grist_reader *r;
	const uint8_t *p;
	size_t len, i = 0;
	int ret;

	assert_int_equal(grist_reader_open(&path, 1, NULL, &r), 0);
	while ((ret = grist_reader_read_next(r, &p, &len)) > 0) {
		assert_true(i < n);
		assert_int_equal(len, wlen[i]);
		assert_memory_equal(p, want[i], len);
		i++;
	}
	assert_int_equal(ret, 0);
	assert_int_equal(i, n);
	grist_reader_close(r);
}

/* One Example built with the encoder, copied out. */
struct want {
	uint8_t *rec[16];
	size_t len[16];
	size_t n;
};

static void want_take(struct want *w, struct grist_example_encoder *e)
{
	const uint8_t *p;
	size_t len;

	assert_int_equal(grist_example_finish(e, &p, &len), 0);
	w->rec[w->n] = malloc(len);
	memcpy(w->rec[w->n], p, len);
	w->len[w->n++] = len;
}

static void want_free(struct want *w)
{
	for (size_t i = 0; i < w->n; i++)
		free(w->rec[i]);
	w->n = 0;
}

static void add_text(struct grist_example_encoder *e, const char *key, const char *s)
{
	assert_int_equal(grist_example_add_bytes(e, key, (const uint8_t *)s, (const uint64_t[]){ 0, strlen(s) }, 1), 0);
}

static const char csv_text[] =
	"\xef\xbb\xbf" "id,score,name,skip,tags\r\n"
	"1,0.5,plain,x,a b\r\n"
	"\r\n"
	"-9223372036854775808,-2e3,\"quoted, with \"\"quotes\"\"\nand a newline\",y,\n"
	"42, 3.25 ,,\"z\",  c  \n"; /* no newline needed at the end, but one is fine */

/* Quoting, CRLF, a BOM, a blank line, lists, untyped columns left out. */
static void test_csv_records(void **state)
{
	char *dir = t_mkdtemp();
	char *in = strdup(t_path(dir, "rows.csv")), *out = strdup(t_path(dir, "rows.ar"));
	struct grist_example_encoder *e;
	struct grist_convert_options o;
	struct grist_convert_stats st;
	struct want w = { 0 };
	const char *inputs[] = { in };

	(void)state;
	assert_int_equal(t_write_file(in, csv_text, strlen(csv_text)), 0);
	assert_int_equal(grist_example_encoder_create(&e), 0);
	{
		grist_example_begin(e);
		assert_int_equal(grist_example_add_int64s(e, "id", (const int64_t[]){ 1 }, 1), 0);
		assert_int_equal(grist_example_add_floats(e, "score", (const float[]){ 0.5f }, 1), 0);
		add_text(e, "name", "plain");
		assert_int_equal(grist_example_add_bytes(e, "tags", (const uint8_t *)"ab", (const uint64_t[]){ 0, 1, 2 }, 2), 0);
		want_take(&w, e);
		grist_example_begin(e);
		assert_int_equal(grist_example_add_int64s(e, "id", (const int64_t[]){ INT64_MIN }, 1), 0);
		assert_int_equal(grist_example_add_floats(e, "score", (const float[]){ -2000.0f }, 1), 0);
		add_text(e, "name", "quoted, with \"quotes\"\nand a newline");
		assert_int_equal(grist_example_add_bytes(e, "tags", NULL, NULL, 0), 0);
		want_take(&w, e);
		grist_example_begin(e);
		assert_int_equal(grist_example_add_int64s(e, "id", (const int64_t[]){ 42 }, 1), 0);
		assert_int_equal(grist_example_add_floats(e, "score", (const float[]){ 3.25f }, 1), 0);
		add_text(e, "name", "");
		add_text(e, "tags", "c");
		want_take(&w, e);
	}
	grist_convert_options_init(&o);
	o.format = GRIST_CONVERT_CSV;
	o.features = "id:int64,score:float32,name:text,tags:text[]";
	grist_convert_stats_init(&st);
	assert_int_equal(grist_convert(inputs, 1, out, &o, &st), 0);
	assert_int_equal(st.records, 3);
	expect_records(out, w.rec, w.len, w.n);
	/* the same through shards: contiguous runs */
	o.shards = 2;
	assert_int_equal(grist_convert(inputs, 1, out, &o, NULL), 0);
	expect_records(t_path(dir, "rows.ar-00000-of-00002"), w.rec, w.len, 2);
	expect_records(t_path(dir, "rows.ar-00001-of-00002"), w.rec + 2, w.len + 2, 1);
	want_free(&w);
	grist_example_encoder_destroy(e);
	free(in);
	free(out);
	t_rmtree(dir);
}

/* A bad cell, row or spec: the message names file, line and column; nothing is left at OUT. */
static void test_csv_errors(void **state)
{
	static const struct {
		const char *text, *spec, *msg;
		int code;
	} cases[] = {
		{ "a,b\n1,2\n3,x\n", "a:int64,b:int64", "bad.csv: line 3, column 'b': 'x' is not an int64", -EBADMSG },
		{ "a,b\n1,\n", "a:int64,b:float32", "bad.csv: line 2, column 'b': an empty cell", -EBADMSG },
		{ "a,b\n1,2 3\n", "a:int64,b:int64", "line 2, column 'b': '2 3' is not an int64", -EBADMSG },
		{ "a,b\n99999999999999999999,1\n", "a:int64", "line 2, column 'a'", -EBADMSG },
		{ "a,b\n1,2\n\n1,2,3\n", "a:int64", "bad.csv: line 4: 3 fields, the header has 2", -EBADMSG },
		{ "a,b\n1,\"2\n", "a:int64", "bad.csv: line 2: a quoted field is not closed", -EBADMSG },
		{ "a,b\n\"1\"x,2\n", "a:int64", "bad.csv: line 2, field 1: 'x' after a closing quote", -EBADMSG },
		{ "a,b\n1,2\n", "a:int64,c:text", "bad.csv: line 1: the header has no column 'c'", -EINVAL },
		{ "a,a\n1,2\n", "a:int64", "the header has more than one column 'a'", -EINVAL },
		{ "", "a:int64", "bad.csv: no header row", -EBADMSG },
		{ "a\n1\n", "a:int32", "column 'a': unknown type 'int32'", -EINVAL },
		{ "a\n1\n", "a", "'a' is not NAME:TYPE", -EINVAL },
		{ "a\n1\n", "a:int64,a:text", "column 'a' is named twice", -EINVAL },
		{ "a\n1\n", "", "a features spec is needed", -EINVAL },
	};
	char *dir = t_mkdtemp();
	char *in = strdup(t_path(dir, "bad.csv")), *out = strdup(t_path(dir, "out.ar"));
	const char *inputs[] = { in };
	struct grist_convert_options o;

	(void)state;
	grist_convert_options_init(&o);
	o.format = GRIST_CONVERT_CSV;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(t_write_file(in, cases[i].text, strlen(cases[i].text)), 0);
		o.features = cases[i].spec;
		assert_int_equal(grist_convert(inputs, 1, out, &o, NULL), cases[i].code);
		if (!strstr(grist_last_error(), cases[i].msg))
			fail_msg("case %zu: '%s' lacks '%s'", i, grist_last_error(), cases[i].msg);
		assert_int_equal(t_count_entries(dir), 1);
	}
	/* a features spec for another format is a mistake, said before anything is read */
	o.format = GRIST_CONVERT_LINES;
	o.features = "a:int64";
	assert_int_equal(grist_convert(inputs, 1, out, &o, NULL), -EINVAL);
	assert_non_null(strstr(grist_last_error(), "for the csv format"));
	free(in);
	free(out);
	t_rmtree(dir);
}

/* ---- images ---- */

static uint8_t *png_of(const uint8_t *px, uint32_t w, uint32_t h, uint8_t color, size_t *len)
{
	spng_ctx *ctx = spng_ctx_new(SPNG_CTX_ENCODER);
	struct spng_ihdr ihdr = { .width = w, .height = h, .bit_depth = 8, .color_type = color };
	size_t ch = color == SPNG_COLOR_TYPE_GRAYSCALE ? 1 : color == SPNG_COLOR_TYPE_TRUECOLOR ? 3 : 4;
	uint8_t *out;
	int err;

	assert_non_null(ctx);
	spng_set_option(ctx, SPNG_ENCODE_TO_BUFFER, 1);
	spng_set_ihdr(ctx, &ihdr);
	assert_int_equal(spng_encode_image(ctx, px, (size_t)w * h * ch, SPNG_FMT_PNG, SPNG_ENCODE_FINALIZE), 0);
	out = spng_get_png_buffer(ctx, len, &err);
	assert_non_null(out);
	spng_ctx_free(ctx);
	return out;
}

static uint8_t *jpeg_of(const uint8_t *px, int w, int h, size_t *len)
{
	tjhandle tj = tjInitCompress();
	unsigned char *jpg = NULL;
	unsigned long n = 0;
	uint8_t *out;

	assert_non_null(tj);
	assert_int_equal(tjCompress2(tj, px, w, 0, h, TJPF_RGB, &jpg, &n, TJSAMP_420, 90, 0), 0);
	out = malloc(n);
	memcpy(out, jpg, n);
	*len = n;
	tjFree(jpg);
	tjDestroy(tj);
	return out;
}

/*
 * image_shrink.c (max_side, shared by the imagefolder input and the Python converters) under
 * the sanitizers, its state reused across images: a larger RGB JPEG and gray PNG come back
 * as JPEGs of max_side on the longer side (the shorter rounded half up); images within
 * max_side and RGBA are kept (NULL); bytes that are no image are an error. The pixels
 * against Pillow: tests/python/test_convert_typed.py.
 */
static void test_image_shrink(void **state)
{
	struct gc_shrink s = { 0 };
	uint8_t *px = malloc(600 * 401 * 4), *img;
	const uint8_t *out;
	size_t len, n;
	tjhandle tj = tjInitDecompress();
	int w, h, sub, cs;

	(void)state;
	assert_non_null(px);
	assert_non_null(tj);
	t_fill(px, 600 * 401 * 4, 7);
	for (int round = 0; round < 2; round++) {
		img = jpeg_of(px, 600, 401, &len);
		assert_int_equal(gc_shrink_image(&s, img, len, 64, 85, "a.jpg", &out, &n), 0);
		assert_non_null(out);
		assert_int_equal(tjDecompressHeader3(tj, out, n, &w, &h, &sub, &cs), 0);
		assert_int_equal(w, 64);
		assert_int_equal(h, 43); /* 401 x 64 / 600 = 42.77 */
		assert_int_equal(gc_shrink_image(&s, img, len, 600, 85, "a.jpg", &out, &n), 0);
		assert_null(out);
		free(img);
		img = png_of(px, 30, 200, SPNG_COLOR_TYPE_GRAYSCALE, &len);
		assert_int_equal(gc_shrink_image(&s, img, len, 100, 85, "g.png", &out, &n), 0);
		assert_non_null(out);
		assert_int_equal(tjDecompressHeader3(tj, out, n, &w, &h, &sub, &cs), 0);
		assert_int_equal(w, 15);
		assert_int_equal(h, 100);
		assert_int_equal(sub, TJSAMP_GRAY);
		free(img);
		img = png_of(px, 300, 200, SPNG_COLOR_TYPE_TRUECOLOR_ALPHA, &len);
		assert_int_equal(gc_shrink_image(&s, img, len, 100, 85, "rgba.png", &out, &n), 0);
		assert_null(out);
		free(img);
	}
	assert_int_equal(gc_shrink_image(&s, (const uint8_t *)"nope", 4, 100, 85, "x.jpg", &out, &n), -EBADMSG);
	assert_non_null(strstr(grist_last_error(), "x.jpg"));
	gc_shrink_free(&s);
	gc_shrink_free(&s); /* twice is fine */
	tjDestroy(tj);
	free(px);
}

struct image {
	const char *rel; /* split/label/file */
	uint8_t *bytes;
	size_t len;
};

static void put_image(const char *root, struct image *im, bool jpeg, uint32_t w, uint32_t h, uint64_t seed)
{
	uint8_t px[3 * 16 * 16];
	char path[4096], *slash;

	assert_true(w * h * 3 <= sizeof(px));
	t_fill(px, sizeof(px), seed);
	im->bytes = jpeg ? jpeg_of(px, (int)w, (int)h, &im->len) : png_of(px, w, h, SPNG_COLOR_TYPE_TRUECOLOR, &im->len);
	snprintf(path, sizeof(path), "%s/%s", root, im->rel);
	for (slash = strchr(path + strlen(root) + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
		*slash = '\0';
		mkdir(path, 0755);
		*slash = '/';
	}
	assert_int_equal(t_write_file(path, im->bytes, im->len), 0);
}

/* A whole file, NUL-terminated. */
static char *text_of(const char *path)
{
	size_t len;
	uint8_t *b = t_read_file(path, &len);
	char *s;

	assert_non_null(b);
	s = malloc(len + 1);
	memcpy(s, b, len);
	s[len] = '\0';
	free(b);
	return s;
}

/*
 * Two splits whose label sets differ (the labels are their sorted union), PNG and JPEG,
 * names in any case, non-image files and a stray file at label level ignored; records
 * in sorted order, labels as indexes, shards as TFDS names them; the side files.
 */
static void test_imagefolder(void **state)
{
	struct image train[] = {
		{ .rel = "train/cat/a.png" }, { .rel = "train/cat/b.JPG" }, { .rel = "train/dog/0.jpeg" },
		{ .rel = "train/dog/1.png" },
		{ .rel = "train/dog/2.png" },
	};
	struct image test[] = { { .rel = "test/ant/x.png" }, { .rel = "test/dog/y.jpg" } };
	const int64_t train_labels[] = { 1, 1, 2, 2, 2 }, test_labels[] = { 0, 2 };
	char *dir = t_mkdtemp(), *root = strdup(t_path(dir, "root")), *out = strdup(t_path(dir, "data/pets/2.0.1"));
	const char *inputs[] = { root };
	struct grist_example_encoder *e;
	struct grist_convert_options o;
	struct grist_convert_stats st;
	struct want w = { 0 };
	char *s;

	(void)state;
	mkdir(root, 0755);
	for (size_t i = 0; i < 5; i++)
		put_image(root, &train[i], strstr(train[i].rel, ".j") || strstr(train[i].rel, ".J"), 8 + i, 6, i);
	for (size_t i = 0; i < 2; i++)
		put_image(root, &test[i], strstr(test[i].rel, ".j") != NULL, 5, 9, 10 + i);
	assert_int_equal(t_write_file(t_path(root, "train/dog/notes.txt"), "x", 1), 0);
	assert_int_equal(t_write_file(t_path(root, "train/README"), "x", 1), 0);
	assert_int_equal(grist_example_encoder_create(&e), 0);
	grist_convert_options_init(&o);
	o.format = GRIST_CONVERT_IMAGEFOLDER;
	o.shards = 2;
	grist_convert_stats_init(&st);
	assert_int_equal(grist_convert(inputs, 1, out, &o, &st), 0);
	assert_int_equal(st.records, 7);
	assert_int_equal(st.shards, 4);
	for (int split = 0; split < 2; split++) {
		struct image *ims = split ? test : train;
		const int64_t *labels = split ? test_labels : train_labels;
		size_t n = split ? 2 : 5, first;

		for (size_t i = 0; i < n; i++) {
			grist_example_begin(e);
			assert_int_equal(grist_example_add_bytes(e, "image", ims[i].bytes, (const uint64_t[]){ 0, ims[i].len }, 1), 0);
			add_text(e, "image/filename", ims[i].rel);
			assert_int_equal(grist_example_add_int64s(e, "label", &labels[i], 1), 0);
			want_take(&w, e);
		}
		first = (n + 1) / 2;
		expect_records(t_path(out, split ? "pets-test.array_record-00000-of-00002" : "pets-train.array_record-00000-of-00002"),
			       w.rec, w.len, first);
		expect_records(t_path(out, split ? "pets-test.array_record-00001-of-00002" : "pets-train.array_record-00001-of-00002"),
			       w.rec + first, w.len + first, n - first);
		want_free(&w);
	}
	s = text_of(t_path(out, "label.labels.txt"));
	assert_string_equal(s, "ant\ncat\ndog\n");
	free(s);
	s = text_of(t_path(out, "features.json"));
	assert_non_null(strstr(s, "\"numClasses\": \"3\""));
	assert_non_null(strstr(s, "\"-1\",\n                            \"-1\",\n                            \"3\""));
	free(s);
	s = text_of(t_path(out, "dataset_info.json"));
	assert_non_null(strstr(s, "\"name\": \"pets\""));
	assert_non_null(strstr(s, "\"version\": \"2.0.1\""));
	assert_non_null(strstr(s, "\"name\": \"train\",\n      \"numBytes\""));
	assert_non_null(strstr(s, "\"shardLengths\": [\n        \"3\",\n        \"2\"\n      ]"));
	free(s);
	/* 4 shards and 3 side files, no temporary beside the dataset */
	assert_int_equal(t_count_entries(out), 7);
	assert_int_equal(t_count_entries(t_path(dir, "data/pets")), 1);
	for (size_t i = 0; i < 5; i++)
		free(train[i].bytes);
	for (size_t i = 0; i < 2; i++)
		free(test[i].bytes);
	grist_example_encoder_destroy(e);
	free(root);
	free(out);
	t_rmtree(dir);
}

static int cancel_at_second(const struct grist_convert_progress *p, void *arg)
{
	(void)p;
	return ++*(int *)arg >= 2;
}

/* A bad image names its file; every failure, and a cancel, leaves nothing at OUT and no temporary. */
static void test_imagefolder_errors(void **state)
{
	char *dir = t_mkdtemp(), *root = strdup(t_path(dir, "root")), *out = strdup(t_path(dir, "ds"));
	const char *inputs[] = { root };
	struct image good = { .rel = "train/a/good.png" }, other = { .rel = "train/b/c.png" };
	struct grist_convert_options o;
	uint8_t px[4 * 4] = { 0 }, *gray;
	size_t len;
	int calls = 0;

	(void)state;
	mkdir(root, 0755);
	grist_convert_options_init(&o);
	o.format = GRIST_CONVERT_IMAGEFOLDER;
	/* no splits */
	assert_int_equal(grist_convert(inputs, 1, out, &o, NULL), -EINVAL);
	assert_non_null(strstr(grist_last_error(), "no split folders"));
	put_image(root, &good, false, 4, 4, 1);
	/* a truncated PNG: its header reads, its pixels do not */
	put_image(root, &other, false, 16, 16, 2);
	assert_int_equal(truncate(t_path(root, "train/b/c.png"), (off_t)other.len - 30), 0);
	assert_int_equal(grist_convert(inputs, 1, out, &o, NULL), -EBADMSG);
	assert_non_null(strstr(grist_last_error(), "train/b/c.png: not an image that decodes"));
	assert_int_equal(t_count_entries(dir), 1);
	/* not an image at all */
	assert_int_equal(t_write_file(t_path(root, "train/b/c.png"), "GIF89a...", 9), 0);
	assert_int_equal(grist_convert(inputs, 1, out, &o, NULL), -EBADMSG);
	assert_non_null(strstr(grist_last_error(), "train/b/c.png: not an image that decodes"));
	/* another channel count than the first image's */
	gray = png_of(px, 4, 4, SPNG_COLOR_TYPE_GRAYSCALE, &len);
	assert_int_equal(t_write_file(t_path(root, "train/b/c.png"), gray, len), 0);
	free(gray);
	assert_int_equal(grist_convert(inputs, 1, out, &o, NULL), -EBADMSG);
	assert_non_null(strstr(grist_last_error(), "train/b/c.png: 1 channels, but"));
	assert_int_equal(t_count_entries(dir), 1);
	assert_int_equal(unlink(t_path(root, "train/b/c.png")), 0);
	/* cancelled from the progress callback */
	o.progress = cancel_at_second;
	o.progress_arg = &calls;
	assert_int_equal(grist_convert(inputs, 1, out, &o, NULL), -ECANCELED);
	assert_int_equal(t_count_entries(dir), 1);
	o.progress = NULL;
	/* OUT inside ROOT; OUT a non-empty folder; a split name TFDS's file names cannot hold; two inputs */
	assert_int_equal(grist_convert(inputs, 1, t_path(root, "x/1.0.0"), &o, NULL), -EINVAL);
	assert_non_null(strstr(grist_last_error(), "inside the input folder"));
	assert_int_equal(t_count_entries(root), 1);
	mkdir(out, 0755);
	assert_int_equal(t_write_file(t_path(out, "f"), "x", 1), 0);
	assert_int_equal(grist_convert(inputs, 1, out, &o, NULL), -EEXIST);
	assert_int_equal(unlink(t_path(out, "f")), 0);
	assert_int_equal(mkdir(t_path(root, "bad-split"), 0755), 0);
	assert_int_equal(grist_convert(inputs, 1, out, &o, NULL), -EINVAL);
	assert_non_null(strstr(grist_last_error(), "bad-split: a split name"));
	assert_int_equal(rmdir(t_path(root, "bad-split")), 0);
	{
		const char *two[] = { root, root };

		assert_int_equal(grist_convert(two, 2, out, &o, NULL), -EINVAL);
	}
	/* and then it works, into the empty folder */
	assert_int_equal(grist_convert(inputs, 1, out, &o, NULL), 0);
	assert_int_equal(t_count_entries(out), 4);
	assert_int_equal(t_count_entries(dir), 2);
	free(good.bytes);
	free(other.bytes);
	free(root);
	free(out);
	t_rmtree(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_csv_records),
		cmocka_unit_test(test_csv_errors),
		cmocka_unit_test(test_imagefolder),
		cmocka_unit_test(test_imagefolder_errors),
		cmocka_unit_test(test_image_shrink),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
