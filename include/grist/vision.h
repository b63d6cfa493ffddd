/*
 * grist/vision.h - training-time image transforms, run where an image feature is decoded.
 *
 * A vision dataset stores images of every size; a training step wants one shape. A
 * transform attached to an image feature of a features spec (grist/features.h) turns
 * each record's image into the column's fixed shape on the loader's decode threads,
 * straight into the batch slot:
 *
 *   JPEG bytes --region decode--> the crop's pixels --resize--> out_h x out_w
 *        --flip--> --normalize--> dtype (uint8 / float32) --> HWC or CHW in the row
 *
 * Ops (enum grist_vision_op):
 *   RANDOM_RESIZED_CROP  torchvision's RandomResizedCrop.get_params, exactly: 10 attempts,
 *                        area uniform in scale x H x W, aspect log-uniform in ratio,
 *                        w = round(sqrt(area x aspect)), h = round(sqrt(area / aspect)) with
 *                        Python's round (half to even), offsets uniform over every place
 *                        the box fits, and after 10 misses the centre crop whose aspect
 *                        is clamped into ratio at ((H - h) // 2, (W - w) // 2).
 *                        With sampler TF instead: tf.image.sample_distorted_bounding_box on
 *                        the whole image (TF's kernel, line for line, in float32: aspect
 *                        uniform in ratio, the height uniform among the integers that keep
 *                        the area in scale, width = lrintf(height x aspect), offsets uniform
 *                        in [0, H - h), min_object_covered), and where that gives the whole
 *                        image (its own fallback after 10 misses included) the Cloud TPU
 *                        ResNet recipe's centre crop of crop_fraction (0: 224/256).
 *   CENTER_CROP          evaluation: with resize > 0, torchvision's Resize(resize) (the
 *                        shorter side to resize, the longer one int(resize x long /
 *                        short), truncated) then CenterCrop(out) at round((H' - out) / 2)
 *                        (half to even); the box reported is that crop mapped back to the
 *                        source. With crop_fraction > 0 instead (the TF/TPU form): a centred
 *                        square of side int(crop_fraction x shorter side) at ((H - c) + 1) // 2,
 *                        resized to out.
 *   RESIZE               the whole image to out_h x out_w, no crop.
 *
 * Channels: 3 (RGB) or 1 (Pillow's convert("L") of the RGB pixels: ITU-R 601-2 luma in
 * Pillow's fixed point, (R x 19595 + G x 38470 + B x 7471 + 32768) >> 16; a gray image's
 * own values).
 *
 * Resizing is Pillow's (Image.resize, reducing_gap=None): separable, the filter's
 * support widened by the downscale factor (antialiased), bilinear (triangle) or bicubic
 * (a = -0.5), with Pillow's coefficients and a uint8 intermediate. By default the
 * horizontal pass's weights are rounded to 15 bits (14 where one is 1), not Pillow's 22,
 * which halves that pass's multiplies: within 1 level of Pillow's result (the issue's
 * tolerance; about 1 value in 1,000 differs, by 1). exact_resize keeps Pillow's 22 bits in
 * both passes: its result equal to Pillow's to the level. A crop is resized as Pillow resizes the cropped
 * image (the filter clamps at the crop's edges), which is what torchvision's
 * resized_crop does on a PIL image. BILINEAR_TF and BICUBIC_TF are TF's
 * tf.image.resize(..., antialias=False) instead (ResizeBilinear / ResizeBicubic with
 * half-pixel centres, float32, rounded to the nearest level): a fixed 2- or 4-tap kernel.
 *
 * Determinism. Every draw (the box, the flip) comes from a counter-based generator keyed
 * by (seed, epoch, record index within its dataset, feature key): the same pixels at any
 * thread count, engine or after a resume, and grist_vision_box() tells anyone the box a
 * record gets without decoding it.
 *
 * JPEG is decoded through the libjpeg API: only the crop's rows (jpeg_skip_scanlines)
 * and its iMCU columns (jpeg_crop_scanline) with a margin, accurate integer IDCT and fancy
 * upsampling; the pixels equal a full decode then crop. Grayscale becomes RGB (copied),
 * CMYK and YCCK become RGB as Pillow's convert("RGB") makes them (inverted first when the
 * file has an Adobe marker). PNG is decoded row by row up to the crop's last row, keeping
 * only the crop's rows; a 16-bit PNG becomes 8 bits as Pillow's convert("RGB") makes it
 * (the high byte; a gray file clipped at 255).
 *
 * Fast mode (decode = GRIST_VISION_DECODE_FAST) trades fidelity for speed, as TF's and
 * FFCV's decoders do: the JPEG is decoded at the smallest of 1/8, 1/4, 1/2 or 1 scale at
 * which the crop is still at least the output size (libjpeg's reduced IDCTs), with the
 * fast integer IDCT and without fancy upsampling; the crop is the box rounded outward to
 * the scaled grid. docs/vision.md gives its measured PSNR against exact mode.
 *
 * Limits. The header is checked before anything is allocated: an image larger than
 * max_pixels is refused (-EFBIG), as is a progressive JPEG with more than scan_limit
 * scans (a hostile file of thousands of scans would cost minutes). A resize whose
 * weight table would pass 2^22 weights on an axis (a downscaled region longer than about
 * a million pixels bicubic, two million bilinear) and a CenterCrop whose resized long side would pass 2^31 pixels are
 * refused (-EFBIG) too: docs/vision.md.
 *
 * Why a sized struct (openat2's struct open_how): a transform is a fixed set of numbers
 * that grows by appending; set .size with grist_vision_transform_init(), which also sets
 * every default, and an older library zero-extends what it does not know.
 */
