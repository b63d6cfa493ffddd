/*
 * grist_convert() from imagefolder: TFDS's ImageFolder tree, ROOT/<split>/<label>/<image>,
 * into a prepared TFDS dataset (grist/convert.h says what is written). The driver lists
 * the whole tree first (the labels are the union over all splits), then runs the engine
 * once per split with the imagefolder input (input_imagefolder.c), into a temporary
 * folder that is renamed to OUT only once every file in it is complete.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"
#include "convert/engine.h"
#include "convert/imagefolder.h"
#include "convert/input_imagefolder.h"
#include "format/temp_registry.h"
#include "grist/remote.h"

/* TFDS's own writer options for array_record shards. */
#define TFDS_WRITER_OPTIONS "group_size:1,zstd:3"

/* ---- the dataset's files ---- */

static int write_text(const char *dir, const char *name, const char *text, size_t len)
{
	char *path = NULL;
	int fd, ret = 0;

	if (asprintf(&path, "%s/%s", dir, name) < 0)
		return grist_fail(-ENOMEM, "out of memory");
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		ret = grist_fail(-errno, "%s: cannot create: %s", path, strerror(errno));
		free(path);
		return ret;
	}
	while (len && !ret) {
		ssize_t w = write(fd, text, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			ret = grist_fail(-errno, "%s: write failed: %s", path, strerror(errno));
		else
			text += w, len -= (size_t)w;
	}
	if (!ret && fsync(fd) < 0)
		ret = grist_fail(-errno, "%s: fsync failed: %s", path, strerror(errno));
	if (close(fd) < 0 && !ret)
		ret = grist_fail(-errno, "%s: close failed: %s", path, strerror(errno));
	free(path);
	return ret;
}

/* features.json as TFDS's FeaturesDict.to_json() writes ImageFolder's features (json.dumps, indent 4, sorted keys). */
static int write_features(const char *dir, const struct folder *f)
{
	char *text = NULL;
	int n = asprintf(&text,
		"{\n"
		"    \"featuresDict\": {\n"
		"        \"features\": {\n"
		"            \"image\": {\n"
		"                \"image\": {\n"
		"                    \"dtype\": \"uint8\",\n"
		"                    \"shape\": {\n"
		"                        \"dimensions\": [\n"
		"                            \"-1\",\n"
		"                            \"-1\",\n"
		"                            \"%u\"\n"
		"                        ]\n"
		"                    }\n"
		"                },\n"
		"                \"pythonClassName\": \"tensorflow_datasets.core.features.image_feature.Image\"\n"
		"            },\n"
		"            \"image/filename\": {\n"
		"                \"pythonClassName\": \"tensorflow_datasets.core.features.text_feature.Text\",\n"
		"                \"text\": {}\n"
		"            },\n"
		"            \"label\": {\n"
		"                \"classLabel\": {\n"
		"                    \"numClasses\": \"%zu\"\n"
		"                },\n"
		"                \"pythonClassName\": \"tensorflow_datasets.core.features.class_label_feature.ClassLabel\"\n"
		"            }\n"
		"        }\n"
		"    },\n"
		"    \"pythonClassName\": \"tensorflow_datasets.core.features.features_dict.FeaturesDict\"\n"
		"}",
		f->channels ? f->channels : 3, f->nlabels);
	int ret;

	if (n < 0)
		return grist_fail(-ENOMEM, "out of memory");
	ret = write_text(dir, "features.json", text, (size_t)n);
	free(text);
	return ret;
}

/* label.labels.txt: one name a line, as ClassLabel.save_metadata() writes it. */
static int write_labels(const char *dir, const struct folder *f)
{
	size_t len = 0, at = 0;
	char *text;
	int ret;

	for (size_t i = 0; i < f->nlabels; i++)
		len += strlen(f->labels[i]) + 1;
	if (!(text = malloc(len + 1)))
		return grist_fail(-ENOMEM, "out of memory");
	for (size_t i = 0; i < f->nlabels; i++)
		at += (size_t)sprintf(text + at, "%s\n", f->labels[i]);
	ret = write_text(dir, "label.labels.txt", text, len);
	free(text);
	return ret;
}

