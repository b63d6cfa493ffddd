/*
 * grist_convert(): TFRecord, text lines, folders, ArrayRecord files or an ImageFolder tree into
 * (sharded) ArrayRecord files, all or nothing. Here the caller's options are read and checked,
 * then the engine (engine.c) runs once, or the imagefolder driver (imagefolder.c) runs it per split.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "grist/convert.h"
#include "grist/format.h"
#include "common/error.h"
#include "format/options.h"
#include "convert/engine.h"
#include "convert/imagefolder.h"
#include "convert/input.h"

#define PROGRESS_INTERVAL_DEFAULT 0.1

/*
 * Read the caller's options by the rule of sized structs: what an older, shorter struct
 * lacks reads as zero (every field's default); bytes beyond ours must be zero.
 */
static int options_in(struct convert *c, const struct grist_convert_options *o)
{
	int ret;

	memset(&c->o, 0, sizeof(c->o));
	c->o.size = sizeof(c->o);
	if (o && (ret = grist_sized_in(&c->o, sizeof(c->o), o, "grist_convert_options")))
		return ret;
	c->shards = c->o.shards ? c->o.shards : 1;
	if (c->shards > GRIST_CONVERT_SHARDS_MAX)
		return grist_fail(-EINVAL, "shards: %llu, more than a shard name can number (%d)",
				  (unsigned long long)c->shards, GRIST_CONVERT_SHARDS_MAX);
	if (!grist_convert_format_name(c->o.format))
		return grist_fail(-EINVAL, "format: %d is not a grist_convert_format", (int)c->o.format);
	if (!(c->o.progress_interval >= 0))
		return grist_fail(-EINVAL, "progress_interval: %g is not a number of seconds", c->o.progress_interval);
	if (!c->o.progress_interval)
		c->o.progress_interval = PROGRESS_INTERVAL_DEFAULT;
	if (c->o.map && (!c->o.map_out_max || c->o.map_out_max > ((size_t)1 << 31)))
		return grist_fail(-EINVAL, "map_out_max: %zu, expected 1..2 GiB with a map", c->o.map_out_max);
	if ((c->o.max_side || c->o.jpeg_quality) && c->o.format != GRIST_CONVERT_IMAGEFOLDER)
		return grist_fail(-EINVAL, "max_side, jpeg_quality: images are re-encoded by the imagefolder "
				  "format only, not %s", grist_convert_format_name(c->o.format));
	if (c->o.jpeg_quality < 0 || c->o.jpeg_quality > 100)
		return grist_fail(-EINVAL, "jpeg_quality: %d, not 1..100 (0: 90)", c->o.jpeg_quality);
	if (c->o.jpeg_quality && !c->o.max_side)
		return grist_fail(-EINVAL, "jpeg_quality: only with max_side (images are otherwise written as read)");
	/* The spec is checked before any input is read; only csv takes one, and csv needs one. */
	if (c->o.format == GRIST_CONVERT_CSV)
		return grist_csv_spec_check(c->o.features);
	if (c->o.features && c->o.features[0])
		return grist_fail(-EINVAL, "features: a features spec is for the csv format, not %s",
				  grist_convert_format_name(c->o.format));
	return 0;
}

GRIST_API int grist_convert(const char *const *inputs, size_t num_inputs, const char *output,
			    const struct grist_convert_options *o, struct grist_convert_stats *stats)
{
	struct convert c = { .inputs = inputs, .ninputs = num_inputs, .out = output };
	struct grist_writer_options wo;
	size_t i;
	int ret;

	if (!inputs || !num_inputs)
		return grist_fail(-EINVAL, "convert: no inputs");
	for (i = 0; i < num_inputs; i++)
		if (!inputs[i] || !inputs[i][0])
			return grist_fail(-EINVAL, "convert: input %zu has no name", i);
	if (!output || !output[0])
		return grist_fail(-EINVAL, "convert: the output has no name");
	ret = options_in(&c, o);
	/* Bad writer options are refused before any input is read. */
	if (!ret)
		ret = grist_writer_options_parse(c.o.writer_options, &wo);
	if (ret)
		return ret;
	c.p.size = sizeof(c.p);
	if (c.o.format == GRIST_CONVERT_IMAGEFOLDER) {
		ret = grist_convert_imagefolder(&c);
	} else {
		ret = grist_convert_run(&c);
		grist_convert_run_cleanup(&c);
	}
	if (!ret && stats && stats->size >= sizeof(size_t)) {
		struct grist_convert_stats st = { .size = sizeof(st), .records = c.p.records, .bytes = c.p.bytes,
						  .shards = c.shards_written, .images_resized = c.images_resized,
						  .image_bytes_in = c.image_bytes_in, .image_bytes_out = c.image_bytes_out };

		memcpy((char *)stats + sizeof(size_t), (char *)&st + sizeof(size_t),
		       (stats->size < sizeof(st) ? stats->size : sizeof(st)) - sizeof(size_t));
	}
	return ret;
}

GRIST_API int grist_convert_detect(const char *path, enum grist_convert_format *out)
{
	const struct grist_input_ops *ops;
	int ret;

	*out = GRIST_CONVERT_AUTO;
	if (!path)
		return grist_fail(-EINVAL, "convert: no path");
	ret = grist_input_detect(path, &ops);
	if (!ret && ops)
		ret = grist_convert_format_parse(ops->name, out);
	return ret;
}
