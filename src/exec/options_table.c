/*
 * The loader's options, once: name, type, bounds, default and help, and the one parser
 * that the CLI, the Python package and C callers share (grist/options.h). The bounds are
 * the engine's own limits, so a value this table accepts never fails later for its range.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/error.h"
#include "common/number.h"
#include "exec/options_table.h"
#include "grist/options.h"
#include "grist/plan.h"
#include "grist/remote.h"
#include "grist/version.h"
#include "io/remote.h"

_Static_assert(sizeof(size_t) == sizeof(uint64_t), "sizes are stored as 64-bit fields");

struct entry {
	struct grist_option pub;
	/* A plain field (UINT, SIZE, BOOL, CHOICE with values): where it lives and how wide it is; else an apply. */
	size_t offset, width;
	int (*apply)(struct grist_loader_config *c, const struct entry *e, const char *v);
	size_t end; /* the byte after the last field it sets: an older caller's struct must hold it */
	const int *values; /* CHOICE without an apply: the value stored for each word, in order */
};

#define FIELD(f) offsetof(struct grist_loader_config, f), sizeof(((struct grist_loader_config *)0)->f)
#define END(f) (offsetof(struct grist_loader_config, f) + sizeof(((struct grist_loader_config *)0)->f))

static int apply_shuffle(struct grist_loader_config *c, const struct entry *e, const char *v);
static int apply_shard(struct grist_loader_config *c, const struct entry *e, const char *v);
static int apply_layout(struct grist_loader_config *c, const struct entry *e, const char *v);
static int apply_pack(struct grist_loader_config *c, const struct entry *e, const char *v);
static int apply_pack_bos(struct grist_loader_config *c, const struct entry *e, const char *v);
static int apply_remote(struct grist_loader_config *c, const struct entry *e, const char *v);

#define U(n, lo, hi, f, def, h) { { n, GRIST_OPTION_UINT, lo, hi, NULL, def, h }, FIELD(f), NULL, END(f), NULL }
#define SZ(n, lo, hi, f, def, h) { { n, GRIST_OPTION_SIZE, lo, hi, NULL, def, h }, FIELD(f), NULL, END(f), NULL }
#define B(n, f, def, h) { { n, GRIST_OPTION_BOOL, 0, 1, NULL, def, h }, FIELD(f), NULL, END(f), NULL }
#define CH(n, words, fn, end, def, h) { { n, GRIST_OPTION_CHOICE, 0, 0, words, def, h }, 0, 0, fn, end, NULL }
/* a word of @words stores the matching entry of @vals in field @f */
#define WORD(n, words, vals, f, def, h) \
	{ { n, GRIST_OPTION_CHOICE, 0, 0, words, def, h }, FIELD(f), NULL, END(f), vals }

static const int shard_modes[] = { GRIST_SHARD_STRIDED, GRIST_SHARD_CONTIGUOUS };
static const int granularities[] = { GRIST_GRANULARITY_RECORD, GRIST_GRANULARITY_CHUNK };
static const int token_widths[] = { 1, 2, 4 };
static const int engines[] = { GRIST_ENGINE_URING, GRIST_ENGINE_PREAD, GRIST_ENGINE_REF };
static const int read_modes[] = { GRIST_READ_AUTO, GRIST_READ_BUFFERED, GRIST_READ_DIRECT, GRIST_READ_MMAP };
static const int verifies[] = { GRIST_VERIFY_ALL, GRIST_VERIFY_HEADERS };
/* a field of cfg.remote, parsed by grist_remote_options_parse() (grist/remote.h) under its own name */
#define RM(n, type, lo, hi, def, h) { { n, type, lo, hi, NULL, def, h }, 0, 0, apply_remote, END(remote), NULL }
#define TX(n, grammar, fn, end, def, h) { { n, GRIST_OPTION_TEXT, 0, 0, grammar, def, h }, 0, 0, fn, end, NULL }

