/* Writer options: parsing the official grammar and reproducing Options::ToString(). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/codec.h"
#include "common/cpus.h"
#include "common/error.h"
#include "format/options.h"

enum {
	OPT_GROUP_SIZE = 1 << 0,
	OPT_MAX_PARALLELISM = 1 << 1,
	OPT_SATURATION = 1 << 2,
	OPT_TRANSPOSE = 1 << 3,
	OPT_BUCKET = 1 << 4,
	OPT_WINDOW_LOG = 1 << 5,
	OPT_PAD = 1 << 6,
	OPT_DEFAULT = 1 << 7,
	OPT_COMPRESSION = 1 << 8,
};

/* Strict decimal with optional sign, as the official parser accepts ("+3", "010"). */
static bool parse_int(const char *s, long long lo, long long hi, long long *out)
{
	long long v;
	char *end;

	if (!*s || !(*s == '+' || *s == '-' || (*s >= '0' && *s <= '9')))
		return false;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || *end || v < lo || v > hi)
		return false;
	*out = v;
	return true;
}

static int parse_bool(const char *key, const char *val, bool bare_value, bool *out)
{
	if (!val) {
		*out = bare_value;
		return 0;
	}
	if (!strcmp(val, "true"))
		*out = true;
	else if (!strcmp(val, "false"))
		*out = false;
	else
		return grist_fail(-EINVAL, "option %s: invalid value '%s', expected true or false", key, val);
	return 0;
}

static int parse_item(char *item, struct grist_writer_options *o, unsigned *seen, const char **comp_name)
{
	char *val = strchr(item, ':');
	const char *key = item;
	long long v = 0;
	unsigned bit;
	bool b;
	int ret;

	if (val)
		*val++ = '\0';
	if (!strcmp(key, "default"))
		bit = OPT_DEFAULT;
	else if (!strcmp(key, "group_size"))
		bit = OPT_GROUP_SIZE;
	else if (!strcmp(key, "max_parallelism"))
		bit = OPT_MAX_PARALLELISM;
	else if (!strcmp(key, "saturation_delay_ms"))
		bit = OPT_SATURATION;
	else if (!strcmp(key, "transpose"))
		bit = OPT_TRANSPOSE;
	else if (!strcmp(key, "transpose_bucket_size"))
		bit = OPT_BUCKET;
	else if (!strcmp(key, "window_log"))
		bit = OPT_WINDOW_LOG;
	else if (!strcmp(key, "pad_to_block_boundary"))
		bit = OPT_PAD;
	else if (!strcmp(key, "uncompressed") || !strcmp(key, "zstd") || !strcmp(key, "brotli") ||
		 !strcmp(key, "snappy"))
		bit = OPT_COMPRESSION;
	else
		return grist_fail(-EINVAL, "unknown writer option '%s' (valid: default, group_size, "
				  "max_parallelism, saturation_delay_ms, transpose, transpose_bucket_size, "
				  "uncompressed, brotli, zstd, snappy, window_log, pad_to_block_boundary)", key);
	if (bit == OPT_COMPRESSION && (*seen & OPT_COMPRESSION))
		return grist_fail(-EINVAL, "option %s conflicts with option %s", key, *comp_name);
	if (*seen & bit)
		return grist_fail(-EINVAL, "option %s is present more than once", key);
	*seen |= bit;

	switch (bit) {
	case OPT_DEFAULT:
		if (val)
			return grist_fail(-EINVAL, "option default takes no value");
		return 0;
	case OPT_GROUP_SIZE:
		if (!val || !parse_int(val, 1, 2147483647, &v))
			return grist_fail(-EINVAL, "option group_size: invalid value '%s', expected 1..2147483647",
					  val ? val : "");
		o->group_size = (uint64_t)v;
		return 0;
	case OPT_MAX_PARALLELISM:
		/*
		 * The number of chunks compressed at once. The stored text still says 1:
		 * that is what the official writer stores without a C++ thread pool.
		 */
		if (!val || (strcmp(val, "auto") && !parse_int(val, 1, 2147483647, &v)))
			return grist_fail(-EINVAL, "option max_parallelism: invalid value '%s', expected auto or 1..2147483647",
					  val ? val : "");
		if (!strcmp(val, "auto"))
			v = (int)grist_cpus_allowed();
		/* More threads than this only buys memory (2 chunks each): no machine has the cores. */
		o->max_parallelism = v > GRIST_WRITER_MAX_PARALLELISM ? GRIST_WRITER_MAX_PARALLELISM : (unsigned)v;
		return 0;
	case OPT_SATURATION:
		if (!val || !parse_int(val, 0, 2147483647, &v))
			return grist_fail(-EINVAL, "option saturation_delay_ms: invalid value '%s'", val ? val : "");
		return 0;
	case OPT_BUCKET:
		if (!val || (strcmp(val, "auto") && !parse_int(val, 0, 2147483647, &v)))
			return grist_fail(-EINVAL, "option transpose_bucket_size: invalid value '%s'", val ? val : "");
		return 0;
	case OPT_TRANSPOSE:
		ret = parse_bool(key, val, true, &b);
		if (ret)
			return ret;
		if (b)
			return grist_fail(-EINVAL, "option transpose:true is not supported: grist writes and reads simple chunks only");
		return 0;
	case OPT_PAD:
		/* The official parser reads the bare keyword as false (since v0.8.4). */
		return parse_bool(key, val, false, &o->pad_to_block_boundary);
	case OPT_WINDOW_LOG:
		if (!val || (strcmp(val, "auto") && !parse_int(val, 10, 31, &v)))
			return grist_fail(-EINVAL, "option window_log: invalid value '%s', expected auto or 10..31",
					  val ? val : "");
		o->window_log = strcmp(val, "auto") ? (int)v : 0;
		return 0;
	default:
		break;
	}
	*comp_name = !strcmp(key, "uncompressed") ? "uncompressed" : !strcmp(key, "zstd") ? "zstd" :
		     !strcmp(key, "brotli") ? "brotli" : "snappy";
	if (!strcmp(key, "uncompressed")) {
		if (val && *val)
			return grist_fail(-EINVAL, "option uncompressed takes no value");
		o->compression = GRIST_CODEC_NONE;
		return 0;
	}
	if (!strcmp(key, "snappy")) {
		/* The official grammar takes a level 1..2 here, which the snappy format ignores. */
		if (val && *val && !parse_int(val, 1, 2, &v))
			return grist_fail(-EINVAL, "option snappy: invalid value '%s', expected nothing or 1..2", val);
		o->compression = GRIST_CODEC_SNAPPY;
		return 0;
	}
	if (!strcmp(key, "zstd")) {
		o->compression = GRIST_CODEC_ZSTD;
		o->level = 3;
		if (val && *val && !parse_int(val, -131072, 22, &v))
			return grist_fail(-EINVAL, "option zstd: invalid value '%s', expected -131072..22", val);
	} else {
		o->compression = GRIST_CODEC_BROTLI;
		o->level = 6;
		if (val && *val && !parse_int(val, 0, 11, &v))
			return grist_fail(-EINVAL, "option brotli: invalid value '%s', expected 0..11", val);
	}
	if (val && *val)
		o->level = (int)v;
	return 0;
}

