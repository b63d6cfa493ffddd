"""grist.vision: image transforms that run in C on the loader's decode threads (grist/vision.h).

    loader = grist.Loader(grist.tfds.data_source("imagenet2012", split="train"), 256, seed=0,
                          transforms={"image": grist.vision.RandomResizedCrop(
                              224, flip=0.5, mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))},
                          boxes=True)

gives batches whose "image" is (256, 224, 224, 3) float32 whatever size each JPEG has, and
"image_box" int32 (256, 5): top, left, height, width (source pixels) and flipped. Every
draw comes from a generator keyed by (seed, epoch, record index, feature key), so
``transform.params(h, w, seed=, epoch=, index=, feature=)`` tells the box the loader uses.
"""
import collections

from . import _grist

__all__ = ["Box", "RandomResizedCrop", "CenterCrop", "Resize"]

Box = collections.namedtuple("Box", "top left height width flipped")
Box.__doc__ = """Box(top, left, height, width, flipped): where a transformed image comes from.

top, left: the crop's first row and column in source pixels; height, width: its size in
source pixels; flipped: 1 when the output was flipped horizontally, else 0.
"""

_OPS = {"random_resized_crop": 1, "center_crop": 2, "resize": 3}
_INTERP = {"bilinear": 0, "bicubic": 1, "area": 2}
_INTERP_TF = {"bilinear": 3, "bicubic": 4}  # antialias=False: TF's kernels
_DTYPES = {"uint8": 1, "float16": 9, "float32": 10, "bfloat16": 13}


def _np_dtype(name):
    """numpy's dtype for @name; bfloat16 is ml_dtypes' (what JAX uses)."""
    import numpy as np

    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)
_LAYOUTS = {"HWC": 0, "CHW": 1}
_DECODES = {"exact": 0, "fast": 1}
_SAMPLERS = {"torchvision": 0, "tf": 1, "dali": 2}


def _size(size):
    if isinstance(size, int):
        return (size, size)
    h, w = size
    return (int(h), int(w))


