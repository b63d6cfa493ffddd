/*
 * grist_convert() from imagefolder: TFDS's ImageFolder tree, ROOT/<split>/<label>/<image>,
 * into a prepared TFDS dataset (grist/convert.h says what is written). The driver lists
 * the whole tree first (the labels are the union over all splits), then runs the engine
 * once per split with the input below, into a temporary folder that is renamed to OUT
 * only once every file in it is complete.
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

#include "grist/features.h"
#include "common/buf.h"
#include "common/error.h"
#include "convert/convert_internal.h"
#include "convert/input.h"
#include "features/features_internal.h"

/* TFDS's own writer options for array_record shards. */
#define TFDS_WRITER_OPTIONS "group_size:1,zstd:3"
/* A decoded image larger than this is refused rather than allocated (no dataset image comes near). */
#define PIXELS_MAX ((size_t)1 << 30)

struct image_file {
	char *rel;       /* "<split>/<label>/<file>": the record's image/filename */
	uint32_t label;
};

struct split {
	char *name;
	struct image_file *files;
	size_t n, cap;
	uint64_t *lengths;  /* records per shard, once written */
	uint64_t bytes;     /* the shards' sizes on disk */
};

/* The conversion's view of the tree, shared with the input (grist_input.shared). */
struct folder {
	const char *root;
	char **labels;        /* sorted, unique */
	size_t nlabels;
	struct split *splits; /* sorted by name */
	size_t nsplits;
	struct split *cur;    /* the split being converted */
	uint32_t channels;    /* of the first image written; 0 before */
	char *first;          /* that image */
};

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool image_name(const char *name)
{
	static const char *const ext[] = { ".png", ".jpg", ".jpeg" };
	size_t n = strlen(name);

	for (size_t i = 0; i < sizeof(ext) / sizeof(ext[0]); i++) {
		size_t e = strlen(ext[i]);

		if (n >= e && !strcasecmp(name + n - e, ext[i]))
			return true;
	}
	return false;
}

static bool plain_name(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_'))
			return false;
	return true;
}

