/*
 * The conversion engine: inputs of one format into (sharded) ArrayRecord files, all or
 * nothing. Formats resolved, outputs that are inputs refused, shard quotas, records written
 * in order, progress calls, every shard renamed into place; and the names it gives (shards,
 * formats). grist_convert() (convert.c) runs it once, the imagefolder driver once per split.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "grist/convert.h"
#include "grist/format.h"
#include "common/error.h"
#include "convert/engine.h"
#include "convert/input.h"
#include "format/temp_registry.h"
#include "grist/remote.h"
#include "io/upload.h"

/* Progress is looked at every this many records: a clock read per record would show in small-record runs. */
#define PROGRESS_EVERY 16

static double seconds_since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

/* Call the progress callback; -ECANCELED (message recorded) when it asks to stop. */
static int report(struct convert *c, const struct grist_input *cur, size_t input)
{
	if (!c->o.progress)
		return 0;
	clock_gettime(CLOCK_MONOTONIC, &c->last);
	c->p.seconds = seconds_since(&c->start);
	c->p.input = input;
	c->p.input_bytes_done = c->in_done_before + (cur && cur->ops->done_bytes ? cur->ops->done_bytes(cur) : 0);
	if (c->o.progress(&c->p, c->o.progress_arg) && !c->p.done)
		return grist_fail(-ECANCELED, "conversion cancelled by its progress callback after %llu records",
				  (unsigned long long)c->p.records);
	return 0;
}

/* report() when progress_interval has passed since the last call; called every PROGRESS_EVERY records. */
static int report_due(struct convert *c, const struct grist_input *cur, size_t input)
{
	if (!c->o.progress || seconds_since(&c->last) < c->o.progress_interval)
		return 0;
	return report(c, cur, input);
}

/* Every input's format: the one asked for, or each told by its bytes, which must agree. */
static int resolve_formats(struct convert *c)
{
	const struct grist_input_ops *from = NULL;
	size_t i, first = 0;
	int ret;

	c->ops = calloc(c->ninputs, sizeof(*c->ops));
	if (!c->ops)
		return grist_fail(-ENOMEM, "out of memory");
	if (c->o.format != GRIST_CONVERT_AUTO) {
		from = grist_input_find(grist_convert_format_name(c->o.format));
		for (i = 0; i < c->ninputs; i++) {
			if (grist_path_is_url(c->inputs[i]) && from != &grist_input_arrayrecord_ops)
				return grist_fail(-EINVAL, "%s: URLs are read as ArrayRecord only (--from arrayrecord)",
						  c->inputs[i]);
			c->ops[i] = from;
		}
		return 0;
	}
	for (i = 0; i < c->ninputs; i++) {
		ret = grist_input_detect(c->inputs[i], &c->ops[i]);
		if (ret)
			return ret;
		if (!c->ops[i])
			continue; /* empty */
		if (!from)
			from = c->ops[i], first = i;
		else if (c->ops[i] != from)
			return grist_fail(-EINVAL, "%s holds %s, but %s holds %s: give inputs of one format, or name "
					  "the format (--from)", c->inputs[i], c->ops[i]->name, c->inputs[first], from->name);
	}
	/* Empty files take the others' format; all empty gives no records in any format. */
	for (i = 0; i < c->ninputs; i++)
		if (!c->ops[i])
			c->ops[i] = from ? from : &grist_input_lines_ops;
	return 0;
}

/* True when @path is @dir or lies under it (both resolved, so links and ".." cannot hide it). */
static bool path_within(const char *dir_real, const char *path_real)
{
	size_t n = strlen(dir_real);

	if (strncmp(dir_real, path_real, n))
		return false;
	return path_real[n] == '\0' || path_real[n] == '/' || (n == 1 && dir_real[0] == '/');
}

/* The folder @name would be created in, resolved; NULL when it cannot be (the writer says why later). */
static char *output_folder(const char *name)
{
	char *copy = strdup(name), *slash, *real;

	if (!copy)
		return NULL;
	slash = strrchr(copy, '/');
	if (!slash)
		real = realpath(".", NULL);
	else if (slash == copy)
		real = realpath("/", NULL);
	else {
		*slash = '\0';
		real = realpath(copy, NULL);
	}
	free(copy);
	return real;
}