static const struct entry table[] = {
	/* what is delivered */
	U("batch_size", 1, 1u << 24, batch_size, "", "records per batch (packing: rows per batch)"),
	U("seed", 0, UINT64_MAX, seed, "0", "the shuffle seed"),
	U("epochs", 0, UINT64_MAX, epochs, "0", "passes over the data; 0 = unbounded"),
	{ { "shuffle", GRIST_OPTION_BOOL, 0, 1, NULL, "true", "false: every epoch in index order" }, 0, 0,
	  apply_shuffle, END(no_shuffle), NULL },
	B("same_order", same_order_each_epoch, "false", "one permutation for every epoch"),
	TX("shard", "I/K with 0 <= I < K", apply_shard, END(shard_count), "0/1",
	   "deliver shard I of K (sets shard_index and shard_count)"),
	U("shard_index", 0, UINT64_MAX - 1, shard_index, "0", "I of shard I/K"),
	U("shard_count", 1, UINT64_MAX, shard_count, "1", "K of shard I/K"),
	WORD("shard_mode", "strided, contiguous", shard_modes, shard_mode, "strided",
	   "strided: positions I, I+K, ...; contiguous: Grain's split into K runs"),
	WORD("granularity", "record, chunk", granularities, granularity, "record",
	   "shuffle records, or chunks (each chunk read and decoded once per epoch)"),
	U("window", 1, 65536, window_chunks, GRIST_STRINGIFY(GRIST_PLAN_DEFAULT_WINDOW), "chunk granularity: chunks shuffled together"),
	B("drop_remainder", drop_remainder, "false", "drop a short final batch"),
	CH("layout", "ragged, fixed, padded, fixed:N, padded:N", apply_layout, END(record_bytes), "ragged",
	   "ragged: records back to back; fixed/padded: rows of record_bytes (padded: pad_value fills)"),
	SZ("record_bytes", 1, 1u << 30, record_bytes, "", "fixed and padded layouts: bytes per row"),
	U("pad_value", 0, 255, pad_value, "0", "padded layout: the pad byte"),
	CH("pack", "none, first-fit, best-fit, concat-split, first-fit:L[:BINS], best-fit:L[:BINS], concat-split:L",
	   apply_pack, END(pack_bins),
	   "none", "pack token records into rows of pack_length tokens (Grain's packers)"),
	U("pack_length", 1, 1u << 24, pack_length, "", "packing: tokens per row"),
	U("pack_bins", 1, 1u << 20, pack_bins, "batch_size", "first-fit and best-fit packing: rows open at once"),
	U("pack_piece", 1, 1u << 24, pack_piece, "", "packing: cut each record into pieces of this many tokens first "
	  "(MaxText's TokenizeAndChunk)"),
	WORD("token_bytes", "1, 2, 4", token_widths, pack_token_bytes, "",
	   "packing: bytes per little-endian token"),
	/* any id is a token, 0 too: set, it turns the replacement on (pack_bos), unset leaves it off */
	{ { "pack_bos", GRIST_OPTION_UINT, 0, UINT32_MAX, NULL, "none",
	    "concat-split: the first token of every segment of a row becomes this BOS id (Grain's "
	    "BOSHandling.REPLACE_FIRST_TOKEN_WITH_BOS)" }, 0, 0, apply_pack_bos, END(pack_bos_id), NULL },
	/* how it is executed (never changes the output) */
	WORD("engine", "uring, pread, ref", engines, engine, "uring",
	   "io_uring (falls back to pread), a pread pool, or the one-thread reference"),
	WORD("io", "auto, buffered, direct, mmap", read_modes, read_mode, "auto",
	   "how reads reach the disk; auto maps cached files and reads large ones direct"),
	U("threads", 1, 256, threads, "CPUs allowed", "decode threads"),
	U("queue_depth", 1, GRIST_IO_MAX_QUEUE_DEPTH, queue_depth, GRIST_STRINGIFY(GRIST_DEFAULT_QUEUE_DEPTH), "reads in flight per ring"),
	U("prefetch", 1, GRIST_MAX_PREFETCH, prefetch, GRIST_STRINGIFY(GRIST_DEFAULT_PREFETCH),
	  "batches assembled ahead, and the most a caller may hold"),
	SZ("read_ahead", 4096, (uint64_t)1 << 40, read_ahead_bytes, "per thread 2 x queue_depth x largest chunk, at most "
	   GRIST_STRINGIFY(GRIST_DEFAULT_READ_AHEAD_MAX_MIB) "MiB or, for URLs, the thread's share of 256MiB if larger",
	   "read buffers of all threads: how far reads run ahead of decoding"),
	SZ("assembly_bytes", 1, (uint64_t)1 << 40, assembly_bytes, "512MiB, 64MiB for URLs at chunk granularity, at least "
	   "a batch per thread, with a map prefetch + 2 x threads batches",
	   "batches assembled ahead of the consumer and held by the caller, in bytes; set, it holds (at least one "
	   "batch), costing speed where it leaves threads idle"),
	SZ("max_batch_bytes", 1, (uint64_t)1 << 40, max_batch_bytes, GRIST_STRINGIFY(GRIST_DEFAULT_MAX_BATCH_MIB) "MiB",
	   "no batch may be larger"),
	/* checking: a sound file reads the same either way (grist/format.h, docs/tuning.md) */
	WORD("verify", "all, headers", verifies, verify, "all",
	   "all: every hash the format has; headers: not the chunks' data hashes, so a flipped value "
	   "byte of an uncompressed chunk goes through (for data checked with grist verify)"),
	/* URLs (grist/remote.h): this loader's GETs; unset, the process-wide options */
	RM("remote_timeout_ms", GRIST_OPTION_UINT, 1, 3600000, GRIST_STRINGIFY(GRIST_REMOTE_DEFAULT_TIMEOUT_MS), "URLs: a GET below 1 KiB/s this long has stalled (per attempt; at most 10x in all)"),
	RM("remote_connect_timeout_ms", GRIST_OPTION_UINT, 1, 600000, GRIST_STRINGIFY(GRIST_REMOTE_DEFAULT_CONNECT_TIMEOUT_MS), "URLs: connecting, per attempt"),
	RM("remote_retries", GRIST_OPTION_UINT, 0, 100, GRIST_STRINGIFY(GRIST_REMOTE_DEFAULT_RETRIES), "URLs: attempts after the first"),
	RM("remote_backoff_ms", GRIST_OPTION_UINT, 1, 600000, GRIST_STRINGIFY(GRIST_REMOTE_DEFAULT_BACKOFF_MS), "URLs: the first retry's wait cap, doubling"),
	RM("remote_backoff_max_ms", GRIST_OPTION_UINT, 1, 600000, GRIST_STRINGIFY(GRIST_REMOTE_DEFAULT_BACKOFF_MAX_MS), "URLs: the cap on one wait"),
	RM("remote_coalesce", GRIST_OPTION_SIZE, 0, (uint64_t)1 << 30, GRIST_STRINGIFY(GRIST_REMOTE_DEFAULT_COALESCE_MIB) "MiB",
	   "URLs: reads of one object closer than this share one GET"),
	RM("remote_split", GRIST_OPTION_SIZE, 4096, (uint64_t)1 << 30, GRIST_STRINGIFY(GRIST_REMOTE_DEFAULT_SPLIT_MIB) "MiB", "URLs: no GET is longer"),
	RM("remote_inflight", GRIST_OPTION_UINT, 1, 4096, GRIST_STRINGIFY(GRIST_REMOTE_DEFAULT_INFLIGHT),
	   "URLs: the hard cap on GETs in flight per endpoint, for the whole process (the budget follows rtt x bandwidth)"),
	RM("remote_inflight_min", GRIST_OPTION_UINT, 1, 4096, GRIST_STRINGIFY(GRIST_REMOTE_DEFAULT_INFLIGHT_MIN),
	   "URLs: GETs always allowed in flight; = remote_inflight pins the depth"),
	RM("remote_redirects", GRIST_OPTION_UINT, 1, 50, GRIST_STRINGIFY(GRIST_REMOTE_DEFAULT_REDIRECTS),
	   "URLs: HTTP redirects followed per request (a loop is an error)"),
};