/* A growing string for dataset_info.json. */
static int cat(char **s, size_t *len, const char *fmt, ...) GRIST_PRINTF(3, 4);
static int cat(char **s, size_t *len, const char *fmt, ...)
{
	va_list ap;
	char *more = NULL, *ns;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&more, fmt, ap);
	va_end(ap);
	if (n < 0 || !(ns = realloc(*s, *len + (size_t)n + 1))) {
		free(more);
		return grist_fail(-ENOMEM, "out of memory");
	}
	memcpy(ns + *len, more, (size_t)n + 1);
	*s = ns;
	*len += (size_t)n;
	free(more);
	return 0;
}

/*
 * dataset_info.json as TFDS writes it (protobuf's MessageToJson: indent 2, sorted keys,
 * int64 as strings): the fields a reader needs (fileFormat, splits with their shard
 * lengths) and ImageFolder's description and supervised keys. Names here are plain
 * (letters, digits, '_', '.'), so nothing needs escaping.
 */
static int write_info(const char *dir, const struct folder *f, const char *name, const char *version,
		      uint64_t shards)
{
	char *s = NULL;
	size_t len = 0;
	int ret;

	ret = cat(&s, &len, "{\n  \"description\": \"Generic image classification dataset.\",\n"
		  "  \"fileFormat\": \"array_record\",\n  \"name\": \"%s\",\n  \"splits\": [", name);
	for (size_t k = 0; k < f->nsplits && !ret; k++) {
		const struct split *sp = &f->splits[k];

		ret = cat(&s, &len, "%s\n    {\n      \"filepathTemplate\": \"{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}\",\n"
			  "      \"name\": \"%s\",\n      \"numBytes\": \"%llu\",\n      \"shardLengths\": [",
			  k ? "," : "", sp->name, (unsigned long long)sp->bytes);
		for (uint64_t i = 0; i < shards && !ret; i++)
			ret = cat(&s, &len, "%s\n        \"%llu\"", i ? "," : "", (unsigned long long)sp->lengths[i]);
		if (!ret)
			ret = cat(&s, &len, "\n      ]\n    }");
	}
	if (!ret)
		ret = cat(&s, &len, "\n  ],\n  \"supervisedKeys\": {\n    \"tuple\": {\n      \"items\": [\n"
			  "        {\n          \"featureKey\": \"image\"\n        },\n"
			  "        {\n          \"featureKey\": \"label\"\n        }\n      ]\n    }\n  },\n"
			  "  \"version\": \"%s\"\n}", version);
	if (!ret)
		ret = write_text(dir, "dataset_info.json", s, len);
	free(s);
	return ret;
}

/* Remove the temporary dataset folder: it holds only files this conversion wrote. */
static void remove_tmp(const char *tmp)
{
	DIR *d = opendir(tmp);
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			unlinkat(dirfd(d), e->d_name, 0);
	closedir(d);
	rmdir(tmp);
}

/*
 * The dataset's folder beside OUT, listed as a temporary: a signal's
 * grist_writer_abort_all() then removes it with what is in it. Made and listed under the
 * temporaries' guard, so no cleanup falls between the two.
 */
static int make_tmp(char *tmp, const char *parent, const char *out, struct grist_temp_entry **entry)
{
	struct grist_temp_guard g;
	int ret = grist_temp_guard_enter(&g);

	if (ret)
		return grist_fail(ret, "%s: %s", out, grist_last_error());
	if (!mkdtemp(tmp)) {
		ret = grist_fail(-errno, "%s: cannot create a folder beside %s: %s", parent, out, strerror(errno));
	} else {
		chmod(tmp, 0755); /* mkdtemp's 0700 would hide the dataset from its readers */
		ret = grist_temp_register_folder(tmp, entry);
		if (ret)
			rmdir(tmp);
	}
	grist_temp_guard_leave(&g);
	return ret;
}

/* The whole dataset into place at once, under the guard: a cleanup finds it in place or gone. */
static int rename_into_place(const char *tmp, const char *out, struct grist_temp_entry **entry)
{
	struct grist_temp_guard g;
	int ret = grist_temp_guard_enter(&g);

	if (ret)
		return grist_fail(ret, "%s: %s", out, grist_last_error());
	/* An empty folder at OUT gives way; rename() then puts the whole dataset there at once. */
	rmdir(out);
	if (rename(tmp, out) < 0) {
		ret = grist_fail(-errno, "%s: cannot rename %s into place: %s", out, tmp, strerror(errno));
	} else {
		grist_temp_release(*entry);
		*entry = NULL;
	}
	grist_temp_guard_leave(&g);
	return ret;
}