#ifndef GRIST_VISION_H
#define GRIST_VISION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grist/error.h"
#include "grist/features.h"

#ifdef __cplusplus
extern "C" {
#endif

enum grist_vision_op {
	GRIST_VISION_NONE = 0,            /* no transform: the feature decodes as before */
	GRIST_VISION_RANDOM_RESIZED_CROP,
	GRIST_VISION_CENTER_CROP,
	GRIST_VISION_RESIZE,
};

/* Which peer's RandomResizedCrop box sampler. */
enum grist_vision_sampler {
	GRIST_VISION_SAMPLER_TORCHVISION = 0, /* RandomResizedCrop.get_params */
	GRIST_VISION_SAMPLER_TF,              /* sample_distorted_bounding_box (whole-image bbox), then the
						 Cloud TPU ResNet fallback to the centre crop */
	GRIST_VISION_SAMPLER_DALI,            /* DALI's RandomCropGenerator: float32, roundf, its early exits,
						 the clamped whole-image fallback at a random offset */
};

enum grist_vision_interp {
	GRIST_VISION_BILINEAR = 0,        /* Pillow's BILINEAR (triangle filter, antialiased) */
	GRIST_VISION_BICUBIC,             /* Pillow's BICUBIC (a = -0.5, antialiased) */
	GRIST_VISION_AREA,                /* OpenCV's INTER_AREA (FFCV's): box average shrinking, within a level */
	GRIST_VISION_BILINEAR_TF,         /* tf.image.resize(bilinear, antialias=False): TF's 2-tap kernel,
					     half-pixel centres, float32, rounded to nearest */
	GRIST_VISION_BICUBIC_TF,          /* tf.image.resize(bicubic, antialias=False): Keys a = -0.5, 4 taps */
};

/* How a JPEG is decoded. */
enum grist_vision_decode {
	GRIST_VISION_DECODE_EXACT = 0,    /* accurate IDCT, fancy upsampling: a full decode's pixels */
	GRIST_VISION_DECODE_FAST,         /* DCT scaling by 1/2, 1/4 or 1/8 where the crop stays at least
					     the output size, the fast IDCT, plain upsampling */
};

enum grist_vision_layout {
	GRIST_VISION_HWC = 0,
	GRIST_VISION_CHW,
};

/** A transform. grist_vision_transform_init() it; zero fields read as their default. */
struct grist_vision_transform {
	size_t size;                      /* sizeof(struct grist_vision_transform), set by _init() */
	enum grist_vision_op op;
	uint32_t out_height, out_width;   /* the output image, > 0 */
	double scale[2];                  /* RANDOM_RESIZED_CROP: area fraction range; {0, 0}: {0.08, 1.0} */
	double ratio[2];                  /* RANDOM_RESIZED_CROP: aspect (w / h) range; {0, 0}: {3/4, 4/3} */
	enum grist_vision_interp interp;
	uint32_t resize;                  /* CENTER_CROP: the shorter side before the crop (torchvision) */
	double crop_fraction;             /* CENTER_CROP: > 0 for the TF form (resize then unused) */
	double flip;                      /* probability of a horizontal flip, 0 to 1 */
	bool normalize;                   /* out = (pixel / 255 - mean) / std, per channel */
	float mean[3], std[3];
	enum grist_dtype dtype;           /* GRIST_DTYPE_UINT8, FLOAT32, FLOAT16 or BFLOAT16 (floats rounded
					     to nearest even from float32); 0: UINT8 (FLOAT32 with normalize) */
	enum grist_vision_layout layout;
	uint64_t seed;                    /* the generator's key (the loader's seed) */
	uint64_t max_pixels;              /* images with more pixels are refused; 0: 2^28 (268 Mpx) */
	uint32_t scan_limit;              /* progressive JPEG scans allowed; 0: 500 (TurboJPEG's) */
	uint32_t channels;                /* 3 (RGB) or 1 (Pillow's "L"); 0: 3 */
	enum grist_vision_decode decode;  /* JPEG: EXACT (default) or FAST */
	bool exif_orientation;            /* JPEG: turn the image as its EXIF orientation says, as
					     Pillow's ImageOps.exif_transpose; default off (TFDS and
					     torchvision's ImageNet recipes do not) */
	enum grist_vision_sampler sampler; /* RANDOM_RESIZED_CROP: TORCHVISION (default), TF or DALI */
	double min_object_covered;        /* SAMPLER_TF: the crop's least share of the image; 0: 0.1 */
	bool exact_resize;                /* BILINEAR, BICUBIC: Pillow's 22-bit weights in both passes, its
					     bytes exactly; default off: 15-bit horizontal weights, within
					     1 level of Pillow and faster (see Resizing above) */
};

/** grist_vision_transform_init() - zero @t, set its size and the defaults of the fields. */
static inline void grist_vision_transform_init(struct grist_vision_transform *t)
{
	*t = (struct grist_vision_transform){
		.size = sizeof(*t),
		.scale = { 0.08, 1.0 },
		.ratio = { 3.0 / 4.0, 4.0 / 3.0 },
		.std = { 1.0f, 1.0f, 1.0f },
	};
}

/** Where a record's output comes from: the crop in source pixels, and whether it was flipped. */
struct grist_vision_box {
	int32_t top, left, height, width;
	int32_t flipped;                  /* 0 or 1 */
};

/**
 * grist_vision_box() - the box and flip @t gives a @height x @width image of record @index
 * (within its dataset) in @epoch, for the feature named @key (the same as the loader's).
 * Return: 0, or -EINVAL (a bad transform, a zero size).
 */
GRIST_API int grist_vision_box(const struct grist_vision_transform *t, uint32_t height, uint32_t width,
			       uint64_t epoch, uint64_t index, const char *key, struct grist_vision_box *box);

/**
 * grist_vision_out_bytes() - the bytes one transformed image takes: out_h x out_w x channels
 * x the dtype's size; 0 for a bad transform.
 */
GRIST_API size_t grist_vision_out_bytes(const struct grist_vision_transform *t);

/**
 * grist_vision_apply() - decode one PNG or JPEG (told by its bytes) and transform it.
 * @out:   grist_vision_out_bytes() bytes (@cap), in the transform's dtype and layout.
 * @box:   NULL, or set to the box used.
 * Return: 0, -EINVAL (bad transform, short @cap), -EBADMSG (not a valid image), -ENOTSUP (a PNG
 * of 1, 2 or 4 bits),
 * -EFBIG (over max_pixels or scan_limit), -ENOMEM; with a message.
 * Thread-safety: any number of threads at once (per-thread decoder state).
 */
GRIST_API int grist_vision_apply(const struct grist_vision_transform *t, const uint8_t *img, size_t len,
				 uint64_t epoch, uint64_t index, const char *key, void *out, size_t cap,
				 struct grist_vision_box *box);

/**
 * grist_features_set_transform() - attach @t to image feature @i (decode PNG, JPEG or
 * IMAGE, shape (H, W, C) with H and W fixed or -1, any varlen mode) before finish. Its
 * column becomes (out_h, out_w, C) (HWC) or (C, out_h, out_w) (CHW), C the transform's
 * channels, of the transform's
 * dtype, the same for every record; with @boxes, an int32[5] column of the record's
 * box follows it (grist_feature_column().box_offset).
 * Return: 0, or -EINVAL naming the feature (not an image, a bad transform, a finished spec),
 * -E2BIG (a newer caller's struct with options this library does not know).
 */
GRIST_API int grist_features_set_transform(struct grist_features *f, size_t i, const struct grist_vision_transform *t,
					   bool boxes);

#ifdef __cplusplus
}
#endif
#endif