#define NUM_OPTIONS (sizeof(table) / sizeof(table[0]))

const struct grist_option *grist_loader_option_at(size_t i)
{
	return i < NUM_OPTIONS ? &table[i].pub : NULL;
}

/* Option names compare with '-' and '_' alike, so --queue-depth finds queue_depth. */
static bool same_name(const char *a, const char *b)
{
	for (; *a && *b; a++, b++)
		if (*a != *b && !((*a == '-' || *a == '_') && (*b == '-' || *b == '_')))
			return false;
	return *a == *b;
}

static const struct entry *find(const char *name)
{
	size_t i;

	for (i = 0; name && i < NUM_OPTIONS; i++)
		if (same_name(name, table[i].pub.name))
			return &table[i];
	return NULL;
}

const struct grist_option *grist_loader_option_find(const char *name)
{
	const struct entry *e = find(name);

	return e ? &e->pub : NULL;
}

static bool parse_whole(const char *s, uint64_t *out)
{
	const char *end;

	return grist_parse_digits(s, out, &end) && !*end;
}

/* "65536" as "64KiB": the bounds read the way the values may be written. */
static const char *size_text(uint64_t v, char *buf, size_t len)
{
	static const char *const units[] = { "", "KiB", "MiB", "GiB", "TiB" };
	int k = 0;

	while (k < 4 && v && v % 1024 == 0) {
		v /= 1024;
		k++;
	}
	snprintf(buf, len, "%llu%s", (unsigned long long)v, units[k]);
	return buf;
}

