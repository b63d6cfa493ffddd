/*
 * The imagefolder input: TFDS's ImageFolder tree, ROOT/<split>/<label>/<image>, listed
 * whole (the labels are the union over all splits), and one split's images as
 * tf.train.Example records (image, image/filename, label), each image decoded once to
 * check it. grist_convert() runs it from the imagefolder driver (imagefolder.c), which
 * hands it the listing.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "grist/features.h"
#include "common/buf.h"
#include "common/error.h"
#include "convert/image_shrink.h"
#include "convert/input.h"
#include "convert/input_imagefolder.h"
#include "features/features_internal.h"

/* A decoded image larger than this is refused rather than allocated (no dataset image comes near). */
#define PIXELS_MAX ((size_t)1 << 30)

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

bool grist_imagefolder_plain_name(const char *s)
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

void grist_imagefolder_free(struct folder *f)
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
int grist_imagefolder_scan(struct folder *f)
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
		if (!grist_imagefolder_plain_name(sp->name)) {
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
	uint32_t w, h, c;           /* of the image check_image() decoded into pixels */
	struct gc_shrink shrink;    /* max_side: the resize and the JPEG encoder, kept between images */
};

static void if_close(struct grist_input *in)
{
	struct folder_input *fi = in->priv;

	if (!fi)
		return;
	grist_example_encoder_destroy(fi->enc);
	gc_shrink_free(&fi->shrink);
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
	fi->w = img.width;
	fi->h = img.height;
	fi->c = img.channels;
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

/* max_side: the decoded image (fi->pixels) shrunk and re-encoded (image_shrink.c), or *@out NULL. */
static int shrink(struct folder_input *fi, const char *name, const uint8_t **out, size_t *n)
{
	return gc_shrink_pixels(&fi->shrink, fi->pixels, fi->h, fi->w, fi->c, fi->f->max_side, fi->f->jpeg_quality, name,
				out, n);
}

static int if_next(struct grist_input *in, const uint8_t **data, size_t *len)
{
	struct folder_input *fi = in->priv;
	const struct split *sp = fi->f->cur;
	const struct image_file *im;
	const uint8_t *image;
	size_t n, image_len;
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
	if (!ret)
		ret = shrink(fi, fi->full, &image, &image_len);
	if (ret)
		return ret;
	if (image) {
		fi->f->resized++;
	} else {
		image = fi->buf;
		image_len = n;
	}
	fi->f->bytes_in += n;
	fi->f->bytes_out += image_len;
	label = im->label;
	grist_example_begin(fi->enc);
	grist_example_add_bytes(fi->enc, "image", image, (const uint64_t[]){ 0, image_len }, 1);
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
