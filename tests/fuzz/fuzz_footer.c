/*
 * libFuzzer harness: the footer and postscript protos and the writer options grammar.
 * The first byte picks the parser (0 postscript, 1 footer metadata, 2 footer entry,
 * 3 writer options); the rest is its input. Parsed options must format to text that
 * parses back to the same options.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "format/footer.h"
#include "format/options.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void options(const uint8_t *p, size_t n)
{
	struct grist_writer_options o, again;
	char text[512], *s = malloc(n + 1);

	if (!s)
		return;
	memcpy(s, p, n);
	s[n] = 0;
	if (grist_writer_options_parse(s, &o) == 0) {
		if (grist_writer_options_format(&o, text, sizeof(text)) >= sizeof(text))
			__builtin_trap();
		if (grist_writer_options_parse(text, &again) || again.group_size != o.group_size ||
		    again.compression != o.compression || again.level != o.level ||
		    again.pad_to_block_boundary != o.pad_to_block_boundary)
			__builtin_trap();
	}
	free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct grist_postscript ps;
	struct grist_footer_metadata m;
	struct grist_footer_entry e;

	if (size < 1)
		return 0;
	switch (data[0] & 3) {
	case 0:
		grist_postscript_parse(data + 1, size - 1, &ps);
		break;
	case 1:
		if (grist_footer_metadata_parse(data + 1, size - 1, &m) == 0 && m.writer_options &&
		    (m.writer_options < data + 1 || m.writer_options + m.writer_options_len > data + size))
			__builtin_trap();
		break;
	case 2:
		grist_footer_entry_parse(data + 1, size - 1, &e);
		break;
	default:
		options(data + 1, size - 1);
		break;
	}
	return 0;
}
