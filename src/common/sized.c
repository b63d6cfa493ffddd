/* Sized structs across the ABI: read what an older or newer caller's struct holds, write what fits. */
#include <string.h>

#include "common/error.h"

int grist_sized_in(void *dst, size_t dst_size, const void *src, const char *name)
{
	const unsigned char *s = src;
	size_t size, i;

	if (!src)
		return grist_fail(-EINVAL, "struct %s: none given", name);
	memcpy(&size, src, sizeof(size)); /* every sized struct starts with its size_t size */
	if (size < sizeof(size_t))
		return grist_fail(-EINVAL, "struct %s: size %zu: initialise it with %s_init() (it sets the size)", name,
				  size, name);
	/* bytes this library does not know must be zero: a caller asking for more than it can do */
	for (i = dst_size; i < size; i++)
		if (s[i])
			return grist_fail(-E2BIG,
					  "struct %s: the caller's struct has %zu bytes, this library (grist %s) knows "
					  "%zu and byte %zu is set: it needs a newer libgrist",
					  name, size, grist_version(), dst_size, i);
	memset(dst, 0, dst_size);
	memcpy(dst, src, size < dst_size ? size : dst_size);
	/* the library's copy describes itself */
	memcpy(dst, &dst_size, sizeof(dst_size));
	return 0;
}

void grist_sized_out(void *dst, size_t dst_size, const void *src, size_t src_size)
{
	memcpy(dst, src, dst_size < src_size ? dst_size : src_size);
}