static int refuse(const struct entry *e, const char *v)
{
	const struct grist_option *o = &e->pub;
	char lo[32], hi[32];

	switch (o->type) {
	case GRIST_OPTION_UINT:
		return grist_fail(-EINVAL, "%s: '%s' is not a whole number in %llu..%llu", o->name, v,
				  (unsigned long long)o->min, (unsigned long long)o->max);
	case GRIST_OPTION_SIZE:
		return grist_fail(-EINVAL, "%s: '%s' is not a size in %s..%s (bytes, or with K, M, G, T or KiB, MiB, "
				  "GiB, TiB: powers of 1024)", o->name, v, size_text(o->min, lo, sizeof(lo)),
				  size_text(o->max, hi, sizeof(hi)));
	case GRIST_OPTION_BOOL:
		return grist_fail(-EINVAL, "%s: '%s' is not true or false", o->name, v);
	case GRIST_OPTION_CHOICE:
		return grist_fail(-EINVAL, "%s: '%s' is not one of %s", o->name, v, o->choices);
	case GRIST_OPTION_TEXT:
	default:
		return grist_fail(-EINVAL, "%s: '%s' is not %s", o->name, v, o->choices);
	}
}

static bool parse_bool(const char *v, bool *out)
{
	static const char *const yes[] = { "true", "1", "yes", "on" }, *const no[] = { "false", "0", "no", "off" };
	size_t i;

	for (i = 0; i < 4; i++) {
		if (!strcasecmp(v, yes[i]) || !strcasecmp(v, no[i])) {
			*out = !strcasecmp(v, yes[i]);
			return true;
		}
	}
	return false;
}

/* A number option's value, checked against its bounds. */
static bool number(const struct entry *e, const char *v, uint64_t *out)
{
	uint64_t x;

	if (e->pub.type == GRIST_OPTION_SIZE ? grist_parse_size(v, &x) != 0 : !parse_whole(v, &x))
		return false;
	if (x < e->pub.min || x > e->pub.max)
		return false;
	*out = x;
	return true;
}

