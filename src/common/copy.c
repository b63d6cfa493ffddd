/* Streaming copies: rows written once and read later by another core or a device. */
#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "common/copy.h"

void grist_copy_streaming(void *to, const void *from, size_t len)
{
	uint8_t *dst = to;
	const uint8_t *src = from;

#if defined(__SSE2__)
	if (len >= 512) {
		size_t head = (16 - ((uintptr_t)dst & 15)) & 15;

		memcpy(dst, src, head);
		dst += head;
		src += head;
		len -= head;
		for (; len >= 64; len -= 64, dst += 64, src += 64) {
			__m128i a = _mm_loadu_si128((const __m128i *)src);
			__m128i b = _mm_loadu_si128((const __m128i *)(src + 16));
			__m128i c = _mm_loadu_si128((const __m128i *)(src + 32));
			__m128i d = _mm_loadu_si128((const __m128i *)(src + 48));

			_mm_stream_si128((__m128i *)dst, a);
			_mm_stream_si128((__m128i *)(dst + 16), b);
			_mm_stream_si128((__m128i *)(dst + 32), c);
			_mm_stream_si128((__m128i *)(dst + 48), d);
		}
	}
#endif
	memcpy(dst, src, len);
}

void grist_copy_streaming_done(void)
{
#if defined(__SSE2__)
	_mm_sfence();
#endif
}
