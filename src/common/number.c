/* The one reading of digits and of sizes (K, M, G, T and KiB..TiB, powers of 1024). */
#include <errno.h>
#include <string.h>

#include "common/number.h"
#include "grist/options.h"

bool grist_parse_digits(const char *s, uint64_t *out, const char **end)
{
	uint64_t v = 0;

	if (*s < '0' || *s > '9')
		return false;
	for (; *s >= '0' && *s <= '9'; s++) {
		if (v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
			return false;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*out = v;
	*end = s;
	return true;
}

/*
 * Decimal units (kB, MB) are refused rather than guessed: fio and dd read K as 1024, and a
 * read-ahead off by 2.4% is a surprise nobody asks for.
 */
GRIST_API int grist_parse_size(const char *s, uint64_t *out)
{
	static const char units[] = "KMGT";
	const char *end, *u;
	uint64_t v, mul = 1;

	if (!s || !grist_parse_digits(s, &v, &end))
		return -EINVAL;
	if (*end) {
		u = strchr(units, end[0] >= 'a' ? end[0] - ('a' - 'A') : end[0]);
		if (!u || !*u || !(end[1] == '\0' || !strcmp(end + 1, "iB")))
			return -EINVAL;
		mul = (uint64_t)1 << (10 * (u - units + 1));
	}
	if (v > UINT64_MAX / mul)
		return -EINVAL;
	*out = v * mul;
	return 0;
}
