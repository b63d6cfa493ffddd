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

/*
 * Make room for at least @need elements of @elem bytes in the array *@p of *@cap elements
 * (capacity doubles from 16); keeps contents. For scratch arrays kept between calls, so
 * steady state allocates nothing. 0 or -ENOMEM (message set).
 */
int grist_array_reserve(void **p, size_t *cap, size_t need, size_t elem);

#endif