static bool is_version(const char *s)
{
	int a, b, c, n = 0;

	return sscanf(s, "%d.%d.%d%n", &a, &b, &c, &n) == 3 && !s[n] && s[0] >= '0' && s[0] <= '9';
}

/* OUT split into its parent folder, name and version ("data/flowers/1.0.0": flowers, 1.0.0). */
static int out_names(const char *out, char **parent, char **base, char **name, char **version)
{
	char *copy = strdup(out), *slash, *pslash;
	size_t n;
	int ret = 0;

	if (!copy)
		return grist_fail(-ENOMEM, "out of memory");
	n = strlen(copy);
	while (n > 1 && copy[n - 1] == '/')
		copy[--n] = '\0';
	slash = strrchr(copy, '/');
	*base = strdup(slash ? slash + 1 : copy);
	if (slash)
		*slash = '\0';
	*parent = strdup(!slash ? "." : slash == copy ? "/" : copy);
	if (is_version(*base ? *base : "")) {
		pslash = slash ? strrchr(copy, '/') : NULL;
		*name = strdup(!slash ? "" : pslash ? pslash + 1 : copy);
		*version = strdup(*base);
	} else {
		*name = strdup(*base ? *base : "");
		*version = strdup("1.0.0");
	}
	if (!*base || !*parent || !*name || !*version)
		ret = grist_fail(-ENOMEM, "out of memory");
	else if (!grist_imagefolder_plain_name(*name))
		ret = grist_fail(-EINVAL, "%s: the dataset name '%s' (OUT's folder, or its parent's when OUT is a "
				 "version) must be letters, digits and '_'", out, *name);
	free(copy);
	return ret;
}

/* Create @path's missing folders, as `mkdir -p` (TFDS's data_dir/name/ may not exist yet). */
static int mkdir_p(const char *path)
{
	char *copy = strdup(path);
	int ret = 0;

	if (!copy)
		return grist_fail(-ENOMEM, "out of memory");
	for (char *p = copy + 1; !ret; p++) {
		if (*p && *p != '/')
			continue;
		char save = *p;

		*p = '\0';
		if (mkdir(copy, 0755) < 0 && errno != EEXIST)
			ret = grist_fail(-errno, "%s: cannot create the folder: %s", copy, strerror(errno));
		*p = save;
		if (!save)
			break;
	}
	free(copy);
	return ret;
}

/* OUT may not exist yet, or be an empty folder; nor may it lie inside ROOT, whose listing would take it in. */
static int check_out(const char *out, const char *parent, const char *root)
{
	char *root_real = realpath(root, NULL), *parent_real;
	struct stat st;
	int ret = 0;

	/* Checked on the nearest folder that exists: one made inside ROOT would be taken for a split. */
	{
		char *near = strdup(parent), *slash;

		while (near && !(parent_real = realpath(near, NULL)) && errno == ENOENT && (slash = strrchr(near, '/')))
			*slash = '\0';
		if (near && !parent_real && errno == ENOENT)
			parent_real = realpath(".", NULL);
		free(near);
	}
	if (!root_real)
		ret = grist_fail(-errno, "%s: %s", root, strerror(errno));
	else if (!parent_real)
		ret = grist_fail(-errno, "%s: the folder to hold %s: %s", parent, out, strerror(errno));
	else if (!strncmp(root_real, parent_real, strlen(root_real)) &&
		 (parent_real[strlen(root_real)] == '/' || !parent_real[strlen(root_real)]))
		ret = grist_fail(-EINVAL, "%s: the output is inside the input folder %s: name an output outside it",
				 out, root);
	else if ((ret = mkdir_p(parent)))
		;
	else if (!lstat(out, &st)) {
		DIR *d = S_ISDIR(st.st_mode) ? opendir(out) : NULL;
		struct dirent *e;
		bool empty = d != NULL;

		while (d && (e = readdir(d)))
			if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
				empty = false;
		if (d)
			closedir(d);
		if (!empty)
			ret = grist_fail(-EEXIST, "%s: exists and is not an empty folder: a dataset is written whole "
					 "into a new folder", out);
	}
	free(root_real);
	free(parent_real);
	return ret;
}