/*
 * Refuse an output that is an input before anything is written: the same file under
 * any name (path, hard link, symbolic link: the same st_dev and st_ino), or, for a folder
 * input, a name inside the folder, which its listing would take in. Renaming the
 * output into place would otherwise replace the input: the source data gone.
 */
/* o.map on the record (@p, @n) of input @in: the record becomes the map's output. */
static int map_record(struct convert *c, const struct grist_input *in, uint64_t in_record, const uint8_t **p,
		      size_t *n)
{
	struct grist_map_input mi = { .data = *p, .len = *n, .index = c->p.records };
	char why[512];
	size_t out = 0;
	int ret = c->o.map(c->o.map_ctx, &mi, c->map_buf, c->o.map_out_max, &out);

	if (ret == 1) {
		*p = c->map_buf;
		*n = out;
		return 0;
	}
	if (!ret)
		return grist_fail(-EINVAL, "%s: record %llu: the map dropped it; convert keeps every record", in->path,
				  (unsigned long long)in_record);
	snprintf(why, sizeof(why), "%s", grist_last_error());
	return grist_fail(ret, "%s: record %llu: %s", in->path, (unsigned long long)in_record, why);
}

static int check_outputs_are_not_inputs(struct convert *c)
{
	size_t i;
	uint64_t s;
	int ret = 0;

	for (i = 0; i < c->ninputs && !ret; i++) {
		struct stat in, out;
		char *in_real = NULL;

		if (stat(c->inputs[i], &in))
			continue; /* opening it says why */
		if (S_ISDIR(in.st_mode) && (c->ops[i] == &grist_input_dir_ops || c->ops[i] == &grist_input_imagefolder_ops))
			in_real = realpath(c->inputs[i], NULL);
		for (s = 0; s < c->shards && !ret; s++) {
			if (!stat(c->names[s], &out) && out.st_dev == in.st_dev && out.st_ino == in.st_ino) {
				ret = grist_fail(-EINVAL, "%s: the output is the input %s (the same file): writing it would "
						 "destroy the input; name another output", c->names[s], c->inputs[i]);
			} else if (in_real) {
				char *folder = output_folder(c->names[s]);

				if (folder && path_within(in_real, folder))
					ret = grist_fail(-EINVAL, "%s: the output is inside the input folder %s: the folder's "
							 "records would include it; name an output outside it",
							 c->names[s], c->inputs[i]);
				free(folder);
			}
		}
		free(in_real);
	}
	return ret;
}

static int input_open(struct convert *c, size_t i, struct grist_input *in)
{
	memset(in, 0, sizeof(*in));
	in->ops = c->ops[i];
	in->path = c->inputs[i];
	in->check_data = !c->o.no_check;
	in->features = c->o.features;
	in->shared = c->shared;
	return in->ops->open(in, in->path);
}

/* Count every input's records, for the shard sizes: from footers or listings, else one pass of framing checks. */
static int count_records(struct convert *c, uint64_t *total)
{
	struct grist_input in;
	const uint8_t *p;
	size_t i, n;
	int ret;

	*total = 0;
	c->p.counting = true;
	for (i = 0; i < c->ninputs; i++) {
		uint64_t k = 0;

		ret = report(c, NULL, i);
		if (!ret)
			ret = input_open(c, i, &in);
		if (ret)
			return ret;
		/* The data CRCs are checked on the writing pass; counting needs the framing only. */
		in.check_data = false;
		if (in.ops->count) {
			ret = in.ops->count(&in, &k);
		} else {
			while ((ret = in.ops->next(&in, &p, &n)) > 0)
				if (!(++k % PROGRESS_EVERY) && (ret = report_due(c, NULL, i)))
					break;
		}
		in.ops->close(&in);
		if (ret < 0)
			return ret;
		*total += k;
	}
	c->p.counting = false;
	return 0;
}

/*
 * Rename every finished shard into place under the temporaries' guard, so the set appears
 * whole or (after a failed rename, whose predecessors are removed again) not at all: no
 * cleanup, a program's handler or grist_writer_abort_all(), falls between two renames.
 */
