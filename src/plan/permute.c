/* Keyed bijection of [0, n): a balanced Feistel network with cycle walking. */
#include <stdint.h>

#include "common/error.h"
#include "plan/plan_internal.h"

/*
 * Design. The block is the smallest even bit width 2h >= bitlen(n - 1)
 * (at least 2), so the block domain 2^(2h) is below 4n and cycle walking
 * (re-encrypting until the value lands below n) takes fewer than 4 cipher
 * calls on average, and about 1.07 for n = 10^9. Sizing from the bit
 * length (not ceil(log2(n - 1))) is what keeps n = 2^k + 1 a bijection.
 *
 * Round function: F(x) = top h bits of mix(x ^ k), where mix multiplies
 * by an odd constant, folds the high half down and multiplies again.
 * The top bits of a 64-bit product depend on every input bit, so one
 * round already diffuses the whole half; six rounds put us well past the
 * four that Luby-Rackoff needs for a pseudo-random permutation from a
 * pseudo-random function, at 12 multiplies per block. Grain's Simon-like
 * F (rotates and an AND) is cheaper per round but diffuses slowly.
 */

#define MIX_M1 UINT64_C(0xff51afd7ed558ccd)
#define MIX_M2 UINT64_C(0xc4ceb9fe1a85ec53)

/* splitmix64's finaliser: a 64-bit bijection with full avalanche. */
uint64_t grist_plan_mix64(uint64_t x)
{
	x += UINT64_C(0x9e3779b97f4a7c15);
	x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
	return x ^ (x >> 31);
}

uint64_t grist_plan_key(uint64_t seed, uint64_t tag, uint64_t a, uint64_t b, uint64_t c)
{
	uint64_t h = grist_plan_mix64(seed ^ UINT64_C(0x6772697374706c6e)); /* "gristpln" */

	/* Each step is a bijection of h ^ input, so inputs never cancel across steps. */
	h = grist_plan_mix64(h ^ tag);
	h = grist_plan_mix64(h ^ a);
	h = grist_plan_mix64(h ^ b);
	return grist_plan_mix64(h ^ c);
}

static inline uint64_t round_f(uint64_t x, uint64_t k, uint32_t shift)
{
	uint64_t t = (x ^ k) * MIX_M1;

	t ^= t >> 32;
	t *= MIX_M2;
	return t >> shift;
}

static inline uint64_t encrypt(const struct grist_perm *p, uint64_t v)
{
	uint64_t l = v >> p->half_bits, r = v & p->half_mask;
	int i;

	for (i = 0; i < GRIST_PERM_ROUNDS; i++) {
		uint64_t t = l ^ round_f(r, p->keys[i], p->shift);

		l = r;
		r = t;
	}
	return (l << p->half_bits) | r;
}

static inline uint64_t decrypt(const struct grist_perm *p, uint64_t v)
{
	uint64_t l = v >> p->half_bits, r = v & p->half_mask;
	int i;

	for (i = GRIST_PERM_ROUNDS - 1; i >= 0; i--) {
		uint64_t t = r ^ round_f(l, p->keys[i], p->shift);

		r = l;
		l = t;
	}
	return (l << p->half_bits) | r;
}

int grist_perm_init_key(struct grist_perm *p, uint64_t n, uint64_t key)
{
	uint32_t bits;
	int i;

	if (n > GRIST_PERM_MAX_N)
		return grist_fail(-EINVAL, "permutation domain %llu exceeds 2^63",
				  (unsigned long long)n);
	/* bits = bit length of n - 1, rounded up to even, at least 2. */
	bits = n > 1 ? 64 - (uint32_t)__builtin_clzll(n - 1) : 1;
	bits = (bits + 1) & ~1u;
	p->n = n;
	p->half_bits = bits / 2;
	p->half_mask = (UINT64_C(1) << p->half_bits) - 1;
	p->shift = 64 - p->half_bits;
	for (i = 0; i < GRIST_PERM_ROUNDS; i++)
		p->keys[i] = grist_plan_mix64(key + (uint64_t)i * UINT64_C(0xd1b54a32d192ed03));
	return 0;
}

int grist_perm_init(struct grist_perm *p, uint64_t n, uint64_t seed, uint64_t epoch)
{
	return grist_perm_init_key(p, n, grist_plan_key(seed, GRIST_KEY_PERM, epoch, 0, 0));
}

uint64_t grist_perm_at(const struct grist_perm *p, uint64_t position)
{
	uint64_t v = position;

	if (p->n <= 1)
		return 0;
	/* The walk stays on the cycle through position, which contains a value < n. */
	do
		v = encrypt(p, v);
	while (v >= p->n);
	return v;
}

uint64_t grist_perm_inverse(const struct grist_perm *p, uint64_t value)
{
	uint64_t v = value;

	if (p->n <= 1)
		return 0;
	do
		v = decrypt(p, v);
	while (v >= p->n);
	return v;
}

/* Positions evaluated in lock step by grist_perm_fill(). */
#define FILL_LANES 8

int grist_perm_fill(const struct grist_perm *p, uint64_t first, size_t count, uint64_t *out)
{
	const uint64_t n = p->n;
	const uint32_t hb = p->half_bits, shift = p->shift;
	const uint64_t mask = p->half_mask;
	size_t i = 0;

	if (first > n || count > n - first)
		return grist_fail(-ERANGE, "positions [%llu, %llu) exceed permutation size %llu",
				  (unsigned long long)first,
				  (unsigned long long)first + count, (unsigned long long)n);
	if (n <= 1) {
		for (; i < count; i++)
			out[i] = 0;
		return 0;
	}
	/*
	 * One cipher call for each of FILL_LANES independent positions per
	 * round, so the multiplies of different lanes overlap; the few lanes
	 * that land outside [0, n) finish their walk one by one.
	 */
	for (; i + FILL_LANES <= count; i += FILL_LANES) {
		uint64_t l[FILL_LANES], r[FILL_LANES];
		int k, round;

		for (k = 0; k < FILL_LANES; k++) {
			uint64_t v = first + i + (uint64_t)k;

			l[k] = v >> hb;
			r[k] = v & mask;
		}
		for (round = 0; round < GRIST_PERM_ROUNDS; round++) {
			uint64_t key = p->keys[round];

			for (k = 0; k < FILL_LANES; k++) {
				uint64_t t = l[k] ^ round_f(r[k], key, shift);

				l[k] = r[k];
				r[k] = t;
			}
		}
		for (k = 0; k < FILL_LANES; k++) {
			uint64_t v = (l[k] << hb) | r[k];

			while (v >= n)
				v = encrypt(p, v);
			out[i + (size_t)k] = v;
		}
	}
	for (; i < count; i++)
		out[i] = grist_perm_at(p, first + i);
	return 0;
}
