/* The ArrayRecord footer and postscript protobufs, hand-serialized (proto2, varint fields only). */
#ifndef GRIST_FORMAT_FOOTER_H
#define GRIST_FORMAT_FOOTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

#define GRIST_POSTSCRIPT_MAGIC 0x71930e704fdae05eull

/* RiegeliPostscript. */
struct grist_postscript {
	uint64_t footer_offset;
	uint64_t magic;
};

/* RiegeliFooterMetadata.array_record_metadata. */
struct grist_footer_metadata {
	uint64_t version;
	uint64_t num_chunks;
	uint64_t num_records;
	const uint8_t *writer_options; /* points into the parsed bytes; NULL when absent */
	size_t writer_options_len;
};

/* ArrayRecordFooter: one per data chunk. */
struct grist_footer_entry {
	uint64_t chunk_offset;
	uint64_t decoded_data_size;
	uint64_t num_records;
	bool has_chunk_offset;
};

/* Parse a serialized postscript; both fields are required. 0 or -EBADMSG (no message). */
int grist_postscript_parse(const uint8_t *p, size_t len, struct grist_postscript *ps);
/* Parse the footer metadata record; the array_record_metadata field and its version are required. */
int grist_footer_metadata_parse(const uint8_t *p, size_t len, struct grist_footer_metadata *m);
/* Parse one footer entry. Missing fields read as 0 (chunk_offset's presence is reported). */
int grist_footer_entry_parse(const uint8_t *p, size_t len, struct grist_footer_entry *e);

/* Append serialized messages to @out. 0 or -ENOMEM. */
int grist_postscript_append(struct grist_buf *out, const struct grist_postscript *ps);
int grist_footer_metadata_append(struct grist_buf *out, const struct grist_footer_metadata *m);
int grist_footer_entry_append(struct grist_buf *out, const struct grist_footer_entry *e);

#endif
