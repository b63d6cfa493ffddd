/* libFuzzer harness: an arbitrary file image opened, read record by record, and verified. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "grist/format.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char path[64];

static void remove_image(void)
{
	unlink(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct grist_reader *r;
	const uint8_t *rec;
	size_t len;
	uint64_t i;
	FILE *f;

	if (!path[0]) {
		snprintf(path, sizeof(path), "/tmp/grist-fuzz-%d.ar", (int)getpid());
		atexit(remove_image);
	}
	f = fopen(path, "wb");
	if (!f)
		return 0;
	fwrite(data, 1, size, f);
	fclose(f);
	const char *p = path;
	if (grist_reader_open(&p, 1, NULL, &r) == 0) {
		for (i = 0; i < grist_reader_num_records(r) && i < 100000; i++)
			if (grist_reader_read(r, i, &rec, &len))
				break;
		grist_reader_close(r);
	}
	grist_file_verify(path, NULL);
	return 0;
}
