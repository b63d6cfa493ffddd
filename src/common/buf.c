/* Growable byte buffer; capacity doubles so appends are amortised O(1). */
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/error.h"

int grist_buf_reserve(struct grist_buf *b, size_t cap)
{
	size_t ncap;
	uint8_t *p;

	if (cap <= b->cap)
		return 0;
	ncap = b->cap ? b->cap : 64;
	while (ncap < cap) {
		if (ncap > SIZE_MAX / 2) {
			ncap = cap;
			break;
		}
		ncap *= 2;
	}
	p = realloc(b->data, ncap);
	if (!p)
		return grist_fail(-ENOMEM, "cannot allocate %zu bytes", ncap);
	b->data = p;
	b->cap = ncap;
	return 0;
}

int grist_buf_append(struct grist_buf *b, const void *p, size_t n)
{
	int ret;

	if (n > SIZE_MAX - b->len)
		return grist_fail(-ENOMEM, "buffer size overflow");
	ret = grist_buf_reserve(b, b->len + n);
	if (ret)
		return ret;
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	return 0;
}

void grist_buf_free(struct grist_buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

int grist_array_reserve(void **p, size_t *cap, size_t need, size_t elem)
{
	size_t ncap = *cap ? *cap : 16;
	void *np;

	if (need <= *cap)
		return 0;
	while (ncap < need)
		ncap = ncap > SIZE_MAX / 2 ? need : ncap * 2;
	if (elem && ncap > SIZE_MAX / elem)
		return grist_fail(-ENOMEM, "cannot allocate %zu entries of %zu bytes", ncap, elem);
	np = realloc(*p, ncap * elem);
	if (!np)
		return grist_fail(-ENOMEM, "cannot allocate %zu entries of %zu bytes", ncap, elem);
	*p = np;
	*cap = ncap;
	return 0;
}