static void store(struct grist_loader_config *c, size_t offset, size_t width, uint64_t x)
{
	uint8_t *p = (uint8_t *)c + offset, b = (uint8_t)x;
	unsigned u = (unsigned)x;

	if (width == 1)
		memcpy(p, &b, 1);
	else if (width == sizeof(unsigned))
		memcpy(p, &u, sizeof(u));
	else
		memcpy(p, &x, sizeof(x));
}

/* The position of @v in the comma-separated @words, or -1. */
static int word_index(const char *words, const char *v)
{
	size_t n = strlen(v);
	const char *p = words;
	int i = 0;

	while (*p) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);

		if (len == n && !strncmp(p, v, n))
			return i;
		if (!comma)
			break;
		p = comma + 1;
		while (*p == ' ')
			p++;
		i++;
	}
	return -1;
}

static int apply_shuffle(struct grist_loader_config *c, const struct entry *e, const char *v)
{
	bool on;

	if (!parse_bool(v, &on))
		return refuse(e, v);
	c->no_shuffle = !on;
	return 0;
}

static int apply_shard(struct grist_loader_config *c, const struct entry *e, const char *v)
{
	const char *end;
	uint64_t i, k;

	if (!grist_parse_digits(v, &i, &end) || *end != '/' || !parse_whole(end + 1, &k) || k == 0 || i >= k)
		return refuse(e, v);
	c->shard_index = i;
	c->shard_count = k;
	return 0;
}

/* "ragged", "fixed", "padded" (record_bytes apart), or "fixed:N" / "padded:N" (both at once). */
static int apply_layout(struct grist_loader_config *c, const struct entry *e, const char *v)
{
	static const enum grist_batch_layout kinds[] = { GRIST_LAYOUT_RAGGED, GRIST_LAYOUT_FIXED, GRIST_LAYOUT_PADDED };
	const char *colon = strchr(v, ':');
	const struct entry *rb = find("record_bytes");
	char head[16];
	uint64_t n;
	int i;

	if (!colon) {
		i = word_index("ragged, fixed, padded", v);
		if (i < 0)
			return refuse(e, v);
		c->layout = kinds[i];
		if (i == 0)
			c->record_bytes = 0;
		return 0;
	}
	if ((size_t)(colon - v) >= sizeof(head))
		return refuse(e, v);
	memcpy(head, v, (size_t)(colon - v));
	head[colon - v] = '\0';
	i = word_index("fixed, padded", head);
	if (i < 0)
		return refuse(e, v);
	if (!number(rb, colon + 1, &n))
		return refuse(rb, colon + 1);
	c->layout = kinds[i + 1];
	c->record_bytes = (size_t)n;
	return 0;
}

/* "none", "first-fit", "best-fit", "concat-split", or with the sizes: "first-fit:L[:BINS]", "best-fit:L[:BINS]",
 * "concat-split:L". */
static int apply_pack(struct grist_loader_config *c, const struct entry *e, const char *v)
{
	static const enum grist_pack_mode modes[] = { GRIST_PACK_NONE, GRIST_PACK_FIRST_FIT, GRIST_PACK_BEST_FIT,
						      GRIST_PACK_CONCAT_SPLIT };
	const struct entry *len_e = find("pack_length"), *bins_e = find("pack_bins");
	char buf[128], *f[4], *save = NULL, *tok;
	uint64_t length = 0, bins = 0;
	size_t n = 0;
	int i;

	if (snprintf(buf, sizeof(buf), "%s", v) >= (int)sizeof(buf))
		return refuse(e, v);
	for (tok = strtok_r(buf, ":", &save); tok && n < 4; tok = strtok_r(NULL, ":", &save))
		f[n++] = tok;
	i = n ? word_index("none, first-fit, best-fit, concat-split", f[0]) : -1;
	if (i < 0 || n > (i == 1 || i == 2 ? 3u : i == 3 ? 2u : 1u))
		return refuse(e, v);
	if (n >= 2 && !number(len_e, f[1], &length))
		return refuse(len_e, f[1]);
	if (n == 3 && !number(bins_e, f[2], &bins))
		return refuse(bins_e, f[2]);
	c->pack = modes[i];
	if (n >= 2)
		c->pack_length = (size_t)length;
	if (n == 3)
		c->pack_bins = (size_t)bins;
	return 0;
}

