/* The remote backend's shared parts: options, credentials, opening objects, one GET's life. */
#ifndef GRIST_IO_REMOTE_H
#define GRIST_IO_REMOTE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <curl/curl.h>

#include "common/buf.h"
#include "grist/remote.h"
#include "io/http_fields.h"
#include "io/io.h"
#include "io/url.h"

/*
 * The options' defaults, once: grist_remote_options_init() sets them and the loader's option
 * table shows them (remote_*) to every front end. Plain numbers, so the table can print them.
 */
#define GRIST_REMOTE_DEFAULT_CONNECT_TIMEOUT_MS 5000
#define GRIST_REMOTE_DEFAULT_TIMEOUT_MS 30000
#define GRIST_REMOTE_DEFAULT_RETRIES 5
#define GRIST_REMOTE_DEFAULT_BACKOFF_MS 100
#define GRIST_REMOTE_DEFAULT_BACKOFF_MAX_MS 5000
#define GRIST_REMOTE_DEFAULT_COALESCE_MIB 1
#define GRIST_REMOTE_DEFAULT_SPLIT_MIB 8
#define GRIST_REMOTE_DEFAULT_INFLIGHT 64
#define GRIST_REMOTE_DEFAULT_INFLIGHT_MIN 2
#define GRIST_REMOTE_DEFAULT_REDIRECTS 5
#define GRIST_REMOTE_DEFAULT_PART_MIB 16
#define GRIST_REMOTE_DEFAULT_UPLOAD_INFLIGHT 4

/* a GET slower than this for timeout_ms has stalled; none lasts more than STALL_CAP x timeout_ms */
#define STALL_BYTES_PER_S 1024
#define STALL_CAP 10

/*
 * Counters that several io objects (one per engine thread) add to with relaxed atomics,
 * and a stats call reads while they run. Latency is a histogram of 8 buckets per power
 * of two of microseconds, so p50/p99 cost no allocation and no lock.
 */
#define GRIST_REMOTE_LAT_BUCKETS 320
struct grist_remote_counters {
	uint64_t requests;
	uint64_t bytes;
	uint64_t errors;
	uint64_t retries[GRIST_REMOTE_RETRY_CAUSES];
	uint64_t inflight_area; /* GETs in flight x ns, summed */
	uint64_t inflight_span; /* ns over which the area was taken */
	uint64_t inflight_max;
	uint64_t inflight_bytes_area; /* KiB in flight x ns, summed over the same span */
	uint64_t ahead_bytes_area;    /* KiB waiting for the budget x ns */
	uint64_t budget_sum;    /* the live io objects' budgets, summed (each adds its changes) */
	uint64_t budget_max;
	uint64_t rtt_ns;        /* the last measured by any io object */
	uint64_t bandwidth;     /* bytes/s, likewise */
	uint64_t latency[GRIST_REMOTE_LAT_BUCKETS];
};

struct grist_remote_xfer;
/*
 * Count one ended attempt of @x into @c (every GET the server saw counts, by whichever
 * path sent it): the request, its body bytes, its time to @now, and @retried's cause.
 */
void grist_remote_counters_add_get(struct grist_remote_counters *c, const struct grist_remote_xfer *x,
				   bool retried, uint64_t now);
void grist_remote_counters_read(const struct grist_remote_counters *c, struct grist_remote_stats *st,
				struct grist_remote_budget_stats *bs);
/* Add @from's counts to @to (both may be live: relaxed atomic reads and adds). */
void grist_remote_counters_merge(struct grist_remote_counters *to, const struct grist_remote_counters *from);
/* Add the GETs that opened @o (if a URL, else nothing) to @to: a reader's stats count them. */
void grist_remote_count_opening(struct grist_remote_counters *to, const struct grist_remote_object *o);

/*
 * grist_remote_open() - open @url: one GET of its last 64 KiB, which gives its size,
 * its ETag and those bytes. Return: 0, or an error naming the URL and the status.
 */
int grist_remote_open(const char *url, struct grist_remote_object **out);

/* One stretch of an object to read, and where its bytes go. */
struct grist_remote_range {
	uint64_t off, len;
	uint8_t *dst;
};

/*
 * Called by grist_remote_open_many() when @urls[@i] is open (@o's size, ETag and tail
 * known; @o is lent, not given), on the opening thread. It may set *@more (zeroed) to a
 * range of @o to read before the open ends: a dataset's footer, read at once, on the
 * connection the opening GET used. Return: 0, or an error (grist_fail) that ends the batch.
 */
typedef int grist_remote_opened_fn(void *ud, size_t i, struct grist_remote_object *o,
				   struct grist_remote_range *more);