class _Transform:
    """What the three transforms share: the output's options, params() and apply()."""

    _op = None

    def __init__(self, size, interpolation="bilinear", flip=0.0, mean=None, std=None, dtype=None, layout="HWC",
                 channels=3, decode="exact", exif_orientation=False, max_pixels=None, scan_limit=None,
                 antialias=True, exact_resize=False):
        self.size = _size(size)
        self.exact_resize = bool(exact_resize)
        if decode not in _DECODES:
            raise ValueError("decode must be 'exact' or 'fast', not %r" % (decode,))
        self.decode = decode
        self.exif_orientation = bool(exif_orientation)
        if channels not in (1, 3):
            raise ValueError("channels must be 1 or 3, not %r" % (channels,))
        self.channels = int(channels)
        if interpolation not in _INTERP:
            raise ValueError("interpolation must be 'bilinear', 'bicubic' or 'area', not %r" % (interpolation,))
        self.antialias = bool(antialias)
        if not self.antialias and interpolation not in _INTERP_TF:
            raise ValueError("antialias=False is TF's bilinear or bicubic resize, not %r" % (interpolation,))
        if (mean is None) != (std is None):
            raise ValueError("mean and std go together")
        if dtype is None:
            dtype = "float32" if mean is not None else "uint8"
        dtype = getattr(dtype, "name", dtype)
        if dtype not in _DTYPES:
            raise ValueError("dtype must be uint8, float16, bfloat16 or float32, not %r" % (dtype,))
        if layout not in _LAYOUTS:
            raise ValueError("layout must be 'HWC' or 'CHW', not %r" % (layout,))
        self.interpolation = interpolation
        self.flip = float(flip)
        self.mean = tuple(float(v) for v in mean) if mean is not None else None
        self.std = tuple(float(v) for v in std) if std is not None else None
        if self.mean is not None and (len(self.mean) != self.channels or len(self.std) != self.channels):
            raise ValueError("mean and std need %d values (one per channel)" % self.channels)
        self.dtype = dtype
        self.layout = layout
        self.max_pixels = max_pixels
        self.scan_limit = scan_limit

    def _spec(self):
        interp = _INTERP[self.interpolation] if self.antialias else _INTERP_TF[self.interpolation]
        d = {"op": _OPS[self._op], "out": self.size, "interp": interp, "flip": self.flip,
             "mean": self.mean, "std": self.std, "dtype": _DTYPES[self.dtype], "layout": _LAYOUTS[self.layout],
             "max_pixels": self.max_pixels, "scan_limit": self.scan_limit, "channels": self.channels,
             "decode": _DECODES[self.decode], "exif_orientation": self.exif_orientation,
             "exact_resize": getattr(self, "exact_resize", False)}  # pickles from before the keyword
        if self.mean is not None and self.channels == 1:  # the C struct holds three
            d["mean"], d["std"] = self.mean * 3, self.std * 3
        d.update(self._extra())
        return d

    def _extra(self):
        return {}

    @property
    def shape(self):
        """The shape of one output image: (h, w, channels), or (channels, h, w) for layout "CHW"."""
        h, w = self.size
        return (h, w, self.channels) if self.layout == "HWC" else (self.channels, h, w)

    def params(self, height, width, seed=0, epoch=0, index=0, feature="image"):
        """The Box this transform gives a height x width image (as displayed, with
        exif_orientation): what the loader uses, without decoding anything.

        Keywords: seed, the loader's seed (default 0); epoch, counted from 0 as batch.epoch
        (default 0); index, the record's index within its dataset (default 0); feature, the
        feature's key (default "image").
        """
        return Box(*_grist.vision_box(self._spec(), height, width, seed, epoch, index, feature))

    def apply(self, image, seed=0, epoch=0, index=0, feature="image"):
        """Decode one PNG or JPEG (bytes) and transform it as the loader would: returns
        (numpy array of ``shape`` and ``dtype``, Box). Keywords seed, epoch, index, feature
        as params() (defaults 0, 0, 0, "image")."""
        import numpy as np

        data, box = _grist.vision_apply(self._spec(), bytes(image), seed, epoch, index, feature)
        return np.frombuffer(data, _np_dtype(self.dtype)).reshape(self.shape), Box(*box)

    def _repr_args(self):
        return []

    def __repr__(self):
        args = ["size=%r" % (self.size,)] + self._repr_args()
        args += ["interpolation=%r" % self.interpolation, "flip=%r" % self.flip]
        if not self.antialias:
            args.append("antialias=False")
        if self.mean is not None:
            args += ["mean=%r" % (self.mean,), "std=%r" % (self.std,)]
        args += ["dtype=%r" % self.dtype, "layout=%r" % self.layout]
        if self.channels != 3:
            args.append("channels=%r" % self.channels)
        if self.decode != "exact":
            args.append("decode=%r" % self.decode)
        if self.exif_orientation:
            args.append("exif_orientation=True")
        if getattr(self, "exact_resize", False):
            args.append("exact_resize=True")
        return "grist.vision.%s(%s)" % (type(self).__name__, ", ".join(args))

    def __eq__(self, other):
        return type(self) is type(other) and self.__dict__ == other.__dict__

    def __hash__(self):
        return hash(repr(self))