static int commit_all(struct convert *c)
{
	struct grist_temp_guard g;
	uint64_t s, k;
	int ret;

	ret = grist_temp_guard_enter(&g);
	if (ret)
		return ret;
	for (s = 0; s < c->shards; s++) {
		struct stat tmp, now;
		const char *tmp_path = grist_writer_temp_path(c->w[s]); /* NULL for a URL: an upload */
		bool have_tmp = tmp_path && stat(tmp_path, &tmp) == 0;

		ret = grist_writer_commit(c->w[s]);
		c->w[s] = NULL;
		if (ret) {
			/* the shards made visible already go again: an object's DELETE, a file's unlink */
			for (k = 0; k < s; k++)
				if (grist_path_is_url(c->names[k]))
					grist_remote_delete(c->names[k]);
				else
					unlink(c->names[k]);
			/* Failing after its rename (syncing the folder), this shard is ours too; never a file we did not make. */
			if (have_tmp && stat(c->names[s], &now) == 0 && now.st_ino == tmp.st_ino && now.st_dev == tmp.st_dev)
				unlink(c->names[s]);
			break;
		}
	}
	grist_temp_guard_leave(&g);
	return ret;
}

int grist_convert_run(struct convert *c)
{
	struct grist_input in = { 0 };
	uint64_t total = 0, s = 0, in_shard = 0, before = c->p.records; /* a driver's earlier runs counted too */
	const uint8_t *p;
	size_t i, n;
	int ret;

	c->w = calloc(c->shards, sizeof(*c->w));
	c->names = calloc(c->shards, sizeof(*c->names));
	c->quota = calloc(c->shards, sizeof(*c->quota));
	if (!c->w || !c->names || !c->quota)
		return grist_fail(-ENOMEM, "out of memory");
	for (s = 0; s < c->shards; s++) {
		int len;

		/* TFDS numbers even a single shard: OUT-00000-of-00001 */
		if (c->always_number)
			len = asprintf(&c->names[s], "%s-%05llu-of-%05llu", c->out, (unsigned long long)s,
				       (unsigned long long)c->shards);
		else if ((len = grist_convert_shard_name(c->out, s, c->shards, NULL, 0)) >= 0 &&
			 (c->names[s] = malloc((size_t)len + 1)))
			grist_convert_shard_name(c->out, s, c->shards, c->names[s], (size_t)len + 1);
		if (len < 0 || !c->names[s])
			return grist_fail(-ENOMEM, "out of memory");
	}
	ret = resolve_formats(c);
	if (!ret)
		ret = check_outputs_are_not_inputs(c);
	if (ret)
		return ret;
	/* The percentage needs every input's size up front; a folder's is known only once listed. */
	for (i = 0; i < c->ninputs; i++) {
		struct stat st;

		if (!c->ops[i]->done_bytes || stat(c->inputs[i], &st) || !S_ISREG(st.st_mode)) {
			c->p.input_bytes_total = 0;
			break;
		}
		c->p.input_bytes_total += (uint64_t)st.st_size;
	}
	if (!c->started) {
		clock_gettime(CLOCK_MONOTONIC, &c->start);
		c->last = c->start;
		c->started = true;
	}
	s = 0;
	if (c->shards > 1) {
		ret = count_records(c, &total);
		if (ret)
			return ret;
		for (s = 0; s < c->shards; s++)
			c->quota[s] = total / c->shards + (s < total % c->shards);
		s = 0;
	} else {
		c->quota[0] = UINT64_MAX;
	}
	if (c->o.map && !c->map_buf && !(c->map_buf = malloc(c->o.map_out_max)))
		return grist_fail(-ENOMEM, "convert: no memory for the map's %zu bytes", c->o.map_out_max);
	ret = grist_writer_open(c->names[0], c->o.writer_options, &c->w[0]);
	if (ret)
		return ret;
	for (i = 0; i < c->ninputs; i++) {
		uint64_t in_record = 0;

		ret = report(c, NULL, i);
		if (!ret)
			ret = input_open(c, i, &in);
		if (ret)
			return ret;
		while ((ret = in.ops->next(&in, &p, &n)) > 0) {
			while (in_shard == c->quota[s]) {
				if (s + 1 == c->shards) {
					ret = grist_fail(-EBADMSG, "%s: more records than the counting pass found (%llu): did the input change?",
							 in.path, (unsigned long long)total);
					goto close_input;
				}
				ret = grist_writer_finish(c->w[s]);
				if (!ret)
					ret = grist_writer_open(c->names[s + 1], c->o.writer_options, &c->w[s + 1]);
				if (ret)
					goto close_input;
				s++;
				in_shard = 0;
			}
			if (c->o.map && (ret = map_record(c, &in, in_record, &p, &n)))
				break;
			ret = grist_writer_write(c->w[s], p, n);
			if (ret)
				break;
			in_record++;
			in_shard++;
			c->p.records++;
			c->p.bytes += n;
			if (!(c->p.records % PROGRESS_EVERY) && (ret = report_due(c, &in, i)))
				break;
		}
		if (!ret && in.ops->done_bytes)
			c->in_done_before += in.ops->done_bytes(&in);
close_input:
		in.ops->close(&in);
		if (ret < 0)
			return ret;
	}
	if (c->shards > 1 && c->p.records - before != total)
		return grist_fail(-EBADMSG, "%s: %llu records, but the counting pass found %llu: did the input change?",
				  c->inputs[0], (unsigned long long)(c->p.records - before), (unsigned long long)total);
	/* Shards past the last record (fewer records than shards) are written empty. */
	for (;;) {
		ret = grist_writer_finish(c->w[s]);
		if (ret || s + 1 == c->shards)
			break;
		ret = grist_writer_open(c->names[s + 1], c->o.writer_options, &c->w[s + 1]);
		if (ret)
			break;
		s++;
	}
	/* The last word before the outputs appear: a cancel here still leaves nothing. */
	if (!ret)
		ret = report(c, NULL, c->ninputs);
	if (!ret)
		ret = commit_all(c);
	if (!ret)
		c->shards_written += c->shards;
	if (!ret && !c->not_last) {
		c->p.done = true;
		report(c, NULL, c->ninputs);
	}
	return ret;
}