/*
 * grist_remote_open_many() - open @n URLs as grist_remote_open() does, their GETs at once
 * on the calling thread (at most `inflight` in flight), each followed by the range @then
 * (or NULL) asks of it. Return: 0 with @out[i] for @urls[i], or the first error met
 * (naming its URL) with every @out NULL: none is left open.
 */
int grist_remote_open_many(const char *const *urls, size_t n, struct grist_remote_object **out,
			   grist_remote_opened_fn *then, void *ud);

/* Where one stretch of a GET's body goes. */
struct grist_remote_seg {
	uint64_t off;  /* object offset of the first byte */
	uint64_t len;
	uint8_t *buf;
};

enum grist_remote_outcome {
	GRIST_REMOTE_DONE,  /* x->error is 0 or the final error (message in x->msg) */
	GRIST_REMOTE_RETRY, /* wait x->delay_ns and start again; x->cause says why */
};

/*
 * One GET through its attempts: a ranged read of an object into segments, or a
 * request whose body is kept (the opening GET, listings). The caller owns the easy
 * handle's place in a multi; these calls only set it up and judge its outcome.
 */
struct grist_remote_xfer {
	CURL *easy;
	struct grist_remote_object *obj; /* NULL for a listing */
	const struct grist_url *u;       /* obj->u, or the listing's */
	const char *display;             /* the URL in messages */
	/* redirects (redirect.c): the object whose resolved URL the GETs use and learn (obj if NULL) */
	struct grist_remote_object *dest;
	const struct grist_url *at;      /* this attempt's URL: u, dest's target, or a hop */
	bool at_target;                  /* at is dest's target: it worked before */
	bool from_origin;                /* the target expired: start again from u */
	unsigned hops;                   /* redirects followed since u */
	struct grist_remote_target *hop; /* the hops followed since u, the last first (owned) */
	char location[4096];             /* the last answer's Location; "" when none */
	bool location_long;              /* it did not fit */
	/* the request */
	const char *method;              /* NULL: GET; PUT, POST, DELETE for writes (upload.c) */
	const uint8_t *body;             /* a PUT's or POST's body, body_len bytes */
	size_t body_len;
	const char *content_md5;         /* base64 MD5 of the body, sent (and signed) as Content-MD5, or NULL */
	const int *cancel;               /* non-NULL: the attempt stops once *cancel is nonzero (atomic) */
	uint64_t deadline_ns;            /* 0, or the grist_remote_now_ns() by which the transfer ends,
					    its attempts cut short and no retry started past it */
	const struct grist_sigv4_pair *query; /* listing parameters (raw), else NULL */
	size_t nquery;
	bool suffix;                     /* Range: bytes=-len (the opening GET) */
	uint64_t off, len;               /* the range (len 0 with !suffix: no Range header) */
	const struct grist_remote_seg *segs; /* sorted, inside [off, off + len) */
	unsigned nsegs;
	struct grist_buf *keep;          /* keep the body here (at most keep_max bytes) */
	size_t keep_max;
	const struct grist_remote_options *opt;
	struct grist_remote_counters *ctr; /* NULL, or where grist_remote_xfers_run() counts its attempts */
	/* per attempt */
	unsigned attempt;
	uint64_t start_ns;
	long status;
	bool has_range;                  /* a Content-Range with a range: cr.first-cr.last */
	bool cr_bad;                     /* a Content-Range that is not RFC 9110's */
	struct grist_http_content_range cr; /* the Content-Range as parsed; zero when none or bad */
	char cr_text[96];                /* the Content-Range as sent, quotable; "" when none */
	char etag[256];
	long retry_after_s;
	uint64_t got;                    /* body bytes so far */
	uint64_t first_ns;               /* when the body's first bytes came (0: not yet) */
	uint64_t base;                   /* object offset of the body's first byte */
	unsigned seg_at;
	bool body_started;
	char bad[256];                   /* a body the write callback refused, and why */
	int bad_code;
	struct grist_buf errbody;        /* a refusal's body (service error code), bounded */
	struct curl_slist *headers;
	struct grist_buf url;            /* this attempt's URL, as sent (setup) */
	const char *target;              /* its path and query, inside url: the request line's */
	bool direct;                     /* this attempt goes by sched_direct.c, not libcurl: status is its own */
	char curl_err[CURL_ERROR_SIZE];  /* why the transport failed (curl's words, or the direct path's) */
	uint64_t rng;
	/* outcome */
	int error;
	int cause;
	uint64_t delay_ns;
	char msg[512];
};