class RandomResizedCrop(_Transform):
    """torchvision's RandomResizedCrop, in C, with the flip and normalization fused.

    Keywords:
      size: output side (int) or (height, width).
      scale: range of the crop's area as a fraction of the image's; default (0.08, 1.0).
      ratio: range of the crop's aspect (width / height), drawn log-uniform; default (3/4, 4/3),
        that is (0.75, 1.3333333333333333).
      sampler: "torchvision" (default: RandomResizedCrop.get_params), "tf" (TF's
        sample_distorted_bounding_box on the whole image, aspect uniform, then the Cloud TPU
        ResNet recipe's fallback to a centre crop of 224/256 where the box is the whole image) or
        "dali" (DALI's RandomCropGenerator: float32, rounding half away from zero, its early
        exits for too wide or too tall images, and a whole-image fallback clamped into ratio
        and scale, placed at a random offset).
      min_object_covered: sampler "tf": the crop's least share of the image; default 0.1.
      interpolation: "bilinear" (default) or "bicubic", Pillow's antialiased filters, or "area",
        OpenCV's INTER_AREA (FFCV's; within a level of cv2.resize).
      antialias: True (default: Pillow's filters, widened on a downscale) or False: TF's
        tf.image.resize(..., antialias=False) for "bilinear" or "bicubic" (a fixed 2- or 4-tap
        kernel, half-pixel centres, float32 rounded to the nearest level).
      flip: probability of a horizontal flip, drawn from the same stream; default 0.0.
      mean, std: per-channel, on the 0-1 scale: out = (pixel / 255 - mean) / std (torchvision's
        ToTensor + Normalize); default None (no normalization).
      dtype: "uint8", "float16", "bfloat16" (ml_dtypes.bfloat16, as JAX uses) or "float32";
        default uint8, or float32 with mean/std. A float output without mean/std is pixel / 255;
        float16 and bfloat16 are the float32 value rounded to nearest even.
      layout: "HWC" (default) or "CHW".
      channels: 3 (default; gray and CMYK images become RGB) or 1 (Pillow's convert("L")).
      decode: "exact" (default: a full decode's pixels) or "fast" (JPEG decoded at 1/2, 1/4
        or 1/8 scale where the crop stays at least the output size, fast IDCT, plain
        upsampling; docs/vision.md gives its PSNR against exact).
      exif_orientation: turn a JPEG as its EXIF orientation says (Pillow's
        ImageOps.exif_transpose); boxes are then in the turned image; default False.
      max_pixels: images with more pixels are refused before decoding; default None (2^28).
      scan_limit: the most scans a progressive JPEG may have; default None (500).
      exact_resize: "bilinear" and "bicubic" with Pillow's 22-bit weights in both passes, the
        bytes of Pillow's Image.resize exactly; default False: the horizontal pass's weights
        in 15 bits, one 16-bit multiply per tap, within 1 level of Pillow (about 1 value in
        1,000 differs, by 1) and faster (docs/vision.md, "Resize").

    The box follows torchvision's get_params exactly (10 attempts, Python's rounding, the
    clamped centre fallback); the uniforms come from grist's own generator, keyed per record.
    """

    _op = "random_resized_crop"

    def __init__(self, size, scale=(0.08, 1.0), ratio=(3.0 / 4.0, 4.0 / 3.0), sampler="torchvision",
                 min_object_covered=0.1, **kw):
        super().__init__(size, **kw)
        if sampler not in _SAMPLERS:
            raise ValueError("sampler must be 'torchvision', 'tf' or 'dali', not %r" % (sampler,))
        self.scale = (float(scale[0]), float(scale[1]))
        self.ratio = (float(ratio[0]), float(ratio[1]))
        self.sampler = sampler
        self.min_object_covered = float(min_object_covered)

    def _extra(self):
        return {"scale": self.scale, "ratio": self.ratio, "sampler": _SAMPLERS[self.sampler],
                "min_object_covered": self.min_object_covered}

    def _repr_args(self):
        args = ["scale=%r" % (self.scale,), "ratio=%r" % (self.ratio,)]
        if self.sampler == "tf":
            args += ["sampler=%r" % self.sampler, "min_object_covered=%r" % self.min_object_covered]
        elif self.sampler != "torchvision":
            args.append("sampler=%r" % self.sampler)
        return args


class CenterCrop(_Transform):
    """The evaluation crop, in one of two conventions.

    Keywords:
      size: output side (int) or (height, width).
      resize: torchvision's Resize(resize) first (the shorter side to ``resize``, the longer
        one truncated), then a centred ``size`` crop at torchvision's offsets (round half to
        even); default 256. Ignored when crop_fraction is given.
      crop_fraction: the TF/TPU form instead: a centred square of side int(crop_fraction x
        shorter side) at ((H - c) + 1) // 2, resized to ``size``; default None.
      and interpolation, antialias, flip, mean, std, dtype, layout, channels, decode,
      exif_orientation, max_pixels, scan_limit, exact_resize as RandomResizedCrop (flip
      defaults to 0.0, exact_resize to False).
    """

    _op = "center_crop"

    def __init__(self, size, resize=256, crop_fraction=None, **kw):
        super().__init__(size, **kw)
        self.resize = int(resize)
        self.crop_fraction = None if crop_fraction is None else float(crop_fraction)

    def _extra(self):
        return {"resize": self.resize, "crop_fraction": self.crop_fraction}

    def _repr_args(self):
        if self.crop_fraction is not None:
            return ["crop_fraction=%r" % self.crop_fraction]
        return ["resize=%r" % self.resize]


class Resize(_Transform):
    """The whole image resized to ``size`` (int: square; or (height, width)), no crop.

    Keywords: size, and interpolation, antialias, flip, mean, std, dtype, layout, channels,
    decode, exif_orientation, max_pixels, scan_limit, exact_resize as RandomResizedCrop (each
    keyword only, with its default).
    """

    _op = "resize"

    def __init__(self, size, **kw):
        super().__init__(size, **kw)