void grist_convert_run_cleanup(struct convert *c)
{
	uint64_t s;

	for (s = 0; c->w && s < c->shards; s++)
		grist_writer_abort(c->w[s]);
	for (s = 0; c->names && s < c->shards; s++)
		free(c->names[s]);
	free(c->w);
	free(c->names);
	free(c->quota);
	free(c->ops);
	free(c->map_buf);
	c->map_buf = NULL;
	c->w = NULL;
	c->names = NULL;
	c->quota = NULL;
	c->ops = NULL;
}

int grist_convert_report_done(struct convert *c)
{
	c->p.done = true;
	return report(c, NULL, c->ninputs);
}

GRIST_API int grist_convert_shard_name(const char *output, uint64_t shard, uint64_t shards, char *buf, size_t cap)
{
	int n;

	if (!output || shards > GRIST_CONVERT_SHARDS_MAX || (shards > 1 && shard >= shards) || (shards <= 1 && shard))
		return grist_fail(-EINVAL, "shard %llu of %llu: no such shard name", (unsigned long long)shard,
				  (unsigned long long)shards);
	if (shards <= 1)
		n = snprintf(buf, cap, "%s", output);
	else
		n = snprintf(buf, cap, "%s-%05llu-of-%05llu", output, (unsigned long long)shard,
			     (unsigned long long)shards);
	if (n < 0 || n == INT_MAX)
		return grist_fail(-EINVAL, "%s: the name is too long", output);
	return n;
}

static const char *const format_names[] = {
	[GRIST_CONVERT_AUTO] = "auto",
	[GRIST_CONVERT_TFRECORD] = "tfrecord",
	[GRIST_CONVERT_LINES] = "lines",
	[GRIST_CONVERT_DIR] = "dir",
	[GRIST_CONVERT_ARRAYRECORD] = "arrayrecord",
	[GRIST_CONVERT_IMAGEFOLDER] = "imagefolder",
	[GRIST_CONVERT_CSV] = "csv",
};

GRIST_API const char *grist_convert_format_name(enum grist_convert_format f)
{
	return (unsigned)f < sizeof(format_names) / sizeof(format_names[0]) ? format_names[f] : NULL;
}

GRIST_API int grist_convert_format_parse(const char *name, enum grist_convert_format *out)
{
	size_t i;

	for (i = 0; name && i < sizeof(format_names) / sizeof(format_names[0]); i++) {
		if (!strcmp(name, format_names[i])) {
			*out = (enum grist_convert_format)i;
			return 0;
		}
	}
	return grist_fail(-EINVAL, "unknown format '%s' (tfrecord, lines, dir, arrayrecord, imagefolder, csv)", name ? name : "(null)");
}