int grist_writer_options_parse(const char *text, struct grist_writer_options *o)
{
	const char *comp_name = NULL;
	unsigned seen = 0;
	char *copy, *item, *save = NULL;
	int ret = 0;

	memset(o, 0, sizeof(*o));
	o->group_size = 1;
	o->compression = GRIST_CODEC_ZSTD;
	o->level = 3;
	o->max_parallelism = 1;
	copy = strdup(text ? text : "");
	if (!copy)
		return grist_fail(-ENOMEM, "cannot copy writer options");
	/* Empty items (",uncompressed,") are skipped, as the official parser does. */
	for (item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		ret = parse_item(item, o, &seen, &comp_name);
		if (ret)
			goto out;
	}
	if ((seen & OPT_WINDOW_LOG) &&
	    (o->compression == GRIST_CODEC_NONE || o->compression == GRIST_CODEC_SNAPPY)) {
		ret = grist_fail(-EINVAL, "option window_log conflicts with option %s", comp_name);
		goto out;
	}
	/* ArrayRecord forces zstd's window to 1 MiB unless told otherwise. */
	if (o->compression == GRIST_CODEC_ZSTD && !o->window_log)
		o->window_log = 20;
out:
	free(copy);
	return ret;
}

size_t grist_writer_options_format(const struct grist_writer_options *o, char *out, size_t cap)
{
	char comp[48];
	int n;

	switch (o->compression) {
	case GRIST_CODEC_NONE:
		snprintf(comp, sizeof(comp), "uncompressed");
		break;
	case GRIST_CODEC_SNAPPY:
		snprintf(comp, sizeof(comp), "snappy");
		break;
	case GRIST_CODEC_BROTLI:
		if (o->window_log)
			snprintf(comp, sizeof(comp), "brotli:%d,window_log:%d", o->level, o->window_log);
		else
			snprintf(comp, sizeof(comp), "brotli:%d", o->level);
		break;
	default:
		snprintf(comp, sizeof(comp), "zstd:%d,window_log:%d", o->level, o->window_log);
		break;
	}
	n = snprintf(out, cap, "group_size:%llu,transpose:false,pad_to_block_boundary:%s,%s,max_parallelism:1",
		     (unsigned long long)o->group_size, o->pad_to_block_boundary ? "true" : "false", comp);
	return n < 0 ? 0 : (size_t)n;
}