int grist_convert_imagefolder(struct convert *c)
{
	struct folder f = { 0 };
	char *parent = NULL, *base = NULL, *name = NULL, *version = NULL, *tmp = NULL, *split_path = NULL;
	char *shard_out = NULL;
	struct grist_temp_entry *tmp_entry = NULL;
	const char *split_input[1];
	uint64_t shards = c->shards;
	const char *out = c->out;
	int ret, dfd;

	if (c->ninputs != 1)
		return grist_fail(-EINVAL, "imagefolder: one INPUT, the ROOT folder of <split>/<label>/<image>, "
				  "not %zu", c->ninputs);
	/* a TFDS folder is renamed into place whole: object storage has no rename */
	if (grist_path_is_url(c->out))
		return grist_fail(-EINVAL, "%s: --from imagefolder writes a local dataset folder (it is renamed into "
				  "place whole); write it locally and copy it, or convert to Parquet and use "
				  "grist.tfds.from_parquet(out_dir=URL)", c->out);
	f.root = c->inputs[0];
	f.max_side = c->o.max_side;
	f.jpeg_quality = c->o.jpeg_quality ? c->o.jpeg_quality : 90;
	ret = out_names(c->out, &parent, &base, &name, &version);
	if (!ret)
		ret = check_out(c->out, parent, f.root);
	if (!ret)
		ret = grist_imagefolder_scan(&f);
	if (ret)
		goto out;
	if (!c->o.writer_options || !c->o.writer_options[0])
		c->o.writer_options = TFDS_WRITER_OPTIONS;
	if (asprintf(&tmp, "%s/.%s.tmp-XXXXXX", parent, base) < 0) {
		tmp = NULL;
		ret = grist_fail(-ENOMEM, "out of memory");
		goto out;
	}
	ret = make_tmp(tmp, parent, c->out, &tmp_entry);
	if (ret) {
		free(tmp);
		tmp = NULL;
		goto out;
	}
	c->always_number = true;
	c->shared = &f;
	c->ninputs = 1;
	c->inputs = split_input;
	for (size_t k = 0; k < f.nsplits && !ret; k++) {
		struct split *sp = &f.splits[k];

		free(split_path);
		free(shard_out);
		shard_out = NULL;
		if (asprintf(&split_path, "%s/%s", f.root, sp->name) < 0 ||
		    asprintf(&shard_out, "%s/%s-%s.array_record", tmp, name, sp->name) < 0 ||
		    !(sp->lengths = calloc(shards, sizeof(*sp->lengths)))) {
			ret = grist_fail(-ENOMEM, "out of memory");
			break;
		}
		f.cur = sp;
		split_input[0] = split_path;
		c->out = shard_out;
		c->not_last = true;
		ret = grist_convert_run(c);
		for (uint64_t s = 0; !ret && s < shards; s++) {
			struct stat st;

			/* the engine's cut: contiguous runs, the first ones one longer */
			sp->lengths[s] = sp->n / shards + (s < sp->n % shards);
			if (stat(c->names[s], &st) < 0)
				ret = grist_fail(-errno, "%s: %s", c->names[s], strerror(errno));
			else
				sp->bytes += (uint64_t)st.st_size;
		}
		grist_convert_run_cleanup(c);
	}
	if (!ret)
		ret = write_features(tmp, &f);
	if (!ret)
		ret = write_labels(tmp, &f);
	if (!ret)
		ret = write_info(tmp, &f, name, version, shards);
	if (ret)
		goto out;
	ret = rename_into_place(tmp, out, &tmp_entry);
	if (ret)
		goto out;
	dfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
	free(tmp);
	tmp = NULL;
	c->out = out;
	c->images_resized = f.resized;
	c->image_bytes_in = f.bytes_in;
	c->image_bytes_out = f.bytes_out;
	grist_convert_report_done(c);
out:
	if (tmp && ret)
		remove_tmp(tmp);
	grist_temp_release(tmp_entry);
	c->out = out;
	free(tmp);
	free(split_path);
	free(shard_out);
	free(parent);
	free(base);
	free(name);
	free(version);
	grist_imagefolder_free(&f);
	return ret;
}
