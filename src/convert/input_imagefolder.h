/* The imagefolder input (input_imagefolder.c): TFDS's ImageFolder tree, listed, and its images as records. */
#ifndef GRIST_CONVERT_INPUT_IMAGEFOLDER_H
#define GRIST_CONVERT_INPUT_IMAGEFOLDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/*
 * The tree as listed, handed to the input as grist_input.shared: the driver (imagefolder.c)
 * picks the split being converted and keeps each split's shard lengths and bytes in it; the
 * input records the channel count of the first image it writes.
 */
struct folder {
	const char *root;
	char **labels;        /* sorted, unique */
	size_t nlabels;
	struct split *splits; /* sorted by name */
	size_t nsplits;
	struct split *cur;    /* the split being converted */
	uint32_t channels;    /* of the first image written; 0 before */
	char *first;          /* that image */
	uint32_t max_side;    /* grist_convert_options.max_side: larger images are re-encoded; 0: off */
	int jpeg_quality;     /* of the re-encoding */
	uint64_t resized, bytes_in, bytes_out;  /* images re-encoded; image bytes read and written */
};

/*
 * grist_imagefolder_scan() - list @f->root: its splits, their labels and images (bytewise
 * sorted), and each image's index into the union of all splits' labels. 0 or an error
 * naming the folder; grist_imagefolder_free() frees what it made either way.
 */
int grist_imagefolder_scan(struct folder *f);
void grist_imagefolder_free(struct folder *f);

/* A name TFDS puts in file names (a split, a dataset): letters, digits and '_'. */
bool grist_imagefolder_plain_name(const char *s);

#endif