static void free_names(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

/*
 * The entries of folder @path, sorted bytewise (Python's sort of the same names): its
 * sub-folders when @dirs (links followed, as TFDS's isdir does), else its files named as
 * images. An image name that is not a regular file is an error: TFDS would fail to read it.
 */
static int list(const char *path, bool dirs, char ***out, size_t *count)
{
	char **v = NULL;
	size_t n = 0, cap = 0;
	struct dirent *e;
	DIR *d = opendir(path);
	int ret = 0;

	if (!d)
		return grist_fail(-errno, "%s: cannot open folder: %s", path, strerror(errno));
	while (!ret) {
		struct stat st;

		errno = 0;
		if (!(e = readdir(d))) {
			if (errno)
				ret = grist_fail(-errno, "%s: cannot list folder: %s", path, strerror(errno));
			break;
		}
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (!dirs && !image_name(e->d_name))
			continue;
		if (fstatat(dirfd(d), e->d_name, &st, 0) < 0) {
			if (dirs && errno == ENOENT)
				continue; /* a dangling link is no folder */
			ret = grist_fail(-errno, "%s/%s: cannot stat: %s", path, e->d_name, strerror(errno));
			break;
		}
		if (dirs && !S_ISDIR(st.st_mode))
			continue;
		if (!dirs && !S_ISREG(st.st_mode)) {
			ret = grist_fail(-EINVAL, "%s/%s: named as an image but not a regular file", path, e->d_name);
			break;
		}
		if ((ret = grist_array_reserve((void **)&v, &cap, n + 1, sizeof(*v))))
			break;
		if (!(v[n] = strdup(e->d_name))) {
			ret = grist_fail(-ENOMEM, "out of memory");
			break;
		}
		n++;
	}
	closedir(d);
	if (ret) {
		free_names(v, n);
		return ret;
	}
	if (n)
		qsort(v, n, sizeof(*v), cmp_str);
	*out = v;
	*count = n;
	return 0;
}

static void folder_free(struct folder *f)
{
	for (size_t s = 0; s < f->nsplits; s++) {
		for (size_t i = 0; i < f->splits[s].n; i++)
			free(f->splits[s].files[i].rel);
		free(f->splits[s].files);
		free(f->splits[s].lengths);
		free(f->splits[s].name);
	}
	free(f->splits);
	free_names(f->labels, f->nlabels);
	free(f->first);
}

/* Add @name to the sorted set of labels unless there. */
static int add_label(struct folder *f, const char *name, size_t *cap)
{
	char **at = f->nlabels ? bsearch(&name, f->labels, f->nlabels, sizeof(char *), cmp_str) : NULL;
	int ret;

	if (at)
		return 0;
	if ((ret = grist_array_reserve((void **)&f->labels, cap, f->nlabels + 1, sizeof(char *))))
		return ret;
	if (!(f->labels[f->nlabels] = strdup(name)))
		return grist_fail(-ENOMEM, "out of memory");
	f->nlabels++;
	qsort(f->labels, f->nlabels, sizeof(char *), cmp_str);
	return 0;
}

/* List ROOT: splits, their labels and images; the label indexes once all are known. */
static int scan(struct folder *f)
{
	char **splits = NULL, **labels = NULL, **images = NULL, *path = NULL;
	size_t nsplits = 0, nlabels = 0, nimages = 0, label_cap = 0;
	int ret;

	if ((ret = list(f->root, true, &splits, &nsplits)))
		return ret;
	if (!nsplits) {
		ret = grist_fail(-EINVAL, "%s: no split folders (imagefolder reads ROOT/<split>/<label>/<image>)", f->root);
		goto out;
	}
	if (!(f->splits = calloc(nsplits, sizeof(*f->splits)))) {
		ret = grist_fail(-ENOMEM, "out of memory");
		goto out;
	}
	for (size_t s = 0; s < nsplits && !ret; s++) {
		struct split *sp = &f->splits[s];

		f->nsplits++;
		sp->name = splits[s];
		splits[s] = NULL;
		if (!plain_name(sp->name)) {
			ret = grist_fail(-EINVAL, "%s/%s: a split name must be letters, digits and '_' (TFDS's shard "
					 "names hold it)", f->root, sp->name);
			break;
		}
		free(path);
		if (asprintf(&path, "%s/%s", f->root, sp->name) < 0 || (ret = list(path, true, &labels, &nlabels))) {
			path = NULL;
			ret = ret ? ret : grist_fail(-ENOMEM, "out of memory");
			break;
		}
		for (size_t l = 0; l < nlabels && !ret; l++) {
			char *lpath = NULL;

			if (strpbrk(labels[l], "\n\r")) {
				ret = grist_fail(-EINVAL, "%s/%s: a label name with a line break cannot go in "
						 "label.labels.txt", path, labels[l]);
				break;
			}
			if ((ret = add_label(f, labels[l], &label_cap)))
				break;
			if (asprintf(&lpath, "%s/%s", path, labels[l]) < 0)
				ret = grist_fail(-ENOMEM, "out of memory");
			else
				ret = list(lpath, false, &images, &nimages);
			free(lpath);
			if (ret)
				break;
			if (!(ret = grist_array_reserve((void **)&sp->files, &sp->cap, sp->n + nimages, sizeof(*sp->files))))
				for (size_t i = 0; i < nimages && !ret; i++) {
					struct image_file *im = &sp->files[sp->n];

					if (asprintf(&im->rel, "%s/%s/%s", sp->name, labels[l], images[i]) < 0)
						ret = grist_fail(-ENOMEM, "out of memory");
					else
						sp->n++;
				}
			free_names(images, nimages);
			images = NULL;
		}
		free_names(labels, nlabels);
		labels = NULL;
	}
	/* Indexes into the union of all splits' labels, the same in every split. */
	for (size_t s = 0; s < f->nsplits && !ret; s++)
		for (size_t i = 0; i < f->splits[s].n; i++) {
			struct image_file *im = &f->splits[s].files[i];
			char *label = strchr(im->rel, '/') + 1, *end = strrchr(im->rel, '/'), save = *end;
			char **at;

			*end = '\0';
			at = bsearch(&label, f->labels, f->nlabels, sizeof(char *), cmp_str);
			*end = save;
			im->label = (uint32_t)(at - f->labels);
		}
out:
	free(path);
	free_names(splits, nsplits);
	return ret;
}

/* ---- the input: one split's images, each as a tf.train.Example ---- */

struct folder_input {
	struct folder *f;
	size_t next;
	uint8_t *buf, *pixels;
	size_t cap, pixels_cap;
	char *full;
	struct grist_example_encoder *enc;
};

static void if_close(struct grist_input *in)
{
	struct folder_input *fi = in->priv;

	if (!fi)
		return;
	grist_example_encoder_destroy(fi->enc);
	free(fi->buf);
	free(fi->pixels);
	free(fi->full);
	free(fi);
	in->priv = NULL;
}

static int if_open(struct grist_input *in, const char *path)
{
	struct folder_input *fi;
	int ret;

	(void)path;
	/* Only the driver below knows the labels: the format cannot run without it. */
	if (!in->shared)
		return grist_fail(-EINVAL, "%s: imagefolder inputs are read by grist_convert() itself", path);
	if (!(fi = calloc(1, sizeof(*fi))))
		return grist_fail(-ENOMEM, "out of memory");
	fi->f = in->shared;
	in->priv = fi;
	ret = grist_example_encoder_create(&fi->enc);
	if (ret)
		if_close(in);
	return ret;
}

/* Decode @p whole (a header that reads well over damaged data is not enough) and check its channels. */
static int check_image(struct folder_input *fi, const char *name, const uint8_t *p, size_t len)
{
	struct folder *f = fi->f;
	struct gf_image img;
	size_t need;
	int ret = gf_image_open(&img, GRIST_DECODE_IMAGE, p, len);

	if (ret)
		return grist_fail_prefix(ret, "%s: not an image that decodes", name);
	if (img.sample_bytes != 1 || (img.channels != 1 && img.channels != 3 && img.channels != 4)) {
		gf_image_close(&img);
		return grist_fail(-ENOTSUP, "%s: %u channels of %u bits: TFDS's Image takes 8-bit images of 1, 3 or "
				  "4 channels", name, img.channels, img.sample_bytes * 8);
	}
	need = (size_t)img.width * img.height * img.channels;
	if (need > PIXELS_MAX) {
		gf_image_close(&img);
		return grist_fail(-EFBIG, "%s: a %ux%u image, larger than %zu bytes decoded", name, img.width,
				  img.height, PIXELS_MAX);
	}
	if (fi->pixels_cap < need + 1) {
		uint8_t *np = realloc(fi->pixels, need + 1);

		if (!np) {
			gf_image_close(&img);
			return grist_fail(-ENOMEM, "%s: out of memory", name);
		}
		fi->pixels = np;
		fi->pixels_cap = need + 1;
	}
	ret = gf_image_decode(&img, fi->pixels, (size_t)img.width * img.channels);
	if (ret)
		return grist_fail_prefix(ret, "%s: not an image that decodes", name);
	if (!f->channels) {
		f->channels = img.channels;
		if (!(f->first = strdup(name)))
			return grist_fail(-ENOMEM, "out of memory");
	} else if (img.channels != f->channels) {
		return grist_fail(-EBADMSG, "%s: %u channels, but %s has %u: the dataset's Image feature has one "
				  "channel count", name, img.channels, f->first, f->channels);
	}
	return 0;
}

static int if_next(struct grist_input *in, const uint8_t **data, size_t *len)
{
	struct folder_input *fi = in->priv;
	const struct split *sp = fi->f->cur;
	const struct image_file *im;
	size_t n;
	int64_t label;
	int ret;

	if (fi->next == sp->n)
		return 0;
	im = &sp->files[fi->next];
	free(fi->full);
	if (asprintf(&fi->full, "%s/%s", fi->f->root, im->rel) < 0) {
		fi->full = NULL;
		return grist_fail(-ENOMEM, "out of memory");
	}
	ret = grist_input_read_file(fi->full, in->record, &fi->buf, &fi->cap, &n);
	if (!ret)
		ret = check_image(fi, fi->full, fi->buf, n);
	if (ret)
		return ret;
	label = im->label;
	grist_example_begin(fi->enc);
	grist_example_add_bytes(fi->enc, "image", fi->buf, (const uint64_t[]){ 0, n }, 1);
	grist_example_add_bytes(fi->enc, "image/filename", (const uint8_t *)im->rel,
				(const uint64_t[]){ 0, strlen(im->rel) }, 1);
	grist_example_add_int64s(fi->enc, "label", &label, 1);
	ret = grist_example_finish(fi->enc, data, len);
	if (ret)
		return grist_fail_prefix(ret, "%s", fi->full);
	fi->next++;
	in->record++;
	return 1;
}

static int if_count(struct grist_input *in, uint64_t *records)
{
	*records = ((struct folder_input *)in->priv)->f->cur->n;
	return 0;
}

const struct grist_input_ops grist_input_imagefolder_ops = {
	.name = "imagefolder",
	.open = if_open,
	.next = if_next,
	.count = if_count,
	.close = if_close,
};

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
	else if (!plain_name(*name))
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
	const char *split_input[1];
	uint64_t shards = c->shards;
	const char *out = c->out;
	int ret, dfd;

	if (c->ninputs != 1)
		return grist_fail(-EINVAL, "imagefolder: one INPUT, the ROOT folder of <split>/<label>/<image>, "
				  "not %zu", c->ninputs);
	f.root = c->inputs[0];
	ret = out_names(c->out, &parent, &base, &name, &version);
	if (!ret)
		ret = check_out(c->out, parent, f.root);
	if (!ret)
		ret = scan(&f);
	if (ret)
		goto out;
	if (!c->o.writer_options || !c->o.writer_options[0])
		c->o.writer_options = TFDS_WRITER_OPTIONS;
	if (asprintf(&tmp, "%s/.%s.tmp-XXXXXX", parent, base) < 0) {
		tmp = NULL;
		ret = grist_fail(-ENOMEM, "out of memory");
		goto out;
	}
	if (!mkdtemp(tmp)) {
		ret = grist_fail(-errno, "%s: cannot create a folder beside %s: %s", parent, c->out, strerror(errno));
		free(tmp);
		tmp = NULL;
		goto out;
	}
	chmod(tmp, 0755); /* mkdtemp's 0700 would hide the dataset from its readers */
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
	/* An empty folder at OUT gives way; rename() then puts the whole dataset there at once. */
	rmdir(out);
	if (rename(tmp, out) < 0) {
		ret = grist_fail(-errno, "%s: cannot rename %s into place: %s", out, tmp, strerror(errno));
		goto out;
	}
	dfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
	free(tmp);
	tmp = NULL;
	c->out = out;
	grist_convert_report_done(c);
out:
	if (tmp && ret)
		remove_tmp(tmp);
	c->out = out;
	free(tmp);
	free(split_path);
	free(shard_out);
	free(parent);
	free(base);
	free(name);
	free(version);
	folder_free(&f);
	return ret;
}