/*
 * The direct receive path's hooks into one GET's rules (sched_direct.c reads the socket;
 * these judge what it read, as libcurl's callbacks do for curl's):
 * grist_remote_header() takes one line of the head (CRLF included), the status line too;
 * grist_remote_body() takes body bytes read into other memory (copied where they go; 0 and
 * x->bad set when refused); grist_remote_body_begin() judges the head once it is whole,
 * before any body byte (false and x->bad set when refused); grist_remote_body_iov() says
 * where the next body bytes of a 2xx answer go, at most @limit of them in at most @max
 * pieces: the segments' buffers in order, a gap between segments into @scratch (at most
 * @scratch_len bytes a piece), 0 pieces when the answer is not a 2xx body or the range is
 * done; grist_remote_body_landed() counts @len bytes received straight into @dst (one
 * such piece, in order) and copies them to any other segment that overlaps them.
 */
void grist_remote_header(struct grist_remote_xfer *x, const char *line, size_t len);
size_t grist_remote_body(struct grist_remote_xfer *x, const void *p, size_t len);
bool grist_remote_body_begin(struct grist_remote_xfer *x);
struct iovec;
unsigned grist_remote_body_iov(struct grist_remote_xfer *x, struct iovec *iov, unsigned max, uint64_t limit,
				uint8_t *scratch, size_t scratch_len);
size_t grist_remote_body_landed(struct grist_remote_xfer *x, const uint8_t *dst, size_t len);

/*
 * A URL a redirect led to (redirect.c): parsed, signed only when on the original's host
 * (then it keeps the original's scheme; elsewhere it is plain http(s), no credentials).
 */
struct grist_remote_target {
	struct grist_url u;
	char *text;
	struct grist_remote_target *next;
};

/* The URL @x's next attempt goes to (u, dest's target, or the last hop), and whether it worked before. */
const struct grist_url *grist_redirect_pick(struct grist_remote_xfer *x);
/*
 * @x's answer was a redirect (3xx with a Location): follow it, at most x->opt->redirects
 * times from u, never back to a URL of the chain. Return: 0 (x->at is the next hop), or a
 * final error in x (x->error, x->msg naming the chain) and -1.
 */
int grist_redirect_follow(struct grist_remote_xfer *x);
/* @x's GET at x->at succeeded: publish a hop as dest's target, so later GETs go straight there. */
void grist_redirect_arrived(struct grist_remote_xfer *x);
/* Free @x's hops (an xfer's end). */
void grist_redirect_release(struct grist_remote_xfer *x);
/* Free an object's targets (its last unref). */
void grist_redirect_free_targets(struct grist_remote_target *t);

/* Set up @x's easy handle for its next attempt (signing with the current credentials). 0 or -errno. */
int grist_remote_xfer_setup(struct grist_remote_xfer *x);
/* Judge an attempt that ended with @rc. */
enum grist_remote_outcome grist_remote_xfer_finish(struct grist_remote_xfer *x, CURLcode rc);
/* Free the headers and error body (not the easy handle). */
void grist_remote_xfer_release(struct grist_remote_xfer *x);
/* Run @x to its end on a private multi and easy handle (x->easy NULL on entry and on return; blocking; retries included). 0 or x->error. */
int grist_remote_xfer_run(struct grist_remote_xfer *x);

/*
 * Run @n transfers to their ends on one private multi handle, at most @bound at once,
 * each retried as its options say (remote_open.c). An easy handle is lent to each while
 * it runs (x->easy). @on_end (or NULL) is told of each end (x->error set or not): 1 when it
 * has set the transfer up for another GET, 0 to take the end as it is, or an error
 * (grist_fail) that ends the batch. Return: 0, or the first failure (a transfer's named by
 * its display) with the others stopped and their handles freed; @what names the batch in
 * other errors.
 */
int grist_remote_xfers_run(struct grist_remote_xfer *const *xs, size_t n, unsigned bound,
			   int (*on_end)(struct grist_remote_xfer *x), const char *what);

/* The region requests to @s are signed for: AWS_REGION, AWS_DEFAULT_REGION, or the default. */
void grist_remote_region(enum grist_url_scheme s, char *out, size_t cap);

/*
 * grist_remote_options_resolve() - @in (a caller's sized struct, possibly older and shorter)
 * over the defaults, checked against the bounds. 0 or -EINVAL naming the bad value.
 */
int grist_remote_options_resolve(const struct grist_remote_options *in, struct grist_remote_options *out);

/* The options in force (process-wide), resolved. */
void grist_remote_options_current(struct grist_remote_options *o);

/* The text of the first <tag>...</tag> in [p, end) as @val/@len; returns the position after it, or NULL. */
const char *grist_xml_next(const char *p, const char *end, const char *tag, const char **val, size_t *len);

/* Decode XML entities (&amp; ... &#34; &#x1F600;) in @s, in place. 0, or -EPROTO for a bad one. */
int grist_xml_unescape(char *s);

/* curl_global_init once for the process. 0 or -ENOMEM. */
int grist_remote_global_init(void);

uint64_t grist_remote_now_ns(void);

extern const struct grist_io_ops grist_io_http_ops;

#endif
