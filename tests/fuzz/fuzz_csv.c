/*
 * libFuzzer harness: the converter's csv input (src/convert/input_csv.c) through
 * grist_convert(). Input: a spec byte (which of two features specs), then the CSV text.
 * A conversion either succeeds, leaving the output, or fails with a message and leaves
 * nothing: both are checked. Files live in /dev/shm when there is one (the writer syncs
 * every output, which tmpfs makes cheap). Seeds: tests/fuzz/make_seeds.py.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "grist/convert.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const specs[] = {
	"a:int64,b:float32,c:text",
	"a:int64[],b:float32[],c:text[]",
};

static char dir[64];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char in[96], out[96];
	const char *inputs[] = { in };
	struct grist_convert_options o;
	struct stat st;
	FILE *f;
	int ret;

	if (!size)
		return 0;
	if (!dir[0]) {
		snprintf(dir, sizeof(dir), "%s/fuzz_csv.XXXXXX", access("/dev/shm", W_OK) ? "/tmp" : "/dev/shm");
		if (!mkdtemp(dir))
			abort();
	}
	snprintf(in, sizeof(in), "%s/in.csv", dir);
	snprintf(out, sizeof(out), "%s/out.ar", dir);
	f = fopen(in, "wb");
	if (!f || fwrite(data + 1, 1, size - 1, f) != size - 1 || fclose(f))
		abort();
	grist_convert_options_init(&o);
	o.format = GRIST_CONVERT_CSV;
	o.features = specs[data[0] & 1];
	o.shards = (data[0] & 2) ? 2 : 1;
	o.writer_options = "uncompressed"; /* the parser is under test, not the codec */
	ret = grist_convert(inputs, 1, out, &o, NULL);
	if (o.shards == 2)
		snprintf(out, sizeof(out), "%s/out.ar-00000-of-00002", dir);
	if (!ret != !stat(out, &st))
		abort(); /* success must leave the output, failure nothing */
	if (ret && !grist_last_error()[0])
		abort();
	unlink(out);
	snprintf(out, sizeof(out), "%s/out.ar-00001-of-00002", dir);
	unlink(out);
	unlink(in);
	/* Per input, not at exit: libFuzzer may end the process without running atexit handlers,
	 * and each run used to leave its scratch folder behind in /dev/shm. */
	rmdir(dir);
	dir[0] = 0;
	return 0;
}
