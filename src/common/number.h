/* Numbers as every grist parser reads them: the one reading of digits and of sizes. */
#ifndef GRIST_COMMON_NUMBER_H
#define GRIST_COMMON_NUMBER_H

#include <stdbool.h>
#include <stdint.h>

/*
 * grist_parse_digits() - the decimal digits at the start of @s (at least one; no sign, no
 * space, no 0x) into *@out, *@end just past them. False on no digit or an overflow of
 * uint64_t. The size and whole-number parsers (the option table, the remote grammar) build
 * on this, so "4M" means the same thing wherever a size is taken.
 */
bool grist_parse_digits(const char *s, uint64_t *out, const char **end);

/* grist_parse_size() itself is public: grist/options.h. */

#endif