/* "pack_bos": the id, and the flag that says one is set (0 is a token id like any other). */
static int apply_pack_bos(struct grist_loader_config *c, const struct entry *e, const char *v)
{
	uint64_t x;

	if (!number(e, v, &x))
		return refuse(e, v);
	c->pack_bos = true;
	c->pack_bos_id = (uint32_t)x;
	return 0;
}

/*
 * The remote_* options: the first one fills cfg.remote with the options in force, then
 * the value goes through grist_remote_options_parse(), the remote options' one parser.
 */
static int apply_remote(struct grist_loader_config *c, const struct entry *e, const char *v)
{
	char text[96];
	uint64_t x;

	if (!number(e, v, &x))
		return refuse(e, v);
	if (!c->remote.size)
		grist_remote_get_options(&c->remote);
	/* the remote grammar's names: timeout_ms (the request's), connect_timeout_ms, retries, ... */
	snprintf(text, sizeof(text), "%s:%llu", e->pub.name + strlen("remote_"), (unsigned long long)x);
	return grist_remote_options_parse(text, &c->remote);
}

int grist_loader_config_set(struct grist_loader_config *cfg, const char *name, const char *value)
{
	const struct entry *e = find(name);
	struct grist_loader_config full;
	uint64_t x;
	bool on;
	int ret;

	if (!cfg || !name || !value)
		return grist_fail(-EINVAL, "grist_loader_config_set: no configuration, name or value");
	if (!e)
		return grist_fail(-EINVAL, "'%s' is not a loader option", name);
	ret = grist_sized_in(&full, sizeof(full), cfg, "grist_loader_config");
	if (ret)
		return ret;
	if (e->end > cfg->size)
		return grist_fail(-EINVAL, "%s: this option is newer than the caller's struct grist_loader_config "
				  "(%zu bytes; it needs %zu): rebuild against grist %s", e->pub.name, cfg->size, e->end,
				  grist_version());
	if (e->apply) {
		ret = e->apply(&full, e, value);
		if (ret)
			return ret;
	} else if (e->values) {
		int i = word_index(e->pub.choices, value);

		if (i < 0)
			return refuse(e, value);
		store(&full, e->offset, e->width, (uint64_t)e->values[i]);
	} else if (e->pub.type == GRIST_OPTION_BOOL) {
		if (!parse_bool(value, &on))
			return refuse(e, value);
		store(&full, e->offset, e->width, on);
	} else {
		if (!number(e, value, &x))
			return refuse(e, value);
		store(&full, e->offset, e->width, x);
	}
	/* back into the caller's struct: its own size, which is at least e->end */
	full.size = cfg->size;
	memcpy(cfg, &full, cfg->size < sizeof(full) ? cfg->size : sizeof(full));
	return 0;
}

int grist_loader_options_check(const struct grist_loader_config *c)
{
	size_t i;

	/* numbers set as fields rather than by name: 0 means the default, anything else the table's range */
	for (i = 0; i < NUM_OPTIONS; i++) {
		const struct entry *e = &table[i];
		uint64_t x = 0;

		if (e->apply || e->values || e->pub.type == GRIST_OPTION_BOOL || e->width == 1)
			continue;
		if (e->width == sizeof(unsigned)) {
			unsigned u;

			memcpy(&u, (const uint8_t *)c + e->offset, sizeof(u));
			x = u;
		} else {
			memcpy(&x, (const uint8_t *)c + e->offset, sizeof(x));
		}
		if (x && (x < e->pub.min || x > e->pub.max))
			return grist_fail(-EINVAL, "loader: %s %llu is outside %llu..%llu", e->pub.name,
					  (unsigned long long)x, (unsigned long long)e->pub.min,
					  (unsigned long long)e->pub.max);
	}
	return 0;
}
