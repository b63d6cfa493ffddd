/* A growable byte buffer: the one scratch-memory helper every stage shares. */
#ifndef GRIST_COMMON_BUF_H
#define GRIST_COMMON_BUF_H

#include <stddef.h>
#include <stdint.h>

struct grist_buf {
	uint8_t *data;
	size_t len;
	size_t cap;
};

/* Make room for at least @cap bytes; keeps contents. 0 or -ENOMEM. */
int grist_buf_reserve(struct grist_buf *b, size_t cap);
/* Append @n bytes. 0 or -ENOMEM. */
int grist_buf_append(struct grist_buf *b, const void *p, size_t n);
/* Free the memory and zero the struct. */
void grist_buf_free(struct grist_buf *b);

#endif
